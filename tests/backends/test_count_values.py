"""count() reads no value where each row is one event, on both backends.

The count plan reads the cells a read would with values stripped; these tests
check the answer against the events written, that no value byte comes
back (rows as the backend hands them over, and on the emulator's channel,
counted by a proxy that parses the ReadRows responses), and that models
whose rows hold several events, or whose checks are left to the client,
still count by decoding.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tests.backends.passthrough import PassThrough
from tests.faults.proxy import FaultProxy
from tsmodel.backends.base import Backend, ReadRequest, Row, RowMutation, SetCell

UTC = timezone.utc
T0 = datetime(2021, 6, 1, tzinfo=UTC)
HOSTS = ("h1", "h2", "h3")


class ValueCounter(PassThrough):
    """Counts the rows and the value bytes of every row read."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.rows = self.values = 0

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        for row in self.inner.read_rows(request):
            self.rows += 1
            self.values += sum(len(c.value) for c in row.cells)
            yield row


def _models() -> dict[str, Any]:
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"CNT_ROWS_{suffix}", family="M", current=f"CNT_CUR_{suffix}")
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU")
        disk: int = ts.value("DISK")

    @ts.model(table=f"CNT_SALT_{suffix}", family="M")
    class Salted:
        salt = ts.salt(4, on="time")
        time: datetime = ts.timestamp(unit="ms")
        host: str = ts.value("HOST")
        cpu: float = ts.value("CPU")

    @ts.model(table=f"CNT_CELLS_{suffix}", family="M", layout=ts.cells(),
              max_versions=1000)
    class Bucketed:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        cpu: float = ts.value("CPU")

    return {"rows": Metric, "salted": Salted, "cells": Bucketed}


@pytest.fixture
def models(backend: Backend) -> Iterator[tuple[dict[str, Any], ts.Connection, ValueCounter]]:
    counter = ValueCounter(backend)
    conn = ts.Connection(counter)
    found = _models()
    conn.create_tables(*found.values())
    for model in found.values():
        extra = {"disk": 1} if model is found["rows"] else {}
        events = [model(host=h, time=T0 + timedelta(minutes=7 * i), cpu=i / 10, **extra)
                  for h in HOSTS for i in range(20)]
        assert conn.save_all(events).ok
    yield found, conn, counter
    conn.drop_tables(*found.values())


def _expected(start_min: int, end_min: int, hosts: tuple[str, ...] = HOSTS) -> int:
    """Events written with start <= time < end (minutes after T0), independently."""
    return sum(1 for _ in hosts for i in range(20) if start_min <= 7 * i < end_min)


@pytest.mark.parametrize(("name", "fields"), [
    ("rows", {"host": "h2"}), ("rows", {}), ("salted", {}),
])
def test_a_count_of_rows_reads_no_value(models: Any, name: str, fields: dict[str, str]) -> None:
    found, conn, counter = models
    model = found[name]
    qs = model.range(T0 + timedelta(minutes=10), T0 + timedelta(minutes=100),
                     allow_scan=True, **fields).using(conn)
    plan = qs.explain(count=True)
    assert all(r.filter.strip_values for r in plan.requests)
    assert "strip values" in str(plan)
    counter.rows = counter.values = 0
    # Salted's key is the time alone: the hosts' events at one time are one event.
    want = _expected(10, 100, (fields["host"],) if fields else
                     ("h",) if name == "salted" else HOSTS)
    assert qs.count() == want
    assert counter.values == 0 and counter.rows == want
    assert len(list(qs)) == want and counter.values > 0  # iterating reads the values
    assert qs.limit(5).count() == min(5, want)


def test_current_counts_without_values(models: Any) -> None:
    found, conn, counter = models
    counter.values = 0
    assert found["rows"].current().using(conn).count() == len(HOSTS)
    assert counter.values == 0


def test_bucket_rows_count_by_decoding(models: Any) -> None:
    found, conn, counter = models
    qs = found["cells"].range(T0 + timedelta(minutes=10), T0 + timedelta(minutes=100),
                              host="h1").using(conn)
    plan = qs.explain(count=True)
    assert not any(r.filter.strip_values for r in plan.requests)  # the read plan itself
    assert qs.count() == _expected(10, 100, ("h1",))


def test_count_refuses_a_foreign_row_key_as_reading_does(models: Any,
                                                         backend: Backend) -> None:
    found, conn, _ = models
    model = found["rows"]
    spec = ts.spec_of(model)
    in_range = int(T0.timestamp()) * 1_000_000 + 60_000_000  # a cell the range reads
    backend.mutate_rows(spec.table, [RowMutation(b"h2#not-a-time", (
        SetCell("M", b"CPU", in_range, b"\0" * 8),))])
    qs = model.range(T0, T0 + timedelta(days=1), allow_scan=True).using(conn)
    with pytest.raises(ts.KeyDecodingError):
        list(qs)
    with pytest.raises(ts.KeyDecodingError, match="not-a-time"):
        qs.count()


async def test_async_count_reads_no_value(models: Any, backend: Backend) -> None:
    from tests.backends.conftest import asynchronous

    found, _, _ = models
    async with asynchronous(backend) as ab:
        counter = ValueCounterAsync(ab)
        adb = ts.AsyncConnection(counter)
        qs = found["salted"].using(adb).range(T0, T0 + timedelta(minutes=100))
        assert await qs.count() == _expected(0, 100, ("h",))  # one event per time
        assert counter.values == 0 and counter.rows == _expected(0, 100, ("h",))


class ValueCounterAsync:
    """:class:`ValueCounter` of an asynchronous backend."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.features = inner, inner.features
        self.rows = self.values = 0

    async def read_rows(self, request: ReadRequest) -> Any:
        async for row in self.inner.read_rows(request):
            self.rows += 1
            self.values += sum(len(c.value) for c in row.cells)
            yield row

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_no_value_byte_crosses_the_emulator_channel(emulator: Any) -> None:
    from tsmodel.backends.bigtable import BigtableBackend

    with FaultProxy(emulator.host_port) as proxy:
        conn = ts.Connection(BigtableBackend("tsmodel-test", "tsmodel-test",
                                             emulator_host=proxy.host_port))
        model = _models()["rows"]
        conn.create_tables(model)
        try:
            events = [model(host=h, time=T0 + timedelta(seconds=i), cpu=i / 3, disk=i)
                      for h in HOSTS for i in range(500)]
            assert conn.save_all(events).ok
            qs = model.range(T0, T0 + timedelta(hours=1), allow_scan=True).using(conn)
            proxy.read.clear()
            assert qs.count() == len(events)
            counted = dict(proxy.read)
            proxy.read.clear()
            assert len(list(qs)) == len(events)
            iterated = dict(proxy.read)
        finally:
            conn.drop_tables(model)
            conn.close()
    assert counted["rows"] == iterated["rows"] == len(events)
    assert counted["values"] == 0
    assert iterated["values"] == 16 * len(events)  # two 8-byte values per event
    # The same cells, their values stripped: no more than iterating less its value bytes.
    assert counted["bytes"] <= iterated["bytes"] - iterated["values"]


def test_a_serialized_model_counts_its_events_without_decoding(backend: Backend) -> None:
    # One protobuf cell per event: count() reads the rows with values stripped, as for
    # columns. Its answer is the events in the range; a blob whose bytes are damaged is
    # still an event's cell (counted; iterating refuses its bytes), a row without the
    # blob holds no event (refused by both, as iterating refuses it).
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"CNT_PB_{suffix}", family="data",
              serialization=ts.Protobuf(qualifier="blob"))
    class Balloon:
        site: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        pressure: int = ts.value()
        humidity: float | None = ts.value(default=None)

    counter = ValueCounter(backend)
    conn = ts.Connection(counter)
    conn.create_tables(Balloon)
    try:
        events = [Balloon(site=s, time=T0 + timedelta(minutes=7 * i), pressure=i,
                          humidity=None if i % 3 else i / 4)
                  for s in ("a", "b") for i in range(20)]
        assert conn.save_all(events).ok
        start, end = T0 + timedelta(minutes=10), T0 + timedelta(minutes=100)
        qs = Balloon.range(start, end, site="a").using(conn)
        want = sum(1 for e in events if e.site == "a" and start <= e.time < end)
        assert "strip values" in str(qs.explain(count=True))
        counter.values = 0
        assert qs.count() == want > 0
        assert counter.values == 0  # no blob byte read
        assert len(list(qs)) == want
        assert qs.limit(3).count() == 3
        inside = next(e for e in events if e.site == "a" and start <= e.time < end)
        when = int(inside.time.timestamp() * 1_000_000)
        backend.mutate_rows(f"CNT_PB_{suffix}", [RowMutation(ts.row_key(inside), (
            SetCell("data", b"blob", when, b"\xff\xff\xff"),))])
        assert qs.count() == want
        with pytest.raises(ts.CellDecodingError, match="blob"):
            list(qs)
        lone = T0 + timedelta(minutes=12)  # no event of the model at this time
        backend.mutate_rows(f"CNT_PB_{suffix}", [RowMutation(
            ts.row_key(Balloon(site="a", time=lone, pressure=0)), (
                SetCell("data", b"other", int(lone.timestamp() * 1_000_000), b"z"),))])
        with pytest.raises(ts.CellDecodingError, match="no cell"):
            qs.count()
    finally:
        conn.drop_tables(Balloon)
