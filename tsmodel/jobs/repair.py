"""Repair: bring the companion tables back in step with the main table.

A save writes the main table first, then the current-value table and the
alternate-key tables; a companion write can fail after the main write
succeeded (the entity's result is then ``partial``), and a main write whose
outcome was unknown can leave companions without a main row. ``repair``
rereads the main table over a time range and:

* rewrites every event into the alternate-key tables and the current-value
  table (idempotent: the same cells at the same timestamps; an older event
  never replaces a newer one in the current-value table);
* deletes alternate-key events in the range that the main table does not
  hold;
* deletes current-value cells in the range whose event the main table does
  not hold, and rewrites that entity's newest event from the main table.

Afterwards the companions hold what a clean run would have written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

import attrs

from tsmodel.backends.base import (
    DeleteCells,
    Mutation,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    RowMutation,
    RowSet,
    SetCell,
)
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.encoding.timestamps import EPOCH, to_micros
from tsmodel.plan.writes import EncodedEvent, TableWrite, WritePlan, encode_event
from tsmodel.run.connection import Connection, get_default_connection

__all__ = ["RepairReport", "repair"]

_MS = 1_000


@attrs.frozen
class RepairReport:
    """What a repair did.

    Attributes:
        events: main-table events replayed into the companions.
        alternate_events_deleted: alternate-key events the main table lacks.
        current_rows_fixed: current-value rows that held an event the main
            table lacks.
        failed: companion writes that failed (run the repair again).
    """

    events: int
    alternate_events_deleted: int
    current_rows_fixed: int
    failed: int

    @property
    def ok(self) -> bool:
        return self.failed == 0


def repair(model: type, start: datetime, end: datetime, *,
           connection: Connection | None = None, batch_size: int = 1000,
           **key_prefix: Any) -> RepairReport:
    """Rewrite the companion tables of ``model`` from its main table over [start, end).

    Args:
        model: the model class.
        start: inclusive, timezone-aware.
        end: exclusive, timezone-aware.
        connection: the connection (default: the default connection).
        batch_size: events per write batch.
        **key_prefix: limit the repair to the entities of a key prefix.

    Returns:
        A :class:`RepairReport`; ``failed`` counts every companion write and
        delete whose outcome was not APPLIED.
    """
    conn = connection or get_default_connection()
    spec = spec_of(model)
    main: Any = conn.range(model, start, end, allow_scan=True, **key_prefix)
    #: (table, row key, event time) of every main-table event, in the main table
    #: and in each alternate-key table.
    held: set[tuple[str, bytes, int]] = set()
    #: The newest event of the range per current-value row.
    newest: dict[bytes, EncodedEvent] = {}
    events = failed = 0
    batch: list[EncodedEvent] = []
    for entity in main.iterator():
        event = encode_event(spec, entity)
        # Where every table must hold it (a corrected promoted value moves it).
        held.update((row.table, row.key, event.timestamp)
                    for row in (event.main, *event.alternates))
        if event.current_key is not None:
            best = newest.get(event.current_key)
            if best is None or event.timestamp >= best.timestamp:
                newest[event.current_key] = event
            event = event._replace(current_table=None, current_key=None, current_mutations=())
        batch.append(event)
        if len(batch) >= batch_size:
            failed += _replay(conn, batch)
            events += len(batch)
            batch = []
    failed += _replay(conn, batch)
    events += len(batch)
    failed += _replay_current(conn, spec, list(newest.values()), batch_size)
    span = (to_micros(start), to_micros(end))

    def in_scope(entity: Any) -> bool:
        return all(getattr(entity, name) == value for name, value in key_prefix.items())

    deleted = 0
    for alt in spec.alternates:
        doomed, bad = _prune_alternate(conn, spec, alt, model, span, held, in_scope)
        deleted += doomed
        failed += bad
    fixed = 0
    if spec.current_codec is not None:
        fixed, bad = _fix_current(conn, spec, model, span, held, in_scope)
        failed += bad
    return RepairReport(events, deleted, fixed, failed)


def _replay(conn: Connection, batch: list[EncodedEvent]) -> int:
    """Write the batch's companions (the main rows are there); count the failures."""
    if not batch:
        return 0
    plan = WritePlan(batch)
    conn.execute(plan, plan.companion_writes(range(len(batch))))
    return plan.failures()


def _replay_current(conn: Connection, spec: ModelSpec, newest: list[EncodedEvent],
                    batch_size: int) -> int:
    """Write each row's newest event of the range into the current-value table,
    unless the row holds a newer event (one after the range): an older event
    never replaces it, nor leaves cells beside it. Returns the failures."""
    codec = spec.current_codec
    if codec is None or not newest:
        return 0
    failed = 0
    for i in range(0, len(newest), batch_size):
        chunk = newest[i:i + batch_size]
        request = ReadRequest(codec.table, RowSet(keys=tuple(ev.current_key for ev in chunk
                                                             if ev.current_key is not None)),
                              ReadFilter(families=spec.families, cells_per_column=1,
                                         strip_values=True))
        held = {row.key: max(c.timestamp for c in row.cells) for row in conn.read(request)}
        cell_time = codec.layout.cell_timestamp
        due = [ev._replace(alternates=()) for ev in chunk
               if held.get(ev.current_key, -1) <= cell_time(ev.timestamp)]  # type: ignore[arg-type]
        failed += _replay(conn, due)
    return failed


def _main_identity(spec: ModelSpec, entity: Any) -> tuple[str, bytes, int]:
    row = spec.codec.encode(entity)
    return row.table, row.key, row.timestamp


def _prune_alternate(conn: Connection, spec: ModelSpec, alt: ModelSpec, model: type,
                     span: tuple[int, int], held: set[tuple[str, bytes, int]],
                     in_scope: Callable[[Any], bool]) -> tuple[int, int]:
    """Delete the alternate table's events in the span that the main table lacks.

    Returns:
        The events deleted, and the deletes that were not APPLIED.
    """
    request = ReadRequest(alt.table, RowSet(), alt.events_filter(
        timestamp_start=span[0], timestamp_end=span[1]))
    doomed: list[RowMutation] = []
    for row in conn.read(request):
        entity: Any
        for entity in alt.codec.decode(model, row):
            if in_scope(entity) and (alt.table, row.key, alt.codec.time_of(entity)) not in held:
                doomed.append(_erase(row.key, alt.codec.encode(entity).mutations))
    return len(doomed), _apply(conn, alt.table, doomed)


def _erase(key: bytes, written: Iterable[Mutation]) -> RowMutation:
    """Mutations deleting exactly the cells an event wrote."""
    deletes = tuple(DeleteCells(m.family, m.qualifier, m.timestamp, m.timestamp + _MS)
                    for m in written if isinstance(m, SetCell))
    return RowMutation(key, deletes)


def _apply(conn: Connection, table: str, rows: list[RowMutation]) -> int:
    """Send ``rows``; the number whose outcome is not APPLIED."""
    if not rows:
        return 0
    outcomes = conn.send(TableWrite(table, tuple(rows), (), grouped=True))
    return sum(1 for o in outcomes if o.status is not MutationStatus.APPLIED)


def _fix_current(conn: Connection, spec: ModelSpec, model: type, span: tuple[int, int],
                 held: set[tuple[str, bytes, int]],
                 in_scope: Callable[[Any], bool]) -> tuple[int, int]:
    """Replace current-value events in the span that the main table lacks.

    Every such event is deleted, newest first, until the row shows one the
    main table holds (or none): several unknown main writes that did not
    happen may each have left one. Then the entity's newest event is
    written again.

    Returns:
        The rows fixed, and the writes that were not APPLIED.
    """
    codec = spec.current_codec
    assert codec is not None
    row_filter = ReadFilter(families=spec.families, cells_per_column=1)
    fixed = failed = 0
    for row in conn.read(ReadRequest(codec.table, RowSet(), row_filter)):
        found: list[Any] = codec.decode(model, row)
        if not found or not in_scope(found[0]) or _held(spec, found[0], span, held):
            continue
        entity = found[0]
        # Delete the event the main table lacks; an older one may show next.
        while found and not _held(spec, found[0], span, held):
            newest_ts = max(c.timestamp for c in row.cells)  # the cells of the event read
            bad = _apply(conn, codec.table, [RowMutation(row.key, tuple(
                DeleteCells(c.family, c.qualifier, newest_ts, newest_ts + _MS)
                for c in row.cells if c.timestamp == newest_ts))])
            failed += bad
            again = None if bad else next(iter(conn.read(ReadRequest(
                codec.table, RowSet(keys=(row.key,)), row_filter))), None)
            if again is None:
                break
            row, found = again, codec.decode(model, again)
        failed += _rewrite_newest(conn, spec, model, entity)
        fixed += 1
    return fixed, failed


def _held(spec: ModelSpec, entity: Any, span: tuple[int, int],
          held: set[tuple[str, bytes, int]]) -> bool:
    """Whether a current value may stay: outside the span, or an event the main table holds."""
    identity = _main_identity(spec, entity)
    return not span[0] <= identity[2] < span[1] or identity in held


def _rewrite_newest(conn: Connection, spec: ModelSpec, model: type, entity: Any) -> int:
    """Save the entity's newest main-table event again: it becomes current.

    Returns:
        The writes that were not APPLIED.
    """
    assert spec.current_key is not None
    keys = {name: getattr(entity, name) for name in spec.current_key.fields}
    everything: Any = conn.range(model, EPOCH, datetime(9999, 12, 31, tzinfo=timezone.utc),
                                 allow_scan=True, **keys)
    newest = everything.newest_first().first()
    if newest is None:
        return 0
    result = conn.save_all([newest], raise_on_failure=False)
    return 0 if result.ok else 1
