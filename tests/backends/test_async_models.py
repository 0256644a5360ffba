"""Model-level behaviour on the asyncio API, on every backend.

The same models and expectations as ``test_models.py`` and ``test_companions.py``:
answers are computed from the events saved, and the async API must give
exactly those, and exactly what the sync API gives on the same store.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tests.backends.passthrough import AsyncPassThrough
from tests.backends.test_companions import MARCH, game_model, games
from tests.backends.test_models import T0, battery_model, fleet, metric_model, outcome_model
from tsmodel.backends.base import (
    AsyncBackend,
    Backend,
    MutationOutcome,
    ReadRequest,
    Row,
    RowMutation,
    TableSpec,
)

HOST = "server1.aaa.bbb.com"


async def collect(qs: Any) -> list[Any]:
    return [item async for item in qs]


async def test_save_all_then_range_latest_count_first(backend: Backend) -> None:
    Metric = metric_model()
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab, batch_size=7)
        await db.create_tables(Metric)
        events = fleet(Metric, hosts=3, points=20)
        random.Random(1).shuffle(events)
        result = await db.save_all(events)
        assert result.ok and [r.entity for r in result.written] == events
        assert all(len(r.tables) == 2 for r in result.results), "main and current table"

        start, end = T0 + timedelta(seconds=10), T0 + timedelta(seconds=50)
        expected = sorted((e for e in events if e.hostname == HOST and start <= e.time < end),
                          key=lambda e: e.time)
        qs = db.range(Metric, start, end, hostname=HOST)
        assert isinstance(qs, ts.AsyncQuerySet)
        assert await collect(qs) == expected
        assert await qs.count() == len(expected) == 8
        assert await qs.first() == expected[0]
        assert await qs.exists()
        assert await collect(qs.newest_first().limit(3)) == expected[::-1][:3]
        assert await collect(qs.only("blk_read")[:2]) == [
            Metric(hostname=HOST, time=e.time, cpu1_usr=None, blk_read=e.blk_read)
            for e in expected[:2]]
        empty = db.range(Metric, T0 - timedelta(days=2), T0 - timedelta(days=1), hostname=HOST)
        assert not await empty.exists() and await empty.first() is None

        newest = max((e for e in events if e.hostname == HOST), key=lambda e: e.time)
        assert await db.latest(Metric, hostname=HOST) == newest
        assert await Metric.using(db).latest(hostname=HOST) == newest
        with pytest.raises(Metric.DoesNotExist):
            await db.latest(Metric, hostname="nobody")
        inventory = await collect(db.current(Metric))
        assert inventory == sorted((max((e for e in events if e.hostname == h),
                                        key=lambda e: e.time) for h in {e.hostname
                                                                        for e in events}),
                                   key=lambda e: e.hostname)

        # The sync API reads the same answers from the same store.
        conn = ts.Connection(backend)
        assert list(Metric.range(start, end, hostname=HOST).using(conn)) == expected


async def test_latest_without_current_table(backend: Backend) -> None:
    Metric = metric_model(current=False)
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        await db.create_tables(Metric)
        events = fleet(Metric, hosts=2, points=5)
        await db.save_all(events[::-1])
        assert await db.latest(Metric, hostname=HOST) == events[-1]


async def test_corrected_event_replaces_the_first(backend: Backend) -> None:
    """A correction (same key and time, new values) wins in the main and current tables."""
    Metric = metric_model()
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        await db.create_tables(Metric)
        first = Metric(hostname=HOST, time=T0, cpu1_usr=1.5, blk_read=10, note="draft")
        await db.save(first)
        corrected = Metric(hostname=HOST, time=T0, cpu1_usr=2.5, blk_read=11)
        result = await db.save_all([corrected])
        assert [r.status for r in result.results] == [ts.WriteStatus.WRITTEN]
        assert await collect(db.range(Metric, T0, T0 + timedelta(seconds=1),
                                      hostname=HOST)) == [corrected]
        assert await db.latest(Metric, hostname=HOST) == corrected


async def test_correction_read_first_drops_the_old_alternate_row(backend: Backend) -> None:
    """A model whose save reads first: the prior read goes through the async backend too."""
    Outcome = outcome_model()
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        await db.create_tables(Outcome)
        await db.save(Outcome(game="LoL", player="Jo", time=T0, result="loss"))
        fixed = Outcome(game="LoL", player="Jo", time=T0, result="win")
        result = await db.save_all([fixed])
        assert result.ok
        day = (T0, T0 + timedelta(days=1))
        assert await collect(db.range(Outcome, *day, game="LoL", player="Jo")) == [fixed]
        by_result = db.range(Outcome, *day, game="LoL", allow_scan=True)
        assert await collect(by_result) == [fixed]
        conn = ts.Connection(backend)
        assert list(Outcome.range(*day, game="LoL", allow_scan=True).using(conn)) == [fixed]


async def test_salted_range_reads_salts_concurrently_and_merges_by_time(
        backend: Backend) -> None:
    Battery = battery_model()
    async with asynchronous(backend) as ab:
        counting = CountingBackend(ab)
        db = ts.AsyncConnection(counting)
        await db.create_tables(Battery)
        base = datetime(2015, 3, 1, 12, 45, 1, 1000, tzinfo=timezone.utc)
        events = [Battery(time=base + timedelta(milliseconds=i), user=u, percentage=p)
                  for i, (u, p) in enumerate([("Corrie", 98), ("Jo", 54), ("Corrie", 96),
                                              ("Sam", 43), ("Sam", 38)] * 4)]
        random.Random(3).shuffle(events)
        await db.save_all(events)
        qs = Battery.using(db).range(base, base + timedelta(milliseconds=12))
        plan = qs.explain()
        assert len(plan.requests) == 3 and plan.merge == "time"
        counting.reset()
        got = await collect(qs)
        assert got == sorted((e for e in events if e.time < base + timedelta(milliseconds=12)),
                             key=lambda e: e.time)
        # Cloud Bigtable: the guard read and the three salts stream at once; on
        # the embedded store the guard is read first, then the merge pulls the
        # three open salts' rows in turn (faster there than side by side).
        side_by_side = ab.features.concurrent_calls
        assert counting.most_in_flight == (len(plan.guards) + 3 if side_by_side else 3)
        newest = await collect(qs.newest_first().limit(2))
        assert [e.time for e in newest] == [base + timedelta(milliseconds=11),
                                            base + timedelta(milliseconds=10)]
        assert got == list(Battery.range(base, base + timedelta(milliseconds=12))
                           .using(ts.Connection(backend)))


async def test_current_and_alternate_tables(backend: Backend) -> None:
    Game = game_model()
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        await db.create_tables(Game)
        events = games(Game)
        result = await db.save_all(events)
        assert all(len(r.tables) == 3 for r in result.results), "main, current, alternate"
        april = MARCH + timedelta(days=31)
        corrie = db.range(Game, MARCH, april, game="LoL", player="Corrie")
        assert corrie.explain().table == Game.__tsmodel__.table
        assert sum(g.win for g in await collect(corrie)) == 2
        lol = db.range(Game, MARCH, MARCH + timedelta(days=3), game="LoL")
        assert lol.explain().table == Game.__tsmodel__.alternates[0].table
        assert [(g.player, g.time.day) for g in await collect(lol)] == [
            ("Corrie", 1), ("Jo", 2), ("Sam", 2), ("Corrie", 3)]
        expected_current = {}
        for e in events:
            slot = (e.game, e.player)
            if slot not in expected_current or e.time >= expected_current[slot].time:
                expected_current[slot] = e
        current = await collect(db.current(Game))
        assert sorted(current, key=lambda e: (e.game, e.player)) == [
            expected_current[k] for k in sorted(expected_current)]
        assert await db.latest(Game, game="LoL", player="Jo") == expected_current[("LoL", "Jo")]


async def test_per_entity_results_failed_and_partial(backend: Backend) -> None:
    Metric = metric_model()
    spec = Metric.__tsmodel__
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab)
        # Only the main table: the current-value writes fail -> PARTIAL.
        await ab.create_table(TableSpec(spec.table, (("METRIC", ts.GcRule(max_versions=1)),)))
        events = fleet(Metric, hosts=1, points=3)
        result = await db.save_all(events, raise_on_failure=False)
        assert [r.status for r in result.results] == [ts.WriteStatus.PARTIAL] * 3
        assert all(dict(r.tables)[spec.table].ok for r in result.results)
        with pytest.raises(ts.SaveError):
            await db.save(events[0])
        # No table at all -> FAILED, companions not attempted.
        Other = metric_model()
        failed = await db.save_all(fleet(Other, hosts=1, points=2), raise_on_failure=False)
        assert [r.status for r in failed.results] == [ts.WriteStatus.FAILED] * 2
        assert all(isinstance(r.error, ts.TableNotFoundError) for r in failed.results)
        assert all(len(r.tables) == 1 for r in failed.results)
        # The sync API reports the same outcomes for the same saves.
        again = ts.Connection(backend).save_all(events, raise_on_failure=False)
        assert [r.status for r in again.results] == [r.status for r in result.results]


async def test_unknown_main_outcome_is_unknown(backend: Backend) -> None:
    Metric = metric_model()
    async with asynchronous(backend) as ab:
        flaky = CountingBackend(ab, unknown={Metric.__tsmodel__.table})
        db = ts.AsyncConnection(flaky)
        await db.create_tables(Metric)
        result = await db.save_all(fleet(Metric, hosts=1, points=2), raise_on_failure=False)
        assert [r.status for r in result.results] == [ts.WriteStatus.UNKNOWN] * 2


async def test_queries_on_an_async_connection_refuse_sync_use(backend: Backend) -> None:
    Metric = metric_model()
    async with asynchronous(backend) as ab:
        qs = Metric.using(ts.AsyncConnection(ab)).range(T0, T0 + timedelta(1), hostname=HOST)
        for run in (list, bool, lambda q: q.iterator()):
            with pytest.raises(TypeError, match="AsyncConnection"):
                run(qs)
        with pytest.raises(TypeError, match=r"Model.using\(adb\)"):
            async for _ in Metric.range(T0, T0 + timedelta(1), hostname=HOST):  # type: ignore
                pass


async def test_connect_async_opens_and_closes(backend: Backend) -> None:
    from tsmodel.backends.bigtable import BigtableBackend

    if isinstance(backend, BigtableBackend):
        url = f"bigtable-emulator://{backend.emulator_host}/{backend.project}/{backend.instance}"
    else:
        url = "memory://"
    Metric = metric_model()
    async with ts.connect_async(url) as db:
        assert isinstance(db, ts.AsyncConnection)
        await db.create_tables(Metric)
        await db.save_all(fleet(Metric, hosts=1, points=2))
        assert await db.range(Metric, T0, T0 + timedelta(1), hostname="server0.aaa.bbb.com"
                              ).count() == 2
    db = await ts.connect_async(url, batch_size=5)
    assert db.batch_size == 5
    await db.close()


@pytest.fixture
def no_default_connection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No default connection and no TSMODEL_URL while the test runs (restored after)."""
    from tsmodel.run import connection as connection_module

    monkeypatch.delenv("TSMODEL_URL", raising=False)
    previous = connection_module._default
    ts.set_default_connection(None)
    try:
        yield
    finally:
        ts.set_default_connection(previous)


def _url_of(backend: Backend, tmp_path: Any) -> str:
    from tsmodel.backends.bigtable import BigtableBackend

    if isinstance(backend, BigtableBackend):
        return (f"bigtable-emulator://{backend.emulator_host}/{backend.project}/"
                f"{backend.instance}")
    return f"sqlite:///{tmp_path / 'async.db'}"


async def test_a_blocking_query_beside_connect_async_refuses_the_implicit_default(
        backend: Backend, tmp_path: Any, no_default_connection: None) -> None:
    # connect_async() never makes the default connection: a blocking query with
    # none set must not fall back to an empty in-memory store and answer from it.
    Metric = metric_model()
    events = fleet(Metric, hosts=1, points=3)
    host = events[0].hostname
    async with ts.connect_async(_url_of(backend, tmp_path)) as adb:
        await adb.create_tables(Metric)
        await adb.save_all(events)
        qs = Metric.range(T0, T0 + timedelta(1), hostname=host)
        for run in (qs.count, lambda: list(qs), lambda: Metric.latest(hostname=host),
                    ts.get_default_connection):
            with pytest.raises(ts.ConfigurationError, match=r"connect_async\(\)") as info:
                run()
            assert "Model.using(" in str(info.value) and "ts.connect(" in str(info.value)
        assert await qs.using(adb).count() == len(events)
    from tsmodel.run import connection as connection_module

    assert connection_module._default is None  # nothing was opened in its place
    # Once the async connection is closed, the implicit in-memory default is back.
    assert ts.get_default_connection().backend.features.persistent is False


async def test_an_explicit_default_beside_connect_async_is_used(
        backend: Backend, tmp_path: Any, no_default_connection: None) -> None:
    Metric = metric_model()
    events = fleet(Metric, hosts=1, points=3)
    url = _url_of(backend, tmp_path)
    async with ts.connect_async(url) as adb:
        await adb.create_tables(Metric)
        await adb.save_all(events)
        with ts.connect(url) as db:  # the default, on the same store
            assert Metric.range(T0, T0 + timedelta(1), hostname=events[0].hostname
                                ).count() == len(events)
            assert ts.get_default_connection() is db


def test_connect_async_refuses_a_bad_url() -> None:
    async def main() -> None:
        await ts.connect_async("nope://x")

    with pytest.raises(ts.ConfigurationError):
        asyncio.run(main())


class CountingBackend(AsyncPassThrough):
    """An async backend that counts reads in flight (and can make writes UNKNOWN)."""

    def __init__(self, inner: AsyncBackend, unknown: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.inner = inner
        self.features = inner.features
        self.unknown = unknown
        self.in_flight = self.most_in_flight = 0

    def reset(self) -> None:
        self.in_flight = self.most_in_flight = 0

    async def read_rows(self, request: ReadRequest) -> AsyncIterator[Row]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)  # let the other reads start
            async for row in self.inner.read_rows(request):
                yield row
        finally:
            self.in_flight -= 1

    async def mutate_rows(self, table: str,
                          entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        if table in self.unknown:
            error = ts.BackendError("injected: deadline exceeded")
            return [MutationOutcome(ts.backends.base.MutationStatus.UNKNOWN, error)] * len(
                entries)
        return await self.inner.mutate_rows(table, entries)

    async def close(self) -> None:
        await self.inner.close()
