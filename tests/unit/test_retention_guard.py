"""Saving events older than a family's max age is refused unless accepted."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import tsmodel as ts


@ts.model(table="RECENT", family="d", retention=timedelta(days=7))
class Recent:
    host: str = ts.key()
    time: datetime = ts.timestamp()
    value: float = ts.value()


def now_ms() -> datetime:
    return ts.floor_timestamp(datetime.now(timezone.utc))


def test_expired_events_are_refused_and_nothing_is_written() -> None:
    fresh = Recent(host="h", time=now_ms() - timedelta(days=1), value=1.0)
    stale = Recent(host="h", time=now_ms() - timedelta(days=8), value=2.0)
    with ts.connect("memory://", default=False) as conn:
        conn.create_tables(Recent)
        with pytest.raises(ts.RetentionError, match="accept_expired") as info:
            conn.save_all([fresh, stale])
        assert [p.entity for p in info.value.problems] == [stale]
        assert isinstance(info.value, ValueError)
        everything = Recent.range(now_ms() - timedelta(days=30), now_ms() + timedelta(days=1),
                                  host="h").using(conn)
        assert list(everything) == []


def test_accepting_expired_events_writes_them_and_gc_removes_them() -> None:
    stale = Recent(host="h", time=now_ms() - timedelta(days=8), value=2.0)
    fresh = Recent(host="h", time=now_ms() - timedelta(days=1), value=1.0)
    with ts.connect("memory://", default=False) as conn:
        conn.create_tables(Recent)
        result = conn.save_all([stale, fresh], accept_expired=True)
        assert result.ok
        everything = Recent.range(now_ms() - timedelta(days=30), now_ms() + timedelta(days=1),
                                  host="h").using(conn)
        assert list(everything) == [fresh]  # the embedded store collects at once


def test_models_without_max_age_are_never_refused() -> None:
    @ts.model(table="FOREVER", family="d")
    class Forever:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        value: float = ts.value()

    with ts.connect("memory://", default=False) as conn:
        conn.create_tables(Forever)
        conn.save(Forever(host="h", time=datetime(1999, 1, 1, tzinfo=timezone.utc), value=1.0))
