"""Generated codec functions: compiled once, their source in tracebacks."""

from __future__ import annotations

import traceback

import pytest

from tsmodel.layouts._source import compile_function, rendered


def test_a_generated_function_shows_its_own_lines_in_a_traceback() -> None:
    source = "def boom(x):\n    y = x + 1\n    raise ValueError(f'bad {y}')\n"
    boom = compile_function(source, "boom", {}, "<tsmodel codec Test.T boom>")
    with pytest.raises(ValueError) as info:
        boom(1)
    text = "".join(traceback.format_exception(info.value))
    assert "<tsmodel codec Test.T boom>" in text
    assert "raise ValueError(f'bad {y}')" in text
    assert rendered(boom) == source


def test_two_sources_under_one_name_keep_both_readable() -> None:
    one = compile_function("def f():\n    return 1\n", "f", {}, "<tsmodel codec Same>")
    two = compile_function("def f():\n    return 2\n", "f", {}, "<tsmodel codec Same>")
    assert (one(), two()) == (1, 2)
    assert one.__code__.co_filename != two.__code__.co_filename
    assert "return 2" in rendered(two) and "return 1" in rendered(one)


def test_namespace_is_what_the_function_sees() -> None:
    f = compile_function("def f():\n    return K * 2\n", "f", {"K": 21}, "<tsmodel codec K>")
    assert f() == 42


def test_a_hand_written_function_has_no_rendered_source() -> None:
    with pytest.raises(TypeError, match="not a generated tsmodel codec"):
        rendered(len)
