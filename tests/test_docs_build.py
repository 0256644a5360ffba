"""The documentation site builds with ``mkdocs build --strict``.

Strict mode fails on any warning: a broken link or anchor between pages, a
page missing from the navigation, a docstring the API reference cannot
render. Without mkdocs installed the build is skipped, except under
``CI=true``, where it must run (``pip install -e '.[test]'`` installs it).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tsmodel

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "mkdocs.yml"
PAGES = sorted(p.name for p in (ROOT / "docs").glob("*.md"))


def _need_mkdocs() -> None:
    missing = [m for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python",
                         "pymdownx")
               if not _installed(m)]
    if not missing:
        return
    reason = f"{', '.join(missing)} not installed (pip install -e '.[docs]')"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and the docs cannot be built: {reason}", pytrace=False)
    pytest.skip(reason)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _nav_pages() -> list[str]:
    """The pages of mkdocs.yml's ``nav:`` (one ``- Title: page.md`` per line)."""
    text = CONFIG.read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\s+- [^:]+: (\S+\.md)$", nav, re.M)


def test_every_page_is_in_the_navigation() -> None:
    nav = _nav_pages()
    assert sorted(nav) == PAGES, "docs/*.md and the nav of mkdocs.yml differ"
    for page in ("index.md", "row-keys.md", "patterns.md", "queries.md", "writes.md",
                 "companions.md", "backends.md", "errors.md", "schema.md", "cli.md", "api.md"):
        assert page in nav, page
    assert nav[0] == "index.md"


def test_the_api_reference_covers_the_public_api() -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^::: tsmodel\.(\w+)$", text, re.M))
    missing = [name for name in tsmodel.__all__ if name not in listed]
    assert not missing, f"add to docs/api.md: {missing}"
    for module in ("plan.schema", "plan.retention", "plan.advice", "backends.emulator", "cli"):
        assert f"::: tsmodel.{module}" in text, module


#: A Sphinx role (":func:`key`") or a reST literal-block "::": the API reference
#: renders docstrings as Markdown, where both show raw.
_RST = re.compile(r":(?:func|meth|class|attr|exc|mod|data|obj):`|[^:\s]::$", re.M)


def test_docstrings_are_markdown() -> None:
    found = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
             for path in sorted((ROOT / "tsmodel").rglob("*.py"))
             for text in [path.read_text(encoding="utf-8")]
             for m in _RST.finditer(text)]
    assert not found, f"reST in docstrings (write Markdown: `name`): {found}"


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    _need_mkdocs()
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(CONFIG),
         "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert done.returncode == 0, "mkdocs build --strict failed:\n" + \
        "\n".join(warnings or done.stderr.splitlines()[-20:])
    for page in ("cli", "schema", "row-keys", "api"):
        assert (site / page / "index.html").is_file(), page
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert not _RST.search(re.sub(r"<[^>]+>", "", api)), "reST shows on the API page"
    model = api.split('id="tsmodel.model"', 1)[1].split('class="doc doc-contents', 1)[0]
    assert model.count("doc-signature") == 1, "model() shows several signatures (overloads)"
    for name in ("tsmodel.Connection.save_all", "tsmodel.plan.schema.plan_steps",
                 "tsmodel.cli.main", "tsmodel.decode_row_key",
                 "tsmodel.plan.retention.retention_problems", "tsmodel.plan.advice.advise"):
        assert f'id="{name}"' in api, f"the API reference lacks {name}"
    _assert_signatures_wrapped(api)
    schema_page = (site / "schema" / "index.html").read_text(encoding="utf-8")
    assert 'id="retention-max-age-counts-from-the-event-time"' in schema_page
    _assert_offline(site)


#: The longest line of a signature on the API page: mkdocs.yml's ``line_length``
#: (80), with room for a name or a default ruff cannot break.
SIGNATURE_WIDTH = 100


def _assert_signatures_wrapped(api: str) -> None:
    """Every signature is formatted (ruff): one parameter a line when it is long,
    no line wider than the page, rather than one line cut off at the edge."""
    import html

    blocks = re.findall(r'class="language-python doc-signature highlight"><pre>(.*?)</pre>',
                        api, re.S)
    assert len(blocks) > 100, "no signatures found on the API page"
    text = [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in blocks]
    wide = [line for block in text for line in block.splitlines()
            if len(line) > SIGNATURE_WIDTH]
    assert not wide, f"signature lines wider than {SIGNATURE_WIDTH}: {wide[:3]}"
    assert sum("\n    " in block for block in text) > 20, "no signature is wrapped"


def test_a_table_keeps_the_names_in_its_first_column_whole() -> None:
    # Exception names broke mid-word in the errors table ("ExtraNotInstal-
    # ledError"): code in a table's first column does not break.
    css = (ROOT / "docs" / "assets" / "extra.css").read_text(encoding="utf-8")
    rule = css.split(".md-typeset table:not([class]) td:first-child code {", 1)[1]
    rule = rule.split("}", 1)[0]
    assert "white-space: nowrap" in rule and "word-break: keep-all" in rule
    assert "assets/extra.css" in CONFIG.read_text(encoding="utf-8")


def _assert_offline(site: Path) -> None:
    """No page loads a script, a style sheet or a font from another host, and code
    is highlighted at build time (Pygments' spans), not by JavaScript."""
    remote = re.compile(r'<(?:script|link)\b[^>]*\b(?:src|href)="(?:https?:)?//[^"]*"')
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        loads = [m.group(0) for m in remote.finditer(html)
                 if 'rel="canonical"' not in m.group(0)]
        assert not loads, f"{page.relative_to(site)} loads from another host: {loads}"
        assert "fonts.googleapis" not in html and "highlight.js" not in html, page
    index = (site / "index.html").read_text(encoding="utf-8")
    assert '<span class="kn">import</span>' in index, "no Pygments highlighting"
    # Search runs in the browser from files of the site: its index and the
    # web worker that reads it (served, e.g. `mkdocs serve`: browsers start
    # no worker for a page opened as a file; docs/installing.md says so).
    assert (site / "search" / "search_index.json").stat().st_size > 100_000
    assert list((site / "assets" / "javascripts" / "workers").glob("search.*.min.js"))
