"""What a type checker sees of user code: mypy on the files of tests/typing.

Each file is written as a user writes (declarations, queries sync and async);
a line that ends in ``# error: CODE`` must get that mypy error, and no other
line may get one: an ``assert_type`` that fails, or a query whose type falls
back to ``Any`` where the file asserts a model, fails the test.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

USER_FILES = sorted((Path(__file__).resolve().parents[1] / "typing").glob("*.py"))


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
@pytest.mark.parametrize("user_file", USER_FILES, ids=lambda p: p.name)
def test_mypy_accepts_the_good_lines_and_refuses_the_marked_ones(user_file: Path) -> None:
    expected: dict[int, set[str]] = {}
    for number, line in enumerate(user_file.read_text(encoding="utf-8").splitlines(), 1):
        found = re.search(r"# error: ([\w-]+)$", line)
        if found:
            expected[number] = {found.group(1)}
    assert expected, "the user file marks no line"
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary",
         "--hide-error-context", str(user_file)],
        capture_output=True, text=True, cwd=user_file.parents[2], check=False)
    got: dict[int, set[str]] = {}
    for line in run.stdout.splitlines():
        found = re.match(r".*?:(\d+): error: .*\[([\w-]+)\]$", line)
        if found:
            got.setdefault(int(found.group(1)), set()).add(found.group(2))
    assert got == expected, run.stdout + run.stderr


def test_every_user_file_is_checked() -> None:
    assert {p.name for p in USER_FILES} >= {"model_options.py", "queries.py"}
