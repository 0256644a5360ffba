"""Answers that were silently wrong, each checked against what the events say.

Every test here failed before its fix (issue "Data you can trust"; the item
number is in each docstring). They run on the embedded store and on the Cloud
Bigtable emulator (``conftest.py``), and compare with expectations computed
from the events saved, never with what the code returned before.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend, ReadFilter, ReadRequest, RowMutation, SetCell

UTC = timezone.utc
W09 = datetime(2021, 3, 1, tzinfo=UTC)  # Monday of ISO week 2021-W09


@pytest.fixture
def conn(backend: Backend) -> ts.Connection:
    return ts.Connection(backend)


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def raw_cells(backend: Backend, table: str,
              versions: int | None = None) -> dict[bytes, list[tuple[str, bytes, int, bytes]]]:
    """Every cell of every row (the newest ``versions`` of each column, else all), as
    another reader of the table sees it."""
    request = ReadRequest(table, filter=ReadFilter(cells_per_column=versions))
    return {row.key: sorted((c.family, c.qualifier, c.timestamp, c.value) for c in row.cells)
            for row in backend.read_rows(request)}


# -- 2: an alternate key with a bucket timestamp followed by more fields ---------------


def test_alternate_with_bucket_then_fields_reads_every_event(conn: ts.Connection) -> None:
    """Item 2: a one-week range on ``location#week#balloon`` returned nothing."""

    @ts.model(table=_name("BAL"), family="m", layout=ts.cells(), max_rate=1 / 60,
              alternates=[ts.alternate(_name("BAL_BY_WEEK"), "location", "time", "balloon")],
              allow_hotspot=True)
    class Balloon:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(bucket="week")
        pressure: int = ts.value()

    conn.create_tables(Balloon)
    events = [Balloon(location="us-west2", balloon=b, time=W09 + timedelta(hours=h), pressure=h)
              for b in (3698, 3699) for h in range(0, 24 * 14, 12)]
    conn.save_all(events)
    week = Balloon.range(W09, W09 + timedelta(days=7), location="us-west2").using(conn)
    assert week.explain().table == Balloon.__tsmodel__.alternates[0].table
    expected = sorted((e.balloon, e.time) for e in events if e.time < W09 + timedelta(days=7))
    assert sorted((e.balloon, e.time) for e in week) == expected
    both = Balloon.range(W09, W09 + timedelta(days=14), location="us-west2").using(conn)
    assert len(list(both)) == len(events)


def test_reversed_time_followed_by_fields_reads_every_event(conn: ts.Connection) -> None:
    """Item 2, the same bound with a reversed timestamp before another key field."""

    @ts.model(table=_name("REV"), family="m",
              alternates=[ts.alternate(_name("REV_BY_TIME"), "site", "time", "probe")])
    class Sample:
        site: str = ts.key()
        probe: str = ts.key()
        time: datetime = ts.timestamp(unit="ms", reverse=True)
        value: int = ts.value()

    conn.create_tables(Sample)
    t0 = datetime(2021, 3, 5, 12, tzinfo=UTC)
    events = [Sample(site="s", time=t0 + timedelta(seconds=i), probe=p, value=i)
              for i in range(3) for p in ("a", "b")]
    conn.save_all(events)
    found = Sample.range(t0, t0 + timedelta(seconds=3), site="s").using(conn)
    assert found.explain().table == Sample.__tsmodel__.alternates[0].table
    assert sorted((e.time, e.probe) for e in found) == sorted((e.time, e.probe) for e in events)


# -- 4: an alternate that promotes every value field ------------------------------------


def test_alternate_promoting_every_value_is_written_and_read(conn: ts.Connection) -> None:
    """Item 4: the alternate row was never written (PARTIAL or WRITTEN), queries gave []."""
    day = datetime(2015, 3, 1, tzinfo=UTC)

    @ts.model(table=_name("WIN"), family="g",
              alternates=[ts.alternate(_name("WIN_BY_RESULT"), "game", "win", "time",
                                       "player")])
    class Result:
        game: str = ts.key()
        player: str = ts.key()
        time: datetime = ts.timestamp(format="%Y%m%d")
        win: str = ts.value()

    conn.create_tables(Result)
    events = [Result(game="LoL", player=p, time=day + timedelta(days=d), win=w)
              for d, p, w in ((0, "Jo", "win"), (1, "Jo", "loss"), (1, "Corrie", "win"))]
    result = conn.save_all(events)
    assert result.ok, result.summary()
    wins = Result.range(day, day + timedelta(days=5), game="LoL", win="win").using(conn)
    assert wins.explain().table == Result.__tsmodel__.alternates[0].table
    assert sorted((e.player, e.time) for e in wins) == [("Corrie", day + timedelta(days=1)),
                                                        ("Jo", day)]


# -- 5: offsets layout ------------------------------------------------------------------


def test_offsets_refuse_an_optional_single_value() -> None:
    """Item 5: saving None erased the offset's earlier reading; refused at declaration."""
    with pytest.raises(ts.DeclarationError, match="optional"):
        @ts.model(table=_name("METER"), family="m", layout=ts.offsets(timedelta(minutes=15)))
        class Meter:
            meter: str = ts.key()
            time: datetime = ts.timestamp(bucket="day")
            kwh: float | None = ts.value(default=None)


def offsets_meter() -> Any:
    @ts.model(table=_name("METER"), family="METER", layout=ts.offsets(timedelta(minutes=15)))
    class Meter:
        meter: int = ts.key(width=10)
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value()

    return Meter


def test_offsets_rows_with_a_row_level_column_read_whole(conn: ts.Connection,
                                                        backend: Backend) -> None:
    """Item 5: the reference's ``METER:ID`` column beside the offsets broke multi-day reads."""
    Meter = offsets_meter()
    conn.create_tables(Meter)
    day = datetime(2017, 7, 26, tzinfo=UTC)
    events = [Meter(meter=987654, time=day + timedelta(hours=h), kwh=float(h)) for h in range(48)]
    conn.save_all(events)
    table = Meter.__tsmodel__.table
    keys = list(raw_cells(backend, table))
    backend.mutate_rows(table, [RowMutation(k, (SetCell("METER", b"ID", 0, b"987654"),))
                                for k in keys])
    got = list(Meter.range(day, day + timedelta(days=2), meter=987654).using(conn))
    assert [(e.time, e.kwh) for e in got] == [(e.time, e.kwh) for e in events]
    assert Meter.using(conn).latest(meter=987654).kwh == 47.0


def test_offsets_refuse_a_qualifier_out_of_range(conn: ts.Connection, backend: Backend) -> None:
    """Item 5: qualifier ``2575`` was read as the next day instead of refused."""
    Meter = offsets_meter()
    conn.create_tables(Meter)
    day = datetime(2017, 7, 26, tzinfo=UTC)
    conn.save(Meter(meter=1, time=day, kwh=1.0))
    (key,) = raw_cells(backend, Meter.__tsmodel__.table)
    stamp = int((day + timedelta(hours=23)).timestamp()) * 1_000_000
    backend.mutate_rows(Meter.__tsmodel__.table, [
        RowMutation(key, (SetCell("METER", b"2575", stamp, ts.Float64().encode(2.0)),))])
    with pytest.raises(ts.TsModelError, match="2575"):
        list(Meter.range(day, day + timedelta(days=2), meter=1).using(conn))


# -- 6 and 1: the current-value row is exactly the newest event --------------------------


def test_current_row_holds_only_the_newest_event(conn: ts.Connection, backend: Backend) -> None:
    """Item 6: an older event's optional cell stayed in the current row."""

    @ts.model(table=_name("M"), family="M", current=_name("CUR"))
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value()
        note: str | None = ts.value(default=None)

    conn.create_tables(Metric)
    t0 = datetime(2015, 3, 16, tzinfo=UTC)
    conn.save(Metric(host="h", time=t0, cpu=0.5, note="reboot"))
    newest = Metric(host="h", time=t0 + timedelta(seconds=1), cpu=0.7)
    conn.save(newest)
    # Another reader of the newest cells (GC of the older cpu version may not have run).
    rows = raw_cells(backend, Metric.__tsmodel__.current_table, versions=1)
    assert [q for _, q, _, _ in rows[b"h"]] == [b"cpu"]
    assert Metric.using(conn).latest(host="h") == newest


def test_microsecond_models_keep_the_newest_by_full_time(conn: ts.Connection) -> None:
    """Item 1: two events in one millisecond: the last to arrive won, its time cut to ms."""

    @ts.model(table=_name("US"), family="M", current=_name("US_CUR"))
    class Tick:
        symbol: str = ts.key()
        time: datetime = ts.timestamp(unit="us")
        price: float = ts.value()

    conn.create_tables(Tick)
    t0 = datetime(2015, 3, 16, 9, 30, tzinfo=UTC)
    newer = Tick(symbol="Z", time=t0 + timedelta(microseconds=900), price=2.0)
    older = Tick(symbol="Z", time=t0 + timedelta(microseconds=100), price=1.0)
    conn.save(newer)
    conn.save(older)  # arrives last, but is older
    assert Tick.using(conn).latest(symbol="Z") == newer
    assert list(Tick.using(conn).current()) == [newer]
    conn.save_all([older, newer, older])
    assert Tick.using(conn).latest(symbol="Z") == newer


# -- 9: latest() without a current table, late on the last day --------------------------


def test_latest_without_current_table_finds_the_last_day(conn: ts.Connection) -> None:
    """Item 9: the search stopped at 9999-12-31 00:00 while saving accepts later times."""

    @ts.model(table=_name("END"), family="m", layout=ts.cells(), max_rate=1.0)
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        value: int = ts.value()

    conn.create_tables(Reading)
    late = Reading(sensor="s", time=datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
                   value=1)
    conn.save(late)
    assert Reading.using(conn).latest(sensor="s") == late


# -- 11: bucket rows past their version limit ---------------------------------------------


def test_buckets_past_their_version_limit_read_alike(conn: ts.Connection) -> None:
    """Item 11: the embedded store dropped versions at once and returned a half-filled
    oldest event; the emulator returned every version. Both return the newest N whole."""

    @ts.model(table=_name("FULL"), family="m", layout=ts.cells(), max_versions=3,
              retention=timedelta(days=36500))
    class Probe:
        probe: str = ts.key()
        time: datetime = ts.timestamp(bucket="day")
        a: int = ts.value()
        b: int | None = ts.value(default=None)

    conn.create_tables(Probe)
    day = datetime(2021, 3, 5, tzinfo=UTC)
    events = [Probe(probe="p", time=day + timedelta(hours=h), a=h, b=None if h == 3 else h)
              for h in range(5)]
    conn.save_all(events)
    got = list(Probe.range(day, day + timedelta(days=1), probe="p").using(conn))
    # Column a keeps hours 2, 3, 4; column b keeps 1, 2, 4 (hour 3 has no b cell).
    assert [(e.time.hour, e.a, e.b) for e in got] == [(2, 2, 2), (3, 3, None), (4, 4, 4)]
    # A range that leaves the newer versions out still sees only what GC keeps.
    early = Probe.range(day, day + timedelta(hours=2), probe="p").using(conn)
    assert list(early) == []


def test_row_size_guard_counts_max_versions_without_a_rate() -> None:
    """Item 11: 50 million versions of a month bucket passed the 100 MB row guard."""
    with pytest.raises(ts.DeclarationError, match="100 MB"):
        @ts.model(table=_name("HUGE"), family="m", layout=ts.cells(), max_versions=50_000_000)
        class Huge:
            probe: str = ts.key()
            time: datetime = ts.timestamp(bucket="month")
            a: int = ts.value()


# -- 12: retention as a read filter --------------------------------------------------------


def test_expired_events_are_not_read_on_any_backend(conn: ts.Connection) -> None:
    """Item 12: with accept_expired=True the emulator kept returning expired events."""

    @ts.model(table=_name("RET"), family="m", retention=timedelta(days=1))
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        value: int = ts.value()

    conn.create_tables(Reading)
    now = datetime.now(UTC).replace(microsecond=0)
    old = Reading(sensor="s", time=now - timedelta(days=2), value=1)
    fresh = Reading(sensor="s", time=now - timedelta(hours=1), value=2)
    conn.save_all([old, fresh], accept_expired=True)
    week = Reading.range(now - timedelta(days=7), now, sensor="s").using(conn)
    assert list(week) == [fresh]
    assert week.count() == 1 and week.first() == fresh
    assert Reading.using(conn).latest(sensor="s") == fresh
    assert list(Reading.range(now - timedelta(days=7), now - timedelta(days=1),
                              sensor="s").using(conn)) == []


# -- 8: salted rows under a salt that is not theirs -----------------------------------------


def test_non_canonical_salted_rows_are_refused(conn: ts.Connection, backend: Backend) -> None:
    """Item 8: a row under another salt value than its fields give was returned."""

    @ts.model(table=_name("SALT"), family="m")
    class Battery:
        kind = ts.constant("BATTERY")
        s = ts.salt(buckets=3, on=("time",))
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        v: int = ts.value()

    conn.create_tables(Battery)
    t0 = datetime(2015, 3, 1, 12, 45, 1, 3000, tzinfo=UTC)
    event = Battery(time=t0, v=1)
    conn.save(event)
    key = ts.row_key(event)
    wrong = key.replace(b"#" + key.split(b"#")[1] + b"#",
                        b"#" + str((int(key.split(b"#")[1]) + 1) % 3).encode() + b"#")
    backend.mutate_rows(Battery.__tsmodel__.table, [
        RowMutation(wrong, (SetCell("m", b"v", round(t0.timestamp() * 1000) * 1000,
                                    ts.Int64().encode(2)),))])
    with pytest.raises(ts.KeyDecodingError, match="canonical"):
        list(Battery.range(t0, t0 + timedelta(seconds=1)).using(conn))


# -- 3 and 7: a correction replaces the event everywhere ------------------------------------


def result_model() -> Any:
    @ts.model(table=_name("R"), family="g", current=_name("R_CUR"),
              alternates=[ts.alternate(_name("R_BY_RESULT"), "game", "result", "time",
                                       "player")])
    class Result:
        game: str = ts.key()
        player: str = ts.key()
        time: datetime = ts.timestamp(format="%Y%m%d")
        result: str = ts.value()
        kda: float = ts.value()

    return Result


def test_correcting_a_promoted_value_moves_the_alternate_row(conn: ts.Connection,
                                                           backend: Backend) -> None:
    """Item 3: ``LoL#win#...#Jo`` stayed beside ``LoL#loss#...#Jo``; queries saw both."""
    Result = result_model()
    conn.create_tables(Result)
    day = datetime(2015, 3, 1, tzinfo=UTC)
    conn.save(Result(game="LoL", player="Jo", time=day, result="win", kda=2.0))
    corrected = Result(game="LoL", player="Jo", time=day, result="loss", kda=2.0)
    conn.save(corrected)
    alt = Result.__tsmodel__.alternates[0].table
    assert [k.split(b"#")[1] for k in raw_cells(backend, alt)] == [b"loss"]
    span = (day, day + timedelta(days=1))
    assert list(Result.range(*span, game="LoL", result="win").using(conn)) == []
    assert list(Result.range(*span, game="LoL", result="loss").using(conn)) == [corrected]


def test_repair_deletes_an_alternate_row_of_a_value_since_corrected(
        conn: ts.Connection, backend: Backend) -> None:
    """Item 3: ``ts.repair`` reported ``alternate_events_deleted=0`` for such a row."""
    Result = result_model()
    conn.create_tables(Result)
    day = datetime(2015, 3, 1, tzinfo=UTC)
    stale = Result(game="LoL", player="Jo", time=day, result="win", kda=2.0)
    alt = Result.__tsmodel__.alternates[0]
    backend.mutate_rows(alt.table, [alt.codec.encode(stale).row_mutation()])  # left over
    conn.save(Result(game="LoL", player="Jo", time=day, result="loss", kda=2.0))
    report = ts.repair(Result, day, day + timedelta(days=1), connection=conn)
    assert report.alternate_events_deleted == 1 and report.ok
    assert [k.split(b"#")[1] for k in raw_cells(backend, alt.table, versions=1)] == [b"loss"]


def test_columns_layout_correction_replaces_the_event(conn: ts.Connection) -> None:
    """Item 7: a corrected event (same key and time, new value) came back twice."""

    @ts.model(table=_name("COLS"), family="m", layout=ts.columns(), max_rate=1.0)
    class Pressure:
        balloon: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        pascal: int = ts.value(codec=ts.Text(int))

    conn.create_tables(Pressure)
    t0 = datetime(2021, 3, 5, 12, tzinfo=UTC)
    conn.save_all([Pressure(balloon="b", time=t0, pascal=94558),
                   Pressure(balloon="b", time=t0 + timedelta(minutes=1), pascal=94560)])
    fixed = Pressure(balloon="b", time=t0, pascal=94559)
    conn.save(fixed)
    got = list(Pressure.range(t0, t0 + timedelta(hours=1), balloon="b").using(conn))
    assert [(e.time, e.pascal) for e in got] == [(t0, 94559),
                                                (t0 + timedelta(minutes=1), 94560)]


def test_two_versions_of_an_event_in_one_batch_keep_the_last(conn: ts.Connection,
                                                           backend: Backend) -> None:
    """Two versions of one event in one save_all: the last in input order is the event,
    in every table (Bigtable does not order the entries of one bulk call)."""
    Result = result_model()
    conn.create_tables(Result)
    day = datetime(2015, 3, 1, tzinfo=UTC)
    first = Result(game="LoL", player="Jo", time=day, result="win", kda=1.0)
    last = Result(game="LoL", player="Jo", time=day, result="loss", kda=2.0)
    result = conn.save_all([first, last])
    assert [r.status for r in result.results] == [ts.WriteStatus.WRITTEN] * 2
    span = (day, day + timedelta(days=1))
    assert list(Result.range(*span, game="LoL", player="Jo").using(conn)) == [last]
    alt = Result.__tsmodel__.alternates[0].table
    assert [k.split(b"#")[1] for k in raw_cells(backend, alt)] == [b"loss"]
    assert Result.using(conn).latest(game="LoL", player="Jo") == last


def test_retention_hides_expired_current_values(conn: ts.Connection) -> None:
    """Item 12 for the current-value table: an expired event is not the latest one."""

    @ts.model(table=_name("RETC"), family="m", current=_name("RETC_CUR"),
              retention=timedelta(days=1))
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        value: int = ts.value()

    conn.create_tables(Reading)
    now = datetime.now(UTC).replace(microsecond=0)
    conn.save(Reading(sensor="old", time=now - timedelta(days=2), value=1),
              accept_expired=True)
    fresh = Reading(sensor="new", time=now - timedelta(hours=1), value=2)
    conn.save(fresh)
    with pytest.raises(Reading.DoesNotExist):
        Reading.using(conn).latest(sensor="old")
    assert list(Reading.using(conn).current()) == [fresh]


def test_rows_under_foreign_salt_values_refuse_the_answer(conn: ts.Connection,
                                                         backend: Backend) -> None:
    """Item 8: rows under salt digits the model does not have were never read, and the
    answer came back in part (3 of 5 events of the guide's BATTERY table)."""

    @ts.model(table=_name("SALT7"), family="m")
    class Battery:
        kind = ts.constant("BATTERY")
        s = ts.salt(buckets=3, on=("time",))
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        v: int = ts.value()

    conn.create_tables(Battery)
    t0 = datetime(2015, 3, 1, 12, 45, 1, 3000, tzinfo=UTC)
    conn.save(Battery(time=t0, v=1))
    span = (t0, t0 + timedelta(seconds=1))
    assert len(list(Battery.range(*span).using(conn))) == 1
    stamp = round(t0.timestamp() * 1000) * 1000
    backend.mutate_rows(Battery.__tsmodel__.table, [RowMutation(
        b"BATTERY#7#20150301124501003", (SetCell("m", b"v", stamp, ts.Int64().encode(2)),))])
    plan = Battery.range(*span).explain()
    assert "guard" in str(plan)
    with pytest.raises(ts.KeyDecodingError, match="salt value"):
        list(Battery.range(*span).using(conn))
