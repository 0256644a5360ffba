"""The snapshot job: build one period's table (``SENSOR_20170726``) from the main table.

The job scans the main table for the period's events (a full scan with a
cell-timestamp filter, as the schema guide says: run it when the table is
quiet), writes them to the period's table in batches, and records its
progress after each batch in the ``TSMODEL_JOBS`` table. Running it again
resumes after the last recorded batch; since every cell carries its event
time, rewriting a batch gives the same cells, so the job is idempotent.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import attrs

from tsmodel import errors
from tsmodel.backends.base import (
    GcRule,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowRange,
    RowSet,
    SetCell,
    TableSpec,
)
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.declare.tables import table_specs
from tsmodel.encoding.timestamps import from_micros, to_micros
from tsmodel.plan.writes import EncodedEvent, WritePlan, WriteStatus
from tsmodel.run.connection import Connection, get_default_connection

__all__ = ["SnapshotReport", "SnapshotError", "build_snapshot", "JOBS_TABLE"]

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
        progress: show a progress bar on stderr (default: when it is a terminal).
        restart: ignore recorded progress and copy the whole period again.

    Returns:
        A :class:`SnapshotReport`.

    Raises:
        QueryError: the model declares no snapshot.
        SnapshotError: a batch was not written; running again resumes.
    """
    spec = spec_of(model)
    if spec.snapshot is None:
        raise errors.QueryError(f"{spec.name} declares no snapshot (snapshot=ts.snapshot(...))")
    conn = connection or get_default_connection()
    start, end = spec.snapshot.bounds(to_micros(period))
    target = spec.snapshot.spec_for(start)
    job = _Job(conn, f"snapshot#{target.table}".encode())
    job.prepare(target, restart)
    began = time.monotonic()
    if job.done:
        return _report(target, start, end, 0, 0, 0, None, True, began)
    resumed = job.last_key
    rows, events, batches = _copy(conn, spec, target, job, (start, end), model, batch_size,
                                  _progress_bar(progress, target.table))
    job.finish()
    return _report(target, start, end, rows, events, batches, resumed, False, began)


def _report(target: ModelSpec, start: int, end: int, rows: int, events: int, batches: int,
            resumed: bytes | None, complete: bool, began: float) -> SnapshotReport:
    period_end = None if end > _LAST_US else from_micros(end)
    return SnapshotReport(target.table, from_micros(start), period_end, rows, events,
                          batches, resumed, complete, time.monotonic() - began)


def _copy(conn: Connection, spec: ModelSpec, target: ModelSpec, job: _Job,
          span: tuple[int, int], model: type, batch_size: int,
          bar: Any) -> tuple[int, int, int]:
    rows = events = batches = 0
    pending: list[EncodedEvent] = []
    last_key = b""
    for row in _scan(conn, spec, span, job.last_key):
        rows += 1
        event: Any
        for event in spec.codec.decode(model, row):
            pending.append(EncodedEvent.of(event, target.codec.encode(event)))
        last_key = row.key
        if len(pending) >= batch_size:
            events += _write(conn, target.table, pending, job, last_key, bar)
            batches += 1
            pending = []
    if pending:
        events += _write(conn, target.table, pending, job, last_key, bar)
        batches += 1
    if bar is not None:
        bar.close()
    return rows, events, batches


def _scan(conn: Connection, spec: ModelSpec, span: tuple[int, int],
          after: bytes | None) -> Iterator[Row]:
    """The main table's rows with cells in the period, after a resume key."""
    rows = RowSet(ranges=(RowRange(after + b"\x00"),)) if after else RowSet()
    request = ReadRequest(spec.table, rows, spec.events_filter(
        timestamp_start=span[0], timestamp_end=span[1]))
    return conn.read(request)


def _write(conn: Connection, table: str, rows: list[EncodedEvent], job: _Job, last_key: bytes,
           bar: Any) -> int:
    plan = WritePlan(rows)
    conn.execute(plan, plan.main_writes(range(len(rows))))
    bad = [(row.key, r) for row, r in zip(rows, plan.result().results, strict=True)
           if r.status is not WriteStatus.WRITTEN]
    if bad:
        key, first = bad[0]
        raise SnapshotError(
            f"{len(bad)} of {len(rows)} rows of a batch of {table!r} were not written "
            f"(first: {key!r}: {first.status.value}: {first.error!r}); run the job "
            "again to resume after the last complete batch"
        )
    job.record(last_key)
    if bar is not None:
        bar.update(len(rows))
    return len(rows)


def _progress_bar(progress: bool | None, table: str) -> Any:
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return None
    from tqdm import tqdm  # type: ignore[import-untyped]

    return tqdm(desc=table, unit=" events", file=sys.stderr)


class _Job:
    """The progress record of one job in ``TSMODEL_JOBS``."""

    def __init__(self, conn: Connection, key: bytes) -> None:
        self.conn = conn
        self.key = key
        self.last_key: bytes | None = None
        self.done = False

    def prepare(self, target: ModelSpec, restart: bool) -> None:
        backend = self.conn.backend
        backend.create_table(TableSpec(JOBS_TABLE, ((_FAMILY, GcRule(max_versions=1)),)))
        main_families = table_specs(target)[0].families
        backend.create_table(TableSpec(target.table, main_families))
        if restart:
            self._put({b"last_key": b"", b"done": b"0"})
            return
        state = self._get()
        self.last_key = state.get(b"last_key") or None
        self.done = state.get(b"done") == b"1"

    def record(self, last_key: bytes) -> None:
        self._put({b"last_key": last_key, b"done": b"0"})
        self.last_key = last_key

    def finish(self) -> None:
        self._put({b"done": b"1"})
        self.done = True

    def _get(self) -> dict[bytes, bytes]:
        request = ReadRequest(JOBS_TABLE, RowSet(keys=(self.key,)),
                              ReadFilter(cells_per_column=1))
        out: dict[bytes, bytes] = {}
        for row in self.conn.read(request):
            for cell in row.cells:
                out.setdefault(cell.qualifier, cell.value)
        return out

    def _put(self, values: dict[bytes, bytes]) -> None:
        now = int(time.time() * 1000) * 1000
        cells = tuple(SetCell(_FAMILY, q, now, v) for q, v in values.items())
        (outcome,) = self.conn.backend.mutate_rows(JOBS_TABLE, [RowMutation(self.key, cells)])
        if not outcome.ok:
            raise SnapshotError(f"cannot record the job's progress: {outcome.error!r}")
