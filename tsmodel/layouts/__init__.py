"""Layouts: how one event becomes cells, and how a row's cells become events.

One layout per storage pattern of Google's time-series guide:

* :func:`rows` — a row per event (the default): a column per value field, or
  one serialized cell (single-timestamp unserialized / serialized);
* :func:`cells` — a bucket row, each event a new cell version at its event
  time in one column per value field ("new cells for new events");
* :func:`columns` — a bucket row, each event a new column whose qualifier is
  the encoded measurement and whose value is empty ("new columns for new
  events");
* :func:`offsets` — a bucket row with a column per time offset (``0000`` ...
  ``2345``) holding the measurement or the serialized event.

Every cell's timestamp is the event time (whole milliseconds), so writes are
idempotent and a timestamp-range filter selects events exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from tsmodel.backends.base import Cell, DeleteCells, Mutation, SetCell
from tsmodel.encoding.buckets import Bucket, FixedBucket, MonthBucket, WeekBucket

if TYPE_CHECKING:
    from tsmodel.declare.spec import ModelSpec

__all__ = ["Layout", "rows", "cells", "columns", "offsets"]

_MS = 1_000
_SECOND = 1_000_000
_MINUTE = 60 * _SECOND
_DAY = 86_400 * _SECOND

#: An event read back: its time in microseconds and its value fields.
Event = tuple[int, dict[str, Any]]


class Layout:
    """How events of one model are laid out in the cells of its main table."""

    #: "rows", "cells", "columns" or "offsets".
    name: str = "rows"
    #: Whether a row holds the events of a time bucket.
    bucketed: bool = False
    #: Versions per column a read needs (``None``: all of them).
    read_versions: int | None = 1

    def check(self, spec: ModelSpec) -> str | None:
        """Why the model cannot use this layout, or ``None``."""
        if spec.bucket is not None:
            return (
                "a bucket (ts.timestamp(bucket=...)) needs a bucket layout: "
                "layout=ts.cells(), ts.columns() or ts.offsets(step)"
            )
        return None

    def mutations(self, spec: ModelSpec, us: int, values: dict[str, Any],
                  encoded: dict[str, bytes]) -> tuple[Mutation, ...]:
        """The cells of one validated event at time ``us``.

        ``encoded`` holds each non-``None`` value field already encoded by its codec.
        """
        return value_cells(spec, values, us // _MS * _MS, encoded)

    def events(self, spec: ModelSpec, cells_: tuple[Cell, ...], bucket_start: int | None,
               ) -> Iterator[Event]:
        """The events of one row, oldest first."""
        newest = newest_cells(cells_)
        if newest:
            ts = max(c.timestamp for c in newest.values())
            yield ts, decode_value_cells(spec, {k: c for k, c in newest.items()
                                                if c.timestamp == ts})

    def qualifier_range(self, spec: ModelSpec, start_us: int,
                        end_us: int) -> tuple[bytes, bytes] | None:
        """A qualifier range selecting exactly [start, end) in one row, if one exists."""
        return None

    def describe(self) -> str:
        return "a row per event"


@attrs.frozen
class _Rows(Layout):
    name: str = "rows"


@attrs.frozen
class _Cells(Layout):
    name: str = "cells"
    bucketed: bool = True
    read_versions: int | None = None

    def check(self, spec: ModelSpec) -> str | None:
        return None if spec.bucket else "layout=ts.cells() needs ts.timestamp(bucket=...)"

    def events(self, spec: ModelSpec, cells_: tuple[Cell, ...], bucket_start: int | None,
               ) -> Iterator[Event]:
        by_time: dict[int, dict[tuple[str, bytes], Cell]] = defaultdict(dict)
        for c in cells_:
            by_time[c.timestamp].setdefault((c.family, c.qualifier), c)
        for ts in sorted(by_time):
            yield ts, decode_value_cells(spec, by_time[ts])

    def describe(self) -> str:
        return "a bucket row, a new cell version per event"


@attrs.frozen
class _Columns(Layout):
    name: str = "columns"
    bucketed: bool = True
    read_versions: int | None = None

    def check(self, spec: ModelSpec) -> str | None:
        if not spec.bucket:
            return "layout=ts.columns() needs ts.timestamp(bucket=...)"
        if len(spec.values) != 1 or spec.serialization is not None:
            return ("layout=ts.columns() stores one measurement per row in the qualifier: "
                    "declare exactly one value field (promote the metric name into the key) "
                    "and no serialization")
        if spec.values[0].optional:
            return "layout=ts.columns(): the value field cannot be optional"
        return None

    def mutations(self, spec: ModelSpec, us: int, values: dict[str, Any],
                  encoded: dict[str, bytes]) -> tuple[Mutation, ...]:
        v = spec.values[0]
        return (SetCell(v.family, encoded[v.name], us // _MS * _MS, b""),)

    def events(self, spec: ModelSpec, cells_: tuple[Cell, ...], bucket_start: int | None,
               ) -> Iterator[Event]:
        v = spec.values[0]
        found = sorted((c.timestamp, c.qualifier) for c in cells_ if c.family == v.family)
        for ts, qualifier in found:
            yield ts, {v.name: v.codec.decode(qualifier)}

    def describe(self) -> str:
        return "a bucket row, a new column per event (the value in the qualifier)"


@attrs.frozen
class _Offsets(Layout):
    step: int = 15 * _MINUTE
    name: str = "offsets"
    bucketed: bool = True
    read_versions: int | None = 1

    def check(self, spec: ModelSpec) -> str | None:
        if not spec.bucket:
            return "layout=ts.offsets(step) needs ts.timestamp(bucket=...)"
        if spec.serialization is None and len(spec.values) != 1:
            return ("layout=ts.offsets(step) holds one value per offset column: declare one "
                    "value field, or serialization=ts.Protobuf() for the whole event")
        if self.step <= 0 or self.step % _SECOND:
            return f"offsets step must be a positive whole number of seconds, got {self.step} us"
        return _offset_step_problem(spec.bucket, self.step)

    def mutations(self, spec: ModelSpec, us: int, values: dict[str, Any],
                  encoded: dict[str, bytes]) -> tuple[Mutation, ...]:
        assert spec.bucket is not None
        qualifier = self.qualifier(spec.bucket, us)
        ts = us // _MS * _MS
        if spec.serialization is not None:
            ser = spec.serialization
            return (SetCell(ser.family, qualifier, ts, ser.encode(values)),)
        v = spec.values[0]
        item = values[v.name]
        if item is None:
            return (DeleteCells(v.family, qualifier),)
        return (SetCell(v.family, qualifier, ts, encoded[v.name]),)

    def misaligned(self, bucket: Bucket, us: int) -> bool:
        return (us - bucket.start(us)) % self.step != 0

    def qualifier(self, bucket: Bucket, us: int) -> bytes:
        """The offset column of time ``us``: clock time within the bucket, or a step index."""
        start = bucket.start(us)
        kind, seconds = _offset_kind(bucket, self.step)
        if kind == "index":
            width = len(str(bucket.max_us // self.step - 1))
            return str((us - start) // self.step).zfill(width).encode("ascii")
        day_offset = (us - start) // _DAY if kind != "clock" else 0
        lead = "" if kind == "clock" else f"{day_offset + 1:02d}"[-(1 if kind == "week" else 2):]
        in_day = us % _DAY
        text = f"{in_day // 3_600_000_000:02d}{in_day // _MINUTE % 60:02d}"
        if seconds:
            text += f"{in_day // _SECOND % 60:02d}"
        return (lead + text).encode("ascii")

    def time_of(self, bucket: Bucket, bucket_start: int, qualifier: bytes) -> int:
        """The event time an offset column stands for."""
        kind, seconds = _offset_kind(bucket, self.step)
        text = qualifier.decode("ascii")
        if kind == "index":
            return bucket_start + int(text) * self.step
        lead = {"clock": 0, "week": 1, "month": 2}[kind]
        days = int(text[:lead]) - 1 if lead else 0
        hh, mm = int(text[lead:lead + 2]), int(text[lead + 2:lead + 4])
        ss = int(text[lead + 4:lead + 6]) if seconds else 0
        day_start = bucket_start - bucket_start % _DAY
        return day_start + days * _DAY + ((hh * 60 + mm) * 60 + ss) * _SECOND

    def events(self, spec: ModelSpec, cells_: tuple[Cell, ...], bucket_start: int | None,
               ) -> Iterator[Event]:
        assert spec.bucket is not None and bucket_start is not None
        newest = newest_cells(cells_)
        found = sorted((self.time_of(spec.bucket, bucket_start, q), fam, q)
                       for fam, q in newest)
        for us, fam, q in found:
            yield us, decode_value_cells(spec, {(fam, q): newest[(fam, q)]}, offset=True)

    def qualifier_range(self, spec: ModelSpec, start_us: int,
                        end_us: int) -> tuple[bytes, bytes] | None:
        bucket = spec.bucket
        assert bucket is not None
        if end_us <= start_us or bucket.start(start_us) != bucket.start(end_us - 1):
            return None
        first = -((-start_us) // self.step) * self.step
        last = (end_us - 1) // self.step * self.step
        if first > last:
            return None
        return self.qualifier(bucket, first), self.qualifier(bucket, last) + b"\x00"

    def describe(self) -> str:
        return f"a bucket row, a column per {timedelta(microseconds=self.step)} offset"


def _offset_kind(bucket: Bucket, step: int) -> tuple[str, bool]:
    seconds = step % _MINUTE != 0
    if isinstance(bucket, WeekBucket):
        return "week", seconds
    if isinstance(bucket, MonthBucket):
        return "month", seconds
    if isinstance(bucket, FixedBucket) and _DAY % bucket.duration == 0:
        return "clock", seconds
    return "index", seconds


def _offset_step_problem(bucket: Bucket, step: int) -> str | None:
    if isinstance(bucket, FixedBucket) and bucket.duration % step:
        step_text = timedelta(microseconds=step)
        return f"offsets step {step_text} does not divide the {bucket.name} bucket"
    if isinstance(bucket, (WeekBucket, MonthBucket)) and _DAY % step:
        return f"offsets step {timedelta(microseconds=step)} does not divide a day"
    return None


def rows() -> Layout:
    """A row per event (single-timestamp rows): the default layout."""
    return _Rows()


def cells() -> Layout:
    """Time buckets, a new cell version per event in one column per value field."""
    return _Cells()


def columns() -> Layout:
    """Time buckets, a new column per event: the measurement is the qualifier."""
    return _Columns()


def offsets(step: timedelta = timedelta(minutes=15)) -> Layout:
    """Time buckets with a column per time offset (``0000`` ... ``2345`` for a day).

    Args:
        step: the spacing of offsets; events must fall on a step.
    """
    return _Offsets(step // timedelta(microseconds=1))


# -- cells of value fields, shared by every layout ---------------------------------------


def value_cells(spec: ModelSpec, values: dict[str, Any], ts: int,
                encoded: dict[str, bytes] | None = None) -> tuple[Mutation, ...]:
    """A column per value field (or one serialized cell), all at timestamp ``ts``.

    ``encoded`` may hold values already encoded by their codecs.
    """
    ser = spec.serialization
    if ser is not None:
        return (SetCell(ser.family, ser.qualifier, ts, ser.encode(values)),)
    out: list[Mutation] = []
    for v in spec.values:
        item = values[v.name]
        if item is None:
            # Erase this event's cell, so a re-save with None is exact and idempotent.
            out.append(DeleteCells(v.family, v.qualifier, ts, ts + _MS))
        else:
            data = encoded[v.name] if encoded is not None else v.codec.encode(item)
            out.append(SetCell(v.family, v.qualifier, ts, data))
    return tuple(out)


def newest_cells(cells_: tuple[Cell, ...]) -> dict[tuple[str, bytes], Cell]:
    """The newest cell of each column."""
    newest: dict[tuple[str, bytes], Cell] = {}
    for cell in cells_:
        col = (cell.family, cell.qualifier)
        if col not in newest or cell.timestamp > newest[col].timestamp:
            newest[col] = cell
    return newest


def decode_value_cells(spec: ModelSpec, by_column: dict[tuple[str, bytes], Cell], *,
                       offset: bool = False) -> dict[str, Any]:
    """Value fields from the cells of one event; missing ones are ``None``."""
    ser = spec.serialization
    if ser is not None:
        cell = next(iter(by_column.values()), None) if offset else \
            by_column.get((ser.family, ser.qualifier))
        if cell is None:
            return {v.name: None for v in spec.values}
        decoded: dict[str, Any] = ser.decode(cell.value)
        return decoded
    if offset:
        v = spec.values[0]
        cell = next(iter(by_column.values()))
        return {v.name: v.codec.decode(cell.value)}
    out: dict[str, Any] = {}
    for v in spec.values:
        cell = by_column.get((v.family, v.qualifier))
        out[v.name] = None if cell is None else v.codec.decode(cell.value)
    return out
