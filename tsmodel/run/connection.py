"""Connections: tables from models, batched writes with per-entity results, reads.

``tsmodel.connect(url)`` opens a backend, wraps it in a :class:`Connection`
and makes it the default one that ``Model.range`` and friends use. Without
any ``connect()``, the default is an in-memory embedded store (or the URL in
the ``TSMODEL_URL`` environment variable).
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

import attrs

from tsmodel import errors
from tsmodel.backends import open_backend
from tsmodel.backends.base import (
    Backend,
    Features,
    GcRule,
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    Row,
    RowMutation,
    TableSpec,
)
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.plan.mapper import EncodedEvent, encode_event
from tsmodel.plan.retention import retention_message, retention_problems
from tsmodel.run.cache import CachingBackend

__all__ = ["Connection", "connect", "get_default_connection", "set_default_connection",
           "WriteStatus", "EntityResult", "WriteResult"]

M = TypeVar("M")

#: Entities per bulk write call, per table.
DEFAULT_BATCH_SIZE = 1000


class WriteStatus(enum.Enum):
    """The outcome of saving one entity."""

    #: Written to the main table and every companion table.
    WRITTEN = "written"
    #: Not written to the main table (its companions were not attempted).
    FAILED = "failed"
    #: The main table write may or may not have happened (timeout, lost
    #: connection). Saving the entity again is safe: writes are idempotent.
    UNKNOWN = "unknown"
    #: Written to the main table, but a companion table write failed or is
    #: unknown. Saving again (or a repair) brings the companions in step.
    PARTIAL = "partial"


@attrs.frozen
class EntityResult:
    """What happened to one entity of a save.

    Attributes:
        entity: the instance given.
        status: the overall :class:`WriteStatus`.
        tables: the outcome in each table written, main table first.
    """

    entity: Any
    status: WriteStatus
    tables: tuple[tuple[str, MutationOutcome], ...]

    @property
    def error(self) -> BaseException | None:
        """The first error met, if any."""
        return next((o.error for _, o in self.tables if o.error is not None), None)


@attrs.frozen
class WriteResult:
    """The per-entity outcome of ``save_all``, in input order."""

    results: tuple[EntityResult, ...]

    def _with(self, status: WriteStatus) -> list[EntityResult]:
        return [r for r in self.results if r.status is status]

    @property
    def written(self) -> list[EntityResult]:
        return self._with(WriteStatus.WRITTEN)

    @property
    def failed(self) -> list[EntityResult]:
        return self._with(WriteStatus.FAILED)

    @property
    def unknown(self) -> list[EntityResult]:
        return self._with(WriteStatus.UNKNOWN)

    @property
    def partial(self) -> list[EntityResult]:
        return self._with(WriteStatus.PARTIAL)

    @property
    def ok(self) -> bool:
        """Whether every entity was written everywhere."""
        return all(r.status is WriteStatus.WRITTEN for r in self.results)

    def __len__(self) -> int:
        return len(self.results)

    def summary(self) -> str:
        counts = {s: len(self._with(s)) for s in WriteStatus}
        return ", ".join(f"{n} {s.value}" for s, n in counts.items() if n) or "nothing to write"

    def raise_for_failures(self) -> None:
        """Raise :class:`SaveError` unless every entity was written everywhere."""
        if not self.ok:
            first = next(r for r in self.results if r.status is not WriteStatus.WRITTEN)
            raise errors.SaveError(
                f"save incomplete ({self.summary()}); first problem: {first.status.value}: "
                f"{first.error!r}", self,
            )


class Connection:
    """A backend plus the model-level operations on it.

    Args:
        backend: an open :class:`~tsmodel.backends.base.Backend`.
        batch_size: entities per bulk write call.
    """

    def __init__(self, backend: Backend, *, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.backend = backend
        self.batch_size = batch_size
        #: The read cache of latest-value lookups, when the backend has one.
        self.cache: CachingBackend | None = (
            backend if isinstance(backend, CachingBackend) else None)

    @property
    def features(self) -> Features:
        return self.backend.features

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the backend. Idempotent."""
        self.backend.close()

    def __repr__(self) -> str:
        return f"<Connection {type(self.backend).__name__}>"

    # -- schema -------------------------------------------------------------------

    def create_tables(self, *models: type) -> list[TableSpec]:
        """Create every table the models need (idempotent); return their specs."""
        specs = [t for m in models for t in table_specs(spec_of(m))]
        for table in specs:
            self.backend.create_table(table)
        return specs

    def drop_tables(self, *models: type) -> None:
        """Delete every table of the models, with their data."""
        for m in models:
            for table in table_specs(spec_of(m)):
                self.backend.delete_table(table.name)

    # -- writes -------------------------------------------------------------------

    def save(self, entity: Any, *, accept_expired: bool = False) -> None:
        """Write one entity to its main table and its companion tables.

        Raises:
            ValidationError: the entity cannot be stored; nothing was written.
            RetentionError: it is older than a family's max age (see
                ``accept_expired`` of :meth:`save_all`).
            SaveError: a write failed or its outcome is unknown.
        """
        self.save_all([entity], accept_expired=accept_expired)

    def save_all(self, entities: Iterable[Any], *, raise_on_failure: bool = True,
                 accept_expired: bool = False) -> WriteResult:
        """Write many entities in batches; report the outcome entity by entity.

        Every entity is validated before anything is written. Each cell carries
        the event time as its timestamp, so saving the same entities again is
        idempotent: retry the failed and unknown ones.

        Args:
            entities: model instances (of one or several models).
            raise_on_failure: raise :class:`SaveError` (holding the result)
                when any entity is not fully written.
            accept_expired: save events older than a family's max age
                (``retention=``) anyway; garbage collection deletes them at
                once, since their cell timestamps are their event times.

        Returns:
            The :class:`WriteResult`, one :class:`EntityResult` per entity.

        Raises:
            ValidationError: an entity cannot be stored; nothing was written.
            RetentionError: events are already older than a max age; nothing
                was written.
            SaveError: with ``raise_on_failure``, when some writes failed.
        """
        result = self._save_all(entities, accept_expired)
        if raise_on_failure:
            result.raise_for_failures()
        return result

    def _save_all(self, entities: Iterable[Any], accept_expired: bool) -> WriteResult:
        events = [encode_event(spec_of(e), e) for e in entities]
        if not accept_expired:
            problems = retention_problems(ev.entity for ev in events)
            if problems:
                raise errors.RetentionError(retention_message(problems), problems)
        outcomes: list[list[tuple[str, MutationOutcome]]] = [[] for _ in events]
        for start in range(0, len(events), self.batch_size):
            batch = range(start, min(start + self.batch_size, len(events)))
            self._write_batch(events, batch, outcomes)
        return WriteResult(tuple(
            EntityResult(ev.entity, _status(out), tuple(out))
            for ev, out in zip(events, outcomes, strict=True)
        ))

    def _write_batch(self, events: Sequence[EncodedEvent], batch: range,
                     outcomes: list[list[tuple[str, MutationOutcome]]]) -> None:
        by_table: dict[str, list[int]] = {}
        for i in batch:
            by_table.setdefault(events[i].table, []).append(i)
        for table, indexes in by_table.items():
            self._write_rows(table, [events[i].row_mutation() for i in indexes],
                             indexes, outcomes)
        self._write_current(events, batch, outcomes)
        self._write_alternates(events, batch, outcomes)

    def _write_alternates(self, events: Sequence[EncodedEvent], batch: range,
                          outcomes: list[list[tuple[str, MutationOutcome]]]) -> None:
        """Write each alternate-key table, for entities the main table did not refuse."""
        by_table: dict[str, list[tuple[int, RowMutation]]] = {}
        for i in batch:
            if outcomes[i][0][1].status is MutationStatus.FAILED:
                continue
            for table, row in events[i].alternates:
                by_table.setdefault(table, []).append((i, row))
        for table, items in by_table.items():
            self._write_rows(table, [row for _, row in items], [i for i, _ in items], outcomes)

    def _write_rows(self, table: str, rows: list[RowMutation], indexes: list[int],
                    outcomes: list[list[tuple[str, MutationOutcome]]]) -> None:
        try:
            results = self.backend.mutate_rows(table, rows)
        except errors.BackendError as exc:
            failed = MutationOutcome(MutationStatus.FAILED, exc)
            results = [failed] * len(rows)
        pair: tuple[str, MutationOutcome] | None = None
        for i, outcome in zip(indexes, results, strict=True):
            # Backends return one shared APPLIED outcome: its rows share one pair
            # too, rather than keeping a tuple per entity and table alive.
            if pair is None or pair[1] is not outcome:
                pair = (table, outcome)
            outcomes[i].append(pair)

    def _write_current(self, events: Sequence[EncodedEvent], batch: range,
                       outcomes: list[list[tuple[str, MutationOutcome]]]) -> None:
        """Write the newest event per current-value row; it stands for the others."""
        newest: dict[tuple[str, bytes], int] = {}
        members: dict[tuple[str, bytes], list[int]] = {}
        for i in batch:
            ev = events[i]
            table = ev.current_table
            if table is None or ev.current_key is None or outcomes[i][0][1].status is \
                    MutationStatus.FAILED:
                continue
            slot = (table, ev.current_key)
            members.setdefault(slot, []).append(i)
            if slot not in newest or ev.timestamp >= events[newest[slot]].timestamp:
                newest[slot] = i
        by_table: dict[str, list[tuple[str, bytes]]] = {}
        for slot in newest:
            by_table.setdefault(slot[0], []).append(slot)
        for table, slots in by_table.items():
            rows = [events[newest[s]].current_row_mutation() for s in slots]
            sub: list[list[tuple[str, MutationOutcome]]] = [[] for _ in slots]
            self._write_rows(table, rows, list(range(len(slots))), sub)  # type: ignore[arg-type]
            for slot, out in zip(slots, sub, strict=True):
                for i in members[slot]:
                    outcomes[i].append(out[0])

    # -- reads --------------------------------------------------------------------

    def read(self, request: ReadRequest) -> Iterator[Row]:
        """Stream the rows of one backend read."""
        return self.backend.read_rows(request)

    def range(self, model: type[M], start: Any, end: Any, **kwargs: Any) -> Any:
        """``model.range(...)`` on this connection."""
        from tsmodel.run.query import QuerySet

        return QuerySet(model, connection=self).range(start, end, **kwargs)

    def current(self, model: type[M], **kwargs: Any) -> Any:
        """``model.current(...)`` on this connection."""
        from tsmodel.run.query import QuerySet

        return QuerySet(model, connection=self).current(**kwargs)

    def latest(self, model: type[M], **key_fields: Any) -> M:
        """``model.latest(...)`` on this connection."""
        from tsmodel.run.query import QuerySet

        return QuerySet(model, connection=self).latest(**key_fields)


def _status(out: list[tuple[str, MutationOutcome]]) -> WriteStatus:
    main = out[0][1].status
    if main is MutationStatus.FAILED:
        return WriteStatus.FAILED
    if main is MutationStatus.UNKNOWN:
        return WriteStatus.UNKNOWN
    for _, companion in out[1:]:  # a loop: all() of a generator costs more per entity
        if companion.status is not MutationStatus.APPLIED:
            return WriteStatus.PARTIAL
    return WriteStatus.WRITTEN


def table_specs(spec: ModelSpec) -> list[TableSpec]:
    """The tables a model needs, with families and GC rules.

    The main table keeps ``spec.max_versions`` versions per column: one for a
    row per event or a column per offset, enough for a full bucket for the
    new-cells and new-columns layouts. A declared ``retention`` adds a max-age
    rule (union: a cell goes when either rule says so). The current-value
    table keeps one version per column. Alternate-key tables get the main
    table's rules; snapshot tables are created by the snapshot job.
    """
    main_rule = GcRule(max_versions=spec.max_versions, max_age=spec.retention)
    tables = [TableSpec(t.table, tuple((f, main_rule) for f in spec.families))
              for t in (spec, *spec.alternates)]
    if spec.current_table is not None:
        one_version = GcRule(max_versions=1)
        tables.append(TableSpec(spec.current_table,
                                tuple((f, one_version) for f in spec.families)))
    return tables


# -- the default connection ------------------------------------------------------

_default: Connection | None = None
_default_lock = threading.Lock()


def connect(url: str | None = None, *, default: bool = True,
            batch_size: int = DEFAULT_BATCH_SIZE, cache: bool = False,
            cache_size: int = 10_000, cache_ttl: float = 30.0) -> Connection:
    """Open a connection and (by default) make it the default one.

    Args:
        url: ``None`` or ``"memory://"`` for an in-memory embedded store;
            ``"sqlite:///relative/file.db"`` or ``"sqlite:////absolute/file.db"``
            for an embedded store in a file (SQLAlchemy's convention);
            ``"bigtable://PROJECT/INSTANCE"`` for Cloud Bigtable (application
            default credentials; ``BIGTABLE_EMULATOR_HOST`` is honoured);
            ``"bigtable-emulator://HOST:PORT/PROJECT/INSTANCE"`` for the
            emulator. Add ``?app_profile=ID`` to choose an app profile.
        default: make it the connection that ``Model.range`` and friends use.
        batch_size: entities per bulk write call.
        cache: keep latest-value lookups in memory
            (:class:`tsmodel.run.cache.CachingBackend`): a row this connection
            writes is dropped at once; one written elsewhere shows within
            ``cache_ttl`` seconds.
        cache_size: the most cached lookups.
        cache_ttl: seconds a cached lookup lives.

    Returns:
        The open :class:`Connection`.

    Raises:
        ConfigurationError: the URL is not understood.
    """
    backend = open_backend(url)
    if cache:
        backend = CachingBackend(backend, maxsize=cache_size, ttl=cache_ttl)
    conn = Connection(backend, batch_size=batch_size)
    if default:
        set_default_connection(conn)
    return conn


def set_default_connection(conn: Connection | None) -> None:
    """Make ``conn`` the default connection (``None`` forgets it)."""
    global _default
    with _default_lock:
        _default = conn


def get_default_connection() -> Connection:
    """The default connection; opens one from ``TSMODEL_URL`` (or in memory) if none."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Connection(open_backend(os.environ.get("TSMODEL_URL") or None))
        return _default
