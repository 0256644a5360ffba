"""Progress bars of the single-process jobs: totals counted first, then rows as they are read.

A bar is `tqdm`'s, on standard error, shown by default when that is a
terminal. Its total comes from a keys-only pass over the rows the job is
about to read (`count_rows()`: values stripped server-side, one cell
per row kept), so the bar shows a percentage and an ETA; the count is a
step like the job's others, so it runs on either executor.
"""

from __future__ import annotations

import sys
from typing import Any

import attrs

from tsmodel.ground.base import ReadRequest
from tsmodel.jobs.steps import JobSteps, Rows, Scan

__all__ = ["Progress", "count_rows", "advance", "close"]

#: Rows a counting pass asks for at a time.
_COUNT_CHUNK = 10_000


class Progress:
    """One job's bars: none when turned off (``show`` false).

    Args:
        show: show bars; ``None`` shows them when standard error is a terminal.
    """

    def __init__(self, show: bool | None) -> None:
        self.show = sys.stderr.isatty() if show is None else show

    def bar(self, desc: str, total: int | None, unit: str = " rows") -> Any:
        """A new bar (``None`` when bars are off); close it when done."""
        if not self.show:
            return None
        from tqdm import tqdm  # type: ignore[import-untyped]

        return tqdm(desc=desc, total=total, unit=unit, file=sys.stderr, dynamic_ncols=True)

    def counted(self, desc: str, requests: tuple[ReadRequest, ...] | list[ReadRequest],
                unit: str = " rows") -> JobSteps[Any]:
        """A bar whose total is the rows of ``requests``, counted first (when shown)."""
        if not self.show:
            return None
        total = 0
        for request in requests:
            total += yield from count_rows(request)
        return self.bar(desc, total, unit)


def count_rows(request: ReadRequest) -> JobSteps[int]:
    """The number of rows ``request`` reads, by a keys-only pass (values stripped)."""
    # One cell per column, values stripped: a row passes exactly when it did.
    flt = attrs.evolve(request.filter, strip_values=True, cells_per_column=1)
    scan = Scan(attrs.evolve(request, filter=flt))
    count = 0
    while rows := (yield Rows(scan, _COUNT_CHUNK)):
        count += len(rows)
    return count


def advance(bar: Any, n: int) -> None:
    """Move ``bar`` on by ``n`` (no bar: nothing)."""
    if bar is not None:
        bar.update(n)


def close(bar: Any) -> None:
    """Close ``bar`` (no bar: nothing)."""
    if bar is not None:
        bar.close()

