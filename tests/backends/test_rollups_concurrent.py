"""Rollups under concurrent writers (issue 26, item 8): two connections saving and
deleting events of the same entities and buckets at the same time.

A recomputed rollup row is a function of the main table, read by the writer
that writes it. Two writers can each read a bucket before the other's event
is written; the row written last then missed an event. The tests hold one
writer between its read of a bucket and its write of the rollup row (a
backend that passes every call through, pausing that one) until the other
has saved, then compare every rollup row with an oracle over all events:
the plain-Python one of ``test_rollups.py`` (count, exact sums, min, max,
last per entity and bucket) and, for increment rollups, the counts and sums
of ``test_rollups_increment.py``.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tests.backends.passthrough import PassThrough
from tests.backends.test_rollups import DAY0, check, metric_model, remember, us
from tests.backends.test_rollups_increment import counter_model, oracle, rows
from tsmodel.backends.base import (
    Backend,
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    Row,
    RowMutation,
)


class HeldRead(PassThrough):
    """Holds the first read of ``table`` made after a write to it (a rollup refresh's
    read of its buckets), once answered, until ``release`` is set."""

    def __init__(self, inner: Backend, table: str) -> None:
        super().__init__(inner)
        self.table = table
        self.wrote = False
        self.held = threading.Event()
        self.release = threading.Event()

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        if table == self.table:
            self.wrote = True
        return super().mutate_rows(table, entries)

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        rows = list(super().read_rows(request))
        if request.table == self.table and self.wrote and not self.held.is_set():
            self.held.set()
            assert self.release.wait(60), "the other writer never finished"
        return iter(rows)


def _other_writer(backend: Backend, how: str, batches: list[list[Any]]) -> None:
    """Saves each batch in turn, on a connection of its own (sync or async)."""
    if how == "sync":
        conn = ts.Connection(backend)
        for batch in batches:
            conn.save_all(batch)
        return

    async def main() -> None:
        async with asynchronous(backend) as ab:
            aconn = ts.AsyncConnection(ab)
            for batch in batches:
                await aconn.save_all(batch)

    asyncio.run(main())


@pytest.mark.parametrize("other", ["sync", "async"])
@pytest.mark.parametrize("first", ["save", "delete"])
def test_a_bucket_read_before_another_writers_event_is_made_again(
        backend: Backend, first: str, other: str) -> None:
    """A writer reads a bucket, the other saves an event into it and writes the rollup
    row, then the first writes its row: the other's event was missing from the row
    until the next save into the bucket or a repair."""
    Metric = metric_model()
    db = ts.Connection(backend)
    db.create_tables(Metric)
    stored: dict[Any, Any] = {}
    t = DAY0 + timedelta(hours=3)
    before = [Metric(host="a", time=t + timedelta(minutes=m), cpu=0.5, n=m) for m in (1, 2)]
    db.save_all(before)
    remember(stored, before)
    mine = Metric(host="a", time=t + timedelta(minutes=10), cpu=1.5, n=4)
    theirs = [Metric(host="a", time=t + timedelta(minutes=20), cpu=2.5, n=9)]
    held = HeldRead(backend, ts.spec_of(Metric).table)
    writer = ts.Connection(held)
    if first == "save":
        action, args = writer.save_all, [mine]
        remember(stored, [mine])
    else:
        action, args = writer.delete_all, [before[0]]
        del stored[(("a",), us(before[0].time))]
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(action(args)))
    thread.start()
    try:
        assert held.held.wait(60), "the first writer never read its bucket"
        _other_writer(backend, other, [theirs])
        remember(stored, theirs)
    finally:
        held.release.set()
        thread.join(60)
    assert results and results[0].ok
    check(Metric, db, stored, f"{first}, then a {other} save between its read and write")
    db.drop_tables(Metric)


def test_two_writers_saving_into_the_same_buckets(backend: Backend) -> None:
    """Two threads, each its own connection, saving small batches of events of the
    same hosts and hours at once: every rollup row is the oracle's."""
    Metric = metric_model()
    db = ts.Connection(backend)
    db.create_tables(Metric)
    rng = random.Random(26)
    hosts = ("a", "b")
    events = [Metric(host=rng.choice(hosts), time=DAY0 + timedelta(
                  hours=rng.randrange(2), milliseconds=i), cpu=rng.choice((0.1, 0.2, 2.5)),
                     n=rng.choice((None, 1, 7))) for i in range(240)]
    halves = events[0::2], events[1::2]
    errors: list[BaseException] = []

    def save(part: list[Any]) -> None:
        try:
            conn = ts.Connection(backend, batch_size=3)
            for i in range(0, len(part), 3):
                conn.save_all(part[i:i + 3])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(h,)) for h in halves]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    # Under heavy contention (a loaded CI machine switching the two threads at
    # every step) a refresh may see its buckets change at each of its settle
    # rounds: the save then says so, its rollup rows UNKNOWN, and nothing else.
    # The documented recovery is a repair over their time.
    ran_out = [exc for exc in errors if _settle_ran_out(exc)]
    assert ran_out == errors, errors
    if ran_out:
        ts.repair(Metric, DAY0, DAY0 + timedelta(hours=2), connection=db)
    stored: dict[Any, Any] = {}
    remember(stored, events)
    check(Metric, db, stored, "two writers at once")
    db.drop_tables(Metric)


def _settle_ran_out(exc: BaseException) -> bool:
    """Whether ``exc`` is a save whose only problem is rollup rows left UNKNOWN."""
    if not isinstance(exc, ts.SaveError):
        return False
    problems = [r for r in exc.result.results if r.status is not ts.WriteStatus.WRITTEN]
    return bool(problems) and all(
        r.status is ts.WriteStatus.PARTIAL and "concurrent writers" in str(r.error)
        for r in problems)


@pytest.mark.parametrize("other", ["sync", "async"])
def test_increment_rollups_add_every_concurrent_save(backend: Backend, other: str) -> None:
    """Increment rollups: saves of two writers into the same rows at once add up, each
    event once (the server adds; nothing is read)."""
    Requests = counter_model()
    db = ts.Connection(backend)
    db.create_tables(Requests)
    rng = random.Random(8)
    evs = [Requests(host=rng.choice(("a", "b")), time=DAY0 + timedelta(
               hours=rng.randrange(2), milliseconds=i), n=rng.choice((None, 3, -2)),
                    bytes_out=rng.randrange(1000)) for i in range(200)]
    mine, theirs = evs[0::2], evs[1::2]
    errors: list[BaseException] = []

    def save() -> None:
        try:
            conn = ts.Connection(backend, batch_size=4)
            for i in range(0, len(mine), 4):
                conn.save_all(mine[i:i + 4])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=save)
    thread.start()
    _other_writer(backend, other, [theirs[i:i + 4] for i in range(0, len(theirs), 4)])
    thread.join(300)
    assert not errors, errors
    assert rows(Requests, db) == oracle(evs)
    db.drop_tables(Requests)


class BusyBucket(PassThrough):
    """After each read of ``table`` that follows a write to it, another writer saves
    one more event into the bucket (through the backend underneath)."""

    def __init__(self, inner: Backend, table: str, more: Iterator[Any]) -> None:
        super().__init__(inner)
        self.table, self.more, self.wrote = table, more, False
        self.other = ts.Connection(inner)
        self.saved: list[Any] = []

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        self.wrote = self.wrote or table == self.table
        return super().mutate_rows(table, entries)

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        rows = list(super().read_rows(request))
        if request.table == self.table and self.wrote:
            self.saved.append(next(self.more))
            self.other.save(self.saved[-1])
        return iter(rows)


def test_a_bucket_that_keeps_changing_leaves_its_rollup_row_unknown(backend: Backend) -> None:
    """Every read of the bucket after writing finds another writer's new event: after
    8 reads the rollup row is UNKNOWN (the entity PARTIAL), never reported APPLIED;
    a repair over its time then makes it the oracle's."""
    Metric = metric_model()
    db = ts.Connection(backend)
    db.create_tables(Metric)
    t = DAY0 + timedelta(hours=5)
    mine = Metric(host="a", time=t, cpu=1.0, n=1)
    others = [Metric(host="a", time=t + timedelta(seconds=s), cpu=0.25, n=s)
              for s in range(1, 40)]
    busy = BusyBucket(backend, ts.spec_of(Metric).table, iter(others))
    result = ts.Connection(busy).save_all([mine], raise_on_failure=False)
    (r,) = result.results
    hourly, daily = (rollup.table for rollup in ts.spec_of(Metric).rollups)
    assert r.status is ts.WriteStatus.PARTIAL, r.tables
    assert dict(r.tables)[hourly].status is MutationStatus.UNKNOWN
    assert "concurrent writers" in str(dict(r.tables)[hourly].error)
    assert len(busy.saved) == 9, "one new event after the first read and each of 8 more"
    ts.repair(Metric, DAY0, DAY0 + timedelta(days=1), connection=db)
    stored: dict[Any, Any] = {}
    remember(stored, [mine, *busy.saved])
    check(Metric, db, stored, "a busy bucket, then a repair")
    db.drop_tables(Metric)
