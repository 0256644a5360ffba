"""The asyncio connection: the sync connection's plans, carried out by an event loop.

An `AsyncConnection` runs the same write plans as
`Connection` (`SaveSchedule`:
prior reads, main writes, companion writes, several batches on the way at
once, the fold of outcomes into one result per entity) and the same schema plans
(`plan_steps()`, `apply_steps()`);
it only awaits the backend calls the steps ask for. The independent calls
of one step (the writes to the current-value and alternate-key tables, the
reads of several salts) go out concurrently.

Open one with `connect_async()`:

    async with ts.connect_async("bigtable://my-project/my-instance") as db:
        await db.save_all(events)
        async for event in db.range(ServerMetric, start, end, hostname="h1"):
            ...
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from tsmodel import errors
from tsmodel.backends import async_backend_for, url_settings
from tsmodel.declare.spec import class_spec
from tsmodel.ground.base import (
    AsyncBackend,
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
    thread_backed,
)
from tsmodel.io import pandas as _pandas
from tsmodel.io import polars as _polars
from tsmodel.io.arrow import DEFAULT_BATCH_ROWS, ArrowColumns
from tsmodel.io.frames import DEFAULT_FRAME_ROWS, FrameSave
from tsmodel.plan import schema
from tsmodel.plan.cursors import Page, secret_bytes
from tsmodel.plan.reads import LatestResult, QueryState
from tsmodel.plan.results import TableWrite, WriteResult
from tsmodel.plan.schedule import DEFAULT_FLOW, WriteFlow, check_write_options
from tsmodel.run._connection_state import DEFAULT_BATCH_SIZE, ConnectionState
from tsmodel.run.drive import adrive, afirst, chunk_saves
from tsmodel.run.fanout import AStreamed, Streamed, astream
from tsmodel.run.frame_steps import FrameResult, frame_steps
from tsmodel.run.observe import Observer, Operation, paced, pause_before
from tsmodel.run.progress import Progress, Writing
from tsmodel.run.query import Query, Read, changed_instance
from tsmodel.settings import DEFAULT_SETTINGS, Settings

__all__ = ["AsyncConnection", "AsyncQuerySet", "connect_async", "DEFAULT_BATCH_SIZE"]

M = TypeVar("M")
_R = TypeVar("_R")


class AsyncConnection(ConnectionState[AsyncBackend]):
    """An asyncio backend plus the model-level operations on it.

    Every method that reads or writes is a coroutine; queries come from
    `range()`, `current()` and `snapshot()` (or
    ``Model.using(db)``) and run with ``async for`` or ``await qs.count()``.

    Args:
        backend: an open `AsyncBackend`.
        batch_size: entities per bulk write call.
        flow: what a save keeps on the way at once (as for
            `tsmodel.Connection`).
        settings: as for `tsmodel.Connection`.
        cursor_secret: the key that signs page tokens (as for
            `tsmodel.Connection`): tokens of a sync and an async
            connection with the same secret are interchangeable.

    Raises:
        ConfigurationError: telemetry is on but OpenTelemetry is not installed,
            or ``cursor_secret`` is too short.
    """

    def __init__(self, backend: AsyncBackend, *,
                 batch_size: int = DEFAULT_BATCH_SIZE, flow: WriteFlow = DEFAULT_FLOW,
                 settings: Settings = DEFAULT_SETTINGS,
                 cursor_secret: str | bytes | None = None) -> None:
        super().__init__(backend, batch_size=batch_size, flow=flow, settings=settings,
                         cursor_secret=cursor_secret)
        #: Latest-value caching is not offered on async connections (yet).
        self.cache = None

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the backend. Idempotent."""
        _OPENED.discard(self)
        await self.backend.close()

    # -- schema -------------------------------------------------------------------

    async def create_tables(self, *models: type) -> list[TableSpec]:
        """Create every table the models need, or bring it in step (idempotent): the
        same schema plan, applied, with the same result and errors as
        `tsmodel.Connection.create_tables()`."""
        plan = await self.plan_schema(*models)
        await self.apply_schema(plan)
        return list(plan.tables)

    async def plan_schema(self, *models: type, drop: bool = False,
                          drop_tables: Iterable[str] = ()) -> schema.SchemaPlan:
        """The schema plan of the models here (see `tsmodel.Connection.plan_schema()`)."""
        plan: schema.SchemaPlan = await adrive(schema.plan_steps(*models, drop=drop,
                                                                 drop_tables=drop_tables), self)
        return plan

    async def apply_schema(self, plan: schema.SchemaPlan) -> tuple[schema.Change, ...]:
        """Carry out a schema plan (see `tsmodel.Connection.apply_schema()`)."""
        changes: tuple[schema.Change, ...] = await adrive(schema.apply_steps(plan), self)
        return changes

    async def drop_tables(self, *models: type) -> None:
        """Delete every table of the models, with their data."""
        await adrive(schema.drop_steps(*models), self)

    # -- writes -------------------------------------------------------------------

    async def save(self, entity: Any, *, accept_expired: bool = False) -> None:
        """Write one entity to its main table and its companion tables.

        Raises:
            ValidationError: the entity cannot be stored; nothing was written.
            RetentionError: it is older than a family's max age.
            SaveError: a write failed or its outcome is unknown.
        """
        await self.save_all([entity], accept_expired=accept_expired, progress=False)

    async def save_all(self, entities: Iterable[Any], *, raise_on_failure: bool = True,
                       accept_expired: bool = False, validate_first: bool = True,
                       progress: Progress = None) -> WriteResult:
        """Write many entities in batches; report the outcome entity by entity.

        The same plan as `tsmodel.Connection.save_all()`, with the same
        arguments (``progress`` too: a bar, or a callable called in the event
        loop) and result; the writes of one step go out concurrently.

        Returns:
            The `WriteResult`, one entry per entity: WRITTEN,
            FAILED, UNKNOWN (the server may have applied it) or PARTIAL.

        Raises:
            ValidationError: an entity cannot be stored; nothing was written.
            RetentionError: events are already older than a max age.
            SaveError: with ``raise_on_failure``, when some writes failed.
        """
        with Writing(self, "save", progress) as w:
            steps = w.save(entities, accept_expired, validate_first)
            result = w.done(await adrive(steps, self, w.op))
        if raise_on_failure:
            result.raise_for_failures()
        return result

    async def save_frame(self, model: type, frame: Any, *, rows: int = DEFAULT_FRAME_ROWS,
                         raise_on_failure: bool = True, accept_expired: bool = False,
                         validate_first: bool = True,
                         progress: Progress = None) -> FrameResult:
        """Save the rows of a data frame whose columns are ``model``'s fields, as events.

        The same sequence, arguments and result as
        `tsmodel.Connection.save_frame()`: ``rows`` rows at a time, each chunk
        saved by `save_all()`.
        """
        steps = frame_steps(FrameSave(model, frame, rows, validate_first=validate_first,
                                      accept_expired=accept_expired),
                            progress, raise_on_failure)
        return await adrive(chunk_saves(steps, accept_expired), self)

    async def delete(self, entity: Any) -> None:
        """Delete one event from every table of its model (see `delete_all()`).

        Raises:
            ValidationError: the entity's key or time cannot be encoded.
            SaveError: a deletion failed or its outcome is unknown.
        """
        await self.delete_all([entity], progress=False)

    async def delete_all(self, entities: Iterable[Any], *, raise_on_failure: bool = True,
                         progress: Progress = None) -> WriteResult:
        """Delete events from every table of their models; report entity by entity.

        The same plan as `tsmodel.Connection.delete_all()`, with the same
        arguments and result; the calls of one step go out concurrently.

        Raises:
            ValidationError: an entity's key or time cannot be encoded.
            SaveError: with ``raise_on_failure``, when some deletions failed.
        """
        with Writing(self, "delete", progress) as w:
            result = w.done(await adrive(w.delete(entities), self, w.op))
        if raise_on_failure:
            result.raise_for_failures()
        return result

    async def update(self, model: type[M], /, **fields: Any) -> M:
        """Change value fields of one stored event (see `tsmodel.Connection.update()`).

        Raises:
            QueryError: a key field or the time is missing, or a name is not
                a value field.
            DoesNotExist: no such event is stored (``Model.DoesNotExist``).
            ValidationError: a new value cannot be stored, or the time (or a key
                field) cannot, as a save would refuse it; nothing was written.
            SaveError: a write failed or its outcome is unknown.
        """
        return await AsyncQuerySet(model, connection=self._starting(model))._update_event(fields)

    async def send(self, write: TableWrite) -> list[MutationOutcome]:
        """Send one table write (an operation of its own: a job's ``write``).

        Returns:
            One outcome per row (a refused call fails every row).
        """
        op = self._observer.operation("write", write.table)
        try:
            return await self._send(write, op)
        finally:
            op.end()

    async def _send(self, write: TableWrite, op: Operation) -> list[MutationOutcome]:
        # A batch of declared rows stays one: the backend writes it from its tuples.
        rows = write.rows if isinstance(write.rows, DeclaredRows) else list(write.rows)
        pause = pause_before(self.pacer, len(rows), op)
        if pause > 0:
            await asyncio.sleep(pause)
        with paced(self.pacer):
            return await self._mutate(write.table, rows, op)

    async def _mutate(self, table: str, rows: Sequence[Any],
                      op: Operation) -> list[MutationOutcome]:
        try:
            outcomes: list[MutationOutcome] = await op.acall(
                table, rows, lambda: self.backend.mutate_rows(table, rows))
            return outcomes
        except errors.BackendError as exc:
            return [MutationOutcome(MutationStatus.FAILED, exc)] * len(rows)

    async def _read_whole(self, request: ReadRequest, op: Operation | None,
                          failures: bool) -> list[Row] | errors.BackendError:
        """The rows of a `Read` step (see `tsmodel.Connection._read_whole()`)."""
        try:
            if op is None:
                return await self.read_all(request)
            rows, count = op.read(request.table, lambda: self.backend.read_rows(request))
            return [row async for row in op.astream(request.table, rows, count, counted=False,
                                                    ends=False)]
        except errors.BackendError as exc:
            if failures:
                return exc
            raise

    # -- reads --------------------------------------------------------------------

    def read(self, request: ReadRequest) -> AsyncIterator[Row]:
        """Stream the rows of one backend read (an operation: a ``lookup`` by row keys,
        else a ``read``)."""
        op, rows, count = self._observer.reading(request, self.backend.read_rows)
        return op.astream(request.table, rows, count)

    async def blocking_reader(self) -> _BlockingReads | None:
        """The reads to take in worker threads, when the backend's reads are a
        blocking backend's (`ThreadBacked`): that backend's reads, observed as
        `read()`'s. ``None`` when the backend reads by itself."""
        backend = thread_backed(self.backend)
        if backend is None:
            return None
        return _BlockingReads(self._observer, await backend.blocking())

    async def read_all(self, request: ReadRequest) -> list[Row]:
        """The rows of one backend read, in a list."""
        return [row async for row in self.read(request)]

    # -- queries: thin starters of an AsyncQuerySet on this connection ---------------

    def range(self, model: type[M], start: datetime, end: datetime, *,
              allow_scan: bool = False, **key_fields: Any) -> AsyncQuerySet[M]:
        """``model.using(adb).range(...)``: an `AsyncQuerySet` on this connection."""
        return AsyncQuerySet(model, connection=self._starting(model)).range(
            start, end, allow_scan=allow_scan, **key_fields)

    def current(self, model: type[M], *, allow_scan: bool = False,
                **key_prefix: Any) -> AsyncQuerySet[M]:
        """``model.using(adb).current(...)``: an `AsyncQuerySet` on this connection."""
        return AsyncQuerySet(model, connection=self._starting(model)).current(
            allow_scan=allow_scan, **key_prefix)

    def snapshot(self, model: type[M], period: datetime,
                 **key_prefix: Any) -> AsyncQuerySet[M]:
        """``model.using(adb).snapshot(...)``: an `AsyncQuerySet` on this connection."""
        return AsyncQuerySet(model, connection=self._starting(model)).snapshot(period,
                                                                               **key_prefix)

    async def latest(self, model: type[M], *, as_of: datetime | None = None,
                     **key_fields: Any) -> M:
        """The newest event of one entity, at or before ``as_of`` if given (see
        `tsmodel.QuerySet.latest()`).

        Raises:
            QueryError: key fields are missing.
            DoesNotExist: the entity has no event (``Model.DoesNotExist``).
        """
        return await AsyncQuerySet(model, connection=self._starting(model)).latest(
            as_of=as_of, **key_fields)

    async def latest_many(self, model: type[M],
                          keys: Iterable[Mapping[str, Any] | tuple[Any, ...]], *,
                          as_of: datetime | None = None) -> LatestResult[M]:
        """The newest event of each of many entities (a `LatestResult`;
        see `tsmodel.QuerySet.latest_many()`).

        Raises:
            QueryError: a key names an unknown field or lacks one; nothing was read.
            ValidationError: a value does not fit its key field; nothing was read.
        """
        return await AsyncQuerySet(model, connection=self._starting(model)).latest_many(
            keys, as_of=as_of)

    def _starting(self, model: type) -> AsyncConnection:
        """This connection, for a query of ``model``: a clear error for an instance of a
        model, or a class that is not one."""
        class_spec(model)
        return self


class _BlockingReads:
    """`AsyncConnection.read()` on the blocking backend under a `ThreadBacked` one,
    for worker threads (a `tsmodel.run.fanout.Reader`)."""

    __slots__ = ("_observer", "_backend")

    def __init__(self, observer: Observer, backend: Backend) -> None:
        self._observer, self._backend = observer, backend

    def read(self, request: ReadRequest) -> Iterator[Row]:
        return self._observer.read(request, self._backend.read_rows)

    @property
    def reads_batches(self) -> bool:
        """Whether the backend reads rows in `CellBatch` es of its own."""
        return own_batch_reader(self._backend) is not None

    def read_batches(self, request: ReadRequest) -> Iterator[CellBatch]:
        """`read()` in `CellBatch` es: the backend's ``read_batches``, or its rows
        put in batches when it has none."""
        return self._observer.read_batches(request, batch_reader(self._backend))


class _Connecting:
    """What `connect_async()` returns: awaitable, or an ``async with`` context."""

    def __init__(self, url: str | None, batch_size: int, flow: WriteFlow,
                 settings: dict[str, Any], cursor_secret: bytes | None = None) -> None:
        self._url = url
        self._batch_size = batch_size
        self._flow = flow
        self._settings = settings
        self._secret = cursor_secret
        self._conn: AsyncConnection | None = None

    async def _open(self) -> AsyncConnection:
        settings = url_settings(self._url, self._settings)
        backend = async_backend_for(self._url, settings)
        try:
            conn = AsyncConnection(backend, batch_size=self._batch_size, flow=self._flow,
                                   settings=settings, cursor_secret=self._secret)
        except BaseException:
            await backend.close()
            raise
        _OPENED.add(conn)
        return conn

    def __await__(self) -> Generator[Any, None, AsyncConnection]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncConnection:
        self._conn = await self._open()
        return self._conn

    async def __aexit__(self, *exc: object) -> None:
        if self._conn is not None:
            await self._conn.close()

    def __getattr__(self, name: str) -> Any:
        # Only for names not found otherwise: a connection's, used on this not
        # yet awaited opening, is the missing ``await``.
        if not name.startswith("_") and hasattr(AsyncConnection, name):
            raise AttributeError(
                f"{name!r} is a method of the connection that connect_async() opens, "
                "not of connect_async()'s result: write `db = await "
                "ts.connect_async(url)` or `async with ts.connect_async(url) as db:`",
                name=name, obj=self)
        raise AttributeError(
            f"connect_async()'s result has no attribute {name!r}; await it for the "
            "connection", name=name, obj=self)


#: The connections `connect_async()` opened that are not closed (nor garbage): while
#: one is, a blocking query with no default connection refuses to fall back to an
#: empty in-memory store (`tsmodel.run.connection.get_default_connection()`).
_OPENED: weakref.WeakSet[AsyncConnection] = weakref.WeakSet()


def opened_async() -> bool:
    """Whether a connection `connect_async()` opened is still open."""
    return len(_OPENED) > 0


def connect_async(url: str | None = None, *,
                  batch_size: int = DEFAULT_BATCH_SIZE,
                  flow: WriteFlow = DEFAULT_FLOW, cursor_secret: str | bytes | None = None,
                  **settings: Any) -> _Connecting:
    """Open an `AsyncConnection`: ``db = await connect_async(url)``.

    Or ``async with connect_async(url) as db:``, which closes it at the end.
    Call it from a running event loop. An async connection is never the
    default one: queries run on it with ``Model.using(db)`` or ``db.range(...)``.
    While it is open, a blocking query with no default connection (and no
    ``TSMODEL_URL``) raises `ConfigurationError` rather than answer from an
    empty in-memory store.

    Args:
        url: as for `tsmodel.connect()`. The embedded store runs its
            SQLite calls in worker threads; Bigtable URLs use the gRPC
            asyncio channel of google-cloud-bigtable's async data client.
        batch_size: entities per bulk write call.
        flow: what a save keeps on the way at once (`WriteFlow`).
        cursor_secret: the key that signs page tokens (see `tsmodel.Connection`).
        **settings: as for `tsmodel.connect()`.

    Raises:
        ConfigurationError: the URL or a setting is not understood (when awaited);
            ``batch_size``, ``flow`` or ``cursor_secret`` is wrong (at once).
    """
    check_write_options(batch_size, flow)
    return _Connecting(url, batch_size, flow, settings, secret_bytes(cursor_secret))


# -- the asyncio query runner ----------------------------------------------------------


class AsyncQuerySet(Query[M]):
    """A `Query` run on an event loop, on an `AsyncConnection`.

    ``Model.using(adb)`` and ``adb.range(Model, ...)`` return one. It refines
    as any `Query` (each refinement returns a new AsyncQuerySet) and runs with
    ``async for event in qs``, ``await qs.count()``, ``await qs.first()``,
    ``await qs.exists()`` and ``await qs.latest(**key_fields)``: the
    coroutine forms of `tsmodel.QuerySet`'s, its sibling; the plans are
    the same `Query`'s. Reads of several salts or key ranges stream side by
    side (on Cloud Bigtable) and are merged in order by the one merge;
    instances come out as soon as they are certain.
    """

    _runs_async = True

    def __init__(self, model: type[M], *, connection: AsyncConnection,
                 state: QueryState | None = None) -> None:
        super().__init__(model, state=state)
        if not isinstance(connection, AsyncConnection):
            raise errors.ArgumentTypeError(
                f"AsyncQuerySet(connection=...): an AsyncQuerySet runs on an AsyncConnection, "
                f"not {type(connection).__name__}: bind a blocking one with Model.using(db)")
        self._connection = connection

    def _bound_features(self) -> Features:
        return self._connection.features

    def using(self, connection: AsyncConnection) -> AsyncQuerySet[M]:
        """Run on another `AsyncConnection` (for a blocking one: ``Model.using(db)``)."""
        return AsyncQuerySet(self.model, connection=connection, state=self._state)

    def rollup(self, every: str | timedelta) -> AsyncQuerySet[Any]:
        """Queries of the model's rollup table of bucket size ``every``; see
        `tsmodel.QuerySet.rollup()`."""
        return AsyncQuerySet(self._rollup_of(every), connection=self._connection)

    def __aiter__(self) -> AsyncIterator[M]:
        return aiter(self.aiterator())

    def aiterator(self) -> AStreamed[M]:
        """The matching instances, with ``async for``; nothing is cached.

        Stopping early cancels the reads still streaming: at once with
        ``aclose()`` (``contextlib.aclosing``), else when the iterator is
        collected. Its ``cursor`` and its resume after a broken read are
        those of `QuerySet.iterator()`.
        """
        return self._astream()

    if not TYPE_CHECKING:  # refused at run time; to type checkers, no such methods
        def __iter__(self) -> Iterator[M]:
            raise errors.ArgumentTypeError(f"{self!r} runs on an AsyncConnection: iterate it with "
                                           "`async for`")

        def iterator(self) -> Streamed[M]:
            raise errors.ArgumentTypeError(
                f"{self!r} runs on an AsyncConnection: use `async for` or "
                "aiterator()")

        def __bool__(self) -> bool:
            raise errors.ArgumentTypeError(
                f"{self!r} runs on an AsyncConnection: use `await qs.exists()`")

        def _conn(self) -> None:
            raise errors.ArgumentTypeError(
                f"{self!r} runs on an AsyncConnection: use `async for` and "
                "`await qs.first()` / `count()` / `exists()` / `latest()`")

    def _astream(self, more: int | None = None, sink: str = "instances") -> AStreamed[M]:
        conn = self._connection
        return self._aopen(self._read(conn.features, conn.cursor_secret, more, sink))

    def _aopen(self, read: Read) -> AStreamed[M]:
        """Start streaming ``read`` on this query's connection."""
        return astream(read.plan, self._connection, self.model, read.codec, read.start,
                       sink=read.sink)

    async def page(self, size: int, after: str | None = None) -> Page[M]:
        """One page of the query and the next page's token; see `QuerySet.page()`."""
        conn = self._connection
        items = self._aopen(self._paged(size, after, conn.features, conn.cursor_secret))
        try:
            found = []
            async for item in items:
                found.append(item)
                if len(found) == size:
                    break
            token = items.cursor
            more = await afirst(items) is not None
        finally:
            await items.aclose()
        return Page(found, token if more else None)

    async def count(self) -> int:
        """How many events match; see `QuerySet.count()`."""
        conn = self._connection
        n = 0
        async for _ in self._aopen(self._counting(conn.features, conn.cursor_secret)):
            n += 1
        return n

    async def exists(self) -> bool:
        """Whether any event matches (reads at most one)."""
        return (await self.first()) is not None

    async def first(self) -> M | None:
        """The first matching instance (after the cursor, if any), or ``None``."""
        return await afirst(self._astream(1))

    async def latest(self, *, as_of: datetime | None = None, **key_fields: Any) -> M:
        """The newest event of one entity (at or before ``as_of``); see `QuerySet.latest()`.

        Raises:
            QueryError: key fields are missing.
            ValidationError: ``as_of`` is naive.
            DoesNotExist: the entity has no event (``Model.DoesNotExist``).
        """
        return self._found(await self._latest_query(key_fields, as_of).first(), key_fields)

    async def latest_many(self, keys: Iterable[Mapping[str, Any] | tuple[Any, ...]], *,
                          as_of: datetime | None = None) -> LatestResult[M]:
        """The newest event of each of many entities (at or before ``as_of``); see
        `QuerySet.latest_many()`.

        The reads go out as tasks, at most 8 at once.
        """
        conn = self._connection
        plan = self._latest_many_plan(keys, conn.features, as_of)
        result: LatestResult[M] = await adrive(plan.lookups(self.model), conn)
        return result

    # -- changes --------------------------------------------------------------------

    async def delete(self, *, allow_scan: bool = False,
                     raise_on_failure: bool = True) -> WriteResult:
        """Delete every event the query selects; see `QuerySet.delete()`."""
        events = [e async for e in self._to_change("delete", allow_scan)]
        return await self._connection.delete_all(events, raise_on_failure=raise_on_failure)

    async def update(self, *, allow_scan: bool = False, raise_on_failure: bool = True,
                     **changes: Any) -> WriteResult:
        """Set value fields of every event the query selects; see `QuerySet.update()`."""
        self._check_changes(changes)
        changing = self._to_change("update", allow_scan)
        events = [changed_instance(e, changes) async for e in changing]
        return await self._connection.save_all(events, raise_on_failure=raise_on_failure)

    async def _update_event(self, fields: dict[str, Any]) -> M:
        """`AsyncConnection.update()`: change one stored event."""
        query, changes = self._event_query(fields)
        updated = self._changed_event(await query.first(), fields, changes)
        await self._connection.save(updated)
        return updated

    # -- columnar results -----------------------------------------------------------

    def to_arrow_batches(self, rows: int = DEFAULT_BATCH_ROWS) -> AsyncIterator[Any]:
        """The matching events as record batches, with ``async for``; see
        `QuerySet.to_arrow_batches()`."""
        return self._acolumn_batches(self._columns("to_arrow_batches()"), rows)

    async def to_arrow(self) -> Any:
        """The matching events as a ``pyarrow.Table``; see `QuerySet.to_arrow()`."""
        return await self._aarrow_table("to_arrow()")

    async def to_pandas(self) -> Any:
        """The matching events as a ``pandas.DataFrame``; see `QuerySet.to_pandas()`."""
        _pandas.require_all("to_pandas()")
        return _pandas.frame_of(await self._aarrow_table("to_pandas()"),
                                nan_columns=self._nan_columns())

    async def to_polars(self) -> Any:
        """The matching events as a ``polars.DataFrame``; see `QuerySet.to_polars()`."""
        _polars.require_all("to_polars()")
        return _polars.frame_of(await self._aarrow_table("to_polars()"))

    async def _aarrow_table(self, what: str) -> Any:
        columns = self._columns(what)
        return columns.table([b async for b in self._acolumn_batches(columns,
                                                                     DEFAULT_BATCH_ROWS)])

    def _acolumn_batches(self, columns: ArrowColumns, rows: int) -> AsyncIterator[Any]:
        """`QuerySet._column_batches()`, read asynchronously."""
        conn = self._connection
        # A thread-backed backend's reads run on its blocking backend, which reads batches.
        read = self._column_read(conn.features, conn.cursor_secret, columns,
                                 thread_backed(conn.backend) is not None)
        if read.sink == "batches":  # the rows in columns, no Row
            return columns.acell_batches(read.plan.codec, self._aopen(read),
                                         read.plan.only, rows)
        if read.sink == "rows":
            return columns.arow_batches(read.plan.codec, self._aopen(read), read.plan.only, rows)
        return columns.abatches(self._aopen(read), rows)  # type: ignore[arg-type]
