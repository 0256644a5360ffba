"""(p) saving and range-reading the same readings in each storage pattern, against a row
per event.

The weather balloon of Google's time-series patterns, in the four patterns of
``tests/backends/test_buckets.py`` (declared here alike): a row per event
(``ts.rows()``), serialized rows, new cells for new events (``ts.cells()``,
week buckets) and new columns for new events (``ts.columns()``, week buckets,
the pressure in the qualifier). Each pattern saves the same 5,760 readings
(two balloons, a reading a minute for two days), once in time order and once
shuffled, on fresh tables; the ratio is each pattern's rate over the row per
event layout's in the same order and run. After each save, the readings are
read back with ``Model.range()`` (a range per balloon, into instances; checked
against the saved events once per pattern): the ``p1r``-``p3r`` rows give each
pattern's read rate over the row per event layout's (a figure, no target).
Runs on the embedded store and, when one is given, on the emulator.

Each row's note gives the store's own ratio for the same cells: the
pattern's cells and the row per event layout's, encoded before the clock
starts and sent by the backend's ``mutate_rows``. The emulator writes new
cells into one week's row (``ts.cells()``) at about a fifth of the rate of
the same cells in rows of their own (measured: 0.17x to 0.22x), which bounds
that pattern's ratio there.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from _common import Result, median, timed

import tsmodel as ts
from tsmodel.ground.base import RowMutation
from tsmodel.plan.events import encode_all

#: Entries per ``mutate_rows`` call of the transport's own rate (the limit).
LIMIT_BATCH = 1000

T0 = datetime(2021, 3, 5, 12, 0, tzinfo=timezone.utc)
PATTERNS = ("rows", "serialized", "cells", "columns")
ORDERS = ("in time order", "shuffled")


def _unique(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:8]}"


def balloon_models() -> dict[str, Any]:
    """The weather balloon in each of the four patterns (as tests/backends/test_buckets.py)."""

    @ts.model(table=_unique("BALLOON_ROWS"), family="measurements")
    class Rows:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
        pressure: int = ts.value()
        temperature: float = ts.value("temp")
        humidity: int = ts.value()
        altitude: int = ts.value()

    @ts.model(table=_unique("BALLOON_BLOB"), family="measurements",
              serialization=ts.Protobuf(qualifier="measurements_blob"))
    class Serialized:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
        pressure: int = ts.value()
        temperature: float = ts.value()
        humidity: int = ts.value()
        altitude: int = ts.value()

    @ts.model(table=_unique("BALLOON_CELLS"), family="measurements", layout=ts.cells(),
              max_rate=1 / 60)
    class NewCells:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(bucket="week")
        pressure: int = ts.value()
        temperature: float = ts.value("temp")
        humidity: int = ts.value()
        altitude: int = ts.value()

    @ts.model(table=_unique("BALLOON_COLUMNS"), family="m", layout=ts.columns(),
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


def _by_time(event: Any) -> tuple[str, datetime]:
    return event.location, event.time


def to_events(name: str, model: Any, data: list[dict[str, Any]]) -> list[Any]:
    if name != "columns":
        return [model(**d) for d in data]
    return [model(location=d["location"], balloon=d["balloon"], metric="pressure",
                  time=d["time"], value=d["pressure"]) for d in data]


class PatternSuite:
    """Each pattern's save rate, as a ratio to the row per event layout's."""

    def __init__(self, where: str, url: str | None, runs: int, log: Callable[[str], None],
                 minutes: int = 60 * 24 * 2) -> None:
        self.where, self.url, self.runs, self.log = where, url, runs, log
        self.data = readings(minutes, random.Random(2021))
        self.locations = sorted({d["location"] for d in self.data})
        self.end = max(d["time"] for d in self.data) + timedelta(minutes=1)

    def run(self) -> list[Result]:
        conn = ts.connect(self.url) if self.url is not None else ts.connect()
        models = balloon_models()
        rates: dict[tuple[str, str], list[float]] = {}
        limits: dict[tuple[str, str], list[float]] = {}
        reads: dict[str, list[float]] = {}
        try:
            for run in range(self.runs):
                for order in ORDERS:
                    data = list(self.data)
                    if order == "shuffled":
                        random.Random(run).shuffle(data)
                    for name in PATTERNS:
                        model = models[name]
                        events = to_events(name, model, data)
                        conn.drop_tables(model)
                        conn.create_tables(model)
                        seconds, outcome = timed(lambda: conn.save_all(events))  # noqa: B023
                        assert outcome.ok, outcome.summary()
                        rates.setdefault((name, order), []).append(len(events) / seconds)
                        if name not in reads:  # once per pattern: what is read is what was saved
                            assert self._read(conn, model) == sorted(events, key=_by_time)
                        seconds, _ = timed(lambda: self._read(conn, model))  # noqa: B023
                        reads.setdefault(name, []).append(len(events) / seconds)
                        limits.setdefault((name, order), []).append(
                            self._limit(conn, model, events))
                    self.log(f"  (p) {self.where} run {run + 1}, {order}: " + ", ".join(
                        f"{name} {rates[(name, order)][-1]:,.0f}" for name in PATTERNS)
                        + "; range reads: " + ", ".join(
                        f"{name} {reads[name][-1]:,.0f}" for name in PATTERNS))
            for model in models.values():
                conn.drop_tables(model)
        finally:
            conn.close()
        out = []
        for order in ORDERS:
            base = rates[("rows", order)]
            for name in PATTERNS[1:]:
                ours = rates[(name, order)]
                ratio = median([o / b for o, b in zip(ours, base, strict=True)])
                key = f"p{PATTERNS.index(name)}{'s' if order == 'shuffled' else 't'}"
                out.append(Result(
                    key, f"{self.where}: save {len(self.data):,} readings {order}, {name} / "
                    "row per event", "events/s", median(ours), median(base), ratio, ">= 0.5",
                    ratio >= 0.5, self.runs))
                limit = median([o / b for o, b in zip(limits[(name, order)],
                                                      limits[("rows", order)], strict=True)])
                out[-1].notes.append(
                    f"the store alone takes the same cells (pre-encoded, sent by the backend's "
                    f"mutate_rows {LIMIT_BATCH:,} entries a call, one call after another) at "
                    f"{limit:.2f}x the rate of the row per event layout's cells: a pattern the "
                    "store itself writes slower cannot save faster than that ratio by much "
                    "(tsmodel sends several calls at once)")
        base = reads["rows"]
        for name in PATTERNS[1:]:
            ours = reads[name]
            ratio = median([o / b for o, b in zip(ours, base, strict=True)])
            out.append(Result(
                f"p{PATTERNS.index(name)}r", f"{self.where}: range-read {len(self.data):,} "
                f"readings into instances, {name} / row per event", "events/s", median(ours),
                median(base), ratio, "-", None, len(ours)))
        return out

    def _read(self, conn: Any, model: Any) -> list[Any]:
        """Every reading, read back a balloon's range at a time, into instances."""
        fields = {"metric": "pressure"} if "metric" in ts.spec_of(model).key_fields else {}
        got: list[Any] = []
        for location in self.locations:
            got += model.range(T0, self.end, location=location, balloon=3698,
                               **fields).using(conn)
        return got

    @staticmethod
    def _limit(conn: Any, model: Any, events: list[Any]) -> float:
        """Events/s of the store alone: ``events``' main-table cells, pre-encoded, sent
        with ``backend.mutate_rows`` on fresh tables (the pattern's transport limit)."""
        encoded = encode_all(events)
        table = encoded[0].table
        entries = [RowMutation(e.key, e.mutations) for e in encoded]
        conn.drop_tables(model)
        conn.create_tables(model)
        backend = conn.backend

        def send() -> None:
            for start in range(0, len(entries), LIMIT_BATCH):
                outcomes = backend.mutate_rows(table, entries[start:start + LIMIT_BATCH])
                assert all(o.ok for o in outcomes)

        seconds, _ = timed(send)
        return len(events) / seconds
