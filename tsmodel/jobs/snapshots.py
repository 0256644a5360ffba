"""The snapshot job: build one period's table (``SENSOR_20170726``) from the main table.

The job scans the main table for the period's events (a full scan with a
cell-timestamp filter, as the schema guide says: run it when the table is
quiet), writes them to the period's table in batches, and records its
progress after each batch in the ``TSMODEL_JOBS`` table. Running it again
resumes after the last recorded batch; since every cell carries its event
time, rewriting a batch gives the same cells, so the job is idempotent.

The job is one generator, `snapshot_steps()`, that yields the reads and
writes it needs (`tsmodel.jobs.steps`); `build_snapshot()` carries
them out with blocking calls, `build_snapshot_async()` on an event loop.
The progress bar is the one thing a step does not carry: it writes to
stderr from the job itself, the same under either executor; its total is
counted first, by a keys-only pass over the period's rows
(`tsmodel.jobs.progress`). The Beam job (`tsmodel.jobs.beam`)
writes the same rows with `period_events()` and `write_period()`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

import attrs

from tsmodel import errors
from tsmodel._observe import JOB_LOG
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.declare.tables import table_specs
from tsmodel.encoding.timestamps import from_micros, to_micros
from tsmodel.ground.base import (
    GcRule,
    MutationOutcome,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowRange,
    RowSet,
    SetCell,
    TableSpec,
)
from tsmodel.jobs.progress import Progress, advance, close
from tsmodel.jobs.steps import (
    JobSteps,
    Read,
    Rows,
    Scan,
    Send,
    require_tables,
)
from tsmodel.plan.calls import CreateTable, MutateRows
from tsmodel.plan.events import EncodedEvent
from tsmodel.plan.results import WriteResult, WriteStatus
from tsmodel.plan.writes import WritePlan
from tsmodel.run.async_connection import AsyncConnection
from tsmodel.run.connection import Connection, get_default_connection
from tsmodel.run.drive import adrive, drive

__all__ = ["SnapshotReport", "SnapshotError", "build_snapshot", "build_snapshot_async",
           "snapshot_steps", "JOBS_TABLE", "period_read", "period_events", "write_period"]

#: The table where jobs record their progress.
JOBS_TABLE = "TSMODEL_JOBS"
_FAMILY = "job"
#: The last microsecond a ``datetime`` can express.
_LAST_US = to_micros(datetime.max.replace(tzinfo=timezone.utc))


class SnapshotError(errors.BackendError):
    """A snapshot batch was not written; run the job again to resume."""


@attrs.frozen
class SnapshotReport:
    """What one run of the snapshot job did.

    Attributes:
        table: the snapshot table.
        period_start: the period's first instant (UTC).
        period_end: the instant after the period; ``None`` for the last
            period of year 9999, whose end ``datetime`` cannot express.
        rows_read: main-table rows read in this run.
        events_written: events written to the snapshot in this run.
        batches: batches written in this run.
        resumed_after: the main-table row key this run resumed after, if any.
        already_complete: the snapshot was complete before this run.
        seconds: the run's wall time.
    """

    table: str
    period_start: datetime
    period_end: datetime | None
    rows_read: int
    events_written: int
    batches: int
    resumed_after: bytes | None
    already_complete: bool
    seconds: float

    def __str__(self) -> str:
        if self.already_complete:
            return f"{self.table}: already complete (use restart=True to rebuild)"
        resumed = f", resumed after {self.resumed_after!r}" if self.resumed_after else ""
        return (f"{self.table}: {self.events_written} events from {self.rows_read} rows in "
                f"{self.batches} batches, {self.seconds:.2f} s{resumed}")


def build_snapshot(
    model: type, period: datetime, *, connection: Connection | None = None,
    batch_size: int = 1000, progress: bool | None = None, restart: bool = False,
) -> SnapshotReport:
    """Build (or finish building) the snapshot table of the period holding ``period``.

    Args:
        model: a model declared with ``snapshot=ts.snapshot(...)``.
        period: any instant of the period (timezone-aware).
        connection: the connection (default: the default connection).
        batch_size: events per write batch; progress is recorded after each.
        progress: show a progress bar on stderr, its total counted first by a
            keys-only pass over the period's rows (default: when stderr is a
            terminal).
        restart: ignore recorded progress and copy the whole period again.

    Returns:
        A `SnapshotReport`.

    Raises:
        QueryError: the model declares no snapshot.
        SnapshotError: a batch was not written; running again resumes.
    """
    steps = snapshot_steps(model, period, batch_size=batch_size, progress=progress,
                           restart=restart)
    return drive(steps, connection or get_default_connection())


async def build_snapshot_async(
    model: type, period: datetime, *, connection: AsyncConnection, batch_size: int = 1000,
    progress: bool | None = None, restart: bool = False,
) -> SnapshotReport:
    """`build_snapshot()` on an `AsyncConnection`:
    ``await ts.build_snapshot_async(Model, period, connection=db)``.

    The same job, with the same arguments, report, progress record and errors.

    Raises:
        QueryError: the model declares no snapshot.
        SnapshotError: a batch was not written; running again resumes.
    """
    steps = snapshot_steps(model, period, batch_size=batch_size, progress=progress,
                           restart=restart)
    return await adrive(steps, connection)


def snapshot_steps(model: type, period: datetime, *, batch_size: int = 1000,
                   progress: bool | None = None,
                   restart: bool = False) -> JobSteps[SnapshotReport]:
    """The snapshot job as steps (`tsmodel.jobs.steps`), for any executor.

    Arguments as for `build_snapshot()`.

    Raises:
        QueryError: at once, when the model declares no snapshot.
    """
    spec = spec_of(model)
    if spec.snapshot is None:
        raise errors.QueryError(f"{spec.name} declares no snapshot (snapshot=ts.snapshot(...))")
    return _build(spec, model, to_micros(period), batch_size, progress, restart)


def _build(spec: ModelSpec, model: type, period_us: int, batch_size: int,
           progress: bool | None, restart: bool) -> JobSteps[SnapshotReport]:
    assert spec.snapshot is not None
    start, end = spec.snapshot.bounds(period_us)
    target = spec.snapshot.spec_for(start)
    yield from require_tables(spec.name, [spec.table])  # before creating the period's table
    job = _Job(f"snapshot#{target.table}".encode())
    yield from job.prepare(target, restart)
    began = time.monotonic()
    if job.done:
        return _report(target, start, end, 0, 0, 0, None, True, began)
    resumed = job.last_key
    bar = yield from Progress(progress).counted(target.table,
                                                [_scan(spec, (start, end), job.last_key)])
    rows, events, batches = yield from _copy(spec, target, job, (start, end), model,
                                             batch_size, bar)
    yield from job.finish()
    return _report(target, start, end, rows, events, batches, resumed, False, began)


def _report(target: ModelSpec, start: int, end: int, rows: int, events: int, batches: int,
            resumed: bytes | None, complete: bool, began: float) -> SnapshotReport:
    period_end = None if end > _LAST_US else from_micros(end)
    return SnapshotReport(target.table, from_micros(start), period_end, rows, events,
                          batches, resumed, complete, time.monotonic() - began)


def _copy(spec: ModelSpec, target: ModelSpec, job: _Job, span: tuple[int, int], model: type,
          batch_size: int, bar: Any) -> JobSteps[tuple[int, int, int]]:
    rows = events = batches = 0
    pending: list[EncodedEvent] = []
    last_key = b""
    scan = Scan(_scan(spec, span, job.last_key))
    while chunk := (yield Rows(scan, batch_size)):
        for row in chunk:
            rows += 1
            decoded = spec.codec.decode(model, row)
            if spec.layout.version_cut(spec) is not None:  # read to the bucket's end
                decoded = [e for e in decoded if spec.codec.time_of(e) < span[1]]
            pending.extend(period_events(target, decoded))
            last_key = row.key
            if len(pending) >= batch_size:
                events += yield from _write(target.table, pending, job, last_key)
                batches += 1
                pending = []
        advance(bar, len(chunk))
    if pending:
        events += yield from _write(target.table, pending, job, last_key)
        batches += 1
    close(bar)
    return rows, events, batches


def period_read(spec: ModelSpec, period_us: int) -> tuple[ModelSpec, ReadRequest]:
    """The snapshot table of the period holding ``period_us``, and the read of the main
    table's rows with cells in the period.

    Raises:
        QueryError: the model declares no snapshot.
    """
    if spec.snapshot is None:
        raise errors.QueryError(f"{spec.name} declares no snapshot (snapshot=ts.snapshot(...))")
    span = spec.snapshot.bounds(period_us)
    return spec.snapshot.spec_for(span[0]), _scan(spec, span, None)


def period_events(target: ModelSpec, entities: Iterable[Any]) -> list[EncodedEvent]:
    """Main-table events encoded for the snapshot table ``target``."""
    return [EncodedEvent.of(event, target.codec.encode(event)) for event in entities]


def write_period(events: list[EncodedEvent]) -> JobSteps[WriteResult]:
    """Write encoded events (`period_events()`) to the snapshot table; one
    `EntityResult` per event."""
    plan = WritePlan(events)
    writes = plan.main_writes(range(len(events)))
    outcomes = yield Send(tuple(writes))
    for write, outcome in zip(writes, outcomes, strict=True):
        plan.record(write, outcome)
    return plan.result()


def _scan(spec: ModelSpec, span: tuple[int, int], after: bytes | None) -> ReadRequest:
    """The read of the main table's rows with cells in the period, after a resume key."""
    rows = RowSet(ranges=(RowRange(after + b"\x00"),)) if after else RowSet()
    # A layout that leaves out events cut in part reads the rows' kept versions
    # up to their end (`Layout.version_cut`); `_copy()` checks the period's end.
    end = None if spec.layout.version_cut(spec) is not None else span[1]
    return ReadRequest(spec.table, rows, spec.events_filter(
        timestamp_start=span[0], timestamp_end=end))


def _write(table: str, rows: list[EncodedEvent], job: _Job, last_key: bytes) -> JobSteps[int]:
    result = yield from write_period(rows)
    bad = [(row.key, r) for row, r in zip(rows, result.results, strict=True)
           if r.status is not WriteStatus.WRITTEN]
    if bad:
        key, first = bad[0]
        raise SnapshotError(
            f"{len(bad)} of {len(rows)} rows of a batch of {table!r} were not written "
            f"(first: {key!r}: {first.status.value}: {first.error!r}); run the job "
            "again to resume after the last complete batch"
        )
    yield from job.record(last_key)
    JOB_LOG.info("snapshot of %r: %d events written; progress recorded at row %r",
                 table, len(rows), last_key,
                 extra={"job": "snapshot", "table": table, "events": len(rows)})
    return len(rows)


class _Job:
    """The progress record of one job in ``TSMODEL_JOBS``; its methods are steps."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.last_key: bytes | None = None
        self.done = False

    def prepare(self, target: ModelSpec, restart: bool) -> JobSteps[None]:
        yield CreateTable(TableSpec(JOBS_TABLE, ((_FAMILY, GcRule(max_versions=1)),)))
        main_families = table_specs(target)[0].families
        yield CreateTable(TableSpec(target.table, main_families))
        if restart:
            yield from self._put({b"last_key": b"", b"done": b"0"})
            return
        state = yield from self._get()
        self.last_key = state.get(b"last_key") or None
        self.done = state.get(b"done") == b"1"

    def record(self, last_key: bytes) -> JobSteps[None]:
        yield from self._put({b"last_key": last_key, b"done": b"0"})
        self.last_key = last_key

    def finish(self) -> JobSteps[None]:
        yield from self._put({b"done": b"1"})
        self.done = True

    def _get(self) -> JobSteps[dict[bytes, bytes]]:
        request = ReadRequest(JOBS_TABLE, RowSet(keys=(self.key,)),
                              ReadFilter(cells_per_column=1))
        out: dict[bytes, bytes] = {}
        rows: list[Row] = yield Read(request)
        for row in rows:
            for cell in row.cells:
                out.setdefault(cell.qualifier, cell.value)
        return out

    def _put(self, values: dict[bytes, bytes]) -> JobSteps[None]:
        now = int(time.time() * 1000) * 1000
        cells = tuple(SetCell(_FAMILY, q, now, v) for q, v in values.items())
        outcomes: list[MutationOutcome] = yield MutateRows(
            JOBS_TABLE, [RowMutation(self.key, cells)])
        (outcome,) = outcomes
        if not outcome.ok:
            raise SnapshotError(f"cannot record the job's progress: {outcome.error!r}")
