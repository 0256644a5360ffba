"""The mapper: model instances to backend-neutral mutations, rows back to instances.

Every check on an instance happens in :func:`encode_event`, before any
mutation exists, so a bad value can never leave a write half done.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import attrs

from tsmodel import errors
from tsmodel.backends.base import Mutation, Row, RowMutation, SetCell
from tsmodel.declare.spec import ModelSpec, ValueSpec, spec_of
from tsmodel.encoding.codecs import is_nan
from tsmodel.encoding.keys import KeyLayout, SegmentValueError, TimestampSegment
from tsmodel.encoding.timestamps import EPOCH, from_micros, to_micros
from tsmodel.layouts import _Offsets, _Rows, rows, value_cells

__all__ = ["EncodedEvent", "encode_event", "encode_row", "decode_events", "decode_row",
           "row_key", "current_row_key",
           "decode_row_key"]

M = TypeVar("M")
_MS = 1_000
_US = timedelta(microseconds=1)
#: Bigtable advises keeping a value under ~10 MB.
MAX_VALUE_BYTES = 10 * 1024 * 1024
_ROW_LAYOUT = rows()


@attrs.frozen
class EncodedEvent:
    """One validated event, ready to write.

    Attributes:
        entity: the model instance.
        key: its row key in the main table.
        current_key: its row key in the current-value table, or ``None``.
        timestamp: the event time in microseconds.
        mutations: the cell mutations of the main table (per the model's layout).
        current_mutations: the cells of the current-value table (a column per
            value field, or the serialized event), at the event time.
        alternates: ``(table, row mutation)`` for each alternate-key table.
        table: the main table.
        current_table: the current-value table, or ``None``.
    """

    entity: Any
    key: bytes
    current_key: bytes | None
    timestamp: int
    mutations: tuple[Mutation, ...]
    current_mutations: tuple[Mutation, ...] = ()
    alternates: tuple[tuple[str, RowMutation], ...] = ()
    table: str = ""
    current_table: str | None = None

    def row_mutation(self) -> RowMutation:
        return RowMutation(self.key, self.mutations)

    def current_row_mutation(self) -> RowMutation | None:
        if self.current_key is None:
            return None
        return RowMutation(self.current_key, self.current_mutations)


def encode_event(spec: ModelSpec, entity: Any) -> EncodedEvent:
    """Validate an instance and turn it into its row keys and cell mutations.

    Raises:
        ValidationError: a value cannot be stored; the message names the model,
            the field and the value.
    """
    if spec_of(entity) is not spec:
        raise errors.FieldTypeError(
            f"expected a {spec.name} instance, got {type(entity).__name__}",
            model=spec.name, value=entity,
        )
    event = encode_row(spec, entity)
    if not spec.alternates:
        return event
    alternates = tuple((alt.table, encode_row(alt, entity).row_mutation())
                       for alt in spec.alternates)
    return attrs.evolve(event, alternates=alternates)


def encode_row(spec: ModelSpec, entity: Any) -> EncodedEvent:
    """Encode an instance for one table's spec (a derived one: alternate, snapshot).

    Unlike :func:`encode_event`, it does not check that ``spec`` is the
    instance's own model spec, and it encodes no alternate tables.

    Raises:
        ValidationError: a value cannot be stored in that table.
    """
    fast = _fast_rows(spec)
    event = fast.encode(entity) if fast is not None else None
    if event is not None:
        return event
    values = _key_values(spec, entity)
    try:
        encoded = spec.key.encode_segments(values)
    except SegmentValueError as exc:
        field = getattr(exc, "field", None)
        raise errors.key_error(
            exc, model=spec.name, field=field, value=getattr(entity, field or "", None)
        ) from None
    key = spec.key.join(encoded)
    current_key = spec.current_key.join(encoded) if spec.current_key is not None else None
    us = values[spec.timestamp_field]
    _check_layout_time(spec, entity, us)
    fields = {v.name: getattr(entity, v.name) for v in spec.values}
    data: dict[str, bytes] = {}
    for v in spec.values:
        one = _checked_value(spec, v, fields[v.name])
        if one is not None:
            data[v.name] = one
    main = spec.layout.mutations(spec, us, fields, data)
    _check_sizes(spec, main)
    current: tuple[Mutation, ...] = ()
    if current_key is not None:
        # A row per event already has the current-value row's cells.
        current = main if not spec.layout.bucketed else \
            value_cells(spec, fields, us // _MS * _MS, data)
    return EncodedEvent(entity, key, current_key, us, main, current, (), spec.table,
                        spec.current_table)


class _FastRows:
    """The write path of the most common shape, worked out once per spec.

    A row per event, a column per value field, no salt: :func:`encode_row`
    spends most of its time finding out, for every event, what is the same
    for every event (which segments, columns and codecs, which checks). This
    plan holds it, so that an event costs its attribute reads, codec calls
    and cells. An event that is not plain (a value that is ``None``, NaN, of
    a subclass of its type, that fails to encode; a timestamp not in
    ``timezone.utc``; a key that does not fit) gets ``None``, and
    :func:`encode_row` takes the general path, which raises the documented
    errors or handles the case.
    """

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.time_name = spec.timestamp_field
        self.segments = tuple((seg.field, seg.encoder()) for seg in spec.key.segments
                              if seg.field is not None)
        self.separator = spec.key.separator
        self.key_parts = _key_parts(spec.key)
        self.current_parts = _key_parts(spec.current_key) if spec.current_key else None
        self.columns = tuple((v.name, v.family, v.qualifier, v.codec.encode,
                              frozenset(_as_tuple(v.codec.python_type))) for v in spec.values)

    @staticmethod
    def fits(spec: ModelSpec) -> bool:
        same_separator = spec.current_key is None or \
            spec.current_key.separator == spec.key.separator
        return (type(spec.layout) is _Rows and spec.serialization is None and same_separator
                and isinstance(spec.timestamp, TimestampSegment) and spec.key.salt() is None)

    def encode(self, entity: Any) -> EncodedEvent | None:
        raw = getattr(entity, self.time_name)
        if type(raw) is not datetime or raw.tzinfo is not timezone.utc:
            return None
        us = (raw - EPOCH) // _US  # to_micros() of an aware datetime
        encoded = self._key_segments(entity, us)
        main = self._cells(entity, us // _MS * _MS)
        if encoded is None or main is None:
            return None
        spec = self.spec
        key = self.separator.join([encoded[f] if f else c for f, c in self.key_parts])
        current_key = None if self.current_parts is None else \
            self.separator.join([encoded[f] if f else c for f, c in self.current_parts])
        return EncodedEvent(entity, key, current_key, us, main,
                            main if current_key is not None else (), (), spec.table,
                            spec.current_table)

    def _key_segments(self, entity: Any, us: int) -> dict[str, bytes] | None:
        encoded = {}
        try:
            for name, encode in self.segments:
                encoded[name] = encode(us if name == self.time_name else getattr(entity, name))
        except SegmentValueError:
            return None
        return encoded

    def _cells(self, entity: Any, ts: int) -> tuple[Mutation, ...] | None:
        cells = []
        for name, family, qualifier, encode, types in self.columns:
            item = getattr(entity, name)
            if type(item) not in types or item != item:  # item != item: NaN
                return None
            try:
                data = encode(item)
            except (ValueError, OverflowError, UnicodeError):
                return None
            if len(data) > MAX_VALUE_BYTES:
                return None
            cells.append(SetCell(family, qualifier, ts, data))
        return tuple(cells)


def _key_parts(layout: KeyLayout) -> tuple[tuple[str, bytes], ...]:
    """``(field, b"")`` for a field segment, ``("", constant)`` for a constant."""
    return tuple((seg.field, b"") if seg.field is not None else ("", seg.encode(None))
                 for seg in layout.segments)


#: id(spec) -> (spec, its fast path or None); the spec is kept so the id stays its own.
_FAST_ROWS: dict[int, tuple[ModelSpec, _FastRows | None]] = {}


def _fast_rows(spec: ModelSpec) -> _FastRows | None:
    found = _FAST_ROWS.get(id(spec))
    if found is None or found[0] is not spec:
        found = (spec, _FastRows(spec) if _FastRows.fits(spec) else None)
        _FAST_ROWS[id(spec)] = found
    return found[1]


def _check_layout_time(spec: ModelSpec, entity: Any, us: int) -> None:
    name = spec.timestamp_field
    if spec.bucket is not None and us % _MS:
        raise errors.ValidationError(
            f"{getattr(entity, name)} has microseconds; cell timestamps hold whole "
            "milliseconds: round it with tsmodel.floor_timestamp(dt)",
            model=spec.name, field=name, value=getattr(entity, name),
        )
    layout = spec.layout
    if isinstance(layout, _Offsets) and spec.bucket is not None and \
            layout.misaligned(spec.bucket, us):
        raise errors.ValidationError(
            f"{getattr(entity, name)} is not on a {layout.describe().split('per ')[-1]} step "
            "of its bucket; an offset column holds one event per step",
            model=spec.name, field=name, value=getattr(entity, name),
        )


def _check_sizes(spec: ModelSpec, mutations: tuple[Mutation, ...]) -> None:
    for m in mutations:
        if isinstance(m, SetCell) and len(m.value) > MAX_VALUE_BYTES:
            raise errors.ValidationError(
                f"a cell value of {len(m.value)} bytes is over the ~10 MB Bigtable advises "
                f"for one value ({m.family}:{m.qualifier!r}); split the event",
                model=spec.name, value=len(m.value),
            )


def _key_values(spec: ModelSpec, entity: Any) -> dict[str, Any]:
    values = {name: getattr(entity, name) for name in spec.key_fields}
    name = spec.timestamp_field
    raw = getattr(entity, name)
    try:
        values[name] = to_micros(raw)
    except TypeError as exc:
        raise errors.FieldTypeError(str(exc), model=spec.name, field=name, value=raw) from None
    except ValueError as exc:
        raise errors.ValidationError(str(exc), model=spec.name, field=name, value=raw) from None
    return values


def _checked_value(spec: ModelSpec, v: ValueSpec, item: Any) -> bytes | None:
    """The value encoded by its codec (``None`` for an optional ``None``), or raise."""
    if item is None:
        if v.optional:
            return None
        raise errors.ValidationError(
            "None given for a required value; annotate the field Optional[...] "
            "(with default=None) to make it optional",
            model=spec.name, field=v.name, value=item,
        )
    expected = v.codec.python_type
    if not isinstance(item, expected) or (
        isinstance(item, bool) and bool not in _as_tuple(expected)
    ):
        names = "/".join(t.__name__ for t in _as_tuple(expected))
        raise errors.FieldTypeError(
            f"expected {names}, got {type(item).__name__} {item!r}",
            model=spec.name, field=v.name, value=item,
        )
    if is_nan(item) and not v.allow_nan:
        raise errors.ValidationError(
            "NaN refused; pass allow_nan=True to tsmodel.value() to store it",
            model=spec.name, field=v.name, value=item,
        )
    try:
        return v.codec.encode(item)
    except (ValueError, OverflowError, UnicodeError) as exc:
        raise errors.ValidationError(str(exc), model=spec.name, field=v.name,
                                     value=item) from None


def _as_tuple(t: type | tuple[type, ...]) -> tuple[type, ...]:
    return t if isinstance(t, tuple) else (t,)


def decode_events(spec: ModelSpec, cls: type[M], row: Row, *, current: bool = False,
                  only: tuple[str, ...] | None = None) -> list[M]:
    """The events stored in one row of the main table (or the current-value table).

    A row-per-event row gives one event; a bucket row gives its events oldest
    first. In a current-value row (and a row-per-event row) only the cells of
    the newest event time are used, so cells of an older event never mix into
    a newer one. Value fields without a cell, or left out by ``only``, are
    ``None``.

    Raises:
        KeyDecodingError: the row key does not match the model's key layout.
    """
    fast = _fast_row_reader(spec, current) if only is None else None
    event = fast.decode(cls, row) if fast is not None else None
    if event is not None:
        return [event]
    layout = spec.current_key if current else spec.key
    assert layout is not None
    try:
        keys = layout.decode(row.key)
    except SegmentValueError as exc:
        raise errors.KeyDecodingError(f"{spec.name}: row key {row.key!r}: {exc}") from None
    keys.pop("__salt__", None)
    name = spec.timestamp_field
    key_time = keys.pop(name, None)
    if current or not spec.layout.bucketed:
        found = list(_ROW_LAYOUT.events(spec, row.cells, None))
        events = [(key_time if key_time is not None else ts, values) for ts, values in found]
    else:
        events = list(spec.layout.events(spec, row.cells, key_time))
    out = []
    for us, values in events:
        if only is not None:
            values = {k: (v if k in only else None) for k, v in values.items()}
        # Promoted values are in the key (and, serialized, in the blob too).
        out.append(cls(**{**values, **keys, name: from_micros(us)}))
    return out


class _FastRowReader:
    """The read path of a row holding one event, a column per value field.

    Like :class:`_FastRows` on the write side, it works out once per spec
    (and table) what :func:`decode_events` finds out for every row. A row
    that is not plain (a key that does not split into its segments, cells of
    several timestamps, a column twice, no cells) gets ``None`` and
    :func:`decode_events` takes the general path, which raises the
    documented errors or handles the case.
    """

    def __init__(self, spec: ModelSpec, layout: KeyLayout) -> None:
        self.separator = layout.separator
        # (field or None, width or None, decode); a salt's value is not a field.
        self.segments = tuple((seg.field, seg.width, seg.decode) for seg in layout.segments)
        self.time_name = spec.timestamp_field
        self.columns = {(v.family, v.qualifier): (v.name, v.codec.decode) for v in spec.values}
        self.no_values: dict[str, Any] = {v.name: None for v in spec.values}

    @staticmethod
    def fits(spec: ModelSpec, current: bool) -> bool:
        return spec.serialization is None and (current or not spec.layout.bucketed)

    def decode(self, cls: type[M], row: Row) -> M | None:
        keys = self._key(row.key)
        cells = row.cells
        if keys is None or not cells:
            return None
        ts = cells[0].timestamp
        values = self.no_values.copy()
        for family, qualifier, timestamp, value in cells:
            if timestamp != ts:
                return None
            column = self.columns.get((family, qualifier))
            if column is not None:
                if values[column[0]] is not None:  # a column twice: hand-built rows only
                    return None
                values[column[0]] = column[1](value)
        values.update(keys)  # promoted values are in the key: the key wins
        us = values.pop(self.time_name, None)
        values[self.time_name] = EPOCH + timedelta(microseconds=ts if us is None else us)
        return cls(**values)

    def _key(self, key: bytes) -> dict[str, Any] | None:
        parts = key.split(self.separator)
        if len(parts) != len(self.segments):
            return None
        out = {}
        try:
            for (name, width, decode), part in zip(self.segments, parts, strict=True):
                if width is not None and len(part) != width:
                    return None
                value = decode(part)
                if name is not None:
                    out[name] = value
        except SegmentValueError:
            return None
        return out


#: (id(spec), current) -> (spec, its fast reader or None), as for _FAST_ROWS.
_FAST_READERS: dict[tuple[int, bool], tuple[ModelSpec, _FastRowReader | None]] = {}


def _fast_row_reader(spec: ModelSpec, current: bool) -> _FastRowReader | None:
    found = _FAST_READERS.get((id(spec), current))
    if found is None or found[0] is not spec:
        layout = spec.current_key if current else spec.key
        fits = layout is not None and _FastRowReader.fits(spec, current)
        found = (spec, _FastRowReader(spec, layout) if fits and layout else None)
        _FAST_READERS[(id(spec), current)] = found
    return found[1]


def decode_row(spec: ModelSpec, cls: type[M], row: Row, *, current: bool = False) -> M:
    """The single event of a row-per-event row or of a current-value row.

    Raises:
        KeyDecodingError: the row key does not match, or the row holds no event.
    """
    events = decode_events(spec, cls, row, current=current)
    if not events:
        raise errors.KeyDecodingError(f"{spec.name}: row {row.key!r} holds no event")
    return events[-1]


def row_key(entity: Any) -> bytes:
    """The row key of a model instance in its main table.

    Raises:
        ValidationError: a key field or the timestamp cannot be encoded.
    """
    return encode_event(spec_of(entity), entity).key


def current_row_key(entity: Any) -> bytes:
    """The row key of a model instance in its current-value table.

    Raises:
        QueryError: the model declares no current-value table.
    """
    spec = spec_of(entity)
    if spec.current_key is None:
        raise errors.QueryError(f"{spec.name} declares no current-value table (current=...)")
    event = encode_event(spec, entity)
    assert event.current_key is not None
    return event.current_key


def decode_row_key(model: type, key: bytes | str) -> dict[str, Any]:
    """The typed key fields of a row key of ``model``'s main table.

    The timestamp comes back as a UTC ``datetime``; the salt, if any, under
    ``"__salt__"``.

    Raises:
        KeyDecodingError: the key does not match the model's key layout, or is
            not the key tsmodel would write for the values it holds (a wrong
            salt, a non-canonical padding).
    """
    spec = spec_of(model)
    raw = key.encode("utf-8") if isinstance(key, str) else key
    try:
        values = spec.key.decode(raw)
        canonical = spec.key.encode(values)
    except SegmentValueError as exc:
        raise errors.KeyDecodingError(f"{spec.name}: row key {raw!r}: {exc}") from None
    if canonical != raw:
        raise errors.KeyDecodingError(
            f"{spec.name}: row key {raw!r} is not canonical: its values encode to {canonical!r}"
        )
    values[spec.timestamp_field] = from_micros(values[spec.timestamp_field])
    return values


def timestamp_of(spec: ModelSpec, entity: Any) -> datetime:
    return getattr(entity, spec.timestamp_field)  # type: ignore[no-any-return]
