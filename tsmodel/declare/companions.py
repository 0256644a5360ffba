"""Companion tables derived from a model: alternate-key tables and snapshot tables.

An alternate-key table holds the same events as the main table under
another row key order (the guide's denormalization: ``LoL#Corrie#20150301``
and ``LoL#20150301#Corrie``). Each one is described by a derived
`ModelSpec` that shares the model's timestamp, values
and layout, so the whole mapper and query machinery works on it unchanged.

A snapshot table holds one period of the main table (``SENSOR_20170726``),
built by a batch job (`tsmodel.jobs.snapshots`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import attrs

from tsmodel import errors
from tsmodel.declare.fields import META, Alternate, Constant, KeyInfo, Salt, Snapshot
from tsmodel.declare.params import MAX_TABLE_NAME, check_name, show
from tsmodel.declare.spec import ModelSpec, SnapshotSpec
from tsmodel.encoding.buckets import Bucket, make_bucket
from tsmodel.encoding.keys import BucketSegment, KeyLayout, Segment, TimestampSegment
from tsmodel.encoding.timestamps import from_micros

__all__ = ["SnapshotSpec", "derive_alternate", "derive_snapshot", "check_table_name"]

#: Builds one key segment: (field name, its declaration, its annotation) -> Segment.
SegmentMaker = Callable[[str, Any, Any], Segment]


def check_table_name(model: str, what: str, name: str) -> None:
    """Refuse a table name Bigtable would not accept."""
    check_name(model, what, "table", name, limit=MAX_TABLE_NAME, what="table")


def derive_alternate(main: ModelSpec, decl: Alternate, hints: dict[str, Any],
                     infos: dict[str, Any], make_segment: SegmentMaker) -> ModelSpec:
    """The spec of one alternate-key table of ``main``.

    Raises:
        DeclarationError: a segment names no field, a key field of the model
            is missing, or the table name is invalid.
    """
    check_table_name(main.name, "alternate table", decl.table)
    if decl.table in (main.table, main.current_table):
        raise errors.DeclarationError(
            f"{main.name}: alternate table {decl.table!r} is already the main or current table"
        )
    return _derive(main, decl.table, decl.segments, hints, infos, make_segment, "alternate")


def derive_snapshot(main: ModelSpec, decl: Snapshot, hints: dict[str, Any],
                    infos: dict[str, Any], make_segment: SegmentMaker) -> SnapshotSpec:
    """The spec of a model's snapshot tables.

    Raises:
        DeclarationError: an unknown period, a pattern that does not name each
            period differently, or an invalid table name.
    """
    try:
        period = make_bucket(decl.period)
    except ValueError as exc:
        raise errors.DeclarationError(f"{main.name}: snapshot period: {exc}") from exc
    samples = _sample_names(main.name, decl.pattern, period)
    if len(set(samples)) != len(samples):
        raise errors.DeclarationError(
            f"{main.name}: snapshot pattern {decl.pattern!r} gives two periods the same "
            f"table ({samples[0]!r}); include the period, e.g. '{{period:%Y%m%d}}'"
        )
    segments = decl.segments if decl.segments is not None else _main_segments(main)
    template = _derive(main, decl.pattern, segments, hints, infos, make_segment, "snapshot")
    return SnapshotSpec(decl.pattern, period, template)


def _sample_names(model: str, pattern: str, period: Bucket) -> list[str]:
    start = period.start(int(datetime(2017, 7, 26, tzinfo=timezone.utc).timestamp() * 1e6))
    names = []
    for when in (start, period.next(start)):
        try:
            name = pattern.format(period=from_micros(when))
        except (KeyError, IndexError, ValueError) as exc:
            raise errors.DeclarationError(
                f"{model}: snapshot pattern {pattern!r} cannot be formatted: {exc!r}; use "
                "'{period:...}' with strftime codes, e.g. 'SENSOR_{period:%Y%m%d}'"
            ) from exc
        check_table_name(model, "snapshot table", name)
        names.append(name)
    return names


def _main_segments(main: ModelSpec) -> tuple[Any, ...]:
    """The main key's segments, as alternate declarations."""
    out: list[Any] = []
    for seg in main.key.segments:
        if seg.field is not None:
            out.append(seg.field)
        else:
            out.append(seg)
    return tuple(out)


def _derive(main: ModelSpec, table: str, segments: tuple[Any, ...], hints: dict[str, Any],
            infos: dict[str, Any], make_segment: SegmentMaker, what: str) -> ModelSpec:
    built = [_segment(main, s, hints, infos, make_segment, what, table) for s in segments]
    key = KeyLayout(tuple(built), main.key.separator)
    fields = [s.field for s in built if s.field is not None]
    missing = [f for f in (*main.key_fields, main.timestamp_field) if f not in fields]
    if missing:
        raise errors.DeclarationError(
            f"{main.name}: {what} table {table!r} lacks {', '.join(missing)}: its key must hold "
            "every key field and the timestamp, so that a row gives the whole event back"
        )
    if len(set(fields)) != len(fields):
        raise errors.DeclarationError(f"{main.name}: {what} table {table!r} repeats a field")
    promoted = {f for f in fields if f not in main.key_fields and f != main.timestamp_field}
    values = main.values if main.serialization is not None else tuple(
        v for v in main.values if v.name not in promoted)
    timestamp = next(s for s in built if isinstance(s, (TimestampSegment, BucketSegment)))
    return attrs.evolve(
        main, table=table, current_table=None, current_key=None, key=key, timestamp=timestamp,
        key_fields=tuple(f for f in fields if f != main.timestamp_field), values=values,
        alternates=(), snapshot=None,
    )


def _segment(main: ModelSpec, item: Any, hints: dict[str, Any], infos: dict[str, Any],
             make_segment: SegmentMaker, what: str, table: str) -> Segment:
    if isinstance(item, Segment):
        return item
    if isinstance(item, (Constant, Salt)):
        return make_segment("__" + what, item, None)
    name, info = _named(main.name, f"{what} table {table!r}", item)
    if name == main.timestamp_field:
        return main.timestamp
    if name in main.key_fields:
        return next(s for s in main.key.segments if s.field == name)
    value = next((v for v in main.values if v.name == name), None)
    if value is None:
        raise errors.DeclarationError(
            f"{main.name}: {what} key segment {name!r} names no field of the model"
        )
    if value.optional:
        raise errors.DeclarationError(
            f"{main.name}.{name}: an optional value cannot be promoted into a row key"
        )
    if info is not None and (info.column is not None or info.column_codec is not None):
        raise errors.DeclarationError(
            f"{main.name}.{name}: ts.key(column=...) in the {what} key of {table!r}: the value "
            "is a column of the event already; declare key columns on the model's own keys"
        )
    return make_segment(name, info if info is not None else KeyInfo(), hints.get(name))


def _named(model: str, what: str, item: Any) -> tuple[str, KeyInfo | None]:
    if isinstance(item, str):
        return item, None
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        info = (getattr(item[1], "metadata", None) or {}).get(META)
        if isinstance(info, KeyInfo):
            return item[0], info
    raise errors.DeclarationError(
        f"{model}: {what} key segment {show(item)}: give a field name, (name, ts.key(...)), "
        "ts.constant(...) or ts.salt(...)"
    )
