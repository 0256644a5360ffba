"""The core with every optional extra installed (the extras' CI environment).

Every extra that the installed distribution declares is installed here, and
``import tsmodel`` imports none of them: the heavy libraries load only when
a feature that needs them is used.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

import pytest

if os.environ.get("TSMODEL_REQUIRE_EXTRAS") != "1":
    pytest.skip("runs where every extra is installed: nox -s extras "
                "(TSMODEL_REQUIRE_EXTRAS=1)", allow_module_level=True)

requirements = pytest.importorskip("packaging.requirements")

#: Extras of tools, not features.
TOOL_EXTRAS = {"test", "docs", "dev"}


def _distribution() -> str:
    names = metadata.packages_distributions().get("tsmodel")
    if not names:
        pytest.fail("tsmodel is not installed as a distribution (pip install -e .)")
    return names[0]


def _feature_requirements() -> dict[str, list[str]]:
    """Extra → the distributions it adds to the core's."""
    dist = _distribution()
    declared = metadata.metadata(dist).get_all("Provides-Extra") or []
    core, by_extra = set(), {extra: [] for extra in declared if extra not in TOOL_EXTRAS}
    for line in metadata.requires(dist) or []:
        req = requirements.Requirement(line)
        if req.marker is None:
            core.add(_normal(req.name))
            continue
        for extra in by_extra:
            if req.marker.evaluate({"extra": extra}):
                by_extra[extra].append(_normal(req.name))
    found = {extra: [name for name in names if name not in core]
             for extra, names in by_extra.items()}
    if not found:
        pytest.skip(f"{dist} declares no feature extra")
    return found


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_every_extra_is_installed() -> None:
    missing = []
    for extra, names in _feature_requirements().items():
        for name in names:
            try:
                metadata.distribution(name)
            except metadata.PackageNotFoundError:
                missing.append(f"{name} (extra {extra!r})")
    assert not missing, f"not installed: {', '.join(missing)}"


def test_importing_tsmodel_imports_no_extra() -> None:
    modules_of = {}
    for module, dists in metadata.packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(_normal(dist), []).append(module)
    heavy = sorted({module for names in _feature_requirements().values() for name in names
                    for module in modules_of.get(name, [])})
    assert heavy, "the extras' distributions provide no module: are they installed?"
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, tsmodel, tsmodel.testing.plugin; "
                               "print('\\n'.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert not [name for name in loaded if name.split(".")[0] in heavy]
