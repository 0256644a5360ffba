"""(g) the asyncio API against google-cloud-bigtable's async data client, and against sync.

The baselines are the sync ones of ``_bigtable.py`` on
``BigtableDataClientAsync``, the same work done the same way: per table, a
``mutations_batcher()`` (default settings) fed one ``RowMutationEntry`` per
row; per host, one awaited ``read_rows`` into the client's ``Row`` objects;
for a single event, an awaited ``mutate_row`` on each table in turn. tsmodel
runs ``await db.save_all(events)``, ``async for`` over ``db.range(...)``
(host after host, as the sync figure reads) and ``await db.save(event)`` on
``await ts.connect_async(url)``. Each run also times the sync tsmodel figure,
so that async and sync compare within a run.

Everything runs on one event loop of this thread, driven with
``run_until_complete``; the sync calls run between them, while it is idle.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import _data
from _bigtable import BASE_CURRENT, BASE_MAIN, BigtableSuite, one_at_a_time
from _common import Result, median, ratio_result, timed

import tsmodel as ts
from tsmodel.backends.base import TableSpec

T = TypeVar("T")


class AsyncSuite:
    """(g) on the emulator a :class:`BigtableSuite` uses, with its events and tables."""

    def __init__(self, sync: BigtableSuite) -> None:
        self.sync = sync
        self.model, self.events, self.hosts = sync.model, sync.events, sync.hosts
        self.runs, self.log = sync.runs, sync.log
        self.loop = asyncio.new_event_loop()
        self.db: ts.AsyncConnection = self.run(self._connect())
        self.client: Any = self.run(self._official_client())

    async def _connect(self) -> ts.AsyncConnection:
        return await ts.connect_async(self.sync.url)

    async def _official_client(self) -> Any:
        """The async data client, default settings; sync.client set BIGTABLE_EMULATOR_HOST."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from google.cloud.bigtable.data import BigtableDataClientAsync

            return BigtableDataClientAsync(project="bench")

    def run(self, awaitable: Awaitable[T]) -> T:
        async def wrapped() -> T:
            return await awaitable

        return self.loop.run_until_complete(wrapped())

    def close(self) -> None:
        try:
            self.run(self.client.close())
            self.run(self.db.close())
        finally:
            self.loop.close()

    def all(self, requests: Callable[[], int] | None, rtt: float | None) -> list[Result]:
        writes, reads = self.writes(), self.reads()
        return [writes[0], reads[0], writes[1], reads[1], *self.single_saves(requests, rtt),
                *reads[2:]]

    # -- save_all ----------------------------------------------------------------------

    def writes(self) -> list[Result]:
        """(g1) async save_all vs the async batcher, (g3) vs sync save_all."""
        sides = {"async": self._tsmodel_write, "client": self._baseline_write,
                 "sync": self.sync._tsmodel_write}
        times = self._rotated(sides)
        n = len(self.events)
        ours = [n / s for s in times["async"]]
        theirs = [n / s for s in times["client"]]
        sync = [n / s for s in times["sync"]]
        against_client = ratio_result("g1", "", "rows/s", ours, theirs, 5.0, target=">= 5x")
        against_client.what = (f"async save {n:,} events vs BigtableDataClientAsync "
                               f"mutations_batcher")
        self._tsmodel_write()  # the last tsmodel write was async's, for the check
        against_client.notes.append(self.sync._same_cells().replace(
            "tsmodel and the baseline", "async tsmodel and the async baseline"))
        against_sync = ratio_result("g3", "", "rows/s", ours, sync, 1.0, target=">= 1x")
        against_sync.what = f"async save_all vs sync save_all, {n:,} events (both tsmodel)"
        return [against_client, against_sync]

    def _tsmodel_write(self) -> float:
        self.sync.conn.drop_tables(self.model)
        self.sync.conn.create_tables(self.model)
        seconds, outcome = timed(lambda: self.run(self.db.save_all(self.events)))
        assert outcome.ok, outcome.summary()
        return seconds

    def _baseline_write(self) -> float:
        from google.cloud.bigtable.data import RowMutationEntry, SetCell

        backend = self.sync.conn.backend
        for name in (BASE_MAIN, BASE_CURRENT):
            backend.delete_table(name)
            backend.create_table(TableSpec(name, self.sync.families))

        async def write() -> None:  # the hand-written program: encode, then batch
            for name, rows in ((BASE_MAIN, _data.plain_rows(self.events)),
                               (BASE_CURRENT, _data.plain_current_rows(self.events))):
                async with self.client.get_table("bench", name) as table, \
                        table.mutations_batcher() as batcher:
                    for key, cells in rows:
                        await batcher.append(RowMutationEntry(key, [
                            SetCell(family, qualifier, value, timestamp_micros=ts)
                            for family, qualifier, ts, value in cells]))

        return timed(lambda: self.run(write()))[0]

    # -- range reads -------------------------------------------------------------------

    def reads(self) -> list[Result]:
        """(g2) async range reads vs the async client's read_rows, (g4) vs sync reads,
        (g8) async ``to_arrow()`` vs sync ``to_arrow()`` of the same ranges."""
        self.sync._tsmodel_write()
        if not self.sync._has_baseline_tables():
            self.sync._baseline_write()
        sides = {"async": self._tsmodel_read, "client": self._baseline_read,
                 "sync": self.sync._tsmodel_read}
        times = self._rotated(sides)
        n = len(self.events)
        ours = [n / s for s in times["async"]]
        against_client = ratio_result("g2", "", "rows/s", ours,
                                      [n / s for s in times["client"]], 5.0, target=">= 5x")
        against_client.what = (f"async range-read {n:,} events vs BigtableDataClientAsync "
                               f"read_rows")
        against_sync = ratio_result("g4", "", "rows/s", ours, [n / s for s in times["sync"]],
                                    1.0, target=">= 1x")
        against_sync.what = f"async range read vs sync range read, {n:,} events (both tsmodel)"
        against_sync.notes.append(self._read_breakdown(median(ours)))
        against_sync.notes.append(self._cpu_breakdown())
        arrow = self._rotated({"async to_arrow": self._arrow_read,
                               "sync to_arrow": self.sync._arrow_read})
        columns = ratio_result("g8", "", "events/s", [n / s for s in arrow["async to_arrow"]],
                               [n / s for s in arrow["sync to_arrow"]], 0.9, target=">= 0.9x")
        columns.what = f"async to_arrow() vs sync to_arrow(), {n:,} events (both tsmodel)"
        return [against_client, against_sync, columns]

    def _cpu_breakdown(self) -> str:
        """CPU per instance of the async and the sync range reads (medians, every thread
        of the process), and the event loop thread's part of the async one's."""
        n = len(self.events) / 1e6
        asyncs, loops, syncs = [], [], []
        for _ in range(self.runs):
            cpu, loop = time.process_time(), time.thread_time()
            self._tsmodel_read()
            asyncs.append((time.process_time() - cpu) / n)
            loops.append((time.thread_time() - loop) / n)
            cpu = time.process_time()
            self.sync._tsmodel_read()
            syncs.append((time.process_time() - cpu) / n)
        return (f"CPU per instance: async {median(asyncs):.1f} us, of which the event loop's "
                f"thread {median(loops):.1f} us (the rest in the worker thread that reads and "
                f"decodes); sync {median(syncs):.1f} us")

    def _read_breakdown(self, rate: float) -> str:
        """The backends' reads alone, async and sync, per row (medians)."""
        requests = [req for host in self.hosts for req in self.model.range(
            _data.START, self.sync.end, hostname=host).using(self.sync.conn).explain().requests]
        sync_backend, async_backend = self.sync.conn.backend, self.db.backend

        def sync_read() -> None:
            for request in requests:
                for _ in sync_backend.read_rows(request):
                    pass

        async def async_read() -> None:
            for request in requests:
                async for _ in async_backend.read_rows(request):
                    pass

        n = len(self.events) / 1e6
        syncs, asyncs = [], []
        for _ in range(self.runs):
            syncs.append(timed(sync_read)[0] / n)
            asyncs.append(timed(lambda: self.run(async_read()))[0] / n)
        total, backend = 1e6 / rate, median(asyncs)
        return (f"per instance, async {total:.1f} us in all: backend read_rows {backend:.1f} us "
                f"on grpc.aio (the sync backend's: {median(syncs):.1f} us), the rest "
                f"(QuerySet, decoding) {total - backend:.1f} us")

    def _tsmodel_read(self) -> float:
        async def read() -> int:
            count = 0
            for host in self.hosts:
                count += len([m async for m in self.db.range(
                    self.model, _data.START, self.sync.end, hostname=host)])
            return count

        seconds, count = timed(lambda: self.run(read()))
        assert count == len(self.events), count
        return seconds

    def _arrow_read(self) -> float:
        async def read() -> int:
            count = 0
            for host in self.hosts:
                table = await self.db.range(self.model, _data.START, self.sync.end,
                                            hostname=host).to_arrow()
                count += table.num_rows
            return count

        seconds, count = timed(lambda: self.run(read()))
        assert count == len(self.events), count
        return seconds

    def _baseline_read(self) -> float:
        from google.cloud.bigtable.data import ReadRowsQuery, RowRange
        from google.cloud.bigtable.data.row_filters import CellsColumnLimitFilter

        async def read() -> int:
            count = 0
            async with self.client.get_table("bench", BASE_MAIN) as table:
                for host in self.hosts:
                    start, end = _data.row_range(host, _data.START, self.sync.end)
                    query = ReadRowsQuery(row_ranges=RowRange(start_key=start, end_key=end),
                                          row_filter=CellsColumnLimitFilter(1))
                    count += len(await table.read_rows(query))
            return count

        seconds, count = timed(lambda: self.run(read()))
        assert count == len(self.events), count
        return seconds

    def _rotated(self, sides: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
        """Seconds per side per run; each run starts with the next side in turn."""
        names = list(sides)
        times: dict[str, list[float]] = {name: [] for name in names}
        for run in range(self.runs):
            for name in names[run % len(names):] + names[:run % len(names)]:
                times[name].append(sides[name]())
            self.log(f"  (g) run {run + 1}: " + ", ".join(
                f"{name} {len(self.events) / times[name][-1]:,.0f} rows/s" for name in names))
        return times

    # -- save() of one event -----------------------------------------------------------

    def single_saves(self, requests: Callable[[], int] | None,
                     rtt: float | None) -> list[Result]:
        """``await save(event)`` one at a time against two awaited ``mutate_row``."""
        self.sync.ensure_tables()
        results = one_at_a_time(("g5", "g6", "g7"), "await save()", self._tsmodel_saves,
                                self._baseline_saves, self.sync.singles, self.runs, requests,
                                rtt, self.log)
        results[0].notes.append(self.sync.same_single_cells().replace(
            "mutate_row", "await mutate_row"))
        return results

    def _tsmodel_saves(self, events: list[Any]) -> list[float]:
        async def saves() -> list[float]:
            save, clock, out = self.db.save, time.perf_counter, []
            for event in events:
                start = clock()
                await save(event)
                out.append(clock() - start)
            return out

        return self.run(saves())

    def _baseline_saves(self, events: list[Any]) -> list[float]:
        from google.cloud.bigtable.data import SetCell

        async def saves() -> list[float]:
            clock, out = time.perf_counter, []
            async with self.client.get_table("bench", BASE_MAIN) as main, \
                    self.client.get_table("bench", BASE_CURRENT) as current:
                for event in events:  # one call per table, in turn
                    start = clock()
                    for table, rows in ((main, _data.plain_rows([event])),
                                        (current, _data.plain_current_rows([event]))):
                        for key, cells in rows:
                            await table.mutate_row(key, [
                                SetCell(family, qualifier, value, timestamp_micros=ts)
                                for family, qualifier, ts, value in cells])
                    out.append(clock() - start)
            return out

        return self.run(saves())
