"""Open bugs the oracle harness steps around, one named exclusion per issue item.

Each exclusion restricts what the harness generates or checks (a shape flag,
a strategy filter, a check left out for one shape); none weakens a
comparison. When a fix lands, delete its entry here and the code that reads
it (search for ``excluded(N)``), or lift it for one run to see whether the
bug is still there::

    TSMODEL_ORACLE_INCLUDE=7 pytest tests/backends/test_oracle.py -k columns
    TSMODEL_ORACLE_INCLUDE=all pytest tests/backends/test_oracle.py

Numbered items are those of the issue "Data you can trust"; named ones are
divergences the harness found that the issue does not list.
"""

from __future__ import annotations

import os

__all__ = ["OPEN", "excluded"]

#: Issue item (or name of a new finding) -> what goes wrong, how the harness steps around it.
OPEN: dict[int | str, str] = {
    1: "unit='us': two events of one entity in the same millisecond, latest() and "
       "current() give the one written last, not the newest; shape rows_us draws no two "
       "times in one millisecond",
    2: "an alternate key with a bucket timestamp followed by more fields "
       "(game#<hour>#player) returns nothing for a range; shape cells sends no query "
       "that the alternate-key table serves",
    3: "correcting a promoted value (saving the same event with another value in an "
       "alternate key) leaves the old alternate row; shape salted_time never changes "
       "the promoted value of an event",
    6: "the current-value row keeps an older optional cell when the newest event has "
       "None there; the raw current-row check skips shapes with optional values",
    7: "ts.columns(): a corrected event (same time, another value) comes back as two "
       "events; shape columns never changes the value of an event",
    11: "ts.cells() bucket rows past their version limit return half-filled events "
        "(optional values make columns hold different numbers of versions); shape "
        "cells gets a version limit its rows never reach",
    9: "latest() without a current-value table misses the events late on 9999-12-31 of "
       "a bucketed timestamp; shapes cells_blob and offsets_blob draw no time on "
       "9999-12-31",
    "only-optional": "only(...) of optional values drops the events whose selected values "
                     "are all None (their rows have no cell in the column filter) instead of "
                     "returning them with None; only() always names a required value",
    "only-promoted-value": "only(...) naming a value promoted into an alternate key raises "
                           "KeyError when the alternate-key table serves the query; only() "
                           "never names a promoted value",
    "snapshot-last-day": "build_snapshot() of 9999-12-31 raises OverflowError (the period's "
                         "end is past datetime.max); no snapshot of that day is built",
    "salted-scan-newest-first": "newest_first() on a salted scan (a salt on key fields that "
                                "the query does not give) reverses each salt's read but keeps "
                                "the salts in ascending order, not the reverse row-key order "
                                "of docs/queries.md (its salted section says each read is "
                                "reversed); such scans are never asked newest first",
    "version-limit-backends-differ": "a range over a bucket row past its version limit "
                                     "that leaves out the row's newest versions: the "
                                     "emulator (before GC) returns older in-range events "
                                     "that the version limit drops, though docs/patterns.md "
                                     "says every backend answers as the embedded store does "
                                     "once GC has run; on the emulator (alone or in "
                                     "differential mode) bucket shapes get a version limit "
                                     "their rows never reach",
    "repair-stale-current-cell": "a repair whose range holds an older event of an entity "
                                 "but not its newest replays the older event into the "
                                 "current-value row, leaving an optional cell the newest "
                                 "event has None for (docs/companions.md: the rewritten row "
                                 "holds only the newest event's cells); repairs run to the "
                                 "end of time",
    "version-limit-gc-timing": "ts.columns(): a correction that moves an event out of a "
                               "column past its version limit brings back an older version "
                               "on the emulator (not yet collected) that the embedded store "
                               "dropped at once, so the backends answer differently; shape "
                               "columns gets a version limit its rows never reach",
    "first-after-limit-0": "qs.limit(0).first() returns an event and .exists() is True "
                           "(first() asks for limit(1), dropping the limit of 0); the "
                           "harness never runs first() or exists() after limit(0)",
}


def _lifted() -> set[int | str]:
    raw = os.environ.get("TSMODEL_ORACLE_INCLUDE", "").strip().lower()
    if raw == "all":
        return set(OPEN)
    return {int(part) if part.isdigit() else part
            for part in raw.replace(" ", "").split(",") if part}


def excluded(item: int | str) -> bool:
    """Whether the harness steps around open bug ``item`` in this run."""
    if item not in OPEN:
        raise KeyError(f"issue item {item} has no exclusion (fixed? remove the check)")
    return item not in _lifted()
