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
from tsmodel.encoding.codecs import Bool, Float64, Int64

if TYPE_CHECKING:
    from tsmodel.declare.spec import ModelSpec, ValueSpec

__all__ = ["MAX_ROW_BYTES", "CELL_OVERHEAD", "events_per_bucket", "event_bytes",
           "row_bytes", "check_row_size"]

#: Bigtable's advised largest row.
MAX_ROW_BYTES = 100 * 1024 * 1024
#: Bytes a cell costs beyond its qualifier and value (timestamp, lengths...).
CELL_OVERHEAD = 16
#: Assumed size of a value whose codec has no fixed size (strings, bytes).
VARIABLE_VALUE_BYTES = 64
_SECOND = 1_000_000


def events_per_bucket(spec: ModelSpec) -> int | None:
    """The most events one entity can write into one bucket row, at ``max_rate``."""
    if spec.bucket is None or spec.max_rate is None:
        return None
    return math.ceil(spec.max_rate * spec.bucket.max_us / _SECOND)


def value_bytes(v: ValueSpec) -> int:
    """The size of one encoded value (an estimate for variable-size codecs)."""
    if isinstance(v.codec, (Int64, Float64)):
        return 8
    if isinstance(v.codec, Bool):
        return 1
    return VARIABLE_VALUE_BYTES


def event_bytes(spec: ModelSpec) -> int:
    """The estimated bytes one event adds to a row of the main table."""
    if spec.serialization is not None:
        blob = sum(value_bytes(v) + 2 for v in spec.values)
        return blob + len(spec.serialization.qualifier) + CELL_OVERHEAD
    if spec.layout.name == "columns":
        return value_bytes(spec.values[0]) + CELL_OVERHEAD
    if spec.layout.name == "offsets":
        return 4 + value_bytes(spec.values[0]) + CELL_OVERHEAD
    return sum(len(v.qualifier) + value_bytes(v) + CELL_OVERHEAD for v in spec.values)


def row_bytes(spec: ModelSpec) -> int | None:
    """The estimated largest row of the main table, or ``None`` without a rate."""
    if spec.bucket is None:
        return event_bytes(spec) + spec.key.max_length
    events = events_per_bucket(spec)
    if events is None:
        return None
    if spec.layout.name == "offsets":
        step = getattr(spec.layout, "step", 1)
        events = min(events, math.ceil(spec.bucket.max_us / step))
    return events * event_bytes(spec) + spec.key.max_length


def check_row_size(spec: ModelSpec) -> None:
    """Refuse a bucket whose rows would pass ~100 MB at the declared rate.

    Raises:
        DeclarationError: with the estimate and a smaller bucket to use.
    """
    size = row_bytes(spec)
    if spec.bucket is None or size is None or size <= MAX_ROW_BYTES:
        return
    events = events_per_bucket(spec)
    raise errors.DeclarationError(
        f"{spec.name}: at max_rate={spec.max_rate}/s one {spec.bucket.name} bucket row holds "
        f"up to {events} events, about {size / 1024 / 1024:.0f} MB, over the ~100 MB Bigtable "
        "advises for a row; choose a smaller bucket (e.g. 'hour' or 'minute')"
    )
