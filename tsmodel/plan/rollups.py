"""Rollups: the aggregates of a bucket, kept exact by recomputing them. Pure.

Every save, update, delete and repair of a model with rollups
(`tsmodel.rollup()`) ends with a *refresh* of the (entity, bucket) slots
it touched: each slot's events are read back from the main table (one
read per bucket and table for all the entities of a batch) and its rollup
row is written anew from them, whole (``DeleteRow`` then the cells, in one
atomic row mutation). A rollup row is therefore a function of the main
table alone: replays, out-of-order events, corrections and deletes leave
it exactly as if the events had come once, in order.
`RollupRefresh` plans the reads and the writes;
`Accumulator` is the one aggregation, used by the refresh and by
`tsmodel.QuerySet.resample()` over raw events or rollup rows.

A rollup declared with a ``retention`` keeps no row of a bucket older than
it (the row's cells are stamped with the bucket start, so garbage
collection would delete it at once, and no read returns it): refreshes
and increments leave such buckets alone, and `compile_resample()` reads the
raw events for them where the model keeps its events longer.

Aggregates, per value field ``f`` of a bucket: ``f_count`` (events with a
value), ``f_sum`` (an exact int for int fields; for float fields the
correctly rounded sum, `math.fsum()`, whatever the order of the
events), ``f_min`` and ``f_max`` (NaN when a value is NaN), ``f_last`` (the
value of the newest event with one) and ``f_mean`` (``f_sum / f_count``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

import attrs

from tsmodel import errors
from tsmodel.declare.rollups import label_of as _label
from tsmodel.declare.spec import ModelSpec, RollupSpec
from tsmodel.encoding.codecs import plain_value
from tsmodel.encoding.timestamps import from_micros
from tsmodel.ground.base import (
    AddToCell,
    DeleteRow,
    Features,
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    Row,
    RowMutation,
    RowSet,
    SetCell,
)
from tsmodel.ground.gc import format_duration
from tsmodel.plan.reads import QueryState, ReadPlan, compile_query
from tsmodel.plan.results import ReadStep, TableRole, TableWrite, WriteStep

__all__ = ["Stats", "Window", "Accumulator", "RollupRefresh", "Increments", "ResamplePlan",
           "compile_resample", "windows", "rollup_row", "increment_row", "expired_slot",
           "refresh_steps", "SETTLE_ROUNDS"]


@attrs.frozen
class Stats:
    """The aggregates of one value field over a bucket.

    Attributes:
        count: the events with a value (not ``None``).
        sum: their sum (``None`` without one): an int for int fields.
        min: the smallest value (NaN when one is NaN).
        max: the largest value (NaN when one is NaN).
        last: the value of the newest event with one.
    """

    count: int
    sum: Any
    min: Any
    max: Any
    last: Any

    @property
    def mean(self) -> float | None:
        """``sum / count``, or ``None`` without a value."""
        return None if not self.count or self.sum is None else self.sum / self.count


@attrs.frozen
class Window:
    """One bucket of a resample: an entity's aggregates over ``[start, end)``.

    Attributes:
        key: the entity's key fields and values.
        start: the bucket start (UTC); buckets start at multiples of the
            resample step since the epoch.
        end: the bucket end, exclusive.
        count: the events of the bucket (in the range read).
        fields: per value field, its `Stats`.
    """

    key: Mapping[str, Any]
    start: datetime
    end: datetime
    count: int
    fields: Mapping[str, Stats]

    def __getattr__(self, name: str) -> Any:
        """``window.cpu_mean``: ``window.fields["cpu"].mean`` (any aggregate)."""
        field, _, agg = name.rpartition("_")
        if name.startswith("__") or agg not in ("count", "sum", "min", "max", "last", "mean"):
            raise AttributeError(name)
        fields = object.__getattribute__(self, "fields")
        if field not in fields:
            raise AttributeError(name)
        return getattr(fields[field], agg)


class _Field:
    """One field's running aggregates (exact: sums are taken at the end)."""

    __slots__ = ("n", "ints", "total", "floats", "lo", "hi", "nan", "last", "last_us")

    def __init__(self, ints: bool) -> None:
        self.n = 0
        self.ints = ints
        self.total = 0
        self.floats: list[float] = []
        self.lo: Any = None
        self.hi: Any = None
        self.nan = False
        self.last: Any = None
        self.last_us = -1

    def add(self, n: int, total: Any, lo: Any, hi: Any, last: Any, us: int) -> None:
        self.n += n
        if self.ints:
            self.total += total
        else:
            self.floats.append(total)
        for v in (lo, hi):
            if isinstance(v, float) and math.isnan(v):
                self.nan = True
        if not self.nan and lo is not None and hi is not None:
            if self.lo is None or lo < self.lo:
                self.lo = lo
            if self.hi is None or hi > self.hi:
                self.hi = hi
        if us > self.last_us and last is not None:
            self.last, self.last_us = last, us

    def stats(self) -> Stats:
        if not self.n:
            return Stats(0, None, None, None, None)
        total = self.total if self.ints else _float_sum(self.floats)
        if self.nan:
            return Stats(self.n, total, math.nan, math.nan, self.last)
        return Stats(self.n, total, self.lo, self.hi, self.last)


def _float_sum(values: list[float]) -> float:
    """The correctly rounded sum of ``values``, whatever their order."""
    try:
        return math.fsum(values)
    except ValueError:  # inf + -inf
        return math.nan
    except OverflowError:  # the exact sum is beyond the largest double: its sign
        return math.copysign(math.inf, math.fsum(v * 2.0**-64 for v in values))


class Accumulator:
    """The aggregates of one bucket, fed events or the rollup rows of smaller buckets.

    Args:
        fields: the value fields aggregated.
        int_fields: those holding ints (exact int sums).
    """

    __slots__ = ("count", "_fields")

    def __init__(self, fields: Sequence[str], int_fields: Iterable[str]) -> None:
        ints = set(int_fields)
        self.count = 0
        self._fields = {f: _Field(f in ints) for f in fields}

    def add_event(self, entity: Any, us: int) -> None:
        """One event, at ``us``."""
        self.count += 1
        for name, acc in self._fields.items():
            v = plain_value(getattr(entity, name))  # numpy ints add without wrapping
            if v is not None:
                acc.add(1, v, v, v, v, us)

    def add_rollup(self, row: Any, us: int) -> None:
        """A rollup row of a smaller bucket starting at ``us`` (the min, max and last
        of an increment rollup's row, which holds none, stay ``None``)."""
        self.count += row.count
        for name, acc in self._fields.items():
            n = getattr(row, f"{name}_count")
            if n:
                acc.add(n, getattr(row, f"{name}_sum"), getattr(row, f"{name}_min", None),
                        getattr(row, f"{name}_max", None), getattr(row, f"{name}_last", None),
                        us)

    def stats(self) -> dict[str, Stats]:
        return {name: acc.stats() for name, acc in self._fields.items()}

    def row_values(self) -> dict[str, Any]:
        """The values of a rollup row: ``count`` and ``<field>_<aggregate>``."""
        out: dict[str, Any] = {"count": self.count}
        for name, s in self.stats().items():
            out.update({f"{name}_count": s.count, f"{name}_sum": s.sum, f"{name}_min": s.min,
                        f"{name}_max": s.max, f"{name}_last": s.last})
        return out


def _key_of(spec: ModelSpec, entity: Any) -> tuple[tuple[str, Any], ...]:
    return tuple((name, getattr(entity, name)) for name in spec.key_fields)


# -- keeping rollups in step ---------------------------------------------------------

#: One (entity, bucket) of one rollup: (rollup table, entity key, bucket start).
_Slot = tuple[str, tuple[tuple[str, Any], ...], int]


class RollupRefresh:
    """The recompute of the rollup rows that some events fall in.

    `add()` the events (with the indexes of the entities of a save or a
    delete each stands for); `plan_reads()` gives the reads of the
    slots' events in the main table, one per table, bucket size and bucket
    start (every entity's rows in it); `rows()` turns their answers
    into the rollup rows, each standing for the entities of its slot
    (`refresh_steps()` sends them).

    Args:
        features: the backend's capabilities.
        now_us: the time retention is counted from (default: the clock): a
            slot of a bucket older than its rollup's ``retention`` keeps no
            row and is left out.
    """

    def __init__(self, features: Features | None = None, now_us: int | None = None) -> None:
        self.features = features
        self.now_us = time.time_ns() // 1_000 if now_us is None else now_us
        self._slots: dict[_Slot, tuple[ModelSpec, RollupSpec, type, list[int]]] = {}
        self._plans: dict[_Slot, ReadPlan] = {}
        self.requests: list[ReadRequest] = []
        #: Per request, the slots it reads.
        self._read_slots: list[list[_Slot]] = []

    def add(self, spec: ModelSpec, entity: Any, members: Iterable[int] = (),
            recomputed_only: bool = False) -> None:
        """The slots of one event of ``spec`` (a model with rollups).

        ``recomputed_only``: only the rollups of ``mode="recompute"`` (a save:
        its events are added to the others by `Increments`).
        """
        key = _key_of(spec, entity)
        us = spec.codec.time_of(entity)
        for rollup in spec.rollups:
            if recomputed_only and rollup.mode != "recompute":
                continue
            self.add_slot(spec, rollup, type(entity), key, rollup.start(us), members)

    def add_slot(self, spec: ModelSpec, rollup: RollupSpec, model: type,
                 key: tuple[tuple[str, Any], ...], start: int,
                 members: Iterable[int] = ()) -> None:
        """One (entity, bucket) of a rollup of ``spec`` (of the model class ``model``);
        none of a bucket older than the rollup's retention."""
        if expired_slot(rollup, start, self.now_us):
            return
        slot = (rollup.table, key, start)
        found = self._slots.get(slot)
        if found is None:
            self._slots[slot] = (spec, rollup, model, list(members))
        else:
            found[3].extend(members)

    def __len__(self) -> int:
        return len(self._slots)

    def split(self, size: int) -> list[RollupRefresh]:
        """The slots in refreshes of at most ``size`` slots each (nothing planned yet)."""
        items = list(self._slots.items())
        out = []
        for i in range(0, len(items), max(1, size)):
            part = RollupRefresh(self.features, self.now_us)
            part._slots = {slot: (s, r, m, list(members))
                           for slot, (s, r, m, members) in items[i:i + size]}
            out.append(part)
        return out

    def plan_reads(self) -> list[ReadRequest]:
        """The reads of every slot's events, merged where they share a filter."""
        merged: dict[tuple[str, Any, str], int] = {}
        for slot, (spec, rollup, _, _) in self._slots.items():
            start = slot[2]
            state = QueryState(mode="range", start_us=start, end_us=start + rollup.every,
                               fields=slot[1], allow_scan=True)
            plan = compile_query(spec, state, self.features, main_table=True)
            self._plans[slot] = plan
            for request in plan.requests:
                group = (request.table, request.filter, spec.name)
                i = merged.get(group)
                if i is None:
                    merged[group] = len(self.requests)
                    self.requests.append(request)
                    self._read_slots.append([slot])
                    continue
                was = self.requests[i]
                self.requests[i] = attrs.evolve(was, rows=RowSet(
                    keys=was.rows.keys + request.rows.keys,
                    ranges=was.rows.ranges + request.rows.ranges))
                self._read_slots[i].append(slot)
        return self.requests

    def rows(self, answers: Sequence[Sequence[Row] | BaseException],
             ) -> tuple[dict[str, list[tuple[tuple[int, ...], RowMutation]]],
                        list[tuple[str, tuple[int, ...], MutationOutcome]]]:
        """The rollup rows from the answers of `plan_reads()`' requests.

        Returns:
            Per rollup table, its rows with the entities each stands for,
            and the slots whose read failed: (table, entities, a FAILED
            outcome) for the caller to record.
        """
        events: dict[_Slot, dict[int, Any]] = {slot: {} for slot in self._slots}
        failed: dict[_Slot, BaseException] = {}
        for slots, answer in zip(self._read_slots, answers, strict=True):
            if isinstance(answer, BaseException):
                for slot in slots:
                    failed.setdefault(slot, answer)
                continue
            wanted = set(slots)
            spec, _, model, _ = self._slots[slots[0]]  # one model per request
            codec = self._plans[slots[0]].codec
            assert codec is not None
            for row in answer:
                for entity in codec.decode(model, row, None, False):
                    us = codec.time_of(entity)
                    key = _key_of(spec, entity)
                    for rollup in spec.rollups:
                        slot = (rollup.table, key, rollup.start(us))
                        if slot in wanted and self._plans[slot].accept(entity):
                            events[slot][us] = entity
        by_table: dict[str, list[tuple[tuple[int, ...], RowMutation]]] = {}
        refused = []
        for slot, (_, rollup, _, members) in self._slots.items():
            if slot in failed:
                refused.append((slot[0], tuple(members), MutationOutcome(
                    MutationStatus.FAILED, failed[slot])))
                continue
            by_table.setdefault(slot[0], []).append(
                (tuple(members), rollup_row(rollup, slot, events[slot])))
        return by_table, refused


    def settle(self, written: Mapping[tuple[str, bytes], tuple[tuple[int, ...], RowMutation]],
               answers: Sequence[Sequence[Row] | BaseException],
               ) -> dict[str, list[tuple[tuple[int, ...], RowMutation]]]:
        """The rows to write again, from the answers of `plan_reads()`' requests made
        again once ``written`` (the rows applied, by rollup table and row key) were.

        A row is written again as its bucket now gives it when that differs
        from the row written: another writer saved or deleted an event of
        the bucket between this refresh's read and its write, and may have
        written its own row before this one. One whose read failed is
        written again as it was, to be read again. None left: every row
        written is its bucket's as read after it was written, so the row
        a bucket keeps (the last written) holds every event of the writers
        before it.
        """
        again, _ = self.rows(answers)
        out: dict[str, list[tuple[tuple[int, ...], RowMutation]]] = {}
        read = set()
        for table, items in again.items():
            for members, row in items:
                read.add((table, row.key))
                was = written.get((table, row.key))
                if was is not None and was[1] != row:
                    out.setdefault(table, []).append((members, row))
        for (table, key), item in written.items():
            if (table, key) not in read:
                out.setdefault(table, []).append(item)
        return out


#: How many times a refresh reads its buckets again after writing them (`settle()`).
SETTLE_ROUNDS = 8


def expired_slot(rollup: RollupSpec, start: int, now_us: int) -> bool:
    """Whether ``rollup`` keeps no row for the bucket starting at ``start`` (µs) at
    ``now_us``: it is older than the rollup's retention (refreshes skip it)."""
    kept_from = rollup.kept_from(now_us)
    return kept_from is not None and start < kept_from


def rollup_row(rollup: RollupSpec, slot: _Slot, events: Mapping[int, Any]) -> RowMutation:
    """The whole rollup row of a slot, (rollup table, entity key, bucket start): its
    events' aggregates (``events``: by time in µs), or no row without events.

    The row of an increment rollup is its totals added to the emptied row
    (``DeleteRow`` then ``AddToCell``, one atomic row mutation): what the
    increments of its events, each once, would have left.
    """
    table, key, start = slot
    if not events:
        return RowMutation(_row(rollup, key, start, {}).key, (DeleteRow(),))
    acc = Accumulator(rollup.fields, rollup.int_fields)
    for us in sorted(events):
        acc.add_event(events[us], us)
    values = acc.row_values()
    if rollup.mode == "increment":
        values = {name: values[name] for name in _increment_columns(rollup)}
    row = _row(rollup, key, start, values)
    return RowMutation(row.key, (DeleteRow(), *row.mutations))


def _row(rollup: RollupSpec, key: tuple[tuple[str, Any], ...], start: int,
         values: Mapping[str, Any]) -> Any:
    """The encoded rollup row (key and mutations) of an entity and bucket with ``values``:
    SetCells for a recomputed rollup, AddToCells for an increment rollup."""
    row_spec = rollup.spec
    if not values:
        values = {"count": 0, **{f"{f}_count": 0 for f in rollup.fields}}
    if rollup.mode == "increment":  # the server's int64 sums wrap around; so do ours
        values = {name: None if v is None else _wrap_int64(v) for name, v in values.items()}
    instance = rollup.model(**dict(key), **{row_spec.timestamp_field: from_micros(start)},
                            **values)
    row = row_spec.codec.encode(instance)
    if rollup.mode != "increment":
        return row
    # Its cells as additions; the codec's deletions of a None value's older cells
    # would take back what earlier saves added.
    return row._replace(mutations=tuple(
        AddToCell(m.family, m.qualifier, m.timestamp, int.from_bytes(m.value, "big", signed=True))
        for m in row.mutations if isinstance(m, SetCell)))


def _wrap_int64(n: int) -> int:
    return (n + _INT64_HALF) % (2 * _INT64_HALF) - _INT64_HALF


_INT64_HALF = 1 << 63


def _increment_columns(rollup: RollupSpec) -> list[str]:
    """The columns of an increment rollup's row: ``count``, ``f_count``, ``f_sum``."""
    return ["count", *(f"{f}_{agg}" for f in rollup.fields for agg in ("count", "sum"))]


def increment_row(rollup: RollupSpec, key: tuple[tuple[str, Any], ...], start: int,
                  values: Mapping[str, int]) -> RowMutation:
    """The AddToCells that add ``values`` (``count``, ``f_count``, ``f_sum``) to the
    row of an increment rollup for an entity (``key``) and bucket (``start``, µs)."""
    row = _row(rollup, key, start, values)
    return RowMutation(row.key, row.mutations)


class Increments:
    """What a save adds to its increment rollups: per rollup row, the sums of its events.

    `add()` the events saved (with the entities each stands for); `rows()`
    gives one row mutation per (rollup table, entity, bucket), its events'
    ``count``, ``f_count`` and ``f_sum`` summed in one `AddToCell` each; none
    for a bucket older than the rollup's retention (at ``now_us``, default: the
    clock).
    """

    def __init__(self, now_us: int | None = None) -> None:
        self.now_us = time.time_ns() // 1_000 if now_us is None else now_us
        self._sums: dict[_Slot, tuple[RollupSpec, dict[str, int], list[int]]] = {}

    def add(self, spec: ModelSpec, entity: Any, members: Iterable[int]) -> None:
        """One event of ``spec``, standing for the entities ``members``."""
        key = _key_of(spec, entity)
        us = spec.codec.time_of(entity)
        members = list(members)
        for rollup in spec.rollups:
            if rollup.mode != "increment" or expired_slot(rollup, rollup.start(us), self.now_us):
                continue
            slot = (rollup.table, key, rollup.start(us))
            found = self._sums.get(slot)
            if found is None:
                found = self._sums[slot] = (rollup, dict.fromkeys(
                    _increment_columns(rollup), 0), [])
            sums = found[1]
            sums["count"] += 1
            for name in rollup.fields:
                v = plain_value(getattr(entity, name))
                if v is not None:
                    sums[f"{name}_count"] += 1
                    sums[f"{name}_sum"] += v
            found[2].extend(members)

    def __bool__(self) -> bool:
        return bool(self._sums)

    def rows(self) -> dict[str, list[tuple[tuple[int, ...], RowMutation]]]:
        """Per rollup table, its row mutations with the entities each stands for."""
        out: dict[str, list[tuple[tuple[int, ...], RowMutation]]] = {}
        for (table, key, start), (rollup, sums, members) in self._sums.items():
            values = {name: v for name, v in sums.items()
                      if not (name.endswith("_sum") and not sums[name[:-3] + "count"])}
            out.setdefault(table, []).append(
                (tuple(members), increment_row(rollup, key, start, values)))
        return out


# -- resampling ------------------------------------------------------------------------


@attrs.frozen
class ResamplePlan:
    """How a resample reads: a rollup table's rows, or the raw events.

    Attributes:
        every: the step, in microseconds.
        fields: the value fields aggregated.
        rollup: the rollup read (``None``: the raw events).
        read: the read plan of the rows it aggregates.
        reason: why this source, in words.
    """

    every: int
    fields: tuple[str, ...]
    rollup: RollupSpec | None
    read: ReadPlan
    reason: str

    @property
    def source(self) -> str:
        """``"rollup"`` or ``"raw"``."""
        return "raw" if self.rollup is None else "rollup"

    def __str__(self) -> str:
        head = (f"resample every {_label(self.every)} of {', '.join(self.fields)} from "
                + ("raw events" if self.rollup is None
                   else f"rollup {self.rollup.table!r} ({self.rollup.label} buckets)"))
        return f"{head}\n  why: {self.reason}\n{self.read}"


def compile_resample(spec: ModelSpec, state: QueryState, every: int,
                     fields: Sequence[str] | None, features: Features | None = None,
                     now_us: int | None = None) -> ResamplePlan:
    """The plan of a resample of ``state``'s range: from a rollup where one covers it.

    A rollup serves when its bucket size divides ``every``, the range's start
    and end are multiples of its bucket size, it aggregates every field
    asked for, its key holds the fields the query names, the query has
    no ``where()`` condition, and it still keeps the range's buckets: a
    rollup whose ``retention`` is shorter than the model's (or the model
    keeps its events forever) serves no range starting before its horizon,
    whose windows the raw events hold and it does not. Among those, the
    largest buckets win (fewest rows).

    Raises:
        QueryError: not a ``range(...)`` query, a limit or ``newest_first``,
            or a field that is not a number field.
    """
    if state.mode != "range" or state.snapshot_us is not None:
        raise errors.QueryError(f"{spec.name}: resample() aggregates a range(...) query")
    if state.limit is not None or state.newest_first or state.history:
        raise errors.QueryError(
            f"{spec.name}: resample() aggregates the whole range: drop limit(), "
            "newest_first() and history()")
    numeric = _number_fields(spec)
    if fields is None:
        names = tuple(numeric)
    else:
        names = tuple(fields)
        wrong = [f for f in names if f not in numeric]
        if wrong:
            raise errors.QueryError(
                f"{spec.name}: resample(fields=...) names {', '.join(map(repr, wrong))}: "
                f"not an int or float value field ({', '.join(numeric) or 'none'})")
    if not names:
        raise errors.QueryError(f"{spec.name}: resample(): no int or float value field")
    assert state.start_us is not None and state.end_us is not None
    if now_us is None:
        now_us = time.time_ns() // 1_000
    given = {name for name, _ in state.fields}
    why = "no rollup declared"
    best: RollupSpec | None = None
    # A rollup aggregates every event of its buckets: value conditions need the events.
    rollups = () if state.where else spec.rollups
    if state.where and spec.rollups:
        why = "where() conditions: a rollup aggregates every event, the raw events are read"
    for rollup in rollups:
        size = rollup.every
        if every % size:
            why = f"rollup {rollup.table!r} ({rollup.label}) does not divide the step"
        elif state.start_us % size or state.end_us % size:
            why = (f"the range does not start and end on {rollup.label} boundaries of rollup "
                   f"{rollup.table!r}")
        elif not set(names) <= set(rollup.fields):
            why = f"rollup {rollup.table!r} lacks a field asked for"
        elif not given <= set(rollup.spec.key_fields):
            why = f"rollup {rollup.table!r}'s key lacks a field the query names"
        elif (keep := rollup.spec.retention) is not None and _outlived(
                spec, rollup, state.start_us, now_us):
            why = (f"the range starts before the horizon of rollup {rollup.table!r} "
                   f"(retention {format_duration(keep)}); the model keeps "
                   "its raw events longer")
        elif best is None or _rank(rollup) > _rank(best):
            best = rollup
    if best is not None:
        rstate = attrs.evolve(state, only=None)
        read = compile_query(best.spec, rstate, features, now_us)
        return ResamplePlan(every, names, best, read,
                            f"rollup {best.table!r} ({best.label} buckets) covers the range")
    read = compile_query(spec, attrs.evolve(state, only=names), features, now_us)
    return ResamplePlan(every, names, None, read, why)


def _outlived(spec: ModelSpec, rollup: RollupSpec, start_us: int, now_us: int) -> bool:
    """Whether the model's events reach further back than ``rollup``'s rows, from
    ``start_us`` on: the range's oldest buckets are then in the raw events only."""
    kept_from = rollup.kept_from(now_us)
    if kept_from is None or start_us >= kept_from:
        return False
    raw_from = spec.horizon(now_us)
    return raw_from is None or raw_from < kept_from


def _rank(rollup: RollupSpec) -> tuple[bool, int]:
    """Recomputed rollups (exact, every aggregate) first, then the largest buckets."""
    return rollup.mode == "recompute", rollup.every


def _number_fields(spec: ModelSpec) -> list[str]:
    out = []
    for v in spec.values:
        kind = v.codec.python_type
        if kind is int or (isinstance(kind, tuple) and float in kind and bool not in kind):
            out.append(v.name)
    return out


def _int_fields(spec: ModelSpec, names: Sequence[str]) -> set[str]:
    return {n for n in names if spec.value(n).codec.python_type is int}


class Windows:
    """Folds the rows of a `ResamplePlan` into `Window`s (feed, then finish)."""

    def __init__(self, spec: ModelSpec, plan: ResamplePlan) -> None:
        self.spec = spec
        self.plan = plan
        self._ints = _int_fields(spec, plan.fields)
        self._groups: dict[tuple[tuple[tuple[str, Any], ...], int], Accumulator] = {}

    def feed(self, item: Any) -> None:
        """One instance the plan's read returned (an event, or a rollup row)."""
        rollup = self.plan.rollup
        codec = (rollup.spec if rollup is not None else self.spec).codec
        us = codec.time_of(item)
        group = (_key_of(self.spec, item), us - us % self.plan.every)
        acc = self._groups.get(group)
        if acc is None:
            acc = self._groups[group] = Accumulator(self.plan.fields, self._ints)
        if rollup is None:
            acc.add_event(item, us)
        else:
            acc.add_rollup(item, us)

    def finish(self) -> list[Window]:
        """The windows, by entity key then time."""
        every = self.plan.every
        out = []
        for (key, start), acc in sorted(self._groups.items(),
                                        key=lambda item: ([v for _, v in item[0][0]],
                                                          item[0][1])):
            out.append(Window(dict(key), from_micros(start), from_micros(start + every),
                              acc.count, acc.stats()))
        return out


def windows(spec: ModelSpec, plan: ResamplePlan, items: Iterable[Any]) -> list[Window]:
    """The windows of the instances a resample plan's read returned."""
    fold = Windows(spec, plan)
    for item in items:
        fold.feed(item)
    return fold.finish()


def refresh_steps(refresh: RollupRefresh, record: Callable[[TableWrite, Sequence[
        MutationOutcome]], None]) -> Generator[ReadStep | WriteStep, Any, None]:
    """Recompute rollup rows: read their buckets' events, write them whole, then read
    the buckets again, writing again the rows a concurrent writer's events changed
    (`RollupRefresh.settle()`), until none is left.

    The steps of a save's batch, a delete's and a repair's: ``record`` takes
    each write's outcomes (a failed read FAILS its slots' rows: ``PARTIAL``;
    a row still changing after `SETTLE_ROUNDS` reads is ``UNKNOWN``).
    """
    reads = tuple(refresh.plan_reads())
    answers = yield ReadStep(reads)
    rows, refused = refresh.rows(answers)
    for table, members, outcome in refused:
        record(TableWrite(table, (), (members,), grouped=True, role=TableRole.ROLLUP),
               (outcome,))
    for settling in range(SETTLE_ROUNDS + 1):
        writes = [TableWrite(table, tuple(r for _, r in items), tuple(m for m, _ in items),
                             grouped=True, role=TableRole.ROLLUP)
                  for table, items in rows.items()]
        if not writes:
            return
        if settling == SETTLE_ROUNDS:
            error = errors.BackendError(
                f"rollup rows still changed by concurrent writers after {settling} reads "
                "of their buckets; ts.repair over their time recomputes them")
            for write in writes:
                record(write, [MutationOutcome(MutationStatus.UNKNOWN, error)] * len(write.rows))
            return
        outcomes = yield WriteStep(tuple(writes))
        written: dict[tuple[str, bytes], tuple[tuple[int, ...], RowMutation]] = {}
        for write, outcome in zip(writes, outcomes, strict=True):
            groups = cast("tuple[tuple[int, ...], ...]", write.members)
            if settling == 0:
                record(write, outcome)
            else:  # their first write was recorded: only a failure changes that
                failed = [i for i, o in enumerate(outcome) if not o.ok]
                record(attrs.evolve(write, rows=tuple(write.rows[i] for i in failed),
                                    members=tuple(groups[i] for i in failed)),
                       [outcome[i] for i in failed])
            written.update(((write.table, row.key), (m, row)) for row, m, o
                           in zip(write.rows, groups, outcome, strict=True) if o.ok)
        if not written:
            return
        rows = refresh.settle(written, (yield ReadStep(reads)))
