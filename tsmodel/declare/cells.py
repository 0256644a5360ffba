"""Declarations about a table's cells beyond the value columns.

Checked once, when the model class is defined:

* **key columns**: a key field or the timestamp also stored as a column
  (``ts.key(column="SYMBOL")``, the guide's ``MD:SYMBOL``), written from the
  key and checked against it on read;
* **amendment history**: a ``ts.version()`` field stamps an event's cells
  with the time that version was recorded, so corrections add cell versions;
* **cell timestamps**: by default every cell timestamp is its event's time;
  ``event_time_cells=False`` declares a table whose cells carry other times
  (another program's write time), which only layouts that hold the event
  time in the row key or the qualifier can read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from tsmodel import errors
from tsmodel.declare.fields import KeyInfo, TimestampInfo
from tsmodel.declare.spec import ModelSpec, ValueSpec
from tsmodel.encoding.codecs import Codec, Text, Utf8
from tsmodel.encoding.keys import Segment, TimestampSegment
from tsmodel.encoding.timestamps import TimestampText
from tsmodel.layouts.base import column_name

__all__ = ["key_columns", "check_key_columns", "check_cell_times", "version_field",
           "check_versions"]


def key_columns(name: str, items: list[tuple[str, Any]], hints: dict[str, Any],
                segments: list[Segment], family: str) -> tuple[ValueSpec, ...]:
    """The columns that key fields (and the timestamp) are also stored in.

    Raises:
        DeclarationError: a bucket timestamp with a column, or a column codec
            that does not take the key field's values.
    """
    out = []
    for attr, info in items:
        column = info.column if isinstance(info, (KeyInfo, TimestampInfo)) else None
        if column is None:
            continue
        seg = next(s for s in segments if s.field == attr)
        codec: Codec
        if isinstance(info, TimestampInfo):
            if not isinstance(seg, TimestampSegment):
                raise errors.DeclarationError(
                    f"{name}.{attr}: ts.timestamp(column={column!r}) with a bucket: a bucket row "
                    "holds the events of a whole bucket, and no one column can hold all their "
                    "times (each event's time is in its offset column or cell timestamp)")
            codec = cast(Codec, TimestampText(seg.encoding))
        else:
            codec = _key_column_codec(name, attr, info, hints.get(attr))
        out.append(ValueSpec(attr, family, column.encode("utf-8"), codec, False, False))
    return tuple(out)


def _key_column_codec(name: str, attr: str, info: KeyInfo, hint: Any) -> Codec:
    if info.column_codec is None:
        return cast(Codec, Utf8() if hint is str else Text(int))
    kinds = info.column_codec.python_type
    if hint not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise errors.DeclarationError(
            f"{name}.{attr}: ts.key(column_codec={info.column_codec!r}) does not take "
            f"{getattr(hint, '__name__', hint)} values, the key field's; e.g. "
            f"column_codec=ts.Text({getattr(hint, '__name__', 'str')})")
    return info.column_codec


def check_key_columns(spec: ModelSpec) -> None:
    """Refuse a key column that another column of the table would be mistaken for.

    Raises:
        DeclarationError: two columns share a qualifier, or the layout could
            read the key column as an event.
    """
    taken = {(v.family, v.qualifier): f"value field {v.name!r}" for v in spec.values}
    if spec.serialization is not None:
        taken = {(spec.serialization.family, spec.serialization.qualifier):
                 "the serialized event"}
    for k in spec.key_columns:
        where = column_name(k.family, k.qualifier)
        other = taken.get((k.family, k.qualifier))
        if other is not None:
            raise errors.DeclarationError(
                f"{spec.name}.{k.name}: its column {where} is also {other}'s; give the key "
                "column its own qualifier")
        taken[(k.family, k.qualifier)] = f"key field {k.name!r}"
        problem = spec.layout.row_column_problem(spec, k.family, k.qualifier)
        if problem:
            raise errors.DeclarationError(f"{spec.name}.{k.name}: column {where}: {problem}")


def check_cell_times(spec: ModelSpec) -> None:
    """Refuse what cannot work with cell timestamps that are not event times.

    Raises:
        DeclarationError: the layout reads event times from cell timestamps,
            or the model keeps a current-value table.
    """
    if spec.event_time_cells:
        return
    if spec.layout.reads_time_from_cells:
        raise errors.DeclarationError(
            f"{spec.name}: event_time_cells=False, but layout={spec.layout.name} reads each "
            "event's time from its cell timestamp; only a layout that holds the time in the "
            "row key or the qualifier (ts.rows(), ts.offsets(step)) can read a table whose "
            "cell timestamps are not event times")
    if spec.current_table is not None:
        raise errors.DeclarationError(
            f"{spec.name}: event_time_cells=False with current={spec.current_table!r}: a "
            "current-value row has no time in its key, its cell timestamps say which event "
            "is newest and when it happened. Drop current=; latest() then reads the newest "
            "row of the main table by its key")


def version_field(name: str, fields: list[str], hints: dict[str, Any]) -> str | None:
    """The model's version field, if it declares one.

    Raises:
        DeclarationError: two version fields, or one not annotated ``datetime``.
    """
    if len(fields) > 1:
        raise errors.DeclarationError(
            f"{name}: two version fields ({', '.join(fields)}); one time stamps an event's cells")
    if not fields:
        return None
    if hints.get(fields[0]) is not datetime:
        raise errors.DeclarationError(
            f"{name}.{fields[0]}: a ts.version() field must be annotated 'datetime', not "
            f"{hints.get(fields[0])!r}")
    return fields[0]


def check_versions(spec: ModelSpec, *, alternates: bool, snapshot: bool) -> None:
    """Refuse what an amendment history (``ts.version()``) cannot keep.

    Raises:
        DeclarationError: a layout without history, an optional value, a
            companion table, or a max-age rule.
    """
    if spec.version_field is None:
        return
    where = f"{spec.name}.{spec.version_field}: ts.version()"
    if spec.layout.history_reader(spec) is None:
        raise errors.DeclarationError(
            f"{where} keeps the amendments of an event as versions of its cells, which needs "
            f"a row per event (layout=ts.rows()); layout={spec.layout.name} keeps other "
            "things in cell versions or qualifiers")
    optional = [v.name for v in spec.values if v.optional]
    if optional:
        raise errors.DeclarationError(
            f"{where} with the optional value {optional[0]!r}: a version that leaves it None "
            "would write no cell, and every reader (tsmodel, cbt, other clients) would still "
            "see the earlier version's value as the newest. Make it required")
    companions = [what for what, has in (("current=", spec.current_table is not None),
                                         ("alternates=", alternates), ("snapshot=", snapshot))
                  if has]
    if companions:
        raise errors.DeclarationError(
            f"{where} with {companions[0]}: companion tables keep the newest event by its "
            "event-time cells, not versions of it; latest() reads the newest row of the "
            "main table by its key")
    if spec.retention is not None:
        raise errors.DeclarationError(
            f"{where} with retention=: a max age counts from the cell timestamp, here the "
            "version time, so an event whose last amendment is old would vanish whole. "
            "Bound the history with max_versions= instead")
