"""Weather balloons stored in each of the four patterns of Bigtable's time-series guide.

The same measurements (a balloon reports pressure, temperature, humidity and
altitude once a minute) go into four tables:

* single-timestamp rows, unserialized: ``us-west2#3698#2021-03-05-1200``, a column per measurement;
* single-timestamp rows, serialized: the same key, one protobuf cell;
* time buckets, new cells per event: ``us-west2#3698#2021-W09``, a cell version per minute;
* time buckets, new columns per event: ``us-west2#3698#pressure#2021-W09``, the pressure
  in the qualifier.

Every pattern answers the same range query with the same pressures, across
the boundary between ISO weeks 9 and 10. Run it with no server::

    python examples/weather_balloons.py
"""

from __future__ import annotations

import os
import random
from datetime import datetime, timedelta, timezone

import tsmodel as ts


@ts.model(table="BALLOON_ROWS", family="measurements")
class BalloonRow:
    """Single-timestamp unserialized: a row per event, a column per measurement."""

    location: str = ts.key()
    balloon: int = ts.key(width=4)
    time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
    pressure: int = ts.value()
    temperature: float = ts.value("temp")
    humidity: int = ts.value()
    altitude: int = ts.value()


@ts.model(table="BALLOON_BLOBS", family="measurements",
          serialization=ts.Protobuf(qualifier="measurements_blob"))
class BalloonBlob:
    """Single-timestamp serialized: a row per event, one protobuf cell."""

    location: str = ts.key()
    balloon: int = ts.key(width=4)
    time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
    pressure: int = ts.value()
    temperature: float = ts.value()
    humidity: int = ts.value()
    altitude: int = ts.value()


@ts.model(table="BALLOON_WEEKS", family="measurements", layout=ts.cells(), max_rate=1 / 60)
class BalloonWeek:
    """Time buckets, new cells for new events: a row per balloon and ISO week."""

    location: str = ts.key()
    balloon: int = ts.key(width=4)
    time: datetime = ts.timestamp(bucket="week")
    pressure: int = ts.value()
    temperature: float = ts.value("temp")
    humidity: int = ts.value()
    altitude: int = ts.value()


@ts.model(table="BALLOON_METRICS", family="m", layout=ts.columns(), max_rate=1 / 60)
class BalloonMetric:
    """Time buckets, new columns for new events: one metric per row, data in the qualifier."""

    location: str = ts.key()
    balloon: int = ts.key(width=4)
    metric: str = ts.key()
    time: datetime = ts.timestamp(bucket="week")
    value: int = ts.value(codec=ts.Text(int))


START = datetime(2021, 3, 5, 12, 0, tzinfo=timezone.utc)  # a Friday of ISO week 9


def measurements(rng: random.Random, minutes: int) -> list[dict[str, object]]:
    out = []
    for location in ("us-west2", "asia-south2"):
        for i in range(minutes):
            out.append(dict(location=location, balloon=3698, time=START + timedelta(minutes=i),
                            pressure=94000 + rng.randrange(2000),
                            temperature=round(rng.uniform(8, 11), 1),
                            humidity=rng.randrange(50, 70), altitude=rng.randrange(590, 630)))
    return out


def main() -> None:
    db = ts.connect(os.environ.get("TSMODEL_URL"))
    models = (BalloonRow, BalloonBlob, BalloonWeek, BalloonMetric)
    db.create_tables(*models)
    data = measurements(random.Random(3698), minutes=4 * 24 * 60)  # four days
    for model in models[:3]:
        db.save_all([model(**d) for d in data])
    db.save_all([BalloonMetric(location=d["location"], balloon=d["balloon"], metric=name,
                               time=d["time"], value=d[name])
                 for d in data for name in ("pressure", "humidity", "altitude")])
    print(f"saved {len(data)} balloon reports in four patterns")

    start = datetime(2021, 3, 7, 23, 57, tzinfo=timezone.utc)   # week 9 ...
    end = datetime(2021, 3, 8, 0, 3, tzinfo=timezone.utc)       # ... into week 10
    balloon = {"location": "us-west2", "balloon": 3698}
    queries = {
        "rows, unserialized": BalloonRow.range(start, end, **balloon),
        "rows, serialized": BalloonBlob.range(start, end, **balloon),
        "bucket rows, new cells": BalloonWeek.range(start, end, **balloon),
        "bucket rows, new columns": BalloonMetric.range(start, end, metric="pressure", **balloon),
    }
    results = {}
    for name, query in queries.items():
        print(f"\n== {name}")
        print(query.explain())
        results[name] = [(e.time, getattr(e, "pressure", None) or getattr(e, "value", None))
                         for e in query]
    first = next(iter(results.values()))
    assert all(r == first for r in results.values()), "patterns disagree"
    print(f"\nall four patterns return the same {len(first)} pressures:")
    for when, pressure in first:
        print(f"  {when:%Y-%m-%d %H:%M}  {pressure} Pa")
    print("\nrow keys:", ", ".join(ts.row_key(m(**data[0])).decode() for m in models[:3]))
    db.close()


if __name__ == "__main__":
    main()
