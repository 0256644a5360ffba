"""Time buckets: the row-key label of a span of time (minute, hour, day, week, month...).

A bucket row holds every event of one entity within one bucket. The label in
the row key has a fixed width and sorts in time order across years (day
``20170726``, ISO week ``2021-W09``, month ``201707``). Labels that do not
sort, such as ``week1`` ... ``week49`` (no year, no fixed width), are refused.

All arithmetic is on integer microseconds since the epoch, in UTC.
"""

from __future__ import annotations

import abc
import re
from datetime import datetime, timedelta, timezone

import attrs

from tsmodel.encoding.timestamps import FormatEncoding, from_micros, to_micros

__all__ = ["Bucket", "FixedBucket", "WeekBucket", "MonthBucket", "make_bucket", "BUCKET_NAMES"]

_SECOND = 1_000_000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_WEEK = 7 * _DAY

#: Named bucket sizes and their default labels.
BUCKET_NAMES: dict[str, str] = {
    "minute": "%Y%m%d%H%M",
    "hour": "%Y%m%d%H",
    "day": "%Y%m%d",
    "week": "%G-W%V",
    "month": "%Y%m",
}
_FIXED = {"minute": _MINUTE, "hour": _HOUR, "day": _DAY}


class Bucket(abc.ABC):
    """A partition of time into buckets, and the label of each."""

    #: A short name ("day", "week", "15m"...).
    name: str
    #: The label's strftime-like format.
    label_format: str

    @property
    @abc.abstractmethod
    def width(self) -> int:
        """Bytes of every label."""

    @property
    @abc.abstractmethod
    def max_us(self) -> int:
        """The longest bucket, in microseconds (for size estimates)."""

    @abc.abstractmethod
    def start(self, us: int) -> int:
        """The start of the bucket holding ``us``."""

    @abc.abstractmethod
    def next(self, start_us: int) -> int:
        """The start of the bucket after the one starting at ``start_us``."""

    @abc.abstractmethod
    def label(self, start_us: int) -> bytes:
        """The row-key label of the bucket starting at ``start_us``."""

    @abc.abstractmethod
    def parse(self, label: bytes) -> int:
        """The start of the bucket a label names; ``ValueError`` if it names none."""

    def describe(self) -> str:
        return f"{self.name} bucket, label {self.label_format!r} ({self.width} bytes)"


@attrs.frozen
class FixedBucket(Bucket):
    """Buckets of a fixed duration, aligned on the epoch (UTC midnight for divisors of a day)."""

    name: str
    duration: int
    label_format: str
    _encoding: FormatEncoding = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_encoding", FormatEncoding(self.label_format))

    @property
    def width(self) -> int:
        return self._encoding.width

    @property
    def max_us(self) -> int:
        return self.duration

    def start(self, us: int) -> int:
        return us - us % self.duration

    def next(self, start_us: int) -> int:
        return start_us + self.duration

    def label(self, start_us: int) -> bytes:
        return self._encoding.encode_us(start_us)

    def parse(self, label: bytes) -> int:
        us = self._encoding.decode_us(label)
        if us % self.duration:
            raise ValueError(f"{label!r} is not the start of a {self.name} bucket")
        return us


@attrs.frozen
class WeekBucket(Bucket):
    """ISO weeks (Monday to Sunday, UTC), labelled with the ISO year: ``2021-W09``."""

    label_format: str = "%G-W%V"
    name: str = "week"

    def __attrs_post_init__(self) -> None:
        check_week_label(self.label_format)

    @property
    def width(self) -> int:
        return len(self.label(0))

    @property
    def max_us(self) -> int:
        return _WEEK

    def start(self, us: int) -> int:
        monday_based = us + 3 * _DAY  # 1970-01-01 was a Thursday
        return us - monday_based % _WEEK

    def next(self, start_us: int) -> int:
        return start_us + _WEEK

    def label(self, start_us: int) -> bytes:
        return from_micros(start_us).strftime(self.label_format).encode("ascii")

    def parse(self, label: bytes) -> int:
        text = label.decode("ascii")
        dt = datetime.strptime(text + " 1", self.label_format + " %u")
        us = to_micros(dt.replace(tzinfo=timezone.utc))
        if self.label(us) != label:
            raise ValueError(f"{label!r} names no ISO week")
        return us


@attrs.frozen
class MonthBucket(Bucket):
    """Calendar months in UTC, labelled ``201707`` (or another ``%Y..%m`` format)."""

    label_format: str = "%Y%m"
    name: str = "month"
    _encoding: FormatEncoding = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        check_month_label(self.label_format)
        object.__setattr__(self, "_encoding", FormatEncoding(self.label_format + "%d",
                                                             millis=False))

    @property
    def width(self) -> int:
        return self._encoding.width - 2

    @property
    def max_us(self) -> int:
        return 31 * _DAY

    def start(self, us: int) -> int:
        dt = from_micros(us)
        return to_micros(datetime(dt.year, dt.month, 1, tzinfo=timezone.utc))

    def next(self, start_us: int) -> int:
        dt = from_micros(start_us)
        year, month = (dt.year + 1, 1) if dt.month == 12 else (dt.year, dt.month + 1)
        return to_micros(datetime(year, month, 1, tzinfo=timezone.utc))

    def label(self, start_us: int) -> bytes:
        return self._encoding.encode_us(start_us)[:-2]

    def parse(self, label: bytes) -> int:
        return self._encoding.decode_us(label + b"01")


def check_week_label(fmt: str) -> None:
    """Refuse week labels that do not sort in time order, with the reason."""
    directives = re.findall(r"%(.)", fmt)
    if directives == ["G", "V"]:
        return
    if "V" in directives and "Y" in directives:
        raise ValueError(
            f"week label {fmt!r} mixes the calendar year (%Y) with the ISO week (%V): "
            "2021-01-01 lies in week 53 of 2020 and would be labelled 2021-W53, after the "
            "whole of 2021. Use the ISO year: '%G-W%V'"
        )
    raise ValueError(
        f"week label {fmt!r} does not sort in time order: a week label needs the ISO year "
        "then the zero-padded ISO week ('%G-W%V' gives 2021-W09); labels such as week1 ... "
        "week49 carry no year and no fixed width, so week10 sorts before week9 and every "
        "year's weeks interleave"
    )


def check_month_label(fmt: str) -> None:
    """Refuse month labels other than year then month."""
    if re.findall(r"%(.)", fmt) != ["Y", "m"]:
        raise ValueError(
            f"month label {fmt!r} does not sort in time order: use the year then the "
            "zero-padded month, e.g. '%Y%m' (201707) or '%Y-%m'"
        )


def make_bucket(size: str | timedelta, label: str | None = None) -> Bucket:
    """The bucket for a size: ``"minute"``, ``"hour"``, ``"day"``, ``"week"``,
    ``"month"`` or a fixed ``timedelta`` (whole seconds).

    Raises:
        ValueError: an unknown size, or a label that does not sort in time order.
    """
    if isinstance(size, timedelta):
        return _duration_bucket(size, label)
    if size == "week":
        return WeekBucket(label or BUCKET_NAMES["week"])
    if size == "month":
        return MonthBucket(label or BUCKET_NAMES["month"])
    if size in _FIXED:
        fmt = label or BUCKET_NAMES[size]
        _check_fixed_label(size, fmt, _FIXED[size])
        return FixedBucket(size, _FIXED[size], fmt)
    raise ValueError(
        f"unknown bucket size {size!r}; use 'minute', 'hour', 'day', 'week', 'month' "
        "or a datetime.timedelta"
    )


def _duration_bucket(size: timedelta, label: str | None) -> Bucket:
    us = size // timedelta(microseconds=1)
    if us <= 0 or us % _SECOND:
        raise ValueError(f"a bucket duration must be a positive whole number of seconds: {size}")
    if label is None:
        if us % _DAY == 0:
            label = "%Y%m%d"
        elif us % _HOUR == 0:
            label = "%Y%m%d%H"
        elif us % _MINUTE == 0:
            label = "%Y%m%d%H%M"
        else:
            label = "%Y%m%d%H%M%S"
    _check_fixed_label(str(size), label, us)
    return FixedBucket(_short(us), us, label)


def _check_fixed_label(name: str, fmt: str, duration: int) -> None:
    encoding = FormatEncoding(fmt)  # raises ValueError when it does not sort
    if duration % encoding.unit:
        raise ValueError(
            f"label {fmt!r} is coarser than the {name} bucket: two buckets would share a "
            "label; add the finer fields"
        )


def _short(us: int) -> str:
    for unit, suffix in ((_DAY, "d"), (_HOUR, "h"), (_MINUTE, "m"), (_SECOND, "s")):
        if us % unit == 0:
            return f"{us // unit}{suffix}"
    return f"{us}us"  # pragma: no cover - whole seconds are enforced
