"""Queries: an immutable, lazy QuerySet compiled to an inspectable read plan.

Every refinement returns a new QuerySet; only iteration (and ``count()``,
``first()``, ``latest()``) reads. A query compiles to a :class:`ReadPlan`:
the table, one row range per salt value, server-side filters and a limit.
A query that no row-key prefix serves refuses to run unless the caller allows
a scan. ``explain()`` returns the plan.
"""

from __future__ import annotations

import collections
import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from tsmodel import errors
from tsmodel.backends.base import ReadFilter, ReadRequest, RowRange, RowSet
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.encoding.keys import (
    ConstantSegment,
    KeyLayout,
    SaltSegment,
    SegmentValueError,
    TimestampSegment,
)
from tsmodel.encoding.timestamps import ceil_to, to_micros
from tsmodel.plan.mapper import decode_events
from tsmodel.run.cache import MISSING, CachingBackend, single_row_key

if TYPE_CHECKING:
    from tsmodel.run.connection import Connection

__all__ = ["QuerySet", "ReadPlan"]

M = TypeVar("M")
_MS = 1_000


@attrs.frozen
class ReadPlan:
    """What a query will read, and how.

    Attributes:
        model: the model name.
        table: the table read.
        requests: the backend reads, one per salt value (or one).
        merge: how the reads combine: ``"concat"`` or ``"time"`` (by event time).
        client_filters: checks done on decoded rows (empty when the server
            filters are exact).
        scan: whether the plan reads beyond the rows a key prefix selects.
        reason: why the plan has this shape, in words.
    """

    model: str
    table: str
    requests: tuple[ReadRequest, ...]
    merge: str = "concat"
    client_filters: tuple[str, ...] = ()
    scan: bool = False
    reason: str = ""

    def __str__(self) -> str:
        lines = [f"{self.model}: read table {self.table!r}" + (" (SCAN)" if self.scan else "")]
        if self.reason:
            lines.append(f"  why: {self.reason}")
        if not self.requests:
            lines.append("  nothing to read: the time range is empty")
        for req in self.requests:
            lines.extend(_describe_request(req))
        if len(self.requests) > 1:
            lines.append(f"  merge: {self.merge} ({len(self.requests)} reads)")
        lines.extend(f"  client filter: {f}" for f in self.client_filters)
        return "\n".join(lines)


def _describe_request(req: ReadRequest) -> list[str]:
    out = []
    for key in req.rows.keys:
        out.append(f"  row key {key!r}")
    for r in req.rows.ranges:
        out.append(f"  row range [{r.start!r}, {r.end!r})")
    if req.rows.is_whole_table():
        out.append("  row range: whole table")
    f = req.filter
    parts = []
    if f.families:
        parts.append("families=" + ",".join(f.families))
    if f.columns:
        parts.append("columns=" + ",".join(f"{fam}:{q.decode(errors='replace')}"
                                           for fam, q in f.columns))
    if f.qualifier_start is not None or f.qualifier_end is not None:
        parts.append(f"qualifiers [{f.qualifier_start!r}, {f.qualifier_end!r})")
    if f.timestamp_start is not None or f.timestamp_end is not None:
        parts.append(f"cell timestamps [{f.timestamp_start}, {f.timestamp_end}) us")
    if f.cells_per_column:
        parts.append(f"cells per column={f.cells_per_column}")
    if f.strip_values:
        parts.append("strip values")
    out.append("    filters: " + ("; ".join(parts) or "none"))
    if req.limit:
        out.append(f"    limit: {req.limit} rows")
    if req.reverse:
        out.append("    reversed scan")
    return out


@attrs.frozen
class _State:
    mode: str  # "range" | "current"
    start_us: int | None = None
    end_us: int | None = None
    fields: tuple[tuple[str, Any], ...] = ()
    allow_scan: bool = False
    limit: int | None = None
    newest_first: bool = False
    only: tuple[str, ...] | None = None
    snapshot_us: int | None = None


class QuerySet(Generic[M]):
    """A lazy, immutable query over one model.

    Build one with ``Model.range(start, end, **key_fields)`` or
    ``Model.current(**key_prefix)``; refine it with :meth:`limit`,
    :meth:`newest_first`, :meth:`only` and :meth:`using`; run it by iterating,
    or with :meth:`count` and :meth:`first`.
    """

    def __init__(self, model: type[M], *, connection: Connection | None = None,
                 state: _State | None = None) -> None:
        self.model = model
        self._spec = spec_of(model)
        self._connection = connection
        self._state = state

    # -- building -----------------------------------------------------------------

    def _clone(self, **changes: Any) -> QuerySet[M]:
        if self._state is None:
            raise TypeError(f"start with {self._spec.name}.range(...) or .current(...)")
        return QuerySet(self.model, connection=self._connection,
                        state=attrs.evolve(self._state, **changes))

    def range(self, start: datetime, end: datetime, *, allow_scan: bool = False,
              **key_fields: Any) -> QuerySet[M]:
        """Events with ``start <= timestamp < end`` of the entities the key fields select.

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
        self._check_fields(key_fields, _queryable_fields(self._spec))
        state = _State("range", start_us, end_us, tuple(key_fields.items()), allow_scan)
        _choose_plan(self._spec, state, reverse_scan=False)  # fail fast, no I/O
        return QuerySet(self.model, connection=self._connection, state=state)

    def current(self, *, allow_scan: bool = False, **key_prefix: Any) -> QuerySet[M]:
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
        state = _State("current", fields=tuple(key_prefix.items()), allow_scan=allow_scan)
        _Compiler(self._spec, state, reverse_scan=False).compile()  # fail fast, no I/O
        return QuerySet(self.model, connection=self._connection, state=state)

    def snapshot(self, period: datetime, **key_prefix: Any) -> QuerySet[M]:
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
        state = _State("range", start, end, tuple(key_prefix.items()), allow_scan=True,
                       snapshot_us=start)
        return QuerySet(self.model, connection=self._connection, state=state)

    def limit(self, n: int) -> QuerySet[M]:
        """At most ``n`` events."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"limit must be an int, got {n!r}")
        if n < 0:
            raise ValueError(f"limit must not be negative, got {n}")
        return self._clone(limit=n)

    def newest_first(self) -> QuerySet[M]:
        """Reverse row-key order: newest first within each entity."""
        return self._clone(newest_first=True)

    def only(self, *fields: str) -> QuerySet[M]:
        """Read only these value fields; the others come back as ``None``."""
        known = {v.name for v in self._spec.values}
        unknown = [f for f in fields if f not in known]
        if unknown:
            raise errors.QueryError(
                f"{self._spec.name}: only({', '.join(map(repr, unknown))}): not value fields "
                f"(value fields: {', '.join(sorted(known))})"
            )
        return self._clone(only=tuple(fields))

    def using(self, connection: Connection) -> QuerySet[M]:
        """Run on ``connection`` instead of the default connection."""
        return QuerySet(self.model, connection=connection, state=self._state)

    def __getitem__(self, item: slice) -> QuerySet[M]:
        if not isinstance(item, slice) or item.start not in (None, 0) or item.step is not None:
            raise TypeError("QuerySet supports only [:n] slices; use .limit(n)")
        if item.stop is None:
            return self
        current = self._state.limit if self._state is not None else None
        return self.limit(item.stop if current is None else min(current, item.stop))

    def __repr__(self) -> str:
        s = self._state
        if s is None:
            return f"<QuerySet {self._spec.name} (unbound)>"
        fields = " ".join(f"{k}={v!r}" for k, v in s.fields)
        span = ""
        if s.mode == "range":
            span = f" [{s.start_us}us, {s.end_us}us)"
        extra = (f" limit={s.limit}" if s.limit is not None else "") + (
            " newest_first" if s.newest_first else "")
        text = " ".join(p for p in (self._spec.name, s.mode + span, fields) if p)
        return f"<QuerySet {text}{extra}>"

    # -- running ------------------------------------------------------------------

    def explain(self) -> ReadPlan:
        """The read plan of this query, without reading anything."""
        return self._compile()[0]

    def _compile(self) -> tuple[ReadPlan, Callable[[Any], bool]]:
        plan, accept, _ = self._compile_spec()
        return plan, accept

    def __iter__(self) -> Iterator[M]:
        return self.iterator()

    def iterator(self) -> Iterator[M]:
        """Stream the matching instances; nothing is cached."""
        plan, accept, spec = self._compile_spec()
        return self._run(plan, accept, self._conn(), spec)

    def count(self) -> int:
        """How many events match (reads and decodes them; nothing is cached)."""
        return sum(1 for _ in self.iterator())

    def first(self) -> M | None:
        """The first matching instance, or ``None``."""
        return next(iter(self.limit(1)), None)

    def latest(self, **key_fields: Any) -> M:
        """The newest event of one entity.

        Reads the current-value table when the model has one (one row read),
        else the newest row of the entity's range in the main table.

        Raises:
            QueryError: key fields are missing.
            DoesNotExist: the entity has no event (``Model.DoesNotExist``).
        """
        spec = self._spec
        if spec.current_key is not None:
            self._check_complete(key_fields, spec.current_key.fields)
            cache = self._conn().cache
            if cache is not None:
                return self._latest_cached(cache, key_fields)
            qs: QuerySet[M] = self.current(**key_fields)
        else:
            self._check_complete(key_fields, spec.key_fields)
            lo, hi = _time_span(spec)
            qs = QuerySet(self.model, connection=self._connection, state=_State(
                "range", lo, hi, tuple(key_fields.items())))
            qs = qs.newest_first()
        return self._found(qs.first(), key_fields)

    def _latest_cached(self, cache: CachingBackend, key_fields: dict[str, Any]) -> M:
        """latest() through the connection's cache: the decoded instance is kept,
        tied to its current-value row, so this connection's writes drop it."""
        token = ("latest", self.model, tuple(key_fields.items()))
        try:
            found = cache.recall(token)
        except TypeError:  # an unhashable key value: no cache
            return self._found(self.current(**key_fields).first(), key_fields)
        if found is MISSING:
            ticket = cache.ticket()
            qs = self.current(**key_fields)
            found = qs.first()
            requests = qs.explain().requests
            key = single_row_key(requests[0].rows) if len(requests) == 1 else None
            if key is not None:
                cache.remember(token, requests[0].table, key, found, ticket)
        # A copy: the cached instance must not change if the caller changes theirs.
        return self._found(None if found is None else _copy(found), key_fields)

    def _found(self, found: M | None, key_fields: dict[str, Any]) -> M:
        if found is None:
            shown = ", ".join(f"{k}={v!r}" for k, v in key_fields.items())
            raise self.model.DoesNotExist(  # type: ignore[attr-defined]
                f"{self._spec.name}: no event for {shown or 'this key'}")
        return found

    # -- compiling ------------------------------------------------------------------

    def _conn(self) -> Connection:
        if self._connection is not None:
            return self._connection
        from tsmodel.run.connection import get_default_connection

        return get_default_connection()

    def _compile_spec(self) -> tuple[ReadPlan, Callable[[Any], bool], ModelSpec]:
        s = self._state
        if s is None:
            raise TypeError(f"start with {self._spec.name}.range(...) or .current(...)")
        return _choose_plan(self._spec, s, self._conn().features.reverse_scan)

    def _run(self, plan: ReadPlan, accept: Callable[[Any], bool],
             conn: Connection, spec: ModelSpec) -> Iterator[M]:
        s = self._state
        assert s is not None
        current = s.mode == "current"
        streams = [self._events(conn, req, current, spec) for req in plan.requests]
        natural_desc = not current and spec.reversed_time
        descending = natural_desc != any(req.reverse for req in plan.requests)
        merged = self._merge(streams, plan.merge, descending)
        kept: Iterator[M] = merged
        if plan.client_filters:  # without any, accept() says yes to all: skip the call per item
            kept = (item for item in merged if accept(item))
        if s.newest_first and not descending:
            kept = _reverse_bounded(kept, s.limit)
        return itertools.islice(kept, s.limit) if s.limit is not None else kept

    def _events(self, conn: Connection, req: ReadRequest, current: bool,
                spec: ModelSpec) -> Iterator[M]:
        """The events of one read, in the read's order (bucket rows reversed too)."""
        only = self._state.only if self._state is not None else None
        for row in conn.read(req):
            events = decode_events(spec, self.model, row, current=current, only=only)
            yield from (reversed(events) if req.reverse else events)

    def _merge(self, streams: Sequence[Iterator[M]], how: str, descending: bool) -> Iterator[M]:
        if len(streams) == 1:
            return streams[0]
        if how == "time":
            name = self._spec.timestamp_field
            return heapq.merge(*streams, key=lambda e: getattr(e, name), reverse=descending)
        return itertools.chain.from_iterable(streams)

    def _time_bound(self, which: str, dt: datetime) -> int:
        try:
            return to_micros(dt)
        except TypeError as exc:
            raise errors.FieldTypeError(f"range {which}: {exc}", model=self._spec.name,
                                        value=dt) from None
        except ValueError as exc:
            raise errors.ValidationError(f"range {which}: {exc}", model=self._spec.name,
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


def _queryable_fields(spec: ModelSpec) -> tuple[str, ...]:
    """Fields a range query may name: key fields of the main or an alternate table."""
    names = list(spec.key_fields)
    for alt in spec.alternates:
        names.extend(f for f in alt.key_fields if f not in names)
    return tuple(names)


def _choose_plan(spec: ModelSpec, state: _State,
                 reverse_scan: bool) -> tuple[ReadPlan, Callable[[Any], bool], ModelSpec]:
    """Compile on the table whose row key serves the query best.

    A candidate must use every field given as a key prefix; among those, a
    plan with the time range in the row key wins, then the main table.
    """
    if state.snapshot_us is not None:
        assert spec.snapshot is not None
        spec = spec.snapshot.spec_for(state.snapshot_us)
        plan, accept = _Compiler(spec, state, reverse_scan).compile()
        return plan, accept, spec
    if state.mode != "range" or not spec.alternates:
        plan, accept = _Compiler(spec, state, reverse_scan).compile()
        return plan, accept, spec
    best: tuple[tuple[bool, bool], ReadPlan, Callable[[Any], bool], ModelSpec] | None = None
    strict = attrs.evolve(state, allow_scan=False)
    for cand in (spec, *spec.alternates):
        if not all(name in cand.key_fields for name, _ in state.fields):
            continue
        compiler = _Compiler(cand, strict, reverse_scan)
        try:
            plan, accept = compiler.compile()
        except errors.ScanRefusedError:
            continue
        score = (compiler.reached_time, cand is spec)
        if best is None or score > best[0]:
            best = (score, plan, accept, cand)
    if best is None:
        try:
            plan, accept = _Compiler(spec, state, reverse_scan).compile()
        except errors.ScanRefusedError as exc:
            orders = "; ".join(f"{a.table}: {a.key.describe_order()}" for a in spec.alternates)
            raise errors.ScanRefusedError(f"{exc} (no alternate-key table serves them "
                                          f"either: {orders})") from None
        return plan, accept, spec
    _, plan, accept, chosen = best
    which = "main table" if chosen is spec else "alternate-key table"
    plan = attrs.evolve(plan, reason=f"{which} {chosen.table!r} serves these fields; "
                                     + plan.reason)
    return plan, accept, chosen


def _copy(instance: M) -> M:
    """A shallow copy of a model instance (3x faster than ``copy.copy`` on attrs slots)."""
    cls = type(instance)
    fields = cls.__attrs_attrs__  # type: ignore[attr-defined]
    return cls(**{a.alias: getattr(instance, a.name) for a in fields})


def _time_span(spec: ModelSpec) -> tuple[int, int]:
    """Every event time a model can store, as [start, end) microseconds."""
    if isinstance(spec.timestamp, TimestampSegment):
        enc = spec.timestamp.encoding
        return enc.min_us, enc.max_us + enc.unit
    return 0, to_micros(datetime(9999, 12, 31, tzinfo=timezone.utc))


def _reverse_bounded(items: Iterator[M], limit: int | None) -> Iterator[M]:
    """Reverse a stream, holding at most ``limit`` items when a limit is set."""
    buffer: collections.deque[M] = collections.deque(items, maxlen=limit or None)
    while buffer:
        yield buffer.pop()


class _Compiler:
    """Turns a query state into a :class:`ReadPlan` and a client-side check."""

    def __init__(self, spec: ModelSpec, state: _State, reverse_scan: bool) -> None:
        self.spec = spec
        self.state = state
        self.reverse_scan = reverse_scan

    def compile(self) -> tuple[ReadPlan, Callable[[Any], bool]]:
        current = self.state.mode == "current"
        layout = self.spec.current_key if current else self.spec.key
        assert layout is not None
        table = (self.spec.current_table if current else self.spec.table) or ""
        given = self._encode_given(layout)
        prefixes, used, reached_time = self._prefixes(layout, given)
        self._complete = current and len(used) == len(layout.fields)
        leftover = [name for name, _ in self.state.fields if name not in used]
        whole_table_ok = current or self.state.snapshot_us is not None  # designed reads
        scan = bool(leftover) or (not used and not reached_time and not whole_table_ok)
        if scan and not self.state.allow_scan:
            raise errors.ScanRefusedError(self._scan_message(layout, leftover))
        ranges = self._ranges(prefixes, reached_time)
        requests = self._requests(table, ranges, exact=not leftover and (
            reached_time or current or self.spec.time_unit >= _MS))
        checks, accept = self._client_checks(leftover, reached_time or current)
        # Per-salt reads are in time order only when the time range is in the key.
        merge = "time" if len(requests) > 1 and reached_time and not current else "concat"
        plan = ReadPlan(self.spec.name, table, requests, merge, checks, scan,
                        self._reason(layout, used, reached_time, leftover, current))
        self.reached_time = reached_time
        return plan, accept

    def _encode_given(self, layout: KeyLayout) -> dict[str, bytes]:
        out = {}
        for name, value in self.state.fields:
            seg = next((s for s in layout.segments if s.field == name), None)
            if seg is None:
                continue  # not in this key: filtered client-side
            try:
                out[name] = seg.encode(value)
            except SegmentValueError as exc:
                raise errors.key_error(exc, model=self.spec.name, field=name,
                                       value=value) from None
        return out

    def _prefixes(self, layout: KeyLayout,
                  given: dict[str, bytes]) -> tuple[list[bytes], set[str], bool]:
        """Key prefixes (one per salt value), the fields used, whether time was reached."""
        prefixes = [b""]
        used: set[str] = set()
        sep = layout.separator
        for seg in layout.segments:
            if isinstance(seg, ConstantSegment):
                prefixes = [p + seg.encode(None) + sep for p in prefixes]
            elif isinstance(seg, SaltSegment):
                salts = self._salt_values(seg, given)
                prefixes = [p + seg.encode(v) + sep for p in prefixes for v in salts]
            elif seg is self.spec.timestamp:
                return prefixes, used, True
            elif seg.field in given:
                prefixes = [p + given[seg.field] + sep for p in prefixes]
                used.add(seg.field)
            else:
                return prefixes, used, False
        # Every segment is given: each prefix names exactly one row.
        sep_len = len(sep)
        return [p[:-sep_len] if p else p for p in prefixes], used, False

    def _salt_values(self, seg: SaltSegment, given: dict[str, bytes]) -> list[int]:
        if all(name in given for name in seg.on):
            return [seg.salt_of(given)]
        return list(seg.all_values())

    def _ranges(self, prefixes: list[bytes], reached_time: bool) -> list[RowRange]:
        if not reached_time:
            if self._complete:
                return [RowRange(p, p + b"\x00") for p in prefixes]
            return [RowRange.prefix(p) if p else RowRange() for p in prefixes]
        bounds = self._time_key_bounds()
        if bounds is None:
            return []
        lo, hi = bounds
        return [RowRange(p + lo, p + hi) for p in prefixes]

    def _time_key_bounds(self) -> tuple[bytes, bytes] | None:
        s = self.state
        assert s.start_us is not None and s.end_us is not None
        bucket = self.spec.bucket
        if bucket is not None:
            start, end = max(ceil_to(s.start_us, _MS), 0), ceil_to(s.end_us, _MS)
            if start >= end:
                return None
            return bucket.label(bucket.start(start)), bucket.label(bucket.start(end - 1)) + b"\x00"
        assert isinstance(self.spec.timestamp, TimestampSegment)
        enc = self.spec.timestamp.encoding
        start = max(ceil_to(s.start_us, enc.unit), enc.min_us)
        end = min(ceil_to(s.end_us, enc.unit), enc.max_us + enc.unit)
        if start >= end:
            return None
        if enc.reverse:
            return enc.encode_us(end - enc.unit), enc.encode_us(start) + b"\x00"
        high = enc.encode_us(end) if end <= enc.max_us else enc.encode_us(enc.max_us) + b"\x00"
        return enc.encode_us(start), high

    def _requests(self, table: str, ranges: list[RowRange], exact: bool) -> tuple[ReadRequest, ...]:
        s = self.state
        if not ranges:
            return ()
        row_filter = self._filter()
        natural_desc = s.mode == "range" and self.spec.reversed_time
        reverse = s.newest_first and not natural_desc
        use_reverse = reverse and self.reverse_scan
        rows_are_events = s.mode == "current" or not self.spec.layout.bucketed
        limit = s.limit if exact and s.limit and rows_are_events else None
        return tuple(
            ReadRequest(table, RowSet(ranges=(r,)) if r != RowRange() else RowSet(), row_filter,
                        limit if (not reverse or use_reverse) else None, use_reverse)
            for r in ranges
        )

    def _filter(self) -> ReadFilter:
        spec, s = self.spec, self.state
        main = s.mode == "range"
        columns = None
        value_columns = not main or spec.layout.name in ("rows", "cells")
        if s.only is not None and spec.serialization is None and value_columns:
            columns = tuple((spec.value(n).family, spec.value(n).qualifier) for n in s.only)
        ts_start = ts_end = None
        qualifiers = None
        if main:
            assert s.start_us is not None and s.end_us is not None
            # Events of whole ms: t >= start exactly when t >= ceil(start). Finer
            # events have ms-floored cell timestamps and are checked client-side.
            exact_ms = spec.time_unit >= _MS
            ts_start = max(ceil_to(s.start_us, _MS) if exact_ms else s.start_us // _MS * _MS, 0)
            ts_end = ceil_to(s.end_us, _MS)
            qualifiers = spec.layout.qualifier_range(spec, s.start_us, s.end_us)
        return ReadFilter(
            families=spec.families, columns=columns,
            qualifier_start=qualifiers[0] if qualifiers else None,
            qualifier_end=qualifiers[1] if qualifiers else None,
            timestamp_start=ts_start, timestamp_end=ts_end,
            cells_per_column=spec.layout.read_versions if main else 1,
        )

    def _client_checks(self, leftover: list[str],
                       exact_time: bool) -> tuple[tuple[str, ...], Callable[[Any], bool]]:
        s = self.state
        wanted = {name: value for name, value in s.fields if name in leftover}
        checks = [f"{name} == {value!r}" for name, value in wanted.items()]
        ts_name = self.spec.timestamp_field
        # The cell timestamp filter is exact when event times are whole milliseconds.
        need_time = s.mode == "range" and self.spec.time_unit < _MS
        if need_time:
            checks.append(f"{s.start_us} <= {ts_name} (us) < {s.end_us}")
        if not checks:
            return (), lambda item: True
        lo, hi = s.start_us or 0, s.end_us or 0

        def accept(item: Any) -> bool:
            if any(getattr(item, k) != v for k, v in wanted.items()):
                return False
            return not need_time or lo <= to_micros(getattr(item, ts_name)) < hi

        return tuple(checks), accept

    def _scan_message(self, layout: KeyLayout, leftover: list[str]) -> str:
        order = layout.describe_order()
        if leftover:
            names = ", ".join(leftover)
            what = (f"the key field(s) {names} do not form a prefix of the row key {order} "
                    "(a key field before them is missing)")
        else:
            what = f"no key field narrows the row key {order}"
        return (f"{self.spec.name}: {what}, so the query would read every row of the table "
                "(a full table scan, slower as the table grows). Give the leading key "
                "fields, or pass allow_scan=True to scan anyway")

    def _reason(self, layout: KeyLayout, used: set[str], reached_time: bool,
                leftover: list[str], current: bool) -> str:
        parts = []
        if used:
            parts.append(f"key prefix from {', '.join(f for f in layout.fields if f in used)}")
        salt = layout.salt()
        if salt is not None and not current:
            if all(name in used for name in salt.on):
                parts.append("one salt value, computed from the key fields given")
            else:
                parts.append(f"{salt.buckets} salt values, one read each")
        if reached_time:
            parts.append("time range in the row key")
        elif self.state.snapshot_us is not None:
            parts.append("a snapshot table holds one period: read it whole")
        elif not current:
            parts.append("time range by cell timestamp filter only")
        if leftover:
            parts.append(f"scan filtering {', '.join(leftover)} client-side")
        return "; ".join(parts)
