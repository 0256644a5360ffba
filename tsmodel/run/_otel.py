"""OpenTelemetry spans and metrics of tsmodel's operations (the ``tsmodel-bigtable[otel]`` extra).

Imported only when a connection turns telemetry on
(`telemetry`, or a provider given):
the core never imports ``opentelemetry``. `tsmodel.run.observe`
calls `Telemetry.start()` when an operation begins and
`Telemetry.end()` when it is over.

Each operation is one span, ``tsmodel.save``, ``tsmodel.delete``,
``tsmodel.read``, ``tsmodel.lookup`` or ``tsmodel.write`` (a job's table
write), of kind CLIENT, a child of the span current when it began, with the
attributes ``tsmodel.operation``, ``tsmodel.tables``, ``tsmodel.calls``,
``tsmodel.rows``, ``tsmodel.cells``, ``tsmodel.bytes``, ``tsmodel.retries``
and, for saves and deletes, ``tsmodel.entities`` and
``tsmodel.outcome.{written,failed,unknown,partial}``. An operation that
raised has the status ERROR and the exception as an event.

Metrics (attribute ``tsmodel.operation``; ``tsmodel.outcome`` on entities):
``tsmodel.operation.duration`` (histogram, s), ``tsmodel.rows``,
``tsmodel.cells``, ``tsmodel.bytes``, ``tsmodel.retries``,
``tsmodel.entities`` (counters).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from tsmodel.settings import Settings

__all__ = ["Telemetry"]

_SCOPE = "tsmodel"
_OUTCOMES = ("written", "failed", "unknown", "partial")


def _version() -> str:
    from tsmodel import __version__

    return __version__


class Telemetry:
    """A tracer and the instruments of one connection."""

    def __init__(self, settings: Settings) -> None:
        tracers = settings.tracer_provider or trace.get_tracer_provider()
        meters = settings.meter_provider or metrics.get_meter_provider()
        self.tracer = tracers.get_tracer(_SCOPE, _version())
        meter = meters.get_meter(_SCOPE, _version())
        self.duration = meter.create_histogram(
            "tsmodel.operation.duration", unit="s",
            description="Duration of tsmodel operations (save, delete, read, lookup, write)")
        self.counters = {
            name: meter.create_counter(f"tsmodel.{name}", unit=unit, description=description)
            for name, unit, description in (
                ("rows", "{row}", "Rows written or read"),
                ("cells", "{cell}", "Cells written or read"),
                ("bytes", "By", "Bytes of row keys, qualifiers and values written or read"),
                ("retries", "{retry}", "Retried backend calls"),
            )}
        self.entities = meter.create_counter(
            "tsmodel.entities", unit="{entity}",
            description="Entities saved or deleted, by outcome")

    def start(self, op: Any) -> Any:
        """The span of an operation that begins (``op``: an ``observe.Operation``)."""
        return self.tracer.start_span(f"tsmodel.{op.kind}", kind=SpanKind.CLIENT,
                                      attributes={"tsmodel.operation": op.kind})

    def end(self, op: Any, span: Any, seconds: float,
            error: BaseException | None) -> None:
        """End the span of ``op``; record its metrics."""
        totals = {"calls": op.calls, "rows": op.rows, "cells": op.cells, "bytes": op.bytes,
                  "retries": op.retries}
        span.set_attributes({f"tsmodel.{name}": value for name, value in totals.items()})
        span.set_attribute("tsmodel.tables", list(op.tables))
        if op.outcomes:
            span.set_attribute("tsmodel.entities", sum(op.outcomes.values()))
            for outcome in _OUTCOMES:
                span.set_attribute(f"tsmodel.outcome.{outcome}", op.outcomes[outcome])
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()
        labels = {"tsmodel.operation": op.kind}
        self.duration.record(seconds, labels)
        for name, counter in self.counters.items():
            if totals[name]:
                counter.add(totals[name], labels)
        for outcome, n in op.outcomes.items():
            self.entities.add(n, {**labels, "tsmodel.outcome": outcome})
