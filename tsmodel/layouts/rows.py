"""A row per event: a column per value field, or one serialized cell.

The reference's "single-timestamp unserialized" and "single-timestamp
serialized" patterns. Every cell of an event carries the event time
(floored to the millisecond) as its timestamp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from tsmodel.ground.base import Cell
from tsmodel.layouts._fragment import Fragment
from tsmodel.layouts.base import (
    MS,
    Event,
    Layout,
    Reader,
    TableShape,
    TimeCheck,
    newest_cells,
    not_event_time,
    render_value_cells,
    value_columns,
)
from tsmodel.layouts.render_read import render_values

__all__ = ["Rows", "rows"]


@attrs.frozen
class Rows(Layout):
    """A row per event (single-timestamp rows).

    Attributes:
        exact_times: cell timestamps hold the event time in µs times 1000, so
            that Bigtable's newest-cell-wins orders events of one millisecond
            by their full time. The current-value table of a ``unit="us"``
            model uses it (its key has no time); cells hold events until the
            year 2262.
    """

    exact_times: bool = False

    writer_of_values = True
    cells_per_value = True
    name = "rows"
    bucketed = False
    read_versions = 1
    reads_time_from_cells = False
    columns_are_fields = True

    @property
    def plain_event_rows(self) -> bool:
        return not self.exact_times

    def describe(self) -> str:
        return "a row per event"

    def time_check(self, shape: TableShape) -> TimeCheck | None:
        if self.exact_times:
            return _fits_exact
        return None  # the key holds the full time; cells hold it floored to the ms

    def cell_timestamp(self, us: int) -> int:
        return us * MS if self.exact_times else us // MS * MS

    def render_writer(self, shape: TableShape, src: Fragment, values: Mapping[str, str]) -> str:
        # A row holds one event: a None value erases its column's older versions too,
        # so a current-value row holds exactly the newest event's cells.
        return render_value_cells(shape, src, values, erase_older=True,
                                  exact_times=self.exact_times)

    def history_reader(self, shape: TableShape) -> Reader | None:
        if self.exact_times:
            return None
        return _as_of_each_version(render_values(shape), value_columns(shape))

    def reader(self, shape: TableShape) -> Reader:
        """A row's one event: the cells of its newest timestamp.

        Cells of an older timestamp (an earlier event of the same row in a
        current-value table, or a foreign write) never mix into it.
        """
        decode = render_values(shape)
        exact = self.exact_times
        if not shape.event_time_cells:
            return _newest_of_each_column(decode, value_columns(shape))

        def read(cells: tuple[Cell, ...], bucket_start: int | None) -> list[Event]:
            if not cells:
                return []
            ts = cells[0].timestamp
            for c in cells:
                if c.timestamp != ts:  # cells of several times: the newest is the event
                    ts = max(c.timestamp for c in cells)
                    values = decode(c for c in cells if c.timestamp == ts)
                    break
            else:
                values = decode(cells)  # the common case: one event's cells
            # A row per event's cells carry the time of its key (floored to the ms).
            if ts != bucket_start and bucket_start is not None and not exact \
                    and ts != bucket_start // MS * MS:
                cell = next(c for c in cells if c.timestamp == ts)
                raise not_event_time(cell, bucket_start, "the row key")
            return [(ts // MS if exact else ts, values)]

        return read


def _newest_of_each_column(decode: Callable[[Iterable[Cell]], dict[str, Any]],
                           owned: frozenset[tuple[str, bytes]]) -> Reader:
    """A reader for cells that do not carry event times: the newest cell of each value
    column is the event's (the row key holds its time); the newest of their
    timestamps is the event's version."""

    def read(cells: tuple[Cell, ...], bucket_start: int | None) -> list[Event]:
        if not cells:
            return []
        newest = newest_cells(tuple(c for c in cells if (c.family, c.qualifier) in owned))
        latest = max(c.timestamp for c in (newest.values() or cells))
        return [(latest, decode(newest.values()))]

    return read


def _as_of_each_version(decode: Callable[[Iterable[Cell]], dict[str, Any]],
                        owned: frozenset[tuple[str, bytes]]) -> Reader:
    """A reader of a row's versions: at each timestamp of a value cell, the newest cell
    of each value column written by then (as every reader saw the event then)."""

    def read(cells: tuple[Cell, ...], bucket_start: int | None) -> list[Event]:
        standing: dict[tuple[str, bytes], Cell] = {}
        versions: list[Event] = []
        ordered = sorted((c for c in cells if (c.family, c.qualifier) in owned),
                         key=lambda c: c.timestamp)
        if not ordered and cells:  # no value at all: not an event of this model
            return [(max(c.timestamp for c in cells), decode(()))]
        for i, c in enumerate(ordered):
            standing[(c.family, c.qualifier)] = c
            if i + 1 == len(ordered) or ordered[i + 1].timestamp != c.timestamp:
                versions.append((c.timestamp, decode(standing.values())))
        return versions

    return read


#: The last event time (µs) whose exact cell timestamp (µs x 1000) fits Bigtable's int64.
_LAST_EXACT_US = (2**63 - 1) // MS


def _fits_exact(us: int) -> str | None:
    if 0 <= us <= _LAST_EXACT_US:
        return None
    return ("is outside 1970..2262, the times a current-value row of a unit='us' model can "
            "order exactly (its cell timestamps are the time in µs x 1000)")


def rows() -> Layout:
    """A row per event (single-timestamp rows): the default layout."""
    return Rows()
