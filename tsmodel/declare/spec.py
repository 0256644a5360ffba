"""The frozen specification that ``@model`` attaches to a model class."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from tsmodel import errors
from tsmodel.encoding.buckets import Bucket
from tsmodel.encoding.keys import BucketSegment, KeyLayout, SaltSegment, TimestampSegment
from tsmodel.encoding.timestamps import ceil_to, from_micros
from tsmodel.encoding.values import ValueEncoder, ValueSpec
from tsmodel.ground.base import ReadFilter, ReadRequest, RowSet
from tsmodel.layouts import Layout, Rows, TableCodec, rows
from tsmodel.layouts.base import bucket_problem

if TYPE_CHECKING:
    from tsmodel.encoding.serialization import BoundSerialization

__all__ = ["ValueSpec", "ModelSpec", "SnapshotSpec", "RollupSpec", "spec_of", "instance_spec",
           "class_spec"]

#: The class attribute holding a model's `ModelSpec`.
SPEC_ATTR = "__tsmodel__"


@attrs.frozen
class ModelSpec:
    """Everything tsmodel derived from a model declaration, validated once.

    Attributes:
        name: the model class name.
        table: the main table.
        family: the default column family.
        current_table: the current-value table, or ``None``.
        key: the main table's row key layout.
        current_key: the current-value table's layout (the key without the
            timestamp and the salt), or ``None``.
        timestamp: the timestamp segment.
        key_fields: the key fields other than the timestamp, in key order.
        values: the value fields in declaration order.
        serialization: how the whole event is serialized into one column,
            or ``None`` for a column per value field.
        layout: how events become cells (`tsmodel.layouts`).
        max_rate: the most events per second of one entity, if declared.
        retention: how long cells are kept (a max-age GC rule), if declared.
        max_versions: the versions per column kept in the main table.
        alternates: the specs of the alternate-key tables (same events,
            another row key order), written with every save.
        snapshot: the per-period snapshot tables, if declared.
        rollups: the rollup tables (`tsmodel.rollup()`), kept in step with
            every save and delete.
        codec: the main table's `TableCodec`.
        current_codec: the current-value table's codec, or ``None``.
        event_time_cells: whether cell timestamps are event times (range
            reads then filter by them); ``False`` for a table whose cells
            carry other times, such as another program's write time.
        key_columns: key fields (and the timestamp) also stored as columns,
            written from the key and checked against it on read.
        version_field: the field whose time stamps an event's cells (its
            amendments kept as cell versions), or ``None``.
        unknown_columns: ``"ignore"`` or ``"error"``: what reads do with a
            cell of a column no field declares.
    """

    name: str
    table: str
    family: str
    current_table: str | None
    key: KeyLayout
    current_key: KeyLayout | None
    timestamp: TimestampSegment | BucketSegment
    key_fields: tuple[str, ...]
    values: tuple[ValueSpec, ...]
    serialization: BoundSerialization | None = None
    layout: Layout = attrs.field(factory=rows)
    max_rate: float | None = None
    retention: timedelta | None = None
    max_versions: int | None = 1
    alternates: tuple[ModelSpec, ...] = ()
    snapshot: SnapshotSpec | None = None
    rollups: tuple[RollupSpec, ...] = ()
    event_time_cells: bool = True
    key_columns: tuple[ValueSpec, ...] = ()
    version_field: str | None = None
    unknown_columns: str = "ignore"
    #: The main table's codec, compiled from the fields above.
    codec: TableCodec = attrs.field(init=False, eq=False, repr=False)
    #: The current-value table's codec (a row per entity), or ``None``.
    current_codec: TableCodec | None = attrs.field(init=False, eq=False, repr=False)
    #: Whether a save reads the event's main row first, to delete the cells of a
    #: corrected event that the correction no longer writes (a value in a
    #: qualifier, or a value promoted into an alternate key).
    corrections_read_first: bool = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # Compiled here, so that every spec (attrs.evolve included) has its own; the
        # layout is checked first, as it compiles its writer and reader for the spec.
        problem = bucket_problem(self.layout, self) or self.layout.check(self)
        if problem:
            raise errors.DeclarationError(f"{self.name}: {problem}")
        values = ValueEncoder(self.name, self.values)
        codec = TableCodec(self, table=self.table, key=self.key, layout=self.layout,
                           time_field=self.timestamp_field, values=values,
                           key_columns=self.key_columns, version_field=self.version_field,
                           strict_columns=self.unknown_columns == "error")
        current = None
        if self.current_table is not None and self.current_key is not None:
            current = TableCodec(self, table=self.current_table, key=self.current_key,
                                 layout=Rows(exact_times=self.time_unit < 1_000),
                                 time_field=self.timestamp_field, values=values,
                                 like=codec, key_columns=self.key_columns,
                                 strict_columns=self.unknown_columns == "error")
        promoted = any(f not in self.key_fields for a in self.alternates for f in a.key_fields)
        object.__setattr__(self, "corrections_read_first",
                           promoted or self.layout.cells_depend_on_values)
        object.__setattr__(self, "codec", codec)
        object.__setattr__(self, "current_codec", current)

    def rows_read(self, keys: Iterable[bytes], *, table: str | None = None,
                  **filters: Any) -> ReadRequest:
        """The read of the rows ``keys`` (each once, in key order) of this table, or of
        ``table`` (a companion in the same families: the current-value table), in
        the model's families, plus ``filters``."""
        return ReadRequest(self.table if table is None else table,
                           RowSet(keys=tuple(sorted(set(keys)))),
                           ReadFilter(families=self.families, **filters))

    def events_filter(self, **filters: Any) -> ReadFilter:
        """The read filter of this table's events, plus ``filters``.

        Every read that decodes events of the table uses it: a layout that
        keeps a cell version per event sees only the versions the table's GC
        rule keeps (``versions_kept``), whether or not garbage collection ran
        yet (on any backend, when it gets to it); a layout
        of one event per row reads the newest version of each column.
        """
        read_versions = self.layout.read_versions
        return ReadFilter(families=self.families, cells_per_column=read_versions,
                          versions_kept=None if read_versions else self.max_versions,
                          **filters)

    def horizon(self, now_us: int) -> int | None:
        """The oldest cell timestamp (µs, whole ms) the ``retention`` keeps at ``now_us``,
        or ``None`` without one: an older cell is deleted by garbage collection
        and never read, collected or not."""
        if self.retention is None:
            return None
        return ceil_to(now_us - self.retention // timedelta(microseconds=1), 1_000)

    @property
    def reversed_time(self) -> bool:
        """Whether newer events sort first in the row key (reversed timestamps)."""
        return isinstance(self.timestamp, TimestampSegment) and self.timestamp.encoding.reverse

    @property
    def time_unit(self) -> int:
        """The granularity of event times, in microseconds (ms for bucket layouts)."""
        if isinstance(self.timestamp, TimestampSegment):
            return self.timestamp.encoding.unit
        return 1_000

    @property
    def bucket(self) -> Bucket | None:
        """The time bucket of the row key, or ``None`` for a row per event."""
        return self.timestamp.bucket if isinstance(self.timestamp, BucketSegment) else None

    @property
    def timestamp_field(self) -> str:
        return self.timestamp.field

    @property
    def salt(self) -> SaltSegment | None:
        return self.key.salt()

    @property
    def families(self) -> tuple[str, ...]:
        """Every column family the model writes, sorted."""
        names = {v.family for v in (*self.values, *self.key_columns)} | {self.family}
        return tuple(sorted(names))

    def value(self, name: str) -> ValueSpec:
        for v in self.values:
            if v.name == name:
                return v
        raise KeyError(name)


@attrs.frozen
class SnapshotSpec:
    """Per-period snapshot tables of a model.

    Attributes:
        pattern: the table-name pattern, formatted with ``period``.
        period: the partition of time into periods.
        template: the spec of a snapshot table (its table name is the pattern).
    """

    pattern: str
    period: Bucket
    template: ModelSpec

    def table_for(self, when_us: int) -> str:
        """The snapshot table of the period holding ``when_us``."""
        start = from_micros(self.period.start(when_us))
        return self.pattern.format(period=start)

    def spec_for(self, when_us: int) -> ModelSpec:
        """The spec of the snapshot table of the period holding ``when_us``."""
        return attrs.evolve(self.template, table=self.table_for(when_us))

    def bounds(self, when_us: int) -> tuple[int, int]:
        """[start, end) of the period holding ``when_us``, in microseconds."""
        start = self.period.start(when_us)
        return start, self.period.next(start)


@attrs.frozen
class RollupSpec:
    """A rollup table of a model: aggregates per entity and time bucket.

    Attributes:
        table: the rollup table.
        every: the bucket size, in microseconds (whole milliseconds); buckets
            start at multiples of it since the epoch.
        label: the bucket size as declared, for messages (``"1h"``).
        fields: the value fields aggregated, in declaration order.
        int_fields: those whose values are ints (their sums are exact ints).
        model: the rollup row class (a model of the rollup table: key fields,
            ``time`` the bucket start, ``count`` and ``<field>_<aggregate>``).
        mode: ``"recompute"`` (rows rewritten whole from the main table) or
            ``"increment"`` (saves add to an aggregate family; ``count``,
            ``f_count`` and ``f_sum`` only).
    """

    table: str
    every: int
    label: str
    fields: tuple[str, ...]
    int_fields: frozenset[str]
    model: type = attrs.field(eq=False, repr=False)
    mode: str = "recompute"

    @property
    def aggregates(self) -> tuple[str, ...]:
        """The aggregates its rows hold per field (``mean`` is computed on read)."""
        if self.mode == "increment":
            return ("count", "sum")
        return ("count", "sum", "min", "max", "last")

    @property
    def spec(self) -> ModelSpec:
        """The rollup table's spec (of `model`)."""
        return spec_of(self.model)

    def start(self, us: int) -> int:
        """The start of the bucket holding ``us``."""
        return us - us % self.every

    def kept_from(self, now_us: int) -> int | None:
        """The oldest bucket start its ``retention`` keeps at ``now_us``, or ``None``
        (kept forever): a row is stamped with its bucket start, so an older
        bucket's row is deleted by garbage collection and never read."""
        return self.spec.horizon(now_us)


def spec_of(model: Any) -> ModelSpec:
    """The `ModelSpec` of a model class or instance.

    Raises:
        TypeError: ``model`` was not declared with ``@tsmodel.model``.
    """
    cls = model if isinstance(model, type) else type(model)
    spec = cls.__dict__.get(SPEC_ATTR)
    if not isinstance(spec, ModelSpec):
        raise errors.ArgumentTypeError(
            f"{cls.__name__} is not a tsmodel model: decorate it with @tsmodel.model "
            f"(got {model!r:.80})")
    return spec


def instance_spec(entity: Any) -> ModelSpec:
    """The `ModelSpec` of a model instance: what a save or a delete takes.

    Raises:
        FieldTypeError: ``entity`` is the model class itself (``db.delete(M)``
            for ``db.delete(M(...))``).
        TypeError: ``entity`` is no model instance.
    """
    spec = spec_of(entity)
    if isinstance(entity, type):
        raise errors.FieldTypeError(
            f"expected instances of {spec.name}, got the class {spec.name} itself: "
            f"pass {spec.name}(...) with the event's key fields and time",
            model=spec.name, value=entity)
    return spec


def class_spec(model: Any) -> ModelSpec:
    """The `ModelSpec` of a model class: what a query or an update takes.

    Raises:
        FieldTypeError: ``model`` is an instance of a model
            (``db.update(m, ...)`` for ``db.update(M, ...)``).
        TypeError: ``model`` is no model.
    """
    spec = spec_of(model)
    if not isinstance(model, type):
        raise errors.FieldTypeError(
            f"expected the model class {spec.name}, got an instance of it: pass the class "
            f"and the key fields, e.g. {spec.name}, **key_fields",
            model=spec.name, value=model)
    return spec
