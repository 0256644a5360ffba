"""Every script in examples/ runs to completion on the embedded store.

Each runs as ``python SCRIPT`` would, in the test's process (tests/inprocess.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.inprocess import run_script

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLES} >= {"server_metrics.py", "weather_balloons.py",
                                          "energy_meters.py", "market_data.py"}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TSMODEL_URL"}
    done = run_script(script, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "an example prints what it did"
    assert "Traceback" not in done.stderr
