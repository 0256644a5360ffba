"""Size estimates of bucket rows, from a model and its declared event rate.

Bigtable advises rows under ~100 MB and values under ~10 MB. A bucket row
holds every event of one entity in one bucket, so its size grows with the
bucket and the event rate: class definition refuses a bucket whose rows would
pass the limit at the declared ``max_rate``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tsmodel import errors

if TYPE_CHECKING:
    from tsmodel.declare.spec import ModelSpec

__all__ = ["MAX_ROW_BYTES", "events_per_bucket", "event_bytes",
           "row_bytes", "check_row_size"]

#: Bigtable's advised largest row.
MAX_ROW_BYTES = 100 * 1024 * 1024
_SECOND = 1_000_000


def events_per_bucket(spec: ModelSpec) -> int | None:
    """The most events one entity can write into one bucket row, at ``max_rate``."""
    if spec.bucket is None or spec.max_rate is None:
        return None
    return math.ceil(spec.max_rate * spec.bucket.max_us / _SECOND)


def row_events(spec: ModelSpec) -> int | None:
    """The most events one bucket row holds: at ``max_rate``, else as many as the
    version limit keeps where each event is a cell version (``None``: no bound known)."""
    events = events_per_bucket(spec)
    if events is None and spec.layout.read_versions is None:
        return spec.max_versions
    return events


def event_bytes(spec: ModelSpec) -> int:
    """The estimated bytes one event adds to a row of the main table."""
    return spec.layout.event_bytes(spec)


def row_bytes(spec: ModelSpec) -> int | None:
    """The estimated largest row of the main table, or ``None`` without a bound."""
    if spec.bucket is None:
        return event_bytes(spec) + spec.key.max_length
    events = row_events(spec)
    if events is None:
        return None
    per_row = math.ceil(spec.layout.events_per_row(spec, events))
    return per_row * event_bytes(spec) + spec.key.max_length


def check_row_size(spec: ModelSpec) -> None:
    """Refuse a bucket whose rows would pass ~100 MB at the declared rate.

    Raises:
        DeclarationError: with the estimate and a smaller bucket to use.
    """
    size = row_bytes(spec)
    if spec.bucket is None or size is None or size <= MAX_ROW_BYTES:
        return
    events = row_events(spec)
    why = f"at max_rate={spec.max_rate}/s" if spec.max_rate is not None else \
        f"with max_versions={spec.max_versions}"
    raise errors.DeclarationError(
        f"{spec.name}: {why} one {spec.bucket.name} bucket row holds up to {events} events, "
        f"about {size / 1024 / 1024:.0f} MB, over the ~100 MB Bigtable advises for a row; "
        "choose a smaller bucket (e.g. 'hour' or 'minute') or fewer versions"
    )
