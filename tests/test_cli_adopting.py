"""The ``console`` blocks of docs/adopting.md print what they show.

Each ``$ tsmodel ...`` line runs in a new process from the repository root,
so that ``examples/adopted_tables.py`` names the models of the page, and
what it prints (standard output, then standard error) must be the text
under it, as for docs/cli.md in ``tests/test_cli.py``.
"""

from __future__ import annotations

from tests.test_cli import ROOT, check_console_examples, console_examples


def test_adopting_has_keys_decode_and_explain_examples() -> None:
    commands = [c for c, _ in console_examples("adopting.md")]
    for word in ("keys decode", "keys encode", "explain"):
        assert any(c.startswith(f"tsmodel {word}") for c in commands), word


def test_adopting_console_examples_print_what_they_show() -> None:
    check_console_examples("adopting.md", cwd=ROOT)
