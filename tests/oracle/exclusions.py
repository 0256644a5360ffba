"""Open bugs the oracle harness steps around, one named exclusion each.

Each exclusion restricts what the harness generates (a shape flag, a
strategy filter); none weakens a comparison. When a fix lands, delete its
entry here and the code that reads it (search for ``excluded("name")``), or
lift it for one run to see whether the bug is still there::

    TSMODEL_ORACLE_INCLUDE=only-optional pytest tests/backends/test_oracle.py -k rows
    TSMODEL_ORACLE_INCLUDE=all pytest tests/backends/test_oracle.py

The items of the issue "Data you can trust" that the harness reproduces
(1, 2, 3, 6, 7, 9, 11) are fixed and need no exclusion, and so are the nine
divergences the harness found beyond the issue (their tests are in
tests/backends/test_oracle_findings.py): no exclusion is open. Add one here,
with its ``excluded("name")`` check in the strategies, only for a bug that
has an issue and cannot be fixed at once.
"""

from __future__ import annotations

import os

__all__ = ["OPEN", "excluded"]

#: Name -> what goes wrong, and how the harness steps around it.
OPEN: dict[str, str] = {}


def _lifted() -> set[str]:
    raw = os.environ.get("TSMODEL_ORACLE_INCLUDE", "").strip().lower()
    if raw == "all":
        return set(OPEN)
    return {part for part in raw.replace(" ", "").split(",") if part}


def excluded(name: str) -> bool:
    """Whether the harness steps around open bug ``name`` in this run."""
    if name not in OPEN:
        raise KeyError(f"{name!r} has no exclusion (fixed? remove the check)")
    return name not in _lifted()
