"""Connections: tables from models, batched writes with per-entity results, reads.

``tsmodel.connect(url)`` opens a backend, wraps it in a `Connection`
and makes it the default one that ``Model.range`` and friends use. Without
any ``connect()``, the default is an in-memory embedded store (or the URL in
the ``TSMODEL_URL`` environment variable).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar, overload

from tsmodel import errors
from tsmodel.backends import backend_for, url_settings
from tsmodel.declare.spec import class_spec
from tsmodel.ground.base import (
    Backend,
    CellBatch,
    DeclaredRows,
    Features,
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    Row,
    TableSpec,
    batch_reader,
    own_batch_reader,
)
from tsmodel.io import pandas as _pandas
from tsmodel.io import polars as _polars
from tsmodel.io.arrow import DEFAULT_BATCH_ROWS, ArrowColumns
from tsmodel.io.frames import DEFAULT_FRAME_ROWS, FrameSave
from tsmodel.plan import schema
from tsmodel.plan.cursors import Page, secret_bytes
from tsmodel.plan.reads import LatestResult, QueryState
from tsmodel.plan.results import EntityResult, TableWrite, WriteResult, WriteStatus
from tsmodel.plan.schedule import DEFAULT_FLOW, WriteFlow, check_write_options
from tsmodel.plan.writes import WritePlan
from tsmodel.run._connection_state import ConnectionState
from tsmodel.run.async_connection import (
    DEFAULT_BATCH_SIZE,
    AsyncConnection,
    AsyncQuerySet,
    opened_async,
)
from tsmodel.run.cache import CachingBackend
from tsmodel.run.drive import chunk_saves, drive
from tsmodel.run.drive import first as first_of
from tsmodel.run.fanout import Streamed, stream
from tsmodel.run.frame_steps import FrameResult, frame_steps
from tsmodel.run.observe import Operation, paced, pause_before
from tsmodel.run.progress import Progress, Writing
from tsmodel.run.query import Query, Read, changed_instance, copier
from tsmodel.settings import DEFAULT_SETTINGS, Settings, check_flag, check_seconds, check_whole

__all__ = ["Connection", "QuerySet", "connect", "get_default_connection",
           "set_default_connection", "WriteStatus", "EntityResult", "WriteResult", "WriteFlow",
           "DEFAULT_BATCH_SIZE"]

M = TypeVar("M")
_R = TypeVar("_R")


class Connection(ConnectionState[Backend]):
    """A backend plus the model-level operations on it.

    Args:
        backend: an open `Backend`.
        batch_size: entities per bulk write call.
        flow: how many batches (and bytes) a save keeps on the way at once,
            and whether companion tables are written with the main table
            (`WriteFlow`). A backend whose calls
            do not overlap (``features.concurrent_calls`` false: the embedded
            store) gets its calls one after the other, in the same order.
            Writes are paced as the server asks (``server_rate_limits``).
        settings: the connection's `Settings`
            (those of the backend's calls are given to the backend when
            it opens; here, the slow-call threshold and telemetry).
        cursor_secret: the key that signs page tokens (HMAC-SHA256), at least
            16 bytes (a str is UTF-8 encoded): then only tokens signed with it
            are accepted. Without one, tokens carry a checksum only
            (``docs/paging.md`` says what each guarantees).

    Raises:
        ConfigurationError: telemetry is on but OpenTelemetry is not installed,
            ``batch_size`` or ``flow`` is of the wrong type or range, or
            ``cursor_secret`` is too short.
    """

    def __init__(self, backend: Backend, *, batch_size: int = DEFAULT_BATCH_SIZE,
                 flow: WriteFlow = DEFAULT_FLOW, settings: Settings = DEFAULT_SETTINGS,
                 cursor_secret: str | bytes | None = None) -> None:
        super().__init__(backend, batch_size=batch_size, flow=flow, settings=settings,
                         cursor_secret=cursor_secret)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        #: The read cache of latest-value lookups, when the backend has one.
        self.cache: CachingBackend | None = (
            backend if isinstance(backend, CachingBackend) else None)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the backend. Idempotent."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self.backend.close()

    # -- schema -------------------------------------------------------------------

    def create_tables(self, *models: type) -> list[TableSpec]:
        """Create every table the models need, or bring it in step (idempotent).

        The schema plan applied (`plan_schema()`, then
        `apply_schema()`): missing tables are created,
        missing families added, GC rules set; nothing is deleted.

        Returns:
            The tables the models need, merged by name.

        Raises:
            TypeError: an argument is not a model.
            ConfigurationError: two models share a family but want different
                GC rules; nothing was changed.
            BackendError: the backend refused a change.
        """
        plan = self.plan_schema(*models)
        self.apply_schema(plan)
        return list(plan.tables)

    def plan_schema(self, *models: type, drop: bool = False,
                    drop_tables: Iterable[str] = ()) -> schema.SchemaPlan:
        """Compare the tables the models need with what the backend holds.

        Reading the backend changes nothing; `apply_schema()` carries the plan
        out. See `tsmodel.plan.schema.plan_steps()` for ``drop`` and
        ``drop_tables`` (nothing is deleted unless asked for).

        Raises:
            TypeError: an argument is not a model.
            ConfigurationError: two models disagree on a family's GC rule, or a
                table of ``drop_tables`` is declared by the models or does not exist.
            BackendError: the backend could not be read.
        """
        plan: schema.SchemaPlan = drive(schema.plan_steps(*models, drop=drop,
                                                          drop_tables=drop_tables), self)
        return plan

    def apply_schema(self, plan: schema.SchemaPlan) -> tuple[schema.Change, ...]:
        """Carry out a schema plan; the changes made, in order (see
        `tsmodel.plan.schema.apply_steps()`).

        Raises:
            BackendError: the backend refused a change (the changes before it are made).
        """
        changes: tuple[schema.Change, ...] = drive(schema.apply_steps(plan), self)
        return changes

    def drop_tables(self, *models: type) -> None:
        """Delete every table of the models, with their data."""
        drive(schema.drop_steps(*models), self)

    # -- writes -------------------------------------------------------------------

    def save(self, entity: Any, *, accept_expired: bool = False) -> None:
        """Write one entity to its main table and its companion tables.

        Raises:
            ValidationError: the entity cannot be stored; nothing was written.
            RetentionError: it is older than a family's max age (see
                ``accept_expired`` of `save_all()`).
            SaveError: a write failed or its outcome is unknown.
        """
        self.save_all([entity], accept_expired=accept_expired, progress=False)

    def save_all(self, entities: Iterable[Any], *, raise_on_failure: bool = True,
                 accept_expired: bool = False, validate_first: bool = True,
                 progress: Progress = None) -> WriteResult:
        """Write many entities in batches; report the outcome entity by entity.

        Every entity is validated before anything is written (unless
        ``validate_first=False``). Each cell carries
        the event time as its timestamp, so saving the same entities again is
        idempotent: retry the failed and unknown ones.

        Args:
            entities: model instances (of one or several models).
            raise_on_failure: raise `SaveError` (holding the result)
                when any entity is not fully written.
            accept_expired: save events older than a family's max age
                (``retention=``) anyway; garbage collection deletes them at
                once, since their cell timestamps are their event times.
            validate_first: validate and encode every entity before the
                first write (the default). ``False`` streams: each batch is
                encoded while earlier ones are on the way and let go once
                written, so memory stays bounded for any number of entities
                (give a generator); a bad entity then stops the save at its
                batch, after the batches before it were sent.
            progress: a bar on standard error when it is a terminal (the
                default, ``None``: shown once the save has run a second;
                ``True``: at once, anywhere; ``False``: never), or a
                callable ``progress(done, total)`` called after each batch
                with the entities done and their total (``None`` for an
                input without a length). See `tsmodel.run.progress`.

        Returns:
            The `WriteResult`, one `EntityResult` per entity.

        Raises:
            ValidationError: an entity cannot be stored; nothing was written
                (streamed: nothing of its batch or after it; ``result`` holds
                the outcomes of the batches before).
            RetentionError: events are already older than a max age; nothing
                was written (streamed: as for ValidationError).
            SaveError: with ``raise_on_failure``, when some writes failed.
        """
        with Writing(self, "save", progress) as w:
            steps = w.save(entities, accept_expired, validate_first)
            result = w.done(drive(steps, self, w.op))
        if raise_on_failure:
            result.raise_for_failures()
        return result

    def save_frame(self, model: type, frame: Any, *, rows: int = DEFAULT_FRAME_ROWS,
                   raise_on_failure: bool = True, accept_expired: bool = False,
                   validate_first: bool = True, progress: Progress = None) -> FrameResult:
        """Save the rows of a data frame whose columns are ``model``'s fields, as events.

        A pandas or polars ``DataFrame``, a ``pyarrow.Table`` or
        ``RecordBatch``, or an iterable of record batches: each row is one
        event, saved as `save_all()` saves it (the same checks, companion
        tables, rollups and outcomes), ``rows`` rows at a time: the working
        memory is one chunk's, whatever the frame's size, and the result keeps
        nothing of a row written (counts, and the rows not written). A field
        without a column takes its default; a column that is no field is refused.
        Needs pyarrow (``pip install 'tsmodel-bigtable[arrow]'``).

        Args:
            model: the model class of the rows.
            frame: the rows (see above).
            rows: rows converted and saved at a time.
            raise_on_failure, accept_expired: as for `save_all()`.
            validate_first: check every row before the first write (the
                input is read twice; a one-shot iterator of batches is refused);
                ``False``: each chunk is checked before it is written, and a bad
                row stops the save there, the chunks before it written.
            progress: as for `save_all()`, over the whole frame: a bar of rows
                on standard error when it is a terminal (``None``), ``True``,
                ``False``, or a callable ``progress(done, total)`` (the total
                ``None`` for a stream of batches).

        Returns:
            The `FrameResult`: how many rows were written, failed, unknown or
            partial, and the `EntityResult` of each row not written (its ``row``
            the row's index); nothing per row written.

        Raises:
            ValidationError: a row cannot be stored (or the columns are not the
                model's); its ``row`` is the row's index and the message names
                the row, the field and the value. Nothing was written (with
                ``validate_first=False``: nothing of its chunk or after;
                ``result`` is the `FrameResult` of the chunks before).
            RetentionError: as for `save_all()`.
            SaveError: with ``raise_on_failure``, when some rows were not
                written everywhere; its ``result`` is the `FrameResult`.
            ExtraNotInstalledError: pyarrow is not installed.
        """
        steps = frame_steps(FrameSave(model, frame, rows, validate_first=validate_first,
                                      accept_expired=accept_expired),
                            progress, raise_on_failure)
        return drive(chunk_saves(steps, accept_expired), self)

    def delete(self, entity: Any) -> None:
        """Delete one event from its main table and its companion tables.

        Raises:
            ValidationError: the entity's key or time cannot be encoded.
            SaveError: a deletion failed or its outcome is unknown (its
                ``result`` says which; deleting again is safe).
        """
        self.delete_all([entity], progress=False)

    def delete_all(self, entities: Iterable[Any], *, raise_on_failure: bool = True,
                   progress: Progress = None) -> WriteResult:
        """Delete events from every table of their models; report entity by entity.

        Each entity names one event (its key fields and time; its values
        need not be the stored ones). Exactly the cells of that event go:
        in a bucket row its columns, not the row; its alternate-key rows;
        and where the current-value row shows it, the row then shows the
        entity's newest remaining event, read from the main table, or is
        gone. Deleting an event that is not stored changes nothing.
        See docs/deleting.md for the round trips.

        Args:
            entities: model instances (of one or several models).
            raise_on_failure: raise `SaveError` (holding the result)
                when any deletion is not complete.
            progress: a bar or a callable, as for `save_all()`.

        Returns:
            The `WriteResult`, one `EntityResult` per entity:
            WRITTEN (deleted everywhere), FAILED (the main table refused;
            nothing else was sent), UNKNOWN (the main deletion may have
            happened) or PARTIAL (a companion table is behind: ``ts.repair``).

        Raises:
            ValidationError: an entity's key or time cannot be encoded;
                nothing was deleted.
            SaveError: with ``raise_on_failure``, when some deletions failed.
        """
        with Writing(self, "delete", progress) as w:
            result = w.done(drive(w.delete(entities), self, w.op))
        if raise_on_failure:
            result.raise_for_failures()
        return result

    def update(self, model: type[M], /, **fields: Any) -> M:
        """Change value fields of one stored event; return the event as saved.

        ``db.update(Metric, hostname="h1", time=t, cpu=0.5)``: the key fields
        and the time name the event, the other fields are set. The stored
        event is read (one read of the main table), changed and saved again,
        as a correction of the same event (every table follows; the
        current-value row too, when it shows the event).

        Raises:
            QueryError: a key field or the time is missing, a name is not a
                field of the model, or no value field is given.
            DoesNotExist: no such event is stored (``Model.DoesNotExist``).
            ValidationError: a new value cannot be stored, or the time (or a key
                field) cannot, as a save would refuse it; nothing was written.
            SaveError: a write failed or its outcome is unknown.
        """
        return QuerySet(model, connection=self._starting(model))._update_event(fields)

    def _workers(self) -> ThreadPoolExecutor:
        """The threads that make a connection's overlapping calls (made when first needed)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=max(8, 4 * self.flow.batches),
                                                thread_name_prefix="tsmodel-call")
            return self._pool

    def _read_whole(self, request: ReadRequest, op: Operation | None,
                    failures: bool) -> list[Row] | errors.BackendError:
        """The rows of a `Read` step: under ``op`` (a save's, its rows not counted as
        the save's), else an operation of its own; a failure is the answer with
        ``failures``."""
        try:
            if op is None:
                return list(self.read(request))
            rows, count = op.read(request.table, lambda: self.backend.read_rows(request))
            return list(op.stream(request.table, rows, count, counted=False, ends=False))
        except errors.BackendError as exc:
            if failures:
                return exc
            raise

    def execute(self, plan: WritePlan, writes: Iterable[TableWrite]) -> None:
        """Send each planned table write and record its outcomes in ``plan``."""
        for write in writes:
            plan.record(write, self.send(write))

    def send(self, write: TableWrite) -> list[MutationOutcome]:
        """Send one table write (an operation of its own: a job's ``write``).

        Returns:
            One outcome per row (a refused call fails every row).
        """
        op = self._observer.operation("write", write.table)
        try:
            return self._send(write, op)
        finally:
            op.end()

    def _send(self, write: TableWrite, op: Operation) -> list[MutationOutcome]:
        # A batch of declared rows stays one: the backend writes it from its tuples.
        rows = write.rows if isinstance(write.rows, DeclaredRows) else list(write.rows)
        pause = pause_before(self.pacer, len(rows), op)
        if pause > 0:
            time.sleep(pause)
        with paced(self.pacer):
            return self._mutate(write.table, rows, op)

    def _mutate(self, table: str, rows: Sequence[Any], op: Operation) -> list[MutationOutcome]:
        try:
            return op.call(table, rows, lambda: self.backend.mutate_rows(table, rows))
        except errors.BackendError as exc:
            return [MutationOutcome(MutationStatus.FAILED, exc)] * len(rows)

    # -- reads --------------------------------------------------------------------

    def read(self, request: ReadRequest) -> Iterator[Row]:
        """Stream the rows of one backend read (an operation: a ``lookup`` by row keys,
        else a ``read``).

        The request is sent before this returns, as ``Backend.read_rows`` does.
        """
        return self._observer.read(request, self.backend.read_rows)

    @property
    def reads_batches(self) -> bool:
        """Whether the backend reads rows in `CellBatch` es of its own
        (`tsmodel.ground.base.own_batch_reader`)."""
        return own_batch_reader(self.backend) is not None

    def read_batches(self, request: ReadRequest) -> Iterator[CellBatch]:
        """`read()` in columns: the rows as the backend's ``read_batches`` hands them
        (`CellBatch` es), or its rows put in batches when it has none, observed as a
        read of those rows."""
        return self._observer.read_batches(request, batch_reader(self.backend))

    # -- queries: thin starters of a QuerySet on this connection ----------------------

    def range(self, model: type[M], start: datetime, end: datetime, *,
              allow_scan: bool = False, **key_fields: Any) -> QuerySet[M]:
        """Events of ``model`` with ``start <= timestamp < end``, on this connection.

        ``model.using(conn).range(...)``: the arguments and the checks of
        `tsmodel.QuerySet.range()`; the result is a `QuerySet` to refine or run.
        """
        return QuerySet(model, connection=self._starting(model)).range(
            start, end, allow_scan=allow_scan, **key_fields)

    def current(self, model: type[M], *, allow_scan: bool = False,
                **key_prefix: Any) -> QuerySet[M]:
        """The newest event of every entity of ``model`` (or of a key prefix), on this
        connection: ``model.using(conn).current(...)``, a `QuerySet`."""
        return QuerySet(model, connection=self._starting(model)).current(
            allow_scan=allow_scan, **key_prefix)

    def latest(self, model: type[M], *, as_of: datetime | None = None,
               **key_fields: Any) -> M:
        """``model.using(conn).latest(...)`` (at or before ``as_of``): see
        `QuerySet.latest()`.

        With a read cache (``connect(cache=True)``), what builds the decoded
        instance is kept, tied to the entity's current-value row, so that this
        connection's writes of the row drop it; each hit builds a new copy (the
        caller's to change). A hit plans nothing and reads nothing: the key
        fields were checked when the instance was kept.
        """
        spec = class_spec(model)
        cache = self.cache
        if cache is None or as_of is not None or spec.current_key is None:
            return QuerySet(model, connection=self)._read_latest(key_fields, as_of)
        kept = cache.memoize(("latest", model, tuple(key_fields.items())),
                             lambda: QuerySet(model, connection=self)._kept_latest(key_fields))
        if kept is None:
            return QuerySet(model, connection=self)._found(None, key_fields)
        return kept()  # type: ignore[no-any-return]

    def latest_many(self, model: type[M], keys: Iterable[Mapping[str, Any] | tuple[Any, ...]],
                    *, as_of: datetime | None = None) -> LatestResult[M]:
        """``model.using(conn).latest_many(keys)`` (a `LatestResult`)."""
        return QuerySet(model, connection=self._starting(model)).latest_many(keys, as_of=as_of)

    def _starting(self, model: type) -> Connection:
        """This connection, for a query of ``model``: a clear error for an instance of a
        model, or a class that is not one."""
        class_spec(model)
        return self


# -- the default connection ------------------------------------------------------

_default: Connection | None = None
#: The default connection `get_default_connection()` opened in memory for want of
#: one (no `connect()`, no ``TSMODEL_URL``), while it is the default.
_implicit: Connection | None = None
_default_lock = threading.Lock()


def connect(url: str | None = None, *, default: bool = True,
            batch_size: int = DEFAULT_BATCH_SIZE, flow: WriteFlow = DEFAULT_FLOW,
            cache: bool = False,
            cache_size: int = 10_000, cache_ttl: float = 30.0,
            cursor_secret: str | bytes | None = None, **settings: Any) -> Connection:
    """Open a connection and (by default) make it the default one.

    Args:
        url: ``None`` or ``"memory://"`` for an in-memory embedded store;
            ``"sqlite:///relative/file.db"`` or ``"sqlite:////absolute/file.db"``
            for an embedded store in a file (SQLAlchemy's convention);
            ``"bigtable://PROJECT/INSTANCE"`` for Cloud Bigtable (application
            default credentials; ``BIGTABLE_EMULATOR_HOST`` is honoured);
            ``"bigtable-emulator://HOST:PORT/PROJECT/INSTANCE"`` for the
            emulator. Query options give settings: ``?app_profile=ID``,
            ``?read_attempt_timeout=5``... (see ``settings``).
        default: make it the connection that ``Model.range`` and friends use.
        batch_size: entities per bulk write call.
        flow: what a save keeps on the way at once (`WriteFlow`).
        cache: keep latest-value lookups in memory
            (`tsmodel.run.cache.CachingBackend`): a row this connection
            writes is dropped at once; one written elsewhere shows within
            ``cache_ttl`` seconds.
        cache_size: the most cached lookups.
        cache_ttl: seconds a cached lookup lives.
        cursor_secret: the key that signs page tokens (see `Connection`).
        **settings: connection settings, over the URL's query options:
            timeouts, retries, credentials, client options, app profile,
            slow-call threshold, telemetry (`Settings`;
            the table in docs/operations.md).

    Returns:
        The open `Connection`.

    Raises:
        ConfigurationError: the URL is not understood; a setting or URL
            option is unknown (the message names the closest valid one) or
            out of range; an argument is of the wrong type (``batch_size="10"``)
            or range; telemetry is on without OpenTelemetry installed;
            ``cursor_secret`` is too short.
    """
    # Every option checked before anything is opened.
    check_write_options(batch_size, flow)
    check_flag("default", default)
    check_flag("cache", cache)
    check_whole("cache_size", cache_size)
    check_seconds("cache_ttl", cache_ttl)
    secret = secret_bytes(cursor_secret)
    resolved = url_settings(url, settings)
    backend = backend_for(url, resolved)
    if cache:
        backend = CachingBackend(backend, maxsize=cache_size, ttl=cache_ttl)
    try:
        conn = Connection(backend, batch_size=batch_size, flow=flow, settings=resolved,
                          cursor_secret=secret)
    except BaseException:
        backend.close()
        raise
    if default:
        set_default_connection(conn)
    return conn


def set_default_connection(conn: Connection | None) -> None:
    """Make ``conn`` the default connection (``None`` forgets it)."""
    global _default
    with _default_lock:
        _default = conn


def get_default_connection() -> Connection:
    """The default connection; opens one from ``TSMODEL_URL`` (or in memory) if none.

    Raises:
        ConfigurationError: there is no default connection but the in-memory
            one, and a connection `connect_async()` opened is open: the
            query would read another store than the program writes through.
    """
    global _default, _implicit
    with _default_lock:
        if _default is None:
            url = os.environ.get("TSMODEL_URL") or None
            if url is None:
                _refuse_implicit()
            _default = connect(url, default=False)
            _implicit = _default if url is None else None
        elif _default is _implicit:
            _refuse_implicit()
        return _default


def _refuse_implicit() -> None:
    """Refuse the implicit in-memory default beside an open async connection."""
    if opened_async():
        raise errors.ConfigurationError(
            "no default connection: ts.connect() made none, and the AsyncConnection that "
            "ts.connect_async() opened is never the default one; an empty in-memory store "
            "in its place would answer from another store than the one written through. "
            "Run the query on the async connection (Model.using(adb), adb.range(...)), or "
            "open a blocking connection on the store you mean with ts.connect(url)")


# -- the blocking query runner ---------------------------------------------------------

class QuerySet(Query[M]):
    """A `Query` run with blocking calls: on its connection, else the default one.

    ``Model.range(start, end, **key_fields)``, ``Model.current(**key_prefix)``,
    ``Model.using(db)`` and ``db.range(Model, ...)`` return one. Refine it
    as any `Query` (each refinement returns a new QuerySet); run it by
    iterating, or with `count()`, `first()`, `latest()`; page through it with
    `page()` and re-open it after a cursor with `after()`. Its sibling on an
    event loop is `tsmodel.AsyncQuerySet`.
    """

    def __init__(self, model: type[M], *, connection: Connection | None = None,
                 state: QueryState | None = None) -> None:
        super().__init__(model, state=state)
        self._connection = connection

    def _bound_features(self) -> Features | None:
        return None if self._connection is None else self._connection.features

    @overload
    def using(self, connection: AsyncConnection) -> AsyncQuerySet[M]: ...

    @overload
    def using(self, connection: Connection) -> QuerySet[M]: ...

    def using(self, connection: Connection | AsyncConnection) -> QuerySet[M] | AsyncQuerySet[M]:
        """Run on ``connection`` instead of the default connection.

        On an `AsyncConnection` the result is an
        `AsyncQuerySet`: run it with ``async for`` and ``await``.
        """
        return bind(self.model, connection, self._state)

    def rollup(self, every: str | timedelta) -> QuerySet[Any]:
        """Queries of the model's rollup table of bucket size ``every`` (``"1h"``).

        Its rows are instances of the rollup row class: the key fields,
        ``time`` (the bucket start), ``count`` and ``<field>_count``,
        ``_sum``, ``_min``, ``_max``, ``_last``, ``_mean``; refine it like any
        query: ``Metric.rollup("1h").range(start, end, host="h1")`` selects
        the buckets that start in ``[start, end)``.

        Raises:
            QueryError: the model declares no rollup of that size.
        """
        return QuerySet(self._rollup_of(every), connection=self._connection)

    def __iter__(self) -> Iterator[M]:
        # The generator under the iterator: a ``for`` loop takes each instance
        # without a Python-level __next__ call (measured: 5 % of a read).
        return self._stream()._items

    if not TYPE_CHECKING:  # refused at run time; to type checkers, no async iterable
        def __aiter__(self) -> AsyncIterator[M]:
            raise errors.ArgumentTypeError(
                f"{self!r} does not run on an AsyncConnection: bind it with "
                "Model.using(adb) (or build it with adb.range(...)) for `async for`")

    def __bool__(self) -> bool:
        """Whether any event matches (reads at most one)."""
        return self.exists()

    def iterator(self) -> Streamed[M]:
        """Stream the matching instances; nothing is cached.

        Several requests (one per salt value or key range) are read at once
        and merged in order; stopping early (``break``, dropping the
        iterator, ``close()``) cancels the reads still streaming.

        The iterator's ``cursor`` is, at any time, the token that re-opens the
        query just after the last instance it handed out (`after()`).
        A read that breaks off with a `ReadInterruptedError`
        is re-opened there by itself, up to 3 times in a row without a new
        instance; then the error is raised with its ``cursor`` set.

        Raises:
            InvalidCursorError: the query's cursor (`after()`) does not fit.
        """
        return self._stream()

    def page(self, size: int, after: str | None = None) -> Page[M]:
        """One page of the query: at most ``size`` instances, and the next page's token.

        ``qs.page(100)`` is the first page, ``qs.page(100, after=page.next)``
        the one after it, until ``page.next`` is ``None``. The token is
        opaque, URL-safe and stable across processes; it fits only this
        query (same model, table, time range, key fields, order, mode and
        fields; page sizes may differ), and with a connection
        ``cursor_secret`` only this application's tokens are accepted. A page
        reads one instance past its end, to know whether another page follows.

        Args:
            size: the most instances of the page (at least 1).
            after: the token of the page before (``page.next``), or ``None``.

        Returns:
            The `Page`: ``items`` and ``next``.

        Raises:
            InvalidCursorError: ``after`` is not a token of this query.
            QueryError: the query hands out no cursors (its events are sorted
                or reversed in memory).
        """
        conn = self._conn()
        items = self._open(self._paged(size, after, conn.features, conn.cursor_secret))
        try:
            found = list(islice(items, size))
            token = items.cursor
            more = next(items, None) is not None
        finally:
            items.close()
        return Page(found, token if more else None)

    def _stream(self, more: int | None = None, sink: str = "instances") -> Streamed[M]:
        conn = self._conn()
        return self._open(self._read(conn.features, conn.cursor_secret, more, sink), conn)

    def _open(self, read: Read, conn: Connection | None = None) -> Streamed[M]:
        """Start streaming ``read`` on ``conn`` (by default this query's connection)."""
        return stream(read.plan, self._conn() if conn is None else conn, self.model,
                      read.codec, read.start, sink=read.sink)

    def count(self) -> int:
        """How many events match; nothing is cached.

        Where each row holds one event and no check is left to the client,
        the rows are counted without their values (the cells a read takes,
        values stripped: no value byte is read; ``explain(count=True)`` shows
        the plan), each checked as iterating checks it but for its value
        bytes; otherwise the events are read and decoded.

        Raises:
            KeyDecodingError, CellDecodingError: a row iterating refuses.
        """
        conn = self._conn()
        return sum(1 for _ in self._open(self._counting(conn.features, conn.cursor_secret),
                                         conn))

    def exists(self) -> bool:
        """Whether any event matches (reads at most one)."""
        return self.first() is not None

    # -- columnar results -----------------------------------------------------------

    def to_arrow_batches(self, rows: int = DEFAULT_BATCH_ROWS) -> Iterator[Any]:
        """Stream the matching events as ``pyarrow.RecordBatch`` es of ``rows`` events.

        Memory stays bounded by one batch (and the reads' buffers), as with
        `iterator()`: rows are decoded straight into columns, no model
        instance is built. The schema comes from the model (see
        `tsmodel.io.arrow`); `only()` leaves out the other value
        columns. Stopping early (``break``) cancels the reads still streaming.

        Args:
            rows: the most events per batch (the last batch may hold fewer).

        Raises:
            ExtraNotInstalledError: pyarrow is not installed
                (``pip install 'tsmodel-bigtable[arrow]'``).
            ValueError: ``rows`` is not an int >= 1.
        """
        columns = self._columns("to_arrow_batches()")
        return self._column_batches(columns, rows)

    def to_arrow(self) -> Any:
        """The matching events as one ``pyarrow.Table`` (the model's schema when none).

        Raises:
            ExtraNotInstalledError: pyarrow is not installed
                (``pip install 'tsmodel-bigtable[arrow]'``).
        """
        return self._arrow_table("to_arrow()")

    def to_pandas(self) -> Any:
        """The matching events as a ``pandas.DataFrame``, a column per field.

        Nullable dtypes (``Int64``, ``boolean``, ``string``), ``category``
        for string key fields, ``datetime64[<unit>, UTC]`` times; see
        `tsmodel.io.pandas`.

        Raises:
            ExtraNotInstalledError: pandas or pyarrow is not installed
                (``pip install 'tsmodel-bigtable[pandas]'``).
        """
        _pandas.require_all("to_pandas()")
        return _pandas.frame_of(self._arrow_table("to_pandas()"),
                                nan_columns=self._nan_columns())

    def to_polars(self) -> Any:
        """The matching events as a ``polars.DataFrame``; see `tsmodel.io.polars`.

        Raises:
            ExtraNotInstalledError: polars or pyarrow is not installed
                (``pip install 'tsmodel-bigtable[polars]'``).
        """
        _polars.require_all("to_polars()")
        return _polars.frame_of(self._arrow_table("to_polars()"))

    def _arrow_table(self, what: str) -> Any:
        columns = self._columns(what)
        return columns.table(self._column_batches(columns, DEFAULT_BATCH_ROWS))

    def _column_batches(self, columns: ArrowColumns, rows: int) -> Iterator[Any]:
        """Record batches of the matching events: rows decoded straight into columns
        where the plan's answer is whole rows, else records into columns."""
        conn = self._conn()
        read = self._column_read(conn.features, conn.cursor_secret, columns,
                                 own_batch_reader(conn.backend) is not None)
        if read.sink == "batches":  # the rows in columns, no Row
            return columns.cell_batches(read.plan.codec, self._open(read, conn),
                                        read.plan.only, rows)
        if read.sink == "rows":
            return columns.row_batches(read.plan.codec, self._open(read, conn),
                                       read.plan.only, rows)
        return columns.batches(self._open(read, conn), rows)  # type: ignore[arg-type]

    def first(self) -> M | None:
        """The first matching instance (after the cursor, if any), or ``None``."""
        return first_of(self._stream(1))

    def latest(self, *, as_of: datetime | None = None, **key_fields: Any) -> M:
        """The newest event of one entity, or its newest event at or before ``as_of``.

        Reads the current-value table when the model has one (one row read),
        else the newest row of the entity's range in the main table. With
        ``as_of``, the main table, which keeps every event (the current-value
        table holds only the newest): one row read from the key of ``as_of``
        where the key's timestamp is reversed, a reversed scan from it with a
        limit of one row where it is not.

        Args:
            as_of: a timezone-aware time: the newest event whose event time
                is at or before it.
            **key_fields: every key field of the entity.

        Raises:
            QueryError: key fields are missing.
            ValidationError: ``as_of`` is naive (`FieldTypeError`: not a
                ``datetime``).
            DoesNotExist: the entity has no event (at or before ``as_of``)
                (``Model.DoesNotExist``).
        """
        return self._conn().latest(self.model, as_of=as_of, **key_fields)

    def _read_latest(self, key_fields: dict[str, Any], as_of: datetime | None) -> M:
        """`latest()` read from the backend (the cache aside)."""
        return self._found(self._latest_query(key_fields, as_of).first(), key_fields)

    def _kept_latest(self, key_fields: dict[str, Any]) -> tuple[ReadRequest,
                                                               Callable[[], M] | None]:
        """`latest()` for the cache: the request of its one row, and what builds
        a copy of the instance read (``None``: no event)."""
        qs = self._latest_query(key_fields)
        found = qs.first()
        return qs.explain().requests[0], None if found is None else copier(found)

    def delete(self, *, allow_scan: bool = False, raise_on_failure: bool = True) -> WriteResult:
        """Delete every event the query selects, from every table of the model.

        The events are read (held in memory), then deleted as
        `tsmodel.Connection.delete_all()` deletes them: exactly their
        cells, their alternate-key rows, and the current-value rows they
        show (which then show the newest remaining event, or are gone).

        Args:
            allow_scan: delete even when the query does not name an entity
                (every key field of the model): a range over many entities.
            raise_on_failure: raise `SaveError` when a
                deletion is not complete.

        Returns:
            The `WriteResult`, one entry per event deleted.

        Raises:
            QueryError: the query is not a ``range(...)`` of the main data
                (``current()``, ``snapshot()``).
            ScanRefusedError: key fields are missing and ``allow_scan`` is false.
        """
        qs = self._to_change("delete", allow_scan)
        events = list(qs.iterator())
        return qs._conn().delete_all(events, raise_on_failure=raise_on_failure)

    def update(self, *, allow_scan: bool = False, raise_on_failure: bool = True,
               **changes: Any) -> WriteResult:
        """Set value fields of every event the query selects, and save them.

        Each event is read, changed and saved again: a correction of the same
        event (same key and time), which the save writes to every table (the
        current-value row too, when it shows the event).

        Args:
            allow_scan: as for `delete()`.
            raise_on_failure: raise `SaveError` when a
                write is not complete.
            **changes: value fields and their new values.

        Returns:
            The `WriteResult` of the save, one entry per event.

        Raises:
            QueryError: a name is not a value field, or the query is not a
                ``range(...)``.
            ScanRefusedError: as for `delete()`.
            ValidationError: a new value cannot be stored; nothing was written.
        """
        self._check_changes(changes)
        qs = self._to_change("update", allow_scan)
        events = [changed_instance(e, changes) for e in qs.iterator()]
        return qs._conn().save_all(events, raise_on_failure=raise_on_failure)

    def _update_event(self, fields: dict[str, Any]) -> M:
        """`Connection.update()`: change one stored event (see there)."""
        query, changes = self._event_query(fields)
        updated = self._changed_event(query.first(), fields, changes)
        self._conn().save(updated)
        return updated

    def latest_many(self, keys: Iterable[Mapping[str, Any] | tuple[Any, ...]], *,
                    as_of: datetime | None = None) -> LatestResult[M]:
        """The newest event of each of many entities, in as few reads as the model allows.

        With a current-value table: one read of up to 500 current rows by key
        (more keys: more reads, side by side). Without one, or with
        ``as_of``: the newest row of each entity (at or before ``as_of``) in
        the main table, as `latest()` reads it, up to 8 reads at once.

        Args:
            keys: each entity's key: ``{"hostname": "h1"}`` (every key field,
                of the current-value table's key when there is one), or a
                tuple of the values in key field order (``("h1",)``). A key
                given twice is read once.
            as_of: a timezone-aware time: each entity's newest event whose
                event time is at or before it.

        Returns:
            A `LatestResult`: ``found`` maps each key tuple
            to its entity's newest event, ``missing`` lists the keys of the
            entities without one; ``get(**key_fields)`` looks one up.

        Raises:
            QueryError: a key names an unknown field or lacks one; nothing was read.
            ValidationError: a value does not fit its key field, or ``as_of`` is
                naive; nothing was read.
        """
        conn = self._conn()
        plan = self._latest_many_plan(keys, conn.features, as_of)
        return drive(plan.lookups(self.model), conn)

    def _conn(self) -> Connection:
        """The connection the query runs on: its own, else the default one."""
        conn = self._connection
        return get_default_connection() if conn is None else conn



@overload
def bind(model: type[M], connection: AsyncConnection,
           state: QueryState | None = None) -> AsyncQuerySet[M]: ...


@overload
def bind(model: type[M], connection: Connection | None,
           state: QueryState | None = None) -> QuerySet[M]: ...


def bind(model: type[M], connection: Connection | AsyncConnection | None,
           state: QueryState | None = None) -> QuerySet[M] | AsyncQuerySet[M]:
    """A query of ``model`` on ``connection``: an AsyncQuerySet on an async one."""
    if isinstance(connection, AsyncConnection):
        return AsyncQuerySet(model, connection=connection, state=state)
    return QuerySet(model, connection=connection, state=state)
