"""Time buckets on every backend: the four storage patterns, exact range reads, no over-read.

The weather balloons of the patterns text are stored in each pattern and read
back over the same ranges with the same results; the energy meters of the
schema guide use a column per 15-minute offset in day rows. A counting
connection checks that no backend sends a cell outside the range asked for.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend, ReadRequest, Row
from tsmodel.encoding.timestamps import to_micros

UTC = timezone.utc
# A Friday: the two weeks of data cross the ISO week boundary of Monday 2021-03-08.
T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)


class CountingConnection(ts.Connection):
    """A connection that records every cell the backend sends."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.cells: list[int] = []

    def read(self, request: ReadRequest) -> Iterator[Row]:
        for row in super().read(request):
            self.cells.extend(c.timestamp for c in row.cells)
            yield row

    def outside(self, start: datetime, end: datetime) -> list[int]:
        lo, hi = to_micros(start), to_micros(end)
        return [t for t in self.cells if not lo <= t < hi]


@pytest.fixture
def conn(backend: Backend) -> CountingConnection:
    return CountingConnection(backend)


def unique(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:8]}"


def balloon_models() -> dict[str, Any]:
    """The weather balloon in each of the four patterns of the patterns text."""

    @ts.model(table=unique("BALLOON_ROWS"), family="measurements")
    class Rows:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
        pressure: int = ts.value()
        temperature: float = ts.value("temp")
        humidity: int = ts.value()
        altitude: int = ts.value()

    @ts.model(table=unique("BALLOON_BLOB"), family="measurements",
              serialization=ts.Protobuf(qualifier="measurements_blob"))
    class Serialized:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
        pressure: int = ts.value()
        temperature: float = ts.value()
        humidity: int = ts.value()
        altitude: int = ts.value()

    @ts.model(table=unique("BALLOON_CELLS"), family="measurements", layout=ts.cells(),
              max_rate=1 / 60)
    class NewCells:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(bucket="week")
        pressure: int = ts.value()
        temperature: float = ts.value("temp")
        humidity: int = ts.value()
        altitude: int = ts.value()

    @ts.model(table=unique("BALLOON_COLUMNS"), family="m", layout=ts.columns(),
              max_rate=1 / 60)
    class NewColumns:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        metric: str = ts.key()
        time: datetime = ts.timestamp(bucket="week")
        value: int = ts.value(codec=ts.Text(int))

    return {"rows": Rows, "serialized": Serialized, "cells": NewCells, "columns": NewColumns}


def readings(minutes: int, rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for location in ("us-west2", "asia-south2"):
        for i in range(minutes):
            out.append(dict(location=location, balloon=3698, time=T0 + timedelta(minutes=i),
                            pressure=94000 + rng.randrange(2000),
                            temperature=round(rng.uniform(8, 11), 1),
                            humidity=rng.randrange(50, 70), altitude=rng.randrange(590, 630)))
    return out


def to_events(name: str, model: Any, data: list[dict[str, Any]]) -> list[Any]:
    if name != "columns":
        return [model(**d) for d in data]
    return [model(location=d["location"], balloon=d["balloon"], metric="pressure",
                  time=d["time"], value=d["pressure"]) for d in data]


def query(name: str, model: Any, start: datetime, end: datetime) -> ts.QuerySet[Any]:
    fields: dict[str, Any] = {"location": "us-west2", "balloon": 3698}
    if name == "columns":
        fields["metric"] = "pressure"
    return model.range(start, end, **fields)


def as_pressures(name: str, events: list[Any]) -> list[tuple[datetime, int]]:
    return [(e.time, e.value if name == "columns" else e.pressure) for e in events]


# The minute data span 2021-03-05 12:00 .. 2021-03-12 (3 days into the second week).
SHAPES = {
    "inside one bucket": (T0 + timedelta(minutes=7), T0 + timedelta(minutes=95)),
    "across the week boundary": (datetime(2021, 3, 7, 23, 30, tzinfo=UTC),
                                 datetime(2021, 3, 8, 0, 45, tzinfo=UTC)),
    "whole span": (T0, T0 + timedelta(days=8)),
    "unaligned microseconds": (T0 + timedelta(minutes=3, microseconds=1),
                               T0 + timedelta(minutes=9, microseconds=999)),
    "empty": (T0 + timedelta(minutes=5), T0 + timedelta(minutes=5)),
    "before the data": (T0 - timedelta(days=30), T0 - timedelta(days=29)),
}


@pytest.fixture(scope="module")
def balloon_data() -> list[dict[str, Any]]:
    return readings(minutes=60 * 24 * 3 + 60 * 15, rng=random.Random(2021))


@pytest.mark.parametrize("pattern", ["rows", "serialized", "cells", "columns"])
def test_each_pattern_answers_every_range_exactly(
    conn: CountingConnection, balloon_data: list[dict[str, Any]], pattern: str,
) -> None:
    model = balloon_models()[pattern]
    conn.create_tables(model)
    events = to_events(pattern, model, balloon_data)
    random.Random(5).shuffle(events)
    assert conn.save_all(events).ok
    for shape, (start, end) in SHAPES.items():
        conn.cells.clear()
        got = list(query(pattern, model, start, end).using(conn))
        want = sorted((d["time"], d["pressure"]) for d in balloon_data
                      if d["location"] == "us-west2" and start <= d["time"] < end)
        assert as_pressures(pattern, got) == want, shape
        assert conn.outside(start, end) == [], f"{pattern}: over-read for {shape}"


def test_patterns_agree_with_each_other(conn: CountingConnection,
                                        balloon_data: list[dict[str, Any]]) -> None:
    models = balloon_models()
    start, end = datetime(2021, 3, 7, 22, 0, tzinfo=UTC), datetime(2021, 3, 8, 2, 0, tzinfo=UTC)
    results = {}
    for name, model in models.items():
        conn.create_tables(model)
        conn.save_all(to_events(name, model, balloon_data))
        results[name] = as_pressures(name, list(query(name, model, start, end).using(conn)))
    assert len(results["rows"]) == 240
    assert results["rows"] == results["serialized"] == results["cells"] == results["columns"]
    full = {name: list(query(name, models[name], start, end).using(conn)) for name in
            ("rows", "serialized", "cells")}
    assert [attrs_values(e) for e in full["rows"]] == [attrs_values(e) for e in full["cells"]]
    assert [attrs_values(e) for e in full["rows"]] == [attrs_values(e) for e in
                                                       full["serialized"]]


def attrs_values(event: Any) -> tuple[Any, ...]:
    return (event.location, event.balloon, event.time, event.pressure, event.temperature,
            event.humidity, event.altitude)


def test_bucket_row_keys_match_the_reference(balloon_data: list[dict[str, Any]]) -> None:
    models = balloon_models()
    d = dict(balloon_data[0], location="asia-south2")
    assert ts.row_key(models["cells"](**d)) == b"asia-south2#3698#2021-W09"
    assert ts.row_key(models["columns"](location="us-west2", balloon=3698, metric="pressure",
                                        time=T0, value=94558)) == b"us-west2#3698#pressure#2021-W09"
    assert ts.row_key(models["rows"](**dict(d, location="us-west2"))) == \
        b"us-west2#3698#2021-03-05-1200"


def test_new_cells_row_holds_a_version_per_event(conn: CountingConnection,
                                                 backend: Backend) -> None:
    model = balloon_models()["cells"]
    conn.create_tables(model)
    data = readings(3, random.Random(1))[:3]
    conn.save_all([model(**d) for d in data])
    (row,) = backend.read_rows(ReadRequest(model.__tsmodel__.table))
    pressure = [c for c in row.cells if c.qualifier == b"pressure"]
    assert [c.timestamp for c in pressure] == [to_micros(d["time"]) for d in reversed(data)]
    spec = ts.table_specs(model.__tsmodel__)[0]
    assert dict(spec.families)["measurements"].max_versions == 10_080  # a week of minutes


def test_new_columns_store_the_measurement_in_the_qualifier(conn: CountingConnection,
                                                            backend: Backend) -> None:
    model = balloon_models()["columns"]
    conn.create_tables(model)
    values = [94558, 94122, 95992]
    conn.save_all([model(location="us-west2", balloon=3698, metric="pressure",
                         time=T0 + timedelta(minutes=i), value=v) for i, v in enumerate(values)])
    (row,) = backend.read_rows(ReadRequest(model.__tsmodel__.table))
    assert row.key == b"us-west2#3698#pressure#2021-W09"
    assert sorted(c.qualifier for c in row.cells) == [b"94122", b"94558", b"95992"]
    assert {c.value for c in row.cells} == {b""}


def test_latest_of_bucketed_models(conn: CountingConnection,
                                   balloon_data: list[dict[str, Any]]) -> None:
    models = balloon_models()
    newest = max((d for d in balloon_data if d["location"] == "us-west2"),
                 key=lambda d: d["time"])
    for name in ("cells", "columns"):
        model = models[name]
        conn.create_tables(model)
        conn.save_all(to_events(name, model, balloon_data))
        fields: dict[str, Any] = {"location": "us-west2", "balloon": 3698}
        if name == "columns":
            fields["metric"] = "pressure"
        latest = conn.latest(model, **fields)
        assert latest.time == newest["time"]
        assert (latest.value if name == "columns" else latest.pressure) == newest["pressure"]
        newest_two = list(model.range(T0, T0 + timedelta(days=30), **fields)
                          .newest_first().limit(2).using(conn))
        assert [e.time for e in newest_two] == [newest["time"],
                                                newest["time"] - timedelta(minutes=1)]


def meter_model(current: bool = False) -> Any:
    @ts.model(table=unique("SENSOR"), family="METER", layout=ts.offsets(timedelta(minutes=15)),
              current=unique("CURRENT_SENSOR") if current else None)
    class Meter:
        meter: int = ts.key(width=10)
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value()

    return Meter


def test_energy_meter_day_rows_with_offset_columns(conn: CountingConnection,
                                                   backend: Backend) -> None:
    Meter = meter_model(current=True)
    conn.create_tables(Meter)
    day = datetime(2017, 7, 26, tzinfo=UTC)
    readings_ = [Meter(meter=987654, time=day + timedelta(minutes=15 * i), kwh=12.34 + i)
                 for i in range(96 * 2)]  # two days
    conn.save_all(readings_)
    rows = list(backend.read_rows(ReadRequest(Meter.__tsmodel__.table)))
    assert [r.key for r in rows] == [b"0000987654#20170726", b"0000987654#20170727"]
    qualifiers = sorted(c.qualifier for c in rows[0].cells)
    assert qualifiers[:2] == [b"0000", b"0015"] and qualifiers[-1] == b"2345"
    assert len(qualifiers) == 96
    # One meter, one day.
    one_day = list(Meter.range(day, day + timedelta(days=1), meter=987654).using(conn))
    assert one_day == readings_[:96]
    # Across midnight, with partial first and last buckets.
    start, end = day + timedelta(hours=22, minutes=10), day + timedelta(days=1, hours=1)
    conn.cells.clear()
    across = list(Meter.range(start, end, meter=987654).using(conn))
    assert [m.time for m in across] == [day + timedelta(minutes=15 * i) for i in range(89, 100)]
    assert conn.outside(start, end) == []
    assert conn.latest(Meter, meter=987654).time == day + timedelta(days=1, hours=23, minutes=45)


def test_offsets_plan_uses_a_qualifier_range_inside_one_bucket() -> None:
    Meter = meter_model()
    day = datetime(2017, 7, 26, tzinfo=UTC)
    plan = Meter.range(day + timedelta(hours=10), day + timedelta(hours=11),
                       meter=987654).explain()
    (req,) = plan.requests
    assert req.rows.ranges[0].start == b"0000987654#20170726"
    assert (req.filter.qualifier_start, req.filter.qualifier_end) == (b"1000", b"1045\x00")
    assert req.filter.timestamp_start == to_micros(day + timedelta(hours=10))


def test_offset_events_must_fall_on_a_step(conn: CountingConnection) -> None:
    Meter = meter_model()
    with pytest.raises(ts.ValidationError, match="step"):
        conn.save(Meter(meter=1, time=datetime(2017, 7, 26, 0, 7, tzinfo=UTC), kwh=1.0))


def test_bucketed_current_table_keeps_the_newest(conn: CountingConnection) -> None:
    Meter = meter_model(current=True)
    conn.create_tables(Meter)
    day = datetime(2017, 7, 26, tzinfo=UTC)
    events = [Meter(meter=m, time=day + timedelta(minutes=15 * i), kwh=float(i))
              for m in (1, 2) for i in range(20)]
    random.Random(9).shuffle(events)
    conn.save_all(events)
    assert [(e.meter, e.kwh) for e in Meter.current().using(conn)] == [(1, 19.0), (2, 19.0)]


def test_optional_values_in_new_cells(conn: CountingConnection) -> None:
    @ts.model(table=unique("OPT"), family="d", layout=ts.cells(), retention=timedelta(days=365))
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        level: float = ts.value()
        note: str | None = ts.value(default=None)

    conn.create_tables(Reading)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    events = [Reading(sensor="s", time=now + timedelta(seconds=i), level=float(i),
                      note="x" if i % 2 else None) for i in range(6)]
    conn.save_all(events)
    got = list(Reading.range(now, now + timedelta(hours=1), sensor="s").using(conn))
    assert got == events
