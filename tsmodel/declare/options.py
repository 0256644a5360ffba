"""``@model``'s options, declared once: their names, types, defaults, docs and checks.

`ModelOptions` is the one declaration of what ``@ts.model(...)`` accepts. Its
attrs validators are the checks of each option (types, ranges, the names
Bigtable accepts), run when the options object is built, i.e. when the class
is decorated, so that a mistake raises `DeclarationError` naming the model,
the option and the value given. ``ModelArguments`` types the keyword
arguments of ``ts.model(**options)`` for type checkers: the same names and
types (``tests/unit/test_model_options.py`` fails when the two differ).
"""

from __future__ import annotations

import math
import string
import typing
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Literal

import attrs
from typing_extensions import Required, TypedDict

from tsmodel import errors
from tsmodel.declare.fields import Alternate, Rollup, Snapshot
from tsmodel.declare.params import (
    MAX_FAMILY_NAME,
    MAX_TABLE_NAME,
    check_bool,
    check_int,
    check_name,
    check_text,
    refuse,
    show,
)
from tsmodel.encoding.serialization import Serialization
from tsmodel.layouts import Layout

__all__ = ["ModelOptions", "ModelArguments", "UnknownColumns", "UNKNOWN_COLUMNS",
           "OPTION_NAMES"]

#: How ``@ts.model(...)`` is named in messages.
CALL = "@ts.model"

#: The policies of ``unknown_columns=``.
UnknownColumns = Literal["ignore", "error"]
UNKNOWN_COLUMNS: tuple[str, ...] = typing.get_args(UnknownColumns)

def _table(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    check_name(inst.name, CALL, attribute.name, value, limit=MAX_TABLE_NAME, what="table")


def _family(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    check_name(inst.name, CALL, attribute.name, value, limit=MAX_FAMILY_NAME,
               what="column family")


def _current(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    _table(inst, attribute, value)
    if value == inst.table:
        raise errors.DeclarationError(f"{inst.name}: current= must name a table other than table=")


def _separator(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        raise refuse(inst.name, CALL, attribute.name, value,
                     "one ASCII punctuation character (a str) such as '#'")
    if len(value) != 1 or value not in string.punctuation:
        raise errors.DeclarationError(
            f"{inst.name}: separator {value!r} must be one ASCII punctuation character such "
            "as '#'")


def _serialization(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, Serialization):
        raise refuse(inst.name, CALL, attribute.name, value,
                     "a serialization instance such as ts.Protobuf(), or None")


def _bool(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    check_bool(inst.name, CALL, attribute.name, value)


def _layout(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, Layout):
        raise refuse(inst.name, CALL, attribute.name, value,
                     "a layout instance such as ts.rows() or ts.cells(), or None")


def _max_rate(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value) or value <= 0):
        raise refuse(inst.name, CALL, attribute.name, value,
                     "a positive number of events per second, e.g. max_rate=10")


def _retention(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
        raise refuse(inst.name, CALL, attribute.name, value,
                     "a positive timedelta, e.g. retention=timedelta(days=30)")


def _max_versions(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    check_int(inst.name, CALL, attribute.name, value, minimum=1, example="100", optional=True)


def _unknown_columns(inst: ModelOptions, attribute: attrs.Attribute[Any],
                     value: object) -> None:
    if not isinstance(value, str) or value not in UNKNOWN_COLUMNS:
        raise refuse(inst.name, CALL, attribute.name, value,
                     "'ignore' (skip cells of columns no field declares) or 'error' "
                     "(refuse them)")


def _list_of(value: object, kind: type) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and all(
        isinstance(item, kind) for item in value)


def _alternates(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if not _list_of(value, Alternate):
        raise refuse(inst.name, CALL, attribute.name, value,
                     "a list of ts.alternate(...), e.g. alternates=[ts.alternate('T', ...)]")
    for alt in typing.cast("Sequence[Alternate]", value):
        check_name(inst.name, "ts.alternate", "table", alt.table, limit=MAX_TABLE_NAME,
                   what="table")


def _snapshot(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, Snapshot):
        raise refuse(inst.name, CALL, attribute.name, value,
                     "ts.snapshot(...) or None, e.g. snapshot=ts.snapshot('S_{period:%Y%m%d}')")
    check_text(inst.name, "ts.snapshot", "pattern", value.pattern, example="'S_{period:%Y%m%d}'")
    if not isinstance(value.period, (str, timedelta)):
        raise refuse(inst.name, "ts.snapshot", "period", value.period,
                     "'hour', 'day', 'week', 'month' or a timedelta")
    if value.segments is not None and not isinstance(value.segments, tuple):
        raise refuse(inst.name, "ts.snapshot", "key", value.segments,
                     "a list of key segments, as for ts.alternate(), or None")


def _rollups(inst: ModelOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if not _list_of(value, Rollup):
        raise errors.DeclarationError(
            f"{inst.name}: {CALL}(rollups={show(value)}): rollups must be "
            "a list of ts.rollup(...), e.g. rollups=[ts.rollup('METRIC_1H', '1h')]")


@attrs.frozen(kw_only=True)
class ModelOptions:
    """The options of ``@ts.model(...)``, checked when the class is decorated.

    ``@ts.model(table=..., family=..., ...)`` builds one from its keyword
    arguments; every check of an option is its validator here.

    Attributes:
        name: the model class's name (set by ``@ts.model``; the checks'
            messages name it). Not an argument of ``@ts.model``.
        table: the main table, e.g. ``"METRIC"``. Required.
        family: the default column family of value fields, e.g.
            ``"METRIC"``. Required.
        current: the current-value table (e.g. ``"CURRENT_METRIC"``), keyed by
            the row key without its time; every save also writes it.
        separator: one ASCII punctuation character between key segments.
        serialization: store the whole event as one serialized cell (e.g.
            `tsmodel.Protobuf`) instead of a column per value field.
        allow_hotspot: accept a row key whose first varying segment is the
            timestamp (every write then goes to the same node: only for low
            write rates).
        layout: how events become cells: `tsmodel.rows()` (a row per
            event, the default), or for a bucketed timestamp
            `tsmodel.cells()`, `tsmodel.columns()`,
            `tsmodel.offsets()`.
        max_rate: the most events per second one entity sends. Sizes the
            version limit of bucket rows and refuses buckets whose rows would
            pass ~100 MB.
        retention: keep cells this long (a max-age GC rule counted from the
            cell timestamp, i.e. the event time).
        max_versions: the version limit of bucket rows, if not derived from
            ``max_rate``.
        event_time_cells: ``False`` declares a table whose cell timestamps are
            not event times (another program wrote them with its clock): range
            reads then select events by row key and qualifier and check their
            times client-side, never by cell timestamp. Only layouts that hold
            the time in the key or the qualifier allow it (``ts.rows()``,
            ``ts.offsets()``), and no current-value table.
        unknown_columns: what a read does with a cell of a column no field
            declares (a retired field's, another writer's) in the families it
            reads: ``"ignore"`` (the default: adopted tables often hold such
            columns) skips it; ``"error"`` raises
            `CellDecodingError` naming the row and the column.
            Families no field declares are never read (a read filters by
            family).
        alternates: alternate-key tables (`tsmodel.alternate()`), written
            with every save; queries read the table whose key prefix serves
            the fields given.
        snapshot: per-period snapshot tables (`tsmodel.snapshot()`), built
            by `tsmodel.build_snapshot()`.
        rollups: rollup tables (`tsmodel.rollup()`): aggregates per
            entity and time bucket, kept exact by every save, update and
            delete; read with ``Model.rollup(every)`` and
            `tsmodel.QuerySet.resample()`.

    Raises:
        DeclarationError: an option of the wrong type or out of range, naming
            the model, the option and the value given.
    """

    name: str
    table: str = attrs.field(validator=_table)
    family: str = attrs.field(validator=_family)
    current: str | None = attrs.field(default=None, validator=_current)
    separator: str = attrs.field(default="#", validator=_separator)
    serialization: Serialization | None = attrs.field(default=None, validator=_serialization)
    allow_hotspot: bool = attrs.field(default=False, validator=_bool)
    layout: Layout | None = attrs.field(default=None, validator=_layout)
    max_rate: float | None = attrs.field(default=None, validator=_max_rate)
    retention: timedelta | None = attrs.field(default=None, validator=_retention)
    max_versions: int | None = attrs.field(default=None, validator=_max_versions)
    event_time_cells: bool = attrs.field(default=True, validator=_bool)
    unknown_columns: UnknownColumns = attrs.field(default="ignore", validator=_unknown_columns)
    alternates: Sequence[Alternate] = attrs.field(default=(), validator=_alternates)
    snapshot: Snapshot | None = attrs.field(default=None, validator=_snapshot)
    rollups: Sequence[Rollup] = attrs.field(default=(), validator=_rollups)


class ModelArguments(TypedDict, total=False):
    """The keyword arguments of ``@ts.model(...)``: `ModelOptions` without ``name``."""

    table: Required[str]
    family: Required[str]
    current: str | None
    separator: str
    serialization: Serialization | None
    allow_hotspot: bool
    layout: Layout | None
    max_rate: float | None
    retention: timedelta | None
    max_versions: int | None
    event_time_cells: bool
    unknown_columns: UnknownColumns
    alternates: Sequence[Alternate]
    snapshot: Snapshot | None
    rollups: Sequence[Rollup]


#: The options ``@ts.model(...)`` accepts, in declaration order.
OPTION_NAMES: tuple[str, ...] = tuple(
    a.name for a in attrs.fields(ModelOptions) if a.name != "name")
