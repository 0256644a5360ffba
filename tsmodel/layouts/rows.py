"""A row per event: a column per value field, or one serialized cell.

The reference's "single-timestamp unserialized" and "single-timestamp
serialized" patterns. Every cell of an event carries the event time
(floored to the millisecond) as its timestamp.
"""

from __future__ import annotations

import attrs

from tsmodel.backends.base import Cell
from tsmodel.layouts.base import (
    Event,
    Layout,
    Reader,
    TableShape,
    TimeCheck,
    Writer,
    value_cell_decoder,
    value_cell_writer,
)

__all__ = ["Rows", "rows"]


@attrs.frozen
class Rows(Layout):
    """A row per event (single-timestamp rows)."""

    name = "rows"
    bucketed = False
    read_versions = 1
    columns_are_fields = True

    def check(self, shape: TableShape) -> str | None:
        if shape.bucket is not None:
            return ("a bucket (ts.timestamp(bucket=...)) needs a bucket layout: "
                    "layout=ts.cells(), ts.columns() or ts.offsets(step)")
        return None

    def describe(self) -> str:
        return "a row per event"

    def time_check(self, shape: TableShape) -> TimeCheck | None:
        return None  # the key holds the full time; cells hold it floored to the ms

    def writer(self, shape: TableShape) -> Writer:
        return value_cell_writer(shape)

    def reader(self, shape: TableShape) -> Reader:
        """A row's one event: the cells of its newest timestamp.

        Cells of an older timestamp (an earlier event of the same row in a
        current-value table, or a foreign write) never mix into it.
        """
        decode = value_cell_decoder(shape)

        def read(cells: tuple[Cell, ...], bucket_start: int | None) -> list[Event]:
            if not cells:
                return []
            ts = max(c.timestamp for c in cells)
            if cells[0].timestamp == ts == cells[-1].timestamp:
                return [(ts, decode(cells))]  # the common case: one event's cells
            return [(ts, decode(c for c in cells if c.timestamp == ts))]

        return read


def rows() -> Layout:
    """A row per event (single-timestamp rows): the default layout."""
    return Rows()
