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

Memory stays bounded by a chunk, whatever the range holds, but for one
entry per current-value row (the entity's newest event of the range, which
only the whole range decides): whether the main table holds a companion's
event is asked of the main table itself, a chunk of companion rows at a time
(one read of the main rows they point to), not kept in a set of every event.
The phases (`replay_main()`, `prune_alternate()`,
`fix_current()`) each take the read they work through, so the Beam job
(`tsmodel.jobs.beam`) runs the same steps over parts of the tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import attrs

from tsmodel import errors
from tsmodel._observe import JOB_LOG
from tsmodel.declare.spec import ModelSpec, RollupSpec, spec_of
from tsmodel.declare.tables import table_specs
from tsmodel.encoding.timestamps import EPOCH, to_micros
from tsmodel.ground.base import (
    DeleteCells,
    DeleteRow,
    Features,
    MutationOutcome,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowSet,
)
from tsmodel.jobs.progress import Progress, advance, close
from tsmodel.jobs.steps import (
    First,
    JobSteps,
    Read,
    Rows,
    Save,
    Scan,
    Send,
    require_tables,
)
from tsmodel.plan.events import EncodedEvent, encode_event
from tsmodel.plan.merge import check_guard
from tsmodel.plan.reads import QueryState, ReadPlan, compile_query
from tsmodel.plan.results import ReadStep, TableWrite
from tsmodel.plan.rollups import RollupRefresh, refresh_steps
from tsmodel.plan.versions import erase, past_limit, timestamps_read, version_limit, written_cells
from tsmodel.plan.writes import WritePlan
from tsmodel.run.async_connection import AsyncConnection
from tsmodel.run.connection import Connection, QuerySet, get_default_connection
from tsmodel.run.drive import adrive, drive

__all__ = ["RepairReport", "RepairScope", "repair", "repair_async", "repair_steps",
           "replay_main", "replay_companions", "replay_current", "prune_alternate",
           "fix_current", "alternate_request", "current_request", "rollup_request",
           "apply_rows"]

#: (table, row key, event time) of an event in one table.
Identity = tuple[str, bytes, int]

_MS = 1_000


@attrs.frozen
class RepairReport:
    """What a repair did.

    Attributes:
        events: main-table events replayed into the companions.
        alternate_events_deleted: alternate-key events the main table lacks.
        current_rows_fixed: current-value rows rewritten because they did not
            hold the entity's newest event of the range: missing (restored),
            holding an older event, or holding an event the main table lacks.
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
           progress: bool | None = None, **key_prefix: Any) -> RepairReport:
    """Rewrite the companion tables of ``model`` from its main table over [start, end).

    Args:
        model: the model class.
        start: inclusive, timezone-aware.
        end: exclusive, timezone-aware.
        connection: the connection (default: the default connection).
        batch_size: events per write batch.
        progress: show progress bars on stderr, each with the rows of its
            table counted first (default: when stderr is a terminal).
        **key_prefix: limit the repair to the entities of a key prefix.

    Returns:
        A `RepairReport`; ``failed`` counts every companion write and
        delete whose outcome was not APPLIED.

    Raises:
        BackendError: a read failed (writes that fail are counted in ``failed``).
    """
    conn = connection or get_default_connection()
    return drive(repair_steps(model, start, end, features=conn.features,
                                batch_size=batch_size, key_prefix=key_prefix,
                                progress=progress), conn)


async def repair_async(model: type, start: datetime, end: datetime, *,
                       connection: AsyncConnection, batch_size: int = 1000,
                       progress: bool | None = None, **key_prefix: Any) -> RepairReport:
    """`repair()` on an `AsyncConnection`:
    ``await ts.repair_async(Model, start, end, connection=db)``.

    The same job, with the same arguments and report; the current-value and
    alternate-key writes of a batch go out concurrently.

    Raises:
        BackendError: a read failed (writes that fail are counted in ``failed``).
    """
    return await adrive(repair_steps(model, start, end, features=connection.features,
                                            batch_size=batch_size, key_prefix=key_prefix,
                                            progress=progress),
                               connection)


def repair_steps(model: type, start: datetime, end: datetime, *, features: Features,
                 batch_size: int = 1000, key_prefix: Mapping[str, Any] | None = None,
                 progress: bool | None = False) -> JobSteps[RepairReport]:
    """The repair as steps (`tsmodel.jobs.steps`), for any executor.

    Args:
        features: the capabilities of the backend the steps will run on.
        key_prefix: key field values, as ``**key_prefix`` of `repair()`
            (a mapping here, so that no key field name is taken).
        The others: as for `repair()`.
    """
    scope = RepairScope.of(model, start, end, features, key_prefix)
    spec, plan, bars = scope.spec, scope.plan, Progress(progress)
    yield from require_tables(spec.name, [t.name for t in table_specs(spec)])  # it reads each
    for guard in plan.guards:
        found: list[Row] = yield Read(guard)
        check_guard(plan, found)
    #: The newest event of the range per current-value row.
    newest: dict[bytes, EncodedEvent] = {}
    refresh = RollupRefresh(features)
    events = failed = 0
    bar = yield from bars.counted(f"{spec.table} (replay)", plan.requests)

    def batch_done(replayed: int, bad: int) -> None:
        _progress(spec, events + replayed, failed + bad)

    for request in plan.requests:
        replayed, bad = yield from replay_main(scope, request, batch_size, newest, bar,
                                               batch_done, refresh)
        events += replayed
        failed += bad
    close(bar)
    _progress(spec, events, failed)
    bad_current, _, restored = yield from replay_current(spec, list(newest.values()),
                                                         batch_size)
    failed += bad_current
    deleted = 0
    for alt in spec.alternates:
        request = alternate_request(scope, alt)
        bar = yield from bars.counted(f"{alt.table} (prune)", [request])
        doomed, bad = yield from prune_alternate(scope, alt, request, batch_size, bar)
        close(bar)
        deleted += doomed
        failed += bad
    fixed = restored
    if spec.current_codec is not None:
        request = current_request(scope)
        bar = yield from bars.counted(f"{spec.current_codec.table} (check)", [request])
        replaced, bad = yield from fix_current(scope, request, batch_size, bar)
        close(bar)
        fixed += replaced
        failed += bad
    rolled = 0
    if spec.rollups:
        rolled, bad = yield from _fix_rollups(spec, model, scope.span, refresh, scope.in_scope,
                                              batch_size, features)
        failed += bad
    report = RepairReport(events, deleted, fixed, failed, rolled)
    JOB_LOG.info("repair of %s: done: %s", spec.name, report,
                 extra={"job": "repair", "model": spec.name})
    return report


def _progress(spec: ModelSpec, events: int, failed: int) -> None:
    JOB_LOG.info("repair of %s: %d events replayed to the companion tables (%d writes "
                 "failed)", spec.name, events, failed,
                 extra={"job": "repair", "model": spec.name, "events": events})


@attrs.frozen(eq=False)
class RepairScope:
    """What a repair covers: a model, a time range and a key prefix, and the
    plan of its main-table read.

    Build it with `of()`; every phase of the repair takes it.
    """

    model: type
    spec: ModelSpec
    plan: ReadPlan
    span: tuple[int, int]
    key_prefix: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, model: type, start: datetime, end: datetime, features: Features,
           key_prefix: Mapping[str, Any] | None = None) -> RepairScope:
        """The scope of a repair of ``model`` over [start, end) (``features``: the backend's)."""
        prefix = dict(key_prefix or {})
        spec = spec_of(model)
        return cls(model, spec, _main_read(spec, model, start, end, features, prefix),
                   (to_micros(start), to_micros(end)), tuple(prefix.items()))

    def in_scope(self, entity: Any) -> bool:
        """Whether ``entity`` has the key prefix."""
        return all(getattr(entity, name) == value for name, value in self.key_prefix)

    def main_identity(self, entity: Any) -> Identity:
        """Where ``entity`` lies in the main table."""
        row = self.spec.codec.encode(entity)
        return row.table, row.key, row.timestamp

    def holds(self, entities: Iterable[Any]) -> JobSteps[set[Identity]]:
        """The identities, in the main table and each alternate-key table, of the
        range's events in the main rows where ``entities`` would lie.

        One read of those rows, with the filter of the repair's main read and
        its client-side checks: exactly what a set of every event of the range
        would hold, for these rows (a corrected promoted value moves an event's
        alternate-key row: the identity comes from the main table's event).
        """
        keys = sorted({self.spec.codec.encode(e).key for e in entities})
        if not keys or not self.plan.requests:
            return set()
        request = ReadRequest(self.plan.table, RowSet(keys=tuple(keys)),
                              self.plan.requests[0].filter)
        rows: list[Row] = yield Read(request)
        held: set[Identity] = set()
        for entity in _accepted(self.plan, self.model, rows):
            event = encode_event(self.spec, entity)
            held.update((row.table, row.key, event.timestamp)
                        for row in (event.main, *event.alternates))
        return held

    def held(self, entity: Any, held: set[Identity]) -> bool:
        """Whether a current value may stay: outside the span, or an event the main
        table holds (``held``: from `holds()`)."""
        identity = self.main_identity(entity)
        return not self.span[0] <= identity[2] < self.span[1] or identity in held


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


def replay_main(scope: RepairScope, request: ReadRequest, batch_size: int,
                newest: dict[bytes, EncodedEvent], bar: Any = None,
                batch_done: Callable[[int, int], None] | None = None,
                refresh: RollupRefresh | None = None) -> JobSteps[tuple[int, int]]:
    """Replay the events ``request`` reads (one of the plan's, or a part of one) into
    the alternate-key tables; keep each current-value row's newest in ``newest``.

    ``batch_done(events, failed)`` is told the running totals of this read
    after each full batch; ``refresh`` (if given) collects the rollup buckets
    of the events.

    Returns:
        The events replayed, and the companion writes that failed.
    """
    spec, events, failed = scope.spec, 0, 0
    batch: list[EncodedEvent] = []
    scan = Scan(request)
    while rows := (yield Rows(scan, batch_size)):
        for entity in _accepted(scope.plan, scope.model, rows):
            if refresh is not None and spec.rollups:
                refresh.add(spec, entity)
            event = encode_event(spec, entity)
            if event.current_key is not None:
                best = newest.get(event.current_key)
                if best is None or event.timestamp >= best.timestamp:
                    newest[event.current_key] = event
                event = event._replace(current_table=None, current_key=None,
                                       current_mutations=())
            batch.append(event)
            if len(batch) >= batch_size:
                failed += (yield from replay_companions(batch))[0]
                events += len(batch)
                batch = []
                if batch_done is not None:
                    batch_done(events, failed)
        advance(bar, len(rows))
    failed += (yield from replay_companions(batch))[0]
    return events + len(batch), failed


def replay_companions(
        batch: Sequence[EncodedEvent]) -> JobSteps[tuple[int, dict[int, MutationOutcome]]]:
    """Write the batch's companions (the main rows are there).

    Returns:
        The row writes that were not APPLIED, and for each event (by its
        index in ``batch``) one of them was for, its outcome.
    """
    if not batch:
        return 0, {}
    plan = WritePlan(batch)
    writes = plan.companion_writes(range(len(batch)))
    bad: dict[int, MutationOutcome] = {}
    if writes:
        outcomes = yield Send(tuple(writes))
        for write, outcome in zip(writes, outcomes, strict=True):
            plan.record(write, outcome)
            for members, out in zip(write.members, outcome, strict=True):
                if not out.ok:
                    bad.update(dict.fromkeys(
                        members if isinstance(members, tuple) else (members,), out))
    return plan.failures(), bad


def replay_current(spec: ModelSpec, newest: Sequence[EncodedEvent], batch_size: int,
                   ) -> JobSteps[tuple[int, dict[int, MutationOutcome], int]]:
    """Write each row's newest event of the range into the current-value table,
    unless the row holds a newer event (one after the range): an older event
    never replaces it, nor leaves cells beside it.

    Returns:
        As `replay_companions()`: the failures, and the indexes (in
        ``newest``) of the events they were for; then the rows restored:
        written with their event and APPLIED where the row was missing or
        held an older event.
    """
    codec = spec.current_codec
    if codec is None or not newest:
        return 0, {}, 0
    failed, bad, restored = 0, dict[int, MutationOutcome](), 0
    for i in range(0, len(newest), batch_size):
        chunk = newest[i:i + batch_size]
        request = spec.rows_read((ev.current_key for ev in chunk if ev.current_key is not None),
                                 table=codec.table, cells_per_column=1, strip_values=True)
        rows: list[Row] = yield Read(request)
        held = {row.key: max(c.timestamp for c in row.cells) for row in rows}
        cell_time = codec.layout.cell_timestamp
        due = [j for j, ev in enumerate(chunk)
               if held.get(ev.current_key, -1) <= cell_time(ev.timestamp)]  # type: ignore[arg-type]
        count, failures = yield from replay_companions(
            [chunk[j]._replace(alternates=()) for j in due])
        failed += count
        bad.update((i + due[j], out) for j, out in failures.items())
        for n, j in enumerate(due):
            ev = chunk[j]
            if n not in failures and held.get(ev.current_key, -1) < cell_time(  # type: ignore[arg-type]
                    ev.timestamp):
                restored += 1
    return failed, bad, restored


def alternate_request(scope: RepairScope, alt: ModelSpec) -> ReadRequest:
    """The read of an alternate-key table's events in the repair's span."""
    return ReadRequest(alt.table, RowSet(), alt.events_filter(
        timestamp_start=scope.span[0], timestamp_end=scope.span[1]))


def current_request(scope: RepairScope) -> ReadRequest:
    """The read of the current-value table (its newest cells)."""
    codec = scope.spec.current_codec
    assert codec is not None
    return ReadRequest(codec.table, RowSet(), ReadFilter(families=scope.spec.families,
                                                         cells_per_column=1))


def prune_alternate(scope: RepairScope, alt: ModelSpec, request: ReadRequest,
                    batch_size: int, bar: Any = None) -> JobSteps[tuple[int, int]]:
    """Delete the alternate table's events that ``request`` reads (`alternate_request()`,
    or a part of it) and the main table lacks, a chunk of rows at a time.

    Returns:
        The events deleted, and the deletes that were not APPLIED.
    """
    scan = Scan(request)
    deleted = failed = 0
    while rows := (yield Rows(scan, batch_size)):
        found: list[tuple[bytes, Any]] = []
        for row in rows:
            entity: Any
            for entity in alt.codec.decode(scope.model, row):
                if scope.in_scope(entity):
                    found.append((row.key, entity))
        held = yield from scope.holds(e for _, e in found)
        gone = [(key, written_cells(alt.codec.encode(e).mutations)) for key, e in found
                if (alt.table, key, alt.codec.time_of(e)) not in held]
        if gone and version_limit(alt) is not None:
            # Bucket rows: the events pushed past the version limit go too (gone for good).
            stamps: list[Row] = yield Read(timestamps_read(alt, (key for key, _ in gone)))
            held_cells = {row.key: row.cells for row in stamps}
            gone = [(key, [*cells, *past_limit(alt, held_cells.get(key, ()), cells)])
                    for key, cells in gone]
        doomed = [RowMutation(key, erase(cells)) for key, cells in gone]
        deleted += len(doomed)
        failed += yield from apply_rows(alt.table, doomed)
        advance(bar, len(rows))
    return deleted, failed


def apply_rows(table: str, rows: list[RowMutation]) -> JobSteps[int]:
    """Send ``rows``; the number whose outcome is not APPLIED."""
    if not rows:
        return 0
    (outcomes,) = yield Send((TableWrite(table, tuple(rows), (), grouped=True),))
    return sum(1 for o in outcomes if not o.ok)


def fix_current(scope: RepairScope, request: ReadRequest, batch_size: int,
                bar: Any = None) -> JobSteps[tuple[int, int]]:
    """Replace current-value events in the span that the main table lacks, in the
    rows ``request`` reads (`current_request()`, or a part of it).

    Every such event is deleted, newest first, until the row shows one the
    main table holds (or none): several unknown main writes that did not
    happen may each have left one. Then the entity's newest event is
    written again.

    Returns:
        The rows fixed, and the writes that were not APPLIED.
    """
    spec, model = scope.spec, scope.model
    codec = spec.current_codec
    assert codec is not None
    fixed = failed = 0
    scan = Scan(request)
    while rows := (yield Rows(scan, batch_size)):
        shown: list[tuple[Row, list[Any]]] = []
        for row in rows:
            found: list[Any] = codec.decode(model, row)
            if found and scope.in_scope(found[0]):
                shown.append((row, found))
        held = yield from scope.holds(found[0] for _, found in shown)
        for row, found in shown:
            if scope.held(found[0], held):
                continue
            fixed_row, bad = yield from _fix_row(scope, row, found)
            fixed += fixed_row
            failed += bad
        advance(bar, len(rows))
    return fixed, failed


def _fix_row(scope: RepairScope, row: Row, found: list[Any]) -> JobSteps[tuple[int, int]]:
    """Fix one current-value row whose newest event the main table lacks."""
    spec, model = scope.spec, scope.model
    codec = spec.current_codec
    assert codec is not None
    entity, failed = found[0], 0
    # Delete the event the main table lacks; an older one may show next.
    while found and not scope.held(found[0], (yield from scope.holds(found[:1]))):
        newest_ts = max(c.timestamp for c in row.cells)  # the cells of the event read
        bad = yield from apply_rows(codec.table, [RowMutation(row.key, tuple(
            DeleteCells(c.family, c.qualifier, newest_ts, newest_ts + _MS)
            for c in row.cells if c.timestamp == newest_ts))])
        failed += bad
        again: list[Row] = [] if bad else (yield Read(spec.rows_read(
            (row.key,), table=codec.table, cells_per_column=1)))
        if not again:
            break
        row = again[0]
        try:
            found = codec.decode(model, row)
        except errors.CellDecodingError:
            # What is left is no event: older cells of which GC
            # (max_versions) took some columns, kept under the deleted
            # one. The entity's newest event is written anew below.
            failed += yield from apply_rows(codec.table, [RowMutation(row.key, (DeleteRow(),))])
            break
    failed += yield from _rewrite_newest(spec, model, entity)
    return 1, failed


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


def rollup_request(rollup: RollupSpec, span: tuple[int, int]) -> ReadRequest:
    """The read of a rollup table's rows of buckets overlapping ``span`` (µs)."""
    return ReadRequest(rollup.table, RowSet(), rollup.spec.events_filter(
        timestamp_start=rollup.start(span[0]), timestamp_end=span[1]))


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
        scan = Scan(rollup_request(rollup, span))
        while rows := (yield Rows(scan, batch_size)):
            for row in rows:
                for held in row_spec.codec.decode(rollup.model, row):
                    if in_scope(held):
                        key = tuple((name, getattr(held, name)) for name in spec.key_fields)
                        refresh.add_slot(spec, rollup, model, key,
                                         row_spec.codec.time_of(held))
    bad: list[int] = []

    def record(write: TableWrite, outcomes: Any) -> None:
        bad.extend(1 for o in outcomes if not o.ok)

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
