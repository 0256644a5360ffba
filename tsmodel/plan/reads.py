"""The read compiler: a query's state in, a `ReadPlan` out. Pure.

A `QueryState` (what the QuerySet was asked) compiles against a
model's tables into one plan record: the table and codec to read with, one
request per row range (one per salt value), server-side filters, the merge
of the streams, the client-side checks, the limit and the order. Executors
(the sync QuerySet, the jobs) only run plans; ``explain()`` shows them. The
backend's capabilities come in as `Features`,
never looked up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

import attrs

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec
from tsmodel.encoding.buckets import Bucket
from tsmodel.encoding.keys import (
    ConstantSegment,
    KeyLayout,
    SaltSegment,
    SegmentValueError,
    StrSegment,
    TimestampSegment,
)
from tsmodel.encoding.ordering import Interval
from tsmodel.encoding.timestamps import ceil_to, from_micros, to_micros
from tsmodel.encoding.values import ValueSpec
from tsmodel.ground.base import (
    Features,
    ReadFilter,
    ReadRequest,
    Row,
    RowRange,
    RowSet,
    ValueCondition,
)
from tsmodel.layouts import Layout, TableCodec
from tsmodel.plan.calls import FirstOf, Read, Together

__all__ = ["ReadPlan", "QueryState", "compile_query", "count_plan", "queryable_fields", "time_span",
           "LatestManyPlan", "LatestResult", "compile_latest_many", "latest_state"]

M = TypeVar("M")

_MS = 1_000
#: The most single-label reads a plan makes for bucket labels that do not sort
#: (``week1``, ``week2`` ...: another program's); a longer range reads every bucket
#: row of each key prefix instead, and the executor sorts the events by time.
MAX_LABEL_READS = 128


def _accept_all(item: Any) -> bool:
    return True


@attrs.frozen
class ReadPlan:
    """What a query will read, and how.

    Attributes:
        model: the model name.
        table: the table read.
        requests: the backend reads, one per salt value (or one).
        merge: how the reads combine: ``"concat"``, ``"time"`` (merged by event
            time) or ``"sort"`` (sorted by event time, all held at once).
        client_filters: checks done on decoded rows (empty when the server
            filters are exact).
        scan: whether the plan reads beyond the rows a key prefix selects.
        reason: why the plan has this shape, in words.
        codec: the codec that decodes the table's rows.
        accept: the client-side check of a decoded instance (``client_filters``).
        accept_record: the same check of a decoded record (times in µs), for
            the columnar exports.
        only: the value fields to decode (``None``: all).
        limit: the most instances to yield.
        descending: whether the merged stream comes newest first.
        reverse_after: whether the executor reverses the stream itself (newest
            first without a reverse scan), holding at most ``limit`` instances.
        guards: reads that must find no row (rows under salt values the model
            does not have: another program's salts); the executor refuses
            to answer when one does, rather than answer in part.
        history: whether each event comes once per version (its amendments,
            a model with a version field), oldest first.
    """

    model: str
    table: str
    requests: tuple[ReadRequest, ...]
    merge: str = "concat"
    client_filters: tuple[str, ...] = ()
    scan: bool = False
    reason: str = ""
    codec: TableCodec | None = attrs.field(default=None, eq=False, repr=False)
    accept: Callable[[Any], bool] = attrs.field(default=_accept_all, eq=False, repr=False)
    accept_record: Callable[[Any], bool] = attrs.field(default=_accept_all, eq=False,
                                                       repr=False)
    only: tuple[str, ...] | None = None
    limit: int | None = None
    descending: bool = False
    reverse_after: bool = False
    guards: tuple[ReadRequest, ...] = ()
    history: bool = False

    def __str__(self) -> str:
        lines = [f"{self.model}: read table {self.table!r}" + (" (SCAN)" if self.scan else "")]
        if self.reason:
            lines.append(f"  why: {self.reason}")
        if not self.requests:
            lines.append("  nothing to read: the time range is empty")
        for req in self.requests:
            lines.extend(_describe_request(req))
        if len(self.requests) > 1 or self.merge == "sort":
            count = len(self.requests)
            lines.append(f"  merge: {self.merge} ({count} read{'s' if count != 1 else ''})")
        lines.extend(f"  client filter: {f}" for f in self.client_filters)
        lines.extend(f"  guard: no row in [{r.start!r}, {r.end!r})"
                     for g in self.guards for r in g.rows.ranges)
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
    parts = [f"newest {f.versions_kept} versions kept"] if f.versions_kept else []
    if f.families:
        parts.append("families=" + ",".join(f.families))
    if f.columns:
        parts.append("columns=" + ",".join(f"{fam}:{q.decode(errors='replace')}"
                                           for fam, q in f.columns))
    if f.qualifier_start is not None or f.qualifier_end is not None:
        parts.append(f"qualifiers [{f.qualifier_start!r}, {f.qualifier_end!r})")
    if f.timestamp_start is not None or f.timestamp_end is not None:
        parts.append(f"cell timestamps [{f.timestamp_start}, {f.timestamp_end}) us")
    if f.timestamps is not None:
        parts.append(f"cell timestamps: {len(f.timestamps)} given")
    if f.cells_per_column:
        parts.append(f"cells per column={f.cells_per_column}")
    if f.cells_per_row:
        parts.append(f"cells per row={f.cells_per_row}")
    parts.extend(f"rows with a cell where {c.label or c.family}" for c in f.conditions)
    if f.strip_values:
        parts.append("strip values")
    out.append("    filters: " + ("; ".join(parts) or "none"))
    if req.limit:
        out.append(f"    limit: {req.limit} rows")
    if req.reverse:
        out.append("    reversed scan")
    return out


@attrs.frozen
class QueryState:
    """What a QuerySet was asked, before it is compiled.

    Attributes:
        mode: ``"range"`` (main or alternate table), ``"current"``
            (current-value table), or ``None`` before either is chosen.
        start_us: the range start, inclusive (µs).
        end_us: the range end, exclusive (µs).
        fields: key field values given.
        allow_scan: whether a read beyond a key prefix may run.
        limit: the most instances to return.
        newest_first: newest first within each entity.
        only: value fields to read.
        snapshot_us: an instant of the snapshot period read, if any.
        history: every version of each event (a model with a version field).
        where: value conditions (``where()``): each value field's interval.
        allow_client: value conditions the server cannot apply may be checked
            on the client (after reading every event of the range).
        after: a cursor (page token) to resume after, checked when the query
            runs (`tsmodel.plan.cursors`); it changes no plan.
    """

    mode: str | None = None
    start_us: int | None = None
    end_us: int | None = None
    fields: tuple[tuple[str, Any], ...] = ()
    allow_scan: bool = False
    limit: int | None = None
    newest_first: bool = False
    only: tuple[str, ...] | None = None
    snapshot_us: int | None = None
    history: bool = False
    where: tuple[tuple[str, Interval], ...] = ()
    allow_client: bool = False
    after: str | None = None


def queryable_fields(spec: ModelSpec) -> tuple[str, ...]:
    """Fields a range query may name: key fields of the main or an alternate table."""
    names = list(spec.key_fields)
    for alt in spec.alternates:
        names.extend(f for f in alt.key_fields if f not in names)
    return tuple(names)


def compile_query(spec: ModelSpec, state: QueryState, features: Features | None = None,
                  now_us: int | None = None, *, main_table: bool = False) -> ReadPlan:
    """The read plan of ``state`` on ``spec``'s tables.

    Range queries compile on the table whose row key serves them best: a
    candidate must use every field given as a key prefix; among those, a
    plan with the time range in the row key wins, then the main table.

    Args:
        spec: the model's spec.
        state: the query.
        features: the backend's capabilities (``None``: a backend without
            reverse scans).
        now_us: the current time (µs; default: the clock), from which a
            model's ``retention`` hides expired cells, whether or not garbage
            collection ran yet.
        main_table: compile a range query on the main table, even where an
            alternate-key table's key serves it better: a repair must read
            what the main table holds.

    Raises:
        TypeError: the state has no mode yet (neither range nor current).
        ScanRefusedError: no table's key prefix serves the query and
            ``allow_scan`` is false.
    """
    if state.mode is None:
        raise errors.ArgumentTypeError(f"start with {spec.name}.range(...) or .current(...)")
    reverse_scan = features is not None and features.reverse_scan
    if now_us is None:
        now_us = time.time_ns() // 1_000
    if state.snapshot_us is not None:
        assert spec.snapshot is not None
        snapshot = spec.snapshot.spec_for(state.snapshot_us)
        return _Compiler(snapshot, state, reverse_scan, now_us).plan()
    if state.mode != "range" or not spec.alternates or main_table:
        return _Compiler(spec, state, reverse_scan, now_us).plan()
    return _best_table(spec, state, reverse_scan, now_us)


def count_plan(plan: ReadPlan) -> ReadPlan | None:
    """The plan that counts ``plan``'s events without reading a value, or ``None``.

    Where each row holds one event (a row per event, not its history) and
    no check is left to the client, the count is the number of rows: each
    request reads the cells the read would, with their values stripped, so
    no value byte is read. Each row is checked as a read checks it, but for
    its value bytes (`TableCodec.count_events`): a row a read refuses (a
    foreign key, a required value's cell missing, cells of another clock)
    raises the same error. Elsewhere (bucket rows, client-side checks,
    ``history()``) counting decodes the events: ``None``.
    """
    codec = plan.codec
    if codec is None or codec.layout.bucketed or plan.client_filters or plan.history:
        return None
    requests = tuple(attrs.evolve(r, filter=attrs.evolve(r.filter, strip_values=True))
                     for r in plan.requests)
    return attrs.evolve(plan, requests=requests, merge="concat", reverse_after=False,
                        reason=plan.reason + "; count: a row per event, values stripped")


def _best_table(spec: ModelSpec, state: QueryState, reverse_scan: bool,
                now_us: int) -> ReadPlan:
    best: tuple[tuple[bool, bool], ReadPlan, ModelSpec] | None = None
    strict = attrs.evolve(state, allow_scan=False)
    for cand in (spec, *spec.alternates):
        if not all(name in cand.key_fields for name, _ in state.fields):
            continue
        compiler = _Compiler(cand, strict, reverse_scan, now_us)
        try:
            plan = compiler.plan()
        except errors.ScanRefusedError:
            continue
        score = (compiler.reaches_time(), cand is spec)
        if best is None or score > best[0]:
            best = (score, plan, cand)
    if best is None:
        try:
            return _Compiler(spec, state, reverse_scan, now_us).plan()
        except errors.ScanRefusedError as exc:
            orders = "; ".join(f"{a.table}: {a.key.describe_order()}" for a in spec.alternates)
            raise errors.ScanRefusedError(f"{exc} (no alternate-key table serves them "
                                          f"either: {orders})") from None
    _, plan, chosen = best
    which = "main table" if chosen is spec else "alternate-key table"
    return attrs.evolve(plan, reason=f"{which} {chosen.table!r} serves these fields; "
                                     + plan.reason)


def _prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (it ends in an ASCII
    character, a separator or a digit, so its last byte can be raised)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


def _foreign_salts(seg: SaltSegment, prefix: bytes, sep: bytes) -> tuple[RowRange, ...]:
    """The key ranges after ``prefix`` that no salt value of ``seg`` starts: a row there
    was salted otherwise (another width, values outside the salt's, another writer).

    Without a prefix (the salt leads the key) only keys starting with a digit
    are the salt's to guard."""
    low, high = (prefix, _prefix_end(prefix)) if prefix else (b"0", b":")
    gaps = []
    for value in seg.values:
        owned = prefix + seg.encode(value) + sep
        if low < owned:
            gaps.append(RowRange(low, owned))
        low = _prefix_end(owned)
    if low < high:
        gaps.append(RowRange(low, high))
    return tuple(gaps)


def time_span(spec: ModelSpec) -> tuple[int, int]:
    """Every event time a model can store, as [start, end) microseconds."""
    if isinstance(spec.timestamp, TimestampSegment):
        enc = spec.timestamp.encoding
        return enc.min_us, enc.max_us + enc.unit
    # Bucket models store whole milliseconds from the epoch to the last one of 9999.
    return 0, to_micros(datetime.max.replace(tzinfo=timezone.utc)) + 1


class _Compiler:
    """Turns a query state into a `ReadPlan` and a client-side check."""

    def __init__(self, spec: ModelSpec, state: QueryState, reverse_scan: bool,
                 now_us: int) -> None:
        self.spec = spec
        self.state = state
        self.reverse_scan = reverse_scan
        self.now_us = now_us
        #: The ranges read whole bucket rows out of time order (labels that do not sort).
        self.sort = False
        #: How the plan reads bucket labels that do not sort, in words.
        self.label_reads = ""
        #: The regex of the key fields given beyond the key prefix (see plan()).
        self.key_regex: bytes | None = None
        #: The value conditions the server applies, those the client checks, and why.
        self.conditions, self.value_checks, self.value_reason = self._value_conditions()

    def plan(self) -> ReadPlan:
        s = self.state
        current = s.mode == "current"
        codec = self.codec
        key = codec.key
        prefixes, used, reached_time = self._prefixes(key, self._encode_given(key))
        complete = current and len(used) == len(key.fields)
        leftover = [name for name, _ in s.fields if name not in used]
        whole_table_ok = current or s.snapshot_us is not None  # designed reads
        scan = bool(leftover) or (not used and not reached_time and not whole_table_ok)
        if scan and not s.allow_scan:
            raise errors.ScanRefusedError(self._scan_message(key, leftover))
        ranges = self._ranges(prefixes, reached_time, complete)
        #: The regex of the key fields given beyond the prefix: the server selects them.
        self.key_regex = self._key_regex(key, leftover) if leftover else None
        if self.key_regex is not None:
            leftover_checked = []
        else:
            leftover_checked = leftover
        # A row per event under an exact key range: the key selects the times, and
        # no cell timestamp filter is sent, so a row whose cells do not carry its
        # event time (another program's write time) is read and refused, not
        # silently left out.
        key_selects_time = reached_time and not current and not codec.layout.bucketed
        requests = self._requests(codec.table, ranges, exact=not leftover and (
            reached_time or current or (self.spec.time_unit >= _MS
                                        and self.spec.event_time_cells)),
                                  key_selects_time=key_selects_time and not leftover)
        checks, accept, accept_record = self._client_checks(leftover_checked)
        only = s.only
        if only is not None:  # values checked client-side are decoded, chosen or not
            only = (*only, *(n for n, _ in self.value_checks if n not in only))
        # Per-salt reads are in time order only when the time range is in the key.
        merge = "time" if len(requests) > 1 and reached_time and not current else "concat"
        if merge == "concat" and any(req.reverse for req in requests):
            requests = requests[::-1]  # reversed reads, one after the other: the last first
        merge = "sort" if self.sort else merge
        natural_desc = not current and self.spec.reversed_time
        descending = natural_desc != any(req.reverse for req in requests)
        return ReadPlan(self.spec.name, codec.table, requests, merge, checks, scan,
                        self._reason(key, used, reached_time, leftover, current),
                        codec=codec, accept=accept, accept_record=accept_record,
                        only=only, limit=s.limit,
                        descending=descending, reverse_after=s.newest_first and not descending,
                        guards=self._salt_guards(key, self._encode_given(key)),
                        history=s.history)

    def _salt_guards(self, key: KeyLayout, given: dict[str, bytes]) -> tuple[ReadRequest, ...]:
        """A read of the keys before the salt that no salt value of the model starts
        (``BATTERY#7#`` or ``BATTERY#12#`` of salts 0 to 2), when every salt is read:
        a row there is not this model's own."""
        prefix = b""
        for seg in key.segments:
            if isinstance(seg, SaltSegment):
                if all(name in given for name in seg.on):
                    return ()
                rows = RowSet(ranges=_foreign_salts(seg, prefix, key.separator))
                return (ReadRequest(self.codec.table, rows, ReadFilter(
                    families=self.spec.families, cells_per_column=1, strip_values=True),
                    limit=1),)
            if isinstance(seg, ConstantSegment):
                prefix += seg.encode(None) + key.separator
            elif seg.field in given:
                prefix += given[seg.field] + key.separator
            else:
                return ()
        return ()

    @property
    def codec(self) -> TableCodec:
        codec = self.spec.current_codec if self.state.mode == "current" else self.spec.codec
        assert codec is not None
        return codec

    def exact_key(self) -> bytes:
        """The one row key the fields given name (every field of a key without a salt)."""
        key = self.codec.key
        prefixes, used, _ = self._prefixes(key, self._encode_given(key))
        assert len(prefixes) == 1 and len(used) == len(key.fields), (prefixes, used)
        return prefixes[0]

    def reaches_time(self) -> bool:
        """Whether the fields given reach the time segment of the row key."""
        key = self.codec.key
        return self._prefixes(key, self._encode_given(key))[2]

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
                salts = self._salt_values(layout, seg, given)
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

    def _salt_values(self, layout: KeyLayout, seg: SaltSegment,
                     given: dict[str, bytes]) -> list[int]:
        if all(name in given for name in seg.on):
            try:
                return [layout.salt_of(seg, given)]
            except SegmentValueError as exc:
                raise errors.key_error(exc, model=self.spec.name, field=seg.name,
                                       value=getattr(exc, "value", None)) from exc.__cause__
        return list(seg.all_values())

    def _ranges(self, prefixes: list[bytes], reached_time: bool,
                complete: bool) -> list[RowRange]:
        bucket = self.spec.bucket
        if not reached_time:
            # Bucket rows in label order are out of time order when labels do not sort.
            self.sort = self.state.mode == "range" and bucket is not None and not bucket.ordered
            if complete:
                return [RowRange(p, p + b"\x00") for p in prefixes]
            return [RowRange.prefix(p) if p else RowRange() for p in prefixes]
        if bucket is not None and not bucket.ordered:
            return self._label_ranges(prefixes, bucket)
        bounds = self._time_key_bounds()
        if bounds is None:
            return []
        lo, hi = bounds
        return [RowRange(p + lo, p + hi) for p in prefixes]

    def _label_ranges(self, prefixes: list[bytes], bucket: Bucket) -> list[RowRange]:
        """A read per bucket of the range and key prefix, for labels that do not sort
        (``week10`` before ``week9``); past `MAX_LABEL_READS`, every bucket row
        of each prefix (the cell timestamp filter keeps the range), sorted afterwards."""
        s = self.state
        assert s.start_us is not None and s.end_us is not None
        start, end = max(ceil_to(s.start_us, _MS), bucket.first_us), ceil_to(s.end_us, _MS)
        labels: list[bytes] = []
        at = bucket.start(start)
        while start < end and at < end and len(labels) * len(prefixes) <= MAX_LABEL_READS:
            labels.append(bucket.label(at))
            at = bucket.next(at)
        if len(labels) * len(prefixes) > MAX_LABEL_READS:
            self.sort = True
            self.label_reads = (f"over {MAX_LABEL_READS} bucket reads, so every bucket row of "
                                "the key prefix, sorted by time")
            return [RowRange.prefix(p) if p else RowRange() for p in prefixes]
        self.label_reads = "one read per bucket"
        key = self.codec.key
        if key.segments[-1].field == self.spec.timestamp_field:  # the label ends the key
            return [RowRange(p + label, p + label + b"\x00") for p in prefixes for label in labels]
        self.sort = True  # a bucket's rows of several entities, each in time order
        self.label_reads = "one read per bucket, sorted by time"
        return [RowRange.prefix(p + label + key.separator) for p in prefixes for label in labels]

    def _time_key_bounds(self) -> tuple[bytes, bytes] | None:
        """The time segments bounding the range's keys: [first, end)."""
        s = self.state
        assert s.start_us is not None and s.end_us is not None
        bucket = self.spec.bucket
        if bucket is not None:
            start, end = max(ceil_to(s.start_us, _MS), 0), ceil_to(s.end_us, _MS)
            if start >= end:
                return None
            return (bucket.label(bucket.start(start)),
                    self._after(bucket.label(bucket.start(end - 1))))
        assert isinstance(self.spec.timestamp, TimestampSegment)
        enc = self.spec.timestamp.encoding
        start = max(ceil_to(s.start_us, enc.unit), enc.min_us)
        end = min(ceil_to(s.end_us, enc.unit), enc.max_us + enc.unit)
        if start >= end:
            return None
        if enc.reverse:
            return enc.encode_us(end - enc.unit), self._after(enc.encode_us(start))
        if end <= enc.max_us:  # fixed width: every key of an earlier time sorts before it
            return enc.encode_us(start), enc.encode_us(end)
        return enc.encode_us(start), self._after(enc.encode_us(enc.max_us))

    def _after(self, last: bytes) -> bytes:
        """The end of a range whose keys' time segment is at most ``last``."""
        key = self.codec.key
        if key.segments[-1].field == self.spec.timestamp_field:
            return last + b"\x00"  # the time ends the key
        # More segments follow: every key that starts with last + separator.
        return _prefix_end(last + key.separator)

    def _requests(self, table: str, ranges: list[RowRange], exact: bool,
                  key_selects_time: bool = False) -> tuple[ReadRequest, ...]:
        s = self.state
        if not ranges:
            return ()
        row_filter = self._filter(key_selects_time)
        natural_desc = s.mode == "range" and self.spec.reversed_time
        reverse = s.newest_first and not natural_desc
        use_reverse = reverse and self.reverse_scan
        rows_are_events = not self.codec.layout.bucketed
        limit = s.limit if exact and s.limit and rows_are_events else None
        return tuple(
            ReadRequest(table, RowSet(ranges=(r,)) if r != RowRange() else RowSet(), row_filter,
                        limit if (not reverse or use_reverse) else None, use_reverse)
            for r in ranges
        )

    def _filter(self, key_selects_time: bool = False) -> ReadFilter:
        spec, s = self.spec, self.state
        main = s.mode == "range"
        columns = None
        layout = self.codec.layout
        if s.only is not None and spec.serialization is None and layout.columns_are_fields:
            # The values the client checks are read too, chosen or not.
            checked = tuple(n for n, _ in self.value_checks if n not in s.only)
            columns = _only_columns(self.codec, (*s.only, *checked))
        if columns is None and spec.unknown_columns == "ignore":
            columns = _event_columns(spec, layout)
        if columns is not None:  # a condition sees the cells of its column, read or not
            columns = (*columns, *((c.family, c.qualifier) for c in self.conditions
                                   if c.qualifier is not None
                                   and (c.family, c.qualifier) not in columns))
        ts_start = ts_end = None
        qualifiers = None
        if not main and spec.retention is not None:
            # What the max-age rule deletes in the main table is no current value either.
            ts_start = self.codec.layout.cell_timestamp(self._horizon())
        if main and (key_selects_time or not spec.event_time_cells):
            # Cell timestamps say nothing of event times: the row key and the
            # qualifier select the events, the client checks their times.
            assert s.start_us is not None and s.end_us is not None
            if spec.retention is not None:  # max age counts from the cell timestamp all the same
                ts_start = self._horizon()
            qualifiers = layout.qualifier_range(spec, s.start_us, s.end_us)
        elif main:
            assert s.start_us is not None and s.end_us is not None
            # Events of whole ms: t >= start exactly when t >= ceil(start). Finer
            # events have ms-floored cell timestamps and are checked client-side.
            exact_ms = spec.time_unit >= _MS
            ts_start = max(ceil_to(s.start_us, _MS) if exact_ms else s.start_us // _MS * _MS, 0)
            if spec.retention is not None:
                # What the max-age rule deletes is gone on every backend, collected or not.
                ts_start = max(ts_start, self._horizon())
            ts_end = max(ceil_to(s.end_us, _MS), ts_start)
            if layout.version_cut(spec) is not None:
                # The reader sees the row's kept versions whole up to its end, to leave
                # out the events the version limit may have cut in part; the client
                # checks the range's end.
                ts_end = None
            qualifiers = layout.qualifier_range(spec, s.start_us, s.end_us)
        filters: dict[str, Any] = dict(
            columns=columns,
            qualifier_start=qualifiers[0] if qualifiers else None,
            qualifier_end=qualifiers[1] if qualifiers else None,
            timestamp_start=ts_start, timestamp_end=ts_end, conditions=self.conditions,
            row_key_regex=self.key_regex)
        if s.history:  # every version it keeps (the amendments): all, or as many as GC keeps
            return ReadFilter(families=spec.families, cells_per_column=spec.max_versions,
                              **filters)
        if main:  # the versions the table's GC rule keeps, collected or not
            return spec.events_filter(**filters)
        return ReadFilter(families=spec.families, cells_per_column=layout.read_versions,
                          **filters)

    def _horizon(self) -> int:
        """The oldest cell timestamp the model's max age keeps, now."""
        horizon = self.spec.horizon(self.now_us)
        assert horizon is not None  # called only with a retention
        return horizon

    def _client_checks(self, leftover: list[str]) -> tuple[
            tuple[str, ...], Callable[[Any], bool], Callable[[Any], bool]]:
        """The checks left to the client, in words, and their tests of an instance and
        of a record."""
        s = self.state
        wanted = {name: value for name, value in s.fields if name in leftover}
        checks = [f"{name} == {value!r}" for name, value in wanted.items()]
        ts_name = self.spec.timestamp_field
        # The cell timestamp filter is exact when event times are whole milliseconds
        # and cells carry them.
        need_time = s.mode == "range" and (
            self.spec.time_unit < _MS or not self.spec.event_time_cells
            or self.codec.layout.version_cut(self.spec) is not None)
        if need_time:
            checks.append(f"{s.start_us} <= {ts_name} (us) < {s.end_us}")
        values = self.value_checks
        checks.extend(interval.describe(name) for name, interval in values)
        if not checks:
            return (), _accept_all, _accept_all
        span = (s.start_us or 0, s.end_us or 0) if need_time else None
        defaults = {v.name: v.default_value for v in self.codec.shape.values
                    if v.has_default and any(n == v.name for n, _ in values)}
        return (tuple(checks), _acceptor(wanted, ts_name, span, values, records=False),
                _acceptor(wanted, ts_name, span, values, records=True, defaults=defaults))

    def _key_regex(self, key: KeyLayout, leftover: list[str]) -> bytes | None:
        """A regex of the row keys holding the key fields given (those after a gap
        in the prefix too), or ``None`` where a segment before the last of them
        cannot be matched the same way by RE2 on Bigtable (UTF-8 characters) and
        by the emulator (bytes): a fixed-width string, a multi-byte separator.

        Each field's encoded segment is matched literally, so the regex is exact
        (segments round-trip): the client need not check these fields again.
        """
        given = self._encode_given(key)
        sep = key.separator
        if len(sep) != 1:
            return None
        parts = [b"(?s)^"]
        last = max(i for i, seg in enumerate(key.segments) if seg.field in leftover)
        for i, seg in enumerate(key.segments[:last + 1]):
            if i:
                parts.append(_literal(sep))
            if isinstance(seg, ConstantSegment):
                parts.append(_literal(seg.encode(None)))
            elif seg.field in given:
                parts.append(_literal(given[seg.field]))
            elif seg.width is None:
                parts.append(b"[^" + _literal(sep) + b"]*")
            elif isinstance(seg, StrSegment):
                return None  # a width in bytes: RE2 on Bigtable counts characters
            else:
                parts.append(b".{%d}" % seg.width)  # digits: one byte a character
        parts.append(b"(" + _literal(sep) + b".*)?" if last + 1 < len(key.segments) else b"")
        return b"".join(parts)

    def _value_conditions(self) -> tuple[tuple[ValueCondition, ...],
                                         tuple[tuple[str, Interval], ...], str]:
        """The server's value conditions, the client's value checks, and why, in words.

        A condition is applied on the server where the value has a column of
        its own whose codec's bytes sort like its values, and where an event
        without the cell cannot meet it: a value filter never matches a
        missing cell, which is ``None`` (no value, matching no value range) or,
        for a field declared with a default, that default. A row per event
        then gives exactly the events asked for; a bucket row comes whole
        when one of its events matches, and its events are checked on the
        client. Elsewhere (``field=None``, a condition the default may meet,
        a value without a sortable column of its own) the client checks every
        event the other conditions leave, when the query allows it.

        Raises:
            QueryError: a condition the server cannot apply, without ``allow_client``.
        """
        s = self.state
        if not s.where:
            return (), (), ""
        codec = self.codec
        layout, shape = codec.layout, codec.shape
        exact = not layout.bucketed and not s.history
        server: list[ValueCondition] = []
        client: list[tuple[str, Interval]] = []
        refused: list[str] = []
        for name, interval in s.where:
            v = next((v for v in shape.values if v.name == name), None)
            if v is None:  # promoted into this table's row key: decoded with it
                client.append((name, interval))
                continue
            column = layout.value_column(shape, name)
            ranges = getattr(v.codec, "byte_ranges", None)
            why = ("the value is not in a column of its own (serialized, or in the "
                   f"qualifier: layout {layout.name})" if column is None else
                   f"its codec {v.codec.name}'s bytes do not sort like its values"
                   if ranges is None else
                   "no server filter selects an event without the cell (None is stored "
                   "as no cell)" if interval.none else _default_meets(v, interval))
            if why:
                refused.append(f"{interval.describe(name)}: {why}")
                client.append((name, interval))
                continue
            assert column is not None and ranges is not None
            server.append(ValueCondition(column[0], column[1], tuple(ranges(interval)),
                                         label=interval.describe(name)))
            if not exact:
                client.append((name, interval))
        if refused and not s.allow_client:
            raise errors.QueryError(
                f"{self.spec.name}: where({'; '.join(refused)}): the server cannot apply "
                "this filter, so every event of the range "
                f"{'the other conditions leave ' if server else ''}would be read and "
                "checked here. Pass where(..., allow_client=True) to do that")
        notes = []
        if server:
            notes.append("value filter on the server, " + (
                "exact (a row per event)" if exact else
                "rows with a matching cell (events checked client-side)"))
        if refused:
            notes.append("value filter client-side: " + "; ".join(refused))
        return tuple(server), tuple(client), ", ".join(notes)

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
        bucket = self.spec.bucket
        if reached_time and bucket is not None and not bucket.ordered:
            parts.append(f"labels such as {bucket.label(bucket.first_us).decode()} do not sort: "
                         + self.label_reads)
        elif reached_time:
            parts.append("time range in the row key")
        elif self.state.snapshot_us is not None:
            parts.append("a snapshot table holds one period: read it whole")
        elif not current and self.spec.event_time_cells:
            parts.append("time range by cell timestamp filter only")
        if not current and not self.spec.event_time_cells:
            parts.append("cell timestamps are not event times: times checked client-side")
        if leftover:
            where = "by row key regex on the server" if self.key_regex is not None else \
                "client-side"
            parts.append(f"scan filtering {', '.join(leftover)} {where}")
        if self.value_reason:
            parts.append(self.value_reason)
        if self.sort and not reached_time:
            parts.append("bucket labels do not sort: events sorted by time")
        return "; ".join(parts)


def _literal(data: bytes) -> bytes:
    """``data`` matched literally by RE2 (UTF-8) and Python's ``re`` alike: ASCII
    punctuation escaped, control bytes as ``\\xHH``, other bytes (UTF-8 text) as they are."""
    out = bytearray()
    for b in data:
        if b < 0x20 or b == 0x7F:
            out += b"\\x%02x" % b
        elif b < 0x80 and not chr(b).isalnum():
            out += b"\\" + bytes([b])
        else:
            out.append(b)
    return bytes(out)


def _default_meets(v: ValueSpec, interval: Interval) -> str:
    """Why an event stored without ``v``'s cell may meet ``interval`` (its declared
    default does, or a factory makes it), in words; ``""`` where it cannot."""
    if not v.has_default:
        return ""  # a missing cell is None (Optional) or a damaged row: no match
    if v.factory_default:
        return ("its default comes from a factory, so an event stored without the cell "
                "(before the field existed) may meet it, and no server filter selects a "
                "missing cell")
    try:
        meets = interval.contains(v.default)
    except TypeError:  # a default the bounds do not compare with: it may meet them
        meets = True
    if not meets:
        return ""
    return (f"its default {v.default!r} meets it, so the events stored without the cell "
            "(before the field existed) match too, and no server filter selects a "
            "missing cell")


def _acceptor(wanted: dict[str, Any], time_field: str, span: tuple[int, int] | None,
              values: tuple[tuple[str, Interval], ...], *, records: bool,
              defaults: dict[str, Callable[[], Any]] | None = None) -> Callable[[Any], bool]:
    """The client-side test of a decoded event: key fields equal to ``wanted``, value
    fields in their intervals, its time within ``span`` (µs); of an instance, or of a
    record (a dict, time in µs)."""
    lo, hi = span if span is not None else (0, 0)
    made = defaults or {}

    def record_get(item: dict[str, Any], name: str) -> Any:
        # A record leaves out a defaulted value without a cell (filled in later): the
        # check reads the default, as an instance holds it.
        if name in item:
            return item[name]
        default = made.get(name)
        return None if default is None else default()

    get: Callable[[Any, str], Any] = (record_get if made else dict.get) if records \
        else getattr

    def accept(item: Any) -> bool:
        if any(get(item, k) != v for k, v in wanted.items()):
            return False
        if any(not interval.contains(get(item, k)) for k, interval in values):
            return False
        if span is None:
            return True
        us = get(item, time_field)
        return lo <= (us if records else to_micros(us)) < hi

    return accept


def _event_columns(spec: ModelSpec, layout: Layout) -> tuple[tuple[str, bytes], ...] | None:
    """The column filter that leaves out columns no field declares, where the layout
    loses nothing by it (``Layout.read_columns``), or ``None``: with
    ``unknown_columns="ignore"``, cells of a retired field are then never fetched."""
    owned = layout.read_columns(spec)
    if owned is None:
        return None
    return tuple(sorted(owned | {(k.family, k.qualifier) for k in spec.key_columns}))


def _only_columns(codec: TableCodec,
                  only: tuple[str, ...]) -> tuple[tuple[str, bytes], ...] | None:
    """The column filter of ``only(...)`` on the codec's table, or ``None`` when no
    filter can keep every event.

    An event may have no cell in the chosen columns (its optional values are
    None; a promoted value is in the row key, not in a column), so the filter
    also keeps the column of the codec's witness, a required value every
    event has (and which the decoder checks: an event past a version limit is
    left out). A table without a required value is read whole.
    """
    if codec.witness is None:
        return None
    chosen = [v for v in codec.shape.values if v.name in only or v.name == codec.witness]
    return tuple((v.family, v.qualifier) for v in chosen)


# -- the latest values of many entities ---------------------------------------------

#: The most row keys one read of a multi-entity lookup names; more keys go in
#: further reads (Bigtable takes a row set in one request message).
MAX_KEYS_PER_READ = 500
#: The most row-key bytes one read of a multi-entity lookup names.
MAX_KEY_BYTES_PER_READ = 256 * 1024
#: The most reads of one multi-entity lookup on the way at once.
MAX_CONCURRENT_READS = 8


def latest_state(spec: ModelSpec, fields: tuple[tuple[str, Any], ...],
                 as_of_us: int | None = None) -> QueryState:
    """What `latest()` reads of one entity in the main table: its time span
    (up to ``as_of_us`` included, if given), newest first, one event.

    The range compiler makes it the fewest reads the key order allows: a
    reversed timestamp reads one row from the key of the end of the span, a
    forward one reads backwards from it (a reversed scan) with a limit of one
    row, where rows hold one event each.
    """
    lo, hi = time_span(spec)
    if as_of_us is not None:
        hi = max(lo, min(hi, as_of_us + 1))
    return QueryState(mode="range", start_us=lo, end_us=hi, fields=fields,
                      newest_first=True, limit=1)


def _iso(us: int) -> str:
    """A time in µs as ISO 8601 text, for plans."""
    return from_micros(us).isoformat()


@attrs.frozen
class LatestResult(Generic[M]):
    """What `latest_many()` found.

    Attributes:
        fields: the key fields, in the order of the key tuples.
        found: the newest event of each entity that has one, keyed by the
            tuple of its key field values (in ``fields`` order), in the
            order the keys were given.
        missing: the keys (as ``{field: value}`` dicts) of the entities
            without an event, in the order given.
    """

    fields: tuple[str, ...]
    found: dict[tuple[Any, ...], M]
    missing: list[dict[str, Any]]

    def get(self, **key_fields: Any) -> M | None:
        """The newest event of the entity named by ``key_fields``, or ``None``.

        Raises:
            QueryError: ``key_fields`` are not exactly the key fields.
        """
        if set(key_fields) != set(self.fields):
            raise errors.QueryError(f"LatestResult.get() takes the key fields "
                                    f"{', '.join(self.fields) or '(none)'}; got "
                                    f"{', '.join(key_fields) or 'none'}")
        return self.found.get(tuple(key_fields[name] for name in self.fields))


@attrs.frozen
class LatestManyPlan:
    """How `latest_many()` reads the newest event of many entities.

    With a current-value table: ``requests`` read the entities' current rows
    by key, up to `MAX_KEYS_PER_READ` keys per request. Without one:
    ``entities`` holds one `ReadPlan` per entity, the plan
    `latest()` runs (the newest row of its range).
    Executors run the reads (at most ``concurrency`` at once) and hand the
    answers to `result()`.

    Attributes:
        model: the model name.
        table: the table read.
        current: whether the plan reads current rows by key (``requests``),
            else each entity's plan (``entities``).
        as_of_us: the newest event at or before this time (µs) is asked for,
            read from the main table; ``None``: the newest event.
        fields: the key fields of each key, in order.
        keys: the distinct keys asked for, as value tuples, in the order given.
        requests: the reads of current rows (current-value table).
        row_keys: the current row of each key (current-value table).
        entities: the read plan of each key (no current-value table).
        concurrency: the most reads on the way at once.
        keys_per_read: the most row keys one of ``requests`` names.
        codec: the codec that decodes current rows.
    """

    model: str
    table: str
    current: bool
    fields: tuple[str, ...]
    keys: tuple[tuple[Any, ...], ...]
    requests: tuple[ReadRequest, ...] = ()
    row_keys: tuple[bytes, ...] = ()
    entities: tuple[ReadPlan, ...] = ()
    concurrency: int = MAX_CONCURRENT_READS
    keys_per_read: int = MAX_KEYS_PER_READ
    codec: TableCodec | None = attrs.field(default=None, eq=False, repr=False)
    as_of_us: int | None = None

    @property
    def round_trips(self) -> int:
        """The backend reads the plan makes."""
        return len(self.requests) + sum(len(p.requests) + len(p.guards) for p in self.entities)

    def __str__(self) -> str:
        n = len(self.keys)
        head = f"{self.model}: latest of {n} entit{'y' if n == 1 else 'ies'}"
        if not self.current:
            why = ("no current-value table" if self.as_of_us is None else
                   f"as of {_iso(self.as_of_us)}, which the current-value table cannot answer")
            lines = [f"{head}, read table {self.table!r}",
                     f"  why: {why}: the newest row of each entity, "
                     f"{self.concurrency} reads at once"]
            for key, plan in zip(self.keys, self.entities, strict=True):
                lines.append(f"  {key!r}: {plan.reason}")
                lines.extend("  " + line for req in plan.requests
                             for line in _describe_request(req))
            return "\n".join(lines)
        lines = [f"{head}, read table {self.table!r}",
                 f"  why: current rows by key, {self.keys_per_read} keys per read at most, "
                 f"{self.concurrency} reads at once"]
        for req in self.requests:
            lines.append(f"  {len(req.rows.keys)} row keys "
                         f"[{req.rows.keys[0]!r} .. {req.rows.keys[-1]!r}]")
            lines.extend(_describe_request(attrs.evolve(req, rows=RowSet()))[1:])
        return "\n".join(lines)

    def lookups(self, model: type[M]) -> Generator[Together, Any, LatestResult[M]]:
        """The plan as steps (`tsmodel.plan.calls`): the reads, ``concurrency`` at
        once, then their answers folded by `result()`."""
        if not self.current:
            newest = yield Together(tuple(FirstOf(p, model) for p in self.entities),
                                    self.concurrency)
            return self.result(model, newest=newest)
        rows = yield Together(tuple(Read(r) for r in self.requests), self.concurrency)
        return self.result(model, rows=rows)

    def result(self, model: type[M], *, rows: Sequence[Iterable[Row]] = (),
               newest: Sequence[M | None] = ()) -> LatestResult[M]:
        """The answer, from the rows of each of ``requests`` (current-value table) or
        the newest instance each of ``entities`` found (``None``: no event)."""
        events: list[M | None] = [None] * len(self.keys)
        if not self.current:
            events = list(newest)
        else:
            codec = self.codec
            assert codec is not None
            index: dict[bytes, list[int]] = {}
            for i, row_key in enumerate(self.row_keys):
                index.setdefault(row_key, []).append(i)
            for found in rows:
                for row in found:
                    decoded = codec.decode(model, row, None, False)
                    for i in index.get(row.key, ()) if decoded else ():
                        events[i] = decoded[0]
        result: LatestResult[M] = LatestResult(self.fields, {}, [])
        for key, event in zip(self.keys, events, strict=True):
            if event is None:
                result.missing.append(dict(zip(self.fields, key, strict=True)))
            else:
                result.found[key] = event
        return result


def compile_latest_many(spec: ModelSpec, keys: Iterable[Any], features: Features | None = None,
                        now_us: int | None = None, *,
                        keys_per_read: int = MAX_KEYS_PER_READ,
                        as_of_us: int | None = None) -> LatestManyPlan:
    """The plan of the newest event of each entity named in ``keys``.

    Every key is checked and encoded before the plan is made, so a bad one
    stops the lookup before any read. A key named twice is read once. The
    newest event at or before ``as_of_us`` is each entity's newest main row
    of that span (the current-value table holds only the newest event).

    Args:
        spec: the model's spec.
        keys: ``{field: value}`` mappings naming every key field of the
            entity (of the current-value table's key when there is one), or
            tuples of the values in key field order.
        features: the backend's capabilities.
        now_us: the current time (µs; default: the clock).
        keys_per_read: the most row keys one read names.
        as_of_us: the newest event at or before this time (µs), if given.

    Raises:
        QueryError: a key is not a mapping or tuple, names an unknown field,
            or lacks a key field.
        ValidationError: a value does not fit its key field (KeyTypeError:
            the wrong type).
    """
    if keys_per_read < 1:
        raise errors.ArgumentError(f"keys_per_read must be at least 1, got {keys_per_read!r}")
    if now_us is None:
        now_us = time.time_ns() // 1_000
    reverse_scan = features is not None and features.reverse_scan
    layout = spec.current_key if spec.current_key is not None else None
    fields = layout.fields if layout is not None else spec.key_fields
    distinct = list(dict.fromkeys(_key_values(spec, fields, item) for item in keys))
    if spec.current_key is None or as_of_us is not None:
        return LatestManyPlan(spec.name, spec.table, False, fields, tuple(distinct),
                              as_of_us=as_of_us, entities=tuple(
            compile_query(spec, latest_state(spec, tuple(zip(fields, key, strict=True)),
                                             as_of_us),
                          features, now_us) for key in distinct))
    row_keys: list[bytes] = []
    row_filter: ReadFilter | None = None
    for key in distinct:
        compiler = _Compiler(spec, QueryState(mode="current",
                                              fields=tuple(zip(fields, key, strict=True))),
                             reverse_scan, now_us)
        row_keys.append(compiler.exact_key())
        row_filter = row_filter or compiler._filter()
    codec = spec.current_codec
    assert codec is not None and spec.current_table is not None
    requests = tuple(ReadRequest(codec.table, RowSet(keys=chunk), row_filter or ReadFilter())
                     for chunk in _chunks(sorted(set(row_keys)), keys_per_read))
    return LatestManyPlan(spec.name, codec.table, True, fields, tuple(distinct), requests=requests,
                          row_keys=tuple(row_keys), keys_per_read=keys_per_read, codec=codec)


def _key_values(spec: ModelSpec, fields: tuple[str, ...], item: Any) -> tuple[Any, ...]:
    """One key of a multi-entity lookup as a tuple in ``fields`` order, checked."""
    where = f"{spec.name}.latest_many()"
    order = ", ".join(fields) or "no key fields"
    if isinstance(item, Mapping):
        unknown = [name for name in item if name not in fields]
        if unknown:
            raise errors.QueryError(
                f"{where}: {unknown[0]!r} is not a key field (key fields: {order}); "
                f"in key {dict(item)!r}")
        missing = [name for name in fields if name not in item]
        if missing:
            raise errors.QueryError(f"{where}: key {dict(item)!r} lacks the key field(s) "
                                    f"{', '.join(missing)} (every key names {order})")
        values = tuple(item[name] for name in fields)
    elif isinstance(item, tuple):
        if len(item) != len(fields):
            raise errors.QueryError(f"{where}: key {item!r} has {len(item)} value(s); a key "
                                    f"tuple holds {len(fields)}: {order}")
        values = item
    else:
        raise errors.QueryError(f"{where}: each key is a mapping of key fields or a tuple "
                                f"of their values in order ({order}); got {item!r}")
    layout = spec.current_key if spec.current_key is not None else spec.key
    for name, value in zip(fields, values, strict=True):
        try:
            hash(value)
        except TypeError:
            seg = next(s for s in layout.segments if s.field == name)
            try:
                seg.encode(value)  # its own refusal names the type it wants
            except SegmentValueError as exc:
                raise errors.key_error(exc, model=spec.name, field=name, value=value) from None
            raise errors.KeyTypeError(f"{value!r} is not hashable", model=spec.name,
                                      field=name, value=value) from None
    return values


def _chunks(row_keys: list[bytes], per_read: int) -> Iterator[tuple[bytes, ...]]:
    """``row_keys`` in runs of at most ``per_read`` keys and `MAX_KEY_BYTES_PER_READ`."""
    chunk: list[bytes] = []
    size = 0
    for key in row_keys:
        if chunk and (len(chunk) >= per_read or size + len(key) > MAX_KEY_BYTES_PER_READ):
            yield tuple(chunk)
            chunk, size = [], 0
        chunk.append(key)
        size += len(key)
    if chunk:
        yield tuple(chunk)
