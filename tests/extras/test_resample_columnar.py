"""resample() windows as Arrow, pandas and polars, on both backends.

Each answer is compared with an oracle computed here in plain Python from
the events saved: per host and window of the step, the count and, per
field, the count, sum, min, max, last and mean. Both sources are checked:
the raw events (a step no rollup serves) and the rollup rows (a step its
buckets divide, on bucket boundaries).
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

import tsmodel as ts  # noqa: E402
from tests.backends import conftest as _backends  # noqa: E402
from tests.backends.conftest import asynchronous  # noqa: E402
from tsmodel.backends.base import Backend  # noqa: E402

UTC = timezone.utc
backend, emulator = _backends.backend, _backends.emulator
DAY = datetime(2024, 5, 1, tzinfo=UTC)
HOSTS = ("h1", "h2", "web-3")
FIELDS = ("cpu", "reqs")
AGGREGATES = ("count", "sum", "min", "max", "last", "mean")


@pytest.fixture
def metrics(backend: Backend) -> Iterator[tuple[type, ts.Connection, list[Any]]]:
    name = "rs_" + uuid.uuid4().hex[:10]

    @ts.model(table=name, family="M", rollups=[ts.rollup(f"{name}_1H", "1h")])
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value()
        reqs: int = ts.value()

    rng = random.Random(27)
    events = [Metric(host=host, time=DAY + timedelta(minutes=minute, seconds=rng.randrange(60)),
                     cpu=round(rng.uniform(0, 100), 3), reqs=rng.randrange(-5, 10_000))
              for host in HOSTS for minute in sorted(rng.sample(range(6 * 60), 40))]
    conn = ts.Connection(backend)
    conn.create_tables(Metric)
    conn.save_all(events).raise_for_failures()
    try:
        yield Metric, conn, events
    finally:
        conn.drop_tables(Metric)


def oracle(events: list[Any], start: datetime, end: datetime,
           every: timedelta) -> list[dict[str, Any]]:
    """The windows of the events in [start, end), by host then window start."""
    groups: dict[tuple[str, datetime], list[Any]] = {}
    for e in events:
        if start <= e.time < end:
            offset = (e.time - datetime(1970, 1, 1, tzinfo=UTC)) // every
            window = datetime(1970, 1, 1, tzinfo=UTC) + offset * every
            groups.setdefault((e.host, window), []).append(e)
    rows = []
    for (host, window), members in sorted(groups.items()):
        row: dict[str, Any] = {"host": host, "start": window, "end": window + every,
                               "count": len(members)}
        for f in FIELDS:
            values = [getattr(e, f) for e in members]
            total = sum(values) if f == "reqs" else math.fsum(values)
            newest = max(members, key=lambda e: e.time)
            row.update({f"{f}_count": len(values), f"{f}_sum": total, f"{f}_min": min(values),
                        f"{f}_max": max(values), f"{f}_last": getattr(newest, f),
                        f"{f}_mean": total / len(values)})
        rows.append(row)
    return rows


def same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert set(g) == set(w), (sorted(g), sorted(w))
        for column, value in w.items():
            if isinstance(value, float) and column.endswith(("_sum", "_mean")):
                # from rollup rows, a float sum adds the buckets' sums
                assert g[column] == pytest.approx(value, rel=1e-12), (column, g, w)
            else:
                assert g[column] == value, (column, g, w)


CASES = [  # (step, range start, range end, the source that serves it)
    ("90min", DAY, DAY + timedelta(hours=6), "raw"),
    ("2h", DAY, DAY + timedelta(hours=6), "rollup"),
    ("1h", DAY + timedelta(minutes=30), DAY + timedelta(hours=4, minutes=10), "raw"),
]


@pytest.mark.parametrize(("every", "start", "end", "source"), CASES,
                         ids=[c[0] + "-" + c[3] for c in CASES])
def test_arrow_windows_are_the_oracles(metrics: Any, every: str, start: datetime,
                                       end: datetime, source: str) -> None:
    model, conn, events = metrics
    resample = model.range(start, end, allow_scan=True).using(conn).resample(every)
    assert resample.explain().source == source
    table = resample.to_arrow()
    step = {"90min": timedelta(minutes=90), "2h": timedelta(hours=2), "1h": timedelta(hours=1)}
    want = oracle(events, start, end, step[every])
    same(table.to_pylist(), want)
    assert table.column_names == ["host", "start", "end", "count", *[
        f"{f}_{agg}" for f in FIELDS for agg in AGGREGATES]]
    # every step here is whole seconds: the unit of start and end
    assert table.schema.field("start").type == pa.timestamp("s", tz="UTC")
    assert table.schema.field("host").type == pa.dictionary(pa.int32(), pa.string())
    assert table.schema.field("reqs_sum").type == pa.int64()
    assert table.schema.field("cpu_sum").type == pa.float64()
    # the windows iterated are the rows
    assert [(w.key["host"], w.start, w.count) for w in resample] == [
        (r["host"], r["start"], r["count"]) for r in want]


def test_pandas_and_polars_frames(metrics: Any) -> None:
    model, conn, events = metrics
    start, end = DAY, DAY + timedelta(hours=6)
    want = oracle(events, start, end, timedelta(hours=2))
    resample = model.range(start, end, allow_scan=True).using(conn).resample("2h", fields="reqs")
    frame = resample.to_pandas()
    assert str(frame["host"].dtype) == "category"
    assert str(frame["start"].dtype) == "datetime64[s, UTC]"
    assert str(frame["count"].dtype) == "Int64" and str(frame["reqs_sum"].dtype) == "Int64"
    assert str(frame["reqs_mean"].dtype) == "float64"
    assert list(frame.columns) == ["host", "start", "end", "count",
                                   *[f"reqs_{agg}" for agg in AGGREGATES]]
    got = [{k: (v.to_pydatetime() if isinstance(v, pd.Timestamp) else v) for k, v in row.items()}
           for row in frame.to_dict("records")]
    keep = ["host", "start", "end", "count", *[f"reqs_{agg}" for agg in AGGREGATES]]
    same(got, [{k: r[k] for k in keep} for r in want])
    polars = resample.to_polars()
    assert polars.schema["host"] == pl.Categorical
    same(polars.to_dicts(), [{k: r[k] for k in keep} for r in want])


def test_no_window_is_an_empty_table_with_the_schema(metrics: Any) -> None:
    model, conn, _ = metrics
    later = DAY + timedelta(days=3)
    resample = model.range(later, later + timedelta(hours=1), host="h1").using(conn).resample("1h")
    table = resample.to_arrow()
    assert table.num_rows == 0 and "cpu_mean" in table.column_names
    assert resample.to_pandas().empty and resample.to_polars().is_empty()


async def test_async_windows_are_the_sync_ones(metrics: Any, backend: Backend) -> None:
    model, conn, _ = metrics
    start, end = DAY, DAY + timedelta(hours=6)
    sync = model.range(start, end, allow_scan=True).using(conn).resample("90min")
    async with asynchronous(backend) as ab:
        adb = ts.AsyncConnection(ab)
        resample = model.using(adb).range(start, end, allow_scan=True).resample("90min")
        assert (await resample.to_arrow()).to_pylist() == sync.to_arrow().to_pylist()
        assert (await resample.to_pandas()).equals(sync.to_pandas())
        assert (await resample.to_polars()).equals(sync.to_polars())
