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
  not hold, and rewrites that entity's newest event from the main table;
* recomputes, from the main table, every rollup row of a bucket that
  overlaps the range and holds an event of the range or a rollup row
  (a bucket left without events loses its row).

Afterwards the companions hold what a clean run would have written.

The job is one generator, `repair_steps()`, that yields the reads and
writes it needs (`tsmodel.jobs.steps`); `repair()` carries them out
with blocking calls, `repair_async()` on an event loop. The main table is
read request by request (one per salt value), a chunk of rows at a time: a
repair needs every event of the range, not their order, so the streams are
not merged by time as a query merges them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import attrs

from tsmodel import errors
from tsmodel._observe import JOB_LOG
from tsmodel.backends.base import (
    DeleteCells,
    DeleteRow,
    Features,
    Mutation,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowSet,
    SetCell,
)
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.encoding.timestamps import EPOCH, to_micros
from tsmodel.jobs.steps import First, JobSteps, Read, Rows, Save, Scan, Send, run_job, run_job_async
from tsmodel.plan.merge import check_guard
from tsmodel.plan.reads import QueryState, ReadPlan, compile_query
from tsmodel.plan.rollups import RollupRefresh
from tsmodel.plan.writes import (
    EncodedEvent,
    ReadStep,
    TableWrite,
    WritePlan,
    encode_event,
    refresh_steps,
)
from tsmodel.run.async_connection import AsyncConnection
from tsmodel.run.connection import Connection, get_default_connection
from tsmodel.run.query import QuerySet

__all__ = ["RepairReport", "repair", "repair_async", "repair_steps"]

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
        rollup_rows_written: rollup rows recomputed (written anew or deleted).
    """

    events: int
    alternate_events_deleted: int
    current_rows_fixed: int
    failed: int
    rollup_rows_written: int = 0

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
        A `RepairReport`; ``failed`` counts every companion write and
        delete whose outcome was not APPLIED.

    Raises:
        BackendError: a read failed (writes that fail are counted in ``failed``).
    """
    conn = connection or get_default_connection()
    return run_job(repair_steps(model, start, end, features=conn.features,
                                batch_size=batch_size, key_prefix=key_prefix), conn)


async def repair_async(model: type, start: datetime, end: datetime, *,
                       connection: AsyncConnection, batch_size: int = 1000,
                       **key_prefix: Any) -> RepairReport:
    """`repair()` on an `AsyncConnection`:
    ``await ts.repair_async(Model, start, end, connection=db)``.

    The same job, with the same arguments and report; the current-value and
    alternate-key writes of a batch go out concurrently.

    Raises:
        BackendError: a read failed (writes that fail are counted in ``failed``).
    """
    return await run_job_async(repair_steps(model, start, end, features=connection.features,
                                            batch_size=batch_size, key_prefix=key_prefix),
                               connection)


def repair_steps(model: type, start: datetime, end: datetime, *, features: Features,
                 batch_size: int = 1000,
                 key_prefix: Mapping[str, Any] | None = None) -> JobSteps[RepairReport]:
    """The repair as steps (`tsmodel.jobs.steps`), for any executor.

    Args:
        features: the capabilities of the backend the steps will run on.
        key_prefix: key field values, as ``**key_prefix`` of `repair()`
            (a mapping here, so that no key field name is taken).
        The others: as for `repair()`.
    """
    key_prefix = dict(key_prefix or {})
    spec = spec_of(model)
    plan = _main_read(spec, model, start, end, features, key_prefix)
    for guard in plan.guards:
        found: list[Row] = yield Read(guard)
        check_guard(plan, found)
    #: (table, row key, event time) of every main-table event, in the main table
    #: and in each alternate-key table.
    held: set[tuple[str, bytes, int]] = set()
    #: The newest event of the range per current-value row.
    newest: dict[bytes, EncodedEvent] = {}
    events = failed = 0
    batch: list[EncodedEvent] = []
    refresh = RollupRefresh(features)
    for request in plan.requests:
        scan = Scan(request)
        while rows := (yield Rows(scan, batch_size)):
            for entity in _accepted(plan, model, rows):
                if spec.rollups:
                    refresh.add(spec, entity)
                event = encode_event(spec, entity)
                # Where every table must hold it (a corrected promoted value moves it).
                held.update((row.table, row.key, event.timestamp)
                            for row in (event.main, *event.alternates))
                if event.current_key is not None:
                    best = newest.get(event.current_key)
                    if best is None or event.timestamp >= best.timestamp:
                        newest[event.current_key] = event
                    event = event._replace(current_table=None, current_key=None,
                                           current_mutations=())
                batch.append(event)
                if len(batch) >= batch_size:
                    failed += yield from _replay(batch)
                    events += len(batch)
                    batch = []
                    _progress(spec, events, failed)
    failed += yield from _replay(batch)
    events += len(batch)
    _progress(spec, events, failed)
    failed += yield from _replay_current(spec, list(newest.values()), batch_size)
    span = (to_micros(start), to_micros(end))

    def in_scope(entity: Any) -> bool:
        return all(getattr(entity, name) == value for name, value in key_prefix.items())

    deleted = 0
    for alt in spec.alternates:
        doomed, bad = yield from _prune_alternate(alt, model, span, held, in_scope, batch_size)
        deleted += doomed
        failed += bad
    fixed = 0
    if spec.current_codec is not None:
        fixed, bad = yield from _fix_current(spec, model, span, held, in_scope, batch_size)
        failed += bad
    rolled = 0
    if spec.rollups:
        rolled, bad = yield from _fix_rollups(spec, model, span, refresh, in_scope, batch_size,
                                              features)
        failed += bad
    report = RepairReport(events, deleted, fixed, failed, rolled)
    JOB_LOG.info("repair of %s: done: %s", spec.name, report,
                 extra={"job": "repair", "model": spec.name})
    return report


def _progress(spec: ModelSpec, events: int, failed: int) -> None:
    JOB_LOG.info("repair of %s: %d events replayed to the companion tables (%d writes "
                 "failed)", spec.name, events, failed,
                 extra={"job": "repair", "model": spec.name, "events": events})


def _fix_rollups(spec: ModelSpec, model: type, span: tuple[int, int], refresh: RollupRefresh,
                 in_scope: Callable[[Any], bool], batch_size: int,
                 features: Features) -> JobSteps[tuple[int, int]]:
    """Recompute the rollup rows of the buckets of the range's events, and of the
    rollup rows of buckets overlapping the range (a bucket the main table no
    longer holds events of loses its row).

    Returns:
        The rollup rows written, and the writes that were not APPLIED.
    """
    for rollup in spec.rollups:
        row_spec = rollup.spec
        scan = Scan(ReadRequest(rollup.table, RowSet(), row_spec.events_filter(
            timestamp_start=rollup.start(span[0]), timestamp_end=span[1])))
        while rows := (yield Rows(scan, batch_size)):
            for row in rows:
                for held in row_spec.codec.decode(rollup.model, row):
                    if in_scope(held):
                        key = tuple((name, getattr(held, name)) for name in spec.key_fields)
                        refresh.add_slot(spec, rollup, model, key,
                                         row_spec.codec.time_of(held))
    bad: list[int] = []

    def record(write: TableWrite, outcomes: Any) -> None:
        bad.extend(1 for o in outcomes if o.status is not MutationStatus.APPLIED)

    # The slots in chunks: the reads of one chunk are merged per bucket.
    for chunk in refresh.split(batch_size):
        steps = refresh_steps(chunk, record)
        answer: Any = None
        while True:
            try:
                step = steps.send(answer)
            except StopIteration:
                break
            if isinstance(step, ReadStep):
                answer = []
                for request in step.requests:
                    answer.append((yield Read(request)))
            else:
                answer = yield Send(step.writes)
    return len(refresh), len(bad)


def _main_read(spec: ModelSpec, model: type, start: datetime, end: datetime,
               features: Features, key_prefix: dict[str, Any]) -> ReadPlan:
    """The plan of the read of the range's events from the main table.

    Never an alternate-key table, even where its key serves the prefix better:
    the repair must see what the main table holds, not a companion's copy.
    """
    QuerySet(model).range(start, end, allow_scan=True, **key_prefix)  # its argument checks
    state = QueryState(mode="range", start_us=to_micros(start), end_us=to_micros(end),
                       fields=tuple(key_prefix.items()), allow_scan=True)
    return compile_query(spec, state, features, main_table=True)


def _accepted(plan: ReadPlan, model: type, rows: list[Row]) -> Iterable[Any]:
    """The instances of ``rows`` that the plan's client-side checks accept."""
    codec = plan.codec
    assert codec is not None
    for row in rows:
        for entity in codec.decode(model, row, plan.only, plan.history):
            if plan.accept(entity):
                yield entity


def _replay(batch: list[EncodedEvent]) -> JobSteps[int]:
    """Write the batch's companions (the main rows are there); count the failures."""
    if not batch:
        return 0
    plan = WritePlan(batch)
    writes = plan.companion_writes(range(len(batch)))
    if writes:
        outcomes = yield Send(tuple(writes))
        for write, outcome in zip(writes, outcomes, strict=True):
            plan.record(write, outcome)
    return plan.failures()


def _replay_current(spec: ModelSpec, newest: list[EncodedEvent],
                    batch_size: int) -> JobSteps[int]:
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
        rows: list[Row] = yield Read(request)
        held = {row.key: max(c.timestamp for c in row.cells) for row in rows}
        cell_time = codec.layout.cell_timestamp
        due = [ev._replace(alternates=()) for ev in chunk
               if held.get(ev.current_key, -1) <= cell_time(ev.timestamp)]  # type: ignore[arg-type]
        failed += yield from _replay(due)
    return failed


def _main_identity(spec: ModelSpec, entity: Any) -> tuple[str, bytes, int]:
    row = spec.codec.encode(entity)
    return row.table, row.key, row.timestamp


def _prune_alternate(alt: ModelSpec, model: type, span: tuple[int, int],
                     held: set[tuple[str, bytes, int]], in_scope: Callable[[Any], bool],
                     batch_size: int) -> JobSteps[tuple[int, int]]:
    """Delete the alternate table's events in the span that the main table lacks.

    Returns:
        The events deleted, and the deletes that were not APPLIED.
    """
    scan = Scan(ReadRequest(alt.table, RowSet(), alt.events_filter(
        timestamp_start=span[0], timestamp_end=span[1])))
    doomed: list[RowMutation] = []
    while rows := (yield Rows(scan, batch_size)):
        for row in rows:
            entity: Any
            for entity in alt.codec.decode(model, row):
                if in_scope(entity) and (alt.table, row.key,
                                         alt.codec.time_of(entity)) not in held:
                    doomed.append(_erase(row.key, alt.codec.encode(entity).mutations))
    return len(doomed), (yield from _apply(alt.table, doomed))


def _erase(key: bytes, written: Iterable[Mutation]) -> RowMutation:
    """Mutations deleting exactly the cells an event wrote."""
    deletes = tuple(DeleteCells(m.family, m.qualifier, m.timestamp, m.timestamp + _MS)
                    for m in written if isinstance(m, SetCell))
    return RowMutation(key, deletes)


def _apply(table: str, rows: list[RowMutation]) -> JobSteps[int]:
    """Send ``rows``; the number whose outcome is not APPLIED."""
    if not rows:
        return 0
    (outcomes,) = yield Send((TableWrite(table, tuple(rows), (), grouped=True),))
    return sum(1 for o in outcomes if o.status is not MutationStatus.APPLIED)


def _fix_current(spec: ModelSpec, model: type, span: tuple[int, int],
                 held: set[tuple[str, bytes, int]], in_scope: Callable[[Any], bool],
                 batch_size: int) -> JobSteps[tuple[int, int]]:
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
    scan = Scan(ReadRequest(codec.table, RowSet(), row_filter))
    while rows := (yield Rows(scan, batch_size)):
        for row in rows:
            found: list[Any] = codec.decode(model, row)
            if not found or not in_scope(found[0]) or _held(spec, found[0], span, held):
                continue
            entity = found[0]
            # Delete the event the main table lacks; an older one may show next.
            while found and not _held(spec, found[0], span, held):
                newest_ts = max(c.timestamp for c in row.cells)  # the cells of the event read
                bad = yield from _apply(codec.table, [RowMutation(row.key, tuple(
                    DeleteCells(c.family, c.qualifier, newest_ts, newest_ts + _MS)
                    for c in row.cells if c.timestamp == newest_ts))])
                failed += bad
                again: list[Row] = [] if bad else (yield Read(ReadRequest(
                    codec.table, RowSet(keys=(row.key,)), row_filter)))
                if not again:
                    break
                row = again[0]
                try:
                    found = codec.decode(model, row)
                except errors.CellDecodingError:
                    # What is left is no event: older cells of which GC
                    # (max_versions) took some columns, kept under the deleted
                    # one. The entity's newest event is written anew below.
                    failed += yield from _apply(codec.table, [RowMutation(row.key, (DeleteRow(),))])
                    break
            failed += yield from _rewrite_newest(spec, model, entity)
            fixed += 1
    return fixed, failed


def _held(spec: ModelSpec, entity: Any, span: tuple[int, int],
          held: set[tuple[str, bytes, int]]) -> bool:
    """Whether a current value may stay: outside the span, or an event the main table holds."""
    identity = _main_identity(spec, entity)
    return not span[0] <= identity[2] < span[1] or identity in held


def _rewrite_newest(spec: ModelSpec, model: type, entity: Any) -> JobSteps[int]:
    """Save the entity's newest main-table event again: it becomes current.

    Returns:
        The writes that were not APPLIED.
    """
    assert spec.current_key is not None
    keys = {name: getattr(entity, name) for name in spec.current_key.fields}
    everything: QuerySet[Any] = QuerySet(model).range(
        EPOCH, datetime(9999, 12, 31, tzinfo=timezone.utc), allow_scan=True, **keys)
    newest = yield First(everything.newest_first())
    if newest is None:
        return 0
    result = yield Save((newest,))
    return 0 if result.ok else 1
