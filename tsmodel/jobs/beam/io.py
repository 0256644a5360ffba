"""The model source and the model sink: Python-native Beam transforms over tsmodel's planners.

* `ReadModel` plans a read with the read compiler (the plan
  ``explain()`` shows: salts, key prefixes, time window), cuts it at the
  table's sampled row keys (`tsmodel.jobs.splits.split_requests()`) and
  hands the parts to workers, which read disjoint key ranges side by side.
  The parts together read exactly the plan's rows: nothing twice, nothing
  beyond the plan. Events come in no particular order.
* `WriteModel` writes entities in batches through tsmodel's write
  planner (``Connection.save_all`` by default), retries the entities whose
  outcome is not WRITTEN, and sends those that still fail, or cannot be
  stored at all, to a dead-letter output: never dropped.

Every worker opens its own connection from a URL (``tsmodel.connect(url)``)
in its ``DoFn.setup`` and closes it in ``teardown``: the URL must name a
store every worker can reach (``bigtable://``, the emulator, or an embedded
``sqlite:///`` file on a shared disk), not ``memory://``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import apache_beam as beam
import attrs

from tsmodel import errors
from tsmodel.backends import with_app_profile
from tsmodel.declare.spec import spec_of
from tsmodel.encoding.timestamps import to_micros
from tsmodel.ground.base import Features, MutationOutcome, ReadRequest
from tsmodel.jobs.repair import replay_companions, replay_current
from tsmodel.jobs.snapshots import period_events, period_read, write_period
from tsmodel.jobs.splits import DEFAULT_MOST, cut_points, split_requests
from tsmodel.plan.events import encode_event
from tsmodel.plan.merge import check_guard
from tsmodel.plan.reads import QueryState, ReadPlan, compile_query
from tsmodel.plan.results import WriteStatus
from tsmodel.plan.writes import prepare_save
from tsmodel.run.connection import Connection, QuerySet, connect
from tsmodel.run.drive import drive

__all__ = ["ReadModel", "ReadEvents", "ReadParts", "ModelRead", "TableRead", "WriteModel",
           "DeadLetter", "Entities", "SnapshotRows", "Companions", "DEAD_LETTERS", "NAMESPACE",
           "worker_url", "WorkerDoFn"]

#: The tag of `WriteModel`'s dead-letter output.
DEAD_LETTERS = "dead_letters"
#: The namespace of tsmodel's Beam metrics (counters).
NAMESPACE = "tsmodel"


def worker_url(url: str | None, app_profile: str | None = None) -> str:
    """``url``, checked to be one every worker can open (with ``app_profile`` in it).

    Raises:
        ConfigurationError: no URL, or an in-memory store (each worker would
            open an empty store of its own); the URL names another app profile.
    """
    store = (url or "").partition("?")[0]  # options (an app profile...) change no store
    if not url or not store or store.endswith(":memory:") or store in (
            "memory://", "sqlite://", "embedded://"):
        raise errors.ConfigurationError(
            f"a Beam job needs a store every worker can open, not {url!r}: "
            "'bigtable://PROJECT/INSTANCE', 'bigtable-emulator://HOST:PORT/PROJECT/INSTANCE' "
            "or an embedded file 'sqlite:////absolute/path.db'")
    return url if app_profile is None else with_app_profile(url, app_profile)


class WorkerDoFn(beam.DoFn):
    """A DoFn with a connection of its own, opened from a URL in ``setup``."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.conn: Connection | None = None

    def setup(self) -> None:
        self.conn = connect(self.url, default=False)

    def teardown(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def db(self) -> Connection:
        """The worker's connection (a method, not a property: Beam looks at a
        DoFn's attributes when it builds the pipeline, before ``setup``)."""
        if self.conn is None:  # Beam calls setup first; a direct call may not
            self.setup()
        assert self.conn is not None
        return self.conn


# -- what to read ----------------------------------------------------------------------


@attrs.frozen
class ModelRead:
    """A model's range read, compiled on each worker by the read compiler.

    Attributes:
        model: the model class.
        start_us: inclusive start (µs).
        end_us: exclusive end (µs).
        key_prefix: key field values.
        main_table: read the main table even where an alternate-key table
            serves the prefix better.
        now_us: the instant retention is counted from, the same on every worker.
    """

    model: type
    start_us: int
    end_us: int
    key_prefix: tuple[tuple[str, Any], ...] = ()
    main_table: bool = False
    now_us: int = attrs.field(factory=lambda: time.time_ns() // 1_000)

    def plan(self, features: Features) -> ReadPlan:
        """The read plan (the one ``explain()`` shows for this query)."""
        state = QueryState(mode="range", start_us=self.start_us, end_us=self.end_us,
                           fields=self.key_prefix, allow_scan=True)
        return compile_query(spec_of(self.model), state, features, self.now_us,
                             main_table=self.main_table)

    def decode(self, plan: ReadPlan, rows: Iterable[Any]) -> Iterator[Any]:
        """The instances of ``rows`` that the plan's client-side checks accept."""
        codec = plan.codec
        assert codec is not None
        for row in rows:
            for entity in codec.decode(self.model, row, plan.only, plan.history):
                if plan.accept(entity):
                    yield entity


@attrs.frozen
class TableRead:
    """One read of a table as it is (no model plan): split like a model read."""

    request: ReadRequest

    def plan(self, features: Features) -> ReadPlan:
        return ReadPlan(model="", table=self.request.table, requests=(self.request,))


class _PlanParts(WorkerDoFn):
    """Plan the read, check its guards, sample the table and cut the plan into parts."""

    def __init__(self, url: str, read: ModelRead | TableRead, most: int) -> None:
        super().__init__(url)
        self.read, self.most = read, most

    def process(self, _: Any) -> Iterator[ReadRequest]:
        conn = self.db()
        plan = self.read.plan(conn.features)
        for guard in plan.guards:
            check_guard(plan, list(conn.read(guard)))
        if not plan.requests:
            return
        samples = conn.backend.sample_row_keys(plan.table)
        parts = split_requests(plan.requests, cut_points(samples, self.most))
        beam.metrics.Metrics.counter(NAMESPACE, "parts").inc(len(parts))
        yield from parts


class ReadParts(beam.PTransform):
    """The disjoint parts of a read, spread over workers: a PCollection of
    `ReadRequest`.

    The plan is made, and the table sampled, on a worker when the pipeline
    runs (an ``Impulse``), then the parts are reshuffled so that each worker
    takes some.

    Args:
        url: the store (see `worker_url()`).
        read: a `ModelRead` or a `TableRead`.
        max_parts: the most key ranges the table is cut into (every request
            of the plan is cut at the same points).
    """

    def __init__(self, url: str, read: ModelRead | TableRead,
                 max_parts: int = DEFAULT_MOST) -> None:
        super().__init__()
        self.url, self.read, self.max_parts = worker_url(url), read, max_parts

    def expand(self, pbegin: Any) -> Any:
        return (pbegin
                | "Start" >> beam.Impulse()
                | "Plan and cut" >> beam.ParDo(_PlanParts(self.url, self.read, self.max_parts))
                | "Spread" >> beam.Reshuffle())


class _ReadPart(WorkerDoFn):
    def __init__(self, url: str, read: ModelRead) -> None:
        super().__init__(url)
        self.read = read
        self.plan: ReadPlan | None = None

    def setup(self) -> None:
        super().setup()
        self.plan = self.read.plan(self.db().features)

    def process(self, part: ReadRequest) -> Iterator[Any]:
        if self.plan is None:
            self.setup()
        assert self.plan is not None
        rows = beam.metrics.Metrics.counter(NAMESPACE, "rows_read")
        events = beam.metrics.Metrics.counter(NAMESPACE, "events_read")

        def counted(stream: Iterable[Any]) -> Iterator[Any]:
            for row in stream:
                rows.inc()
                yield row

        for entity in self.read.decode(self.plan, counted(self.db().read(part))):
            events.inc()
            yield entity


class ReadEvents(beam.PTransform):
    """Read the events of a `ModelRead` (times in µs): `ReadModel` made by hand."""

    def __init__(self, url: str, read: ModelRead, max_parts: int = DEFAULT_MOST) -> None:
        super().__init__()
        self.url, self.read, self.max_parts = worker_url(url), read, max_parts

    def expand(self, pbegin: Any) -> Any:
        return (pbegin
                | "Parts" >> ReadParts(self.url, self.read, self.max_parts)
                | "Read" >> beam.ParDo(_ReadPart(self.url, self.read)))


class ReadModel(ReadEvents):
    """Read a model's events in [start, end) as a PCollection of instances.

    ``pipeline | ReadModel(url, Meter, start, end, meter=3)`` reads what
    ``Meter.range(start, end, allow_scan=True, meter=3)`` reads (the same
    plan), split at the table's sampled row keys among workers. The events
    come in no particular order.

    Args:
        url: the store, one every worker can open (`worker_url()`).
        model: the model class.
        start: inclusive, timezone-aware.
        end: exclusive, timezone-aware.
        main_table: read the main table even where an alternate-key table
            serves the key prefix better.
        max_parts: the most key ranges the read is cut into.
        **key_prefix: key field values.

    Raises:
        ConfigurationError: the URL is in memory.
        QueryError: the query is not valid for the model (at once, no I/O).
    """

    def __init__(self, url: str, model: type, start: datetime, end: datetime, *,
                 main_table: bool = False, max_parts: int = DEFAULT_MOST,
                 **key_prefix: Any) -> None:
        QuerySet(model).range(start, end, allow_scan=True, **key_prefix)  # its checks
        super().__init__(url, ModelRead(model, to_micros(start), to_micros(end),
                                        tuple(key_prefix.items()), main_table), max_parts)


# -- the sink ----------------------------------------------------------------------------


@attrs.frozen
class DeadLetter:
    """An entity the sink could not write.

    Attributes:
        entity: the instance.
        status: ``"invalid"`` (it cannot be stored: nothing was written),
            or the last `WriteStatus` value (``"failed"``,
            ``"unknown"``, ``"partial"``).
        error: the last error, as text.
        attempts: how many times it was sent.
    """

    entity: Any
    status: str
    error: str
    attempts: int


#: One failed entity of a batch: (its index, its status, its error).
Failure = tuple[int, str, str]


class Entities:
    """Write entities as ``Connection.save_all`` does: the main table, then the companions."""

    def write(self, conn: Connection, entities: Sequence[Any]) -> list[Failure]:
        result = conn.save_all(entities, raise_on_failure=False, progress=False)
        return [(i, r.status.value, repr(r.error)) for i, r in enumerate(result.results)
                if r.status is not WriteStatus.WRITTEN]

    def check(self, entity: Any) -> None:
        """Raise what saving ``entity`` alone would raise before writing."""
        prepare_save([entity], accept_expired=False)


class SnapshotRows:
    """Write main-table events to the snapshot table of a period, as the snapshot job does."""

    def __init__(self, model: type, period_us: int) -> None:
        self.model, self.period_us = model, period_us
        self.target = period_read(spec_of(model), period_us)[0]

    def write(self, conn: Connection, entities: Sequence[Any]) -> list[Failure]:
        result = drive(write_period(period_events(self.target, entities)), conn)
        return [(i, r.status.value, repr(r.error)) for i, r in enumerate(result.results)
                if r.status is not WriteStatus.WRITTEN]

    def check(self, entity: Any) -> None:
        self.target.codec.encode(entity)


class Companions:
    """Replay main-table events into companion tables, as the repair does.

    Args:
        model: the model class.
        alternates: the alternate-key tables to write (by table name), or
            ``None`` for every one; ``()`` for none.
        current: write the current-value table: give each row's newest event
            only (one per entity); an older one never replaces a newer one.
        restored: the Beam counter (tsmodel's namespace) of the current-value
            rows written where they were missing or held an older event
            (`tsmodel.jobs.repair.replay_current()`), if any.
    """

    def __init__(self, model: type, alternates: Sequence[str] | None = None,
                 current: bool = False, restored: str | None = None) -> None:
        self.model, self.current, self.restored = model, current, restored
        self.alternates = None if alternates is None else tuple(alternates)

    def write(self, conn: Connection, entities: Sequence[Any]) -> list[Failure]:
        spec = spec_of(self.model)
        events = [encode_event(spec, e) for e in entities]
        bad: dict[int, MutationOutcome]
        if self.current:
            _, bad, restored = drive(replay_current(spec, events, len(events) or 1), conn)
            if self.restored:
                beam.metrics.Metrics.counter(NAMESPACE, self.restored).inc(restored)
        else:
            keep = self.alternates
            events = [ev._replace(current_table=None, current_key=None, current_mutations=(),
                                  alternates=tuple(r for r in ev.alternates
                                                   if keep is None or r.table in keep))
                      for ev in events]
            _, bad = drive(replay_companions(events), conn)
        return [(i, out.status.value, repr(out.error)) for i, out in sorted(bad.items())]

    def check(self, entity: Any) -> None:
        encode_event(spec_of(self.model), entity)


Target = Entities | SnapshotRows | Companions


class _WriteBatch(WorkerDoFn):
    def __init__(self, url: str, target: Target, retries: int, backoff: float) -> None:
        super().__init__(url)
        self.target, self.retries, self.backoff = target, retries, backoff

    def process(self, batch: list[Any]) -> Iterator[Any]:
        written = beam.metrics.Metrics.counter(NAMESPACE, "events_written")
        dead = beam.metrics.Metrics.counter(NAMESPACE, "dead_letters")
        pending = list(batch)
        try:
            failures = self.target.write(self.db(), pending)
        except (errors.ValidationError, errors.RetentionError):
            # Nothing of the batch was written: set aside what cannot be stored.
            valid = []
            for entity in pending:
                try:
                    self.target.check(entity)
                except (errors.ValidationError, errors.RetentionError) as exc:
                    dead.inc()
                    yield beam.pvalue.TaggedOutput(
                        DEAD_LETTERS, DeadLetter(entity, "invalid", repr(exc), 0))
                else:
                    valid.append(entity)
            pending = valid
            failures = self.target.write(self.db(), pending) if pending else []
        attempts = 1
        while failures and attempts <= self.retries:
            written.inc(len(pending) - len(failures))
            time.sleep(self.backoff * 2 ** (attempts - 1))
            pending = [pending[i] for i, _, _ in failures]
            failures = self.target.write(self.db(), pending)
            attempts += 1
        written.inc(len(pending) - len(failures))
        for i, status, error in failures:
            dead.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS,
                                           DeadLetter(pending[i], status, error, attempts))
        yield len(batch)


class WriteModel(beam.PTransform):
    """Write a PCollection of entities through tsmodel's write planner.

    Entities go in batches of ``batch_size``; each cell carries the event's
    time, so a batch Beam runs again (a retried bundle, a rerun job) writes
    the same cells. Entities not WRITTEN are sent again, up to ``retries``
    times with exponential back-off; those that still fail, and those that
    cannot be stored at all (``"invalid"``), come out as `DeadLetter`.

    Returns:
        ``result.written`` (the size of each batch handled, a PCollection of
        ints) and ``result.dead_letters`` (`DeadLetter`):
        ``pcoll | WriteModel(url)`` gives a ``DoOutputsTuple``.

    Args:
        url: the store (`worker_url()`).
        to: what to write: `Entities` (the default: ``save_all``),
            `SnapshotRows` or `Companions`.
        batch_size: entities per batch.
        retries: further attempts for entities not WRITTEN.
        backoff: seconds before the first retry (doubled each time).
    """

    def __init__(self, url: str, *, to: Target | None = None, batch_size: int = 500,
                 retries: int = 3, backoff: float = 0.5) -> None:
        super().__init__()
        if batch_size < 1:
            raise errors.ConfigurationError(f"batch_size must be at least 1, got {batch_size}")
        self.url, self.target = worker_url(url), to or Entities()
        self.batch_size, self.retries, self.backoff = batch_size, retries, backoff

    def expand(self, pcoll: Any) -> Any:
        return (pcoll
                | "Batch" >> beam.BatchElements(min_batch_size=self.batch_size,
                                                max_batch_size=self.batch_size)
                | "Write" >> beam.ParDo(_WriteBatch(self.url, self.target, self.retries,
                                                    self.backoff)).with_outputs(
                    DEAD_LETTERS, main="written"))
