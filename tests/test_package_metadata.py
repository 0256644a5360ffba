"""The built wheel's metadata, as a package index shows it.

Builds the wheel with pip (``pip wheel --no-deps``, an isolated build as the
package session of noxfile.py does with ``python -m build``) and reads its
``METADATA``: the project URLs are there, and the long description (the
README) has no relative link, which would break on the index's page.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = "https://github.com/tsmodel/tsmodel"
#: A Markdown link or image target: ``](target)``.
_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def metadata(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                           "-w", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    [wheel] = out.glob("tsmodel_bigtable-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = Parser().parsestr(archive.read(name).decode("utf-8"))
    return {"urls": message.get_all("Project-URL") or [],
            "description": message.get_payload(),
            "content_type": message["Description-Content-Type"]}


def test_the_wheel_names_the_projects_urls(metadata: dict[str, object]) -> None:
    urls = dict(line.split(", ", 1) for line in metadata["urls"])  # type: ignore[attr-defined]
    assert set(urls) == {"Homepage", "Documentation", "Repository", "Issues", "Changelog"}
    assert all(url.startswith("https://") for url in urls.values())
    assert urls["Repository"] == REPOSITORY
    assert urls["Issues"] == f"{REPOSITORY}/issues"


def test_the_long_description_has_no_relative_link(metadata: dict[str, object]) -> None:
    assert metadata["content_type"] == "text/markdown"
    description = str(metadata["description"])
    assert "ORM-style time-series mapper" in description
    targets = _LINK.findall(description)
    assert len(targets) > 20
    relative = [t for t in targets if "://" not in t and not t.startswith(("#", "mailto:"))]
    assert not relative, f"relative links break on the package index: {relative}"


def test_the_readmes_links_name_files_of_this_checkout() -> None:
    # The README links into the repository by absolute URL; each must name a
    # file that exists here (what tests/unit/test_docs.py checks of relative links).
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    prefix = f"{REPOSITORY}/blob/main/"
    targets = [t for t in _LINK.findall(text) if t.startswith(prefix)]
    assert len(targets) > 20
    for target in targets:
        path = target.removeprefix(prefix).split("#", 1)[0]
        assert (ROOT / path).exists(), f"README.md: {target} names no file of the checkout"


def test_the_readme_installs_editable_in_strict_mode() -> None:
    # A plain `pip install -e` installs an import hook type checkers cannot follow
    # (the prose saying so quotes it in backticks).
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    editable = [line for line in text.splitlines()
                if "pip install -e " in line and "`pip install -e" not in line]
    assert editable and all("editable_mode=strict" in line for line in editable), editable
    assert "pip install -e '.[pandas]' --config-settings editable_mode=strict" in text
    assert "pip install 'tsmodel-bigtable[pandas]'" in text
    installing = (ROOT / "docs" / "installing.md").read_text(encoding="utf-8")
    assert "pip install -e '.[pandas]' --config-settings editable_mode=strict" in installing
    assert "pip install 'tsmodel-bigtable[pandas]'" in installing


def test_every_test_file_the_noxfile_names_exists() -> None:
    """A session naming a moved test file collects nothing: pytest exits 5, CI fails."""
    root = Path(__file__).resolve().parents[1]
    named = re.findall(r'"(tests/[\w/]+\.py)"', (root / "noxfile.py").read_text())
    assert "tests/unit/test_user_types.py" in named
    assert [name for name in named if not (root / name).is_file()] == []
