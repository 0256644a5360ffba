"""Queries: the pure `Query`, what a query is asked and the plans it makes.

A `Query` holds a model and a `QueryState`; every refinement returns a new
one and reads nothing. It compiles to a `ReadPlan` (`tsmodel.plan.reads`)
and plans the reads its runners make: a page, a count, the latest event,
the events a delete or an update changes. It performs no I/O and knows no
connection. Two sibling runners add the I/O, each beside its transport:
`tsmodel.run.connection.QuerySet` (blocking) and
`tsmodel.run.async_connection.AsyncQuerySet` (asyncio). Both feed the plan
to `tsmodel.run.fanout`, which streams its requests into the one merge of
`tsmodel.plan.merge`.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, Literal, TypeVar

import attrs
from typing_extensions import Self

from tsmodel import errors
from tsmodel.declare.spec import spec_of
from tsmodel.encoding.ordering import Interval
from tsmodel.encoding.timestamps import to_micros
from tsmodel.ground.base import Features
from tsmodel.io.arrow import ArrowColumns
from tsmodel.plan.cursors import CursorCodec, Position, cursor_codec
from tsmodel.plan.merge import reads_whole_rows
from tsmodel.plan.reads import (
    LatestManyPlan,
    QueryState,
    ReadPlan,
    compile_latest_many,
    compile_query,
    count_plan,
    latest_state,
    queryable_fields,
)
from tsmodel.run.resample import Resample, every_of

__all__ = ["Query", "Read", "ReadPlan", "copy_instance", "copier", "changed_instance"]

M = TypeVar("M")

#: The state of a query asked nothing yet (frozen, so shared).
_ASKED_NOTHING = QueryState()


@attrs.frozen
class Read:
    """What a runner streams for a query: the plan, the cursor codec, the position to
    start after (``None``: the start) and what to hand out (``sink`` of
    `tsmodel.run.fanout.stream`)."""

    plan: ReadPlan
    codec: CursorCodec | None = None
    start: Position | None = None
    sink: str = "instances"


class Query(Generic[M]):
    """A lazy, immutable query over one model: what it is asked, without a connection.

    Build one with ``Model.range(start, end, **key_fields)`` or
    ``Model.current(**key_prefix)`` (a `QuerySet`, the blocking runner), or
    ``Model.using(adb)`` (an `AsyncQuerySet`); refine it with `limit()`,
    `newest_first()`, `only()`, `where()`... Every refinement returns a new
    query of the same kind; `explain()` shows its plan. Reading is the
    runners' part.
    """

    #: Whether the query runs on an event loop (`AsyncQuerySet`).
    _runs_async: ClassVar[bool] = False

    def __init__(self, model: type[M], *, state: QueryState | None = None) -> None:
        self.model = model
        self._spec = spec_of(model)
        self._state = state if state is not None else _ASKED_NOTHING

    def _nan_columns(self) -> tuple[str, ...]:
        """The value fields in which NaN and ``None`` are two values (``Optional``,
        ``allow_nan``): their pandas column is a nullable ``Float64``."""
        return tuple(v.name for v in self._spec.values if v.optional and v.allow_nan)

    # -- building -----------------------------------------------------------------

    def _with_state(self, state: QueryState) -> Self:
        """This query (of the same kind, on the same connection) asked ``state``."""
        query = copy.copy(self)
        query._state = state
        return query

    def _clone(self, **changes: Any) -> Self:
        return self._with_state(attrs.evolve(self._state, **changes))

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
        # Stored times are whole µs: t >= start and t < end hold as they do of
        # the bounds rounded up (a pandas Timestamp may hold nanoseconds).
        start_us = self._time_bound("start", start, finer="ceil")
        end_us = self._time_bound("end", end, finer="ceil")
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
            raise errors.ArgumentTypeError(f"limit(n): the limit n must be an int, got {n!r}")
        if n < 0:
            raise errors.ArgumentError(f"limit(n): the limit n must not be negative, got {n}")
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

    def _rollup_of(self, every: str | timedelta) -> type[Any]:
        """The rollup row class of the model's rollup of bucket size ``every`` (``"1h"``).

        Raises:
            QueryError: the model declares no rollup of that size.
        """
        size = every_of(self._spec.name, every)
        for rollup in self._spec.rollups:
            if rollup.every == size:
                return rollup.model
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
            raise errors.ArgumentTypeError(
                f"after(cursor): a cursor is a str (a page's .next), got "
                f"{type(cursor).__name__} {cursor!r:.80}")
        return self._clone(after=cursor)

    def __getitem__(self, item: slice) -> Self:
        if not isinstance(item, slice) or item.start not in (None, 0) or item.step is not None:
            shown = (f"{'' if item.start is None else item.start!r}:"
                     f"{'' if item.stop is None else item.stop!r}"
                     f"{'' if item.step is None else f':{item.step!r}'}"
                     if isinstance(item, slice) else f"{item!r:.80}")
            raise errors.ArgumentTypeError(
                f"{type(self).__name__} supports only [:n] slices, got [{shown}]; "
                "use .limit(n)")
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

    # -- planning (no I/O) -----------------------------------------------------------

    def _bound_features(self) -> Features | None:
        """The features of the connection the query runs on, if it has one (no I/O)."""
        return None

    def explain(self, features: Features | None = None, *, count: bool = False) -> ReadPlan:
        """The read plan of this query, without reading anything.

        Args:
            features: the capabilities of the backend to plan for; by default
                those of the connection given with `using()`, else those
                of a backend without reverse scans. No connection is opened.
            count: the plan `count()` runs instead (no value read where
                each row is one event).
        """
        if features is None:
            features = self._bound_features()
        plan = compile_query(self._spec, self._state, features)
        return (count_plan(plan) or plan) if count else plan

    def _paged(self, size: int, after: str | None, features: Features,
               secret: bytes | None) -> Read:
        """What `page()` reads: ``size`` instances and one more (after ``after``)."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise errors.ArgumentError(
                f"page(size): a page size is an int of at least 1, got {size!r:.80}")
        query = self if after is None else self.after(after)
        plan, codec, start = query._resumable(features, secret, size + 1)
        codec.check()
        return Read(plan, codec, start)

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

    def _counting(self, features: Features, secret: bytes | None) -> Read:
        """What `count()` reads: the rows without their values where each row is one
        event and the client checks nothing, else the instances (after the cursor)."""
        plan = compile_query(self._spec, self._state, features)
        counting = count_plan(plan)
        if counting is None or self._state.after is not None:  # the rest after a cursor
            return self._read(features, secret)
        return Read(counting, sink="keys")

    def _read(self, features: Features, secret: bytes | None, more: int | None = None,
              sink: str = "instances") -> Read:
        """The `Read` of this query (after its cursor; at most ``more`` instances)."""
        plan, codec, start = self._resumable(features, secret, more)
        return Read(plan, codec, start, sink)

    def _columns(self, what: str) -> ArrowColumns:
        """The builder of this query's columnar results (checks pyarrow is installed)."""
        return ArrowColumns(self.model, self._state.only, what)

    def _column_read(self, features: Features, secret: bytes | None,
                     columns: ArrowColumns | None = None, batches: bool = False) -> Read:
        """What the columnar results read: whole rows (decoded straight into columns)
        where the plan's answer is whole rows, else records. With ``batches`` (the
        connection's reads can hand out `tsmodel.ground.base.CellBatch` es), the
        whole rows of one stream come in batches (``sink`` ``"batches"``, no `Row`)
        when ``columns`` decodes the codec's rows a batch at a time."""
        read = self._read(features, secret, sink="records")
        if read.start is None and read.plan.codec is not None and reads_whole_rows(read.plan):
            plan = read.plan
            if batches and columns is not None and len(plan.requests) == 1 and \
                    not plan.guards and columns.takes_batches(plan.codec):
                return attrs.evolve(read, sink="batches")
            return attrs.evolve(read, sink="rows")
        return read

    def _latest_many_plan(self, keys: Iterable[Mapping[str, Any] | tuple[Any, ...]],
                          features: Features, as_of: datetime | None) -> LatestManyPlan:
        """The plan of `latest_many()` (see `tsmodel.QuerySet.latest_many()`)."""
        return compile_latest_many(self._spec, keys, features, as_of_us=self._as_of_us(as_of))

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
        spec.codec.time_micros(when)  # a time, or the model and field's error
        base = self._with_state(_ASKED_NOTHING)
        query = base.range(when, when + timedelta(microseconds=1), **key)
        # A time no event can have (finer than the model stores) is refused as a
        # save refuses it, not reported as no such event.
        spec.codec.check_event(key, when)
        return query, changes

    def _changed_event(self, found: M | None, fields: dict[str, Any],
                       changes: dict[str, Any]) -> M:
        """The event an update found, changed; `DoesNotExist` when none was found."""
        if found is None:
            raise self._missing_event(fields, changes)
        return changed_instance(found, changes)

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
        base = self._with_state(_ASKED_NOTHING)
        if spec.current_key is not None and as_of is None:
            self._check_complete(key_fields, spec.current_key.fields)
            return base.current(**key_fields)
        self._check_complete(key_fields, spec.key_fields)
        # The plan latest_many() makes of each entity: the same state.
        state = latest_state(spec, tuple(key_fields.items()), self._as_of_us(as_of))
        return base._chosen(**attrs.asdict(state, recurse=False))

    def _as_of_us(self, as_of: datetime | None) -> int | None:
        return None if as_of is None else self._time_bound("as_of", as_of, "latest()",
                                                         finer="floor")


    def _found(self, found: M | None, key_fields: dict[str, Any]) -> M:
        if found is None:
            shown = ", ".join(f"{k}={v!r}" for k, v in key_fields.items())
            raise self.model.DoesNotExist(  # type: ignore[attr-defined]
                f"{self._spec.name}: no event for {shown or 'this key'}")
        return found

    def _time_bound(self, which: str, dt: datetime, what: str = "range",
                    finer: Literal["refuse", "floor", "ceil"] = "refuse") -> int:
        try:
            return to_micros(dt, finer)
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


def copy_instance(instance: M) -> M:
    """A shallow copy of a model instance (3x faster than ``copy.copy`` on attrs slots)."""
    return copier(instance)()


def copier(instance: M) -> Callable[[], M]:
    """What builds a new shallow copy of ``instance`` each time it is called (a cached
    `latest()` hands out one per hit, at the cost of the class's ``__init__``)."""
    cls = type(instance)
    fields = cls.__attrs_attrs__  # type: ignore[attr-defined]
    return functools.partial(cls, **{a.alias: getattr(instance, a.name) for a in fields})


def changed_instance(instance: M, changes: dict[str, Any]) -> M:
    """A copy of a model instance with ``changes`` (validated as a new instance is)."""
    cls = type(instance)
    fields = cls.__attrs_attrs__  # type: ignore[attr-defined]
    return cls(**{a.alias: changes[a.name] if a.name in changes else getattr(instance, a.name)
                  for a in fields if a.init})

