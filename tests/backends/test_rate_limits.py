"""Writes follow the server's flow control (``RateLimitInfo``), and lose nothing.

The embedded store and the emulator never send ``RateLimitInfo``: on both
backends, a backend wrapper reports one as the Bigtable backend does (into
`tsmodel._observe.RATE_LIMITS`); on the emulator, the fault proxy
(tests/faults/proxy.py) adds it to every ``MutateRows`` response while
:attr:`FaultProxy.rate_limit` is set. Each test saves in three phases: unpaced,
then while the server asks to slow down (for a while, then to hold the pace),
then after it stopped asking; the second phase saves in chunks until the
server has asked to hold the pace for two periods, however fast the machine.
The pace is checked against what the proxy saw: the times the writes
arrived, relative to the rates the connection decided and to the unpaced
phase of the same test, never against a speed set in advance. Every entity
must be WRITTEN and the tables must read back exactly as an oracle (plain
Python over the saved events) says.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tests.backends.passthrough import AsyncPassThrough, PassThrough
from tests.faults.proxy import FaultProxy, WriteCall
from tsmodel._observe import RATE_LIMITS, RateLimit
from tsmodel.backends.base import AsyncBackend, Backend, MutationOutcome, RowMutation
from tsmodel.plan.pacing import MIN_FACTOR, RateChange

UTC = timezone.utc
T0 = datetime(2024, 5, 1, tzinfo=UTC)
SENSORS = 3
BATCH = 50
#: The server's answer while it asks to slow down: (period in seconds, factor).
PERIOD, FACTOR = 0.2, 0.5
#: How long it asks to slow down before asking to hold the pace (factor 1).
CUTTING = 0.5


def declare() -> Any:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"rl_{suffix}", family="F", current=f"rl_cur_{suffix}")
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        value: float = ts.value("V")

    return Reading


def readings(model: Any, start: int, n: int) -> list[Any]:
    return [model(sensor=f"s{i % SENSORS}", time=T0 + timedelta(seconds=i), value=i / 4)
            for i in range(start, start + n)]


@pytest.fixture
def proxy(emulator: Any) -> Iterator[FaultProxy]:
    with FaultProxy(emulator.host_port) as p:
        yield p


class Server:
    """What the proxy (or a reporting backend) answers: asks to slow down for
    `CUTTING` s from the first write it answers so, then to hold the pace."""

    def __init__(self, proxy: Any) -> None:
        self.proxy = proxy
        self.began: list[float] = []

    def ask(self) -> None:
        def answer() -> tuple[float, float]:
            now = time.monotonic()
            self.began[:] = self.began or [now]  # from the first write asked
            return (PERIOD, FACTOR) if now < self.began[0] + CUTTING else (PERIOD, 1.0)

        self.proxy.rate_limit = answer

    def held(self) -> bool:
        """Whether it has asked to hold the pace for two periods."""
        return bool(self.began) and time.monotonic() > self.began[0] + CUTTING + 2 * PERIOD

    def stop(self) -> None:
        self.proxy.rate_limit = None


class Phases:
    """The three phases of saves, and where each begins in the log of writes."""

    UNPACED, CHUNK, AFTER = 600, 400, 600

    def __init__(self, model: Any, server: Server, writes: list[WriteCall]) -> None:
        self.model, self.server, self.writes = model, server, writes
        self.saved: list[Any] = []
        self.statuses: list[ts.WriteStatus] = []
        self.marks = [len(writes)]

    def next(self, n: int) -> list[Any]:
        events = readings(self.model, len(self.saved), n)
        self.saved.extend(events)
        return events

    def done(self, result: ts.WriteResult) -> None:
        self.statuses.extend(r.status for r in result.results)

    def mark(self) -> None:
        self.marks.append(len(self.writes))

    def run(self, db: ts.Connection) -> None:
        self.done(db.save_all(self.next(self.UNPACED)))
        self.mark()
        self.server.ask()
        while not self.server.held():
            self.done(db.save_all(self.next(self.CHUNK)))
        self.mark()
        self.server.stop()
        time.sleep(PERIOD)  # the next answer without a rate limit lifts it
        self.done(db.save_all(self.next(self.AFTER)))
        self.mark()

    async def arun(self, db: ts.AsyncConnection) -> None:
        self.done(await db.save_all(self.next(self.UNPACED)))
        self.mark()
        self.server.ask()
        while not self.server.held():
            self.done(await db.save_all(self.next(self.CHUNK)))
        self.mark()
        self.server.stop()
        await asyncio.sleep(PERIOD)
        self.done(await db.save_all(self.next(self.AFTER)))
        self.mark()

    def phases(self) -> tuple[list[WriteCall], list[WriteCall], list[WriteCall]]:
        w, m = self.writes, self.marks
        return w[m[0]:m[1]], w[m[1]:m[2]], w[m[2]:m[3]]

    def check(self, changes: list[RateChange]) -> dict[str, float]:
        """Every entity WRITTEN; the pace as decided, lifted at the end."""
        assert self.statuses == [ts.WriteStatus.WRITTEN] * len(self.saved)
        assert changes[-1].rate is None and changes[-1].before is not None  # lifted
        return check_pace(self.phases(), changes, ts.spec_of(self.model).table)


def rate(writes: Sequence[WriteCall]) -> float:
    """Rows per second the proxy received from the first to the last of ``writes``."""
    span = writes[-1].time - writes[0].time
    return sum(w.entries for w in writes[:-1]) / span


def check_pace(phases: tuple[list[WriteCall], list[WriteCall], list[WriteCall]],
               changes: list[RateChange], main_table: str) -> dict[str, float]:
    """The paced phase is spaced as the decided rates say, and slower than the unpaced one."""
    free, paced, after = phases
    cuts = [c for c in changes if c.rate is not None]
    assert cuts, "the writer never slowed down"
    first = cuts[0]
    assert first.before is None and first.factor == pytest.approx(MIN_FACTOR)  # 0.5, clamped
    assert first.rate == pytest.approx(first.measured * MIN_FACTOR)
    for earlier, later in zip(cuts, cuts[1:], strict=False):  # each: the one before x 0.7
        assert later.rate == pytest.approx(earlier.rate * MIN_FACTOR)
        assert later.time - earlier.time >= PERIOD - 0.01  # at most once per period
    # How many periods saw an answer depends on how fast the machine writes and
    # when an answer's rate limit reaches the pacer (a loaded machine may send
    # nothing for a period, or hand over answers late): the count of cuts is
    # not checked here; tests/unit/test_pacing.py's clock holds it.
    fastest = first.rate
    # Main-table writes let go after the first cut wait for the rows before them at
    # the fastest rate decided, at least: over any run of up to 16 consecutive ones,
    # the time from the first to the last is at least the rows of the others at that
    # rate. (A lower bound; the times are taken in this process, by the proxy or the
    # reporting backend: each may be late by some milliseconds on a busy machine,
    # hence the slack.) The first writes after the cut may have been let go before
    # it: as many as a save keeps out at once (4 batches of 2 tables).
    mains = [w for w in paced[8:] if w.table == main_table and w.time > first.time]
    assert len(mains) >= 8
    size = min(16, len(mains))
    for i in range(len(mains) - size + 1):
        window = mains[i:i + size]
        rows = sum(w.entries for w in window[:-1])
        took = window[-1].time - window[0].time
        assert took >= rows / fastest * 0.8 - 0.03, (
            f"{rows} rows went out in {took:.3f} s at a pace of {fastest:.0f} rows/s "
            f"(writes {i}..{i + size - 1} of {len(mains)})")
    limited = [w for w in paced if w.time > first.time]
    figures = {"unpaced": rate(free), "paced": rate(limited), "after": rate(after),
               "first_rate": fastest, "last_rate": cuts[-1].rate}
    assert figures["paced"] <= fastest * 1.25, figures
    assert figures["paced"] < figures["unpaced"], figures
    return figures


def check_tables(db: Any, model: Any, saved: list[Any]) -> None:
    """Every event reads back; each sensor's latest is its newest event."""
    end = T0 + timedelta(days=1)
    for s in range(SENSORS):
        sensor = f"s{s}"
        want = sorted((e.time, e.value) for e in saved if e.sensor == sensor)
        got = [(e.time, e.value) for e in model.using(db).range(T0, end, sensor=sensor)]
        assert got == want
        newest = max(want)
        latest = model.using(db).latest(sensor=sensor)
        assert (latest.time, latest.value) == newest


@pytest.mark.emulator
def test_a_save_slows_down_when_the_server_asks_then_recovers(
        proxy: FaultProxy, caplog: pytest.LogCaptureFixture) -> None:
    model = declare()
    run = Phases(model, Server(proxy), proxy.writes)
    url = f"bigtable-emulator://{proxy.host_port}/rate/inst"
    with ts.connect(url, default=False, batch_size=BATCH) as db:
        db.create_tables(model)
        run.marks = [len(proxy.writes)]
        with caplog.at_level(logging.INFO, logger="tsmodel.writes"):
            run.run(db)
        assert db.pacer is not None and db.pacer.rate is None  # recovered
        changes = list(db.pacer.changes)
        check_tables(db, model, run.saved)
    free, _, after = run.phases()
    assert all(w.rate_limit is None for w in free + after)
    figures = run.check(changes)
    logged = [r for r in caplog.records if r.name == "tsmodel.writes" and hasattr(r, "rate")]
    assert [(r.rate, r.before) for r in logged] == [(c.rate, c.before) for c in changes]
    print("\nsync save, rows/s: " + ", ".join(f"{k} {v:.0f}" for k, v in figures.items()))
    print("\n".join(r.getMessage() for r in logged))


@pytest.mark.emulator
def test_an_async_save_slows_down_when_the_server_asks_then_recovers(
        proxy: FaultProxy, emulator: Any) -> None:
    model = declare()
    run = Phases(model, Server(proxy), proxy.writes)
    url = f"bigtable-emulator://{proxy.host_port}/rate/inst"

    async def go() -> list[RateChange]:
        async with ts.connect_async(url, batch_size=BATCH) as db:
            await db.create_tables(model)
            run.marks = [len(proxy.writes)]
            await run.arun(db)
            assert db.pacer is not None and db.pacer.rate is None
            return list(db.pacer.changes)

    changes = asyncio.run(go())
    with ts.connect(f"bigtable-emulator://{emulator.host_port}/rate/inst",
                    default=False) as direct:
        check_tables(direct, model, run.saved)
    figures = run.check(changes)
    print("\nasync save, rows/s: " + ", ".join(f"{k} {v:.0f}" for k, v in figures.items()))


@pytest.mark.emulator
def test_a_flow_without_server_rate_limits_ignores_them(proxy: FaultProxy) -> None:
    model = declare()
    url = f"bigtable-emulator://{proxy.host_port}/rate/inst"
    flow = ts.WriteFlow(server_rate_limits=False)
    with ts.connect(url, default=False, batch_size=BATCH, flow=flow) as db:
        db.create_tables(model)
        proxy.rate_limit = (0.0, 0.1)
        result = db.save_all(readings(model, 0, 300))
        assert db.pacer is None
        check_tables(db, model, [r.entity for r in result.results])
    assert all(w.rate_limit == (0.0, 0.1) for w in proxy.writes[-12:])


# -- both backends: the executor follows what a backend reports ------------------------------


class Reporting(PassThrough):
    """``inner``, reporting the server's rate limit as the Bigtable backend does, and
    logging its writes as the proxy logs them."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.rate_limit: Any = None
        self.writes: list[WriteCall] = []

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        limit = self.rate_limit() if callable(self.rate_limit) else self.rate_limit
        self.writes.append(WriteCall(time.monotonic(), table, len(entries), "", limit))
        outcomes = self.inner.mutate_rows(table, entries)
        note = RATE_LIMITS.get()
        if limit is not None and note is not None:
            note.seen = RateLimit(*limit)
        return outcomes


def test_writes_follow_the_rate_limits_a_backend_reports(
        backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    model = declare()
    reporting = Reporting(backend)
    run = Phases(model, Server(reporting), reporting.writes)
    with ts.Connection(reporting, batch_size=BATCH) as db:
        db.create_tables(model)
        run.marks = [len(reporting.writes)]
        with caplog.at_level(logging.DEBUG, logger="tsmodel.writes"):
            run.run(db)
        assert db.pacer is not None and db.pacer.rate is None
        changes = list(db.pacer.changes)
        check_tables(db, model, run.saved)
        db.drop_tables(model)
    run.check(changes)
    # Each save's summary says how long its writes waited for the pace.
    saves = [r for r in caplog.records if getattr(r, "operation", None) == "save"]
    assert saves[0].paced == 0.0 and "paced" not in saves[0].getMessage()
    waited = [r for r in saves[1:-1] if r.paced > 0]
    assert waited, [r.getMessage() for r in saves]
    assert all("s in all for the server's rate limit" in r.getMessage()
                          for r in waited)


class AsyncReporting(AsyncPassThrough):
    """`Reporting` for an asyncio backend."""

    def __init__(self, inner: AsyncBackend) -> None:
        super().__init__(inner)
        self.rate_limit: Any = None
        self.writes: list[WriteCall] = []

    async def mutate_rows(self, table: str,
                          entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        limit = self.rate_limit() if callable(self.rate_limit) else self.rate_limit
        self.writes.append(WriteCall(time.monotonic(), table, len(entries), "", limit))
        outcomes = await self.inner.mutate_rows(table, entries)
        note = RATE_LIMITS.get()
        if limit is not None and note is not None:
            note.seen = RateLimit(*limit)
        return outcomes


def test_async_writes_follow_the_rate_limits_a_backend_reports(backend: Backend) -> None:
    model = declare()

    async def go() -> tuple[Phases, list[RateChange]]:
        async with asynchronous(backend) as inner:
            reporting = AsyncReporting(inner)
            run = Phases(model, Server(reporting), reporting.writes)
            async with ts.AsyncConnection(reporting, batch_size=BATCH) as db:
                await db.create_tables(model)
                run.marks = [len(reporting.writes)]
                await run.arun(db)
                assert db.pacer is not None and db.pacer.rate is None
                return run, list(db.pacer.changes)

    run, changes = asyncio.run(go())
    with ts.Connection(PassThrough(backend)) as db:
        check_tables(db, model, run.saved)
        db.drop_tables(model)
    run.check(changes)
