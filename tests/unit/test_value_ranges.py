"""Value intervals as byte ranges: exactly the encodings of the values inside.

The oracle is Python's own comparison of the values (``Interval.contains``)
against a plain test of the encoded bytes in the ranges, the way Bigtable's
value range filter compares them.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tsmodel.encoding.codecs import Bool, Float64, Int64, Raw, Utf8
from tsmodel.encoding.ordering import ByteRange, Interval


def _in(data: bytes, ranges: list[ByteRange]) -> bool:
    for start, start_closed, end, end_closed in ranges:
        if start is not None and not (start <= data if start_closed else start < data):
            continue
        if end is not None and not (data <= end if end_closed else data < end):
            continue
        return True
    return False


def _intervals(values: st.SearchStrategy[object]) -> st.SearchStrategy[Interval]:
    bound = st.one_of(st.none(), values)
    return st.builds(Interval, bound, st.booleans(), bound, st.booleans())


INT64 = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, -1, 1, 2**63 - 1,
                                                                     -(2**63)]))
FLOATS = st.one_of(st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, math.inf,
                                                                -math.inf, 5e-324]))


@given(_intervals(INT64), INT64)
def test_int64(interval: Interval, value: int) -> None:
    codec = Int64()
    assert _in(codec.encode(value), codec.byte_ranges(interval)) == interval.contains(value)


@given(_intervals(st.one_of(FLOATS, st.integers(-(2**53), 2**53))),
       st.one_of(FLOATS, st.just(math.nan), st.just(-math.nan)))
def test_float64(interval: Interval, value: float) -> None:
    codec = Float64()
    data = codec.encode(value)
    assert _in(data, codec.byte_ranges(interval)) == interval.contains(value), (
        interval, value, codec.byte_ranges(interval))


@given(_intervals(st.floats(-3.5, 3.5)), INT64)
def test_int64_with_float_bounds(interval: Interval, value: int) -> None:
    codec = Int64()
    assert _in(codec.encode(value), codec.byte_ranges(interval)) == interval.contains(value)


@given(_intervals(st.text()), st.text())
def test_utf8(interval: Interval, value: str) -> None:
    codec = Utf8()
    assert _in(codec.encode(value), codec.byte_ranges(interval)) == interval.contains(value)


@given(_intervals(st.booleans()), st.booleans())
def test_bool(interval: Interval, value: bool) -> None:
    codec = Bool()
    assert _in(codec.encode(value), codec.byte_ranges(interval)) == interval.contains(value)


@given(_intervals(st.binary()), st.binary())
def test_raw(interval: Interval, value: bytes) -> None:
    codec = Raw()
    assert _in(codec.encode(value), codec.byte_ranges(interval)) == interval.contains(value)


def test_described() -> None:
    assert Interval(0.9, False).describe("cpu") == "0.9 < cpu"
    assert Interval(1, True, 5, False).describe("n") == "1 <= n < 5"
    assert Interval("a", True, "a", True).describe("s") == "s == 'a'"
