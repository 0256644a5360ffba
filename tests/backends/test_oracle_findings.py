"""Divergences from the docs that the oracle harness found beyond issue 10's list.

Each test is named after the exclusion it lifted from tests/oracle/exclusions.py,
failed before its fix, and runs on the embedded store and the emulator. The
expected answers are computed from the events saved, never from what the code
returned.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend

UTC = timezone.utc
T0 = datetime(2024, 5, 1, tzinfo=UTC)


@pytest.fixture
def conn(backend: Backend) -> ts.Connection:
    return ts.Connection(backend)


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _sensor(**options: object) -> type:
    @ts.model(table=_name("SENSOR"), family="m", **options)
    class Sensor:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        reading: int = ts.value()
        note: str | None = ts.value(default=None)

    return Sensor


# -- first-after-limit-0 --------------------------------------------------------------


def test_first_and_exists_respect_a_limit_of_zero(conn: ts.Connection) -> None:
    """``qs.limit(0)`` matches nothing, so first() is None and exists() False."""
    Sensor = _sensor()
    conn.create_tables(Sensor)
    conn.save_all([Sensor(sensor="a", time=T0 + timedelta(minutes=i), reading=i)
                   for i in range(3)])
    qs = Sensor.range(T0, T0 + timedelta(hours=1), sensor="a").using(conn)
    assert [e.reading for e in qs] == [0, 1, 2]
    assert list(qs.limit(0)) == []
    assert qs.limit(0).first() is None
    assert qs.limit(0).exists() is False
    assert not qs.limit(0)
    assert qs.limit(2).first().reading == 0


# -- snapshot-last-day ------------------------------------------------------------------


def test_snapshot_of_the_last_day_is_built(conn: ts.Connection) -> None:
    """9999-12-31 is a day like any other: its snapshot is built and read."""

    @ts.model(table=_name("SNAP"), family="m",
              snapshot=ts.snapshot(_name("SNAP") + "_{period:%Y%m%d}", period="day"))
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S")
        value: int = ts.value()

    last = datetime(9999, 12, 31, tzinfo=UTC)
    conn.create_tables(Reading)
    events = [Reading(sensor="a", time=last + timedelta(hours=h), value=h)
              for h in (0, 12, 23)]
    events.append(Reading(sensor="a", time=last - timedelta(hours=1), value=-1))
    conn.save_all(events)
    report = ts.build_snapshot(Reading, last + timedelta(hours=5), connection=conn)
    assert report.events_written == 3
    assert report.period_start == last and report.period_end is None
    assert "3 events" in str(report)
    got = [(e.time, e.value) for e in Reading.snapshot(last).using(conn)]
    assert got == [(e.time, e.value) for e in events[:3]]
