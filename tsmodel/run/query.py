"""Queries: an immutable, lazy QuerySet that runs compiled read plans.

Every refinement returns a new QuerySet; only iteration (and ``count()``,
``first()``, ``latest()``, ``bool()``) reads. The query compiles to a
`ReadPlan` (`tsmodel.plan.reads`), which
`tsmodel.run.fanout` runs: it streams the plan's requests (side by side
where the backend gains from it) into the one merge of
`tsmodel.plan.merge`, which decodes, merges, checks, reverses and limits.
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from datetime import datetime, timedelta
from itertools import islice
from typing import Any, ClassVar, Generic, TypeVar, overload

import attrs
from typing_extensions import Self

from tsmodel import errors
from tsmodel.declare.model import provide_query_methods
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.encoding.ordering import Interval
from tsmodel.encoding.timestamps import to_micros
from tsmodel.ground.base import Features, ReadRequest
from tsmodel.io import pandas as _pandas
from tsmodel.io import polars as _polars
from tsmodel.io.arrow import DEFAULT_BATCH_ROWS, ArrowColumns
from tsmodel.plan.cursors import CursorCodec, Page, Position, cursor_codec
from tsmodel.plan.merge import reads_whole_rows
from tsmodel.plan.reads import (
    LatestResult,
    QueryState,
    ReadPlan,
    compile_latest_many,
    compile_query,
    count_plan,
    latest_state,
    queryable_fields,
)
from tsmodel.plan.results import WriteResult
from tsmodel.run.async_connection import AsyncConnection
from tsmodel.run.connection import Connection, get_default_connection
from tsmodel.run.fanout import AStreamed, Streamed, astream, stream
from tsmodel.run.latest import arun_latest_many, run_latest_many
from tsmodel.run.resample import Resample, every_of

__all__ = ["QuerySet", "AsyncQuerySet", "ReadPlan", "Model", "Page", "Streamed", "AStreamed"]

M = TypeVar("M")


class QuerySet(Generic[M]):
    """A lazy, immutable query over one model.

    Build one with ``Model.range(start, end, **key_fields)`` or
    ``Model.current(**key_prefix)``; refine it with `limit()`,
    `newest_first()`, `only()` and `using()`; run it by iterating,
    or with `count()` and `first()`; page through it with `page()` and
    re-open it after a cursor with `after()`.
    """

    def __init__(self, model: type[M], *,
                 connection: Connection | AsyncConnection | None = None,
                 state: QueryState | None = None) -> None:
        self.model = model
        self._spec = spec_of(model)
        self._connection = connection
        self._state = state if state is not None else QueryState()

    # -- building -----------------------------------------------------------------

    def _clone(self, **changes: Any) -> Self:
        return type(self)(self.model, connection=self._connection,
                          state=attrs.evolve(self._state, **changes))

    def _chosen(self, **changes: Any) -> Self:
        """A clone reading what ``changes`` say; refinements given before stay."""
        qs = self._clone(**changes)
        compile_query(self._spec, qs._state)  # fail fast, no I/O
        return qs

    def range(self, start: datetime, end: datetime, *, allow_scan: bool = False,
              **key_fields: Any) -> Self:
        """Events with ``start <= timestamp < end`` of the entities the key fields select.

        Refinements made before (``limit``, ``newest_first``, ``only``) are kept.

        Args:
            start: inclusive, timezone-aware.
            end: exclusive, timezone-aware.
            allow_scan: run even when the key fields given are not a prefix of
                the row key (the read then scans beyond that prefix).
            **key_fields: key field values; they must form a prefix of the row
                key (after constants and the salt).

        Raises:
            ValidationError: a naive datetime or a value that does not fit.
            QueryError: an unknown field name or ``start > end``.
        """
        start_us = self._time_bound("start", start)
        end_us = self._time_bound("end", end)
        if start_us > end_us:
            raise errors.QueryError(f"{self._spec.name}: start {start} is after end {end}")
        self._check_fields(key_fields, queryable_fields(self._spec))
        return self._chosen(mode="range", start_us=start_us, end_us=end_us,
                            fields=tuple(key_fields.items()), allow_scan=allow_scan,
                            snapshot_us=None)

    def current(self, *, allow_scan: bool = False, **key_prefix: Any) -> Self:
        """The newest event of each entity, read from the current-value table.

        Args:
            allow_scan: allow key fields that are not a prefix of its key.
            **key_prefix: key field values forming a prefix of the key; none
                for the whole inventory.

        Raises:
            QueryError: the model declares no current-value table.
        """
        self._require_current()
        assert self._spec.current_key is not None
        self._check_fields(key_prefix, self._spec.current_key.fields)
        return self._chosen(mode="current", start_us=None, end_us=None,
                            fields=tuple(key_prefix.items()), allow_scan=allow_scan,
                            snapshot_us=None)

    def snapshot(self, period: datetime, **key_prefix: Any) -> Self:
        """Every event of one period, read from that period's snapshot table.

        The snapshot table (e.g. ``SENSOR_20170726``) holds only that period,
        so reading all of it is the designed query: no scan is refused.

        Args:
            period: any instant of the period (timezone-aware).
            **key_prefix: key fields of the snapshot's key, as a prefix.

        Raises:
            QueryError: the model declares no snapshot.
        """
        snap = self._spec.snapshot
        if snap is None:
            raise errors.QueryError(
                f"{self._spec.name} declares no snapshot (snapshot=ts.snapshot(...))")
        start, end = snap.bounds(self._time_bound("period", period))
        self._check_fields(key_prefix, snap.template.key_fields)
        return self._clone(mode="range", start_us=start, end_us=end,
                           fields=tuple(key_prefix.items()), allow_scan=True, snapshot_us=start)

    def limit(self, n: int) -> Self:
        """At most ``n`` events."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"limit must be an int, got {n!r}")
        if n < 0:
            raise ValueError(f"limit must not be negative, got {n}")
        return self._clone(limit=n)

    def newest_first(self) -> Self:
        """Reverse row-key order: newest first within each entity."""
        return self._clone(newest_first=True)

    def only(self, *fields: str) -> Self:
        """Read only these value fields; the others come back as ``None``."""
        known = {v.name for v in self._spec.values}
        unknown = [f for f in fields if f not in known]
        if unknown:
            raise errors.QueryError(
                f"{self._spec.name}: only({', '.join(map(repr, unknown))}): not value fields "
                f"(value fields: {', '.join(sorted(known))})"
            )
        return self._clone(only=tuple(fields))

    def where(self, *, allow_client: bool = False, **conditions: Any) -> Self:
        """Only the events whose value fields meet ``conditions``, filtered on the server.

        Each condition is ``field=value`` or ``field__op=value`` with ``op``
        one of ``gt``, ``gte``, ``lt``, ``lte``, or ``field__range=(low,
        high)`` (both included); conditions on one field (here and in earlier
        ``where()`` calls) narrow each other, conditions on several fields all
        hold. A condition is about the value an event reads as: ``field=None``
        selects the events without a value of an ``Optional`` field (which
        match no other condition); an event stored without the cell of a
        field declared with a default (before the field existed) meets a
        condition when its default does.

        Bigtable applies a condition when the field has a column of its own and
        its codec's bytes sort like its values (``Int64``, ``Float64``,
        ``Utf8``, ``Bool``, ``Raw``): only the rows with a matching value are
        sent. A row per event gives exactly the events asked for; a bucket row
        comes whole when one of its events matches, and its other events are
        left out here. A server filter never selects a missing cell, so
        ``field=None``, a condition the field's default meets (or may meet: a
        factory), and a value without a sortable column of its own (a
        serialized event, a ``Text`` codec, the value in the qualifier) are
        refused, unless ``allow_client`` lets them be checked here on every
        event the other conditions leave. Conditions never lift the scan
        refusal: the key fields given still bound the rows read.
        ``explain()`` shows what the server filters and what the client checks.

        Args:
            allow_client: check on the client the conditions the server cannot apply.
            **conditions: ``field`` or ``field__op`` to a value of the field's type.

        Raises:
            QueryError: an unknown field or operator, a key field or the time
                (those are selected with ``range(...)``), a condition the
                server cannot apply without ``allow_client``, ``field=None`` of
                a field that is never ``None`` (not ``Optional``), or
                ``field=None`` and a value condition on one field.
            FieldTypeError: a value of the wrong type for its field.
            ValidationError: a NaN or ``None`` bound (``__gt=None``,
                ``__range=(None, x)``).
        """
        where = dict(self._state.where)
        for name_op, value in conditions.items():
            name, _, op = name_op.partition("__")
            interval = self._interval(name, op or "eq", value)
            if name in where and where[name].none != interval.none:
                is_none, other = (where[name], interval) if interval.none is False else (
                    interval, where[name])
                raise errors.QueryError(
                    f"{self._spec.name}.where(): {is_none.describe(name)} and "
                    f"{other.describe(name)} cannot both hold (an event has a value or "
                    "none): no event would match; drop one of the two")
            where[name] = where[name].narrowed(interval) if name in where else interval
        return self._chosen(where=tuple(where.items()),
                            allow_client=allow_client or self._state.allow_client)

    def _interval(self, name: str, op: str, value: Any) -> Interval:
        spec = self._spec
        known = {v.name: v for v in spec.values}
        if name not in known:
            what = ("a key field: give it to range(...) or current(...)"
                    if name in spec.key_fields else
                    "the time: give the range to range(start, end)"
                    if name == spec.timestamp_field else "not a field")
            raise errors.QueryError(
                f"{spec.name}.where({name}...): {name!r} is {what} (value fields: "
                f"{', '.join(known) or 'none'})")
        bounds = {"eq": (value, True, value, True), "gt": (value, False, None, True),
                  "gte": (value, True, None, True), "lt": (None, True, value, False),
                  "lte": (None, True, value, True)}
        given = [value]
        if op == "range":
            if not isinstance(value, (tuple, list)) or len(value) != 2:
                raise errors.QueryError(f"{spec.name}.where({name}__range=...): give "
                                        f"(low, high), got {value!r}")
            bounds["range"] = (value[0], True, value[1], True)
            given = list(value)
        if op not in bounds:
            raise errors.QueryError(
                f"{spec.name}.where({name}__{op}=...): unknown operator {op!r} (operators: "
                "gt, gte, lt, lte, range; none for equality; field=None for no value)")
        if op == "eq" and value is None:
            return self._no_value(known[name])
        for bound in given:
            self._check_bound(known[name], op, bound)
        low, low_closed, high, high_closed = bounds[op]
        return Interval(low, low_closed, high, high_closed)

    def _no_value(self, v: Any) -> Interval:
        """``field=None``: the events without a value of an ``Optional`` field."""
        if v.optional:
            return Interval(none=True)
        if v.has_default:
            default = "its factory's value" if v.factory_default else repr(v.default)
            raise errors.QueryError(
                f"{self._spec.name}.where({v.name}=None): {v.name} is never None: an event "
                f"stored without its cell (before the field existed) reads as its default "
                f"({default}); select the default's value with "
                f"where({v.name}=..., allow_client=True)")
        raise errors.QueryError(
            f"{self._spec.name}.where({v.name}=None): {v.name} is never None: it is not "
            "Optional, so every event has a value (a row without its cell is refused as "
            "damaged) and the condition would match nothing. To store events without a "
            f"value, declare {v.name}: Optional[...] = ts.value(default=None)")

    def _check_bound(self, v: Any, op: str, bound: Any) -> None:
        if bound is None:
            if op == "range":
                hint = f"for an open end give {v.name}__gte=low or {v.name}__lte=high"
            else:
                hint = f"for the events without a value use where({v.name}=None)" \
                    if v.optional else "give a value"
            raise errors.ValidationError(
                f"where({v.name}__{op}=...): None is no bound (no value compares with it); "
                f"{hint}", model=self._spec.name, field=v.name, value=bound)
        expected = v.accepted_types
        if not isinstance(bound, expected) or (isinstance(bound, bool)
                                               and bool not in expected):
            raise errors.FieldTypeError(
                f"where(): expected {'/'.join(t.__name__ for t in expected)}, got "
                f"{type(bound).__name__} {bound!r}", model=self._spec.name, field=v.name,
                value=bound)
        if bound != bound:
            raise errors.ValidationError("where(): NaN is no bound (it matches nothing)",
                                         model=self._spec.name, field=v.name, value=bound)

    def history(self) -> Self:
        """Every version of each event: its amendments, oldest first, then the next event.

        For a model with a `tsmodel.version()` field, whose corrections are
        kept as cell versions. Each version comes as an instance whose version
        field says when it was recorded; a plain read returns the newest only.

        Raises:
            QueryError: the model has no version field, or the query reads the
                current-value table.
        """
        if self._spec.version_field is None:
            raise errors.QueryError(
                f"{self._spec.name} keeps no amendment history: declare a field "
                "'entered: datetime = ts.version()' to keep corrections as cell versions")
        if self._state.mode == "current":
            raise errors.QueryError(f"{self._spec.name}: history() reads range(...) queries")
        return self._clone(history=True)

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
        size = every_of(self._spec.name, every)
        for rollup in self._spec.rollups:
            if rollup.every == size:
                return _bound(rollup.model, self._connection)
        declared = ", ".join(r.label for r in self._spec.rollups) or "none"
        raise errors.QueryError(f"{self._spec.name} declares no rollup of {every!r} "
                                f"(rollups: {declared}); declare rollups=[ts.rollup(...)]")

    def resample(self, every: str | timedelta, *,
                 fields: str | Sequence[str] | None = None) -> Resample:
        """The range's aggregates per entity and bucket of ``every`` (``"1h"``, ``"1d"``).

        Iterate the result (``async for`` on an async connection) for
        `Window`s by entity then time: ``count`` and, per
        field, ``count``, ``sum``, ``min``, ``max``, ``last`` and ``mean``
        (``w.fields["cpu"].mean`` or ``w.cpu_mean``). Buckets start at
        multiples of ``every`` since the epoch (UTC), whatever the range's
        start: a window at an edge of the range holds only the events inside
        the range (``range(00:30, 10:30).resample("1h")`` starts with the
        window ``[00:00, 01:00)`` of the events from 00:30). Windows without
        an event are left out. A rollup table serves it
        when its bucket size divides ``every``, the range starts and ends on
        its bucket boundaries, it holds the fields and the query has no
        ``where()`` condition: else the raw events (those ``where()`` keeps)
        are read. ``resample(...).explain()`` says which.

        Args:
            every: the bucket size: a whole number of ``ms``, ``s``, ``min``,
                ``h`` or ``d`` (``"30s"``, ``"15min"``, ``"1h"``, ``"1d"``) or a
                ``timedelta``; no weeks or months (``"7d"`` windows start on
                Thursdays, as the epoch did).
            fields: the int and float value fields to aggregate (default: all;
                a string is one field's name).

        Raises:
            QueryError: not a ``range(...)`` query, a limit or
                ``newest_first()`` given, a field that is not a number, or a
                bucket size that is not one.
        """
        return Resample(self, every_of(self._spec.name, every), fields)

    def after(self, cursor: str | None) -> Self:
        """This query re-opened just after the instance a cursor was taken at.

        The cursor is a token from `Page.next`, from an
        iterator's ``cursor`` (`iterator()`), or from a
        `ReadInterruptedError`; it is checked when the query
        runs, against this query and the connection's ``cursor_secret``. A
        cursor is a position, not a snapshot: what was written since after
        the position comes, what was written before it does not. ``limit()``
        counts from the query's start, the instances before the cursor
        included.

        Args:
            cursor: the token, or ``None`` for the query's start.

        Raises:
            TypeError: ``cursor`` is not a str.
        """
        if cursor is not None and not isinstance(cursor, str):
            raise TypeError(f"a cursor is a str (a page's .next), got {type(cursor).__name__}")
        return self._clone(after=cursor)

    @overload
    def using(self, connection: AsyncConnection) -> AsyncQuerySet[M]: ...

    @overload
    def using(self, connection: Connection) -> QuerySet[M]: ...

    def using(self, connection: Connection | AsyncConnection) -> QuerySet[M]:
        """Run on ``connection`` instead of the default connection.

        On an `AsyncConnection` the result is an
        `AsyncQuerySet`: run it with ``async for`` and ``await``.
        """
        return _bound(self.model, connection, self._state)

    def __getitem__(self, item: slice) -> Self:
        if not isinstance(item, slice) or item.start not in (None, 0) or item.step is not None:
            raise TypeError("QuerySet supports only [:n] slices; use .limit(n)")
        if item.stop is None:
            return self
        current = self._state.limit if self._state is not None else None
        return self.limit(item.stop if current is None else min(current, item.stop))

    def __repr__(self) -> str:
        s = self._state
        fields = " ".join(f"{k}={v!r}" for k, v in s.fields)
        span = ""
        if s.mode == "range":
            span = f" [{s.start_us}us, {s.end_us}us)"
        extra = (f" limit={s.limit}" if s.limit is not None else "") + (
            " newest_first" if s.newest_first else "") + (" history" if s.history else "") + (
            " after=<cursor>" if s.after is not None else "")
        mode = (s.mode or "unbound") + span
        text = " ".join(p for p in (self._spec.name, mode, fields) if p)
        return f"<{type(self).__name__} {text}{extra}>"

    # -- running ------------------------------------------------------------------

    def explain(self, features: Features | None = None, *, count: bool = False) -> ReadPlan:
        """The read plan of this query, without reading anything.

        Args:
            features: the capabilities of the backend to plan for; by default
                those of the connection given with `using()`, else those
                of a backend without reverse scans. No connection is opened.
            count: the plan `count()` runs instead (no value read where
                each row is one event).
        """
        if features is None and self._connection is not None:
            features = self._connection.features
        plan = compile_query(self._spec, self._state, features)
        return (count_plan(plan) or plan) if count else plan

    def __iter__(self) -> Iterator[M]:
        # The generator under the iterator: a ``for`` loop takes each instance
        # without a Python-level __next__ call (measured: 5 % of a read).
        return self._stream()._items

    def __aiter__(self) -> AsyncIterator[M]:
        raise TypeError(f"{self!r} does not run on an AsyncConnection: bind it with "
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
        plan, codec, start = self._paged(size, after, conn.features, conn.cursor_secret)
        items = stream(plan, conn, self.model, codec, start)
        try:
            found = list(islice(items, size))
            token = items.cursor
            more = next(items, None) is not None
        finally:
            items.close()
        return Page(found, token if more else None)

    def _paged(self, size: int, after: str | None, features: Features,
               secret: bytes | None) -> tuple[ReadPlan, CursorCodec, Position | None]:
        """What `page()` reads: the plan of ``size`` instances and one more."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"a page size is an int of at least 1, got {size!r}")
        qs = self if after is None else self.after(after)
        plan, codec, start = qs._resumable(features, secret, size + 1)
        codec.check()
        return plan, codec, start

    def _stream(self, more: int | None = None, sink: str = "instances") -> Streamed[M]:
        conn = self._conn()
        plan, codec, start = self._resumable(conn.features, conn.cursor_secret, more)
        return stream(plan, conn, self.model, codec, start, sink=sink)

    def _resumable(self, features: Features, secret: bytes | None, more: int | None = None,
                   ) -> tuple[ReadPlan, CursorCodec, Position | None]:
        """The plan, the cursor codec and the start of this query (after its cursor).

        With ``more``: at most that many instances after the start (a page, ``first()``).
        """
        state = self._state
        plan = compile_query(self._spec, state, features)
        codec = cursor_codec(plan, state, secret)
        start = codec.decode(state.after) if state.after is not None else None
        if more is not None:
            emitted = start.emitted if start is not None else 0
            limit = emitted + more if state.limit is None else min(state.limit, emitted + more)
            if limit != state.limit:
                plan = compile_query(self._spec, attrs.evolve(state, limit=limit), features)
        return plan, codec, start

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
        plan = compile_query(self._spec, self._state, conn.features)
        counting = count_plan(plan)
        if counting is None or self._state.after is not None:  # the rest after a cursor
            return sum(1 for _ in self._stream())
        return sum(1 for _ in stream(counting, conn, self.model, sink="keys"))

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
        columns = ArrowColumns(self.model, self._state.only, "to_arrow_batches()")
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
        return _pandas.frame_of(self._arrow_table("to_pandas()"))

    def to_polars(self) -> Any:
        """The matching events as a ``polars.DataFrame``; see `tsmodel.io.polars`.

        Raises:
            ExtraNotInstalledError: polars or pyarrow is not installed
                (``pip install 'tsmodel-bigtable[polars]'``).
        """
        _polars.require_all("to_polars()")
        return _polars.frame_of(self._arrow_table("to_polars()"))

    def _arrow_table(self, what: str) -> Any:
        columns = ArrowColumns(self.model, self._state.only, what)
        return columns.table(self._column_batches(columns, DEFAULT_BATCH_ROWS))

    def _column_batches(self, columns: ArrowColumns, rows: int) -> Iterator[Any]:
        """Record batches of the matching events: rows decoded straight into columns
        where the plan's answer is whole rows, else records into columns."""
        conn = self._conn()
        plan, codec, start = self._resumable(conn.features, conn.cursor_secret)
        if start is None and plan.codec is not None and reads_whole_rows(plan):
            read = stream(plan, conn, self.model, codec, start, sink="rows")
            return columns.row_batches(plan.codec, read, plan.only, rows)
        return columns.batches(self._records(), rows)

    def _records(self) -> Iterator[dict[str, Any]]:
        """The matching events as records (times in µs), for the columnar results."""
        return self._stream(sink="records")  # type: ignore[return-value]

    def first(self) -> M | None:
        """The first matching instance (after the cursor, if any), or ``None``."""
        return _first(self._stream(1))

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
        cache = self._conn().cache
        if cache is not None and self._spec.current_key is not None and as_of is None:
            # The decoded instance is kept, tied to its current-value row, so
            # this connection's writes drop it; callers get copies. A hit
            # builds no query: the key fields were checked when it was kept.
            def lookup() -> tuple[ReadRequest, M | None]:
                qs = self._latest_query(key_fields)
                return qs.explain().requests[0], qs.first()

            token = ("latest", self.model, tuple(key_fields.items()))
            found = cache.memoize(token, lookup)
            return self._found(None if found is None else _copy(found), key_fields)
        return self._found(self._latest_query(key_fields, as_of).first(), key_fields)

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
        events = [_changed(e, changes) for e in qs.iterator()]
        return qs._conn().save_all(events, raise_on_failure=raise_on_failure)

    def _update_event(self, fields: dict[str, Any]) -> M:
        """``Connection.update``: change one stored event (see there)."""
        qs, changes = self._event_query(fields)
        found = qs.first()
        if found is None:
            raise self._missing_event(fields, changes)
        updated: M = _changed(found, changes)
        qs._conn().save(updated)
        return updated

    def _event_query(self, fields: dict[str, Any]) -> tuple[Self, dict[str, Any]]:
        """The query of one event named by its key fields and time, and the changes."""
        spec = self._spec
        key = {k: v for k, v in fields.items() if k in spec.key_fields}
        changes = {k: v for k, v in fields.items() if k not in key and k != spec.timestamp_field}
        self._check_changes(changes)
        missing = [n for n in (*spec.key_fields, spec.timestamp_field) if n not in fields]
        if missing:
            raise errors.QueryError(
                f"{spec.name}.update() names one event by every key field and its time; "
                f"missing: {', '.join(missing)}")
        when = fields[spec.timestamp_field]
        try:
            to_micros(when)
        except TypeError as exc:
            raise errors.FieldTypeError(str(exc), model=spec.name, field=spec.timestamp_field,
                                        value=when) from None
        except ValueError as exc:
            raise errors.ValidationError(str(exc), model=spec.name, field=spec.timestamp_field,
                                         value=when) from None
        base = type(self)(self.model, connection=self._connection)
        return base.range(when, when + timedelta(microseconds=1), **key), changes

    def _missing_event(self, fields: dict[str, Any], changes: dict[str, Any]) -> Exception:
        shown = ", ".join(f"{k}={v!r}" for k, v in fields.items() if k not in changes)
        error: Exception = self.model.DoesNotExist(  # type: ignore[attr-defined]
            f"{self._spec.name}: no event for {shown} to update")
        return error

    def _check_changes(self, changes: dict[str, Any]) -> None:
        spec = self._spec
        settable = [a.name for a in attrs.fields(self.model) if a.init  # type: ignore[arg-type]
                    and a.name not in spec.key_fields and a.name != spec.timestamp_field]
        wrong = [n for n in changes if n not in settable]
        if wrong:
            raise errors.QueryError(
                f"{spec.name}.update(): {', '.join(map(repr, wrong))} cannot be set: not a "
                f"value field (value fields: {', '.join(settable) or 'none'}; key fields and "
                "the time name the event)")
        if not changes:
            raise errors.QueryError(f"{spec.name}.update(): no value field to set")

    def _to_change(self, what: str, allow_scan: bool) -> Self:
        """This query, reading whole events, checked for a delete or an update."""
        s, spec = self._state, self._spec
        if s.mode != "range" or s.snapshot_us is not None:
            raise errors.QueryError(
                f"{spec.name}: {what}() changes the events of a range(...) query, not of "
                + ("a snapshot(...) query" if s.snapshot_us is not None else
                   "a current() query" if s.mode == "current" else "a query without one"))
        given = {name for name, _ in s.fields}
        missing = [n for n in spec.key_fields if n not in given]
        if missing and not allow_scan:
            raise errors.ScanRefusedError(
                f"{spec.name}: {what}() of a range without {', '.join(missing)} changes "
                f"the events of every such entity; pass {what}(allow_scan=True) to do it")
        return self._clone(only=None, history=False)

    def _latest_query(self, key_fields: dict[str, Any], as_of: datetime | None = None) -> Self:
        """The query `latest()` runs: the current-value row, or the newest main row
        (at or before ``as_of``)."""
        spec = self._spec
        base = type(self)(self.model, connection=self._connection)
        if spec.current_key is not None and as_of is None:
            self._check_complete(key_fields, spec.current_key.fields)
            return base.current(**key_fields)
        self._check_complete(key_fields, spec.key_fields)
        # The plan latest_many() makes of each entity: the same state.
        state = latest_state(spec, tuple(key_fields.items()), self._as_of_us(as_of))
        return base._chosen(**attrs.asdict(state, recurse=False))

    def _as_of_us(self, as_of: datetime | None) -> int | None:
        return None if as_of is None else self._time_bound("as_of", as_of, "latest()")

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
        plan = compile_latest_many(self._spec, keys, conn.features,
                                   as_of_us=self._as_of_us(as_of))
        return run_latest_many(plan, conn, self.model,
                               lambda entity: _first_of(entity, conn, self.model))

    def _found(self, found: M | None, key_fields: dict[str, Any]) -> M:
        if found is None:
            shown = ", ".join(f"{k}={v!r}" for k, v in key_fields.items())
            raise self.model.DoesNotExist(  # type: ignore[attr-defined]
                f"{self._spec.name}: no event for {shown or 'this key'}")
        return found

    def _conn(self) -> Connection:
        conn = self._connection
        if isinstance(conn, AsyncConnection):
            raise TypeError(f"{self!r} runs on an AsyncConnection: use `async for` and "
                            "`await qs.first()` / `count()` / `exists()` / `latest()`")
        if conn is not None:
            return conn
        return get_default_connection()

    def _time_bound(self, which: str, dt: datetime, what: str = "range") -> int:
        try:
            return to_micros(dt)
        except TypeError as exc:
            raise errors.FieldTypeError(f"{what} {which}: {exc}", model=self._spec.name,
                                        value=dt) from None
        except ValueError as exc:
            raise errors.ValidationError(f"{what} {which}: {exc}", model=self._spec.name,
                                         value=dt) from None

    def _check_fields(self, given: dict[str, Any], allowed: tuple[str, ...]) -> None:
        for name in given:
            if name not in allowed:
                raise errors.QueryError(
                    f"{self._spec.name}: {name!r} is not a key field here; key fields: "
                    f"{', '.join(allowed) or 'none'}"
                )

    def _check_complete(self, given: dict[str, Any], needed: tuple[str, ...]) -> None:
        self._check_fields(given, needed)
        missing = [n for n in needed if n not in given]
        if missing:
            raise errors.QueryError(
                f"{self._spec.name}.latest() needs every key field; missing: {', '.join(missing)}"
            )

    def _require_current(self) -> None:
        if self._spec.current_table is None:
            raise errors.QueryError(
                f"{self._spec.name} declares no current-value table; add current='TABLE' to "
                "@tsmodel.model to keep one, or use range(...).newest_first()"
            )


def _copy(instance: M) -> M:
    """A shallow copy of a model instance (3x faster than ``copy.copy`` on attrs slots)."""
    cls = type(instance)
    fields = cls.__attrs_attrs__  # type: ignore[attr-defined]
    return cls(**{a.alias: getattr(instance, a.name) for a in fields})


def _changed(instance: M, changes: dict[str, Any]) -> M:
    """A copy of a model instance with ``changes`` (validated as a new instance is)."""
    cls = type(instance)
    fields = cls.__attrs_attrs__  # type: ignore[attr-defined]
    return cls(**{a.alias: changes[a.name] if a.name in changes else getattr(instance, a.name)
                  for a in fields if a.init})


class AsyncQuerySet(QuerySet[M]):
    """A `QuerySet` on an `AsyncConnection`: run it on an event loop.

    ``Model.using(db)`` and ``db.range(...)`` return one. It refines like a
    QuerySet (same methods, each returning a new one) and runs with
    ``async for event in qs``, ``await qs.count()``, ``await qs.first()``,
    ``await qs.exists()`` and ``await qs.latest(**key_fields)``. Reads of
    several salts or key ranges stream side by side (on Cloud Bigtable) and
    are merged in order by the sync QuerySet's merge; instances come out as
    soon as they are certain.
    """

    def __aiter__(self) -> AsyncIterator[M]:
        return self.aiterator()

    def aiterator(self) -> AStreamed[M]:
        """The matching instances, with ``async for``; nothing is cached.

        Stopping early cancels the reads still streaming: at once with
        ``aclose()`` (``contextlib.aclosing``), else when the iterator is
        collected. Its ``cursor`` and its resume after a broken read are
        those of `QuerySet.iterator()`.
        """
        return self._astream()

    def _astream(self, more: int | None = None, sink: str = "instances") -> AStreamed[M]:
        conn = self._aconn()
        plan, codec, start = self._resumable(conn.features, conn.cursor_secret, more)
        return astream(plan, conn, self.model, codec, start, sink=sink)

    async def page(self, size: int,  # type: ignore[override]
                   after: str | None = None) -> Page[M]:
        """One page of the query and the next page's token; see `QuerySet.page()`."""
        conn = self._aconn()
        plan, codec, start = self._paged(size, after, conn.features, conn.cursor_secret)
        items = astream(plan, conn, self.model, codec, start)
        try:
            found = []
            async for item in items:
                found.append(item)
                if len(found) == size:
                    break
            token = items.cursor
            more = await _afirst(items) is not None
        finally:
            await items.aclose()
        return Page(found, token if more else None)

    def __iter__(self) -> Iterator[M]:
        raise TypeError(f"{self!r} runs on an AsyncConnection: iterate it with `async for`")

    def iterator(self) -> Streamed[M]:
        raise TypeError(f"{self!r} runs on an AsyncConnection: use `async for` or aiterator()")

    def __bool__(self) -> bool:
        raise TypeError(f"{self!r} runs on an AsyncConnection: use `await qs.exists()`")

    async def count(self) -> int:  # type: ignore[override]
        """How many events match; see `QuerySet.count()`."""
        conn = self._aconn()
        plan = compile_query(self._spec, self._state, conn.features)
        counting = count_plan(plan)
        n = 0
        async for _ in (self._astream() if counting is None or self._state.after is not None
                        else astream(counting, conn, self.model, sink="keys")):
            n += 1
        return n

    async def exists(self) -> bool:  # type: ignore[override]
        """Whether any event matches (reads at most one)."""
        return (await self.first()) is not None

    def to_arrow_batches(self,  # type: ignore[override]
                         rows: int = DEFAULT_BATCH_ROWS) -> AsyncIterator[Any]:
        """The matching events as record batches, with ``async for``; see
        `QuerySet.to_arrow_batches()`."""
        columns = ArrowColumns(self.model, self._state.only, "to_arrow_batches()")
        return self._acolumn_batches(columns, rows)

    async def to_arrow(self) -> Any:
        """The matching events as a ``pyarrow.Table``; see `QuerySet.to_arrow()`."""
        return await self._aarrow_table("to_arrow()")

    async def to_pandas(self) -> Any:
        """The matching events as a ``pandas.DataFrame``; see `QuerySet.to_pandas()`."""
        _pandas.require_all("to_pandas()")
        return _pandas.frame_of(await self._aarrow_table("to_pandas()"))

    async def to_polars(self) -> Any:
        """The matching events as a ``polars.DataFrame``; see `QuerySet.to_polars()`."""
        _polars.require_all("to_polars()")
        return _polars.frame_of(await self._aarrow_table("to_polars()"))

    async def _aarrow_table(self, what: str) -> Any:
        columns = ArrowColumns(self.model, self._state.only, what)
        return columns.table([b async for b in self._acolumn_batches(columns,
                                                                     DEFAULT_BATCH_ROWS)])

    def _acolumn_batches(self, columns: ArrowColumns, rows: int) -> AsyncIterator[Any]:
        """`QuerySet._column_batches()`, read asynchronously."""
        conn = self._aconn()
        plan, codec, start = self._resumable(conn.features, conn.cursor_secret)
        if start is None and plan.codec is not None and reads_whole_rows(plan):
            read = astream(plan, conn, self.model, codec, start, sink="rows")
            return columns.arow_batches(plan.codec, read, plan.only,
                                        rows)
        return columns.abatches(self._arecords(), rows)

    def _arecords(self) -> AsyncIterator[dict[str, Any]]:
        return self._astream(sink="records")  # type: ignore[return-value]

    async def first(self) -> M | None:  # type: ignore[override]
        """The first matching instance (after the cursor, if any), or ``None``."""
        return await _afirst(self._astream(1))

    async def latest(self, *, as_of: datetime | None = None,  # type: ignore[override]
                     **key_fields: Any) -> M:
        """The newest event of one entity (at or before ``as_of``); see `QuerySet.latest()`.

        Raises:
            QueryError: key fields are missing.
            ValidationError: ``as_of`` is naive.
            DoesNotExist: the entity has no event (``Model.DoesNotExist``).
        """
        return self._found(await self._latest_query(key_fields, as_of).first(), key_fields)

    async def delete(self, *, allow_scan: bool = False,  # type: ignore[override]
                     raise_on_failure: bool = True) -> WriteResult:
        """Delete every event the query selects; see `QuerySet.delete()`."""
        qs = self._to_change("delete", allow_scan)
        events = [e async for e in qs]
        return await self._aconn().delete_all(events, raise_on_failure=raise_on_failure)

    async def update(self, *, allow_scan: bool = False,  # type: ignore[override]
                     raise_on_failure: bool = True, **changes: Any) -> WriteResult:
        """Set value fields of every event the query selects; see `QuerySet.update()`."""
        self._check_changes(changes)
        qs = self._to_change("update", allow_scan)
        events = [_changed(e, changes) async for e in qs]
        return await self._aconn().save_all(events, raise_on_failure=raise_on_failure)

    async def _update_event(self, fields: dict[str, Any]) -> M:  # type: ignore[override]
        qs, changes = self._event_query(fields)
        found = await qs.first()
        if found is None:
            raise self._missing_event(fields, changes)
        updated: M = _changed(found, changes)
        await self._aconn().save(updated)
        return updated

    def _aconn(self) -> AsyncConnection:
        conn = self._connection
        assert isinstance(conn, AsyncConnection)
        return conn

    async def latest_many(self,  # type: ignore[override]
                          keys: Iterable[Mapping[str, Any] | tuple[Any, ...]], *,
                          as_of: datetime | None = None) -> LatestResult[M]:
        """The newest event of each of many entities (at or before ``as_of``); see
        `QuerySet.latest_many()`.

        The reads go out as tasks, at most 8 at once.
        """
        conn = self._connection
        assert isinstance(conn, AsyncConnection)
        plan = compile_latest_many(self._spec, keys, conn.features,
                                   as_of_us=self._as_of_us(as_of))
        return await arun_latest_many(plan, conn, self.model,
                                      lambda entity: _afirst_of(entity, conn, self.model))


def _first_of(plan: ReadPlan, conn: Connection, model: type[M]) -> M | None:
    """The first instance a plan selects (of a ``limit=1`` plan: its only one),
    for `QuerySet.latest_many()`."""
    return _first(stream(plan, conn, model))


async def _afirst_of(plan: ReadPlan, conn: AsyncConnection, model: type[M]) -> M | None:
    """`_first_of()` on an event loop."""
    return await _afirst(astream(plan, conn, model))


def _first(items: Streamed[M]) -> M | None:
    """The first of ``items``, or ``None``; the reads end now, not when collected."""
    try:
        return next(items, None)
    finally:
        items.close()


async def _afirst(items: AStreamed[M]) -> M | None:
    """`_first()` of an asynchronous iterator."""
    try:
        async for item in items:
            return item
        return None
    finally:
        await items.aclose()


def _bound(model: type[M], connection: Connection | AsyncConnection | None,
           state: QueryState | None = None) -> QuerySet[M]:
    """A QuerySet of ``model`` on ``connection``: an AsyncQuerySet on an async one."""
    if isinstance(connection, AsyncConnection):
        return AsyncQuerySet(model, connection=connection, state=state)
    return QuerySet(model, connection=connection, state=state)


class Model:
    """Optional base class: gives type checkers the query class methods.

    ``@model`` adds the same methods to classes that do not derive from it.
    """

    __slots__ = ()
    __tsmodel__: ClassVar[ModelSpec]
    DoesNotExist: ClassVar[type[errors.DoesNotExist]]

    @overload
    @classmethod
    def using(cls, connection: AsyncConnection) -> AsyncQuerySet[Self]: ...

    @overload
    @classmethod
    def using(cls, connection: Connection) -> QuerySet[Self]: ...

    @classmethod
    def using(cls, connection: Connection | AsyncConnection) -> QuerySet[Self]:
        """Queries of this model on ``connection`` instead of the default one.

        ``ServerMetric.using(db).latest(hostname=...)``; on an
        `AsyncConnection`, an `AsyncQuerySet`:
        ``await ServerMetric.using(adb).latest(hostname=...)``.
        """
        return _bound(cls, connection)

    @classmethod
    def range(
        cls, start: datetime, end: datetime, *, allow_scan: bool = False, **key_fields: Any,
    ) -> QuerySet[Self]:
        """Events with ``start <= timestamp < end``; see `tsmodel.QuerySet.range()`."""
        return QuerySet(cls).range(start, end, allow_scan=allow_scan, **key_fields)

    @classmethod
    def latest(cls, *, as_of: datetime | None = None, **key_fields: Any) -> Self:
        """The newest event of one entity (at or before ``as_of``); see
        `tsmodel.QuerySet.latest()`."""
        return QuerySet(cls).latest(as_of=as_of, **key_fields)

    @classmethod
    def latest_many(cls, keys: Iterable[Mapping[str, Any] | tuple[Any, ...]], *,
                    as_of: datetime | None = None) -> LatestResult[Self]:
        """The newest event of each of many entities (at or before ``as_of``); see
        `tsmodel.QuerySet.latest_many()`."""
        return QuerySet(cls).latest_many(keys, as_of=as_of)

    @classmethod
    def snapshot(cls, period: datetime, **key_prefix: Any) -> QuerySet[Self]:
        """Every event of one period, from its snapshot table; see `QuerySet.snapshot()`."""
        return QuerySet(cls).snapshot(period, **key_prefix)

    @classmethod
    def rollup(cls, every: str | timedelta) -> QuerySet[Any]:
        """Queries of the model's rollup table of bucket size ``every``; see
        `tsmodel.QuerySet.rollup()`."""
        return QuerySet(cls).rollup(every)

    @classmethod
    def current(cls, *, allow_scan: bool = False, **key_prefix: Any) -> QuerySet[Self]:
        """The newest event of every entity (or of a key prefix), from the current table."""
        return QuerySet(cls).current(allow_scan=allow_scan, **key_prefix)


provide_query_methods(Model)
