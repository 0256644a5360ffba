"""Tests of optional extras: a file per extra, each starting with ``pytest.importorskip``.

With ``TSMODEL_REQUIRE_EXTRAS=1`` (the extras' CI venv) a test file skipped
for a missing extra fails the run instead.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest


@pytest.hookimpl(wrapper=True)  # before every other hook sees the report
def pytest_collectreport(report: pytest.CollectReport) -> Generator[None, None, None]:
    if os.environ.get("TSMODEL_REQUIRE_EXTRAS") == "1" and report.skipped:
        report.outcome = "failed"
    return (yield)
