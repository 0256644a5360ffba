"""Rollup tables derived from a model: aggregates per entity and time bucket.

A rollup table holds one row per entity (the model's key fields) and bucket
of ``every`` (``1h``: ``[10:00, 11:00)``): the bucket's event ``count`` and,
per aggregated value field ``f``, ``f_count``, ``f_sum``, ``f_min``,
``f_max`` and ``f_last``. Its rows are instances of a row class derived
here, itself a model of the rollup table (the main key without its time,
then the bucket start as 13 epoch-millisecond digits), so that the whole
query machinery reads it unchanged. What keeps it in step is
`tsmodel.plan.rollups`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Optional

import attrs

from tsmodel import errors
from tsmodel.declare.fields import (
    META,
    Constant,
    KeyInfo,
    Rollup,
    Salt,
    TimestampInfo,
    timestamp,
    value,
)
from tsmodel.declare.params import MAX_FAMILY_NAME, MAX_TABLE_NAME, check_name, show
from tsmodel.declare.spec import ModelSpec, RollupSpec
from tsmodel.encoding.codecs import Text

__all__ = ["parse_every", "label_of", "derive_rollup", "AGGREGATES", "MODES"]

#: How a rollup is kept: rows recomputed from the main table, or added to on the server.
MODES = ("recompute", "increment")

#: The aggregates a rollup row holds per value field (``mean`` is computed on read).
AGGREGATES = ("count", "sum", "min", "max", "last", "mean")

_EVERY = re.compile(r"\s*([0-9]+)\s*(ms|s|min|h|d)\s*\Z")
_UNITS = {"ms": 1_000, "s": 1_000_000, "min": 60_000_000, "h": 3_600_000_000,
          "d": 86_400_000_000}

#: Builds the row class: (class, table, family, retention, allow_hotspot) -> a model class.
ClassBuilder = Callable[[type, str, str, "timedelta | None", bool], type]


def parse_every(every: object, where: str) -> tuple[int, str]:
    """A bucket size (``"1h"``, ``"15min"``, a ``timedelta``) in microseconds, and its label.

    Raises:
        DeclarationError: not a positive whole number of milliseconds.
    """
    if isinstance(every, timedelta):
        us = every // timedelta(microseconds=1)
        label = _label(us)
    elif isinstance(every, str) and (match := _EVERY.match(every)):
        us = int(match.group(1)) * _UNITS[match.group(2)]
        label = f"{int(match.group(1))}{match.group(2)}"
    else:
        raise errors.DeclarationError(
            f"{where}: every={show(every)}: give a bucket size: a whole number of ms, s, "
            f"min, h or d ('30s', '15min', '1h', '1d') or a timedelta{_calendar(every)}")
    if us <= 0 or us % 1_000:
        raise errors.DeclarationError(
            f"{where}: every={show(every)}: a bucket size is a positive whole number of "
            "milliseconds")
    return us, label


_CALENDAR = re.compile(r"\s*[0-9]*\s*(w|wk|weeks?|mo|mon|months?|M|y|yr|years?)\s*\Z")


def _calendar(every: object) -> str:
    """What to say of a calendar unit (weeks, months, years), else ``""``."""
    if not isinstance(every, str) or not _CALENDAR.match(every):
        return ""
    return ("; weeks, months and years are not bucket sizes (a month or a year is no fixed "
            "duration): for weeks give '7d' (buckets count from the epoch, 1970-01-01 UTC, "
            "a Thursday, so '7d' buckets start on Thursdays)")


def label_of(us: int) -> str:
    """A bucket size in microseconds as the shortest label (``3600000000``: ``"1h"``)."""
    return _label(us)


def _label(us: int) -> str:
    for unit, size in sorted(_UNITS.items(), key=lambda item: -item[1]):
        if us % size == 0:
            return f"{us // size}{unit}"
    return f"{us}us"


def derive_rollup(main: ModelSpec, decl: Rollup, items: list[tuple[str, Any]],
                  hints: dict[str, Any], allow_hotspot: bool,
                  build: ClassBuilder) -> RollupSpec:
    """The spec of one rollup table of ``main``, with its row class.

    Args:
        main: the model's spec (its companions not yet attached).
        decl: the declaration.
        items: the model's declared items (name, declaration), in order.
        hints: the model's field annotations.
        allow_hotspot: as declared on the model (the rollup key keeps its order).
        build: declares a model class (``@ts.model``'s own steps).

    Raises:
        DeclarationError: a bad table name, bucket size or field, or a model
            whose events rollups cannot follow.
    """
    where = f"{main.name}: ts.rollup({decl.table!r})"
    check_name(main.name, "ts.rollup", "table", decl.table, limit=MAX_TABLE_NAME, what="table")
    family = decl.family if decl.family is not None else main.family
    check_name(main.name, "ts.rollup", "family", family, limit=MAX_FAMILY_NAME,
               what="column family")
    if decl.retention is not None and (not isinstance(decl.retention, timedelta)
                                       or decl.retention <= timedelta(0)):
        raise errors.DeclarationError(
            f"{where}: retention={show(decl.retention)}: give a positive timedelta or None")
    if main.version_field is not None:
        raise errors.DeclarationError(
            f"{where}: a model with a version field keeps amendments as cell versions; "
            "rollups follow models whose events are replaced by corrections")
    if decl.mode not in MODES:
        raise errors.DeclarationError(
            f"{where}: mode={show(decl.mode)}: give one of {', '.join(map(repr, MODES))}")
    every, label = parse_every(decl.every, where)
    fields = _fields(main, decl, where)
    int_fields = frozenset(f for f in fields if _number_kind(main, f) is int)
    if decl.mode == "increment":
        fields = _increment_fields(main, decl, fields, int_fields, where)
    cls = _row_class(main, decl, items, hints, fields, int_fields, label, where)
    model = build(cls, decl.table, family, decl.retention, allow_hotspot)
    return RollupSpec(decl.table, every, label, fields, int_fields, model, decl.mode)


def _increment_fields(main: ModelSpec, decl: Rollup, fields: tuple[str, ...],
                      int_fields: frozenset[str], where: str) -> tuple[str, ...]:
    """The fields of an increment rollup: ``int`` fields only (the server adds int64s)."""
    floats = [f for f in fields if f not in int_fields]
    if decl.fields is None:
        fields = tuple(f for f in fields if f in int_fields)
        if not fields:
            raise errors.DeclarationError(
                f"{where}: mode='increment' sums int value fields on the server, and the "
                "model has none; use mode='recompute' for float fields")
    elif floats:
        raise errors.DeclarationError(
            f"{where}: mode='increment' cannot aggregate field {floats[0]!r}: it holds floats, "
            "and Bigtable's aggregate families add int64s only (a float sum added on the "
            "server would not be exact); drop it from fields or use mode='recompute'")
    return fields


def _number_kind(main: ModelSpec, name: str) -> type | None:
    """``int`` or ``float`` for a value field whose codec holds numbers, else ``None``."""
    accepted = main.value(name).codec.python_type
    if accepted is int:
        return int
    if isinstance(accepted, tuple) and float in accepted and bool not in accepted:
        return float
    return None


def _fields(main: ModelSpec, decl: Rollup, where: str) -> tuple[str, ...]:
    names = [v.name for v in main.values]
    if decl.fields is None:
        chosen = tuple(n for n in names if _number_kind(main, n) is not None)
        if not chosen:
            raise errors.DeclarationError(f"{where}: the model has no int or float value field "
                                          "to aggregate")
        return chosen
    if not isinstance(decl.fields, tuple) or not decl.fields or not all(
            isinstance(f, str) for f in decl.fields):
        raise errors.DeclarationError(
            f"{where}: fields={show(decl.fields)}: name value fields, e.g. fields=['cpu']")
    for name in decl.fields:
        if name not in names:
            raise errors.DeclarationError(
                f"{where}: fields names {name!r}, no value field of the model (value fields: "
                f"{', '.join(names) or 'none'})")
        if _number_kind(main, name) is None:
            raise errors.DeclarationError(
                f"{where}: field {name!r} does not hold numbers (a rollup sums int and float "
                "value fields)")
    if len(set(decl.fields)) != len(decl.fields):
        raise errors.DeclarationError(f"{where}: fields names a field twice")
    return tuple(n for n in names if n in decl.fields)


def _row_class(main: ModelSpec, decl: Rollup, items: list[tuple[str, Any]],
               hints: dict[str, Any], fields: tuple[str, ...], int_fields: frozenset[str],
               label: str, where: str) -> type:
    """The row class, undecorated: the key segments, ``time``, ``count``, the aggregates."""
    annotations: dict[str, Any] = {}
    body: dict[str, Any] = {"__annotations__": annotations, "__module__": __name__}
    time_name = main.timestamp_field
    for attr, info in items:
        if isinstance(info, (Constant, Salt)):
            body[attr] = info
        elif isinstance(info, KeyInfo):
            body[attr] = attrs.field(metadata={META: info})
            annotations[attr] = hints[attr]
        elif isinstance(info, TimestampInfo):
            body[attr] = timestamp(unit="ms")
            annotations[attr] = datetime
    if decl.mode == "increment":
        columns = _increment_columns(fields, body)
    else:
        columns = _recompute_columns(main, fields, int_fields, body)
    taken = set(annotations) | {time_name}
    for attr, hint, declared in columns:
        if attr in taken:
            raise errors.DeclarationError(
                f"{where}: the rollup column {attr!r} has the name of a key field of the "
                "model; rename the field")
        annotations[attr] = hint
        body[attr] = declared
    name = f"{main.name}Rollup{label}"
    return type(name, (), {**body, "__qualname__": name})


def _increment_columns(fields: tuple[str, ...],
                       body: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``count``, ``f_count`` and ``f_sum``: int64 cells (the ints' default codec), what
    an aggregate family of int64 sums holds."""
    columns: list[tuple[str, Any, Any]] = [("count", int, value("count"))]
    for name in fields:
        columns += [
            (f"{name}_count", int, value(f"{name}_count")),
            (f"{name}_sum", Optional[int], value(f"{name}_sum", default=None)),  # noqa: UP045
        ]
        body[f"{name}_mean"] = _mean(name)
    return columns


def _recompute_columns(main: ModelSpec, fields: tuple[str, ...], int_fields: frozenset[str],
                       body: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``count`` and every aggregate of each field."""
    columns: list[tuple[str, Any, Any]] = [("count", int, value("count"))]
    for name in fields:
        spec = main.value(name)
        kind: Any = int if name in int_fields else float
        exact_sum = value(f"{name}_sum", default=None, codec=_TEXT_INT) if kind is int else \
            value(f"{name}_sum", default=None, allow_nan=True)
        def same(qualifier: str, codec: Any = spec.codec) -> Any:
            return value(qualifier, default=None, codec=codec, allow_nan=True)

        columns += [
            (f"{name}_count", int, value(f"{name}_count")),
            (f"{name}_sum", Optional[kind], exact_sum),  # noqa: UP045
            (f"{name}_min", Optional[kind], same(f"{name}_min")),  # noqa: UP045
            (f"{name}_max", Optional[kind], same(f"{name}_max")),  # noqa: UP045
            (f"{name}_last", Optional[kind], same(f"{name}_last")),  # noqa: UP045
        ]
        body[f"{name}_mean"] = _mean(name)
    return columns


def _mean(name: str) -> property:
    def mean(self: Any) -> float | None:
        n = getattr(self, f"{name}_count")
        total = getattr(self, f"{name}_sum")
        return None if not n or total is None else total / n
    mean.__doc__ = f"``{name}_sum / {name}_count`` (``None`` without a value)."
    return property(mean)


#: Sums of int fields as decimal text: exact, whatever their size (no int64 overflow).
_TEXT_INT = Text(int)
