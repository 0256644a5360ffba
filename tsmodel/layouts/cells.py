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
    cells_per_value = True
    name = "cells"
    spelled = "ts.cells()"
    columns_are_fields = True

    def describe(self) -> str:
        return "a bucket row, a new cell version per event"

    def render_writer(self, shape: TableShape, src: Fragment, values: Mapping[str, str]) -> str:
        return render_value_cells(shape, src, values)

    def read_columns(self, shape: TableShape) -> frozenset[tuple[str, bytes]] | None:
        # The reader takes events from these columns only: a read need not fetch
        # the cells of others (a retired field's versions, another writer's).
        return value_columns(shape)

    def version_cut(self, shape: TableShape) -> int | None:
        # With a required value, its column holds every event: an event whose
        # cell there is kept has all its cells kept (the reader checks it).
        if shape.serialization is not None or any(v.stored for v in shape.values):
            return None
        return shape.max_versions

    def reader(self, shape: TableShape) -> Reader:
        decode = render_values(shape)
        # Only the value columns hold events: a cell of another column (a key column
        # at the bucket start, another program's) is no event of its own.
        owned = value_columns(shape)
        limit = self.version_cut(shape)

        def read(cells: tuple[Cell, ...], bucket_start: int | None) -> list[Event]:
            by_time: dict[int, list[Cell]] = defaultdict(list)
            for c in cells:
                if (c.family, c.qualifier) in owned:
                    by_time[c.timestamp].append(c)
            times = sorted(by_time)
            if limit is not None:
                cut = _cut(by_time, limit)
                times = [ts for ts in times if ts >= cut]
            return [(ts, decode(by_time[ts])) for ts in times]

        return read


def _cut(by_time: Mapping[int, list[Cell]], limit: int) -> int:
    """The oldest time whose events kept every cell: the latest, over the columns
    holding ``limit`` versions or more, of the ``limit``-th newest (older versions
    are past the limit, collected or not). An older event may have lost a cell
    there: with every value optional, nothing tells whether it had one."""
    versions: dict[tuple[str, bytes], list[int]] = defaultdict(list)
    for ts, cells in by_time.items():
        for c in cells:
            versions[(c.family, c.qualifier)].append(ts)
    cut = 0
    for times in versions.values():
        if len(times) >= limit:
            cut = max(cut, sorted(times, reverse=True)[limit - 1])
    return cut


def cells() -> Layout:
    """Time buckets, a new cell version per event in one column per value field."""
    return Cells()
