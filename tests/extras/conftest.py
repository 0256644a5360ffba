"""Tests of optional extras: a file per extra, each starting with ``pytest.importorskip``.

With ``TSMODEL_REQUIRE_EXTRAS=1`` (the extras' CI venv) a test file skipped
for a missing extra fails the run instead.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator, Iterator

import pytest


@pytest.hookimpl(wrapper=True)  # before every other hook sees the report
def pytest_collectreport(report: pytest.CollectReport) -> Generator[None, None, None]:
    if os.environ.get("TSMODEL_REQUIRE_EXTRAS") == "1" and report.skipped:
        report.outcome = "failed"
    return (yield)


@pytest.fixture(autouse=True, scope="session")
def _temporary_files_in_the_runs_directory(
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Temporary files of these tests go below the run's base directory, which pytest
    removes in turn (it keeps the last three): Beam's DirectRunner leaves an empty
    ``beam-temp*`` folder in the temporary directory for every pipeline whose Prism
    runner cannot start, and its stager more (``tsmodel job`` gives each job a
    directory of its own; tests calling `tsmodel.jobs.beam` in this process get this)."""
    before = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tmp", numbered=False))
    try:
        yield
    finally:
        tempfile.tempdir = before
