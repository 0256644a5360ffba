"""OpenTelemetry spans and metrics (the ``tsmodel-bigtable[otel]`` extra), on both backends.

Spans and metrics go to the SDK's in-memory exporter and reader. The figures
they carry are checked against an independent count: the test's own events,
the raw rows read back from the backend, the faults the proxy injected.
"""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

import uuid  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from datetime import datetime, timedelta, timezone  # noqa: E402
from typing import Any  # noqa: E402

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import tsmodel as ts  # noqa: E402
from tests.backends import conftest as backend_fixtures  # noqa: E402
from tests.faults.proxy import FaultProxy, Faults  # noqa: E402
from tsmodel.backends.base import Backend, ReadRequest, RowSet  # noqa: E402

#: The backend suite's fixtures: ``backend`` is the embedded store, then the emulator.
backend, emulator = backend_fixtures.backend, backend_fixtures.emulator

UTC = timezone.utc
T0 = datetime(2024, 5, 1, tzinfo=UTC)


class Telemetry:
    """An in-memory tracer and meter provider, and what they received."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracers = TracerProvider()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name in (None, s.name)]

    def metric(self, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
        """Data points of a metric by their attributes: a sum, or a histogram's count."""
        data = self.reader.get_metrics_data()
        found = {}
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            key = tuple(sorted(point.attributes.items()))
                            found[key] = getattr(point, "value", None) \
                                if hasattr(point, "value") else point.count
        return found


@pytest.fixture
def otel() -> Telemetry:
    return Telemetry()


def declare() -> Any:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"otel_{suffix}", family="F", current=f"otel_cur_{suffix}")
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        value: float = ts.value("V")

    return Reading


def readings(model: Any, n: int) -> list[Any]:
    return [model(sensor=f"s{i % 3}", time=T0 + timedelta(seconds=i), value=float(i))
            for i in range(n)]


def stored(backend: Backend, table: str) -> tuple[int, int, int]:
    """Rows, cells and bytes (row keys, qualifiers, values) a table holds, read raw."""
    rows = list(backend.read_rows(ReadRequest(table)))
    cells = [c for r in rows for c in r.cells]
    size = sum(len(r.key) for r in rows) + sum(len(c.qualifier) + len(c.value) for c in cells)
    return len(rows), len(cells), size


@pytest.fixture
def conn(backend: Backend, otel: Telemetry) -> Iterator[ts.Connection]:
    yield ts.Connection(backend, batch_size=4, settings=ts.Settings(
        tracer_provider=otel.tracers, meter_provider=otel.meters))


def test_a_save_is_one_span_with_its_figures(conn: ts.Connection, otel: Telemetry,
                                             backend: Backend) -> None:
    model = declare()
    conn.create_tables(model)
    spec = ts.spec_of(model)
    conn.save_all(readings(model, 10))
    [span] = otel.spans("tsmodel.save")
    assert span.kind is SpanKind.CLIENT and span.status.status_code is StatusCode.UNSET
    attributes = dict(span.attributes or {})
    main_rows, main_cells, main_bytes = stored(backend, spec.table)
    assert (main_rows, main_cells) == (10, 10)
    # 10 main rows, and the current rows written per batch (batches of 4, 4, 2
    # hold 3, 3 and 2 sensors): 8 rows of one cell each.
    assert attributes == {
        "tsmodel.operation": "save", "tsmodel.tables": (spec.table, spec.current_table),
        "tsmodel.calls": 6, "tsmodel.rows": 18, "tsmodel.cells": 18,
        "tsmodel.bytes": main_bytes + _current_bytes(backend, spec), "tsmodel.retries": 0,
        "tsmodel.entities": 10, "tsmodel.outcome.written": 10, "tsmodel.outcome.failed": 0,
        "tsmodel.outcome.unknown": 0, "tsmodel.outcome.partial": 0}
    assert otel.metric("tsmodel.entities") == {
        (("tsmodel.operation", "save"), ("tsmodel.outcome", "written")): 10}
    assert otel.metric("tsmodel.rows") == {(("tsmodel.operation", "save"),): 18}


def _current_bytes(backend: Backend, spec: Any) -> int:
    """Bytes of the current-table writes of the save above: each batch's newest event
    per sensor (batches of 4, 4, 2), read back from what the last one left."""
    rows = {r.key: r for r in backend.read_rows(ReadRequest(spec.current_table))}
    per_row = {key: len(key) + sum(len(c.qualifier) + len(c.value) for c in row.cells[:1])
               for key, row in rows.items()}
    # Every current write of a sensor has the same key and qualifier and an 8-byte value.
    writes_per_sensor = {b"s0": 3, b"s1": 2, b"s2": 3}
    return sum(size * next(n for s, n in writes_per_sensor.items() if key.startswith(s))
               for key, size in per_row.items())


def test_reads_and_lookups_are_spans_with_what_they_returned(
    conn: ts.Connection, otel: Telemetry, backend: Backend
) -> None:
    model = declare()
    conn.create_tables(model)
    spec = ts.spec_of(model)
    conn.save_all(readings(model, 9))
    otel.exporter.clear()
    found = list(model.using(conn).range(T0, T0 + timedelta(hours=1), sensor="s2"))
    latest = model.using(conn).latest(sensor="s1")
    assert [e.value for e in found] == [2.0, 5.0, 8.0] and latest.value == 7.0
    [read] = otel.spans("tsmodel.read")
    [lookup] = otel.spans("tsmodel.lookup")
    raw = [r for r in backend.read_rows(ReadRequest(spec.table)) if r.key.startswith(b"s2")]
    assert dict(read.attributes or {}) | {"tsmodel.bytes": None} == {
        "tsmodel.operation": "read", "tsmodel.tables": (spec.table,), "tsmodel.calls": 1,
        "tsmodel.rows": 3, "tsmodel.cells": 3, "tsmodel.bytes": None, "tsmodel.retries": 0}
    assert (read.attributes or {})["tsmodel.bytes"] == sum(
        len(r.key) + sum(len(c.qualifier) + len(c.value) for c in r.cells) for r in raw)
    assert (lookup.attributes or {})["tsmodel.tables"] == (spec.current_table,)
    assert (lookup.attributes or {})["tsmodel.rows"] == 1
    durations = otel.metric("tsmodel.operation.duration")
    assert durations[(("tsmodel.operation", "read"),)] == 1
    assert durations[(("tsmodel.operation", "lookup"),)] == 1


def test_a_columnar_read_is_a_span_of_the_rows_it_read(
    conn: ts.Connection, otel: Telemetry, backend: Backend
) -> None:
    """``to_arrow()`` reads the rows in column batches: counted as the rows they hold."""
    pytest.importorskip("pyarrow")
    model = declare()
    conn.create_tables(model)
    spec = ts.spec_of(model)
    conn.save_all(readings(model, 9))
    otel.exporter.clear()
    table = model.using(conn).range(T0, T0 + timedelta(hours=1), sensor="s2").to_arrow()
    assert table.column("value").to_pylist() == [2.0, 5.0, 8.0]
    [read] = otel.spans("tsmodel.read")
    raw = [r for r in backend.read_rows(ReadRequest(spec.table)) if r.key.startswith(b"s2")]
    assert dict(read.attributes or {}) == {
        "tsmodel.operation": "read", "tsmodel.tables": (spec.table,), "tsmodel.calls": 1,
        "tsmodel.rows": 3, "tsmodel.cells": 3, "tsmodel.retries": 0,
        "tsmodel.bytes": sum(len(r.key) + sum(len(c.qualifier) + len(c.value)
                                              for c in r.cells) for r in raw)}


def test_a_delete_is_a_span(conn: ts.Connection, otel: Telemetry) -> None:
    model = declare()
    conn.create_tables(model)
    events = readings(model, 6)
    conn.save_all(events)
    conn.delete_all(events[:2])
    [span] = otel.spans("tsmodel.delete")
    assert (span.attributes or {})["tsmodel.outcome.written"] == 2


def test_a_failed_read_is_an_error_span(conn: ts.Connection, otel: Telemetry) -> None:
    with pytest.raises(ts.TableNotFoundError) as info:
        list(conn.read(ReadRequest("no_such_" + uuid.uuid4().hex[:8], RowSet(keys=(b"k",)))))
    [span] = otel.spans("tsmodel.lookup")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == f"TableNotFoundError: {info.value}"
    assert [e.name for e in span.events] == ["exception"]


def test_spans_are_children_of_the_current_span(conn: ts.Connection, otel: Telemetry) -> None:
    model = declare()
    conn.create_tables(model)
    with otel.tracers.get_tracer("app").start_as_current_span("request") as parent:
        conn.save_all(readings(model, 2))
    [span] = otel.spans("tsmodel.save")
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id


def test_telemetry_is_off_unless_asked(backend: Backend) -> None:
    conn = ts.Connection(backend)
    assert conn._observer.telemetry is None
    assert ts.Connection(backend, settings=ts.Settings(telemetry=True))._observer.telemetry


@pytest.mark.emulator
def test_retries_are_counted_in_spans_and_metrics(emulator: Any, otel: Telemetry) -> None:
    model = declare()
    with FaultProxy(emulator.host_port, seed=11) as proxy:
        url = f"bigtable-emulator://{proxy.host_port}/otel/inst?backoff_initial=0.001"
        with ts.connect(url, default=False, batch_size=3, backoff_maximum=0.002,
                        tracer_provider=otel.tracers, meter_provider=otel.meters) as db:
            db.create_tables(model)
            db.save_all(readings(model, 2))  # the emulator's family checks, unfaulted
            otel.exporter.clear()
            proxy.faults = Faults(write_before=0.4)
            db.save_all(readings(model, 30))
            proxy.faults = Faults()
    injected = sum(n for k, n in proxy.injected.items() if k.startswith("write.before."))
    [span] = otel.spans("tsmodel.save")
    assert injected > 0
    assert (span.attributes or {})["tsmodel.retries"] == injected
    assert otel.metric("tsmodel.retries") == {(("tsmodel.operation", "save"),): injected}


async def test_async_connections_emit_the_same_spans(otel: Telemetry) -> None:
    model = declare()
    async with ts.connect_async("memory://", tracer_provider=otel.tracers,
                                meter_provider=otel.meters) as db:
        await db.create_tables(model)
        await db.save_all(readings(model, 4))
        found = [e async for e in db.range(model, T0, T0 + timedelta(hours=1), sensor="s0")]
    assert len(found) == 2
    [save] = otel.spans("tsmodel.save")
    [read] = otel.spans("tsmodel.read")
    assert (save.attributes or {})["tsmodel.outcome.written"] == 4
    assert (read.attributes or {})["tsmodel.rows"] == 2
