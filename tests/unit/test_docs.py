"""The documentation's examples run: README.md and every page of docs/.

Each file's fenced code blocks tagged ``python`` are executed in order, in
one fresh module namespace per file (like a doctest session), against a
fresh in-memory embedded store as the default connection. A broken example
fails the suite, with the traceback pointing at the Markdown line.

Fence info strings:

* ``python`` -- runs.
* ``python emulator`` -- runs only when the Cloud Bigtable emulator
  (``cbtemulator``) is installed; skipped otherwise, except under
  ``CI=true``, where a missing emulator fails (as in the backend suite).
* ``python no-run`` -- shown, never run: it needs Cloud Bigtable itself.
  Keep these few and short.
* ``python pandas`` (or ``arrow``, ``polars``, ``beam``) -- runs only when that
  optional extra is installed (its blocks are skipped in the core suite,
  except under ``TSMODEL_REQUIRE_EXTRAS=1``, where a missing extra fails).
* ``text output`` right after a ``python`` block -- what that block prints,
  compared exactly (trailing whitespace aside).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest

import tsmodel as ts

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^([ \t]*)```([^\n`]*)\n(.*?)^\1```[ \t]*$", re.S | re.M)
_LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def code_blocks(text: str) -> list[tuple[int, str, str]]:
    """``(first line number, info string, code)`` of every fenced block.

    Fences may be indented (inside a list item); the code is dedented.
    """
    blocks = []
    for match in _FENCE.finditer(text):
        first_line = text.count("\n", 0, match.start(3)) + 1
        code = textwrap.dedent(match.group(3))
        blocks.append((first_line, match.group(2).strip(), code))
    return blocks


def emulator_available() -> bool:
    from tsmodel.backends.emulator import find_emulator

    try:
        find_emulator()
    except ts.EmulatorNotFoundError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and the Bigtable emulator is missing", pytrace=False)
        return False
    return True


def test_pages_exist() -> None:
    names = {p.name for p in PAGES}
    for page in ("index.md", "row-keys.md", "queries.md", "writes.md", "backends.md",
                 "errors.md"):
        assert page in names, f"docs/{page} is missing"


_NOT_RUN = object()  # stands for the output of a python block that did not run


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page: Path) -> None:
    blocks = code_blocks(page.read_text(encoding="utf-8"))
    name = "docs_" + re.sub(r"\W", "_", page.stem)
    module = types.ModuleType(name)
    module.__file__ = str(page)
    sys.modules[name] = module  # lets @ts.model resolve string annotations
    previous = ts.get_default_connection()
    conn = ts.connect("memory://", default=False)
    ts.set_default_connection(conn)
    skipped: list[int] = []
    printed: object = None  # what the block just before printed, if it was python
    try:
        for line, info, code in blocks:
            words = info.split()
            if words == ["text", "output"]:
                assert printed is not None, f"{page.name}:{line}: no python block before"
                if printed is not _NOT_RUN:
                    assert _lines(str(printed)) == _lines(code), (
                        f"{page.name}:{line}: the output shown is not what the block "
                        f"before prints, which is:\n{printed}")
                printed = None
                continue
            printed = None
            if not words or words[0] != "python":
                continue
            if "no-run" in words:
                printed = _NOT_RUN
                continue
            if "emulator" in words and not emulator_available():
                skipped.append(line)
                printed = _NOT_RUN
                continue
            if not all(_extra_available(w) for w in words[1:] if w in _EXTRAS):
                skipped.append(line)
                printed = _NOT_RUN
                continue
            # Pad with newlines so that tracebacks show the Markdown line numbers.
            source = "\n" * (line - 1) + code
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(source, str(page), "exec"), module.__dict__)
            printed = out.getvalue()
    finally:
        ts.set_default_connection(previous)
        conn.close()
        sys.modules.pop(name, None)
    if skipped:
        pytest.skip(f"emulator or extra not installed: skipped the blocks at lines {skipped}")


#: Fence words naming an optional extra, and the module it installs.
_EXTRAS = {"arrow": "pyarrow", "pandas": "pandas", "polars": "polars", "beam": "apache_beam"}


def _extra_available(word: str) -> bool:
    if importlib.util.find_spec(_EXTRAS[word]) is not None:
        return True
    if os.environ.get("TSMODEL_REQUIRE_EXTRAS") == "1":
        pytest.fail(f"TSMODEL_REQUIRE_EXTRAS=1 and {_EXTRAS[word]} is missing", pytrace=False)
    return False


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target, _anchor in _LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_only_backends_page_has_untested_blocks() -> None:
    """``no-run`` blocks escape the tests: keep them to the Cloud Bigtable snippets."""
    for page in PAGES:
        for line, info, _ in code_blocks(page.read_text(encoding="utf-8")):
            if "no-run" in info.split():
                assert page.name == "backends.md", f"{page.name}:{line}: untested block"
