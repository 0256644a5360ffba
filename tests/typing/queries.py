"""How users start and run queries, as a type checker sees it (checked by mypy in
tests/unit/test_user_types.py; never imported, never run).

Every query a user can start is typed to the model: no step of a chain, sync
or async, falls back to ``Any``. A line that ends in ``# error: CODE`` must
get that mypy error, and no other line may get one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from typing import Any

from typing_extensions import assert_type

import tsmodel as ts

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
T1 = datetime(2026, 1, 2, tzinfo=timezone.utc)


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
class Metric(ts.Model):
    host: str = ts.key()
    time: datetime = ts.timestamp()
    cpu: float = ts.value()


def blocking(db: ts.Connection) -> None:
    # The model's class methods, on the default connection or the one given.
    assert_type(Metric.range(T0, T1, host="a"), ts.QuerySet[Metric])
    assert_type(Metric.current(), ts.QuerySet[Metric])
    assert_type(Metric.using(db), ts.QuerySet[Metric])
    assert_type(Metric.using(db).range(T0, T1), ts.QuerySet[Metric])
    assert_type(Metric.latest(host="a"), Metric)
    assert_type(Metric.latest_many([("a",)]), ts.LatestResult[Metric])
    # The connection's thin starters.
    assert_type(db.range(Metric, T0, T1, host="a"), ts.QuerySet[Metric])
    assert_type(db.current(Metric), ts.QuerySet[Metric])
    assert_type(db.latest(Metric, host="a"), Metric)
    assert_type(db.latest_many(Metric, [{"host": "a"}]), ts.LatestResult[Metric])
    assert_type(db.update(Metric, host="a", time=T0, cpu=0.5), Metric)
    # Refinements keep the kind of query and the model.
    qs = Metric.range(T0, T1, host="a").limit(3).newest_first().only("cpu").where(cpu__gt=0.5)
    assert_type(qs, ts.QuerySet[Metric])
    assert_type(qs[:2], ts.QuerySet[Metric])
    assert_type(qs.after(None).history(), ts.QuerySet[Metric])
    assert_type(qs.explain(), ts.ReadPlan)
    # Running it.
    assert_type(iter(qs), Iterator[Metric])
    for event in qs:
        assert_type(event, Metric)
    assert_type(list(db.range(Metric, T0, T1)), list[Metric])
    assert_type(qs.first(), Metric | None)
    assert_type(qs.count(), int)
    assert_type(qs.exists(), bool)
    assert_type(qs.page(10), ts.Page[Metric])
    assert_type(qs.page(10).items, list[Metric])
    assert_type(qs.update(cpu=1.0), ts.WriteResult)
    assert_type(qs.delete(), ts.WriteResult)
    result = db.save_all([Metric(host="h", time=T0, cpu=1.0)])
    assert_type(result.failed, list[ts.EntityResult])
    assert_type(result.unknown + result.partial, list[ts.EntityResult])
    assert_type(result.written[0].entity, Any)


async def asynchronous(adb: ts.AsyncConnection, db: ts.Connection) -> None:
    assert_type(Metric.using(adb), ts.AsyncQuerySet[Metric])
    assert_type(Metric.using(adb).range(T0, T1, host="a"), ts.AsyncQuerySet[Metric])
    assert_type(Metric.range(T0, T1).using(adb), ts.AsyncQuerySet[Metric])
    assert_type(adb.range(Metric, T0, T1, host="a"), ts.AsyncQuerySet[Metric])
    assert_type(adb.current(Metric), ts.AsyncQuerySet[Metric])
    assert_type(adb.snapshot(Metric, T0), ts.AsyncQuerySet[Metric])
    assert_type(await adb.latest(Metric, host="a"), Metric)
    assert_type(await adb.latest_many(Metric, [("a",)]), ts.LatestResult[Metric])
    assert_type(await adb.update(Metric, host="a", time=T0, cpu=0.5), Metric)
    aq = adb.range(Metric, T0, T1, host="a").limit(3).newest_first()
    assert_type(aq, ts.AsyncQuerySet[Metric])
    assert_type(aq.explain(), ts.ReadPlan)
    assert_type(aq.__aiter__(), AsyncIterator[Metric])
    async for event in aq:
        assert_type(event, Metric)
    assert_type([e async for e in Metric.using(adb).current()], list[Metric])
    assert_type(await aq.first(), Metric | None)
    assert_type(await aq.count(), int)
    assert_type(await aq.exists(), bool)
    assert_type(await aq.latest(host="a"), Metric)
    assert_type(await aq.page(10), ts.Page[Metric])
    assert_type(await aq.update(cpu=1.0), ts.WriteResult)
    assert_type(await aq.delete(), ts.WriteResult)
    for _ in aq:  # error: attr-defined
        pass
    async for _ in Metric.range(T0, T1):  # error: attr-defined
        pass
    aq.using(db)  # error: arg-type
