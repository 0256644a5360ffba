"""Time buckets with a column per time offset (``0000`` ... ``2345`` for a day).

The energy meters' layout of the reference: a bucket row whose qualifiers
are clock times (or day-and-time within a week or month, or a step index
for other buckets), each holding the measurement or the serialized event.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import attrs

from tsmodel import errors
from tsmodel.encoding.buckets import Bucket, FixedBucket, MonthBucket, WeekBucket
from tsmodel.ground.base import Cell, SetCell
from tsmodel.layouts._fragment import Fragment
from tsmodel.layouts.base import (
    CELL_OVERHEAD,
    MS,
    Event,
    Layout,
    Reader,
    TableShape,
    TimeCheck,
    column_name,
    newest_cells,
    not_event_time,
    value_bytes,
)

__all__ = ["Offsets", "offsets"]

_SECOND = 1_000_000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
_DAY = 86_400 * _SECOND


@attrs.frozen
class Offsets(Layout):
    """A bucket row, a column per time offset."""

    #: The spacing of offsets, in microseconds.
    step: int = 15 * _MINUTE
    #: The qualifier format (``None``: ``%H%M``, ``%u%H%M`` or ``%d%H%M`` by bucket).
    qualifier_format: str | None = None

    name = "offsets"
    spelled = "ts.offsets(step)"
    read_versions = 1
    reads_time_from_cells = False

    def check(self, shape: TableShape) -> str | None:
        if shape.serialization is None and len(shape.values) != 1:
            return ("layout=ts.offsets(step) holds one value per offset column: declare one "
                    "value field, or serialization=ts.Protobuf() for the whole event")
        if shape.serialization is None and shape.values[0].optional:
            return ("layout=ts.offsets(step): the value field cannot be optional (an offset "
                    "column holds a reading or nothing: leave out events without one), or "
                    "serialize the event (serialization=ts.Protobuf())")
        if self.step <= 0 or self.step % _SECOND:
            return f"offsets step must be a positive whole number of seconds, got {self.step} us"
        if shape.bucket is None:  # bucket_problem()'s to refuse, before this
            return None
        return _step_problem(shape.bucket, self.step) or self._format_problem(shape.bucket)

    def _format_problem(self, bucket: Bucket) -> str | None:
        if self.qualifier_format is None:
            return None
        if not isinstance(self.qualifier_format, str):
            return (f"ts.offsets(qualifier={self.qualifier_format!r}): qualifier must be a "
                    "format such as '%H%M' or '%-d'")
        kind, _ = _offset_kind(bucket, self.step)
        if kind == "index":
            return (f"ts.offsets(qualifier={self.qualifier_format!r}) names clock times: it "
                    "needs a bucket of a day (or a divisor of a day), a week or a month")
        try:
            fmt = _compiled(self.qualifier_format)
        except ValueError as exc:
            return f"ts.offsets(qualifier={self.qualifier_format!r}): {exc}"
        return fmt.problem(kind, bucket.name, self.step)

    def describe(self) -> str:
        named = "" if self.qualifier_format is None else f" named {self.qualifier_format!r}"
        return f"a bucket row, a column per {self._step_text()} offset{named}"

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

    def value_column(self, shape: TableShape, name: str) -> tuple[str, bytes | None] | None:
        if shape.serialization is not None:
            return None
        return shape.values[0].family, None  # every offset column holds the one value

    def render_writer(self, shape: TableShape, src: Fragment, values: Mapping[str, str]) -> str:
        bucket = shape.bucket
        assert bucket is not None
        ser = shape.serialization
        qualifier = src.bind(functools.partial(self.qualifier, bucket), "offset_qualifier")
        ts = f"us // {MS} * {MS}"
        if ser is not None:
            serialize = src.bind(ser.encode_entity, "serialize")
            cell = src.build(SetCell, repr(ser.family), f"{qualifier}(us)", ts,
                             f"{serialize}(entity)")
        else:
            v = shape.values[0]  # required (checked)
            cell = src.build(SetCell, repr(v.family), f"{qualifier}(us)", ts, values[v.name])
        return f"({cell},)"

    def qualifier(self, bucket: Bucket, us: int) -> bytes:
        """The offset column of time ``us``: clock time within the bucket, or a step index."""
        start = bucket.start(us)
        fmt = self._format(bucket)
        if fmt is None:
            width = len(str(bucket.max_us // self.step - 1))
            return str((us - start) // self.step).zfill(width).encode("ascii")
        in_day = us % _DAY
        return fmt.format((us - start) // _DAY + 1, in_day // _HOUR, in_day // _MINUTE % 60,
                          in_day // _SECOND % 60)

    def time_of(self, bucket: Bucket, bucket_start: int, qualifier: bytes) -> int:
        """The event time an offset column stands for.

        Raises:
            ValueError: the qualifier is not shaped like this layout's.
        """
        us = self._time(bucket, bucket_start, qualifier)
        if us is None:
            raise ValueError(f"{qualifier!r} is not shaped like this layout's qualifiers")
        return us

    def _time(self, bucket: Bucket, bucket_start: int, qualifier: bytes) -> int | None:
        """The time a qualifier shaped like this layout's stands for, or ``None`` if it is
        not shaped like one (possibly no time of the bucket: see `_event_time()`)."""
        fmt = self._format(bucket)
        if fmt is None:
            width = len(str(bucket.max_us // self.step - 1))
            if len(qualifier) != width or not qualifier.isdigit():
                return None
            return bucket_start + int(qualifier) * self.step
        parts = fmt.parse(qualifier)
        if parts is None:
            return None
        day, hh, mm, ss = parts
        day_start = bucket_start - bucket_start % _DAY
        return day_start + (day - 1) * _DAY + ((hh * 60 + mm) * 60 + ss) * _SECOND

    def _format(self, bucket: Bucket) -> _QualifierFormat | None:
        """The compiled qualifier format, or ``None`` for step indexes."""
        kind, seconds = _offset_kind(bucket, self.step)
        if kind == "index":
            return None
        if self.qualifier_format is not None:
            return _compiled(self.qualifier_format)
        lead = {"clock": "", "week": "%u", "month": "%d"}[kind]
        return _compiled(lead + "%H%M" + ("%S" if seconds else ""))

    def reader(self, shape: TableShape) -> Reader:
        bucket = shape.bucket
        assert bucket is not None
        ser = shape.serialization
        v = shape.values[0]
        family = ser.family if ser is not None else v.family

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
            for (fam, qualifier), cell in newest_cells(cells).items():
                us = self._event_time(bucket, bucket_start, fam, qualifier) \
                    if fam == family else None
                if us is not None:
                    if event_time_cells and cell.timestamp != us // MS * MS:
                        raise not_event_time(cell, us, "its offset column")
                    found.append((us, cell))
            found.sort()
            return [(us, decode(cell)) for us, cell in found]

        return read

    def _event_time(self, bucket: Bucket, bucket_start: int, family: str,
                    qualifier: bytes) -> int | None:
        """The time of an offset column, or ``None`` for another column of the row.

        A qualifier shaped like this layout's (all digits of its width, or its
        ``qualifier=`` format) that no time of the bucket gives is damaged:
        refused, never read as another time.
        """
        us = self._time(bucket, bucket_start, qualifier)
        if us is None:
            return None  # a row-level column beside the offsets (the guide's METER:ID)
        if bucket.start(us) != bucket_start or self.qualifier(bucket, us) != qualifier:
            raise errors.CellDecodingError(
                f"qualifier {qualifier.decode()!r} is no {self._step_text()} offset of the "
                f"{bucket.name} bucket", column=column_name(family, qualifier))
        return us

    def owns_column(self, shape: TableShape) -> Callable[[str, bytes], bool]:
        bucket = shape.bucket
        assert bucket is not None
        ser = shape.serialization
        family = ser.family if ser is not None else shape.values[0].family
        start = bucket.start(0)
        # A qualifier shaped like an offset column's (one no time gives is refused
        # by the reader as damage).
        return lambda f, qualifier: f == family and self._time(bucket, start,
                                                                qualifier) is not None

    def row_column_problem(self, shape: TableShape, family: str,
                           qualifier: bytes) -> str | None:
        bucket = shape.bucket
        assert bucket is not None
        ser = shape.serialization
        if family != (ser.family if ser is not None else shape.values[0].family):
            return None  # the reader reads offsets of their own family only
        if self._time(bucket, bucket.start(0), qualifier) is not None:
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
        fmt = self._format(bucket)
        if fmt is not None and not fmt.sorts:
            return None  # qualifiers such as 1 ... 31 do not sort in time order
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


#: A directive of an offset qualifier format, a literal, or anything else (refused).
_TOKEN = re.compile(r"%(-?)([duHMS])|([^%]+)|(%.?)")
#: Each directive's significance (for sorting), zero-padded width and largest value.
_DIRECTIVES = {"d": (0, 2, 31), "u": (0, 1, 7), "H": (1, 2, 23), "M": (2, 2, 59),
               "S": (3, 2, 59)}


class _QualifierFormat:
    """A compiled offset qualifier format, such as ``%H%M`` or ``%-d``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, bool] | bytes] = []
        pattern = []
        for m in _TOKEN.finditer(text):
            flag, letter, literal, bad = m.groups()
            if bad is not None:
                raise ValueError(f"{bad!r} is no directive of an offset qualifier; use %d %u "
                                 "%H %M %S, or %-d (no zero padding)")
            if literal is not None:
                if any(ch.isdigit() for ch in literal):
                    raise ValueError(f"the digits of {literal!r} could be read as a time")
                self.tokens.append(literal.encode("utf-8"))
                pattern.append(re.escape(literal))
                continue
            if any(t[0] == letter for t in self.tokens if isinstance(t, tuple)):
                raise ValueError(f"%{letter} appears twice")
            if self.tokens and isinstance(self.tokens[-1], tuple) and not self.tokens[-1][1]:
                raise ValueError("an unpadded directive (%-d...) followed by another directive "
                                 "is ambiguous: 1 12 or 11 2? Put text between them")
            width = _DIRECTIVES[letter][1]
            self.tokens.append((letter, flag == ""))
            pattern.append(f"([0-9]{{{width}}})" if flag == "" or width == 1
                           else "([1-9][0-9]?|0)")
        if not self.tokens:
            raise ValueError("an empty format names no offset")
        self._pattern = re.compile("".join(pattern).encode("ascii"))
        ranks = [_DIRECTIVES[t[0]][0] for t in self.tokens if isinstance(t, tuple)]
        #: Whether qualifiers sort in time order (then a read can select a range of them).
        self.sorts = ranks == sorted(ranks) and all(
            t[1] for t in self.tokens if isinstance(t, tuple))
        self.letters = frozenset(t[0] for t in self.tokens if isinstance(t, tuple))

    def problem(self, kind: str, bucket: str, step: int) -> str | None:
        """Why the format cannot name every step of the bucket, or ``None``."""
        day = {"month": "d", "week": "u"}.get(kind)
        needed = {day} if day else set()
        needed |= {letter for letter, unit in (("H", _DAY), ("M", _HOUR), ("S", _MINUTE))
                   if step % unit}
        missing = sorted(needed - self.letters)
        other = sorted(self.letters & ({"d", "u"} - needed))
        if missing:
            return (f"ts.offsets(qualifier={self.text!r}) does not tell apart every "
                    f"{timedelta(microseconds=step)} step of a {bucket} bucket: add "
                    + ", ".join(f"%{m}" for m in missing))
        if other:
            return (f"ts.offsets(qualifier={self.text!r}): %{other[0]} names no day of a "
                    f"{bucket} bucket" + (f"; use %{day}" if day else ""))
        return None

    def format(self, day: int, hh: int, mm: int, ss: int) -> bytes:
        values = {"d": day, "u": day, "H": hh, "M": mm, "S": ss}
        out = []
        for t in self.tokens:
            if isinstance(t, bytes):
                out.append(t)
                continue
            letter, padded = t
            width = _DIRECTIVES[letter][1] if padded else 1
            out.append(str(values[letter]).zfill(width).encode("ascii"))
        return b"".join(out)

    def parse(self, qualifier: bytes) -> tuple[int, int, int, int] | None:
        """``(day, hour, minute, second)`` of a qualifier, or ``None`` if not of this shape."""
        m = self._pattern.fullmatch(qualifier)
        if m is None:
            return None
        values = {"d": 1, "u": 1, "H": 0, "M": 0, "S": 0}
        numbers = iter(m.groups())
        for t in self.tokens:
            if isinstance(t, tuple):
                values[t[0]] = int(next(numbers))
        day = values["d"] if "d" in self.letters else values["u"]
        return day, values["H"], values["M"], values["S"]


@functools.lru_cache(maxsize=64)
def _compiled(text: str) -> _QualifierFormat:
    return _QualifierFormat(text)


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


def offsets(step: timedelta = timedelta(minutes=15), *, qualifier: str | None = None) -> Layout:
    """Time buckets with a column per time offset (``0000`` ... ``2345`` for a day).

    Args:
        step: the spacing of offsets; events must fall on a step.
        qualifier: the offset columns' names, as a format of the offset's time:
            ``%d`` (day of the month), ``%u`` (day of the ISO week, 1-7),
            ``%H``, ``%M``, ``%S``, zero-padded; ``%-d`` (and ``%-H``...)
            without padding; other text as is. The default is ``%H%M`` in a
            day (``2345``), ``%u%H%M`` in a week, ``%d%H%M`` in a month; the
            guide's month row ``TEMP:1`` ... ``TEMP:31`` is
            ``ts.offsets(timedelta(days=1), qualifier="%-d")``. Checked when
            the model is defined: it must name every step of the bucket.
    """
    return Offsets(step // timedelta(microseconds=1), qualifier)
