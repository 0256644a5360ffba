"""Time buckets: the row-key label of a span of time (minute, hour, day, week, month...).

A bucket row holds every event of one entity within one bucket. The label in
the row key has a fixed width and sorts in time order across years (day
``20170726``, ISO week ``2021-W09``, month ``201707``). Labels that do not
sort, such as ``week1`` ... ``week49`` (no year, no fixed width), are refused,
unless they are declared for a table another program writes: buckets
numbered from an origin (`NumberedBucket`), whose reads take one read
per bucket instead of one row range.

All arithmetic is on integer microseconds since the epoch, in UTC.
"""

from __future__ import annotations

import abc
import re
from datetime import datetime, timedelta, timezone

import attrs

from tsmodel.encoding.timestamps import FormatEncoding, from_micros, to_micros

__all__ = ["Bucket", "FixedBucket", "WeekBucket", "MonthBucket", "NumberedBucket", "make_bucket",
           "BUCKET_NAMES"]

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
    #: Whether labels sort in time order (one row range reads a span of buckets).
    ordered: bool = True

    @property
    @abc.abstractmethod
    def width(self) -> int | None:
        """Bytes of every label (``None``: labels of several widths)."""

    @property
    def max_width(self) -> int:
        """Bytes of the longest label."""
        width = self.width
        assert width is not None
        return width

    @property
    def first_us(self) -> int:
        """The start of the first bucket that has a label."""
        return 0

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
    """Calendar months in UTC, labelled ``201707`` (or another ``%Y..%m`` format), or
    by their first day (``%Y%m%d``: the guide's month row ``VEGGIEGARDEN#20150301``)."""

    label_format: str = "%Y%m"
    name: str = "month"
    _encoding: FormatEncoding = attrs.field(init=False, repr=False)
    #: Label bytes dropped from the encoding (the day a ``%Y%m`` label lacks).
    _trim: int = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        check_month_label(self.label_format)
        first_day = "%d" in self.label_format
        fmt = self.label_format if first_day else self.label_format + "%d"
        object.__setattr__(self, "_encoding", FormatEncoding(fmt, millis=False))
        object.__setattr__(self, "_trim", 0 if first_day else 2)

    @property
    def width(self) -> int:
        return self._encoding.width - self._trim

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
        label = self._encoding.encode_us(start_us)
        return label[:-self._trim] if self._trim else label

    def parse(self, label: bytes) -> int:
        us = self._encoding.decode_us(label + b"01" if self._trim else label)
        if self._trim == 0 and self.start(us) != us:
            raise ValueError(f"{label!r} is not the first day of a month")
        return us


@attrs.frozen
class NumberedBucket(Bucket):
    """Buckets of a fixed duration numbered from an origin: ``week1``, ``week2`` ...

    The labels of a table another program writes (the patterns page's
    ``us-west2#3698#pressure#week1``): the bucket starting at ``origin_us``
    is number 1, the next number 2, written without padding into
    ``label_format`` at ``{n}``. Such labels do not sort in time order
    (``week10`` sorts before ``week9``): a read of a time range reads each
    bucket's label on its own (`ordered` is false).
    """

    name: str
    duration: int
    origin_us: int
    label_format: str = "week{n}"
    ordered = False
    _parts: tuple[bytes, bytes] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        head, _, tail = self.label_format.partition("{n}")
        object.__setattr__(self, "_parts", (head.encode("ascii"), tail.encode("ascii")))

    @property
    def width(self) -> int | None:
        return None

    @property
    def max_width(self) -> int:
        return len(self.label(self.start(_LAST_US)))

    @property
    def max_us(self) -> int:
        return self.duration

    @property
    def first_us(self) -> int:
        return self.origin_us

    def start(self, us: int) -> int:
        return us - (us - self.origin_us) % self.duration

    def next(self, start_us: int) -> int:
        return start_us + self.duration

    def label(self, start_us: int) -> bytes:
        head, tail = self._parts
        return b"%s%d%s" % (head, (start_us - self.origin_us) // self.duration + 1, tail)

    def parse(self, label: bytes) -> int:
        head, tail = self._parts
        number = label[len(head):len(label) - len(tail)]
        if (not label.startswith(head) or not label.endswith(tail) or not number.isdigit()
                or number.startswith(b"0") or len(label) > self.max_width):
            raise ValueError(f"{label!r} is no label {self.label_format!r} (n = 1, 2, ...)")
        start = self.origin_us + (int(number) - 1) * self.duration
        if start > _LAST_US:
            raise ValueError(f"{label!r} names a {self.name} after the year 9999")
        return start

    def describe(self) -> str:
        origin = from_micros(self.origin_us).isoformat()
        return (f"{self.name} bucket numbered from {origin}, label {self.label_format!r} "
                f"({self.label(self.origin_us).decode()}, "
                f"{self.label(self.next(self.origin_us)).decode()}, ...; labels do not sort: "
                "one read per bucket)")


#: The last whole millisecond a datetime holds.
_LAST_US = to_micros(datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=timezone.utc))
_NUMBER = "{n}"


def numbered_bucket(size: str | timedelta, label: str, origin: datetime) -> NumberedBucket:
    """Buckets of ``size`` numbered from ``origin`` in ``label`` (e.g. ``"week{n}"``).

    Raises:
        ValueError: a size without a fixed duration (a month), a label without
            exactly one ``{n}`` or with other braces, ``%`` or non-ASCII text,
            or an origin that is not a timezone-aware datetime of whole
            milliseconds from 1970 on.
    """
    if isinstance(size, timedelta):
        duration = size // timedelta(microseconds=1)
        name = _short(duration) if duration > 0 and not duration % _SECOND else ""
    else:
        duration, name = {**_FIXED, "week": _WEEK}.get(size, 0), size
    if not name or duration <= 0:
        raise ValueError(
            f"numbered labels ({label!r}) need buckets of one duration: 'minute', 'hour', "
            f"'day', 'week' or a timedelta of whole seconds, not {size!r}")
    rest = label.replace(_NUMBER, "", 1)
    if _NUMBER not in label or "{" in rest or "}" in rest or "%" in rest or not label.isascii():
        raise ValueError(
            f"numbered label {label!r} must hold {{n}} once (the bucket's number, 1 for the "
            "bucket at origin=) and otherwise plain ASCII text, e.g. label='week{n}'")
    if not isinstance(origin, datetime) or origin.utcoffset() is None:
        raise ValueError(
            f"origin={origin!r} must be a timezone-aware datetime: the start of bucket 1")
    origin_us = to_micros(origin)
    if origin_us < 0 or origin_us % 1_000:
        raise ValueError(
            f"origin={origin.isoformat()} must be a whole millisecond from 1970 on: bucket "
            "starts are cell timestamps")
    return NumberedBucket(name, duration, origin_us, label)


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
        "year's weeks interleave. To read or write a table another program labels so, "
        "number its weeks: label='week{n}', origin=<the start of week1>, "
        "unsorted_labels=True (reads then take one read per week)"
    )


def check_month_label(fmt: str) -> None:
    """Refuse month labels other than year then month (then the first day)."""
    if re.findall(r"%(.)", fmt) not in (["Y", "m"], ["Y", "m", "d"]):
        raise ValueError(
            f"month label {fmt!r} does not sort in time order: use the year then the "
            "zero-padded month, e.g. '%Y%m' (201707) or '%Y-%m', or the first day of the "
            "month, '%Y%m%d' (20150301)"
        )


def make_bucket(size: str | timedelta, label: str | None = None, *,
                origin: datetime | None = None, unsorted_labels: bool = False) -> Bucket:
    """The bucket for a size: ``"minute"``, ``"hour"``, ``"day"``, ``"week"``,
    ``"month"`` or a fixed ``timedelta`` (whole seconds).

    Args:
        size: the bucket size.
        label: the label's format (default: the size's, e.g. ``%G-W%V``), or
            a numbered label such as ``"week{n}"`` with ``origin``.
        origin: the start of bucket 1 of a numbered label.
        unsorted_labels: accept a numbered label, which does not sort in time
            order (the opt-in that reading another program's table needs).

    Raises:
        ValueError: an unknown size, a label that does not sort in time order
            (a numbered one without ``unsorted_labels``), or ``origin`` and
            ``unsorted_labels`` with a label that sorts.
    """
    if origin is not None or unsorted_labels or (label is not None and _NUMBER in label):
        return _numbered(size, label, origin, unsorted_labels)
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


def _numbered(size: str | timedelta, label: str | None, origin: datetime | None,
              unsorted_labels: bool) -> Bucket:
    """A numbered bucket, declared with all three of its parts, or why not."""
    if label is None or _NUMBER not in label:
        what = "origin=" if origin is not None else "unsorted_labels=True"
        given = "the default label" if label is None else repr(label)
        raise ValueError(
            f"{what} is for numbered bucket labels such as label='week{{n}}' (week1, week2 "
            f"..., numbered from origin=), not for {given}, whose labels sort in time "
            "order: drop it")
    if origin is None:
        raise ValueError(
            f"label={label!r} numbers the buckets: give origin=, the start of bucket 1 "
            "(e.g. origin=datetime(2021, 3, 1, tzinfo=timezone.utc)); a number without "
            "its origin (such as an ISO week without its year) names no one bucket")
    if not unsorted_labels:
        raise ValueError(
            f"label={label!r} does not sort in time order ({label.replace(_NUMBER, '10')} "
            f"sorts before {label.replace(_NUMBER, '9')}), so a time range is no row range; "
            "tsmodel refuses such labels for new tables. To read or write a table another "
            "program labels so, pass unsorted_labels=True: reads then take one read per "
            "bucket")
    return numbered_bucket(size, label, origin)


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
