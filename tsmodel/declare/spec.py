"""The frozen specification that ``@model`` attaches to a model class."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from tsmodel.encoding.buckets import Bucket
from tsmodel.encoding.codecs import Codec
from tsmodel.encoding.keys import BucketSegment, KeyLayout, SaltSegment, TimestampSegment
from tsmodel.layouts import Layout, rows

if TYPE_CHECKING:
    from datetime import timedelta

    from tsmodel.declare.companions import SnapshotSpec
    from tsmodel.encoding.serialization import BoundSerialization

__all__ = ["ValueSpec", "ModelSpec", "spec_of"]

#: The class attribute holding a model's :class:`ModelSpec`.
SPEC_ATTR = "__tsmodel__"


@attrs.frozen
class ValueSpec:
    """One value field and the column it is stored in."""

    name: str
    family: str
    qualifier: bytes
    codec: Codec
    optional: bool
    allow_nan: bool


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
        layout: how events become cells (:mod:`tsmodel.layouts`).
        max_rate: the most events per second of one entity, if declared.
        retention: how long cells are kept (a max-age GC rule), if declared.
        max_versions: the versions per column kept in the main table.
        alternates: the specs of the alternate-key tables (same events,
            another row key order), written with every save.
        snapshot: the per-period snapshot tables, if declared.
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
        names = {v.family for v in self.values} | {self.family}
        return tuple(sorted(names))

    def value(self, name: str) -> ValueSpec:
        for v in self.values:
            if v.name == name:
                return v
        raise KeyError(name)


def spec_of(model: Any) -> ModelSpec:
    """The :class:`ModelSpec` of a model class or instance.

    Raises:
        TypeError: ``model`` was not declared with ``@tsmodel.model``.
    """
    cls = model if isinstance(model, type) else type(model)
    spec = cls.__dict__.get(SPEC_ATTR)
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"{cls.__name__} is not a tsmodel model: decorate it with @tsmodel.model")
    return spec
