"""Test environments, one virtualenv each (``nox``; ``nox -s core`` for one of them).

* ``core``: the package with its test dependencies only, no optional extra:
  the whole suite under coverage, the figure printed at the end; coverage's
  cheapest collector that measures branches (`coverage_core`). The tests run
  on one pytest-xdist worker per core (`WORKERS`), each with its own emulator.
* ``extras``: the package with every feature extra of pyproject.toml
  (``[project.optional-dependencies]`` but test, docs, dev): tests/extras,
  where a missing extra fails instead of skipping (``TSMODEL_REQUIRE_EXTRAS=1``),
  and the unit tests again, on the extras' versions of shared dependencies
  (Beam pins protobuf below 7: the core gets protobuf 7, the extras 6, and the
  unit tests hold the protobuf codec's and the wire format's).
* ``deep`` (not in the default run): the soak tier, ``TSMODEL_TEST_TIER=deep``
  (tests/budget.py): the oracle and differential machines at high example
  counts, the fault harness at 100,000 entities, the error fuzzing at scale,
  the Beam jobs on several worker processes.
* ``package``: builds the sdist and the wheel and checks their metadata.
* ``lint``: ruff and mypy, and the typing tests (mypy on user-style files).

Arguments after ``--`` go to pytest: ``nox -s core -- tests/unit -x``
(``-n 0`` for one process, as a debugger needs).
"""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

import nox

nox.options.sessions = ["lint", "package", "core", "extras"]
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True

#: The package as the README installs it: editable, and visible to type checkers.
EDITABLE = ("--config-settings", "editable_mode=strict", "-e")
TOOL_EXTRAS = {"test", "docs", "dev"}
#: pytest-xdist workers: one per core. On the project's two cores the core
#: session's wall time halves (docs/contributing.md has the figures).
WORKERS = ("-n", "auto")


def feature_extras() -> list[str]:
    """The optional extras that add features (``arrow``, ``beam``...), sorted."""
    declared = nox.project.load_toml("pyproject.toml")["project"]["optional-dependencies"]
    return sorted(set(declared) - TOOL_EXTRAS)


def coverage_core(session: nox.Session) -> str:
    """The cheapest coverage collector that measures branches on the session's Python.

    ``sysmon`` (sys.monitoring) measures branches from Python 3.14 on
    (coverage's ``branch_right_left``); on 3.12 and 3.13 it would measure lines
    only, so coverage would fall back. Before 3.14: the C tracer, ``ctrace``.
    """
    newer = session.run("python", "-c", "import sys; print(sys.version_info >= (3, 14))",
                        silent=True)
    return "sysmon" if str(newer).strip() == "True" else "ctrace"


@nox.session
def core(session: nox.Session) -> None:
    """The whole suite without optional extras, under coverage (measured once)."""
    session.install(*EDITABLE, ".[test]")
    session.install("coverage>=7.10")
    session.run("coverage", "erase")
    session.run("coverage", "run", "-m", "pytest", *WORKERS, *session.posargs,
                env={"COVERAGE_CORE": coverage_core(session)})
    session.run("coverage", "combine", "--quiet")
    session.run("coverage", "report")


@nox.session
def extras(session: nox.Session) -> None:
    """tests/extras with every feature extra installed, and the unit tests."""
    session.install(*EDITABLE, f".[{','.join(['test', *feature_extras()])}]")
    session.run("python", "-m", "pytest", *WORKERS,
                *(session.posargs or ["tests/extras", "tests/unit"]),
                env={"TSMODEL_REQUIRE_EXTRAS": "1"})


#: The tests whose budget the tier sets (tests/budget.py).
DEEP_TESTS = [
    "tests/backends/test_oracle.py",
    "tests/backends/test_oracle_differential.py",
    "tests/backends/test_faults.py",
    "tests/unit/test_error_fuzz.py",
    "tests/extras/test_beam.py",
]


@nox.session
def deep(session: nox.Session) -> None:
    """The deep tier: the harnesses of tests/budget.py at soak budgets, Beam included."""
    session.install(*EDITABLE, ".[test,beam]")
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", *WORKERS,
                *(session.posargs or DEEP_TESTS),
                env={"TSMODEL_TEST_TIER": "deep", "TSMODEL_REQUIRE_EXTRAS": "1"})


@nox.session
def package(session: nox.Session) -> None:
    """Build the sdist and the wheel; check their metadata as the package index would."""
    session.install("build>=1.2", "twine>=6")
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", str(dist), silent=True)
    built = sorted(glob.glob(str(dist / "*")))
    session.log("built: %s", ", ".join(Path(name).name for name in built))
    session.run("twine", "check", "--strict", *built)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on everything, mypy (strict) on tsmodel/."""
    session.install(*EDITABLE, ".[dev]")
    session.run("ruff", "check", ".")
    session.run("mypy")
    # The typing tests: mypy on user-style files (skipped where mypy is missing).
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "tests/unit/test_user_types.py")
