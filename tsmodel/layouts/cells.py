"""Time buckets, a new cell version per event ("new cells for new events").

A bucket row holds one column per value field (or one serialized column);
each event is a new version of those cells, at its event time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import attrs

from tsmodel.ground.base import Cell
from tsmodel.layouts._fragment import Fragment
from tsmodel.layouts.base import (
    Event,
    Layout,
    Reader,
    TableShape,
    render_value_cells,
    value_columns,
)
from tsmodel.layouts.render_read import render_values

__all__ = ["Cells", "cells"]


@attrs.frozen
class Cells(Layout):
    """A bucket row, a new cell version per event."""

    writer_of_values = True
    name = "cells"
    columns_are_fields = True

    def check(self, shape: TableShape) -> str | None:
        if not shape.bucket:
            return (f"layout=ts.cells() needs ts.timestamp(bucket=...) on field "
                    f"{shape.timestamp_field!r}")
        return None

    def describe(self) -> str:
        return "a bucket row, a new cell version per event"

    def render_writer(self, shape: TableShape, src: Fragment, values: Mapping[str, str]) -> str:
        return render_value_cells(shape, src, values)

    def read_columns(self, shape: TableShape) -> frozenset[tuple[str, bytes]] | None:
        # The reader takes events from these columns only: a read need not fetch
        # the cells of others (a retired field's versions, another writer's).
        return value_columns(shape)

    def reader(self, shape: TableShape) -> Reader:
        decode = render_values(shape)
        # Only the value columns hold events: a cell of another column (a key column
        # at the bucket start, another program's) is no event of its own.
        owned = value_columns(shape)

        def read(cells: tuple[Cell, ...], bucket_start: int | None) -> list[Event]:
            by_time: dict[int, list[Cell]] = defaultdict(list)
            for c in cells:
                if (c.family, c.qualifier) in owned:
                    by_time[c.timestamp].append(c)
            return [(ts, decode(by_time[ts])) for ts in sorted(by_time)]

        return read


def cells() -> Layout:
    """Time buckets, a new cell version per event in one column per value field."""
    return Cells()
