"""The ``tsmodel snapshot`` and ``tsmodel repair`` commands, on a file-backed store.

Run as ``python -m tsmodel`` would, in the test's process (tests/inprocess.py).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import tsmodel as ts
from tests.inprocess import Done, run_tsmodel

MODELS = '''
from datetime import datetime, timedelta
import tsmodel as ts
from tests.inprocess import Done, run_tsmodel

@ts.model(table="SENSOR", family="METER", layout=ts.offsets(timedelta(minutes=15)),
          current="CURRENT_SENSOR", snapshot=ts.snapshot("SENSOR_{period:%Y%m%d}"))
class Meter:
    meter: int = ts.key(width=10)
    time: datetime = ts.timestamp(bucket="day")
    kwh: float = ts.value()
'''
DAY = datetime(2017, 7, 26, tzinfo=timezone.utc)


def tsmodel(*args: str, cwd: Path) -> Done:
    return run_tsmodel(*args, cwd=cwd)


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "meters.py").write_text(MODELS)
    url = f"sqlite:///{tmp_path / 'meters.db'}"
    sys.path.insert(0, str(tmp_path))
    try:
        import meters  # type: ignore[import-not-found]

        with ts.connect(url, default=False) as conn:
            conn.create_tables(meters.Meter)
            conn.save_all(meters.Meter(meter=m, time=DAY + timedelta(minutes=15 * i), kwh=1.5)
                          for m in range(20) for i in range(96 * 2))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("meters", None)
    return tmp_path, url


def test_snapshot_command_builds_then_skips(store: tuple[Path, str]) -> None:
    cwd, url = store
    first = tsmodel("snapshot", "meters.py:Meter", "--period", "2017-07-26T10:00",
                    "--url", url, "--batch-size", "500", cwd=cwd)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("SENSOR_20170726: 1920 events from 20 rows in 4 batches")
    again = tsmodel("snapshot", "meters.py:Meter", "--period", "2017-07-26", "--url", url,
                    "--json", cwd=cwd)
    report = json.loads(again.stdout)
    assert report["already_complete"] is True and report["table"] == "SENSOR_20170726"


def test_repair_command(store: tuple[Path, str]) -> None:
    cwd, url = store
    done = tsmodel("repair", "meters.py:Meter", "--start", "2017-07-26", "--end", "2017-07-28",
                   "--field", "meter=3", "--url", url, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"events": 192, "alternate_events_deleted": 0,
                                       "current_rows_fixed": 0, "failed": 0,
                                       "rollup_rows_written": 0}


def test_snapshot_of_a_model_without_one_is_a_one_line_error(store: tuple[Path, str]) -> None:
    cwd, url = store
    (cwd / "plain.py").write_text(MODELS.replace(
        ', snapshot=ts.snapshot("SENSOR_{period:%Y%m%d}")', ""))
    bad = tsmodel("snapshot", "plain.py:Meter", "--period", "2017-07-26", "--url", url, cwd=cwd)
    assert bad.returncode == 1
    assert bad.stderr.strip() == ("tsmodel: error: Meter declares no snapshot "
                                  "(snapshot=ts.snapshot(...))")


def test_progress_bars_show_totals_counted_first(
        store: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    cwd, url = store
    sys.path.insert(0, str(cwd))
    try:
        import meters

        with ts.connect(url, default=False) as conn:
            ts.build_snapshot(meters.Meter, DAY, connection=conn, progress=True)
            snapshot_bar = capsys.readouterr().err
            ts.repair(meters.Meter, DAY, DAY + timedelta(days=2), connection=conn,
                      progress=True, meter=3)
            repair_bars = capsys.readouterr().err
            ts.repair(meters.Meter, DAY, DAY + timedelta(days=2), connection=conn,
                      progress=False)
            assert capsys.readouterr().err == ""
    finally:
        sys.path.remove(str(cwd))
        sys.modules.pop("meters", None)
    # 20 meters, one day bucket row each in the period; meter 3 has 2 rows in 2 days,
    # and the current-value table a row per meter.
    assert "SENSOR_20170726: 100%" in snapshot_bar and "20/20" in snapshot_bar
    assert "SENSOR (replay): 100%" in repair_bars and " 2/2 " in repair_bars
    assert "CURRENT_SENSOR (check): 100%" in repair_bars and "20/20" in repair_bars


def test_repair_command_without_progress(store: tuple[Path, str]) -> None:
    cwd, url = store
    done = tsmodel("repair", "meters.py:Meter", "--start", "2017-07-26", "--end", "2017-07-28",
                   "--url", url, "--no-progress", "--batch-size", "100", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "replayed 3840 events" in done.stdout and done.stderr == ""


def tables_of(url: str) -> list[str]:
    with ts.connect(url, default=False) as conn:
        return sorted(conn.backend.list_tables())


@pytest.mark.parametrize("command", [
    ("snapshot", "--period", "2017-07-26"),
    ("repair", "--start", "2017-07-26", "--end", "2017-07-28"),
])
def test_a_job_on_a_store_without_the_main_table_fails_and_creates_nothing(
        tmp_path: Path, command: tuple[str, ...]) -> None:
    (tmp_path / "meters.py").write_text(MODELS)
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"  # the wrong file: no tables at all
    name, *options = command
    bad = tsmodel(name, "meters.py:Meter", *options, "--url", url, cwd=tmp_path)
    assert bad.returncode == 1
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tsmodel: error: "), bad.stderr
    assert "'SENSOR'" in lines[0] and url in lines[0], lines[0]
    assert tables_of(url) == []  # no empty snapshot, progress or companion table
