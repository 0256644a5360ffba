"""Model-level conformance: the same writes and queries on every backend.

Runs on the embedded store and on the Cloud Bigtable emulator (see
``conftest.py``). Each test declares its models with unique table names, so
tests share the session's backend without seeing each other's rows.
"""

from __future__ import annotations

import functools
import random
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend, RowMutation, SetCell
from tsmodel.encoding.timestamps import to_micros

T0 = datetime.fromtimestamp(1426535612.045, timezone.utc)


def metric_model(*, current: bool = True) -> Any:
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"METRIC_{suffix}", family="METRIC",
              current=f"CURRENT_METRIC_{suffix}" if current else None)
    class ServerMetric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu1_usr: float = ts.value("CPU/CPU1_USR")
        blk_read: int = ts.value("IO/BLK_READ")
        note: str | None = ts.value("NOTE", default=None)

    return ServerMetric


def battery_model() -> Any:
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"BATTERY_{suffix}", family="METRIC")
    class Battery:
        kind = ts.constant("BATTERY")
        salt = ts.salt(3, on="time")
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        user: str = ts.value("USER")
        percentage: int = ts.value("PERCENTAGE")

    return Battery


@pytest.fixture
def conn(backend: Backend) -> ts.Connection:
    return ts.Connection(backend, batch_size=7)


def fleet(model: Any, hosts: int = 3, points: int = 20, step: int = 5) -> list[Any]:
    return [
        model(hostname=f"server{h}.aaa.bbb.com", time=T0 + timedelta(seconds=step * i),
              cpu1_usr=h + i / 100, blk_read=1000 * h + i)
        for h in range(hosts) for i in range(points)
    ]


def test_range_returns_one_host_in_time_order(conn: ts.Connection) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    events = fleet(Metric)
    random.Random(1).shuffle(events)
    result = conn.save_all(events)
    assert result.ok and len(result.written) == len(events)
    start, end = T0 + timedelta(seconds=10), T0 + timedelta(seconds=50)
    got = list(Metric.range(start, end, hostname="server1.aaa.bbb.com").using(conn))
    expected = sorted((e for e in events if e.hostname == "server1.aaa.bbb.com"
                       and start <= e.time < end), key=lambda e: e.time)
    assert got == expected
    assert len(got) == 8


def test_range_boundaries_are_half_open(conn: ts.Connection) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    conn.save_all(fleet(Metric, hosts=1, points=5))
    host = "server0.aaa.bbb.com"
    exact = list(Metric.range(T0, T0 + timedelta(seconds=10), hostname=host).using(conn))
    assert [e.time for e in exact] == [T0, T0 + timedelta(seconds=5)]
    # A start 1 microsecond after an event excludes it; an end 1 ms after includes it.
    later = list(Metric.range(T0 + timedelta(microseconds=1), T0 + timedelta(seconds=10,
                                                                            milliseconds=1),
                              hostname=host).using(conn))
    assert [e.time for e in later] == [T0 + timedelta(seconds=5), T0 + timedelta(seconds=10)]


def test_range_never_returns_rows_of_a_host_sharing_a_prefix(conn: ts.Connection) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    names = ["a", "ab", "a.b", "a-b", "b", "aa"]
    conn.save_all([Metric(hostname=n, time=T0, cpu1_usr=1.0, blk_read=i)
                   for i, n in enumerate(names)])
    for n in names:
        got = list(Metric.range(T0, T0 + timedelta(days=1), hostname=n).using(conn))
        assert [e.hostname for e in got] == [n]


def test_newest_first_limit_and_first(conn: ts.Connection) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    conn.save_all(fleet(Metric, hosts=2, points=10))
    qs = Metric.range(T0, T0 + timedelta(hours=1), hostname="server1.aaa.bbb.com").using(conn)
    newest = list(qs.newest_first().limit(3))
    assert [e.blk_read for e in newest] == [1009, 1008, 1007]
    assert qs.first() is not None and qs.first().blk_read == 1000
    assert [e.blk_read for e in qs.limit(2)] == [1000, 1001]
    assert [e.blk_read for e in qs[:2]] == [1000, 1001]
    assert qs.count() == 10


def test_only_reads_a_subset_of_value_fields(conn: ts.Connection) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    conn.save_all(fleet(Metric, hosts=1, points=3))
    got = list(Metric.range(T0, T0 + timedelta(hours=1), hostname="server0.aaa.bbb.com")
               .only("blk_read").using(conn))
    assert [e.blk_read for e in got] == [0, 1, 2]
    assert all(e.cpu1_usr is None for e in got)


def test_partial_prefix_and_scan(conn: ts.Connection) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    events = fleet(Metric, hosts=3, points=4)
    conn.save_all(events)
    start, end = T0 + timedelta(seconds=5), T0 + timedelta(seconds=15)
    with pytest.raises(ts.ScanRefusedError, match="allow_scan"):
        Metric.range(start, end)
    scanned = list(Metric.range(start, end, allow_scan=True).using(conn))
    assert sorted((e.hostname, e.time) for e in scanned) == sorted(
        (e.hostname, e.time) for e in events if start <= e.time < end)


def test_latest_ignores_late_older_events(conn: ts.Connection) -> None:
    """Shuffled and replayed writes: the current table keeps the newest by event time."""
    Metric = metric_model()
    conn.create_tables(Metric)
    events = fleet(Metric, hosts=4, points=15)
    rng = random.Random(7)
    rng.shuffle(events)
    conn.save_all(events)
    # Replay some old events one by one, after the newest were written.
    for e in rng.sample(events, 10):
        conn.save(e)
    for h in range(4):
        host = f"server{h}.aaa.bbb.com"
        latest = conn.latest(Metric, hostname=host)
        assert latest.time == T0 + timedelta(seconds=5 * 14)
        assert latest.blk_read == 1000 * h + 14
    current = list(Metric.current().using(conn))
    assert [e.hostname for e in current] == [f"server{h}.aaa.bbb.com" for h in range(4)]
    assert all(e.blk_read % 1000 == 14 for e in current)
    one = list(Metric.current(hostname="server2.aaa.bbb.com").using(conn))
    assert [e.blk_read for e in one] == [2014]


def test_latest_without_current_table_reads_newest_row(conn: ts.Connection) -> None:
    Metric = metric_model(current=False)
    conn.create_tables(Metric)
    conn.save_all(fleet(Metric, hosts=2, points=6))
    got = conn.latest(Metric, hostname="server1.aaa.bbb.com")
    assert got.blk_read == 1005
    with pytest.raises(Metric.DoesNotExist):
        conn.latest(Metric, hostname="nobody")
    with pytest.raises(ts.QueryError, match="no current-value table"):
        Metric.current()


def test_latest_missing_entity_raises_model_does_not_exist(conn: ts.Connection) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    with pytest.raises(Metric.DoesNotExist) as info:
        conn.latest(Metric, hostname="ghost")
    assert isinstance(info.value, ts.DoesNotExist)
    assert "ghost" in str(info.value)


def test_optional_value_none_resave_is_exact(conn: ts.Connection) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    first = Metric(hostname="h", time=T0, cpu1_usr=1.0, blk_read=1, note="hello")
    conn.save(first)
    again = Metric(hostname="h", time=T0, cpu1_usr=2.0, blk_read=2, note=None)
    conn.save(again)
    assert list(Metric.range(T0, T0 + timedelta(seconds=1), hostname="h").using(conn)) == [again]
    assert conn.latest(Metric, hostname="h") == again


def test_newer_event_without_optional_value_hides_older_value(conn: ts.Connection) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    conn.save(Metric(hostname="h", time=T0, cpu1_usr=1.0, blk_read=1, note="old"))
    newer = Metric(hostname="h", time=T0 + timedelta(seconds=1), cpu1_usr=2.0, blk_read=2)
    conn.save(newer)
    assert conn.latest(Metric, hostname="h") == newer


def test_salted_range_merges_salts_by_time(conn: ts.Connection) -> None:
    Battery = battery_model()
    conn.create_tables(Battery)
    base = datetime(2015, 3, 1, 12, 45, 1, 1000, tzinfo=timezone.utc)
    events = [Battery(time=base + timedelta(milliseconds=i), user=u, percentage=p)
              for i, (u, p) in enumerate([("Corrie", 98), ("Jo", 54), ("Corrie", 96),
                                          ("Sam", 43), ("Sam", 38)] * 4)]
    random.Random(3).shuffle(events)
    conn.save_all(events)
    keys = {ts.row_key(e)[:10] for e in events}
    assert len(keys) > 1, "events should spread over several salts"
    qs = Battery.range(base, base + timedelta(milliseconds=12)).using(conn)
    plan = qs.explain()
    assert len(plan.requests) == 3 and plan.merge == "time"
    got = list(qs)
    assert got == sorted((e for e in events if e.time < base + timedelta(milliseconds=12)),
                         key=lambda e: e.time)
    newest = list(qs.newest_first().limit(2))
    assert [e.time for e in newest] == [base + timedelta(milliseconds=11),
                                        base + timedelta(milliseconds=10)]


def test_bad_entity_writes_nothing(conn: ts.Connection, backend: Backend) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    good = fleet(Metric, hosts=1, points=3)
    bad = Metric(hostname="x#y", time=T0, cpu1_usr=1.0, blk_read=1)
    with pytest.raises(ts.KeyEncodingError, match="x#y"):
        conn.save_all([*good, bad])
    assert list(Metric.range(T0, T0 + timedelta(days=1), allow_scan=True).using(conn)) == []


def test_failures_are_reported_entity_by_entity(conn: ts.Connection, backend: Backend) -> None:
    """A table without the family: every entity fails, each one reported."""
    Metric = metric_model()
    backend.create_table(ts.TableSpec(Metric.__tsmodel__.table,
                                      (("OTHER", ts.GcRule(max_versions=1)),)))
    backend.create_table(ts.TableSpec(Metric.__tsmodel__.current_table,
                                      (("METRIC", ts.GcRule(max_versions=1)),)))
    events = fleet(Metric, hosts=2, points=2)
    result = conn.save_all(events, raise_on_failure=False)
    assert len(result) == 4 and not result.ok
    assert [r.entity for r in result.failed] == events
    assert all(r.error is not None for r in result.failed)
    assert all(len(r.tables) == 1 for r in result.failed), "companions not attempted"
    with pytest.raises(ts.SaveError) as info:
        conn.save_all(events)
    assert len(info.value.result.failed) == 4



def test_a_save_error_names_the_first_entity_and_table_not_written(
        conn: ts.Connection, backend: Backend) -> None:
    # The message alone must say what was not written and where: the model, the
    # entity (its index in the input and its fields) and the table.
    Metric = metric_model()
    spec = Metric.__tsmodel__
    backend.create_table(ts.TableSpec(spec.table, (("METRIC", ts.GcRule(max_versions=1)),)))
    events = fleet(Metric, hosts=1, points=3)
    with pytest.raises(ts.SaveError) as info:  # the current-value table is missing
        conn.save_all(events)
    message = str(info.value)
    assert message.startswith("save incomplete (3 partial); first problem: entity 0 "
                              "(ServerMetric("), message
    assert "hostname='server0.aaa.bbb.com'" in message, message
    assert f"partial in table {spec.current_table!r}: " in message, message
    with pytest.raises(ts.SaveError) as info:  # no table at all: the main write fails
        conn.save(metric_model()(hostname="h", time=T0, cpu1_usr=0.5, blk_read=1))
    message = str(info.value)
    assert message.startswith("save incomplete (1 failed); first problem: entity 0 "
                              "(ServerMetric(hostname='h', "), message
    assert "failed in table 'METRIC_" in message and "TableNotFoundError" in message, message

def test_companion_failure_is_reported_partial(conn: ts.Connection, backend: Backend) -> None:
    Metric = metric_model()
    spec = Metric.__tsmodel__
    backend.create_table(ts.TableSpec(spec.table, (("METRIC", ts.GcRule(max_versions=1)),)))
    events = fleet(Metric, hosts=1, points=3)
    result = conn.save_all(events, raise_on_failure=False)
    assert [r.status for r in result.results] == [ts.WriteStatus.PARTIAL] * 3
    assert all(dict(r.tables)[spec.table].ok for r in result.results)
    # The main table has the events.
    got = list(Metric.range(T0, T0 + timedelta(days=1), hostname="server0.aaa.bbb.com")
               .using(conn))
    assert got == events


def test_missing_table_fails_every_entity(conn: ts.Connection) -> None:
    Metric = metric_model()
    result = conn.save_all(fleet(Metric, hosts=1, points=2), raise_on_failure=False)
    assert len(result.failed) == 2
    assert all(isinstance(r.error, ts.TableNotFoundError) for r in result.failed)


def outcome_model() -> Any:
    """A model whose saves read their rows first (a value promoted into an alternate key)."""
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"OUTCOME_{suffix}", family="G",
              alternates=[ts.alternate(f"OUTCOME_BY_RESULT_{suffix}", "game", "result", "time",
                                       "player")])
    class Outcome:
        game: str = ts.key()
        player: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        result: str = ts.value()

    assert ts.spec_of(Outcome).corrections_read_first
    return Outcome


def test_missing_table_fails_entities_whose_save_reads_first(conn: ts.Connection) -> None:
    """The read before a correction finds no table: FAILED entity by entity, not an error.

    The other model's entities in the same batches are written.
    """
    Outcome, Metric = outcome_model(), metric_model()
    conn.create_tables(Metric)
    outcomes = [Outcome(game="LoL", player=f"p{i}", time=T0, result="win") for i in range(10)]
    metrics = fleet(Metric, hosts=1, points=10)
    result = conn.save_all([x for pair in zip(outcomes, metrics, strict=True) for x in pair],
                           raise_on_failure=False)
    assert [r.entity for r in result.failed] == outcomes
    assert all(isinstance(r.error, ts.TableNotFoundError) for r in result.failed)
    assert all(len(r.tables) == 1 for r in result.failed), "companions not attempted"
    assert [r.entity for r in result.written] == metrics


def test_reading_a_missing_table_raises(conn: ts.Connection) -> None:
    Metric = metric_model()
    with pytest.raises(ts.TableNotFoundError):
        list(Metric.range(T0, T0 + timedelta(days=1), hostname="h").using(conn))


def test_protobuf_serialized_model(conn: ts.Connection) -> None:
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"BALLOON_{suffix}", family="m",
              serialization=ts.Protobuf(qualifier="measurements_blob"))
    class Balloon:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
        pressure: int = ts.value()
        temperature: float = ts.value()
        humidity: int | None = ts.value(default=None)

    conn.create_tables(Balloon)
    t = datetime(2021, 3, 5, 12, 0, tzinfo=timezone.utc)
    events = [Balloon(location="us-west2", balloon=3698, time=t + timedelta(minutes=i),
                      pressure=94558 + i, temperature=9.5 + i / 10,
                      humidity=None if i == 2 else 60 + i) for i in range(5)]
    conn.save_all(events)
    assert ts.row_key(events[0]) == b"us-west2#3698#2021-03-05-1200"
    got = list(Balloon.range(t + timedelta(minutes=1), t + timedelta(minutes=4),
                             location="us-west2", balloon=3698).using(conn))
    assert got == events[1:4]
    assert got[1].humidity is None


def test_reversed_timestamp_model_reads_newest_first(conn: ts.Connection) -> None:
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"REV_{suffix}", family="d")
    class Reading:
        sensor: str = ts.key(width=4)
        time: datetime = ts.timestamp(reverse=True)
        level: float = ts.value()

    conn.create_tables(Reading)
    events = [Reading(sensor="s1", time=T0 + timedelta(seconds=i), level=float(i))
              for i in range(6)]
    conn.save_all(events)
    got = list(Reading.range(T0 + timedelta(seconds=1), T0 + timedelta(seconds=4),
                             sensor="s1").using(conn))
    assert [e.level for e in got] == [3.0, 2.0, 1.0]
    assert conn.latest(Reading, sensor="s1").level == 5.0
    assert [e.level for e in Reading.range(T0, T0 + timedelta(hours=1), sensor="s1")
            .newest_first().limit(2).using(conn)] == [5.0, 4.0]


def test_create_tables_is_idempotent(conn: ts.Connection, backend: Backend) -> None:
    Metric = metric_model()
    conn.create_tables(Metric)
    conn.save(fleet(Metric, hosts=1, points=1)[0])
    conn.create_tables(Metric)
    assert conn.latest(Metric, hostname="server0.aaa.bbb.com").blk_read == 0
    tables = backend.list_tables()
    assert Metric.__tsmodel__.table in tables and Metric.__tsmodel__.current_table in tables


def test_cells_carry_the_event_time(backend: Backend, conn: ts.Connection) -> None:
    """Every cell's timestamp is the event time in ms: writes are idempotent."""
    from tsmodel.backends.base import ReadRequest

    Metric = metric_model()
    conn.create_tables(Metric)
    event = fleet(Metric, hosts=1, points=1)[0]
    conn.save(event)
    conn.save(event)
    rows = list(backend.read_rows(ReadRequest(Metric.__tsmodel__.table)))
    assert len(rows) == 1
    assert {c.timestamp for c in rows[0].cells} == {to_micros(event.time)}
    assert len(rows[0].cells) == 2  # cpu1_usr and blk_read; note is None


def test_rows_written_by_hand_decode(backend: Backend, conn: ts.Connection) -> None:
    """Rows written without tsmodel, in the model's layout, come back as instances."""
    Metric = metric_model()
    conn.create_tables(Metric)
    us = to_micros(T0)
    backend.mutate_rows(Metric.__tsmodel__.table, [RowMutation(
        b"server9#1426535612045",
        (SetCell("METRIC", b"CPU/CPU1_USR", us, ts.Float64().encode(0.02)),
         SetCell("METRIC", b"IO/BLK_READ", us, ts.Int64().encode(253453634))),
    )])
    got = Metric.range(T0, T0 + timedelta(seconds=1), hostname="server9").using(conn).first()
    assert got == Metric(hostname="server9", time=T0, cpu1_usr=0.02, blk_read=253453634)


def test_cached_latest_sees_this_connections_writes(backend: Backend) -> None:
    from tsmodel.run.cache import CachingBackend

    Metric = metric_model()
    cached = ts.Connection(CachingBackend(backend, maxsize=100, ttl=60))  # type: ignore[arg-type]
    cached.create_tables(Metric)
    first = Metric(hostname="h", time=T0, cpu1_usr=1.0, blk_read=1)
    cached.save(first)
    assert cached.latest(Metric, hostname="h") == first
    again = cached.latest(Metric, hostname="h")
    assert again == first
    again.blk_read = 99  # the caller's copy, not the cache's
    assert cached.latest(Metric, hostname="h").blk_read == 1
    newer = Metric(hostname="h", time=T0 + timedelta(seconds=1), cpu1_usr=2.0, blk_read=2)
    cached.save(newer)
    assert cached.latest(Metric, hostname="h") == newer
    with pytest.raises(Metric.DoesNotExist):
        cached.latest(Metric, hostname="nobody")
    cached.save(Metric(hostname="nobody", time=T0, cpu1_usr=0.0, blk_read=0))
    assert cached.latest(Metric, hostname="nobody").blk_read == 0


def test_cached_latest_follows_every_write_and_delete_of_the_connection(
        backend: Backend) -> None:
    """Random saves, updates and deletes through a caching connection; after each, every
    host's cached latest() (both spellings) is the newest event a plain dict holds."""
    from tsmodel.run.cache import CachingBackend

    Metric = metric_model()
    cached = ts.Connection(CachingBackend(backend, maxsize=100, ttl=600))  # type: ignore[arg-type]
    cached.create_tables(Metric)
    hosts = ["a", "b", "c"]
    stored: dict[tuple[str, datetime], tuple[float, int]] = {}  # the oracle
    rng = random.Random(7)

    def event(host: str, second: int, value: int) -> Any:
        return Metric(hostname=host, time=T0 + timedelta(seconds=second),
                      cpu1_usr=value / 4, blk_read=value)

    for step in range(60):
        host, second, value = rng.choice(hosts), rng.randrange(8), step
        held = sorted(t for (h, t) in stored if h == host)
        what = rng.choice(["save", "save_all", "update", "delete", "delete_all",
                           "delete_range", "update_range"])
        if what == "save":
            cached.save(event(host, second, value))
            stored[host, T0 + timedelta(seconds=second)] = (value / 4, value)
        elif what == "save_all":
            cached.save_all([event(host, second, value), event(host, second + 1, value + 100)])
            stored[host, T0 + timedelta(seconds=second)] = (value / 4, value)
            stored[host, T0 + timedelta(seconds=second + 1)] = ((value + 100) / 4, value + 100)
        elif what == "update" and held:
            when = rng.choice(held)
            cached.update(Metric, hostname=host, time=when, blk_read=value)
            stored[host, when] = (stored[host, when][0], value)
        elif what == "delete" and held:
            when = rng.choice(held)
            cached.delete(Metric(hostname=host, time=when, cpu1_usr=0.0, blk_read=0))
            del stored[host, when]
        elif what == "delete_all" and held:
            gone = held[-2:]
            cached.delete_all([Metric(hostname=host, time=t, cpu1_usr=0.0, blk_read=0)
                               for t in gone])
            for when in gone:
                del stored[host, when]
        elif what == "delete_range":
            start, end = T0 + timedelta(seconds=second), T0 + timedelta(seconds=second + 3)
            Metric.range(start, end, hostname=host).using(cached).delete()
            for when in held:
                if start <= when < end:
                    del stored[host, when]
        elif what == "update_range":
            start, end = T0 + timedelta(seconds=second), T0 + timedelta(seconds=9)
            Metric.range(start, end, hostname=host).using(cached).update(blk_read=-value)
            for when in held:
                if start <= when < end:
                    stored[host, when] = (stored[host, when][0], -value)
        for each in hosts:
            newest = max((t for (h, t) in stored if h == each), default=None)
            for ask in (functools.partial(cached.latest, Metric, hostname=each),
                        functools.partial(Metric.using(cached).latest, hostname=each)):
                if newest is None:
                    with pytest.raises(Metric.DoesNotExist):
                        ask()
                else:
                    got = ask()
                    assert (got.hostname, got.time, got.cpu1_usr, got.blk_read) == (
                        each, newest, *stored[each, newest]), (step, what)
    assert cached.cache is not None and cached.cache.stats.hits > 0
