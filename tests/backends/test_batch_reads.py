"""Range reads that build instances a batch at a time, on every backend.

Rows of a fixed shape (a row per event; `ts.cells()` and `ts.columns()`
buckets) reach the query as the backend's column batches and are decoded a
batch at a time (`TableCodec.batch_instances`). Held to a plain-Python list of
the saved events: a range read of one entity and a scan of several, oldest
and newest first, with a limit, on the sync and the async API; then a row
damaged behind tsmodel's back is refused by the query, naming its key, as the
row by row decoding refuses it.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tests.whole_key_rows import bucket_models, optional_models, whole_key_models
from tsmodel.backends.base import Backend, RowMutation, SetCell
from tsmodel.ground.base import own_batch_reader

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


def _models() -> list[Any]:
    """A row per event, ``ts.cells()`` and ``ts.columns()`` buckets, and a row per event
    with optional and defaulted values (tests/whole_key_rows.py)."""
    metric = whole_key_models()[0]
    hourly, _, columned, pressure, _ = bucket_models()
    return [metric, hourly, pressure, optional_models()[0]]


def _events(model: Any) -> list[Any]:
    out = []
    for h, host in enumerate(["a", "b.example", "c"]):
        for i in range(0, 300, 1 + h):  # 5.5 hours of minutes, hosts apart in time
            when = T0 + timedelta(minutes=i, seconds=h)
            if model.__name__ == "Pressure":  # its key: a balloon number
                out.append(model(balloon=h, time=when, pascal=i * 7 - h))
            elif model.__name__ == "Sparse":  # every value, but one of host c's events
                out.append(model(host=host, time=when, cpu=i / 8 + h,
                                 blk=None if (h, i) == (2, 249) else i * 7 - h,
                                 note=str(i), level=i % 4))
            else:
                out.append(model(host=host, time=when, cpu=i / 8 + h, blk=i * 7 - h,
                                 name=str(i), up=bool(i % 2)))
    return out


def _one(model: Any) -> dict[str, Any]:
    """The key of the entity read alone (the second one saved)."""
    return {"balloon": 1} if model.__name__ == "Pressure" else {"host": "b.example"}


def _plain(instances: list[Any]) -> list[tuple[Any, ...]]:
    return [attrs.astuple(e, recurse=False) for e in instances]


@pytest.mark.parametrize("which", ["rows", "cells", "columns", "optional"])
def test_range_reads_in_batches_give_the_saved_events(backend: Backend, which: str) -> None:
    model = dict(zip(["rows", "cells", "columns", "optional"], _models(), strict=True))[which]
    assert model.__tsmodel__.codec.batch_instances() is not None
    assert own_batch_reader(backend) is not None  # the query reads batches
    conn = ts.Connection(backend)
    conn.create_tables(model)
    try:
        events = _events(model)
        assert conn.save_all(events).ok
        key = _one(model)
        by_time = sorted(events, key=lambda e: (e.time, _plain([e])))
        one = [e for e in by_time if all(getattr(e, k) == v for k, v in key.items())]
        end = T0 + timedelta(days=1)
        qs = model.range(T0, end, **key).using(conn)
        assert _plain(list(qs)) == _plain(one)
        assert _plain(list(qs.newest_first())) == _plain(one[::-1])
        assert _plain(list(qs.newest_first().limit(45))) == _plain(one[::-1][:45])
        inner = model.range(T0 + timedelta(minutes=61), T0 + timedelta(minutes=200),
                            **key).using(conn)
        assert _plain(list(inner)) == _plain(
            [e for e in one if T0 + timedelta(minutes=61) <= e.time < T0 + timedelta(minutes=200)])
        scan = model.range(T0, end, allow_scan=True).using(conn)
        assert sorted(_plain(list(scan))) == sorted(_plain(by_time))

        async def read_async() -> list[Any]:
            async with asynchronous(backend) as ab:
                aconn = ts.AsyncConnection(ab)
                return [e async for e in model.range(T0, end, **key).using(aconn)]

        assert _plain(asyncio.run(read_async())) == _plain(one)
    finally:
        conn.drop_tables(model)


def test_a_damaged_row_among_batches_is_refused_naming_its_key(backend: Backend) -> None:
    model = _models()[0]
    conn = ts.Connection(backend)
    conn.create_tables(model)
    try:
        events = _events(model)
        assert conn.save_all(events).ok
        qs = model.range(T0, T0 + timedelta(days=1), host="a").using(conn)
        rows = list(backend.read_rows(qs.explain().requests[0]))
        bad = rows[len(rows) // 2]
        cell = bad.cells[0]
        assert backend.mutate_rows(model.__tsmodel__.table, [RowMutation(bad.key, (
            SetCell(cell.family, cell.qualifier, cell.timestamp, b"\x01" * 3),))])[0].ok
        with pytest.raises(ts.CellDecodingError) as info:
            list(qs)
        assert repr(bad.key) in str(info.value) and model.__tsmodel__.table in str(info.value)
    finally:
        conn.drop_tables(model)
