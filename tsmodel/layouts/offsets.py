"""Time buckets with a column per time offset (``0000`` ... ``2345`` for a day).

The energy meters' layout of the reference: a bucket row whose qualifiers
are clock times (or day-and-time within a week or month, or a step index
for other buckets), each holding the measurement or the serialized event.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import attrs

from tsmodel import errors
from tsmodel.backends.base import Cell, Mutation, SetCell
from tsmodel.encoding.buckets import Bucket, FixedBucket, MonthBucket, WeekBucket
from tsmodel.encoding.timestamps import from_micros
from tsmodel.layouts.base import (
    CELL_OVERHEAD,
    MS,
    Event,
    Layout,
    Reader,
    TableShape,
    TimeCheck,
    Writer,
    column_name,
    newest_cells,
    value_bytes,
)

__all__ = ["Offsets", "offsets"]

_SECOND = 1_000_000
_MINUTE = 60 * _SECOND
_DAY = 86_400 * _SECOND


@attrs.frozen
class Offsets(Layout):
    """A bucket row, a column per time offset."""

    #: The spacing of offsets, in microseconds.
    step: int = 15 * _MINUTE

    name = "offsets"
    read_versions = 1
    reads_time_from_cells = False

    def check(self, shape: TableShape) -> str | None:
        if not shape.bucket:
            return "layout=ts.offsets(step) needs ts.timestamp(bucket=...)"
        if shape.serialization is None and len(shape.values) != 1:
            return ("layout=ts.offsets(step) holds one value per offset column: declare one "
                    "value field, or serialization=ts.Protobuf() for the whole event")
        if shape.serialization is None and shape.values[0].optional:
            return ("layout=ts.offsets(step): the value field cannot be optional (an offset "
                    "column holds a reading or nothing: leave out events without one), or "
                    "serialize the event (serialization=ts.Protobuf())")
        if self.step <= 0 or self.step % _SECOND:
            return f"offsets step must be a positive whole number of seconds, got {self.step} us"
        return _step_problem(shape.bucket, self.step)

    def describe(self) -> str:
        return f"a bucket row, a column per {self._step_text()} offset"

    def _step_text(self) -> str:
        return str(timedelta(microseconds=self.step))

    def time_check(self, shape: TableShape) -> TimeCheck | None:
        whole_ms = super().time_check(shape)
        bucket = shape.bucket
        assert whole_ms is not None and bucket is not None
        off_step = (f"is not on a {self._step_text()} step of its bucket; an offset column "
                    "holds one event per step")

        def check(us: int) -> str | None:
            problem = whole_ms(us)
            if problem is None and (us - bucket.start(us)) % self.step:
                return off_step
            return problem

        return check

    def writer(self, shape: TableShape) -> Writer:
        bucket = shape.bucket
        assert bucket is not None
        ser = shape.serialization
        v = shape.values[0]

        def write(us: int, entity: Any, encoded: Mapping[str, bytes]) -> tuple[Mutation, ...]:
            qualifier = self.qualifier(bucket, us)
            ts = us // MS * MS
            if ser is not None:
                return (SetCell(ser.family, qualifier, ts, ser.encode_entity(entity)),)
            return (SetCell(v.family, qualifier, ts, encoded[v.name]),)

        return write

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

    def reader(self, shape: TableShape) -> Reader:
        bucket = shape.bucket
        assert bucket is not None
        ser = shape.serialization
        v = shape.values[0]

        def decode(cell: Cell) -> dict[str, Any]:
            try:
                if ser is not None:
                    decoded: dict[str, Any] = ser.decode(cell.value)
                    return decoded
                return {v.name: v.codec.decode(cell.value)}
            except errors.CellDecodingError as exc:
                exc.locate(column=column_name(cell.family, cell.qualifier))
                raise

        event_time_cells = shape.event_time_cells

        def read(cells: tuple[Cell, ...], bucket_start: int | None) -> list[Event]:
            assert bucket_start is not None
            found = []
            for (family, qualifier), cell in newest_cells(cells).items():
                us = self._event_time(bucket, bucket_start, family, qualifier)
                if us is not None:
                    if event_time_cells and cell.timestamp != us // MS * MS:
                        raise _not_event_time(cell, us)
                    found.append((us, cell))
            found.sort()
            return [(us, decode(cell)) for us, cell in found]

        return read

    def _event_time(self, bucket: Bucket, bucket_start: int, family: str,
                    qualifier: bytes) -> int | None:
        """The time of an offset column, or ``None`` for another column of the row.

        A qualifier shaped like this layout's (its width, all digits) that no
        time of the bucket gives is damaged: refused, never read as another time.
        """
        width = len(self.qualifier(bucket, bucket_start))
        if len(qualifier) != width or not qualifier.isdigit():
            return None  # a row-level column beside the offsets (the guide's METER:ID)
        us = self.time_of(bucket, bucket_start, qualifier)
        if bucket.start(us) != bucket_start or self.qualifier(bucket, us) != qualifier:
            raise errors.CellDecodingError(
                f"qualifier {qualifier.decode()!r} is no {self._step_text()} offset of the "
                f"{bucket.name} bucket", column=column_name(family, qualifier))
        return us

    def row_column_problem(self, shape: TableShape, family: str,
                           qualifier: bytes) -> str | None:
        bucket = shape.bucket
        assert bucket is not None
        ser = shape.serialization
        if family != (ser.family if ser is not None else shape.values[0].family):
            return None
        width = len(self.qualifier(bucket, bucket.start(0)))
        if len(qualifier) == width and qualifier.isdigit():
            return (f"its qualifier is shaped like the offset columns of the "
                    f"{bucket.name} bucket, which reads would take for an event; choose "
                    "a qualifier with a letter (METER:ID), or another family")
        return None

    def qualifier_range(self, shape: TableShape, start_us: int,
                        end_us: int) -> tuple[bytes, bytes] | None:
        bucket = shape.bucket
        assert bucket is not None
        if end_us <= start_us or bucket.start(start_us) != bucket.start(end_us - 1):
            return None
        first = -((-start_us) // self.step) * self.step
        last = (end_us - 1) // self.step * self.step
        if first > last:
            return None
        return self.qualifier(bucket, first), self.qualifier(bucket, last) + b"\x00"

    def event_bytes(self, shape: TableShape) -> int:
        if shape.serialization is not None:
            return super().event_bytes(shape)
        return 4 + value_bytes(shape.values[0]) + CELL_OVERHEAD

    def events_per_row(self, shape: TableShape, events: float) -> float:
        assert shape.bucket is not None
        return min(events, math.ceil(shape.bucket.max_us / self.step))

    def cells_per_event(self, shape: TableShape) -> int:
        return 1


def _not_event_time(cell: Cell, us: int) -> errors.CellDecodingError:
    """The error for an offset cell whose timestamp is not the time of its offset."""
    return errors.CellDecodingError(
        f"cell timestamp {cell.timestamp} us ({from_micros(cell.timestamp // MS * MS)}) is not "
        f"the time of its offset column ({from_micros(us)}): the table's cells do not carry "
        "event times (written by another program with its clock?), so range reads filtering "
        "by cell timestamp would miss events. Declare event_time_cells=False on the model",
        column=column_name(cell.family, cell.qualifier))


def _offset_kind(bucket: Bucket, step: int) -> tuple[str, bool]:
    seconds = step % _MINUTE != 0
    if isinstance(bucket, WeekBucket):
        return "week", seconds
    if isinstance(bucket, MonthBucket):
        return "month", seconds
    if isinstance(bucket, FixedBucket) and _DAY % bucket.duration == 0:
        return "clock", seconds
    return "index", seconds


def _step_problem(bucket: Bucket, step: int) -> str | None:
    if isinstance(bucket, FixedBucket) and bucket.duration % step:
        step_text = timedelta(microseconds=step)
        return f"offsets step {step_text} does not divide the {bucket.name} bucket"
    if isinstance(bucket, (WeekBucket, MonthBucket)) and _DAY % step:
        return f"offsets step {timedelta(microseconds=step)} does not divide a day"
    return None


def offsets(step: timedelta = timedelta(minutes=15)) -> Layout:
    """Time buckets with a column per time offset (``0000`` ... ``2345`` for a day).

    Args:
        step: the spacing of offsets; events must fall on a step.
    """
    return Offsets(step // timedelta(microseconds=1))
