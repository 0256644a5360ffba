"""The mapper: model instances to backend-neutral mutations, rows back to instances.

Every check on an instance happens in :func:`encode_event`, before any
mutation exists, so a bad value can never leave a write half done.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypeVar

import attrs

from tsmodel import errors
from tsmodel.backends.base import Cell, DeleteCells, Mutation, Row, RowMutation, SetCell
from tsmodel.codecs import is_nan
from tsmodel.keys import SegmentValueError
from tsmodel.spec import ModelSpec, ValueSpec, spec_of
from tsmodel.timestamps import from_micros, to_micros

__all__ = ["EncodedEvent", "encode_event", "decode_row", "row_key", "current_row_key",
           "decode_row_key"]

M = TypeVar("M")
_MS = 1_000


@attrs.frozen
class EncodedEvent:
    """One validated event, ready to write.

    Attributes:
        entity: the model instance.
        key: its row key in the main table.
        current_key: its row key in the current-value table, or ``None``.
        timestamp: the event time in microseconds.
        mutations: the cell mutations, the same in every table.
    """

    entity: Any
    key: bytes
    current_key: bytes | None
    timestamp: int
    mutations: tuple[Mutation, ...]

    def row_mutation(self) -> RowMutation:
        return RowMutation(self.key, self.mutations)

    def current_row_mutation(self) -> RowMutation | None:
        if self.current_key is None:
            return None
        return RowMutation(self.current_key, self.mutations)


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
    cell_ts = values[spec.timestamp_field] // _MS * _MS
    return EncodedEvent(entity, key, current_key, values[spec.timestamp_field],
                        _cell_mutations(spec, entity, cell_ts))


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


def _cell_mutations(spec: ModelSpec, entity: Any, cell_ts: int) -> tuple[Mutation, ...]:
    checked = {v.name: _checked_value(spec, v, getattr(entity, v.name)) for v in spec.values}
    ser = spec.serialization
    if ser is not None:
        return (SetCell(ser.family, ser.qualifier, cell_ts, ser.encode(checked)),)
    out: list[Mutation] = []
    for v in spec.values:
        item = checked[v.name]
        if item is None:
            # Erase this event's cell, so a re-save with None is exact and idempotent.
            out.append(DeleteCells(v.family, v.qualifier, cell_ts, cell_ts + _MS))
        else:
            out.append(SetCell(v.family, v.qualifier, cell_ts, v.codec.encode(item)))
    return tuple(out)


def _checked_value(spec: ModelSpec, v: ValueSpec, item: Any) -> Any:
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
        v.codec.encode(item)
    except (ValueError, OverflowError, UnicodeError) as exc:
        raise errors.ValidationError(str(exc), model=spec.name, field=v.name,
                                     value=item) from None
    return item


def _as_tuple(t: type | tuple[type, ...]) -> tuple[type, ...]:
    return t if isinstance(t, tuple) else (t,)


def decode_row(spec: ModelSpec, cls: type[M], row: Row, *, current: bool = False) -> M:
    """The instance stored in a row of the main table (or the current-value table).

    Only the cells of the row's newest event time are used, so cells of an
    older event never mix into a newer one. Value fields without a cell are
    ``None``.
    """
    layout = spec.current_key if current else spec.key
    assert layout is not None
    try:
        values = layout.decode(row.key)
    except SegmentValueError as exc:
        raise errors.KeyDecodingError(f"{spec.name}: row key {row.key!r}: {exc}") from None
    values.pop("__salt__", None)
    newest = _newest_cells(row.cells)
    event_ts = max((c.timestamp for c in newest.values()), default=0)
    if spec.timestamp_field in values:
        values[spec.timestamp_field] = from_micros(values[spec.timestamp_field])
    else:
        values[spec.timestamp_field] = from_micros(event_ts)
    kept = {col: cell for col, cell in newest.items() if cell.timestamp == event_ts}
    values.update(_decode_values(spec, kept))
    return cls(**values)


def _newest_cells(cells: Iterable[Cell]) -> dict[tuple[str, bytes], Cell]:
    newest: dict[tuple[str, bytes], Cell] = {}
    for cell in cells:
        col = (cell.family, cell.qualifier)
        if col not in newest or cell.timestamp > newest[col].timestamp:
            newest[col] = cell
    return newest


def _decode_values(spec: ModelSpec, cells: dict[tuple[str, bytes], Cell]) -> dict[str, Any]:
    ser = spec.serialization
    if ser is not None:
        cell = cells.get((ser.family, ser.qualifier))
        if cell is None:
            return {v.name: None for v in spec.values}
        decoded: dict[str, Any] = ser.decode(cell.value)
        return decoded
    out: dict[str, Any] = {}
    for v in spec.values:
        cell = cells.get((v.family, v.qualifier))
        out[v.name] = None if cell is None else v.codec.decode(cell.value)
    return out


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
