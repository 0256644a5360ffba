"""Jobs on Apache Beam: snapshots, repair, backfills, key-layout migrations, rollups.

Each job is a function that opens a connection to create the tables it
writes, builds a pipeline of `tsmodel.jobs.beam.io` transforms, runs it
(the DirectRunner by default; any runner through the pipeline options) and
reports Beam's counters. They are idempotent: every cell carries its event
time, so a rerun, a retried bundle or a job resumed after an interruption
writes the same cells and ends with the same tables as one clean run.

`rebuild_rollups()` recomputes rollup rows from the main table (as
`tsmodel.repair()` does), grouping each bucket's events per entity.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeAlias

import apache_beam as beam
import attrs
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.declare.tables import table_specs
from tsmodel.encoding.timestamps import from_micros, to_micros
from tsmodel.ground.base import DeleteRow, Features, TableSpec
from tsmodel.jobs.beam.io import (
    DEAD_LETTERS,
    NAMESPACE,
    Companions,
    DeadLetter,
    Entities,
    ModelRead,
    ReadEvents,
    ReadParts,
    SnapshotRows,
    TableRead,
    WorkerDoFn,
    WriteModel,
    worker_url,
)
from tsmodel.jobs.repair import (
    RepairScope,
    alternate_request,
    apply_rows,
    current_request,
    fix_current,
    prune_alternate,
    replay_main,
    rollup_request,
)
from tsmodel.jobs.snapshots import period_read
from tsmodel.jobs.splits import DEFAULT_MOST
from tsmodel.jobs.steps import require_tables
from tsmodel.plan.events import EncodedEvent, encode_event
from tsmodel.plan.reads import time_span
from tsmodel.plan.rollups import expired_slot, rollup_row
from tsmodel.run.connection import QuerySet, connect
from tsmodel.run.drive import drive

__all__ = ["BeamReport", "Verification", "SameFields", "snapshot", "repair", "backfill", "migrate",
           "rebuild_rollups", "pipeline_options"]

log = logging.getLogger("tsmodel.jobs.beam")

#: Pipeline options: a ``PipelineOptions``, a list of its arguments, or ``None``.
Options: TypeAlias = Any


@attrs.frozen
class Verification:
    """The verification pass of a migration.

    Attributes:
        source_events: events read from the source.
        target_events: events read from the target, over the same span.
        checked: source events looked up in the target.
        mismatches: looked-up events the target lacks or holds otherwise.
    """

    source_events: int
    target_events: int
    checked: int
    mismatches: int

    @property
    def ok(self) -> bool:
        return self.source_events == self.target_events and self.mismatches == 0


@attrs.frozen
class BeamReport:
    """What a Beam job did: Beam's counters of tsmodel's namespace.

    Attributes:
        job: the job's name.
        counters: ``events_read``, ``events_written``, ``dead_letters`` and
            the job's own (repair: ``events_replayed``,
            ``alternate_events_deleted``, ``current_rows_fixed``,
            ``failed``; rollups: ``rollup_rows_written``,
            ``rollup_rows_deleted``, ``failed``), each present (0 when
            nothing happened); other counters Beam reported (``parts``,
            ``rows_read``) when there were any.
        seconds: wall time, pipelines included.
        verification: a migration's verification pass, if run.
    """

    job: str
    counters: Mapping[str, int]
    seconds: float
    verification: Verification | None = None

    @property
    def dead_letters(self) -> int:
        return self.counters.get("dead_letters", 0)

    @property
    def ok(self) -> bool:
        """No dead letter, no failed write, and a verification that passed (if any)."""
        return (self.dead_letters == 0 and self.counters.get("failed", 0) == 0
                and (self.verification is None or self.verification.ok))

    def __str__(self) -> str:
        shown = ", ".join(f"{name} {count}" for name, count in sorted(self.counters.items()))
        out = f"{self.job}: {shown or 'nothing done'} ({self.seconds:.1f} s)"
        if self.verification is not None:
            v = self.verification
            out += (f"; verified: {v.source_events} source events, {v.target_events} target "
                    f"events, {v.checked} spot-checked, {v.mismatches} mismatches")
        return out


def pipeline_options(options: Options = None) -> PipelineOptions:
    """Pipeline options from a list of arguments (``["--runner=DataflowRunner", ...]``);
    the DirectRunner unless a runner is given."""
    if isinstance(options, PipelineOptions):
        return options
    args: list[str] = list(options or ())
    if not any(a == "--runner" or a.startswith("--runner=") for a in args):
        args.append("--runner=DirectRunner")
    return PipelineOptions(args)


def _run(job: str, build: Callable[[beam.Pipeline], None], options: Options,
         counters: dict[str, int]) -> None:
    """Build a pipeline, run it to its end, and add its tsmodel counters to ``counters``."""
    pipeline = beam.Pipeline(options=pipeline_options(options))
    build(pipeline)
    result = pipeline.run()
    result.wait_until_finish()
    found = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    for counter in found["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + value
    log.info("%s: pipeline done: %s", job, counters)


#: The counters every report holds, 0 when nothing happened.
_COUNTERS = ("events_read", "events_written", "dead_letters")


def _report(job: str, counters: dict[str, int], began: float, own: Sequence[str] = (),
            verification: Verification | None = None) -> BeamReport:
    """The report of a job: its counters, with every documented one (``own``: the
    job's) present."""
    for name in (*_COUNTERS, *own):
        counters.setdefault(name, 0)
    return BeamReport(job, counters, time.monotonic() - began, verification)


def _dead_letters(written: Any, path: str | None, label: str = "Dead letters") -> None:
    """Keep the dead letters of a sink: as JSON lines under ``path``, else in the log."""
    dead = written[DEAD_LETTERS]
    if path:
        _ = (dead | f"{label}: as JSON" >> beam.Map(_dead_json)
             | f"{label}: keep" >> beam.io.WriteToText(path, file_name_suffix=".jsonl"))
    else:
        _ = dead | f"{label}: log" >> beam.Map(_log_dead)


def _dead_json(letter: DeadLetter) -> str:
    entity = letter.entity
    fields = ({a.name: _jsonable(getattr(entity, a.name)) for a in attrs.fields(type(entity))}
              if attrs.has(type(entity)) else repr(entity))
    return json.dumps({"model": type(entity).__name__, "entity": fields, "status": letter.status,
                       "error": letter.error, "attempts": letter.attempts})


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def _log_dead(letter: DeadLetter) -> None:
    log.error("dead letter: %s: %s (after %d attempts): %r", letter.status, letter.error,
              letter.attempts, letter.entity)


def _prepare(url: str, model: str, reads: Sequence[str],
             writes: Sequence[TableSpec] = ()) -> None:
    """Before a pipeline: check that the tables a job reads exist, then create (or
    bring in step) those it writes, and no other."""
    with connect(url, default=False) as conn:
        drive(require_tables(model, reads, where=url), conn)
        for table in writes:
            conn.backend.create_table(table)


def _tables(spec: ModelSpec, names: Iterable[str]) -> list[TableSpec]:
    """The model's tables of these names, with their families and GC rules."""
    wanted = set(names)
    return [t for t in table_specs(spec) if t.name in wanted]


# -- snapshot ----------------------------------------------------------------------------


def snapshot(url: str, model: type, period: datetime, *, options: Options = None,
             batch_size: int = 500, max_parts: int = DEFAULT_MOST,
             dead_letters: str | None = None, app_profile: str | None = None) -> BeamReport:
    """Build the snapshot table of the period holding ``period`` on Beam.

    The same table, cell for cell, as `tsmodel.build_snapshot()`: the
    period's events are read with the read compiler's plan of the main
    table (split among workers at sampled row keys) and written to the
    snapshot table through the same write plan. No progress record: a
    rerun writes the same cells again.

    Args:
        url: the store (every worker opens it).
        model: a model declared with ``snapshot=ts.snapshot(...)``.
        period: any instant of the period (timezone-aware).
        options: pipeline options (or their arguments); the DirectRunner by default.
        batch_size: events per write batch.
        max_parts: the most key ranges the read is cut into.
        dead_letters: a path prefix for the entities that could not be
            written (JSON lines); ``None`` logs them.
        app_profile: the app profile of the workers' requests (added to the
            URL as ``?app_profile=``): give batch jobs a low-priority one
            (docs/jobs.md).

    Raises:
        QueryError: the model declares no snapshot.
        ConfigurationError: the URL is in memory, or names another app profile.
        TableNotFoundError: the main table does not exist (nothing is created).
    """
    began, url = time.monotonic(), worker_url(url, app_profile)
    spec, period_us = spec_of(model), to_micros(period)
    target, _ = period_read(spec, period_us)
    assert spec.snapshot is not None
    start, end = spec.snapshot.bounds(period_us)
    _prepare(url, spec.name, [spec.table],
             [TableSpec(target.table, table_specs(target)[0].families)])
    counters: dict[str, int] = {}

    def build(p: beam.Pipeline) -> None:
        events = p | "Read period" >> ReadEvents(
            url, ModelRead(model, start, end, main_table=True), max_parts)
        written = events | "Write snapshot" >> WriteModel(
            url, to=SnapshotRows(model, period_us), batch_size=batch_size)
        _dead_letters(written, dead_letters)

    _run(f"snapshot {target.table}", build, options, counters)
    return _report(f"snapshot {target.table}", counters, began)


# -- backfill ----------------------------------------------------------------------------


class _CurrentKey:
    """An entity keyed by its current-value row."""

    def __init__(self, model: type) -> None:
        self.model = model

    def __call__(self, entity: Any) -> tuple[bytes, Any]:
        event = encode_event(spec_of(self.model), entity)
        assert event.current_key is not None
        return event.current_key, entity


class _Newest:
    """The newest of an entity's events (the last of the newest, as the repair keeps)."""

    def __init__(self, model: type) -> None:
        self.model = model

    def __call__(self, entities: Any) -> Any:
        time_of = spec_of(self.model).codec.time_of
        best = None
        for entity in entities:
            if best is None or time_of(entity) >= time_of(best):
                best = entity
        return best


def _span(spec: ModelSpec, start: datetime | None, end: datetime | None) -> tuple[int, int]:
    first, last = time_span(spec)
    return (first if start is None else to_micros(start),
            last if end is None else to_micros(end))


def _newest_into_current(url: str, model: type, events: Any, batch_size: int,
                         dead_letters: str | None, label: str) -> None:
    """Write each entity's newest event of ``events`` to the current-value table: a
    shuffle by current-value row key, then the repair's replay of the current value."""
    newest = (events
              | f"{label}: key by current row" >> beam.Map(_CurrentKey(model))
              | f"{label}: newest per row" >> beam.CombinePerKey(_Newest(model))
              | f"{label}: newest" >> beam.Values())
    written = newest | f"{label}: write" >> WriteModel(
        url, to=Companions(model, alternates=(), current=True), batch_size=batch_size)
    _dead_letters(written, dead_letters and dead_letters + "-current", f"{label}: dead letters")


def backfill(url: str, model: type, *, tables: Sequence[str] | None = None,
             start: datetime | None = None, end: datetime | None = None,
             options: Options = None, batch_size: int = 500, max_parts: int = DEFAULT_MOST,
             dead_letters: str | None = None, app_profile: str | None = None) -> BeamReport:
    """Fill newly declared companion tables from the main table on Beam.

    Creates the companion tables it fills (and no other), then writes every
    main-table event of [start, end) (all time by default) into the
    alternate-key tables, and each entity's newest into the current-value
    table (unless it holds a newer one): what
    `tsmodel.repair()` replays. Nothing is deleted.

    Args:
        tables: the companion tables to fill, by name (default: all).
        The others: as for `snapshot()`.

    Raises:
        ConfigurationError: a table is not a companion of the model.
        TableNotFoundError: the main table does not exist (nothing is created).
    """
    began, url, spec = time.monotonic(), worker_url(url, app_profile), spec_of(model)
    known = [alt.table for alt in spec.alternates] + (
        [spec.current_table] if spec.current_table else [])
    chosen = list(known if tables is None else tables)
    unknown = [t for t in chosen if t not in known]
    if unknown or not chosen:
        raise errors.ConfigurationError(
            f"{spec.name}: {', '.join(map(repr, unknown)) or 'no table'} is not a companion "
            f"table to backfill (its companions: {', '.join(known) or 'none'})")
    _prepare(url, spec.name, [spec.table], _tables(spec, chosen))
    span = _span(spec, start, end)
    counters: dict[str, int] = {}
    alternates = [t for t in chosen if t != spec.current_table]

    def build(p: beam.Pipeline) -> None:
        events = p | "Read main" >> ReadEvents(
            url, ModelRead(model, *span, main_table=True), max_parts)
        if alternates:
            written = events | "Alternates" >> WriteModel(
                url, to=Companions(model, alternates=alternates), batch_size=batch_size)
            _dead_letters(written, dead_letters)
        if spec.current_table in chosen:
            _newest_into_current(url, model, events, batch_size, dead_letters, "Current")

    _run(f"backfill {spec.name}", build, options, counters)
    return _report(f"backfill {', '.join(chosen)}", counters, began)


# -- repair ------------------------------------------------------------------------------


class _RepairDoFn(WorkerDoFn):
    """A DoFn running one phase of `tsmodel.jobs.repair` over the parts it gets."""

    def __init__(self, url: str, model: type, span: tuple[int, int],
                 key_prefix: tuple[tuple[str, Any], ...], batch_size: int) -> None:
        super().__init__(url)
        self.model, self.span, self.key_prefix = model, span, key_prefix
        self.batch_size = batch_size
        self.scope: RepairScope | None = None

    def setup(self) -> None:
        super().setup()
        self.scope = RepairScope.of(self.model, from_micros(self.span[0]),
                                    from_micros(self.span[1]), self.db().features,
                                    dict(self.key_prefix))

    def count(self, name: str, n: int) -> None:
        beam.metrics.Metrics.counter(NAMESPACE, name).inc(n)


class _ReplayPart(_RepairDoFn):
    """Replay a part of the main read into the alternate-key tables; emit each
    current-value row's newest event of the part."""

    def process(self, part: Any) -> Iterator[tuple[bytes, Any]]:
        assert self.scope is not None
        newest: dict[bytes, EncodedEvent] = {}
        events, failed = drive(replay_main(self.scope, part, self.batch_size, newest),
                                 self.db())
        self.count("events_read", events)  # each event the part reads is replayed
        self.count("events_replayed", events)
        self.count("failed", failed)
        for key, event in newest.items():
            yield key, event.entity


class _PrunePart(_RepairDoFn):
    def __init__(self, *args: Any, table: str) -> None:
        super().__init__(*args)
        self.table = table

    def process(self, part: Any) -> Iterator[None]:
        assert self.scope is not None
        alt = next(a for a in self.scope.spec.alternates if a.table == self.table)
        deleted, failed = drive(prune_alternate(self.scope, alt, part, self.batch_size),
                                  self.db())
        self.count("alternate_events_deleted", deleted)
        self.count("failed", failed)
        return iter(())


class _FixPart(_RepairDoFn):
    def process(self, part: Any) -> Iterator[None]:
        assert self.scope is not None
        fixed, failed = drive(fix_current(self.scope, part, self.batch_size), self.db())
        self.count("current_rows_fixed", fixed)
        self.count("failed", failed)
        return iter(())


def repair(url: str, model: type, start: datetime, end: datetime, *,
           options: Options = None, batch_size: int = 500, max_parts: int = DEFAULT_MOST,
           dead_letters: str | None = None, app_profile: str | None = None,
           **key_prefix: Any) -> BeamReport:
    """`tsmodel.repair()` on Beam: the same phases, over parts of the tables.

    Two pipelines, one after the other. The first replays the main table's
    events of [start, end) into the alternate-key tables, part by part, and
    shuffles each part's newest event per current-value row by that row's
    key, so that each row gets the range's newest (in bounded memory,
    however many entities). The second works through parts of each
    alternate-key table, deleting the events the main table lacks, and of
    the current-value table, replacing the values the main table lacks:
    each asks the main table about a chunk of rows at a time.

    Args:
        **key_prefix: limit the repair to the entities of a key prefix.
        The others: as for `snapshot()`.

    Returns:
        A `BeamReport`; its ``failed`` counter counts the writes and
        deletes not applied (run the repair again), as ``RepairReport.failed``.

    Raises:
        TableNotFoundError: the main table or a companion table does not exist.
    """
    began, url, spec = time.monotonic(), worker_url(url, app_profile), spec_of(model)
    QuerySet(model).range(start, end, allow_scan=True, **key_prefix)  # its argument checks
    span, prefix = (to_micros(start), to_micros(end)), tuple(key_prefix.items())
    scope = RepairScope.of(model, start, end, Features(), key_prefix)
    _prepare(url, spec.name, [spec.table, *(alt.table for alt in spec.alternates),
                              *([spec.current_table] if spec.current_table else [])])
    counters: dict[str, int] = {}
    args = (url, model, span, prefix, batch_size)

    def replay(p: beam.Pipeline) -> None:
        parts = p | "Main parts" >> ReadParts(
            url, ModelRead(model, *span, prefix, main_table=True), max_parts)
        newest = parts | "Replay" >> beam.ParDo(_ReplayPart(*args))
        if spec.current_codec is not None:
            latest = (newest | "Newest per row" >> beam.CombinePerKey(_Newest(model))
                      | "Newest" >> beam.Values())
            written = latest | "Current" >> WriteModel(
                url, to=Companions(model, alternates=(), current=True,
                                   restored="current_rows_fixed"), batch_size=batch_size)
            _dead_letters(written, dead_letters)

    def prune(p: beam.Pipeline) -> None:
        for alt in spec.alternates:
            _ = (p | f"Parts of {alt.table}" >> ReadParts(
                    url, TableRead(alternate_request(scope, alt)), max_parts)
                 | f"Prune {alt.table}" >> beam.ParDo(_PrunePart(*args, table=alt.table)))
        if spec.current_codec is not None:
            _ = (p | "Current parts" >> ReadParts(url, TableRead(current_request(scope)),
                                                  max_parts)
                 | "Fix current" >> beam.ParDo(_FixPart(*args)))

    _run(f"repair {spec.name}", replay, options, counters)
    if spec.alternates or spec.current_codec is not None:
        _run(f"repair {spec.name}", prune, options, counters)
    # A current-value write that still failed is a dead letter, and a write not applied.
    counters["failed"] = counters.get("failed", 0) + counters.get("dead_letters", 0)
    return _report(f"repair {spec.name}", counters, began, _REPAIR_COUNTERS)


#: The repair's own counters.
_REPAIR_COUNTERS = ("events_replayed", "alternate_events_deleted", "current_rows_fixed",
                    "failed")


# -- migration ---------------------------------------------------------------------------


class SameFields:
    """The default conversion of a migration: the target model built from the
    source's fields of the same names."""

    def __init__(self, target: type) -> None:
        self.target = target

    def __call__(self, entity: Any) -> Any:
        names = [a.name for a in attrs.fields(self.target)]
        return self.target(**{n: getattr(entity, n) for n in names if hasattr(entity, n)})


class _Count(beam.DoFn):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def process(self, _: Any) -> Iterator[None]:
        beam.metrics.Metrics.counter(NAMESPACE, self.name).inc()
        return iter(())


class _SpotCheck(WorkerDoFn):
    """Look source events up in the target: each must be there, field for field."""

    def __init__(self, url: str, target: type, convert: Callable[[Any], Any]) -> None:
        super().__init__(url)
        self.target, self.convert = target, convert

    def process(self, entity: Any) -> Iterator[None]:
        spec = spec_of(self.target)
        wanted = self.convert(entity)
        when = getattr(wanted, spec.timestamp_field)
        keys = {name: getattr(wanted, name) for name in spec.key_fields
                if name != spec.timestamp_field}
        found: list[Any] = list(QuerySet(self.target).using(self.db()).range(
            when, when + timedelta(microseconds=spec.time_unit), allow_scan=True, **keys))
        beam.metrics.Metrics.counter(NAMESPACE, "checked").inc()
        if wanted not in found:
            beam.metrics.Metrics.counter(NAMESPACE, "mismatches").inc()
            log.error("migration check: %r is not in the target (found %r)", wanted, found)
        return iter(())


def migrate(url: str, source: type, target: type, *, to_url: str | None = None,
            convert: Callable[[Any], Any] | None = None, start: datetime | None = None,
            end: datetime | None = None, copy: bool = True, verify: bool = True,
            spot_checks: int = 100,
            options: Options = None, batch_size: int = 500, max_parts: int = DEFAULT_MOST,
            dead_letters: str | None = None, app_profile: str | None = None) -> BeamReport:
    """Copy a model's events into a model of another key layout, then verify the copy.

    Declare the new layout as a second model (a new salt count, bucket, key
    order, table name...); the migration reads every event of ``source``
    in [start, end) (all time by default), converts it (``convert``; by
    default the ``target`` built from the fields of the same names) and
    saves it as ``target`` (its main table and companions). The
    verification pass, a second pipeline, counts the events of both over
    the span and looks ``spot_checks`` source events up in the target.

    Args:
        url: the source's store.
        source: the model read.
        target: the model written.
        to_url: the target's store (default: ``url``).
        convert: source instance -> target instance.
        copy: copy the events (``False``: verify an earlier copy only).
        verify: run the verification pass.
        spot_checks: source events looked up in the target.
        The others: as for `snapshot()`.

    Raises:
        TableNotFoundError: the source's main table does not exist, or (with
            ``copy=False``) the target's; nothing is created.
    """
    began = time.monotonic()
    url = worker_url(url, app_profile)
    to_url = worker_url(to_url or url, app_profile)
    convert = convert or SameFields(target)
    source_spec, target_spec = spec_of(source), spec_of(target)
    span = _span(source_spec, start, end)
    _prepare(url, source_spec.name, [source_spec.table])
    if copy:  # it writes the target's tables
        _prepare(to_url, target_spec.name, [], table_specs(target_spec))
    else:  # it reads the target's main table
        _prepare(to_url, target_spec.name, [target_spec.table])
    counters: dict[str, int] = {}

    def copy_events(p: beam.Pipeline) -> None:
        written = (p | "Read source" >> ReadEvents(
                       url, ModelRead(source, *span, main_table=True), max_parts)
                   | "Convert" >> beam.Map(convert)
                   | "Write target" >> WriteModel(to_url, to=Entities(), batch_size=batch_size))
        _dead_letters(written, dead_letters)

    def check(p: beam.Pipeline) -> None:
        events = p | "Read source" >> ReadEvents(
            url, ModelRead(source, *span, main_table=True), max_parts)
        _ = events | "Count source" >> beam.ParDo(_Count("source_events"))
        _ = (p | "Read target" >> ReadEvents(
                to_url, ModelRead(target, *span, main_table=True), max_parts)
             | "Count target" >> beam.ParDo(_Count("target_events")))
        if spot_checks > 0:
            _ = (events | "Sample" >> beam.combiners.Sample.FixedSizeGlobally(spot_checks)
                 | "Each" >> beam.FlatMap(lambda sample: sample)
                 | "Look up" >> beam.ParDo(_SpotCheck(to_url, target, convert)))

    name = f"migrate {source_spec.table} -> {target_spec.table}"
    if copy:
        _run(name, copy_events, options, counters)
    verification = None
    if verify:
        checks: dict[str, int] = {}
        _run(name + " (verify)", check, options, checks)
        verification = Verification(checks.get("source_events", 0),
                                    checks.get("target_events", 0),
                                    checks.get("checked", 0), checks.get("mismatches", 0))
    return _report(name, counters, began, verification=verification)


# -- rollups -----------------------------------------------------------------------------


#: A rollup slot: (rollup table, entity key, bucket start in µs).
_Slot: TypeAlias = tuple[str, tuple[tuple[str, Any], ...], int]


class _EventSlots:
    """Key an event by the slot of each rollup whose bucket overlaps the span:
    ``(slot, (us, entity, in span))``."""

    def __init__(self, model: type, span: tuple[int, int]) -> None:
        self.model, self.span = model, span

    def __call__(self, entity: Any) -> Iterator[tuple[_Slot, tuple[int, Any, bool]]]:
        spec = spec_of(self.model)
        us = spec.codec.time_of(entity)
        key = tuple((name, getattr(entity, name)) for name in spec.key_fields)
        inside = self.span[0] <= us < self.span[1]
        for rollup in spec.rollups:
            start = rollup.start(us)
            if start < self.span[1] and start + rollup.every > self.span[0]:
                yield (rollup.table, key, start), (us, entity, inside)


class _HeldSlots(WorkerDoFn):
    """The slots of the rollup rows a part of a rollup table holds (in the key prefix)."""

    def __init__(self, url: str, model: type, table: str,
                 key_prefix: tuple[tuple[str, Any], ...]) -> None:
        super().__init__(url)
        self.model, self.table, self.key_prefix = model, table, key_prefix

    def process(self, part: Any) -> Iterator[tuple[_Slot, None]]:
        spec = spec_of(self.model)
        (rollup,) = [r for r in spec.rollups if r.table == self.table]
        row_spec = rollup.spec
        for row in self.db().read(part):
            for held in row_spec.codec.decode(rollup.model, row):
                if all(getattr(held, name) == value for name, value in self.key_prefix):
                    key = tuple((name, getattr(held, name)) for name in spec.key_fields)
                    yield (self.table, key, row_spec.codec.time_of(held)), None


class _SlotRow:
    """A slot's whole rollup row from its events (the refresh's `rollup_row()`), or
    nothing for a slot with neither an event of the span nor a rollup row, or of a
    bucket older than the rollup's retention at ``now_us`` (as the refresh skips it)."""

    def __init__(self, model: type, now_us: int) -> None:
        self.model, self.now_us = model, now_us

    def __call__(self, grouped: tuple[_Slot, Iterable[Any]]) -> Iterator[tuple[str, Any]]:
        slot, found = grouped
        events: dict[int, Any] = {}
        wanted = False
        for item in found:
            if item is None:  # a rollup row held
                wanted = True
                continue
            us, entity, inside = item
            events[us] = entity
            wanted = wanted or inside
        (rollup,) = [r for r in spec_of(self.model).rollups if r.table == slot[0]]
        if wanted and not expired_slot(rollup, slot[2], self.now_us):
            yield slot[0], rollup_row(rollup, slot, events)


class _WriteRows(WorkerDoFn):
    """Write a batch of whole rollup rows, one atomic mutation each."""

    def process(self, batch: list[tuple[str, Any]]) -> Iterator[int]:
        by_table: dict[str, list[Any]] = {}
        for table, row in batch:
            by_table.setdefault(table, []).append(row)
        failed = 0
        for table, rows in by_table.items():
            failed += drive(apply_rows(table, rows), self.db())
        deleted = sum(1 for _, row in batch if isinstance(row.mutations[-1], DeleteRow))
        beam.metrics.Metrics.counter(NAMESPACE, "rollup_rows_written").inc(len(batch))
        beam.metrics.Metrics.counter(NAMESPACE, "rollup_rows_deleted").inc(deleted)
        beam.metrics.Metrics.counter(NAMESPACE, "failed").inc(failed)
        yield len(batch)


def rebuild_rollups(url: str, model: type, start: datetime, end: datetime, *,
                    options: Options = None, batch_size: int = 500,
                    max_parts: int = DEFAULT_MOST, app_profile: str | None = None,
                    **key_prefix: Any) -> BeamReport:
    """Recompute a model's rollup rows over [start, end) from its main table on Beam.

    The same rollup rows, cell for cell, as `tsmodel.repair()` writes: every
    rollup row of a bucket that overlaps [start, end) and holds an event of
    the range or a rollup row is written anew, whole (``DeleteRow`` then its
    cells, the refresh's `tsmodel.plan.rollups.rollup_row()`), from all the
    bucket's events in the main table; a row whose bucket has no event left
    is deleted. The main table is read over the range widened to whole
    buckets (split among workers), each event keyed by its slot (rollup
    table, entity key, bucket start), and grouped per slot: a bucket's
    events of one entity are held together in a worker's memory. A rerun
    writes the same rows.

    Args:
        start: inclusive start, timezone-aware.
        end: exclusive end, timezone-aware.
        **key_prefix: limit the rebuild to the entities of a key prefix.
        The others: as for `snapshot()`.

    Returns:
        A `BeamReport`: ``rollup_rows_written`` (rows recomputed, deletes
        included, as ``RepairReport.rollup_rows_written``),
        ``rollup_rows_deleted``, and ``failed`` (rows not written: run the
        job again).

    Raises:
        QueryError: the model declares no rollup, or a bad range or key prefix.
        ConfigurationError: the URL is in memory, or ``batch_size`` < 1.
        TableNotFoundError: the main table does not exist (nothing is created).
    """
    began, url, spec = time.monotonic(), worker_url(url, app_profile), spec_of(model)
    if not spec.rollups:
        raise errors.QueryError(f"{spec.name}: the model declares no rollup to rebuild")
    if batch_size < 1:
        raise errors.ConfigurationError(f"batch_size must be at least 1, got {batch_size}")
    QuerySet(model).range(start, end, allow_scan=True, **key_prefix)  # its argument checks
    span, prefix = (to_micros(start), to_micros(end)), tuple(key_prefix.items())
    wide = (min(r.start(span[0]) for r in spec.rollups),
            max(r.start(span[1] - 1) + r.every for r in spec.rollups))
    _prepare(url, spec.name, [spec.table], _tables(spec, [r.table for r in spec.rollups]))
    counters: dict[str, int] = {}
    now_us = time.time_ns() // 1_000  # retention counted from one instant on every worker

    def build(p: beam.Pipeline) -> None:
        slots = [p | "Read main" >> ReadEvents(
                    url, ModelRead(model, *wide, prefix, main_table=True), max_parts)
                 | "Slots of events" >> beam.FlatMap(_EventSlots(model, span))]
        for rollup in spec.rollups:
            slots.append(p | f"Parts of {rollup.table}" >> ReadParts(
                             url, TableRead(rollup_request(rollup, span)), max_parts)
                         | f"Rows of {rollup.table}" >> beam.ParDo(
                             _HeldSlots(url, model, rollup.table, prefix)))
        _ = (slots | "All slots" >> beam.Flatten()
             | "Per slot" >> beam.GroupByKey()
             | "Rollup rows" >> beam.FlatMap(_SlotRow(model, now_us))
             | "Batch" >> beam.BatchElements(min_batch_size=batch_size,
                                             max_batch_size=batch_size)
             | "Write" >> beam.ParDo(_WriteRows(url)))

    _run(f"rollups {spec.name}", build, options, counters)
    # It writes rollup rows, not events: events_written stays 0.
    return _report(f"rollups {spec.name}", counters, began,
                   ("rollup_rows_written", "rollup_rows_deleted", "failed"))
