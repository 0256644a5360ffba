"""What the executors do around each operation: slow-call warnings, summaries, telemetry.

The one instrumentation point of tsmodel. The sync and async connections
open an `Operation` for each save, delete, read and lookup (a read
by row keys), and make each backend call of it through the operation
(`Operation.call()`, `Operation.read()` then `Operation.stream()`
or `Operation.astream()`),
which

* times the call: one waiting longer than the ``slow_call_threshold``
  setting is logged as a WARNING on ``tsmodel.calls``;
* counts its retries (the Bigtable backend counts them into the count that
  `tsmodel._observe.RETRIES` holds when its call starts, set here),
  rows, cells and bytes;
* at the end of a save or a delete, logs a summary of the outcomes at
  DEBUG on ``tsmodel.writes``;
* logs each change of the pace of writes the server asked for
  (`rate_changed()`, INFO on ``tsmodel.writes``);
* with telemetry on (`telemetry`), ends an
  OpenTelemetry span and records metrics (`tsmodel.run._otel`).

Cells and bytes are counted only when something reads them (telemetry, or
DEBUG on ``tsmodel.writes``): a row count is free, a byte count is not.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from tsmodel._observe import CALL_LOG, RATE_LIMITS, RETRIES, WRITE_LOG, RateLimitNote, RetryCount
from tsmodel.errors import ConfigurationError, install_hint
from tsmodel.ground.base import ReadRequest, Row, RowMutation
from tsmodel.plan.pacing import RateChange, WritePacer
from tsmodel.settings import Settings

__all__ = ["Observer", "Operation", "kind_of_read", "rate_changed"]

_T = TypeVar("_T")


class Observer:
    """The observation settings of one connection, and its telemetry (if on).

    Raises:
        ConfigurationError: telemetry is asked for, but OpenTelemetry is not
            installed (the ``tsmodel-bigtable[otel]`` extra).
    """

    def __init__(self, settings: Settings) -> None:
        self.slow_call = settings.slow_call_threshold
        self.telemetry: Any = None
        if settings.observed:
            try:
                from tsmodel.run._otel import Telemetry
            except ImportError as exc:
                raise ConfigurationError(
                    "telemetry needs OpenTelemetry, which is not installed: "
                    f"{install_hint('otel')} or opentelemetry-api, or leave "
                    f"telemetry off ({exc})") from exc
            self.telemetry = Telemetry(settings)

    def operation(self, kind: str, table: str | None = None) -> Operation:
        """Start observing one operation (``save``, ``delete``, ``read``, ``lookup``, ``write``)."""
        return Operation(self, kind, table)

    def reading(self, request: ReadRequest,
                read_rows: Callable[[ReadRequest], Any]) -> tuple[Operation, Any, RetryCount]:
        """Start one read (an operation: a ``lookup`` by row keys, else a ``read``):
        the operation, the rows ``read_rows(request)`` returns (an iterator, or an
        async one) and the count of its retries. A read that fails to start ends
        its operation with the error."""
        op = self.operation(kind_of_read(request), request.table)
        try:
            rows, count = op.read(request.table, lambda: read_rows(request))
        except BaseException as exc:
            op.end(error=exc)
            raise
        return op, rows, count

    def read_batches(self, request: ReadRequest,
                     read_batches: Callable[[ReadRequest], Iterable[Any]]) -> Iterator[Any]:
        """`read()` of a read in `CellBatch` es (``backend.read_batches``)."""
        op, batches, count = self.reading(request, read_batches)
        return op.stream_batches(request.table, batches, count)

    def read(self, request: ReadRequest,
             read_rows: Callable[[ReadRequest], Iterable[Row]]) -> Iterator[Row]:
        """The rows of one blocking read, observed: `reading()`, then `Operation.stream()`."""
        op, rows, count = self.reading(request, read_rows)
        return op.stream(request.table, rows, count)


def kind_of_read(request: ReadRequest) -> str:
    """``lookup`` for a read of named rows, else ``read``.

    Named rows: row keys, ranges of one key each (``[k, k + b"\\0")``, what
    ``latest()`` reads from a current-value table), or a read of one row
    (``limit=1``: the newest row of an entity).
    """
    rows = request.rows
    if request.limit == 1:
        return "lookup"
    if rows.is_whole_table() or not all(
            r.start is not None and r.end == r.start + b"\0" for r in rows.ranges):
        return "read"
    return "lookup"


def pause_before(pacer: WritePacer | None, rows: int, op: Operation) -> float:
    """The seconds a write of ``rows`` rows waits first, as ``pacer`` says (noted
    on ``op``); 0 without a pacer."""
    pause = 0.0 if pacer is None else pacer.wait(rows)
    if pause > 0:
        op.waited(pause)
    return pause


@contextmanager
def paced(pacer: WritePacer | None) -> Iterator[None]:
    """Around one write: the server's rate limits it meets go to ``pacer``, whose
    changes of pace are logged (`rate_changed()`). Sync and async writes alike."""
    if pacer is None:
        yield
        return
    note = RateLimitNote()
    token = RATE_LIMITS.set(note)
    try:
        yield
    finally:
        RATE_LIMITS.reset(token)
        change = pacer.observe(note.seen)
        if change is not None:
            rate_changed(change)


def rate_changed(change: RateChange) -> None:
    """Log a change of the pace of writes (INFO on ``tsmodel.writes``)."""
    extra = {"rate": change.rate, "before": change.before, "factor": change.factor,
             "period": change.period}
    if change.rate is None:
        WRITE_LOG.info("the server stopped asking to slow down: writes no longer paced "
                       "(were paced at %.0f rows/s)", change.before, extra=extra)
    elif change.before is None:
        WRITE_LOG.info("the server asked to slow down (factor %.2f): writes paced at %.0f "
                       "rows/s, %.0f rows/s measured; next change in %.3g s at the earliest",
                       change.factor, change.rate, change.measured, change.period, extra=extra)
    else:
        WRITE_LOG.info("the server asked for a factor of %.2f: writes paced at %.0f rows/s "
                       "(were %.0f); next change in %.3g s at the earliest", change.factor,
                       change.rate, change.before, change.period, extra=extra)


class Operation:
    """One save, delete, read, lookup or job write being observed.

    Attributes:
        kind: what it is.
        tables: the tables it called, in the order of their first call.
        calls, rows, cells, bytes, retries: what its backend calls did
            (rows and cells written, or read; bytes of row keys, qualifiers
            and values).
        paced: seconds its writes waited for the server's rate limit, summed
            over writes (that wait side by side too) (`tsmodel.plan.pacing`).
        outcomes: entities by outcome (``written``, ``failed``...), for a
            save or a delete.
    """

    def __init__(self, observer: Observer, kind: str, table: str | None) -> None:
        self.observer = observer
        self.kind = kind
        self.tables: dict[str, None] = {} if table is None else {table: None}
        self.calls = self.rows = self.cells = self.bytes = self.retries = 0
        self.paced = 0.0
        self.outcomes: Counter[str] = Counter()
        self.detailed = observer.telemetry is not None or WRITE_LOG.isEnabledFor(logging.DEBUG)
        self._lock = threading.Lock()
        self._started = time.perf_counter()
        self._span = None if observer.telemetry is None else observer.telemetry.start(self)

    # -- backend calls ---------------------------------------------------------------

    def waited(self, seconds: float) -> None:
        """A write waited ``seconds`` for the server's rate limit before it went."""
        with self._lock:
            self.paced += seconds

    def call(self, table: str, rows: Sequence[RowMutation], make: Callable[[], _T]) -> _T:
        """``make()``: one write of ``rows`` to ``table``, timed and counted."""
        count = RetryCount()
        token = RETRIES.set(count)
        started = time.perf_counter()
        try:
            return make()
        finally:
            RETRIES.reset(token)
            self._called("write", table, time.perf_counter() - started, count.n, rows)

    async def acall(self, table: str, rows: Sequence[RowMutation],
                    make: Callable[[], Any]) -> Any:
        """`call()` of a coroutine function."""
        count = RetryCount()
        token = RETRIES.set(count)
        started = time.perf_counter()
        try:
            return await make()
        finally:
            RETRIES.reset(token)
            self._called("write", table, time.perf_counter() - started, count.n, rows)

    def read(self, table: str, start: Callable[[], Any]) -> tuple[Any, RetryCount]:
        """``start()``, the start of one read, and the count its retries go into.

        The count is in the context while the read starts (the Bigtable
        backend's sync reads send their request then); `stream()` and
        `astream()` set it again for their first row (its async reads
        start then).
        """
        count = RetryCount()
        token = RETRIES.set(count)
        try:
            return start(), count
        finally:
            RETRIES.reset(token)

    def stream(self, table: str, rows: Iterable[Row], count: RetryCount, *,
               counted: bool = True, ends: bool = True) -> Iterator[Row]:
        """The rows of one read, timed (time waiting for the backend only) and counted.

        Args:
            count: the read's retry count (`read()`).
            counted: count the rows into the operation (not for the reads of a save).
            ends: end the operation with the read (a read or a lookup).
        """
        iterator = iter(rows)
        with _Streaming(self, table, count, counted, ends, iterator) as tally:
            # `_Streaming.arrived()` and `waiting()` inlined: a row costs two clock
            # readings here, and no method call.
            clock, got = time.perf_counter, tally.got
            add = got.add if tally.detailed else None
            waited, started, first = 0.0, tally.started, True
            try:
                for row in iterator:
                    waited += clock() - started
                    if first:
                        tally._release()
                        first = False
                    got.rows += 1
                    if add is not None:
                        add(row)
                    yield row
                    started = clock()
                waited += clock() - started  # the last wait: the source ran out
            finally:
                tally.waited += waited

    def stream_batches(self, table: str, batches: Iterable[Any],
                       count: RetryCount) -> Iterator[Any]:
        """`stream()` of a read in `CellBatch` es: each counted as its rows."""
        iterator = iter(batches)
        with _Streaming(self, table, count, True, True, iterator) as tally:
            for batch in iterator:  # a batch of rows: no need to inline as `stream()` does
                tally.arrived_batch(batch)
                yield batch
                tally.waiting()
            tally.stopped()

    async def astream(self, table: str, rows: AsyncIterator[Row], count: RetryCount, *,
                      counted: bool = True, ends: bool = True) -> AsyncIterator[Row]:
        """`stream()` of an async iterator."""
        async with _Streaming(self, table, count, counted, ends, rows) as tally:
            async for row in rows:
                tally.arrived(row)
                yield row
                tally.waiting()
            tally.stopped()

    def _called(self, what: str, table: str, seconds: float, retries: int,
                rows: Sequence[RowMutation] | _Got | None) -> None:
        """Add one call to the totals; warn if it was slow."""
        if isinstance(rows, _Got):
            n, cells, size = rows.rows, rows.cells, rows.bytes
        elif rows is not None:
            n, (cells, size) = len(rows), _written(rows) if self.detailed else (0, 0)
        else:
            n = cells = size = 0
        with self._lock:
            self.tables.setdefault(table, None)
            self.calls += 1
            self.retries += retries
            self.rows += n
            self.cells += cells
            self.bytes += size
        slow = self.observer.slow_call
        if slow is not None and seconds > slow:
            CALL_LOG.warning(
                "slow call: %s of table %r (%s) took %.3f s, over the %.3f s threshold "
                "(%d rows, %d retries)", what, table, self.kind, seconds, slow, n, retries,
                extra={"table": table, "operation": self.kind, "seconds": seconds,
                       "retries": retries})

    # -- the end -----------------------------------------------------------------------

    def end(self, result: Any = None, error: BaseException | None = None) -> None:
        """The operation is over: log its summary (saves and deletes), end its span.

        Args:
            result: the `WriteResult` of a save or a delete.
            error: what it raised, if it did.
        """
        seconds = time.perf_counter() - self._started
        if result is not None:
            for status, n in result.counts().items():  # without making every result
                self.outcomes[status.value] += n
            if WRITE_LOG.isEnabledFor(logging.DEBUG):
                self._summary(result, seconds)
        if self._span is not None:
            self.observer.telemetry.end(self, self._span, seconds, error)
            self._span = None

    def _summary(self, result: Any, seconds: float) -> None:
        outcomes = ", ".join(f"{self.outcomes[s]} {s}"
                             for s in ("written", "failed", "unknown", "partial"))
        tables = ", ".join(repr(t) for t in self.tables) or "no table"
        paced = f"; its writes waited {self.paced:.3f} s in all for the server's rate " \
            "limit" if self.paced else ""
        WRITE_LOG.debug(
            "%s of %d entities to %s: %s; %d calls, %d rows, %d cells, %d bytes, "
            "%d retries in %.3f s%s", self.kind, len(result.results), tables, outcomes,
            self.calls, self.rows, self.cells, self.bytes, self.retries, seconds, paced,
            extra={"operation": self.kind, "outcomes": dict(self.outcomes),
                   "tables": list(self.tables), "retries": self.retries,
                   "paced": self.paced})


class _Got:
    """Rows, cells and bytes of a read so far."""

    __slots__ = ("rows", "cells", "bytes")

    def __init__(self) -> None:
        self.rows = self.cells = self.bytes = 0

    def add_batch(self, batch: Any) -> None:
        """Count the rows, cells and bytes of a `CellBatch`."""
        self.rows += len(batch.keys)
        self.cells += len(batch.values)
        self.bytes += sum(map(len, batch.keys)) + sum(map(len, batch.qualifiers)) + sum(
            map(len, batch.values))

    def add(self, row: Row) -> None:
        """Count the cells and bytes of a row (its count is kept by the caller)."""
        self.cells += len(row.cells)
        self.bytes += len(row.key) + sum(len(c.qualifier) + len(c.value) for c in row.cells)


class _Streaming:
    """The account of one read's stream, shared by `Operation.stream()` and
    `Operation.astream()`: its rows, the time spent waiting for the backend, its
    retry count in the context until the first row; on leaving (``with`` or
    ``async with``) the source is closed (an abandoned read ends its stream now)
    and the call is recorded.
    """

    __slots__ = ("op", "table", "count", "counted", "ends", "source", "detailed", "got",
                 "token", "waited", "started")

    def __init__(self, op: Operation, table: str, count: RetryCount, counted: bool,
                 ends: bool, source: Any) -> None:
        self.op, self.table, self.count = op, table, count
        self.counted, self.ends, self.source = counted, ends, source
        self.detailed = op.detailed
        self.got = _Got()
        self.token: Any = None
        self.waited = self.started = 0.0

    def __enter__(self) -> _Streaming:
        self.token = RETRIES.set(self.count)
        self.started = time.perf_counter()
        return self

    async def __aenter__(self) -> _Streaming:
        return self.__enter__()

    def arrived(self, row: Row) -> None:
        """A row came: the wait for it ends, it is counted."""
        self.waited += time.perf_counter() - self.started
        if self.token is not None:
            self._release()
        self.got.rows += 1
        if self.detailed:
            self.got.add(row)

    def arrived_batch(self, batch: Any) -> None:
        """A `CellBatch` came: the wait for it ends, its rows are counted."""
        self.waited += time.perf_counter() - self.started
        if self.token is not None:
            self._release()
        if self.detailed:
            self.got.add_batch(batch)
        else:
            self.got.rows += len(batch.keys)

    def waiting(self) -> None:
        """The caller asks for the next row: the wait starts."""
        self.started = time.perf_counter()

    def stopped(self) -> None:
        """The source ran out: the last wait ends."""
        self.waited += time.perf_counter() - self.started

    def _release(self) -> None:
        if self.token is not None:
            RETRIES.reset(self.token)
            self.token = None

    def _record(self, error: BaseException | None) -> None:
        self.op._called("read", self.table, self.waited, self.count.n,
                        self.got if self.counted else None)
        if self.ends:
            self.op.end(error=None if isinstance(error, GeneratorExit) else error)

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        self._release()
        close = getattr(self.source, "close", None)
        if close is not None:
            close()
        self._record(error)

    async def __aexit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        self._release()
        aclose = getattr(self.source, "aclose", None)
        if aclose is not None:
            await aclose()
        self._record(error)


def _written(rows: Sequence[RowMutation]) -> tuple[int, int]:
    """The cells set by ``rows`` and the bytes they send (keys, qualifiers, values)."""
    cells = size = 0
    for row in rows:
        size += len(row.key)
        for mutation in row.mutations:
            value = getattr(mutation, "value", None)
            if value is not None:
                cells += 1
                size += len(getattr(mutation, "qualifier", b"")) + len(value)
    return cells, size
