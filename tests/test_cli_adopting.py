"""The ``console`` blocks of docs/adopting.md print what they show.

Each ``$ tsmodel ...`` line runs in a new process from the repository root,
so that ``examples/adopted_tables.py`` names the models of the page, and
what it prints (standard output, then standard error) must be the text
under it, as for docs/cli.md in ``tests/test_cli.py``.
"""

from __future__ import annotations

import shlex

from tests.test_cli import ROOT, run
from tests.test_cli import console_examples as cli_console_examples


def console_examples() -> list[tuple[str, str]]:
    """``(command, expected output)`` of every ``$ tsmodel`` line of docs/adopting.md."""
    return cli_console_examples("adopting.md")


def test_adopting_has_keys_decode_and_explain_examples() -> None:
    commands = [c for c, _ in console_examples()]
    for word in ("keys decode", "keys encode", "explain"):
        assert any(c.startswith(f"tsmodel {word}") for c in commands), word


def test_adopting_console_examples_print_what_they_show() -> None:
    for command, expected in console_examples():
        words = shlex.split(command)
        assert words[0] == "tsmodel", command
        done = run(*words[1:], cwd=ROOT)
        shown = _lines(done.stdout + done.stderr)
        assert shown == _lines(expected), f"docs/adopting.md: `{command}` prints:\n" + \
            done.stdout + done.stderr


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]
