"""Versions past a bucket row's version limit: gone for good once pushed there.

A bucket row (``ts.cells()``, ``ts.columns()``) keeps each event as a cell
version per column, and the table's GC rule keeps ``max_versions`` versions
of a column; reads apply the limit as a filter (``versions_kept``), so they
answer as if GC had run. Deleting one of a column's newest versions would
bring back an older one that newer events pushed past the limit, but only
where GC has not collected it yet: the embedded store never does, Bigtable
and the emulator in the background.

So whatever deletes cells in such a row (a delete, a correction that moves
an event to other columns, a repair) erases in the same mutation every event
that has a version past the limit in a column it deletes from, as the row
stands before it (what a GC run would collect there): an event pushed past
the limit is gone for good, and the answer is the same whether GC ran
before, after, or never. Its other cells go with it (a GC run would leave
them, unseen: the event is no longer whole), which in turn counts their
columns as deleted from.

Finding those versions takes a read of the rows' cell timestamps
(`timestamps_read()`, values stripped); `past_limit()` works them out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from tsmodel.declare.spec import ModelSpec
from tsmodel.ground.base import Cell, DeleteCells, Mutation, ReadRequest, SetCell

__all__ = ["CellId", "version_limit", "timestamps_read", "past_limit", "written_cells",
           "erase"]

_MS = 1_000

#: A cell: (family, qualifier, timestamp).
CellId = tuple[str, bytes, int]


def version_limit(spec: ModelSpec) -> int | None:
    """The versions per column that ``spec``'s table keeps of its bucket rows'
    events, where deleting a version may bring back an older one; ``None``
    where none can (a row per event, one version per column, no limit)."""
    layout = spec.layout
    if not layout.bucketed or layout.read_versions is not None or spec.version_field:
        return None
    return spec.max_versions


def timestamps_read(spec: ModelSpec, keys: Iterable[bytes]) -> ReadRequest:
    """The read of rows' cell timestamps (every version, values stripped)."""
    return spec.rows_read(keys, strip_values=True)


def past_limit(spec: ModelSpec, cells: Iterable[Cell], erased: Iterable[CellId]) -> set[CellId]:
    """The cells to erase with ``erased`` from a row holding ``cells`` (its cells
    before, as `timestamps_read()` returns them): those of every event with a
    version past the limit in a column ``erased`` deletes from, or that these
    events' own cells are in. Empty without a limit (`version_limit()`)."""
    limit = version_limit(spec)
    if limit is None:
        return set()
    owns = spec.codec.layout.owns_column(spec)
    versions: dict[tuple[str, bytes], list[int]] = defaultdict(list)
    events: dict[int, list[tuple[str, bytes]]] = defaultdict(list)  # an event: its time
    for c in cells:
        column = (c.family, c.qualifier)
        versions[column].append(c.timestamp)
        if owns(*column):
            events[c.timestamp].append(column)
    past = {column: sorted(times, reverse=True)[limit:] for column, times in versions.items()
            if len(times) > limit}
    out: set[CellId] = set()
    todo = list({(f, q) for f, q, _ in erased})
    seen: set[tuple[str, bytes]] = set()
    while todo:
        column = todo.pop()
        if column in seen:
            continue
        seen.add(column)
        for ts in past.get(column, ()):
            for other in events.get(ts, ()):
                out.add((*other, ts))
                todo.append(other)
    return out


def written_cells(mutations: Iterable[Mutation]) -> list[CellId]:
    """The cells ``mutations`` write (an event's, as its codec encodes it), in order."""
    return [(m.family, m.qualifier, m.timestamp) for m in mutations if type(m) is SetCell]


def erase(cells: Iterable[CellId]) -> tuple[Mutation, ...]:
    """Deletions of exactly ``cells``, sorted."""
    return tuple(DeleteCells(f, q, ts, ts + _MS) for f, q, ts in sorted(set(cells)))
