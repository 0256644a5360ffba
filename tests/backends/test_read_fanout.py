"""Reads of several requests (a salt value each, or a key range each), on every backend.

A salted model's range read is eight requests and a guard read. The sync API
starts them all before it takes rows from any (Cloud Bigtable sends each
request as it starts it, so they stream side by side) and takes their rows
in the thread that iterates; the async API reads each in a task of its own
when the backend's features say reads gain from it (Cloud Bigtable), and in
the consuming task otherwise. The async tests force both ways on both
stores. Answers are computed from the events saved, sorted in Python.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tests.backends.passthrough import AsyncPassThrough, PassThrough
from tests.faults.proxy import FaultProxy
from tsmodel.backends.base import (
    AsyncBackend,
    Backend,
    MutationOutcome,
    ReadRequest,
    Row,
    RowMutation,
)
from tsmodel.backends.threaded import ThreadedBackend
from tsmodel.run import fanout

SALTS = 8
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
STEP = timedelta(seconds=1)
#: A fail-safe only: a read side by side passes the barrier at once.
BARRIER_SECONDS = 60.0


def reading_model() -> Any:
    """Salted on the time: a range read is one request per salt, merged by time."""
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"READING_{suffix}", family="M")
    class Reading:
        kind = ts.constant("READING")
        salt = ts.salt(SALTS, on="time")
        time: datetime = ts.timestamp(unit="ms")
        sensor: str = ts.value("SENSOR")
        level: int = ts.value("LEVEL")
        note: str | None = ts.value("NOTE", default=None)

    return Reading


def sensor_model() -> Any:
    """Salted on the sensor: a scan of every sensor is one prefix per salt, concatenated."""
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"SENSOR_{suffix}", family="M")
    class Sensor:
        kind = ts.constant("SENSOR")
        salt = ts.salt(SALTS, on="sensor")
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        level: int = ts.value("LEVEL")

    return Sensor


def readings(model: Any, n: int = 200) -> list[Any]:
    rng = random.Random(n)
    events = [model(time=T0 + i * STEP, sensor=f"s{i % 7}", level=rng.randrange(100),
                    note="check" if i % 5 == 0 else None) for i in range(n)]
    rng.shuffle(events)
    return events


def sensors(model: Any, n: int = 160) -> list[Any]:
    return [model(sensor=f"s{i % 16}", time=T0 + i * STEP, level=i) for i in range(n)]


# -- backends that watch the reads ------------------------------------------------------


class Gauge(PassThrough):
    """A backend over another that counts reads started, reads being iterated and
    rows taken, and may fail a request after some rows."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.features = inner.features
        self.lock = threading.Lock()
        self.open = self.rows = 0
        self.opened: list[ReadRequest] = []
        #: How many reads were started when the first row of any was taken.
        self.started_by_first_row: int | None = None
        self.fail: dict[ReadRequest, int] = {}  # request -> rows given before it fails

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        with self.lock:
            self.opened.append(request)
        return self._rows(request, self.inner.read_rows(request))  # started, as the inner one

    def _rows(self, request: ReadRequest, rows: Iterator[Row]) -> Iterator[Row]:
        with self.lock:
            self.open += 1
        try:
            for n, row in enumerate(rows):
                if self.fail.get(request) == n:
                    raise ts.BackendError(f"injected: the read of {request.rows} broke")
                with self.lock:
                    self.rows += 1
                    if self.started_by_first_row is None:
                        self.started_by_first_row = len(self.opened)
                yield row
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()
            with self.lock:
                self.open -= 1

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        return self.inner.mutate_rows(table, entries)

    def close(self) -> None:
        pass  # the session's backend stays open


class AGauge(AsyncPassThrough):
    """:class:`Gauge` for an asyncio backend."""

    def __init__(self, inner: AsyncBackend, *, concurrent: bool | None = None) -> None:
        self.inner = inner
        self.features = inner.features if concurrent is None else attrs.evolve(
            inner.features, concurrent_calls=concurrent)
        self.open = self.most_open = self.rows = 0
        self.opened: list[ReadRequest] = []
        self.fail: dict[ReadRequest, int] = {}
        self.barrier: int | None = None  # reads to wait for
        self._all_open = asyncio.Event()

    async def read_rows(self, request: ReadRequest) -> AsyncIterator[Row]:
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        self.opened.append(request)
        rows = self.inner.read_rows(request)
        try:
            if self.barrier is not None:
                if self.open >= self.barrier:
                    self._all_open.set()
                await asyncio.wait_for(self._all_open.wait(), BARRIER_SECONDS)
            n = 0
            async for row in rows:
                if self.fail.get(request) == n:
                    raise ts.BackendError(f"injected: the read of {request.rows} broke")
                n += 1
                self.rows += 1
                yield row
        finally:
            aclose = getattr(rows, "aclose", None)
            if aclose is not None:
                await aclose()
            self.open -= 1

    async def mutate_rows(self, table: str,
                          entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        return await self.inner.mutate_rows(table, entries)

    async def close(self) -> None:
        pass


# -- the queries and their answers ------------------------------------------------------


def reading_cases(model: Any, events: list[Any]) -> list[tuple[str, Callable[[Any], Any],
                                                                 list[Any]]]:
    """(name, query on a QuerySet of the model, the answer from the events saved)."""
    by_time = sorted(events, key=lambda e: e.time)
    start, end = T0 + 17 * STEP, T0 + 151 * STEP
    inside = [e for e in by_time if start <= e.time < end]

    def only_level(e: Any) -> Any:
        return model(time=e.time, sensor=None, level=e.level, note=None)

    return [
        ("all", lambda qs: qs.range(T0, T0 + 1000 * STEP), by_time),
        ("range", lambda qs: qs.range(start, end), inside),
        ("newest_first", lambda qs: qs.range(start, end).newest_first(), inside[::-1]),
        ("limit", lambda qs: qs.range(start, end).limit(9), inside[:9]),
        ("newest_first limit", lambda qs: qs.range(start, end).newest_first().limit(9),
         inside[::-1][:9]),
        ("only", lambda qs: qs.range(start, end).only("level"), [only_level(e) for e in inside]),
        ("only newest_first limit",
         lambda qs: qs.range(start, end).only("level").newest_first().limit(30),
         [only_level(e) for e in inside[::-1][:30]]),
        ("limit 0", lambda qs: qs.range(start, end).limit(0), []),
        ("empty", lambda qs: qs.range(T0 - 9 * STEP, T0), []),
    ]


def sensor_cases(events: list[Any]) -> list[tuple[str, Callable[[Any], Any], list[Any]]]:
    in_key_order = sorted(events, key=ts.row_key)
    s3 = [e for e in in_key_order if e.sensor == "s3"]
    return [
        ("scan", lambda qs: qs.range(T0, T0 + 1000 * STEP, allow_scan=True), in_key_order),
        ("scan limit", lambda qs: qs.range(T0, T0 + 1000 * STEP, allow_scan=True).limit(25),
         in_key_order[:25]),
        ("scan newest_first",
         lambda qs: qs.range(T0, T0 + 1000 * STEP, allow_scan=True).newest_first(),
         in_key_order[::-1]),
        ("one sensor", lambda qs: qs.range(T0, T0 + 1000 * STEP, sensor="s3"), s3),
    ]


SIDE_BY_SIDE = pytest.mark.parametrize("side_by_side", [False, True],
                                       ids=["one-after-another", "side-by-side"])


def test_salted_reads_give_the_events_saved_in_order(backend: Backend) -> None:
    Reading, Sensor = reading_model(), sensor_model()
    gauge = Gauge(backend)
    conn = ts.Connection(gauge)
    conn.create_tables(Reading, Sensor)
    events, sensed = readings(Reading), sensors(Sensor)
    assert conn.save_all(events).ok and conn.save_all(sensed).ok
    assert len({ts.row_key(e).split(b"#")[1] for e in events}) == SALTS
    assert len(Reading.range(T0, T0 + STEP).using(conn).explain().requests) == SALTS
    names = {c[0] for c in reading_cases(Reading, events)}
    before = set(threading.enumerate())
    for name, query, expected in [*reading_cases(Reading, events), *sensor_cases(sensed)]:
        qs = query((Reading if name in names else Sensor).using(conn))
        assert list(qs) == expected, name
        assert qs.count() == len(expected), name
        assert qs.first() == (expected[0] if expected else None), name
    assert conn.latest(Reading) == max(events, key=lambda e: e.time)
    assert gauge.open == 0, "every read was closed"
    assert not _started(before), "reads start no thread"


@SIDE_BY_SIDE
async def test_async_salted_reads_give_the_events_saved_in_order(backend: Backend,
                                                                 side_by_side: bool) -> None:
    Reading, Sensor = reading_model(), sensor_model()
    async with asynchronous(backend) as ab:
        gauge = AGauge(ab, concurrent=side_by_side)
        db = ts.AsyncConnection(gauge)
        await _saved_in_order(db, Reading, Sensor)
        assert gauge.open == 0, "every read was closed"


async def _instances(name: str, qs: Any) -> list[Any]:
    return [e async for e in qs]


async def _saved_in_order(db: ts.AsyncConnection, Reading: Any, Sensor: Any,
                          read: Callable[[str, Any], Awaitable[list[Any]]] = _instances,
                          ) -> None:
    """Every case of `reading_cases` and `sensor_cases` answered by ``db`` as the
    oracle says: its instances (taken by ``read``), count, first and latest."""
    await db.create_tables(Reading, Sensor)
    events, sensed = readings(Reading), sensors(Sensor)
    assert (await db.save_all(events)).ok and (await db.save_all(sensed)).ok
    names = {c[0] for c in reading_cases(Reading, events)}
    for name, query, expected in [*reading_cases(Reading, events), *sensor_cases(sensed)]:
        qs = query((Reading if name in names else Sensor).using(db))
        assert await read(name, qs) == expected, name
        assert await qs.count() == len(expected), name
        assert await qs.first() == (expected[0] if expected else None), name
    assert await db.latest(Reading) == max(events, key=lambda e: e.time)


# -- side by side: all at once, and no more rows than the limits ----------------------


def test_every_salt_and_the_guard_start_before_any_row_is_taken(backend: Backend) -> None:
    Reading = reading_model()
    gauge = Gauge(backend)
    conn = ts.Connection(gauge)
    conn.create_tables(Reading)
    events = readings(Reading)
    conn.save_all(events)
    qs = Reading.range(T0, T0 + 1000 * STEP).using(conn)
    plan = qs.explain()
    assert list(qs) == sorted(events, key=lambda e: e.time)
    assert gauge.started_by_first_row == len(plan.guards) + SALTS == 9


def test_bigtable_sends_every_salts_request_before_reading_any(emulator: Any) -> None:
    """At a gRPC proxy, each ReadRows call waits until all nine are in: had the
    client waited for one call's rows before sending the next, the first would
    wait for ever (the barrier's fail-safe breaks it). No thread is started."""
    from tsmodel.backends.bigtable import BigtableBackend

    with GateProxy(emulator.host_port) as proxy:
        backend = BigtableBackend("tsmodel-test", "tsmodel-test",
                                  emulator_host=proxy.host_port)
        try:
            conn = ts.Connection(backend)
            Reading = reading_model()
            conn.create_tables(Reading)
            events = readings(Reading)
            conn.save_all(events)
            qs = Reading.range(T0, T0 + 1000 * STEP).using(conn)
            proxy.barrier = threading.Barrier(len(qs.explain().requests) + 1)
            before = set(threading.enumerate()) - proxy.threads()
            assert list(qs) == sorted(events, key=lambda e: e.time)
            assert not _started(before) - proxy.threads(), "no thread in the client"
            assert proxy.most_open == 9
        finally:
            backend.close()


class GateProxy(FaultProxy):
    """A gRPC proxy without faults that holds each ReadRows call at a barrier."""

    def __init__(self, target: str) -> None:
        super().__init__(target, workers=32)
        self.barrier: threading.Barrier | None = None
        self.open = self.most_open = 0

    def threads(self) -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")}

    def read_rows(self, request: bytes, context: Any) -> Iterator[bytes]:
        with self._lock:
            self.open += 1
            self.most_open = max(self.most_open, self.open)
        try:
            if self.barrier is not None:
                self.barrier.wait(BARRIER_SECONDS)
            yield from super().read_rows(request, context)
        finally:
            with self._lock:
                self.open -= 1


async def test_async_every_salt_and_the_guard_stream_at_once(backend: Backend) -> None:
    Reading = reading_model()
    async with asynchronous(backend) as ab:
        gauge = AGauge(ab, concurrent=True)
        db = ts.AsyncConnection(gauge)
        await db.create_tables(Reading)
        events = readings(Reading)
        await db.save_all(events)
        qs = Reading.using(db).range(T0, T0 + 1000 * STEP)
        plan = qs.explain()
        gauge.barrier = len(plan.guards) + len(plan.requests)
        assert [e async for e in qs] == sorted(events, key=lambda e: e.time)
        assert gauge.most_open == len(plan.guards) + SALTS == 9


def test_a_limit_reads_no_more_rows_than_the_requests_allow(backend: Backend) -> None:
    """Merged by time, each salt's request carries the limit; concatenated, the next
    salt is read only once the ones before it fell short of the limit."""
    Reading, Sensor = reading_model(), sensor_model()
    gauge = Gauge(backend)
    conn = ts.Connection(gauge)
    conn.create_tables(Reading, Sensor)
    events, sensed = readings(Reading), sensors(Sensor)
    conn.save_all(events)
    conn.save_all(sensed)

    by_time = Reading.range(T0, T0 + 1000 * STEP).using(conn).limit(3)
    plan = by_time.explain()
    assert all(req.limit == 3 for req in plan.requests)
    gauge.rows = 0
    assert list(by_time) == sorted(events, key=lambda e: e.time)[:3]
    assert gauge.rows <= 3 * SALTS

    in_key_order = sorted(sensed, key=ts.row_key)
    first_salt = [e for e in in_key_order if ts.row_key(e)[:9] == ts.row_key(in_key_order[0])[:9]]
    scan = Sensor.range(T0, T0 + 1000 * STEP, allow_scan=True).using(conn).limit(5)
    plan = scan.explain()
    assert len(first_salt) >= 5 and plan.merge == "concat"
    gauge.rows, gauge.opened = 0, []
    assert list(scan) == in_key_order[:5]
    assert gauge.rows == 5, "the first salt's request carries the limit"
    assert sorted(gauge.opened, key=repr) == sorted([*plan.guards, plan.requests[0]], key=repr), \
        "the first salt held enough: no other salt was read"


# -- stopping early, and failures ----------------------------------------------------------


@pytest.fixture
def small_channels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Channels of 4 rows: the salts' reads are still streaming when the consumer stops."""
    monkeypatch.setattr(fanout, "CHANNEL_ROWS", 4)


STOPS = ["close", "break", "drop", "first"]


def _started(before: set[threading.Thread]) -> set[threading.Thread]:
    """The threads alive now that were not before (``threading.active_count()``
    would also count threads of earlier tests ending meanwhile)."""
    return set(threading.enumerate()) - before


@pytest.mark.parametrize("stop", STOPS)
def test_stopping_early_closes_every_read(backend: Backend, stop: str) -> None:
    Reading = reading_model()
    gauge = Gauge(backend)
    conn = ts.Connection(gauge)
    conn.create_tables(Reading)
    events = readings(Reading)
    conn.save_all(events)
    qs = Reading.range(T0, T0 + 1000 * STEP).using(conn)
    expected = sorted(events, key=lambda e: e.time)
    before = set(threading.enumerate())
    if stop == "first":
        assert qs.first() == expected[0]
    elif stop == "break":
        for got in qs:
            assert got == expected[0]
            assert gauge.open == SALTS, "the salts are being read"
            break
    else:
        items = iter(qs)
        assert next(items) == expected[0]
        assert gauge.open == SALTS, "the salts are being read"
        if stop == "close":
            items.close()  # type: ignore[attr-defined]
        else:
            del items
            gc.collect()
    assert gauge.open == 0, "every read was closed"
    assert gauge.rows < len(events), "the reads stopped early"
    assert not _started(before), "reads start no thread"


def _reads() -> set[asyncio.Task[Any]]:
    """tsmodel's read tasks still pending (one per stream read side by side)."""
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("tsmodel-read")
            and not t.done()}


async def _settled(before: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """The tasks started since ``before`` still pending, once the loop has run the
    finalizers of dropped async generators (a task each) and gRPC its own."""
    for _ in range(1000):
        pending = {t for t in asyncio.all_tasks() - before if not t.done()}
        pending.discard(asyncio.current_task())  # type: ignore[arg-type]
        if not pending:
            return pending
        await asyncio.sleep(0.001)
    return pending


@pytest.mark.parametrize("stop", STOPS)
async def test_async_stopping_early_ends_every_read_and_task(
        backend: Backend, small_channels: None, stop: str) -> None:
    Reading = reading_model()
    async with asynchronous(backend) as ab:
        gauge = AGauge(ab, concurrent=True)
        db = ts.AsyncConnection(gauge)
        await db.create_tables(Reading)
        events = readings(Reading)
        await db.save_all(events)
        qs = Reading.using(db).range(T0, T0 + 1000 * STEP)
        expected = sorted(events, key=lambda e: e.time)
        before = asyncio.all_tasks()
        if stop == "first":
            assert await qs.first() == expected[0]
            assert not _reads()
        elif stop == "break":
            async for got in qs:
                assert got == expected[0]
                assert len(_reads()) > 1, "a task per salt"
                break
        else:
            items = qs.aiterator()
            assert await items.__anext__() == expected[0]
            assert len(_reads()) > 1, "a task per salt"
            if stop == "close":
                async with contextlib.aclosing(items):
                    pass
                assert not _reads(), "aclose() returns once every read's task ended"
            else:
                del items
                gc.collect()
        assert not await _settled(before), "no task is left behind"
        assert gauge.open == 0, "every read was closed"
        assert gauge.rows < len(events), "the reads stopped early"


def test_a_failing_salt_raises_and_closes_the_other_reads(backend: Backend) -> None:
    Reading = reading_model()
    gauge = Gauge(backend)
    conn = ts.Connection(gauge)
    conn.create_tables(Reading)
    conn.save_all(readings(Reading))
    qs = Reading.range(T0, T0 + 1000 * STEP).using(conn)
    gauge.fail[qs.explain().requests[5]] = 3
    with pytest.raises(ts.BackendError, match="injected"):
        list(qs)
    assert gauge.open == 0, "every read was closed"


async def test_async_a_failing_salt_raises_and_ends_the_other_reads(
        backend: Backend, small_channels: None) -> None:
    Reading = reading_model()
    async with asynchronous(backend) as ab:
        gauge = AGauge(ab, concurrent=True)
        db = ts.AsyncConnection(gauge)
        await db.create_tables(Reading)
        await db.save_all(readings(Reading))
        qs = Reading.using(db).range(T0, T0 + 1000 * STEP)
        gauge.fail[qs.explain(count=True).requests[5]] = 3  # count() reads no values
        before = asyncio.all_tasks()
        with pytest.raises(ts.BackendError, match="injected"):
            await qs.count()
        assert not _reads(), "the other reads' tasks ended before the error came out"
        assert not await _settled(before), "no task is left behind"
        assert gauge.open == 0, "every read was closed"


# -- the async API on a blocking backend: the steps run in worker threads ----------------


def _threaded(backend: Backend) -> tuple[Gauge, ts.AsyncConnection]:
    """An async connection whose reads are ``Gauge(backend)``'s, in worker threads."""
    gauge = Gauge(backend)
    return gauge, ts.AsyncConnection(ThreadedBackend(gauge))  # type: ignore[arg-type]


async def _closed(gauge: Gauge) -> bool:
    """Whether every read of ``gauge`` is closed, once the loop has run the finalizers
    of dropped async generators."""
    for _ in range(1000):
        if gauge.open == 0:
            return True
        await asyncio.sleep(0.001)
    return False


async def test_threaded_async_reads_give_the_events_saved_in_order(backend: Backend) -> None:
    """On a backend whose reads are a blocking one's (`ThreadBacked`), the async API
    reads as the sync one does, in worker threads: every salt starts before a row is
    taken, the answers are the same, every read is closed."""
    Reading, Sensor = reading_model(), sensor_model()
    gauge, db = _threaded(backend)

    async def read(name: str, qs: Any) -> list[Any]:
        gauge.started_by_first_row = None
        got = [e async for e in qs]
        if name == "all":
            assert gauge.started_by_first_row == SALTS + 1, "each salt and the guard"
        return got

    await _saved_in_order(db, Reading, Sensor, read)
    assert gauge.open == 0, "every read was closed"


async def test_threaded_async_reads_hold_at_most_a_batch_ahead(backend: Backend) -> None:
    """Back-pressure: the rows taken from the blocking reads stay within a batch
    (`fanout.PULL_ROWS` per stream) of the instances handed out; nothing is read
    after a close."""
    Reading = reading_model()
    gauge, db = _threaded(backend)
    await db.create_tables(Reading)
    events = readings(Reading, 4000)
    assert (await db.save_all(events)).ok
    expected = sorted(events, key=lambda e: e.time)
    items = Reading.using(db).range(T0, T0 + 5000 * STEP).aiterator()
    gauge.rows = 0
    got = [await items.__anext__() for _ in range(2000)]
    await asyncio.sleep(0.2)  # a hop still running would have finished by now
    assert got == expected[:2000]
    assert 2000 <= gauge.rows <= 2000 + SALTS * fanout.PULL_ROWS
    await items.aclose()
    assert gauge.open == 0, "aclose() returns once every read is closed"
    taken = gauge.rows
    await asyncio.sleep(0.05)
    assert gauge.rows == taken, "nothing reads after the close"


@pytest.mark.parametrize("stop", STOPS)
async def test_threaded_async_stopping_early_closes_every_read(backend: Backend,
                                                               stop: str) -> None:
    Reading = reading_model()
    gauge, db = _threaded(backend)
    await db.create_tables(Reading)
    events = readings(Reading)
    await db.save_all(events)
    qs = Reading.using(db).range(T0, T0 + 1000 * STEP)
    expected = sorted(events, key=lambda e: e.time)
    if stop == "first":
        assert await qs.first() == expected[0]
    elif stop == "break":
        async for got in qs:
            assert got == expected[0]
            assert gauge.open == SALTS, "the salts are being read"
            break
    else:
        items = qs.aiterator()
        assert await items.__anext__() == expected[0]
        assert gauge.open == SALTS, "the salts are being read"
        if stop == "close":
            await items.aclose()
            assert gauge.open == 0, "aclose() returns once every read is closed"
        else:
            del items
            gc.collect()
    assert await _closed(gauge), "every read was closed"
    assert gauge.rows < len(events), "the reads stopped early"


async def test_threaded_async_a_failing_salt_raises_and_closes_the_other_reads(
        backend: Backend) -> None:
    Reading = reading_model()
    gauge, db = _threaded(backend)
    await db.create_tables(Reading)
    await db.save_all(readings(Reading))
    qs = Reading.using(db).range(T0, T0 + 1000 * STEP)
    gauge.fail[qs.explain(count=True).requests[5]] = 3  # count() reads no values
    with pytest.raises(ts.BackendError, match="injected"):
        await qs.count()
    assert gauge.open == 0, "every read was closed"


class Gated(Gauge):
    """A :class:`Gauge` whose reads wait (in the thread that takes their rows) for a
    gate before their first row."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.entered, self.gate = threading.Event(), threading.Event()

    def _rows(self, request: ReadRequest, rows: Iterator[Row]) -> Iterator[Row]:
        self.entered.set()
        self.gate.wait(BARRIER_SECONDS)
        yield from super()._rows(request, rows)


async def test_threaded_async_read_cancelled_during_a_hop_closes_after_it(
        backend: Backend) -> None:
    """Cancelled while a worker thread takes rows, the read waits for that hop to
    end, then closes every read (closing a generator running in another thread
    would raise)."""
    Reading = reading_model()
    gated = Gated(backend)
    gated.gate.set()
    db = ts.AsyncConnection(ThreadedBackend(gated))  # type: ignore[arg-type]
    await db.create_tables(Reading)
    await db.save_all(readings(Reading))
    gated.gate.clear()
    gated.entered.clear()

    async def consume() -> list[Any]:
        return [e async for e in Reading.using(db).range(T0, T0 + 1000 * STEP)]

    task = asyncio.ensure_future(consume())
    assert await asyncio.to_thread(gated.entered.wait, BARRIER_SECONDS)
    task.cancel()
    await asyncio.sleep(0.01)  # the cancellation reaches the read, mid-hop
    assert not task.done(), "it waits for the hop's thread"
    gated.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gated.open == 0, "every read was closed"
