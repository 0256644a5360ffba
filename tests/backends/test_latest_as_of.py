"""``latest(as_of=t)`` and ``latest_many(keys, as_of=t)``: the newest event at or before t.

Every answer is checked against a plain-Python oracle: the newest of the saved
events whose time is at or before ``t`` (``max`` by event time), on every
layout of the oracle harness's shapes (tests/oracle/shapes.py, whose reference
applies the version limits of bucket rows) and on the sensor models of
test_latest_many.py, sync and async, on both backends. A counting backend
checks the reads: one read of one row where rows hold one event each (a
reversed timestamp reads forward from the key of t, a forward one backwards).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tests.backends.test_latest_many import T0, history, sensor_model
from tests.oracle.ops import aware
from tests.oracle.reference import Ev, Reference, Refused
from tests.oracle.shapes import SHAPES, Shape, us_of
from tsmodel.backends.base import Backend, ReadRequest, Row

UTC = timezone.utc
US = timedelta(microseconds=1)


class RowCounting:
    """A sync backend that records each read request and the rows it handed out."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.features = inner.features
        self.requests: list[ReadRequest] = []
        self.rows = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        self.requests.append(request)
        for row in self.inner.read_rows(request):
            self.rows += 1
            yield row

    def reset(self) -> None:
        self.requests, self.rows = [], 0


def newest_as_of(events: list[Any], t: datetime) -> dict[tuple[str, str], Any]:
    """The oracle: each entity's event with the greatest time at or before ``t``."""
    out: dict[tuple[str, str], Any] = {}
    for e in events:
        key = (e.site, e.sensor)
        if e.time <= t and (key not in out or e.time > out[key].time):
            out[key] = e
    return out


def instants(events: list[Any]) -> list[datetime]:
    """Each event's time and its neighbours, and times before and after every event."""
    times = sorted({e.time for e in events})
    return [T0 - timedelta(days=1), *(t + d for t in times for d in (-US, 0 * US, US)),
            datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]


@pytest.mark.parametrize("kind", ["current", "plain", "salted-current", "salted", "reversed",
                                  "reversed-current", "cells"])
def test_latest_as_of_matches_the_oracle(backend: Backend, kind: str) -> None:
    rng = random.Random(kind)
    Sensor = sensor_model(kind)
    counting = RowCounting(backend)
    conn = ts.Connection(counting)
    conn.create_tables(Sensor)
    events = history(Sensor, 6, rng)
    conn.save_all(events)
    entities = sorted({(e.site, e.sensor) for e in events})
    rows_hold_one_event = kind != "cells"
    for t in instants(events):
        oracle = newest_as_of(events, t)
        for site, sensor in entities:
            counting.reset()
            if (site, sensor) in oracle:
                assert Sensor.using(conn).latest(site=site, sensor=sensor, as_of=t) == oracle[
                    (site, sensor)], (kind, t)
            else:
                with pytest.raises(Sensor.DoesNotExist):
                    Sensor.using(conn).latest(site=site, sensor=sensor, as_of=t)
            # The main table, one read (the salt is the sensor's), from the key of t.
            assert [r.table for r in counting.requests] == [Sensor.__tsmodel__.table]
            if rows_hold_one_event:
                assert counting.requests[0].limit == 1
                assert counting.rows == ((site, sensor) in oracle), (kind, t, counting.rows)
        many = Sensor.using(conn).latest_many(entities, as_of=t)
        assert many.found == {k: oracle[k] for k in entities if k in oracle}
        assert conn.latest_many(Sensor, entities, as_of=t) == many
    # Without as_of, the newest event (the current-value table, where there is one).
    site, sensor = entities[0]
    assert conn.latest(Sensor, site=site, sensor=sensor) == newest_as_of(
        events, datetime.max.replace(tzinfo=UTC))[(site, sensor)]


def test_latest_as_of_reads_one_row_past_newer_events(backend: Backend) -> None:
    """A forward key reads backwards from t: the newer events are never read."""
    for kind in ("plain", "reversed"):
        Sensor = sensor_model(kind)
        counting = RowCounting(backend)
        conn = ts.Connection(counting)
        conn.create_tables(Sensor)
        events = [Sensor(site="a", sensor="s", time=T0 + timedelta(minutes=i), reading=i)
                  for i in range(50)]
        conn.save_all(events)
        counting.reset()
        t = T0 + timedelta(minutes=20, seconds=30)
        assert conn.latest(Sensor, site="a", sensor="s", as_of=t) == events[20]
        assert (len(counting.requests), counting.rows) == (1, 1), kind
        assert counting.requests[0].reverse == (kind == "plain")
        plan = Sensor.using(conn).latest_many([("a", "s")], as_of=t)
        assert plan.found == {("a", "s"): events[20]}


def test_as_of_must_be_an_aware_datetime(backend: Backend) -> None:
    Sensor = sensor_model("current")
    conn = ts.Connection(backend)
    conn.create_tables(Sensor)
    with pytest.raises(ts.ValidationError, match="naive"):
        conn.latest(Sensor, site="a", sensor="s", as_of=datetime(2024, 5, 1))
    with pytest.raises(ts.FieldTypeError, match=r"latest\(\) as_of"):
        conn.latest(Sensor, site="a", sensor="s", as_of="2024-05-01")  # type: ignore[arg-type]
    with pytest.raises(ts.ValidationError, match="naive"):
        conn.latest_many(Sensor, [("a", "s")], as_of=datetime(2024, 5, 1))


def test_latest_as_of_on_an_event_loop(backend: Backend) -> None:
    rng = random.Random(7)
    Sensor = sensor_model("reversed-current")
    conn = ts.Connection(backend)
    conn.create_tables(Sensor)
    events = history(Sensor, 5, rng)
    conn.save_all(events)
    entities = sorted({(e.site, e.sensor) for e in events})
    picks = rng.sample(instants(events), 6)

    async def main() -> None:
        async with asynchronous(backend) as ab:
            db = ts.AsyncConnection(ab)
            for t in picks:
                oracle = newest_as_of(events, t)
                for site, sensor in entities:
                    if (site, sensor) in oracle:
                        got = await db.latest(Sensor, site=site, sensor=sensor, as_of=t)
                        assert got == oracle[(site, sensor)]
                        got = await Sensor.using(db).latest(site=site, sensor=sensor, as_of=t)
                        assert got == oracle[(site, sensor)]
                    else:
                        with pytest.raises(Sensor.DoesNotExist):
                            await db.latest(Sensor, site=site, sensor=sensor, as_of=t)
                many = await db.latest_many(Sensor, entities, as_of=t)
                assert many.found == {k: oracle[k] for k in entities if k in oracle}

    asyncio.run(main())


# -- every layout of the oracle harness ----------------------------------------------------


def _events(shape: Shape, rng: random.Random) -> list[Ev]:
    """Events of every entity at most of the shape's times, values drawn by ``rng``."""
    out = []
    for entity in shape.entities:
        for t in shape.times:
            if rng.random() < 0.7:
                out.append(Ev(tuple((n, entity[n]) for n in shape.key_fields), t,
                              tuple((v.name, rng.choice(v.choices)) for v in shape.values)))
    rng.shuffle(out)
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_latest_as_of_on_every_layout(backend: Backend, shape: Shape) -> None:
    rng = random.Random(shape.name)
    model = shape.make_model(uuid.uuid4().hex[:10].upper())
    conn = ts.Connection(backend)
    conn.create_tables(model)
    try:
        events = _events(shape, rng)
        conn.save_all([model(**{**e.fields(), "time": aware(e.t, 0)}) for e in events])
        ref = Reference(shape)
        ref.save(events, 1000)
        picks = sorted({min(max(t + d, 0), us_of(datetime.max.replace(tzinfo=UTC)))
                        for t in shape.times for d in (-1, 0, 1, -1000)})
        for as_of in rng.sample(picks, min(len(picks), 12)):
            for entity in shape.entities:
                try:
                    want: Ev | None = ref.latest_as_of(entity, as_of)
                except Refused:
                    want = None
                try:
                    found = conn.latest(model, as_of=aware(as_of, 0), **entity)
                except ts.DoesNotExist:
                    got = None
                else:
                    got = Ev(tuple((n, getattr(found, n)) for n in shape.key_fields),
                             us_of(found.time),
                             tuple((v.name, getattr(found, v.name)) for v in shape.values))
                assert (None if got is None else got.strict()) == (
                    None if want is None else want.strict()), (shape.name, as_of, entity)
    finally:
        conn.drop_tables(model)
