"""Cutting reads at sampled keys: the parts select exactly the rows of the read, once each."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tsmodel.backends.base import KeySample, ReadFilter, ReadRequest, RowRange, RowSet
from tsmodel.jobs.splits import cut_points, split_requests

KEYS = st.binary(min_size=0, max_size=3)
RANGES = st.builds(RowRange, st.none() | KEYS, st.none() | KEYS)
ROWSETS = st.builds(RowSet, st.lists(KEYS.filter(bool), max_size=4).map(tuple),
                    st.lists(RANGES, max_size=3).map(tuple))


@settings(max_examples=200, deadline=None)
@given(rowsets=st.lists(ROWSETS, min_size=1, max_size=3),
       cuts=st.lists(KEYS, max_size=6),
       stored=st.lists(KEYS.filter(bool), max_size=40, unique=True))
def test_parts_select_each_row_of_the_read_once(rowsets: list[RowSet], cuts: list[bytes],
                                                 stored: list[bytes]) -> None:
    flt = ReadFilter(families=("f",))
    requests = [ReadRequest("t", rows, flt) for rows in rowsets]
    parts = split_requests(requests, cuts)
    assert all(p.filter == flt and p.table == "t" and not p.limit for p in parts)
    for key in stored:
        # The oracle: how many requests select the key, against how many parts do.
        wanted = sum(1 for r in requests if r.rows.contains(key))
        got = sum(1 for p in parts if p.rows.contains(key))
        assert got == wanted, key
    # Each part lies in one run between consecutive cut points.
    points = sorted(set(cuts) - {b""})
    for part in parts:
        chosen = [k for k in stored if part.rows.contains(k)]
        runs = {sum(1 for c in points if c <= k) for k in chosen}
        assert len(runs) <= 1


def test_a_limited_read_is_not_split() -> None:
    with pytest.raises(ValueError, match="row limit"):
        split_requests([ReadRequest("t", limit=5)], [b"m"])


def test_cut_points_thin_the_samples_by_offset() -> None:
    samples = [KeySample(b"k%03d" % i, i * 100) for i in range(100)] + [KeySample(b"", 10_000)]
    assert cut_points(samples, most=1000) == [b"k%03d" % i for i in range(100)]
    four = cut_points(samples, most=4)
    assert four == [b"k025", b"k050", b"k075"]  # runs of about a quarter each
    assert cut_points(samples, most=1) == []
    assert cut_points([], most=4) == []
