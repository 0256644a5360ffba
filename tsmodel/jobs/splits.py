"""Cut a read into disjoint parts at sampled row keys, for workers to read side by side. Pure.

A read plan (`ReadPlan`) is one request per salt
value (or one); a table's sampled row keys
(`sample_row_keys()`) cut its key space
into runs of about equal size. `split_requests()` intersects the two:
each part is one of the plan's requests limited to one run, with the same
filter. The parts are disjoint and together select exactly the rows the
requests select: no row is read twice, none is left out, nothing beyond the
plan is read.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from tsmodel import errors
from tsmodel.ground.base import KeySample, ReadRequest, RowRange, RowSet

__all__ = ["split_requests", "cut_points"]

#: The most parts `cut_points()` keeps by default.
DEFAULT_MOST = 512


def cut_points(samples: Sequence[KeySample], most: int = DEFAULT_MOST) -> list[bytes]:
    """The row keys to cut at: the samples' keys, thinned to at most ``most - 1``
    by their offsets (so that the runs between them stay about equal in size).

    Args:
        samples: a table's sampled row keys, in key order (``b""``, the end, is
            dropped).
        most: the most runs wanted (at least 1).
    """
    keys = sorted({s.key for s in samples if s.key})
    if most < 1:
        raise errors.ArgumentError(f"max_parts (most) must be at least 1, got {most!r}")
    if len(keys) < most:
        return keys
    offsets = {s.key: s.offset for s in samples if s.key}
    total = max((s.offset for s in samples), default=0) or 1
    chosen: list[bytes] = []
    run = 0
    for key in keys:
        at = offsets[key] * most // total  # which of the ``most`` runs the key starts in
        if at > run and len(chosen) < most - 1:
            chosen.append(key)
            run = at
    return chosen


def split_requests(requests: Sequence[ReadRequest], cuts: Sequence[bytes]) -> list[ReadRequest]:
    """The requests, each cut at ``cuts`` into disjoint parts.

    Each part reads the rows of one request that lie between two
    consecutive cut points (``[cut_i, cut_i+1)``, unbounded at either end),
    with the request's filter. Parts that select nothing are left out.
    Limits and the order of rows are not kept: a part has no limit and
    reads in ascending key order.

    Raises:
        ValueError: a request has a row limit (a limit over the whole read
            cannot be split).
    """
    points = sorted(set(cuts) - {b""})
    runs = [RowRange(start, end) for start, end in
            zip([None, *points], [*points, None], strict=True)]
    out: list[ReadRequest] = []
    for request in requests:
        if request.limit:
            raise errors.QueryError(f"a read of {request.table!r} with a row limit cannot be split")
        rows = request.rows
        ranges = (RowRange(),) if rows.is_whole_table() else rows.ranges
        for run in runs:
            keys = tuple(k for k in rows.keys if run.contains(k))
            parts = tuple(part for r in ranges if not (part := _intersect(r, run)).is_empty())
            if keys or parts:
                out.append(attrs.evolve(request, rows=RowSet(keys, parts), reverse=False))
    return out


def _intersect(a: RowRange, b: RowRange) -> RowRange:
    starts = [s for s in (a.start, b.start) if s is not None]
    ends = [e for e in (a.end, b.end) if e is not None]
    return RowRange(max(starts) if starts else None, min(ends) if ends else None)
