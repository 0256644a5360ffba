"""Time buckets, a new column per event ("new columns for new events").

A bucket row of one measurement: each event is a column whose qualifier is
the encoded value and whose cell is empty, at the event time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from tsmodel.ground.base import Cell, SetCell
from tsmodel.layouts._fragment import Fragment
from tsmodel.layouts.base import (
    CELL_OVERHEAD,
    MS,
    Event,
    Layout,
    Reader,
    TableShape,
    value_bytes,
)

__all__ = ["Columns", "columns"]


@attrs.frozen
class Columns(Layout):
    """A bucket row, a new column per event (the value in the qualifier)."""

    writer_of_values = True
    name = "columns"
    spelled = "ts.columns()"
    cells_depend_on_values = True

    def check(self, shape: TableShape) -> str | None:
        if len(shape.values) != 1 or shape.serialization is not None:
            return ("layout=ts.columns() stores one measurement per row in the qualifier: "
                    "declare exactly one value field (promote the metric name into the key) "
                    "and no serialization")
        if shape.values[0].optional:
            return "layout=ts.columns(): the value field cannot be optional"
        return None

    def describe(self) -> str:
        return "a bucket row, a new column per event (the value in the qualifier)"

    def render_writer(self, shape: TableShape, src: Fragment, values: Mapping[str, str]) -> str:
        v = shape.values[0]  # required (checked): its bytes are the qualifier
        cell = src.build(SetCell, repr(v.family), values[v.name], f"us // {MS} * {MS}", "b''")
        return f"({cell},)"

    def reader(self, shape: TableShape) -> Reader:
        v = shape.values[0]
        name, family, decode = v.name, v.family, v.codec.decode

        def read(cells: tuple[Cell, ...], bucket_start: int | None) -> list[Event]:
            found = sorted((c.timestamp, c.qualifier) for c in cells if c.family == family)
            return [(ts, {name: decode(qualifier)}) for ts, qualifier in found]

        return read

    def value_column(self, shape: TableShape, name: str) -> tuple[str, bytes | None] | None:
        return None  # the value is the qualifier; the cell is empty

    def owns_column(self, shape: TableShape) -> Callable[[str, bytes], bool]:
        family = shape.values[0].family
        return lambda f, qualifier: f == family  # every qualifier of it is a value

    def row_column_problem(self, shape: TableShape, family: str,
                           qualifier: bytes) -> str | None:
        if family == shape.values[0].family:
            return (f"layout=ts.columns() reads every qualifier of family {family!r} as a "
                    "measurement; declare the value field in another family "
                    "(ts.value(family=...))")
        return None

    def event_bytes(self, shape: TableShape) -> int:
        return value_bytes(shape.values[0]) + CELL_OVERHEAD

    def cells_per_event(self, shape: TableShape) -> int:
        return 1


def columns() -> Layout:
    """Time buckets, a new column per event: the measurement is the qualifier."""
    return Columns()
