"""The repair and snapshot jobs on the asyncio API, on every backend.

Each test runs the same damage twice, on two models with the same
declaration (tables of their own): the sync job repairs one, the async job
the other. Both reports must be what the damage implies, equal to each
other, and the tables they leave must be cell for cell those of a third
model saved without any fault (a clean run).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tests.backends.passthrough import AsyncPassThrough
from tests.backends.test_companions import (
    DAY,
    MARCH,
    SCORES,
    FaultyBackend,
    game_model,
    games,
    meter_model,
    meter_readings,
    table_cells,
)
from tests.backends.test_models import battery_model
from tsmodel.backends.base import (
    AsyncBackend,
    Backend,
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    Row,
    RowMutation,
)
from tsmodel.encoding.timestamps import to_micros

UTC = timezone.utc
APRIL = MARCH + timedelta(days=31)


class FaultyAsync(AsyncPassThrough):
    """An async backend whose writes to some tables fail (and are not applied).

    It also counts the reads not yet ended.
    """

    def __init__(self, inner: AsyncBackend) -> None:
        self.inner = inner
        self.features = inner.features
        self.fail: dict[str, MutationStatus] = {}
        self.fail_after_calls: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.reading = 0

    async def mutate_rows(self, table: str,
                          entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        self.calls[table] = self.calls.get(table, 0) + 1
        status = self.fail.get(table)
        if table in self.fail_after_calls and self.calls[table] > self.fail_after_calls[table]:
            status = MutationStatus.UNKNOWN
        if status is not None:
            error = ts.BackendError(f"injected failure writing {table}")
            return [MutationOutcome(status, error) for _ in entries]
        return await self.inner.mutate_rows(table, entries)

    async def read_rows(self, request: ReadRequest) -> AsyncIterator[Row]:
        self.reading += 1
        try:
            async for row in self.inner.read_rows(request):
                yield row
        finally:
            self.reading -= 1

    async def close(self) -> None:
        """The session's backend outlives this proxy."""


def companions(model: Any) -> list[str]:
    spec = model.__tsmodel__
    return [t for t in (spec.current_table, *(a.table for a in spec.alternates)) if t]


def assert_same_tables(backend: Backend, *models: Any) -> None:
    """Every table of the models holds the same cells, table for table."""
    first, *others = models
    for other in others:
        for mine, theirs in zip(ts.table_specs(first.__tsmodel__),
                                ts.table_specs(other.__tsmodel__), strict=True):
            assert table_cells(backend, mine.name) == table_cells(backend, theirs.name), (
                f"{mine.name} and {theirs.name} differ")


# -- repair: companions lacking events ------------------------------------------------


async def test_repair_writes_what_a_partial_save_left_out(backend: Backend) -> None:
    """The current-value write FAILED, the alternate one UNKNOWN (not applied): PARTIAL."""
    Sync, Async, Clean = game_model(), game_model(), game_model()
    faulty = FaultyBackend(backend)
    sync_conn = ts.Connection(faulty)  # type: ignore[arg-type]
    sync_conn.create_tables(Clean)
    sync_conn.save_all(games(Clean))
    async with asynchronous(backend) as ab:
        afaulty = FaultyAsync(ab)
        db = ts.AsyncConnection(afaulty)
        sync_conn.create_tables(Sync)
        await db.create_tables(Async)
        for model, proxy in ((Sync, faulty), (Async, afaulty)):
            spec = model.__tsmodel__
            proxy.fail[spec.current_table] = MutationStatus.FAILED
            proxy.fail[spec.alternates[0].table] = MutationStatus.UNKNOWN
        damaged = sync_conn.save_all(games(Sync), raise_on_failure=False)
        adamaged = await db.save_all(games(Async), raise_on_failure=False)
        for result in (damaged, adamaged):
            assert [r.status for r in result.results] == [ts.WriteStatus.PARTIAL] * len(SCORES)
        faulty.fail.clear()
        afaulty.fail.clear()

        report = ts.repair(Sync, MARCH, APRIL, connection=sync_conn)
        areport = await ts.repair_async(Async, MARCH, APRIL, connection=db, batch_size=3)
        # Every current-value row was lost, and is restored (counted from the clean table).
        lost = len(table_cells(backend, Clean.__tsmodel__.current_table))
        expected = ts.RepairReport(events=len(SCORES), alternate_events_deleted=0,
                                   current_rows_fixed=lost, failed=0)
        assert report == areport == expected
        assert afaulty.reading == 0, "every read ended"
        assert_same_tables(backend, Clean, Sync, Async)
        # Repairing again changes nothing, on either API.
        assert await ts.repair_async(Async, MARCH, APRIL, connection=db) == attrs.evolve(
            expected, current_rows_fixed=0)
        assert_same_tables(backend, Clean, Async)


async def test_repair_of_companion_tables_created_after_the_save(backend: Backend) -> None:
    """The companion tables did not exist when the events were saved (PARTIAL)."""
    Sync, Async, Clean = game_model(), game_model(), game_model()
    conn = ts.Connection(backend)
    conn.create_tables(Clean)
    conn.save_all(games(Clean))
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        for model in (Sync, Async):
            spec = model.__tsmodel__
            main = ts.table_specs(spec)[0]
            assert main.name == spec.table
            await ab.create_table(main)
            result = await db.save_all(games(model), raise_on_failure=False)
            assert [r.status for r in result.results] == [ts.WriteStatus.PARTIAL] * len(SCORES)
            await db.create_tables(model)
        report = ts.repair(Sync, MARCH, APRIL, connection=conn)
        areport = await ts.repair_async(Async, MARCH, APRIL, connection=db)
        assert report == areport and report.ok and report.events == len(SCORES)
        assert_same_tables(backend, Clean, Sync, Async)


async def test_salted_model_repair_reads_every_salt(backend: Backend) -> None:
    """A salted main table (a read per salt, and a guard read) with an alternate-key table."""
    Sync, Async, Clean = battery_model(), battery_model(), battery_model()
    base = datetime(2015, 3, 1, 12, 45, 1, 1000, tzinfo=UTC)

    def events(model: Any) -> list[Any]:
        return [model(time=base + timedelta(milliseconds=i), user=u, percentage=p)
                for i, (u, p) in enumerate([("Corrie", 98), ("Jo", 54), ("Corrie", 96),
                                            ("Sam", 43), ("Sam", 38)] * 3)]

    conn = ts.Connection(faulty := FaultyBackend(backend))  # type: ignore[arg-type]
    for model in (Sync, Async, Clean):
        conn.create_tables(model)
        faulty.fail = {t: MutationStatus.FAILED for t in companions(model) if model is not Clean}
        conn.save_all(events(model), raise_on_failure=False)
    faulty.fail.clear()
    assert Sync.range(base, base + timedelta(seconds=1)).using(conn).explain().guards
    end = base + timedelta(seconds=1)
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        report = ts.repair(Sync, base, end, connection=conn, batch_size=4)
        areport = await ts.repair_async(Async, base, end, connection=db, batch_size=4)
    assert report == areport == ts.RepairReport(15, 0, 0, 0)
    assert_same_tables(backend, Clean, Sync, Async)


# -- repair: companions holding events the main table lacks ----------------------------


async def test_repair_deletes_what_unknown_main_writes_left(backend: Backend) -> None:
    """Two main writes UNKNOWN and not applied, whose companion writes were.

    The current rows show the newest ghost; one repair deletes both ghosts
    (the second shows once the first is deleted) and makes day 28 current.
    """
    Sync, Async, Clean = game_model(), game_model(), game_model()
    ghosts = [(29, 99.0), (30, 98.0)]
    conn = ts.Connection(faulty := FaultyBackend(backend))  # type: ignore[arg-type]
    conn.create_tables(Clean)
    conn.save_all(games(Clean))
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(afaulty := FaultyAsync(ab))
        for model, proxy in ((Sync, faulty), (Async, afaulty)):
            conn.create_tables(model)
            conn.save_all(games(model))
            proxy.fail[model.__tsmodel__.table] = MutationStatus.UNKNOWN
            ghost = [model(game="LoL", player="Corrie", time=MARCH + timedelta(days=day),
                           win=True, kda=kda) for day, kda in ghosts]
            if model is Sync:
                result = conn.save_all(ghost, raise_on_failure=False)
            else:
                result = await db.save_all(ghost, raise_on_failure=False)
            assert [r.status for r in result.results] == [ts.WriteStatus.UNKNOWN] * 2
            proxy.fail.clear()
            assert (await db.latest(model, game="LoL", player="Corrie")).kda == 98.0

        report = ts.repair(Sync, MARCH, APRIL, connection=conn)
        areport = await ts.repair_async(Async, MARCH, APRIL, connection=db)
        assert report == areport == ts.RepairReport(len(SCORES), 2, 1, 0)
        assert afaulty.reading == 0
        newest = await db.latest(Async, game="LoL", player="Corrie")
        assert (newest.time, newest.kda) == (MARCH + timedelta(days=27), 3.0)
        # The current rows keep the ghosts' older versions below the newest cells,
        # as a clean run keeps older events: compare the newest cells of each row.
        for model in (Sync, Async):
            for mine, theirs in zip(companions(Clean), companions(model), strict=True):
                assert newest_cells(backend, mine) == newest_cells(backend, theirs)
        again = await ts.repair_async(Async, MARCH, APRIL, connection=db)
        assert again == ts.RepairReport(len(SCORES), 0, 0, 0)


def newest_cells(backend: Backend, table: str) -> list[tuple[bytes, Any]]:
    out = []
    for key, cells in table_cells(backend, table):
        top = max(c[2] for c in cells)
        out.append((key, [c for c in cells if c[2] == top]))
    return out


async def test_repair_of_a_key_prefix_leaves_other_entities_alone(backend: Backend) -> None:
    Game = game_model()
    conn = ts.Connection(faulty := FaultyBackend(backend))  # type: ignore[arg-type]
    conn.create_tables(Game)
    conn.save_all(games(Game))
    faulty.fail[Game.__tsmodel__.table] = MutationStatus.UNKNOWN
    conn.save_all([Game(game="LoL", player="Corrie", time=MARCH + timedelta(days=29),
                        win=True, kda=99.0)], raise_on_failure=False)
    faulty.fail.clear()
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        jo = await ts.repair_async(Game, MARCH, APRIL, connection=db, game="LoL", player="Jo")
        assert jo == ts.RepairReport(2, 0, 0, 0)
        assert (await db.latest(Game, game="LoL", player="Corrie")).kda == 99.0
        corrie = await ts.repair_async(Game, MARCH, APRIL, connection=db, game="LoL",
                                       player="Corrie")
        assert (corrie.alternate_events_deleted, corrie.current_rows_fixed) == (1, 1)
        assert (await db.latest(Game, game="LoL", player="Corrie")).kda == 3.0


async def test_repair_async_refuses_bad_arguments(backend: Backend) -> None:
    Game = game_model()
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        with pytest.raises(ts.QueryError, match="'nope' is not a key field"):
            await ts.repair_async(Game, MARCH, APRIL, connection=db, nope=1)
        with pytest.raises(ts.ValidationError, match="range start: naive datetime"):
            await ts.repair_async(Game, MARCH.replace(tzinfo=None), APRIL, connection=db)


# -- snapshots -------------------------------------------------------------------------


async def test_snapshot_async_equals_the_sync_snapshot(backend: Backend) -> None:
    Sync, Async = meter_model(), meter_model()
    conn = ts.Connection(backend)
    readings = {}
    for model in (Sync, Async):
        conn.create_tables(model)
        readings[model] = meter_readings(model)
        conn.save_all(readings[model])
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        # 12 meters, a bucket row of 96 readings each: a batch of 100 events is cut
        # after every second row.
        report = ts.build_snapshot(Sync, DAY, connection=conn, batch_size=100, progress=False)
        areport = await ts.build_snapshot_async(Async, DAY + timedelta(hours=5), connection=db,
                                                batch_size=100, progress=False)
        assert areport.table.endswith("_20170726") and areport.table != report.table
        assert (areport.events_written, areport.rows_read, areport.batches) == (
            report.events_written, report.rows_read, report.batches) == (12 * 96, 12, 6)
        assert (areport.period_start, areport.period_end) == (DAY, DAY + timedelta(days=1))
        expected = sorted((r for r in readings[Async] if DAY <= r.time < DAY + timedelta(1)),
                          key=lambda r: (r.meter, r.time))
        assert [e async for e in db.snapshot(Async, DAY)] == expected
        assert table_cells(backend, areport.table) == table_cells(backend, report.table)

        again = await ts.build_snapshot_async(Async, DAY, connection=db, progress=False)
        assert again.already_complete and again.events_written == 0
        rebuilt = await ts.build_snapshot_async(Async, DAY, connection=db, progress=False,
                                                restart=True)
        assert rebuilt.events_written == 12 * 96
        assert table_cells(backend, areport.table) == table_cells(backend, report.table)


async def test_interrupted_async_snapshot_resumes(backend: Backend) -> None:
    Async, Reference = meter_model(), meter_model()
    conn = ts.Connection(backend)
    for model in (Async, Reference):
        conn.create_tables(model)
        conn.save_all(meter_readings(model))
    table = Async.__tsmodel__.snapshot.table_for(to_micros(DAY))
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(afaulty := FaultyAsync(ab))
        afaulty.fail_after_calls[table] = 3  # the 4th batch fails
        with pytest.raises(ts.SnapshotError, match="run the job again"):
            await ts.build_snapshot_async(Async, DAY, connection=db, batch_size=96,
                                          progress=False)
        assert afaulty.reading == 0, "the scan ended with the job"
        afaulty.fail_after_calls.clear()
        resumed = await ts.build_snapshot_async(Async, DAY, connection=db, batch_size=96,
                                                progress=False)
    assert resumed.resumed_after is not None
    assert resumed.events_written == 12 * 96 - 3 * 96
    done = ts.build_snapshot(Reference, DAY, connection=conn, batch_size=96, progress=False)
    mine = [(k[-20:], cells) for k, cells in table_cells(backend, table)]
    theirs = [(k[-20:], cells) for k, cells in table_cells(backend, done.table)]
    assert mine == theirs


async def test_snapshot_async_of_a_model_without_snapshot(backend: Backend) -> None:
    async with asynchronous(backend) as ab:
        with pytest.raises(ts.QueryError, match="no snapshot"):
            await ts.build_snapshot_async(game_model(), DAY, connection=ts.AsyncConnection(ab))


async def test_repair_reads_the_main_table_where_an_alternate_serves_the_prefix(
        backend: Backend) -> None:
    """``game=`` alone: the alternate key ``game#time#player`` serves a range query
    better than the main key ``game#player#time``, but a repair must read the main
    table. Reading the alternate, it took the ghost for a held event and left it."""
    ghost_day, ghost_kda = 29, 99.0
    conn = ts.Connection(faulty := FaultyBackend(backend))  # type: ignore[arg-type]
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        for run in ("sync", "async"):
            Game = game_model()
            assert Game.range(MARCH, APRIL, game="LoL").explain().table != Game.__tsmodel__.table
            conn.create_tables(Game)
            conn.save_all(games(Game))
            faulty.fail[Game.__tsmodel__.table] = MutationStatus.UNKNOWN
            conn.save_all([Game(game="LoL", player="Corrie", time=MARCH + timedelta(ghost_day),
                                win=True, kda=ghost_kda)], raise_on_failure=False)
            faulty.fail.clear()
            if run == "sync":
                report = ts.repair(Game, MARCH, APRIL, connection=conn, game="LoL")
            else:
                report = await ts.repair_async(Game, MARCH, APRIL, connection=db, game="LoL")
            lol = sum(1 for g, *_ in SCORES if g == "LoL")
            assert report == ts.RepairReport(lol, 1, 1, 0), run
            assert conn.latest(Game, game="LoL", player="Corrie").kda == 3.0
