"""``latest_many``: the newest event of many entities, on every backend, sync and async.

Every answer is checked against an oracle: the events saved, the newest of
each entity computed here by event time. A counting backend checks that the
lookup makes exactly the reads its plan says (one read per 500 current rows
with a current-value table; one per entity without).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tsmodel.backends.base import AsyncBackend, Backend, ReadRequest, Row
from tsmodel.plan.reads import MAX_KEYS_PER_READ, compile_latest_many

T0 = datetime(2024, 5, 1, 8, 0, tzinfo=timezone.utc)
KINDS = ["current", "plain", "salted-current", "salted", "reversed", "reversed-current",
         "cells"]


def sensor_model(kind: str) -> Any:
    """A sensor model of ``kind``: with or without a current-value table, salted
    (the current key then lacks the salt), reversed timestamps, or day buckets."""
    suffix = uuid.uuid4().hex[:10]
    options: dict[str, Any] = {}
    if kind.endswith("current"):
        options["current"] = f"CUR_SENSOR_{suffix}"
    if kind == "cells":
        options.update(layout=ts.cells(), max_rate=1.0)
    salted = kind.startswith("salted")
    reverse = kind.startswith("reversed")
    bucket = "day" if kind == "cells" else None

    @ts.model(table=f"SENSOR_{suffix}", family="m", **options)
    class Sensor:
        if salted:
            salt = ts.salt(4, on="sensor")
        site: str = ts.key()
        sensor: str = ts.key()
        if reverse:
            time: datetime = ts.timestamp(reverse=True)
        else:
            time: datetime = ts.timestamp(unit="ms", bucket=bucket)  # type: ignore[no-redef]
        reading: int = ts.value()
        note: str | None = ts.value(default=None)

    return Sensor


def history(model: Any, entities: int, rng: random.Random) -> list[Any]:
    """1 to 4 events per entity at distinct times, shuffled (late older events too)."""
    events = [model(site=f"site{i % 3}", sensor=f"s{i:05d}",
                    time=T0 + timedelta(minutes=rng.randrange(0, 600), seconds=j),
                    reading=1000 * i + j, note=rng.choice([None, "ok"]))
              for i in range(entities) for j in range(rng.randint(1, 4))]
    rng.shuffle(events)
    return events


def newest(events: list[Any]) -> dict[tuple[str, str], Any]:
    """The oracle: each entity's event with the greatest time."""
    out: dict[tuple[str, str], Any] = {}
    for e in events:
        key = (e.site, e.sensor)
        if key not in out or e.time > out[key].time:
            out[key] = e
    return out


class CountingBackend:
    """A sync backend that counts reads, and the most at once (each read waits ``pause``
    seconds first, so that overlapping reads do overlap)."""

    def __init__(self, inner: Backend, pause: float = 0.0) -> None:
        self.inner = inner
        self.features = inner.features
        self.pause = pause
        self.reads = self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        with self.lock:
            self.reads += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(self.pause)
            yield from self.inner.read_rows(request)
        finally:
            with self.lock:
                self.in_flight -= 1


class AsyncCountingBackend:
    """:class:`CountingBackend` for an asyncio backend."""

    def __init__(self, inner: AsyncBackend) -> None:
        self.inner = inner
        self.features = inner.features
        self.reads = self.in_flight = self.most_in_flight = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def read_rows(self, request: ReadRequest) -> AsyncIterator[Row]:
        self.reads += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)  # let the other reads start
            async for row in self.inner.read_rows(request):
                yield row
        finally:
            self.in_flight -= 1


def keys_asked(entities: int, missing: int, rng: random.Random) -> list[Any]:
    """Every entity's key (as dicts and tuples), unknown entities, and duplicates."""
    keys: list[Any] = [{"site": f"site{i % 3}", "sensor": f"s{i:05d}"} if i % 2 else
                       (f"site{i % 3}", f"s{i:05d}") for i in range(entities)]
    keys += [{"site": "site9", "sensor": f"gone{i}"} for i in range(missing)]
    # The same entities again, in the other form and in the same form.
    again = rng.sample(keys[:entities], min(3, entities))
    keys += [as_dict(k) if isinstance(k, tuple) else as_tuple(k) for k in again] + again
    rng.shuffle(keys)
    return keys


def as_dict(key: tuple[str, str]) -> dict[str, str]:
    return {"site": key[0], "sensor": key[1]}


def as_tuple(key: Any) -> tuple[str, str]:
    return (key["site"], key["sensor"]) if isinstance(key, dict) else key


def check(result: ts.LatestResult[Any], keys: list[Any], oracle: dict[Any, Any]) -> None:
    """``result`` against the oracle: each distinct key once, found or missing, in order."""
    distinct = list(dict.fromkeys(as_tuple(k) for k in keys))
    assert result.fields == ("site", "sensor")
    assert list(result.found) == [k for k in distinct if k in oracle]
    assert result.found == {k: oracle[k] for k in distinct if k in oracle}
    assert result.missing == [{"site": k[0], "sensor": k[1]} for k in distinct
                              if k not in oracle]
    for k in distinct[:5]:
        assert result.get(site=k[0], sensor=k[1]) == oracle.get(k)


@pytest.mark.parametrize("kind", KINDS)
def test_latest_many_matches_the_oracle(backend: Backend, kind: str) -> None:
    rng = random.Random(kind)
    Sensor = sensor_model(kind)
    counting = CountingBackend(backend)
    conn = ts.Connection(counting)
    conn.create_tables(Sensor)
    events = history(Sensor, 40, rng)
    conn.save_all(events)
    oracle = newest(events)
    keys = keys_asked(40, 7, rng)
    plan = compile_latest_many(Sensor.__tsmodel__, keys, conn.features)
    assert len(plan.keys) == len({as_tuple(k) for k in keys}) == 47

    counting.reads = 0
    result = Sensor.using(conn).latest_many(keys)
    check(result, keys, oracle)
    assert counting.reads == plan.round_trips
    if kind.endswith("current"):
        assert plan.round_trips == 1, "one read of every current row"
    else:
        assert plan.round_trips == 47, "one read per distinct entity"
    # The same answers as latest(), entity by entity.
    for k in list(oracle)[:3]:
        assert result.found[k] == conn.latest(Sensor, site=k[0], sensor=k[1])
    assert conn.latest_many(Sensor, keys) == result


@pytest.mark.parametrize("kind", ["current", "plain"])
def test_latest_many_of_no_entity_reads_nothing(backend: Backend, kind: str) -> None:
    Sensor = sensor_model(kind)
    counting = CountingBackend(backend)
    conn = ts.Connection(counting)
    conn.create_tables(Sensor)
    counting.reads = 0
    result = Sensor.using(conn).latest_many([])
    assert (result.found, result.missing, counting.reads) == ({}, [], 0)
    result = Sensor.using(conn).latest_many(iter([("site0", "nobody")]))
    assert (result.found, result.missing) == ({}, [{"site": "site0", "sensor": "nobody"}])


@pytest.mark.parametrize("kind", ["salted-current", "current"])
def test_1500_entities_read_in_chunks_side_by_side(backend: Backend, kind: str) -> None:
    rng = random.Random(1500)
    Sensor = sensor_model(kind)
    counting = CountingBackend(backend)
    conn = ts.Connection(counting, batch_size=500)
    conn.create_tables(Sensor)
    events = history(Sensor, 1500, rng)
    conn.save_all(events)
    keys = keys_asked(1500, 25, rng)
    plan = compile_latest_many(Sensor.__tsmodel__, keys, conn.features)
    assert plan.round_trips == -(-1525 // MAX_KEYS_PER_READ) == 4
    assert all(len(r.rows.keys) <= MAX_KEYS_PER_READ for r in plan.requests)

    counting.reads = counting.most_in_flight = 0
    counting.pause = 0.05
    result = Sensor.using(conn).latest_many(keys)
    check(result, keys, newest(events))
    assert counting.reads == 4
    # The chunks go out together on a backend whose calls overlap, in turn on the
    # embedded store (its calls are serialized).
    assert (counting.most_in_flight > 1) == conn.features.concurrent_calls


def test_entities_without_current_table_are_read_side_by_side(backend: Backend) -> None:
    Sensor = sensor_model("plain")
    counting = CountingBackend(backend)
    conn = ts.Connection(counting)
    conn.create_tables(Sensor)
    events = history(Sensor, 20, random.Random(3))
    conn.save_all(events)
    counting.reads = counting.most_in_flight = 0
    counting.pause = 0.05
    keys = [(e.site, e.sensor) for e in events]
    check(Sensor.using(conn).latest_many(keys), keys, newest(events))
    assert counting.reads == 20
    assert counting.most_in_flight == (8 if conn.features.concurrent_calls else 1)


@pytest.mark.parametrize("kind", ["current", "plain"])
def test_bad_keys_are_refused_before_any_read(backend: Backend, kind: str) -> None:
    Sensor = sensor_model(kind)
    counting = CountingBackend(backend)
    conn = ts.Connection(counting)
    conn.create_tables(Sensor)
    counting.reads = 0
    good = {"site": "a", "sensor": "b"}
    name = Sensor.__name__
    cases: list[tuple[Any, type[Exception], list[str]]] = [
        ({"site": "a"}, ts.QueryError, [name, "sensor", "{'site': 'a'}"]),
        ({"site": "a", "sensor": "b", "colour": "red"}, ts.QueryError,
         [name, "'colour'", "site, sensor"]),
        ({"site": "a", "sensor": 7}, ts.KeyTypeError, [f"{name}.sensor", "7"]),
        (("a",), ts.QueryError, [name, "('a',)", "site, sensor"]),
        ("a#b", ts.QueryError, [name, "'a#b'"]),
    ]
    for bad, error, words in cases:
        with pytest.raises(error) as info:
            Sensor.using(conn).latest_many([good, bad, good])
        for word in words:
            assert word in str(info.value), (word, str(info.value))
    with pytest.raises(ts.KeyTypeError) as type_error:
        Sensor.using(conn).latest_many([{"site": "a", "sensor": 7}])
    assert (type_error.value.model, type_error.value.field, type_error.value.value) == (
        name, "sensor", 7)
    assert counting.reads == 0


@pytest.mark.parametrize("kind", ["salted-current", "plain", "reversed"])
def test_async_latest_many_matches_the_oracle(backend: Backend, kind: str) -> None:
    rng = random.Random(kind)
    Sensor = sensor_model(kind)
    conn = ts.Connection(backend)
    conn.create_tables(Sensor)
    events = history(Sensor, 30, rng)
    conn.save_all(events)
    oracle = newest(events)
    keys = keys_asked(30, 5, rng)
    many = keys_asked(1200, 0, rng) if kind == "salted-current" else []

    async def main() -> None:
        async with asynchronous(backend) as ab:
            counting = AsyncCountingBackend(ab)
            db = ts.AsyncConnection(counting)
            plan = compile_latest_many(Sensor.__tsmodel__, keys, db.features)
            result = await db.latest_many(Sensor, keys)
            check(result, keys, oracle)
            assert counting.reads == plan.round_trips
            assert result == await Sensor.using(db).latest_many(keys)
            assert result == Sensor.using(conn).latest_many(keys)  # the sync API agrees
            empty = await db.latest_many(Sensor, [])
            assert (empty.found, empty.missing) == ({}, [])
            with pytest.raises(ts.QueryError):
                await db.latest_many(Sensor, [{"site": "a"}])
            if many:  # 1,200 entities: three chunks, side by side
                counting.reads = counting.most_in_flight = 0
                found = await db.latest_many(Sensor, many)
                check(found, many, oracle)
                assert counting.reads == 3 and counting.most_in_flight == 3
            elif not kind.endswith("current"):
                assert counting.most_in_flight > 1

    asyncio.run(main())
