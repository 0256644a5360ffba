"""Value intervals as ranges of encoded bytes, for codecs whose bytes sort like values.

Bigtable compares cell values as bytes. A server-side value filter is exact
only where the codec's bytes sort as its values do, piecewise: int64 (two's
complement: the negatives sort after the positives, each half in order),
float64 (IEEE 754: the positives in order, the negatives in reverse order
after them, NaN beyond the infinities), UTF-8 (code point order, Python's
``str`` order), booleans and raw bytes. `Interval` is what a query
asks; each codec's ``byte_ranges`` turns it into the byte ranges whose union
holds exactly the encodings of the values in it (never a NaN).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["Interval", "ByteRange", "int64_ranges", "float64_ranges", "plain_ranges"]

#: ``(start, start_closed, end, end_closed)``; ``None``: no bound on that side.
ByteRange = tuple["bytes | None", bool, "bytes | None", bool]

_INT64 = struct.Struct(">q")
_FLOAT64 = struct.Struct(">d")
_MIN_INT64, _MAX_INT64 = -(2**63), 2**63 - 1


@attrs.frozen
class Interval:
    """Values ``low <(=) value <(=) high``; a ``None`` bound leaves its side open-ended.

    With ``none``, the interval holds ``None`` alone (an optional value without
    a cell), its bounds unused: no byte range holds it.
    """

    low: Any = None
    low_closed: bool = True
    high: Any = None
    high_closed: bool = True
    none: bool = False

    def contains(self, value: Any) -> bool:
        """Whether ``value`` lies in the interval (``None`` and NaN never do, except
        ``None`` in the ``none`` interval)."""
        if self.none:
            return value is None
        if value is None or value != value:
            return False
        if self.low is not None and not (self.low <= value if self.low_closed
                                         else self.low < value):
            return False
        return self.high is None or (value <= self.high if self.high_closed
                                     else value < self.high)

    def narrowed(self, other: Interval) -> Interval:
        """The values in both intervals (of the same kind: both ``none`` or neither)."""
        assert self.none == other.none, "None and a value range have no value in common"
        if self.none:
            return self
        low, low_closed = self.low, self.low_closed
        if other.low is not None and (low is None or other.low > low or (
                other.low == low and not other.low_closed)):
            low, low_closed = other.low, other.low_closed
        high, high_closed = self.high, self.high_closed
        if other.high is not None and (high is None or other.high < high or (
                other.high == high and not other.high_closed)):
            high, high_closed = other.high, other.high_closed
        return Interval(low, low_closed, high, high_closed)

    def describe(self, name: str) -> str:
        """The interval in words: ``0.9 < cpu <= 1``, ``venue is None``."""
        if self.none:
            return f"{name} is None"
        low = "" if self.low is None else f"{self.low!r} {'<=' if self.low_closed else '<'} "
        high = "" if self.high is None else \
            f" {'<=' if self.high_closed else '<'} {self.high!r}"
        if self.low is not None and self.low == self.high and self.low_closed \
                and self.high_closed:
            return f"{name} == {self.low!r}"
        return f"{low}{name}{high}"


def _valid(r: ByteRange) -> bool:
    start, start_closed, end, end_closed = r
    if start is None or end is None:
        return True
    return start < end or (start == end and start_closed and end_closed)


def int64_ranges(interval: Interval) -> list[ByteRange]:
    """The big-endian two's complement encodings of the ints in ``interval``."""
    low = _MIN_INT64 if interval.low is None else (
        math.ceil(interval.low) if interval.low_closed else math.floor(interval.low) + 1)
    high = _MAX_INT64 if interval.high is None else (
        math.floor(interval.high) if interval.high_closed else math.ceil(interval.high) - 1)
    low, high = max(low, _MIN_INT64), min(high, _MAX_INT64)
    out: list[ByteRange] = []
    if low <= high and high >= 0:  # the non-negative half: 0x00.. to 0x7f..
        out.append((_INT64.pack(max(low, 0)), True, _INT64.pack(high), True))
    if low <= high and low < 0:  # the negative half: 0x80.. to 0xff.., in order too
        out.append((_INT64.pack(low), True, _INT64.pack(min(high, -1)), True))
    return out


def float64_ranges(interval: Interval) -> list[ByteRange]:
    """The big-endian IEEE 754 encodings of the floats in ``interval`` (never a NaN).

    Zero has two encodings (``+0.0``, ``-0.0``): both are in when 0 is.
    """
    enc: Callable[[float], bytes] = _FLOAT64.pack
    lo = None if interval.low is None else float(interval.low)
    hi = None if interval.high is None else float(interval.high)
    out: list[ByteRange] = []
    # Non-negative half, +0.0 to +inf: bytes ascend with the values.
    if hi is None or hi >= 0:
        start, start_closed = (0.0, True) if lo is None or lo < 0 else (
            abs(lo), interval.low_closed)
        end, end_closed = (math.inf, True) if hi is None else (abs(hi), interval.high_closed)
        out.append((enc(start), start_closed, enc(end), end_closed))
    # Negative half, -0.0 to -inf: bytes ascend as the values descend.
    if lo is None or lo <= 0:
        top, top_closed = (-0.0, True) if hi is None or hi > 0 else (
            -abs(hi), interval.high_closed)
        bottom, bottom_closed = (-math.inf, True) if lo is None else (
            -abs(lo), interval.low_closed)
        out.append((enc(top), top_closed, enc(bottom), bottom_closed))
    return [r for r in out if _valid(r)]


def plain_ranges(interval: Interval, encode: Callable[[Any], bytes]) -> list[ByteRange]:
    """The encodings of a codec whose bytes sort exactly as its values (UTF-8, bytes)."""
    r: ByteRange = (None if interval.low is None else encode(interval.low), interval.low_closed,
                    None if interval.high is None else encode(interval.high),
                    interval.high_closed)
    return [r] if _valid(r) else []
