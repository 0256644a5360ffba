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


def _sensor(bucket: str | None = None, **options: object) -> type:
    @ts.model(table=_name("SENSOR"), family="m", **options)
    class Sensor:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms", bucket=bucket)
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


# -- only-optional ----------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["rows", "cells"])
def test_only_optional_values_keeps_events_whose_values_are_none(conn: ts.Connection,
                                                                 layout: str) -> None:
    """only("note") returns every event, with ``note=None`` where it has none."""
    options: dict[str, object] = {} if layout == "rows" else {
        "layout": getattr(ts, layout)(), "max_rate": 1.0, "bucket": "hour"}
    Sensor = _sensor(**options)
    conn.create_tables(Sensor)
    events = [Sensor(sensor="a", time=T0 + timedelta(minutes=i), reading=i,
                     note=None if i % 2 else f"n{i}") for i in range(6)]
    conn.save_all(events)
    qs = Sensor.range(T0, T0 + timedelta(hours=1), sensor="a").using(conn)
    got = [(e.time, e.reading, e.note) for e in qs.only("note")]
    assert got == [(e.time, None, e.note) for e in events]
    assert qs.only("note").count() == len(events)
    assert [e.note for e in qs.only("note").newest_first()] == [e.note for e in events][::-1]


# -- events whose values are all None (found while fixing only-optional) -----------------


def _raw(backend: Backend, table: str) -> dict[bytes, list[tuple[str, bytes, int, bytes]]]:
    from tsmodel.backends.base import ReadRequest

    return {row.key: sorted((c.family, c.qualifier, c.timestamp, c.value) for c in row.cells)
            for row in backend.read_rows(ReadRequest(table))}


@pytest.mark.parametrize("layout", ["rows", "cells"])
def test_an_event_whose_values_are_all_none_is_kept(conn: ts.Connection, backend: Backend,
                                                     layout: str) -> None:
    """Every value optional and None: the event was reported saved and never stored."""
    options: dict[str, object] = {"current": _name("CUR")} if layout == "rows" else {
        "layout": ts.cells(), "max_rate": 1.0}

    @ts.model(table=_name("SPARSE"), family="m", **options)
    class Sparse:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms", bucket=None if layout == "rows" else "hour")
        cpu: float | None = ts.value(default=None)
        note: str | None = ts.value(default=None)

    conn.create_tables(Sparse)
    empty = Sparse(host="h", time=T0, cpu=None, note=None)
    full = Sparse(host="h", time=T0 + timedelta(seconds=1), cpu=0.5, note="x")
    assert conn.save_all([empty, full]).ok
    qs = Sparse.range(T0, T0 + timedelta(minutes=1), host="h").using(conn)
    assert list(qs) == [empty, full]
    assert list(qs.only("cpu")) == [empty, Sparse(host="h", time=full.time, cpu=0.5)]
    assert Sparse.using(conn).latest(host="h") == full
    # Correcting the empty event with a value leaves no marker beside the value.
    corrected = Sparse(host="h", time=T0, cpu=1.5, note=None)
    assert conn.save_all([corrected]).ok
    assert list(qs) == [corrected, full]
    raw = _raw(backend, Sparse.__tsmodel__.table)
    assert all(q != b"" for cells in raw.values() for _, q, _, _ in cells), raw
    # And back: all None again is the empty event, not the old value.
    assert conn.save_all([empty]).ok
    assert list(qs) == [empty, full]
    if layout == "rows":  # the current row is the newest event, also when it is empty
        newest = Sparse(host="h", time=T0 + timedelta(seconds=2))
        assert conn.save_all([newest]).ok
        assert Sparse.using(conn).latest(host="h") == newest
        current = _raw(backend, Sparse.__tsmodel__.current_table)
        assert [[(q, t) for _, q, t, _ in cells] for cells in current.values()] == [
            [(b"", 1_714_521_602_000_000)]]


def test_an_alternate_row_whose_remaining_values_are_none_is_written(
        conn: ts.Connection) -> None:
    """The alternate key promotes the required value; the optional rest is None."""

    @ts.model(table=_name("LOG"), family="m",
              alternates=[ts.alternate(_name("LOG_BY_LEVEL"), "level", "host", "time")])
    class Log:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        level: str = ts.value()
        note: str | None = ts.value(default=None)

    conn.create_tables(Log)
    events = [Log(host="h", time=T0 + timedelta(seconds=i), level="warn",
                  note=None if i % 2 else f"n{i}") for i in range(4)]
    assert conn.save_all(events).ok
    warn = Log.range(T0, T0 + timedelta(minutes=1), level="warn", host="h").using(conn)
    assert warn.explain().table == Log.__tsmodel__.alternates[0].table
    assert list(warn) == events
    # only() of the promoted value (the alternate table has no column for it).
    assert [e.level for e in warn.only("level")] == ["warn"] * 4
    assert [e.note for e in warn.only("note")] == [e.note for e in events]


def test_a_foreign_cell_is_not_an_event_of_a_model_of_optional_values(
        conn: ts.Connection, backend: Backend) -> None:
    """A row with only an unknown column decoded to an event with every value None."""
    from tsmodel.backends.base import RowMutation, SetCell

    @ts.model(table=_name("SPARSE"), family="m")
    class Sparse:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float | None = ts.value(default=None)

    conn.create_tables(Sparse)
    key = ts.row_key(Sparse(host="h", time=T0))
    backend.mutate_rows(Sparse.__tsmodel__.table, [
        RowMutation(key, (SetCell("m", b"other", 1_714_521_600_000_000, b"x"),))])
    with pytest.raises(ts.CellDecodingError) as info:
        list(Sparse.range(T0, T0 + timedelta(hours=1), host="h").using(conn))
    assert "m:other" in str(info.value) and repr(key) in str(info.value)


# -- salted-scan-newest-first -----------------------------------------------------------


@pytest.mark.parametrize("limit", [None, 3])
def test_newest_first_on_a_salted_scan_is_reverse_row_key_order(
        conn: ts.Connection, backend: Backend, limit: int | None) -> None:
    """Each salt's read was reversed, but the salts stayed in ascending order."""
    from tsmodel.backends.base import ReadRequest

    @ts.model(table=_name("BATTERY"), family="m")
    class Battery:
        salt = ts.salt(3, on="user")
        user: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        percentage: int = ts.value()

    conn.create_tables(Battery)
    events = [Battery(user=f"u{u}", time=T0 + timedelta(seconds=s), percentage=u * 10 + s)
              for u in range(6) for s in range(3)]
    assert conn.save_all(events).ok
    # The oracle: the table's rows in reverse row-key order.
    keys = [row.key for row in backend.read_rows(ReadRequest(Battery.__tsmodel__.table))]
    assert len({k[:1] for k in keys}) > 1, "the users should spread over several salts"
    by_key = {ts.row_key(e): e for e in events}
    expected = [by_key[k] for k in reversed(keys)][:limit]
    qs = Battery.range(T0, T0 + timedelta(minutes=1), allow_scan=True).using(conn)
    if limit is not None:
        qs = qs.limit(limit)
    assert list(qs.newest_first()) == expected
    assert list(qs) == [by_key[k] for k in keys][:limit]


# -- repair-stale-current-cell ----------------------------------------------------------


def test_repair_of_an_older_range_leaves_the_current_row_alone(
        conn: ts.Connection, backend: Backend) -> None:
    """A repair of a range holding an older event but not the newest wrote the older
    event's cells into the current row (a NOTE the newest event has None for)."""
    Sensor = _sensor(current=_name("CUR"))
    conn.create_tables(Sensor)
    older = Sensor(sensor="a", time=T0, reading=1, note="old")
    newest = Sensor(sensor="a", time=T0 + timedelta(days=2), reading=2, note=None)
    assert conn.save_all([older, newest]).ok
    table = Sensor.__tsmodel__.current_table
    before = _raw(backend, table)
    assert [q for _, q, _, _ in next(iter(before.values()))] == [b"reading"]
    report = ts.repair(Sensor, T0, T0 + timedelta(days=1), connection=conn)
    assert report.ok and report.events == 1 and report.current_rows_fixed == 0
    assert _raw(backend, table) == before
    assert Sensor.using(conn).latest(sensor="a") == newest


def test_repair_brings_a_current_row_that_is_behind_up_to_date(
        conn: ts.Connection, backend: Backend) -> None:
    """The current write of the newest event failed: repair makes it current."""
    from tsmodel.backends.base import DeleteRow, RowMutation

    Sensor = _sensor(current=_name("CUR"))
    conn.create_tables(Sensor)
    events = [Sensor(sensor="a", time=T0 + timedelta(hours=h), reading=h,
                     note="x" if h == 0 else None) for h in range(3)]
    assert conn.save_all(events).ok
    expected = _raw(backend, Sensor.__tsmodel__.current_table)
    # Put the current row back to the oldest event, as if the later writes failed.
    key = next(iter(expected))
    backend.mutate_rows(Sensor.__tsmodel__.current_table, [RowMutation(key, (DeleteRow(),))])
    conn.save_all(events[:1])
    report = ts.repair(Sensor, T0, T0 + timedelta(days=1), connection=conn)
    assert report.ok and report.events == 3
    assert Sensor.using(conn).latest(sensor="a") == events[-1]
    raw = _raw(backend, Sensor.__tsmodel__.current_table)
    newest_cells = [(q, t) for _, q, t, _ in raw[key] if t == max(t for _, _, t, _ in raw[key])]
    assert newest_cells == [(b"reading", 1_714_528_800_000_000)]


# -- version-limit-backends-differ ------------------------------------------------------


def test_jobs_see_the_versions_a_version_limit_keeps(conn: ts.Connection,
                                                     backend: Backend) -> None:
    """A bucket past its version limit: repair deleted the alternate copy of the
    event the limit drops (the emulator had not collected it yet), and snapshots
    copied it; both now answer as if garbage collection had run."""
    day = datetime(2021, 3, 7, 23, tzinfo=UTC)

    @ts.model(table=_name("SCORE"), family="m", layout=ts.cells(), max_versions=3,
              alternates=[ts.alternate(_name("SCORE_BY_PLAYER"), "player", "game", "time")],
              snapshot=ts.snapshot(_name("SCORE") + "_{period:%Y%m%d}", period="day"))
    class Score:
        game: str = ts.key()
        player: str = ts.key()
        time: datetime = ts.timestamp(unit="ms", bucket="hour")
        points: int = ts.value()

    conn.create_tables(Score)
    events = [Score(game="Dota", player="Corrie", time=day + timedelta(minutes=m), points=m)
              for m in (0, 1, 10, 20)]
    assert conn.save_all(events).ok
    kept = events[1:]  # the hour's row keeps 3 versions: the oldest event is gone
    qs = Score.range(day, day + timedelta(hours=1), game="Dota", player="Corrie")
    assert list(qs.using(conn)) == kept
    report = ts.repair(Score, datetime(1970, 1, 1, tzinfo=UTC), day + timedelta(minutes=5),
                       connection=conn)
    assert (report.events, report.alternate_events_deleted, report.failed) == (1, 0, 0)
    by_player = Score.range(day, day + timedelta(hours=1), player="Corrie")
    assert list(by_player.using(conn)) == kept
    snap = ts.build_snapshot(Score, day, connection=conn)
    assert snap.events_written == 3
    assert list(Score.snapshot(day).using(conn)) == kept


def test_only_leaves_out_an_event_past_the_version_limit(conn: ts.Connection) -> None:
    """only("note") of a bucket past its version limit returned the dropped event
    whose note cell was kept, with its required reading gone."""
    Sensor = _sensor(bucket="hour", layout=ts.cells(), max_versions=2)
    conn.create_tables(Sensor)
    events = [Sensor(sensor="a", time=T0 + timedelta(minutes=i), reading=i) for i in range(3)]
    assert conn.save_all(events).ok
    # The oldest event's note: the note column has one version, within the limit.
    assert conn.save_all([Sensor(sensor="a", time=T0, reading=0, note="late")]).ok
    qs = Sensor.range(T0, T0 + timedelta(hours=1), sensor="a").using(conn)
    assert [e.time for e in qs] == [e.time for e in events[1:]]
    assert [(e.time, e.note) for e in qs.only("note")] == [(e.time, None) for e in events[1:]]


def test_a_correction_deletes_a_cell_past_the_version_limit(conn: ts.Connection) -> None:
    """ts.columns(), max_versions=2: the oldest event of a column past its limit was
    corrected to another value; its old cell, unseen by the read before the write,
    stayed and came back beside the correction once the column had room."""

    @ts.model(table=_name("LVL"), family="m", layout=ts.columns(), max_versions=2)
    class Level:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms", bucket="hour")
        value: int = ts.value()

    conn.create_tables(Level)
    t = [T0, T0 + timedelta(milliseconds=1), T0 + timedelta(minutes=15)]
    assert conn.save_all([Level(host="h", time=x, value=1) for x in t]).ok
    fixed = [Level(host="h", time=t[0], value=2), Level(host="h", time=t[2], value=2)]
    assert conn.save_all(fixed).ok
    qs = Level.range(T0, T0 + timedelta(hours=1), host="h").using(conn)
    assert sorted((e.time, e.value) for e in qs) == [(t[0], 2), (t[1], 1), (t[2], 2)]
    report = ts.repair(Level, T0, T0 + timedelta(hours=1), connection=conn)
    assert report.events == 3
