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
* `astream()` (asyncio) reads each opened stream in a task of its own
  that fills a channel of at most `CHANNEL_ROWS` rows, when the
  backend's features say reads gain from it (``Features.concurrent_calls``);
  otherwise it takes the rows in the consuming task, as the sync way does.

The merge's answer does not depend on how its rows come batched, so every
way gives the same answer in the same order. Instances come out as soon as
they are certain (the first ones before the last stream ends), and when the
consumer stops early (``first()``, a ``break``, a dropped iterator) or a
stream fails, every other stream is closed (a Bigtable stream is
cancelled) and its task has ended before the iterator returns or raises.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from tsmodel.backends.base import ReadRequest, Row
from tsmodel.plan.merge import ReadMerge
from tsmodel.plan.reads import ReadPlan

if TYPE_CHECKING:
    from tsmodel.run.async_connection import AsyncConnection
    from tsmodel.run.connection import Connection

__all__ = ["stream", "astream", "CHANNEL_ROWS", "PULL_ROWS"]

M = TypeVar("M")

#: Rows an async stream read ahead of the merge holds at most (per stream).
CHANNEL_ROWS = 256
#: Rows a stream taken by the consumer gives per batch: one at first
#: (``first()`` reads one row), doubling up to this many.
PULL_ROWS = 256


# -- sync ---------------------------------------------------------------------------


def stream(plan: ReadPlan, conn: Connection, model: type[M], *,
           sink: str = "instances") -> Generator[M, None, None]:
    """The instances of ``plan`` (or what else ``sink`` says: see
    `ReadMerge`), read on ``conn`` and merged as the plan says."""
    merge = ReadMerge(plan, model, sink=sink)
    sources: list[_Pulled] = []
    try:
        while (i := merge.want()) is not None:
            while len(sources) < merge.opened:  # started before any is taken from
                sources.append(_Pulled(conn.read(merge.streams[len(sources)])))
            out = merge.give(i, sources[i].take(merge.remaining))
            if merge.done:
                _close(sources)
            yield from out
    finally:
        _close(sources)


def _close(sources: list[_Pulled]) -> None:
    for source in sources:
        source.close()


class _Pulled:
    """A started read, whose rows the consumer takes a batch at a time."""

    __slots__ = ("_rows", "_size")

    def __init__(self, rows: Iterator[Row]) -> None:
        self._rows: Iterator[Row] | None = iter(rows)
        self._size = 1

    def take(self, most: int | None) -> list[Row] | None:
        """The next rows (at most ``most`` when given), or ``None`` at the end."""
        assert self._rows is not None
        size = self._size if most is None else max(1, min(self._size, most))
        self._size = min(2 * self._size, PULL_ROWS)
        return list(itertools.islice(self._rows, size)) or None

    def close(self) -> None:
        rows, self._rows = self._rows, None
        close = getattr(rows, "close", None)
        if close is not None:
            close()  # a generator's finally blocks run now (a Bigtable stream is cancelled)


# -- asyncio ------------------------------------------------------------------------


async def astream(plan: ReadPlan, conn: AsyncConnection, model: type[M], *,
                  sink: str = "instances") -> AsyncGenerator[M, None]:
    """`stream()` on an event loop: a task per stream read at once."""
    merge = ReadMerge(plan, model, sink=sink)
    concurrent = merge.concurrent and conn.features.concurrent_calls
    sources: list[_APulled | _Tasked] = []
    try:
        while (i := merge.want()) is not None:
            while len(sources) < merge.opened:
                request = merge.streams[len(sources)]
                sources.append(_Tasked(conn, request) if concurrent
                               else _APulled(conn, request))
            out = merge.give(i, await sources[i].take(merge.remaining))
            if merge.done:
                await _aclose(sources)
            for item in out:
                yield item
    finally:
        await _aclose(sources)


async def _aclose(sources: list[_APulled | _Tasked]) -> None:
    for source in sources:
        source.stop()
    for source in sources:
        await source.join()


class _APulled:
    """A stream read by the consumer's task, a batch when the merge asks."""

    __slots__ = ("_conn", "_request", "_rows", "_size")

    def __init__(self, conn: AsyncConnection, request: ReadRequest) -> None:
        self._conn, self._request = conn, request
        self._rows: AsyncIterator[Row] | None = None
        self._size = 1

    async def take(self, most: int | None) -> list[Row] | None:
        if self._rows is None:
            self._rows = aiter(self._conn.read(self._request))
        size = self._size if most is None else max(1, min(self._size, most))
        self._size = min(2 * self._size, PULL_ROWS)
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

    def __init__(self, conn: AsyncConnection, request: ReadRequest) -> None:
        self._rows: list[Row] = []
        self._ended = False
        self._error: BaseException | None = None
        self._ready: asyncio.Future[None] | None = None  # the consumer waits for rows
        self._room: asyncio.Future[None] | None = None  # the producer waits for room
        self._task = asyncio.get_running_loop().create_task(
            self._produce(conn, request), name=f"tsmodel-read {request.table}")

    async def _produce(self, conn: AsyncConnection, request: ReadRequest) -> None:
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
