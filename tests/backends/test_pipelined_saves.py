"""Pipelined saves: batches out at once, landing in any order, store what one at a time does.

:class:`~tsmodel.plan.schedule.SaveSchedule` hands out the calls of several
batches at once, and companion writes with their main writes. Here an
executor lands the calls it was handed in a random order (a call handed
out early may land after ones handed out later), and the tables must then
hold exactly what the same save writes one call after the other, main
table first (``WriteFlow(batches=1, companions_with_main=False)``), which
the oracle harness (``tests/oracle``) checks against its reference. The
entities are drawn from the oracle's model shapes, with many versions of
the same events (same key and time, other values) spread over batches,
corrections of promoted values, and events of the same millisecond.

Then: the bounds of a flow hold; companions go with the main write only
once the main table has taken a write on the connection; the sync
executor really has several calls out at once on the emulator.
"""

from __future__ import annotations

import random
import threading
import tracemalloc
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests.oracle.shapes import SHAPES, Shape
from tsmodel.backends.base import (
    Backend,
    MutationOutcome,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowSet,
    TableSpec,
)
from tsmodel.backends.embedded import EmbeddedBackend
from tsmodel.plan.calls import Read, Write
from tsmodel.plan.schedule import SaveSchedule, WriteFlow
from tsmodel.plan.writes import prepare_save

UTC = timezone.utc
T0 = datetime(2015, 3, 1, tzinfo=UTC)

#: The shapes whose saves differ most: row per event (current-value rows that
#: clear optional values), salted with a salt promoted into an alternate key and
#: columns (both read before writing a correction), cells, offsets, serialized.
PIPELINE_SHAPES = [s for s in SHAPES if s.name in (
    "rows", "salted_time", "cells", "offsets", "columns", "serialized")]


def tables_of(model: type) -> list[str]:
    spec = ts.spec_of(model)
    return [spec.table, *([spec.current_table] if spec.current_table else []),
            *(a.table for a in spec.alternates)]


def dump(backend: Backend, model: type) -> list[dict[bytes, list[tuple[Any, ...]]]]:
    """Every cell of every table the model writes, table by table (names left out).

    The current-value table as its GC rule keeps it, one version per column:
    an older event landing after a newer one is not written there (its row
    holds a newer cell), landing before it leaves versions GC collects.
    """
    out = []
    current = ts.spec_of(model).current_table
    for table in tables_of(model):
        rows: dict[bytes, list[tuple[Any, ...]]] = {}
        kept = ReadFilter(cells_per_column=1) if table == current else ReadFilter()
        for row in backend.read_rows(ReadRequest(table, RowSet(), kept)):
            rows[row.key] = sorted((c.family, c.qualifier, c.timestamp, c.value)
                                   for c in row.cells)
        out.append(rows)
    return out


def draw_entities(shape: Shape, model: type, rng: random.Random, n: int) -> list[Any]:
    """``n`` events of few entities and times: many share key and time (versions)."""
    entities = rng.sample(shape.entities, min(len(shape.entities), rng.randint(1, 3)))
    times = rng.sample(shape.times, min(len(shape.times), rng.randint(1, 4)))
    out = []
    for _ in range(n):
        fields = dict(rng.choice(entities))
        fields["time"] = datetime.fromtimestamp(0, UTC) + timedelta(
            microseconds=rng.choice(times))
        for v in shape.values:
            fields[v.name] = rng.choice(v.choices)
        out.append(model(**fields))
    return out


def fields_of(entity: Any) -> dict[str, Any]:
    return {f.name: getattr(entity, f.name) for f in attrs.fields(type(entity)) if f.init}


def execute(backend: Backend, step: Read | Write) -> Any:
    if isinstance(step, Write):
        call = step.write
        try:
            return backend.mutate_rows(call.table, list(call.rows))
        except ts.BackendError as exc:
            return [MutationOutcome(MutationStatus.FAILED, exc)] * len(call.rows)
    try:
        return list(backend.read_rows(step.request))
    except ts.BackendError as exc:
        return exc


def land_in_any_order(backend: Backend, schedule: SaveSchedule, rng: random.Random) -> int:
    """Carry out a save, landing the calls handed out in a random order.

    Returns the most batches seen out at once (checked against the flow on the way).
    """
    pending: list[tuple[Any, Any]] = []
    most = 0
    while not schedule.done:
        pending += schedule.ready()
        assert pending, "the schedule is not done, yet hands out nothing to wait for"
        out = {ticket[0] for ticket, _ in pending}
        most = max(most, len(out))
        assert len(out) <= schedule.flow.batches
        ticket, call = pending.pop(rng.randrange(len(pending)))
        schedule.answer(ticket, execute(backend, call))
    return most


@pytest.mark.parametrize("shape", PIPELINE_SHAPES, ids=lambda s: s.name)
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), batch_size=st.integers(1, 6),
       batches=st.integers(1, 6), trust=st.booleans(), streamed=st.booleans())
def test_any_landing_order_stores_what_one_at_a_time_stores(
        shape: Shape, seed: int, n: int, batch_size: int, batches: int, trust: bool,
        streamed: bool) -> None:
    rng = random.Random(seed)
    backend = EmbeddedBackend()
    try:
        suffix = uuid.uuid4().hex[:8]
        piped, serial = shape.make_model("p" + suffix), shape.make_model("s" + suffix)
        conn = ts.Connection(backend, batch_size=batch_size,
                             flow=WriteFlow(batches=1, companions_with_main=False))
        conn.create_tables(piped, serial)
        events = draw_entities(shape, piped, rng, n)
        twins = [serial(**fields_of(e)) for e in events]

        expected = conn.save_all(twins, raise_on_failure=False, accept_expired=True)
        trusted = set(tables_of(piped)[:1]) if trust else set()
        if streamed:
            schedule = SaveSchedule.streaming(iter(events), batch_size,
                                              WriteFlow(batches=batches), trusted=trusted,
                                              accept_expired=True)
        else:
            schedule = SaveSchedule(prepare_save(events, accept_expired=True), batch_size,
                                    WriteFlow(batches=batches), trusted=trusted)
        land_in_any_order(backend, schedule, rng)
        got = schedule.result()

        assert [r.status for r in got.results] == [r.status for r in expected.results]
        assert all(r.status is ts.WriteStatus.WRITTEN for r in got.results)
        assert dump(backend, piped) == dump(backend, serial)
    finally:
        backend.close()


def test_batches_that_write_the_same_cell_land_in_input_order() -> None:
    """Two versions of one event in different batches: the later one must win."""
    shape = next(s for s in SHAPES if s.name == "rows")
    backend = EmbeddedBackend()
    Model = shape.make_model(uuid.uuid4().hex[:8])
    ts.Connection(backend).create_tables(Model)
    t = T0 + timedelta(hours=1)
    first = Model(site="a", host=1, time=t, x=1, note=None)
    later = Model(site="a", host=1, time=t, x=2, note="n")
    schedule = SaveSchedule(prepare_save([first, later], False), 1, WriteFlow(batches=4),
                            trusted={ts.spec_of(Model).table})
    handed = schedule.ready()
    assert {ticket[0] for ticket, _ in handed} == {1}, "the second batch waits for the first"
    # Land the first batch's calls in reverse: then the second batch may go.
    for ticket, call in reversed(handed):
        schedule.answer(ticket, execute(backend, call))
    for ticket, call in schedule.ready():
        schedule.answer(ticket, execute(backend, call))
    assert schedule.done and schedule.result().ok
    assert ts.Connection(backend).latest(Model, site="a", host=1) == later
    backend.close()


def test_a_flow_bounds_the_batches_and_bytes_out() -> None:
    shape = next(s for s in SHAPES if s.name == "rows")
    backend = EmbeddedBackend()
    Model = shape.make_model(uuid.uuid4().hex[:8])
    ts.Connection(backend).create_tables(Model)
    events = [Model(site="a", host=h, time=T0 + timedelta(seconds=i), x=i, note="n" * 100)
              for h in range(1, 4) for i in range(30)]
    for flow, most_expected in ((WriteFlow(batches=3), 3), (WriteFlow(batches=1), 1),
                                (WriteFlow(batches=8, bytes=1), 1)):
        schedule = SaveSchedule(prepare_save(events, False), 10, flow)
        assert land_in_any_order(backend, schedule, random.Random(1)) == most_expected
        assert schedule.result().ok
    backend.close()


def test_a_batch_that_reads_first_goes_alone() -> None:
    """Corrections read the stored events first: no other batch is out meanwhile."""
    shape = next(s for s in SHAPES if s.name == "columns")
    backend = EmbeddedBackend()
    Model = shape.make_model(uuid.uuid4().hex[:8])
    ts.Connection(backend).create_tables(Model)
    assert ts.spec_of(Model).corrections_read_first
    events = draw_entities(shape, Model, random.Random(3), 40)
    schedule = SaveSchedule(prepare_save(events, True), 5, WriteFlow(batches=6))
    assert land_in_any_order(backend, schedule, random.Random(4)) == 1
    backend.close()


def test_a_flow_refuses_bounds_below_one() -> None:
    with pytest.raises(ts.ConfigurationError,
                       match="'batches' must be a whole number of at least 1, got 0"):
        WriteFlow(batches=0)
    with pytest.raises(ts.ConfigurationError,
                       match="'bytes' must be a whole number of at least 1, got -5"):
        WriteFlow(bytes=-5)


# -- streamed saves ---------------------------------------------------------------------


def stream_of(Metric: Any, n: int, bad_at: int | None = None) -> Iterator[Any]:
    """A generator of events; the one at ``bad_at`` cannot be stored."""
    note = "n" * 1000
    for i in range(n):
        host = "h#bad" if i == bad_at else f"h{i % 5}"
        yield Metric(host=host, time=T0 + timedelta(seconds=i), v=i, note=note)


def test_a_streamed_save_stops_at_the_batch_of_a_bad_entity(backend: Backend) -> None:
    Metric = metric_model()
    conn = ts.Connection(backend, batch_size=10)
    conn.create_tables(Metric)
    with pytest.raises(ts.KeyEncodingError, match="h#bad") as info:
        conn.save_all(stream_of(Metric, 100, bad_at=57), validate_first=False)
    result = info.value.result
    assert result is not None and result.ok
    assert [e.v for e in (r.entity for r in result.results)] == list(range(50))
    stored = sorted(e.v for e in conn.range(Metric, T0, T0 + timedelta(days=1),
                                            allow_scan=True))
    assert stored == list(range(50)), "the bad batch and those after it are not sent"
    # The same input validated first: nothing at all is written.
    Other = metric_model()
    conn.create_tables(Other)
    with pytest.raises(ts.KeyEncodingError) as first:
        conn.save_all(stream_of(Other, 100, bad_at=57))
    assert first.value.result is None
    assert list(conn.range(Other, T0, T0 + timedelta(days=1), allow_scan=True)) == []


def test_a_streamed_save_lets_go_of_what_it_has_written() -> None:
    """Peak memory: the batches in flight, not every event's cells."""
    backend = EmbeddedBackend()
    Metric = metric_model()
    conn = ts.Connection(backend, batch_size=100)
    conn.create_tables(Metric)
    peaks = {}
    for validate_first in (True, False):
        tracemalloc.start()
        result = conn.save_all(stream_of(Metric, 4000), validate_first=validate_first)
        peaks[validate_first] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert result.ok and len(result) == 4000
    # 4,000 encoded values of 1,000 bytes (4 MB) held at once, or a few batches of them.
    assert peaks[True] > 4_000_000
    assert peaks[False] < peaks[True] / 2, peaks
    backend.close()


def test_a_streamed_save_checks_retention_batch_by_batch(backend: Backend) -> None:
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"PIPE_RET_{suffix}", family="M", retention=timedelta(days=30))
    class Kept:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        v: int = ts.value("V")

    conn = ts.Connection(backend, batch_size=5)
    conn.create_tables(Kept)
    now = datetime.now(UTC).replace(microsecond=0)
    events = [Kept(host="h", time=now - timedelta(minutes=i), v=i) for i in range(12)]
    events[8] = Kept(host="h", time=now - timedelta(days=90), v=8)
    with pytest.raises(ts.RetentionError) as info:
        conn.save_all(iter(events), validate_first=False)
    assert len(info.value.result) == 5
    assert conn.save_all(iter(events), validate_first=False, accept_expired=True).ok


# -- companions with the main write -------------------------------------------------------


def metric_model() -> Any:
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"PIPE_{suffix}", family="M", current=f"PIPE_CUR_{suffix}")
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        v: int = ts.value("V")
        note: str | None = ts.value("N", default=None)

    return Metric


def table_of(step: Read | Write) -> str:
    return step.write.table if isinstance(step, Write) else step.request.table


def steps_of_one_save(conn: ts.Connection, entity: Any) -> list[list[str]]:
    """The tables of the calls handed out together, step by step, for one save."""
    schedule = SaveSchedule(prepare_save([entity], False), conn.batch_size, conn.flow,
                            trusted=conn._trusted)
    steps = []
    while not schedule.done:
        handed = schedule.ready()
        steps.append(sorted(table_of(step) for _, step in handed))
        for ticket, call in handed:
            schedule.answer(ticket, execute(conn.backend, call))
    return steps


def test_companions_go_with_the_main_write_once_it_took_one(backend: Backend) -> None:
    Metric = metric_model()
    spec = ts.spec_of(Metric)
    conn = ts.Connection(backend)
    conn.create_tables(Metric)
    e = [Metric(host="h", time=T0 + timedelta(seconds=i), v=i) for i in range(3)]
    # A fresh connection: the main table first, then the current-value table.
    assert steps_of_one_save(conn, e[0]) == [[spec.table], [spec.current_table]]
    # It took a write: one step, both tables (one round trip for a save()).
    assert steps_of_one_save(conn, e[1]) == [sorted([spec.table, spec.current_table])]
    # Not with the flow that asks the main outcome first.
    strict = ts.Connection(backend, flow=WriteFlow(companions_with_main=False))
    strict._trusted.add(spec.table)
    assert steps_of_one_save(strict, e[2]) == [[spec.table], [spec.current_table]]


def test_a_main_table_gone_since_it_took_writes(backend: Backend) -> None:
    """The companion went with the main write: FAILED, the companion outcome kept,
    the table no longer trusted, and repair removes what the current row holds."""
    Metric = metric_model()
    spec = ts.spec_of(Metric)
    conn = ts.Connection(backend)
    conn.create_tables(Metric)
    old = Metric(host="h", time=T0, v=1)
    conn.save(old)
    conn.save(Metric(host="h", time=T0 + timedelta(seconds=1), v=2))  # trusted now
    backend.delete_table(spec.table)
    backend.create_table(TableSpec(spec.table, (("OTHER", ts.GcRule(max_versions=1)),)))
    new = Metric(host="h", time=T0 + timedelta(seconds=2), v=3)
    result = conn.save_all([new], raise_on_failure=False)
    (r,) = result.results
    assert r.status is ts.WriteStatus.FAILED
    assert [t for t, _ in r.tables] == [spec.table, spec.current_table]
    assert dict(r.tables)[spec.current_table].status is MutationStatus.APPLIED
    assert spec.table not in conn._trusted
    # The current-value row holds an event the main table lacks; a repair fixes it.
    assert conn.latest(Metric, host="h") == new
    backend.delete_table(spec.table)
    conn.create_tables(Metric)
    conn.save(old)
    report = ts.repair(Metric, T0, T0 + timedelta(days=1), connection=conn)
    assert report.ok and report.current_rows_fixed == 1
    assert conn.latest(Metric, host="h") == old


# -- the sync executor has several calls out at once ------------------------------------


class Meeting:
    """A backend that holds main-table writes 2 to ``n + 1`` until ``n`` are out at once.

    The first goes through: a fresh connection sends its first batch alone.
    """

    def __init__(self, inner: Backend, table: str, n: int) -> None:
        self.inner = inner
        self.features = inner.features
        self.table = table
        self.n = n
        self.barrier = threading.Barrier(n, timeout=20)
        self.calls = 0
        self.lock = threading.Lock()

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        if table == self.table:
            with self.lock:
                self.calls += 1
                held = 2 <= self.calls <= self.n + 1
            if held:
                self.barrier.wait()  # raises BrokenBarrierError unless n are out together
        return self.inner.mutate_rows(table, entries)

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        return self.inner.read_rows(request)

    def close(self) -> None:
        pass


def test_the_sync_executor_has_batches_out_at_once(backend: Backend) -> None:
    if not backend.features.concurrent_calls:
        pytest.skip("the embedded store makes its calls one after the other")
    Metric = metric_model()
    ts.Connection(backend).create_tables(Metric)
    meeting = Meeting(backend, ts.spec_of(Metric).table, 3)
    conn = ts.Connection(meeting, batch_size=10, flow=WriteFlow(batches=3))  # type: ignore[arg-type]
    events = [Metric(host=f"h{i % 7}", time=T0 + timedelta(seconds=i), v=i) for i in range(60)]
    assert conn.save_all(events).ok
    assert meeting.calls == 6 and not meeting.barrier.broken
    got = list(conn.range(Metric, T0, T0 + timedelta(days=1), allow_scan=True))
    assert sorted(got, key=lambda m: (m.host, m.time)) == sorted(
        events, key=lambda m: (m.host, m.time))
    conn.close()
