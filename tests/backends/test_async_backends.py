"""The asyncio backends answer as the blocking ones do, on both kinds of store.

Each test writes with the async backend and reads with both (or the other
way round): the async backend is a driver of the sync one's steps, so the
answers must be the same row for row.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tsmodel.backends.base import (
    AsyncBackend,
    Backend,
    GcRule,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowRange,
    RowSet,
    SetCell,
    TableSpec,
)

MS = 1000


def cells(n: int) -> list[RowMutation]:
    return [RowMutation(b"row%03d" % i, (SetCell("f", b"q", (i + 1) * MS, b"v%d" % i),
                                          SetCell("g", b"r", MS, b"x")))
            for i in range(n)]


async def rows_of(backend: AsyncBackend, request: ReadRequest) -> list[object]:
    return [row async for row in backend.read_rows(request)]


async def test_async_backend_satisfies_protocol(backend: Backend) -> None:
    async with asynchronous(backend) as ab:
        assert isinstance(ab, AsyncBackend)
        assert ab.features == backend.features


async def test_writes_and_reads_agree_with_the_blocking_backend(
        backend: Backend, table_name: str) -> None:
    async with asynchronous(backend) as ab:
        spec = TableSpec(table_name, (("f", GcRule(max_versions=2)), ("g", GcRule())))
        await ab.create_table(spec)
        assert table_name in await ab.list_tables()
        assert (await ab.describe_table(table_name)) == backend.describe_table(table_name)
        outcomes = await ab.mutate_rows(table_name, cells(40))
        assert {o.status for o in outcomes} == {MutationStatus.APPLIED}
        requests = [
            ReadRequest(table_name),
            ReadRequest(table_name, RowSet(ranges=(RowRange(b"row005", b"row030"),)), limit=7),
            ReadRequest(table_name, reverse=True, limit=3),
            ReadRequest(table_name, RowSet(keys=(b"row001", b"row039", b"nope"))),
            ReadRequest(table_name, filter=ReadFilter(families=("f",), timestamp_start=10 * MS)),
            ReadRequest(table_name, filter=ReadFilter(qualifier_start=b"r"), limit=4),
        ]
        for request in requests:
            assert await rows_of(ab, request) == list(backend.read_rows(request)), request
        await ab.delete_table(table_name)


async def test_failed_entries_fail_alone(backend: Backend, table_name: str) -> None:
    async with asynchronous(backend) as ab:
        await ab.create_table(TableSpec(table_name, (("f", GcRule()),)))
        entries = [RowMutation(b"a", (SetCell("f", b"q", MS, b"1"),)),
                   RowMutation(b"b", (SetCell("nope", b"q", MS, b"1"),)),
                   RowMutation(b"c", ())]
        outcomes = await ab.mutate_rows(table_name, entries)
        assert [o.status for o in outcomes] == [
            MutationStatus.APPLIED, MutationStatus.FAILED, MutationStatus.FAILED]
        assert [row.key for row in backend.read_rows(ReadRequest(table_name))] == [b"a"]


async def test_missing_table_errors(backend: Backend, table_name: str) -> None:
    async with asynchronous(backend) as ab:
        with pytest.raises(ts.TableNotFoundError):
            await ab.mutate_rows(table_name, cells(1))
        with pytest.raises(ts.TableNotFoundError):
            await rows_of(ab, ReadRequest(table_name))
        with pytest.raises(ts.TableNotFoundError):
            await ab.describe_table(table_name)
        await ab.delete_table(table_name)  # no error


async def test_reads_stream_and_let_other_tasks_run(backend: Backend, table_name: str) -> None:
    """A long read yields to the event loop between rows it waits for."""
    async with asynchronous(backend) as ab:
        await ab.create_table(TableSpec(table_name, (("f", GcRule()), ("g", GcRule()))))
        await ab.mutate_rows(table_name, cells(300))
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        seen = len(await rows_of(ab, ReadRequest(table_name)))
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert seen == 300
        assert ticks > 1


async def test_abandoned_read_frees_its_stream(backend: Backend, table_name: str) -> None:
    async with asynchronous(backend) as ab:
        await ab.create_table(TableSpec(table_name, (("f", GcRule()), ("g", GcRule()))))
        await ab.mutate_rows(table_name, cells(100))
        stream = ab.read_rows(ReadRequest(table_name))
        first = await anext(stream)
        await stream.aclose()  # type: ignore[attr-defined]
        assert first.key == b"row000"
        # the store still answers (an embedded read holds no lock between batches)
        assert len(await rows_of(ab, ReadRequest(table_name, limit=2))) == 2


class _Counted:
    """A blocking backend whose reads count the rows taken from them (a real store under)."""

    def __init__(self, backend: Backend) -> None:
        self.backend, self.features, self.taken = backend, backend.features, 0

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        for row in self.backend.read_rows(request):
            self.taken += 1
            yield row


async def test_a_threaded_read_holds_at_most_a_batch_ahead(
        backend: Backend, table_name: str) -> None:
    """Back-pressure of the thread hops: the rows taken from the blocking read stay
    within a batch of those the loop took, and nothing is read after a close."""
    from tsmodel.backends.threaded import _LARGEST_BATCH, ThreadedBackend

    backend.create_table(TableSpec(table_name, (("f", GcRule()), ("g", GcRule()))))
    backend.mutate_rows(table_name, cells(1000))
    expected = list(backend.read_rows(ReadRequest(table_name)))
    counted = _Counted(backend)
    ab = ThreadedBackend(counted)  # type: ignore[arg-type]
    assert await rows_of(ab, ReadRequest(table_name)) == expected
    assert counted.taken == 1000

    counted.taken = 0
    stream = ab.read_rows(ReadRequest(table_name))
    got = [await anext(stream) for _ in range(600)]
    await asyncio.sleep(0.2)  # a hop still running would have finished by now
    assert got == expected[:600]
    assert 600 <= counted.taken <= 600 + _LARGEST_BATCH
    await stream.aclose()  # type: ignore[attr-defined]
    taken = counted.taken
    await asyncio.sleep(0.05)
    assert counted.taken == taken  # nothing reads after the close
    assert len(await rows_of(ab, ReadRequest(table_name, limit=2))) == 2
