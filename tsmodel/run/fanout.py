"""Run a read plan: its requests read side by side, merged in order, streamed.

`ReadMerge` folds a plan's streams without I/O;
this module feeds it, sync and async:

* `stream()` (sync) starts every read the merge opens (all of a merge by
  time, a few ahead of a concatenation) before it takes rows from any, then
  takes the rows in the thread that iterates, in the order the merge needs
  them. A backend whose ``read_rows`` sends its request before returning
  (Cloud Bigtable) thus has the reads stream side by side: their responses
  come in meanwhile, held by gRPC within each stream's flow-control window
  until taken. No thread is started: threads reading gRPC streams side by
  side contend for the GIL (measured: +50 to +150 % CPU per row on
  loopback), and a thread cannot cancel the stream another one is reading.
* `astream()` (asyncio), on a backend whose reads are a blocking
  backend's (`tsmodel.ground.base.ThreadBacked`: the embedded store, Cloud
  Bigtable), carries out the sync way's steps in worker threads, a hop per
  batch of instances: the thread takes the rows the merge asks for and
  decodes them, the loop only hands the instances out. Rows awaited one by
  one cost the loop a few microseconds each (async generators, the decoding
  in another thread than the reading, on another core), which made async
  reads some 15 % slower than sync ones; in a hop they cost what the sync
  way's do. The hops run one at a time, so nothing is read ahead of what
  the merge asked for. On any other `AsyncBackend`, `astream()` reads each
  opened stream in a task of its own that fills a channel of at most
  `CHANNEL_ROWS` rows, when the backend's features say reads gain from it
  (``Features.concurrent_calls``); otherwise it takes the rows in the
  consuming task, as the sync way does.

The merge's answer does not depend on how its rows come batched, so every
way gives the same answer in the same order.

Both ways resume by themselves: when a stream breaks with
`ReadInterruptedError` (the backend's own retries spent), the read is
re-opened at the merge's position after the last instance handed out
(`ReadMerge.position()`, the position a page token holds), at most
`RESUME_ATTEMPTS` times in a row without a new instance, waiting a little
longer each time. Instances come out as soon as
they are certain (the first ones before the last stream ends), and when the
consumer stops early (``first()``, a ``break``, a dropped iterator) or a
stream fails, every other stream is closed (a Bigtable stream is
cancelled) and its task has ended before the iterator returns or raises.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterable, Iterator
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from tsmodel import errors
from tsmodel.ground.base import CellBatch, Features, ReadRequest, Row
from tsmodel.plan.cursors import CursorCodec, Position
from tsmodel.plan.merge import ReadMerge
from tsmodel.plan.reads import ReadPlan

__all__ = ["stream", "astream", "Streamed", "AStreamed", "CHANNEL_ROWS", "PULL_ROWS",
           "RESUME_ATTEMPTS", "RESUME_DELAY"]

M = TypeVar("M")
S = TypeVar("S")
C = TypeVar("C")


class Reader(Protocol):
    """What `stream()` reads from: a `tsmodel.Connection`. Where ``reads_batches``
    (its backend has its own ``read_batches``), a merge that takes batches of
    instances reads its rows as `CellBatch` es."""

    def read(self, request: ReadRequest) -> Iterator[Row]: ...

    def read_batches(self, request: ReadRequest) -> Iterator[CellBatch]: ...

    @property
    def reads_batches(self) -> bool: ...


class AsyncReader(Protocol):
    """What `astream()` reads from: a `tsmodel.AsyncConnection`."""

    @property
    def features(self) -> Features: ...

    def read(self, request: ReadRequest) -> AsyncIterator[Row]: ...

    async def blocking_reader(self) -> Reader | None: ...

#: Rows an async stream read ahead of the merge holds at most (per stream).
CHANNEL_ROWS = 256
#: Rows a stream taken by the consumer gives per batch: one at first
#: (``first()`` reads one row), doubling up to this many.
PULL_ROWS = 256
#: Re-openings of a broken read in a row without a new instance handed out.
RESUME_ATTEMPTS = 3
#: Seconds before the first re-opening; doubled each time after that.
RESUME_DELAY = 0.05


class _Take(Generic[S]):
    """A step of `_Resuming.steps()`: take the next rows of ``source`` (at most ``most``).

    The driver takes them and puts them in ``rows`` before it resumes the steps.
    """

    __slots__ = ("source", "most", "rows")

    def __init__(self, source: S, most: int | None) -> None:
        self.source, self.most = source, most
        self.rows: list[Row] | None = None


class _Resuming(Generic[M, C]):
    """What both drivers share: the merge as it stands, its steps, position and token.

    The generator that reads refers to this state, never to the iterator that
    holds both: dropping the iterator drops the generator at once (CPython's
    reference count), which closes its reads; a cycle would leave them to the
    garbage collector.
    """

    def __init__(self, plan: ReadPlan, model: type[M], codec: CursorCodec | None,
                 start: Position | None, sink: str, conn: C) -> None:
        self._plan, self._model, self._codec, self._sink = plan, model, codec, sink
        self._conn = conn
        self._merge = ReadMerge(plan, model, start, sink=sink)
        self._handed = 0  # instances of the merge's last batch handed out
        self._failures = 0

    def steps(self, merge: ReadMerge[M], sources: list[S],
              open_: Callable[[ReadMerge[M], ReadRequest | None], S],
              ) -> Iterator[_Take[S] | list[M] | None]:
        """The merge's reads as steps for a driver, without I/O.

        Each step is a `_Take` (the driver takes the rows, sets ``rows``, and
        resumes), ``None`` (the merge needs no more rows: the driver closes every
        source in ``sources`` now), or the instances to hand out, in order: the
        driver sets `_handed` to the count handed out so far, as it hands each
        out. The streams the merge
        opens are started (into ``sources``) before rows are taken from any.
        """
        while (i := merge.want()) is not None:
            while len(sources) < merge.opened:
                sources.append(open_(merge, merge.streams[len(sources)]))
            take = _Take(sources[i], merge.remaining)
            yield take
            out = merge.give(i, take.rows)
            self._handed = 0
            if merge.done:
                yield None
            yield out

    def batches(self, merge: ReadMerge[M], reader: Reader) -> Generator[list[M], None, None]:
        """The merge's steps carried out in the calling thread, on the blocking
        reads of ``reader``: each non-empty batch of instances, in order.
        Closing it closes the reads."""
        sources: list[_Pulled] = []
        try:
            for step in self.steps(merge, sources, partial(_pulled, reader)):
                if isinstance(step, list):
                    if step:
                        yield step
                else:
                    _do(step, sources)
        finally:
            _close(sources)

    def position(self) -> Position | None:
        """Where the read stands: after the last instance handed out (``None``: a plan
        sorted or reversed in memory, once it handed one out)."""
        return self._merge.position(self._handed)

    @property
    def cursor(self) -> str:
        """The token after the last instance handed out: see `Streamed.cursor`."""
        codec = self._codec
        if codec is None:
            raise errors.ArgumentTypeError(
                "this read was not started by a QuerySet: it has no cursor")
        codec.check()
        position = self.position()
        assert position is not None
        return codec.encode(position)

    def _resume(self, exc: errors.ReadInterruptedError) -> float:
        """Re-open the merge after a broken stream; the seconds to wait first.

        Raises:
            ReadInterruptedError: the attempts are spent (or the plan cannot
                resume), with ``cursor`` set where the query hands out cursors.
        """
        position = self.position()
        before = self._merge.start.emitted
        self._failures = 1 if position is not None and position.emitted > before \
            else self._failures + 1
        if position is None or self._failures > RESUME_ATTEMPTS:
            raise self._gave_up(exc, position) from exc
        self._merge = ReadMerge(self._plan, self._model, position, sink=self._sink)
        self._handed = 0
        return float(RESUME_DELAY * 2 ** (self._failures - 1))

    def _gave_up(self, exc: errors.ReadInterruptedError,
                 position: Position | None) -> errors.ReadInterruptedError:
        plan = self._plan
        why = (f"re-opened {RESUME_ATTEMPTS} times without a new instance"
               if position is not None else "a read sorted or reversed in memory cannot resume")
        error = errors.ReadInterruptedError(
            f"{plan.model}: the read of table {plan.table!r} broke off ({why}): {exc}")
        codec = self._codec
        if codec is not None and position is not None and codec.problem is None:
            error.cursor = codec.encode(position)
        return error


class _Batches:
    """The size of the next batch a stream taken by the consumer gives: one row at
    first (``first()`` reads one), doubling up to ``cap`` (`PULL_ROWS`); never more
    than ``most``."""

    __slots__ = ("_size", "_cap")

    def __init__(self, cap: int = PULL_ROWS) -> None:
        self._size = 1
        self._cap = cap

    def _next_size(self, most: int | None) -> int:
        size = self._size if most is None else max(1, min(self._size, most))
        self._size = min(2 * self._size, self._cap)
        return size


# -- sync ---------------------------------------------------------------------------


def stream(plan: ReadPlan, conn: Reader, model: type[M], codec: CursorCodec | None = None,
           start: Position | None = None, *, sink: str = "instances") -> Streamed[M]:
    """The instances of ``plan`` (or what else ``sink`` says: see
    `ReadMerge`), read on ``conn`` and merged as the plan says."""
    return Streamed(_SyncRun(plan, model, codec, start, sink, conn))


class Streamed(Iterator[M]):
    """The iterator of a query's instances (``QuerySet.iterator()``).

    It streams without caching, resumes a broken read by itself (see the
    module's docstring), and holds the `cursor` after the last
    instance it handed out. `close()` (or ``break``, or dropping it)
    cancels the reads still streaming.
    """

    def __init__(self, run: _SyncRun[M]) -> None:
        self._run, self._items = run, run.items()

    def __iter__(self) -> Streamed[M]:
        return self

    def __next__(self) -> M:
        return next(self._items)

    @property
    def cursor(self) -> str:
        """The token that re-opens the query after the last instance handed out.

        Pass it to ``qs.after(token)`` (or ``qs.page(size, after=token)``) of
        the same query, in this process or another.

        Raises:
            QueryError: the query hands out no cursors (say why).
        """
        return self._run.cursor

    def close(self) -> None:
        """Stop: the reads still streaming are cancelled now."""
        self._items.close()


class _SyncRun(_Resuming[M, Reader]):
    """The state of a `Streamed`, and the sync driver of its steps."""

    def items(self) -> Generator[M, None, None]:
        while True:
            try:
                yield from self._read(self._merge)
                return
            except errors.ReadInterruptedError as exc:
                time.sleep(self._resume(exc))

    def _read(self, merge: ReadMerge[M]) -> Generator[M, None, None]:
        batches = self.batches(merge, self._conn)
        try:
            for batch in batches:
                for self._handed, item in enumerate(batch, 1):  # noqa: B007 - the count
                    yield item
        finally:
            batches.close()


def _do(step: _Take[_Pulled] | None, sources: list[_Pulled]) -> None:
    """Take the rows a step asks for (``None``: close every source)."""
    if step is None:
        _close(sources)
    else:
        step.rows = step.source.take(step.most)


def _close(sources: list[_Pulled]) -> None:
    for source in sources:
        source.close()


def _next_in(context: contextvars.Context,
             batches: Generator[list[M], None, None]) -> list[M] | None:
    """The next batch (``None`` at the end), taken in ``context`` (in a worker thread)."""
    return context.run(next, batches, None)


def _pulled(reader: Reader, merge: ReadMerge[Any], request: ReadRequest | None) -> _Pulled:
    """Start the blocking read of one of the merge's streams (``None``: nothing left);
    in `CellBatch` es (``reader.read_batches``) for the ``"batches"`` sink, and for
    instances decoded a batch at a time where the reader's backend reads
    batches of its own (put in batches here, the rows of a stream that breaks
    every few rows would never reach the merge), taken one at a time (each
    holds many rows)."""
    if request is None:
        return _Pulled(())
    if merge.sink == "batches" or (merge.takes_batches and reader.reads_batches):
        return _Pulled(reader.read_batches(request), 1)
    return _Pulled(reader.read(request))


class _Pulled(_Batches):
    """A started read, whose rows the consumer takes a batch at a time."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Iterable[Any], cap: int = PULL_ROWS) -> None:
        super().__init__(cap)
        self._rows: Iterator[Any] | None = iter(rows)

    def take(self, most: int | None) -> list[Row] | None:
        """The next rows (at most ``most`` when given), or ``None`` at the end."""
        assert self._rows is not None
        return list(itertools.islice(self._rows, self._next_size(most))) or None

    def close(self) -> None:
        rows, self._rows = self._rows, None
        close = getattr(rows, "close", None)
        if close is not None:
            close()  # a generator's finally blocks run now (a Bigtable stream is cancelled)


# -- asyncio ------------------------------------------------------------------------


def astream(plan: ReadPlan, conn: AsyncReader, model: type[M],
            codec: CursorCodec | None = None, start: Position | None = None, *,
            sink: str = "instances") -> AStreamed[M]:
    """`stream()` on an event loop: a task per stream read at once."""
    return AStreamed(_AsyncRun(plan, model, codec, start, sink, conn))


class AStreamed(AsyncIterator[M]):
    """`Streamed` on an event loop (``AsyncQuerySet.aiterator()``).

    Stop it early with `aclose()` (``contextlib.aclosing``) to cancel the
    reads still streaming at once; else they end when it is collected.
    """

    def __init__(self, run: _AsyncRun[M]) -> None:
        self._run, self._items = run, run.items()

    def __aiter__(self) -> AsyncIterator[M]:
        """The instances; ``async for`` takes them from the run's generator itself,
        without a coroutine of this iterator's per instance."""
        return self._items

    async def __anext__(self) -> M:
        return await self._items.__anext__()

    @property
    def cursor(self) -> str:
        """The token after the last instance handed out; see `Streamed.cursor`."""
        return self._run.cursor

    async def aclose(self) -> None:
        """Stop: the reads still streaming are cancelled, and have ended on return."""
        await self._items.aclose()


class _AsyncRun(_Resuming[M, AsyncReader]):
    """The state of an `AStreamed`, and the async driver of its steps."""

    async def items(self) -> AsyncGenerator[M, None]:
        blocking = await self._conn.blocking_reader()
        if blocking is not None:
            loop = asyncio.get_running_loop()
            context = contextvars.copy_context()
            while True:
                batches = self.batches(self._merge, blocking)
                hop: asyncio.Future[list[M] | None] | None = None
                try:
                    while True:
                        hop = loop.run_in_executor(None, _next_in, context, batches)
                        out = await asyncio.shield(hop)
                        hop = None
                        if out is None:
                            return
                        for self._handed, item in enumerate(out, 1):  # noqa: B007 - the count
                            yield item
                except errors.ReadInterruptedError as exc:
                    delay = self._resume(exc)
                finally:
                    if hop is not None:  # cancelled mid-hop: its thread still runs the steps
                        await asyncio.wait((hop,))
                        if not hop.cancelled():
                            hop.exception()  # seen: the read was cancelled, its error is moot
                    context.run(batches.close)  # the reads close (their finally blocks) now
                await asyncio.sleep(delay)
        while True:
            reads = self._read(self._merge)
            try:
                async for item in reads:
                    yield item
                return
            except errors.ReadInterruptedError as exc:
                delay = self._resume(exc)
            finally:
                await reads.aclose()  # not by itself when this generator is closed
            await asyncio.sleep(delay)

    def _open(self, merge: ReadMerge[M], request: ReadRequest | None) -> _APulled | _Tasked:
        if merge.concurrent and self._conn.features.concurrent_calls:
            return _Tasked(self._conn, request)
        return _APulled(self._conn, request)

    async def _read(self, merge: ReadMerge[M]) -> AsyncGenerator[M, None]:
        sources: list[_APulled | _Tasked] = []
        try:
            for step in self.steps(merge, sources, self._open):
                if not isinstance(step, list):
                    await _ado(step, sources)
                    continue
                for self._handed, item in enumerate(step, 1):  # noqa: B007 - the count
                    yield item
        finally:
            await _aclose(sources)


async def _ado(step: _Take[_APulled | _Tasked] | None,
              sources: list[_APulled | _Tasked]) -> None:
    """`_do()` on an event loop."""
    if step is None:
        await _aclose(sources)
    else:
        step.rows = await step.source.take(step.most)


async def _aclose(sources: list[_APulled | _Tasked]) -> None:
    for source in sources:
        source.stop()
    for source in sources:
        await source.join()


class _APulled(_Batches):
    """A stream read by the consumer's task, a batch when the merge asks."""

    __slots__ = ("_conn", "_request", "_rows")

    def __init__(self, conn: AsyncReader, request: ReadRequest | None) -> None:
        super().__init__()
        self._conn, self._request = conn, request
        self._rows: AsyncIterator[Row] | None = None

    async def take(self, most: int | None) -> list[Row] | None:
        if self._rows is None:
            if self._request is None:  # nothing left to read (a resumed read)
                return None
            self._rows = aiter(self._conn.read(self._request))
        size = self._next_size(most)
        rows = []
        async for row in self._rows:
            rows.append(row)
            if len(rows) >= size:
                break
        return rows or None

    def stop(self) -> None:
        pass

    async def join(self) -> None:
        rows, self._rows = self._rows, None
        aclose = getattr(rows, "aclose", None)
        if aclose is not None:
            await aclose()


class _Tasked:
    """A stream read by an asyncio task into a bounded channel."""

    __slots__ = ("_rows", "_ended", "_error", "_ready", "_room", "_task")

    def __init__(self, conn: AsyncReader, request: ReadRequest | None) -> None:
        self._rows: list[Row] = []
        self._ended = False
        self._error: BaseException | None = None
        self._ready: asyncio.Future[None] | None = None  # the consumer waits for rows
        self._room: asyncio.Future[None] | None = None  # the producer waits for room
        self._task = asyncio.get_running_loop().create_task(
            self._produce(conn, request),
            name=f"tsmodel-read {request.table if request is not None else '(none)'}")

    async def _produce(self, conn: AsyncReader, request: ReadRequest | None) -> None:
        if request is None:  # nothing left to read (a resumed read)
            self._ended = True
            _wake(self._ready)
            return
        try:
            rows = conn.read(request)
            try:
                async for row in rows:
                    self._rows.append(row)
                    _wake(self._ready)
                    while len(self._rows) >= CHANNEL_ROWS:
                        self._room = asyncio.get_running_loop().create_future()
                        await self._room
            finally:
                aclose = getattr(rows, "aclose", None)
                if aclose is not None:
                    await aclose()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            self._error = exc
        finally:
            self._ended = True
            _wake(self._ready)

    async def take(self, most: int | None) -> list[Row] | None:
        """Every row read so far (waiting for one), or ``None`` at the end.

        Raises:
            BackendError: the stream failed (the producer's error).
        """
        while not self._rows and not self._ended:
            self._ready = asyncio.get_running_loop().create_future()
            await self._ready
        rows, self._rows = self._rows, []
        _wake(self._room)
        if rows:
            return rows
        if self._error is not None:
            raise self._error
        return None

    def stop(self) -> None:
        self._task.cancel()

    async def join(self) -> None:
        await asyncio.wait((self._task,))


def _wake(future: asyncio.Future[Any] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)
