"""The operations the state machine draws: queries with their refinements.

Plain values with a short ``repr``, so that a shrunk failing run prints as
a readable list of steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from tests.oracle.reference import dt_of, iso

__all__ = ["Refine", "RangeQuery", "CurrentQuery", "aware"]


def aware(us: int, zone: int) -> datetime:
    """The instant ``us`` shown at UTC offset ``zone`` minutes (UTC where it cannot be)."""
    utc = dt_of(us)
    try:
        return utc.astimezone(timezone(timedelta(minutes=zone)))
    except OverflowError:  # year 9999 shown east of UTC
        return utc


@dataclass(frozen=True)
class Refine:
    """Refinements and how the QuerySet is run.

    ``run``: ``list``, ``count``, ``first``, ``exists``, or ``slice`` (a list
    of ``qs[:limit]`` instead of ``qs.limit(limit)``).
    """

    limit: int | None = None
    newest_first: bool = False
    only: tuple[str, ...] | None = None
    run: str = "list"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def __repr__(self) -> str:
        parts = []
        if self.newest_first:
            parts.append(".newest_first()")
        if self.only is not None:
            parts.append(f".only{self.only!r}")
        if self.limit is not None:
            parts.append(f"[:{self.limit}]" if self.run == "slice" else f".limit({self.limit})")
        if self.run not in ("list", "slice"):
            parts.append(f".{self.run}()")
        return "".join(parts)


@dataclass(frozen=True)
class RangeQuery:
    start: int
    end: int
    fields: tuple[tuple[str, Any], ...]
    allow_scan: bool
    refine: Refine
    zone: int = 0

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def __repr__(self) -> str:
        args = [iso(self.start), iso(self.end)] + [f"{k}={v!r}" for k, v in self.fields]
        if self.allow_scan:
            args.append("allow_scan=True")
        return f"range({', '.join(args)}){self.refine!r}"


@dataclass(frozen=True)
class CurrentQuery:
    fields: tuple[tuple[str, Any], ...]
    allow_scan: bool
    refine: Refine

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def __repr__(self) -> str:
        args = [f"{k}={v!r}" for k, v in self.fields]
        if self.allow_scan:
            args.append("allow_scan=True")
        return f"current({', '.join(args)}){self.refine!r}"
