"""A tiny application of its own for the cross-process cursor test.

``python -m tests.backends.cursor_app URL TABLE SECRET TOKEN SIZE`` opens a
fresh connection to ``URL``, declares the model below on ``TABLE`` and prints
the page after ``TOKEN`` (``-`` for the first) as JSON: the events' hosts,
times (µs) and values, and the next token.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

import tsmodel as ts

UTC = timezone.utc
START = datetime(2024, 3, 1, tzinfo=UTC)
END = datetime(2024, 3, 2, tzinfo=UTC)


def declare(table: str) -> type:
    """A model salted on time: its range reads merge 3 salt streams by time."""

    @ts.model(table=table, family="F")
    class Reading:
        kind = ts.constant("R")
        salt = ts.salt(3, on="time")
        time: datetime = ts.timestamp(unit="ms")
        host: str = ts.value("H")
        value: int = ts.value("V")

    return Reading


def page(conn: ts.Connection, model: type, token: str | None, size: int) -> dict[str, object]:
    found = model.using(conn).range(START, END).newest_first().page(size, after=token)
    return {"items": [[e.host, int(e.time.timestamp() * 1_000_000), e.value] for e in found],
            "next": found.next}


def main(argv: list[str]) -> None:
    url, table, secret, token, size = argv
    model = declare(table)
    with ts.connect(url, default=False, cursor_secret=secret) as conn:
        print(json.dumps(page(conn, model, None if token == "-" else token, int(size))))


if __name__ == "__main__":
    main(sys.argv[1:])
