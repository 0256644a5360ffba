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


def test_a_declaration_rendered_again_is_not_compiled_again() -> None:
    """Declaring the same model again (tests, models made per request) reuses the code.

    Each compile of a codec costs about half a millisecond, and a model has tens
    of them; the second function still has its own globals.
    """
    source = "def f():\n    return constant\n"
    first = compile_function(source, "f", {"constant": 1}, "<test reuse>")
    second = compile_function(source, "f", {"constant": 2}, "<test reuse>")
    assert second.__code__ is first.__code__
    assert (first(), second()) == (1, 2)
    other = compile_function(source.replace("constant", "other"), "f", {"other": 3},
                             "<test reuse>")
    assert other.__code__ is not first.__code__ and other() == 3
