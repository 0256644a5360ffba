"""Deletes: the tables hold exactly what saving only the surviving events writes.

The oracle is a twin model: one model gets saves and deletes, its twin
gets only the saves of the events that survive, in the same order. After
every delete the two must hold the same cells in every table: the main
table and the alternate-key tables cell for cell (every version), the
current-value table as its one-version GC rule keeps it (a deleted event's
cells go, and an older hidden version of a column may show through until
the row is rewritten, which the GC rule of the table then removes alike).
Each model shape of the oracle harness (``tests/oracle/shapes.py``) runs:
rows, salted keys, buckets of cells, columns and offsets, serialized
events, promoted values in alternate keys.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Generator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tests.backends.test_companions import FaultyBackend
from tests.backends.test_pipelined_saves import draw_entities, fields_of
from tests.oracle.shapes import SHAPES, Shape, shape_named
from tsmodel.backends.base import Backend, MutationStatus, ReadFilter, ReadRequest, RowSet
from tsmodel.encoding.timestamps import to_micros
from tsmodel.run.drive import drive

UTC = timezone.utc


def dump(backend: Backend, model: type) -> list[dict[bytes, list[tuple[Any, ...]]]]:
    """Every cell of every table of the model, as its GC rules keep them (names left out)."""
    spec = ts.spec_of(model)
    tables = [(spec.table, None), *((a.table, None) for a in spec.alternates)]
    if spec.current_table is not None:
        tables.append((spec.current_table, ReadFilter(versions_kept=1)))
    out = []
    for table, row_filter in tables:
        rows: dict[bytes, list[tuple[Any, ...]]] = {}
        for row in backend.read_rows(ReadRequest(table, RowSet(), row_filter or ReadFilter())):
            rows[row.key] = sorted((c.family, c.qualifier, c.timestamp, c.value)
                                   for c in row.cells)
        out.append(rows)
    return out


def identity(shape: Shape, entity: Any) -> tuple[Any, ...]:
    return (*(getattr(entity, f) for f in shape.key_fields), entity.time)


def script(shape: Shape, model: type, rng: random.Random,
           n: int) -> list[tuple[str, list[Any]]]:
    """Saves in time order with deletes of saved events between them.

    Returns ("save", events) and ("delete", events) steps; an event deleted
    is not saved again (a later save of an older time would be out of order).
    A bucket row never holds more events than its version limit: an event
    pushed past it is gone for good, which saving the survivors would not
    show (tests of their own cover that rule).
    """
    events = sorted(draw_entities(shape, model, rng, n), key=lambda e: e.time)
    steps: list[tuple[str, list[Any]]] = []
    saved: dict[tuple[Any, ...], Any] = {}
    gone: set[tuple[Any, ...]] = set()

    def fits(e: Any) -> bool:
        if shape.max_versions is None or shape.layout not in ("cells", "columns"):
            return True
        ident = identity(shape, e)
        row = {k for k in saved if k[:-1] == ident[:-1]
               and to_micros(k[-1]) // shape.time.bucket == to_micros(e.time) // shape.time.bucket}
        return len(row | {ident}) <= shape.max_versions

    i = 0
    while i < len(events):
        k = rng.randint(1, 6)
        chunk = []
        for e in events[i:i + k]:
            if identity(shape, e) not in gone and fits(e):
                chunk.append(e)
                saved[identity(shape, e)] = e
        i += k
        if chunk:
            steps.append(("save", chunk))
        if saved and rng.random() < 0.6:
            doomed = rng.sample(sorted(saved, key=repr), rng.randint(1, len(saved)))
            # The event to delete names key and time; its values need not be the stored ones.
            steps.append(("delete", [saved.pop(k) if rng.random() < 0.5 else
                                     _other_values(shape, saved.pop(k), rng) for k in doomed]))
            gone.update(doomed)
    return steps


def within_limit(shape: Shape, events: list[Any]) -> list[Any]:
    """The events, but those that would put more than the version limit's events in
    a bucket row (see `script()`)."""
    if shape.max_versions is None or shape.layout not in ("cells", "columns"):
        return events
    rows: dict[tuple[Any, ...], set[int]] = {}
    out = []
    for e in events:
        ident, us = identity(shape, e), to_micros(e.time)
        times = rows.setdefault((*ident[:-1], us // shape.time.bucket), set())
        if us in times or len(times) < shape.max_versions:
            times.add(us)
            out.append(e)
    return out


def _other_values(shape: Shape, entity: Any, rng: random.Random) -> Any:
    fields = fields_of(entity)
    for v in shape.values:
        fields[v.name] = rng.choice(v.choices)
    return type(entity)(**fields)


def survivors(shape: Shape, steps: Sequence[tuple[str, list[Any]]], twin: type) -> list[Any]:
    """The saves of events no later step deletes, in order, as twin instances."""
    deleted = {identity(shape, e) for kind, events in steps if kind == "delete" for e in events}
    return [twin(**fields_of(e)) for kind, events in steps if kind == "save" for e in events
            if identity(shape, e) not in deleted]


DELETE_SHAPES = list(SHAPES)


@pytest.mark.parametrize("shape", DELETE_SHAPES, ids=lambda s: s.name)
def test_saves_and_deletes_leave_what_saving_the_survivors_leaves(
        backend: Backend, shape: Shape) -> None:
    for seed in range(6):
        rng = random.Random(seed)
        suffix = uuid.uuid4().hex[:8]
        model, twin = shape.make_model("d" + suffix), shape.make_model("t" + suffix)
        conn = ts.Connection(backend, batch_size=rng.randint(1, 5))
        conn.create_tables(model, twin)
        steps = script(shape, model, rng, rng.randint(1, 30))
        for kind, events in steps:
            if kind == "save":
                conn.save_all(events, accept_expired=True)
            else:
                result = conn.delete_all(events)
                assert [r.entity for r in result.written] == events
                assert all(r.tables[0][0] == ts.spec_of(model).table for r in result.results)
        conn.save_all(survivors(shape, steps, twin), accept_expired=True)
        assert dump(backend, model) == dump(backend, twin), (seed, steps)


@pytest.mark.parametrize("shape", [shape_named("rows"), shape_named("salted_time"),
                                   shape_named("offsets")], ids=lambda s: s.name)
async def test_async_deletes_leave_what_saving_the_survivors_leaves(
        backend: Backend, shape: Shape) -> None:
    async with asynchronous(backend) as ab:
        for seed in range(4):
            rng = random.Random(100 + seed)
            suffix = uuid.uuid4().hex[:8]
            model, twin = shape.make_model("a" + suffix), shape.make_model("b" + suffix)
            db = ts.AsyncConnection(ab, batch_size=rng.randint(1, 5))
            await db.create_tables(model, twin)
            steps = script(shape, model, rng, rng.randint(1, 30))
            for kind, events in steps:
                if kind == "save":
                    await db.save_all(events, accept_expired=True)
                else:
                    assert (await db.delete_all(events)).ok
            await db.save_all(survivors(shape, steps, twin), accept_expired=True)
            assert dump(backend, model) == dump(backend, twin), (seed, steps)


def rows_model() -> tuple[Shape, type]:
    shape = shape_named("rows")
    return shape, shape.make_model(uuid.uuid4().hex[:8])


T = datetime(2015, 3, 1, tzinfo=UTC)


def test_deleting_the_newest_event_shows_the_previous_one_then_nothing(
        backend: Backend) -> None:
    _, Model = rows_model()
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    older = Model(site="a", host=1, time=T, x=1, note="old")
    newer = Model(site="a", host=1, time=T + timedelta(hours=1), x=2, note=None)
    conn.save_all([older, newer])
    assert conn.latest(Model, site="a", host=1) == newer
    conn.delete(newer)
    assert conn.latest(Model, site="a", host=1) == older
    assert list(conn.current(Model)) == [older]
    conn.delete(older)
    assert list(conn.current(Model)) == []
    with pytest.raises(Model.DoesNotExist):
        conn.latest(Model, site="a", host=1)
    assert list(conn.range(Model, T, T + timedelta(days=1), site="a")) == []


def test_deleting_an_event_that_is_not_stored_changes_nothing(backend: Backend) -> None:
    shape, Model = rows_model()
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    kept = Model(site="a", host=1, time=T, x=1, note="n")
    conn.save(kept)
    before = dump(backend, Model)
    result = conn.delete_all([Model(site="a", host=1, time=T + timedelta(seconds=1), x=1,
                                    note=None)])
    assert result.ok
    assert dump(backend, Model) == before


def test_a_failed_companion_delete_is_partial_and_repair_fixes_it(backend: Backend) -> None:
    shape = shape_named("salted_time")  # a current-value table and an alternate-key table
    suffix = uuid.uuid4().hex[:8]
    Model, Twin = shape.make_model("f" + suffix), shape.make_model("g" + suffix)
    faulty = FaultyBackend(backend)
    conn = ts.Connection(faulty)  # type: ignore[arg-type]
    conn.create_tables(Model, Twin)
    events = sorted(draw_entities(shape, Model, random.Random(7), 20), key=lambda e: e.time)
    conn.save_all(events)
    doomed = events[-3:]
    doomed_ids = {identity(shape, e) for e in doomed}
    spec = ts.spec_of(Model)
    for table in (spec.current_table, *(a.table for a in spec.alternates)):
        assert table is not None
        faulty.fail[table] = MutationStatus.FAILED
    result = conn.delete_all(doomed, raise_on_failure=False)
    assert {r.status for r in result.results} == {ts.WriteStatus.PARTIAL}
    with pytest.raises(ts.SaveError, match=r"^delete incomplete \(3 partial\); first problem: "
                       r"entity 0 \(.*\), partial in table '\w+': "
                       r"BackendError\('injected failure writing"):
        conn.delete_all(doomed)
    faulty.fail.clear()
    conn.save_all([Twin(**fields_of(e)) for e in events if identity(shape, e) not in doomed_ids])
    assert dump(backend, Model) != dump(backend, Twin)
    report = ts.repair(Model, datetime(1970, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC),
                       connection=conn)
    assert report.ok
    assert dump(backend, Model) == dump(backend, Twin)


def test_a_refused_main_delete_fails_and_sends_nothing_else(backend: Backend) -> None:
    _, Model = rows_model()
    faulty = FaultyBackend(backend)
    conn = ts.Connection(faulty)  # type: ignore[arg-type]
    conn.create_tables(Model)
    event = Model(site="a", host=1, time=T, x=1, note="n")
    conn.save(event)
    main = ts.spec_of(Model).table
    # The server may have applied it: the companions are deleted too (as a save writes
    # them), and the result says to delete again.
    faulty.fail[main] = MutationStatus.UNKNOWN
    assert conn.delete_all([event], raise_on_failure=False).results[0].status is \
        ts.WriteStatus.UNKNOWN
    faulty.fail[main] = MutationStatus.FAILED
    before = dump(backend, Model)
    calls = dict(faulty.calls)
    result = conn.delete_all([event], raise_on_failure=False)
    assert result.results[0].status is ts.WriteStatus.FAILED
    assert len(result.results[0].tables) == 1, "no companion was sent"
    assert {t: n for t, n in faulty.calls.items() if calls.get(t) != n} == {
        main: calls[main] + 1}
    assert dump(backend, Model) == before
    faulty.fail.clear()
    assert conn.delete_all([event]).ok
    assert dump(backend, Model) == [{}, {}, {}]


# -- deleting and updating through queries --------------------------------------------


def hosts_events(Model: type) -> list[Any]:
    return [Model(site=site, host=host, time=T + timedelta(minutes=m), x=m, note=f"n{m}")
            for site in ("a", "b") for host in (1, 2) for m in range(6)]


def test_a_range_delete_deletes_what_the_range_reads(backend: Backend) -> None:
    shape, Model = rows_model()
    Twin = shape.make_model(uuid.uuid4().hex[:8])
    conn = ts.Connection(backend, batch_size=4)
    conn.create_tables(Model, Twin)
    events = hosts_events(Model)
    conn.save_all(events)
    start, end = T + timedelta(minutes=2), T + timedelta(minutes=6)
    doomed = list(conn.range(Model, start, end, site="a", host=1))
    result = conn.range(Model, start, end, site="a", host=1).delete()
    assert [r.entity for r in result.written] == doomed and len(doomed) == 4
    with pytest.raises(ts.ScanRefusedError, match="host"):
        conn.range(Model, start, end, site="b").delete()
    with pytest.raises(ts.QueryError, match="range"):
        conn.current(Model).delete()
    wide = conn.range(Model, start, end, site="b").delete(allow_scan=True)
    assert len(wide) == 8 and wide.ok
    gone = {(e.site, e.host, e.time) for e in doomed} | {
        (e.site, e.host, e.time) for e in events if e.site == "b" and start <= e.time < end}
    conn.save_all([Twin(**fields_of(e)) for e in events
                   if (e.site, e.host, e.time) not in gone])
    assert dump(backend, Model) == dump(backend, Twin)
    assert conn.latest(Model, site="a", host=1).time == T + timedelta(minutes=1)


@pytest.mark.parametrize("shape", [shape_named(n) for n in (
    "rows", "salted_time", "columns", "offsets", "serialized", "cells")], ids=lambda s: s.name)
def test_updates_leave_what_saving_the_updated_events_leaves(
        backend: Backend, shape: Shape) -> None:
    for seed in range(4):
        rng = random.Random(200 + seed)
        suffix = uuid.uuid4().hex[:8]
        model, twin = shape.make_model("u" + suffix), shape.make_model("v" + suffix)
        conn = ts.Connection(backend)
        conn.create_tables(model, twin)
        events = within_limit(shape, sorted(draw_entities(shape, model, rng,
                                                          rng.randint(1, 20)),
                                            key=lambda e: e.time))
        conn.save_all(events, accept_expired=True)
        stored = {identity(shape, e): e for e in events}  # the last version of each
        changed = []
        for key in rng.sample(sorted(stored, key=repr), rng.randint(1, len(stored))):
            value = rng.choice(shape.values)
            new = rng.choice(value.choices)
            names = {f: getattr(stored[key], f) for f in (*shape.key_fields, "time")}
            updated = conn.update(model, **names, **{value.name: new})
            expected = type(stored[key])(**{**fields_of(stored[key]), value.name: new})
            assert updated == expected
            stored[key] = expected
            changed.append(expected)
        conn.save_all([twin(**fields_of(stored[identity(shape, e)])) for e in events],
                      accept_expired=True)
        for e in changed:  # one save each, as each update is
            conn.save(twin(**fields_of(e)), accept_expired=True)
        assert dump(backend, model) == dump(backend, twin), seed


def test_an_update_names_one_stored_event(backend: Backend) -> None:
    _, Model = rows_model()
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    older = Model(site="a", host=1, time=T, x=1, note="old")
    newer = Model(site="a", host=1, time=T + timedelta(hours=1), x=2, note="new")
    conn.save_all([older, newer])
    with pytest.raises(Model.DoesNotExist, match=r"Rows\w*: no event for site='a', host=1, "
                       r"time=datetime.datetime\(2015, 3, 1, 0, 0, 1"):
        conn.update(Model, site="a", host=1, time=T + timedelta(seconds=1), x=5)
    with pytest.raises(ts.QueryError, match="missing: time"):
        conn.update(Model, site="a", host=1, x=5)
    with pytest.raises(ts.QueryError, match="'nope' cannot be set"):
        conn.update(Model, site="a", host=1, time=T, nope=5)
    with pytest.raises(ts.QueryError, match="no value field"):
        conn.update(Model, site="a", host=1, time=T)
    with pytest.raises(ts.ValidationError, match=r"^Rows\w*\.time: naive datetime"):
        conn.update(Model, site="a", host=1, time=T.replace(tzinfo=None), x=5)
    with pytest.raises(ts.FieldTypeError, match=r"^Rows\w*\.time: expected a timezone-aware"):
        conn.update(Model, site="a", host=1, time="2015-03-01", x=5)
    with pytest.raises(ts.QueryError, match="not of a current\\(\\) query"):
        Model.using(conn).current().update(x=5)
    with pytest.raises(ts.QueryError, match="not of a query without one"):
        ts.QuerySet(Model).delete()
    assert conn.update(Model, site="a", host=1, time=newer.time, note=None) == \
        Model(site="a", host=1, time=newer.time, x=2, note=None)
    assert conn.latest(Model, site="a", host=1).note is None
    result = conn.range(Model, T, T + timedelta(days=1), site="a", host=1).update(x=7)
    assert result.ok and [e.x for e in conn.range(Model, T, T + timedelta(days=1), site="a")] == [
        7, 7]
    with pytest.raises(ts.QueryError, match="'host' cannot be set"):
        conn.range(Model, T, T + timedelta(days=1), site="a", host=1).update(host=2)


def test_an_update_refuses_a_time_a_save_refuses(backend: Backend) -> None:
    # A time the model cannot store named no stored event (DoesNotExist), where a
    # save and a delete of the same time say what is wrong with it.
    @ts.model(table=f"U{uuid.uuid4().hex[:8].upper()}", family="f")
    class Ms:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        v: int = ts.value()

    @ts.model(table=f"U{uuid.uuid4().hex[:8].upper()}", family="f", layout=ts.cells(),
              max_rate=1)
    class Hourly:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        v: int = ts.value()

    conn = ts.Connection(backend)
    conn.create_tables(Ms, Hourly)
    try:
        for model in (Ms, Hourly):
            conn.save(model(host="a", time=T, v=1))
            finer = T + timedelta(microseconds=5)  # neither holds microseconds
            with pytest.raises(ts.ValidationError) as saving:
                conn.save(model(host="a", time=finer, v=2))
            with pytest.raises(ts.ValidationError) as updating:
                conn.update(model, host="a", time=finer, v=2)
            assert not isinstance(updating.value, ts.DoesNotExist)
            assert (type(updating.value), str(updating.value)) == (type(saving.value),
                                                                   str(saving.value))
            assert [e.v for e in conn.range(model, T, T + timedelta(hours=1), host="a")] == [1]
    finally:
        conn.drop_tables(Ms, Hourly)


async def test_async_range_delete_and_update(backend: Backend) -> None:
    shape, Model = rows_model()
    Twin = shape.make_model(uuid.uuid4().hex[:8])
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab, batch_size=3)
        await db.create_tables(Model, Twin)
        events = hosts_events(Model)
        await db.save_all(events)
        start, end = T + timedelta(minutes=3), T + timedelta(minutes=9)
        with pytest.raises(ts.ScanRefusedError):
            await db.range(Model, start, end, site="a").delete()
        result = await db.range(Model, start, end, site="a").delete(allow_scan=True)
        assert len(result) == 6 and result.ok
        await db.delete(events[0])
        updated = await db.update(Model, site="b", host=2, time=T, note="fixed")
        assert updated.note == "fixed"
        with pytest.raises(Model.DoesNotExist):
            await db.update(Model, site="a", host=1, time=start, x=1)
        assert (await db.range(Model, T, end, site="b", host=1).update(x=0)).ok
        survivors_ = [e for e in events[1:] if not (e.site == "a" and start <= e.time < end)]
        fixed = {(e.site, e.host, e.time): e for e in survivors_}
        fixed[("b", 2, T)] = updated
        for e in survivors_:
            if e.site == "b" and e.host == 1:
                fixed[(e.site, e.host, e.time)] = Model(**{**fields_of(e), "x": 0})
        twin_events = [Twin(**fields_of(fixed[(e.site, e.host, e.time)])) for e in survivors_]
        await db.save_all(twin_events)
        assert [fields_of(e) async for e in db.range(Model, T, end, allow_scan=True)] == \
            [fields_of(e) async for e in db.range(Twin, T, end, allow_scan=True)]
        assert dump(backend, Model) == dump(backend, Twin)


def test_a_delete_removes_the_event_from_a_built_snapshot(backend: Backend) -> None:
    _, Model = rows_model()  # with a snapshot table per UTC day
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    events = hosts_events(Model)
    later = [Model(site="a", host=1, time=T + timedelta(days=1), x=1, note="n")]
    conn.save_all(events + later)
    report = ts.build_snapshot(Model, T, connection=conn, progress=False)
    assert report.events_written == len(events)
    # The next day's period is not built: nothing to delete there, and no failure.
    result = conn.delete_all(events[:3] + later)
    assert result.ok
    assert [t for t, _ in result.results[0].tables] == [
        ts.spec_of(Model).table, *(a.table for a in ts.spec_of(Model).alternates),
        report.table, ts.spec_of(Model).current_table]
    assert sorted(map(repr, Model.using(conn).snapshot(T))) == sorted(map(repr, events[3:]))
    again = ts.build_snapshot(Model, T, connection=conn, progress=False, restart=True)
    assert again.events_written == len(events) - 3
    assert sorted(map(repr, Model.using(conn).snapshot(T))) == sorted(map(repr, events[3:]))
    snapshot = ts.spec_of(Model).snapshot
    assert snapshot is not None
    assert snapshot.table_for(to_micros(later[0].time)) not in backend.list_tables(), (
        "a delete creates no table")


def watched(steps: Generator[Any, Any, Any], seen: list[Any]) -> Generator[Any, Any, Any]:
    """``steps`` as they are, each step yielded noted in ``seen`` (a round trip each)."""
    answer = None
    while True:
        try:
            step = steps.send(answer)
        except StopIteration as stop:
            return stop.value
        seen.append(step)
        answer = yield step


@pytest.mark.parametrize(("shown", "companions", "trips"), [
    (True, True, 4), (False, True, 3), (False, False, 2)])
def test_the_round_trips_of_a_delete(backend: Backend, shown: bool, companions: bool,
                                     trips: int) -> None:
    """The figures of docs/deleting.md: steps of a batch, each one round trip."""
    from tsmodel.plan.deletes import DeletePlan, delete_steps

    @ts.model(table="del_trips_" + uuid.uuid4().hex[:8], family="F",
              current=("del_trips_cur_" + uuid.uuid4().hex[:8]) if companions else None)
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        x: int = ts.value("X")

    conn = ts.Connection(backend)
    conn.create_tables(Metric)
    events = [Metric(host=h, time=T + timedelta(minutes=m), x=m) for h in "ab" for m in range(3)]
    conn.save_all(events)
    doomed = [e for e in events if e.time == T + timedelta(minutes=2 if shown else 0)]
    seen: list[Any] = []
    result = drive(watched(delete_steps(DeletePlan(doomed, backend.features), batch_size=10),
                           seen), conn)
    assert result.ok and len(result) == 2
    assert len(seen) == trips


async def test_async_failed_companion_delete_is_partial_and_repair_fixes_it(
        backend: Backend) -> None:
    from tsmodel.backends.threaded import ThreadedBackend

    shape = shape_named("salted_time")
    suffix = uuid.uuid4().hex[:8]
    Model, Twin = shape.make_model("h" + suffix), shape.make_model("i" + suffix)
    faulty = FaultyBackend(backend)
    db = ts.AsyncConnection(ThreadedBackend(faulty))  # type: ignore[arg-type]
    await db.create_tables(Model, Twin)
    events = sorted(draw_entities(shape, Model, random.Random(8), 20), key=lambda e: e.time)
    await db.save_all(events)
    doomed = events[-4:]
    doomed_ids = {identity(shape, e) for e in doomed}
    spec = ts.spec_of(Model)
    faulty.fail[spec.alternates[0].table] = MutationStatus.UNKNOWN
    result = await db.delete_all(doomed, raise_on_failure=False)
    assert {r.status for r in result.results} == {ts.WriteStatus.PARTIAL}
    faulty.fail.clear()
    await db.save_all([Twin(**fields_of(e)) for e in events
                       if identity(shape, e) not in doomed_ids])
    assert dump(backend, Model) != dump(backend, Twin)
    report = await ts.repair_async(Model, datetime(1970, 1, 1, tzinfo=UTC),
                                   datetime(2100, 1, 1, tzinfo=UTC), connection=db)
    assert report.ok and report.alternate_events_deleted >= 1
    assert dump(backend, Model) == dump(backend, Twin)


def test_deleting_an_amended_event_deletes_every_version(backend: Backend) -> None:
    @ts.model(table="del_close_" + uuid.uuid4().hex[:8], family="STOCK")
    class Close:
        symbol: str = ts.key()
        time: datetime = ts.timestamp(format="%Y%m%d")
        price: float = ts.value("PRICE", codec=ts.Text(float))
        entered: datetime = ts.version()

    conn = ts.Connection(backend)
    conn.create_tables(Close)
    day = datetime(2015, 3, 1, tzinfo=UTC)
    other = Close(symbol="ZXZZT", time=day + timedelta(days=1), price=1.0, entered=day)
    conn.save_all([Close(symbol="ZXZZT", time=day, price=559.40,
                         entered=day + timedelta(hours=21)),
                   Close(symbol="ZXZZT", time=day, price=558.40,
                         entered=day + timedelta(days=1, hours=9)), other])
    # Named by key and time: the version field given need not be a stored one.
    conn.delete(Close(symbol="ZXZZT", time=day, price=0.0, entered=day))
    table = ts.spec_of(Close).table
    rows = list(backend.read_rows(ReadRequest(table, RowSet())))
    assert len(rows) == 1 and all(c.timestamp == to_micros(day) for c in rows[0].cells)
    assert list(conn.range(Close, day, day + timedelta(days=3), symbol="ZXZZT").history()) == [
        other]


# -- version limits: pushed past the limit is gone for good ------------------------------
#
# A bucket row keeps ``max_versions`` versions per column; reads apply the limit as a
# filter, as if GC had run. An event that newer ones pushed past the limit is gone for
# good: deleting the newer ones must not bring it back, whether GC collected it yet
# (the emulator, Bigtable, in the background) or not (the embedded store, never). The
# expected answers below are worked out by hand from that rule.

MINUTE = timedelta(minutes=1)


def limited_model(layout: str, *, alternate: bool = False, current: bool = False) -> type:
    """A bucket model keeping 2 versions per column: an hour's row per host and metric."""
    suffix = uuid.uuid4().hex[:8]
    alternates = [ts.alternate(f"gc_alt_{suffix}", "host", "time", "metric")] if alternate \
        else []
    if layout == "cells":
        @ts.model(table=f"gc_cells_{suffix}", family="F", layout=ts.cells(), max_versions=2,
                  alternates=alternates, current=f"gc_cur_{suffix}" if current else None)
        class Cells:
            host: str = ts.key()
            metric: str = ts.key()
            time: datetime = ts.timestamp(bucket="hour")
            value: int = ts.value("V")
            note: Optional[str] = ts.value("N", default=None)  # noqa: UP045

        return Cells

    @ts.model(table=f"gc_columns_{suffix}", family="F", layout=ts.columns(), max_versions=2,
              alternates=alternates)
    class Columns:
        host: str = ts.key()
        metric: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        value: int = ts.value()  # the qualifier: equal values share a column

    return Columns


def limited_events(Model: type, n: int) -> list[Any]:
    """``n`` events a minute apart in one bucket row, every one in the same columns."""
    return [Model(host="h", metric="cpu", time=T + (m + 1) * MINUTE, value=7)
            for m in range(n)]


def raw_times(backend: Backend, table: str) -> dict[bytes, list[tuple[str, bytes, int]]]:
    """Every cell version of a table, unfiltered: (family, qualifier, timestamp) per row."""
    return {row.key: sorted((c.family, c.qualifier, c.timestamp) for c in row.cells)
            for row in backend.read_rows(ReadRequest(table, RowSet()))}


def cell_times(backend: Backend, table: str) -> set[int]:
    return {t for cells in raw_times(backend, table).values() for _, _, t in cells}


def collects_when_asked(backend: Backend) -> bool:
    """Whether GC runs only when a test asks (the embedded store), not at any moment."""
    return hasattr(backend, "collect_garbage")


def ms_of(*events: Any) -> set[int]:
    return {to_micros(e.time) for e in events}


def whole_range(conn: ts.Connection, Model: type) -> list[Any]:
    return list(conn.range(Model, T, T + timedelta(days=1), host="h", metric="cpu"))


@pytest.mark.parametrize("layout", ["cells", "columns"])
def test_deleting_the_newest_leaves_an_event_past_the_limit_gone(
        backend: Backend, layout: str) -> None:
    Model = limited_model(layout)
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    e1, e2, e3 = limited_events(Model, 3)
    conn.save_all([e1, e2, e3])
    assert whole_range(conn, Model) == [e2, e3]  # e1 is past the limit of 2
    conn.delete(e3)
    # e2 remains; e1 was pushed past the limit by e3: gone for good.
    assert whole_range(conn, Model) == [e2]
    assert cell_times(backend, ts.spec_of(Model).table) == ms_of(e2)


@pytest.mark.parametrize("batch_size", [1, 10])
@pytest.mark.parametrize("layout", ["cells", "columns"])
def test_deleting_many_leaves_no_version_past_the_limit(
        backend: Backend, layout: str, batch_size: int) -> None:
    Model = limited_model(layout)
    conn = ts.Connection(backend, batch_size=batch_size)
    conn.create_tables(Model)
    events = limited_events(Model, 6)
    conn.save_all(events)
    assert whole_range(conn, Model) == events[4:]
    assert conn.delete_all([events[5], events[3]]).ok
    # events[:4] were past the limit of 2 once events[4:] were saved: all gone.
    assert whole_range(conn, Model) == [events[4]]
    assert cell_times(backend, ts.spec_of(Model).table) == ms_of(events[4])
    assert conn.delete_all([events[4]]).ok
    assert whole_range(conn, Model) == []
    assert raw_times(backend, ts.spec_of(Model).table) == {}, "no row is left"


@pytest.mark.parametrize("layout", ["cells", "columns"])
def test_a_range_delete_leaves_no_version_past_the_limit(backend: Backend, layout: str) -> None:
    Model = limited_model(layout)
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    e1, e2, e3, e4 = limited_events(Model, 4)
    conn.save_all([e1, e2, e3, e4])
    result = conn.range(Model, e4.time, T + timedelta(days=1), host="h", metric="cpu").delete()
    assert [r.entity for r in result.written] == [e4]
    assert whole_range(conn, Model) == [e3]
    assert cell_times(backend, ts.spec_of(Model).table) == ms_of(e3)


def test_only_events_past_the_limit_of_a_touched_column_go(backend: Backend) -> None:
    """Columns apart count apart: a delete in one column leaves another's events."""
    Model = limited_model("columns")
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    sevens = [Model(host="h", metric="cpu", time=T + m * MINUTE, value=7) for m in (1, 2, 3)]
    eights = [Model(host="h", metric="cpu", time=T + m * MINUTE, value=8) for m in (4, 5, 6)]
    conn.save_all([*sevens, *eights])
    assert whole_range(conn, Model) == [*sevens[1:], *eights[1:]]
    conn.delete(sevens[2])  # column 7 loses its newest: its oldest (past the limit) goes
    assert whole_range(conn, Model) == [sevens[1], *eights[1:]]
    # Column 8 was not touched: none of its cells is deleted. Its version past the
    # limit stays stored, unseen, until GC, which may run at any moment on Bigtable.
    stored = cell_times(backend, ts.spec_of(Model).table)
    kept = ms_of(sevens[1], *eights)
    if collects_when_asked(backend):
        assert stored == kept
    else:
        assert stored in (kept, kept - ms_of(eights[0]))


def test_the_current_row_keeps_no_event_past_the_limit(backend: Backend) -> None:
    """Each save wrote the current row: the events past the limit left cells there."""
    Model = limited_model("cells", current=True)
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    e1, e2, e3 = limited_events(Model, 3)
    for e in (e1, e2, e3):
        conn.save(e)
    assert conn.delete_all([e2, e3]).ok  # every event reads return: e1 is gone already
    assert whole_range(conn, Model) == []
    with pytest.raises(Model.DoesNotExist):
        conn.latest(Model, host="h", metric="cpu")
    assert list(conn.current(Model)) == []
    assert raw_times(backend, ts.spec_of(Model).table) == {}
    current = ts.spec_of(Model).current_table
    assert current is not None
    assert list(backend.read_rows(ReadRequest(current, RowSet(),
                                              ReadFilter(versions_kept=1)))) == []


def test_a_delete_leaves_no_version_past_the_limit_in_alternate_rows(backend: Backend) -> None:
    Model = limited_model("cells", alternate=True)
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    e1, e2, e3 = limited_events(Model, 3)
    conn.save_all([e1, e2, e3])
    assert list(conn.range(Model, T, T + timedelta(days=1), host="h")) == [e2, e3]
    conn.delete(e3)
    assert whole_range(conn, Model) == [e2]
    # host alone is a prefix of the alternate key only: the alternate answers.
    alt = ts.spec_of(Model).alternates[0].table
    assert {r.table for r in conn.range(Model, T, T + timedelta(days=1), host="h").explain(
        backend.features).requests} == {alt}
    assert list(conn.range(Model, T, T + timedelta(days=1), host="h")) == [e2]
    assert cell_times(backend, alt) == ms_of(e2)


def test_repair_leaves_no_version_past_the_limit_in_alternate_rows(backend: Backend) -> None:
    Model = limited_model("cells", alternate=True)
    faulty = FaultyBackend(backend)
    conn = ts.Connection(faulty)  # type: ignore[arg-type]
    conn.create_tables(Model)
    e1, e2, e3 = limited_events(Model, 3)
    conn.save_all([e1, e2, e3])
    alt = ts.spec_of(Model).alternates[0].table
    faulty.fail[alt] = MutationStatus.FAILED
    result = conn.delete_all([e3], raise_on_failure=False)
    assert result.results[0].status is ts.WriteStatus.PARTIAL
    faulty.fail.clear()
    report = ts.repair(Model, T, T + timedelta(days=1), connection=conn)
    assert report.ok and report.alternate_events_deleted == 1
    assert list(conn.range(Model, T, T + timedelta(days=1), host="h")) == [e2]
    assert cell_times(backend, alt) == ms_of(e2)


def test_a_correction_that_moves_a_columns_event_leaves_no_version_past_the_limit(
        backend: Backend) -> None:
    """ts.columns(): a new value is a new column, and the old cell is deleted."""
    Model = limited_model("columns")
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    e1, e2, e3 = limited_events(Model, 3)
    conn.save_all([e1, e2, e3])
    moved = Model(host="h", metric="cpu", time=e3.time, value=8)
    conn.save(moved)  # column 7 loses e3: e1, past its limit, must not come back
    assert whole_range(conn, Model) == [e2, moved]
    assert cell_times(backend, ts.spec_of(Model).table) == ms_of(e2, moved)
    updated = conn.update(Model, host="h", metric="cpu", time=e2.time, value=9)
    assert whole_range(conn, Model) == [updated, moved]


def test_an_event_saved_again_beside_a_correction_is_kept(backend: Backend) -> None:
    """e1, pushed past the limit of column 7, is saved again in the batch whose
    correction moves e2 out of that column: column 7 then holds e1 and e3, within
    the limit, so e1 is back (found by tests/backends/test_cursors.py)."""
    Model = limited_model("columns")
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    e1, e2, e3 = limited_events(Model, 3)
    conn.save_all([e1, e2, e3])
    moved = Model(host="h", metric="cpu", time=e2.time, value=8)
    assert conn.save_all([e1, moved]).ok
    assert whole_range(conn, Model) == [e1, moved, e3]
    assert cell_times(backend, ts.spec_of(Model).table) == ms_of(e1, moved, e3)


async def test_async_delete_leaves_no_version_past_the_limit(backend: Backend) -> None:
    Model = limited_model("cells")
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        await db.create_tables(Model)
        e1, e2, e3, e4 = limited_events(Model, 4)
        await db.save_all([e1, e2, e3, e4])
        assert (await db.delete_all([e4])).ok
        assert [e async for e in db.range(Model, T, T + timedelta(days=1), host="h",
                                          metric="cpu")] == [e3]
        result = await db.range(Model, T, T + timedelta(days=1), host="h",
                                metric="cpu").delete()
        assert [r.entity for r in result.written] == [e3]
    assert raw_times(backend, ts.spec_of(Model).table) == {}


def test_the_timestamps_read_of_a_bucket_delete_costs_no_round_trip(backend: Backend) -> None:
    """docs/deleting.md: the read of the rows' cell timestamps goes with the first step."""
    from tsmodel.plan.deletes import DeletePlan, delete_steps

    Model = limited_model("cells")
    conn = ts.Connection(backend)
    conn.create_tables(Model)
    events = limited_events(Model, 3)
    conn.save_all(events)
    seen: list[Any] = []
    assert drive(watched(delete_steps(DeletePlan(events[2:], backend.features), batch_size=10),
                         seen), conn).ok
    calls = [step.calls for step in seen]
    assert len(calls) == 2, "a read, then the main table's write"
    reads = calls[0]
    assert len(reads) == 2 and [r.filter.strip_values for r in reads] == [False, True]
    assert whole_range(conn, Model) == [events[1]]
