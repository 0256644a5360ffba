"""Without Apache Beam, `tsmodel job` names the distribution that installs it."""

from __future__ import annotations

import sys

import pytest

import tsmodel.jobs
from tsmodel.cli import job
from tsmodel.cli._common import CliError


def test_job_without_beam_names_tsmodel_bigtable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tsmodel.jobs.beam", None)  # import fails
    monkeypatch.delattr(tsmodel.jobs, "beam", raising=False)
    with pytest.raises(CliError, match=r"pip install 'tsmodel-bigtable\[beam\]'"):
        job._beam()
