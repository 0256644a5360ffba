"""The generic encoder the generated ones replaced: a walk of the declaration per event.

Kept here only as an oracle for `tests/unit/test_generated_encoders.py`: it
is the write path as it stood before the codecs were generated (tsmodel
0.1 ``TableCodec.time_of/key_parts/row``, ``ValueEncoder.encode`` and the
layouts' ``writer()`` closures), copied verbatim but for the layout
dispatch, which a test may do by type. The generated encoders must write
the same cells and raise the same errors for the same input.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from tsmodel import errors
from tsmodel.backends.base import DeleteCells, Mutation, SetCell
from tsmodel.encoding.keys import SegmentValueError
from tsmodel.encoding.timestamps import EPOCH, to_micros
from tsmodel.encoding.values import MAX_VALUE_BYTES, too_big
from tsmodel.layouts import Cells, Columns, EncodedRow, Offsets, Rows, TableCodec

MS = 1_000
_US = timedelta(microseconds=1)
MARKER = b""


def time_of(codec: TableCodec, entity: Any) -> int:
    raw = getattr(entity, codec.time_field)
    if type(raw) is datetime and raw.tzinfo is timezone.utc:
        return (raw - EPOCH) // _US
    try:
        return to_micros(raw)
    except TypeError as exc:
        raise errors.FieldTypeError(str(exc), model=codec.model, field=codec.time_field,
                                    value=raw) from None
    except ValueError as exc:
        raise errors.ValidationError(str(exc), model=codec.model, field=codec.time_field,
                                     value=raw) from None


def key_parts(codec: TableCodec, entity: Any, us: int) -> dict[str, bytes]:
    parts: dict[str, bytes] = dict(codec._constants)
    name = ""
    try:
        for name, encode, is_time in codec._encoders:
            parts[name] = encode(us if is_time else getattr(entity, name))
    except SegmentValueError as exc:
        value = getattr(entity, name, None)
        raise errors.key_error(exc, model=codec.model, field=name, value=value) from None
    return parts


def encode_values(codec: TableCodec, entity: Any) -> dict[str, bytes]:
    values = codec.values
    encoded: dict[str, bytes] = {}
    for spec in values.values:
        name = spec.name
        item = getattr(entity, name)
        try:
            plain = type(item) in frozenset(spec.accepted_types) and item == item
        except ArithmeticError:
            plain = False
        if plain:
            try:
                data = spec.codec.encode(item)
            except (ValueError, OverflowError, UnicodeError):
                data = values.checked(spec, item)
        elif item is None and spec.optional:
            continue
        else:
            data = values.checked(spec, item)
        if len(data) > MAX_VALUE_BYTES:
            raise too_big(values.model, spec.family, spec.qualifier, len(data), field=name)
        encoded[name] = data
    return encoded


def _value_cells(shape: Any, us: int, entity: Any, encoded: Mapping[str, bytes], *,
                 erase_older: bool = False, exact_times: bool = False) -> tuple[Mutation, ...]:
    ser = shape.serialization
    ts = us * MS if exact_times else us // MS * MS
    if ser is not None:
        return (SetCell(ser.family, ser.qualifier, ts, ser.encode_entity(entity)),)
    columns = tuple((v.name, v.family, v.qualifier) for v in shape.values)
    if not columns:
        return (SetCell(shape.family, MARKER, ts, b""),)
    markers = not any(not v.optional for v in shape.values)
    out: list[Mutation] = []
    if len(encoded) == len(columns) and not markers:
        return tuple(SetCell(family, qualifier, ts, encoded[name])
                     for name, family, qualifier in columns)
    erase_from = 0 if erase_older else ts
    for name, family, qualifier in columns:
        data = encoded.get(name)
        out.append(DeleteCells(family, qualifier, erase_from, ts + MS) if data is None
                   else SetCell(family, qualifier, ts, data))
    if markers:
        if encoded:
            out.append(DeleteCells(shape.family, MARKER, erase_from, ts + MS))
        else:
            if erase_older and ts:
                out.append(DeleteCells(shape.family, MARKER, 0, ts))
            out.append(SetCell(shape.family, MARKER, ts, b""))
    return tuple(out)


def _layout_cells(codec: TableCodec, us: int, entity: Any,
                  encoded: Mapping[str, bytes]) -> tuple[Mutation, ...]:
    layout, shape = codec.layout, codec.shape
    if isinstance(layout, Rows):
        return _value_cells(shape, us, entity, encoded, erase_older=True,
                            exact_times=layout.exact_times)
    if isinstance(layout, Cells):
        return _value_cells(shape, us, entity, encoded)
    if isinstance(layout, Columns):
        v = shape.values[0]
        return (SetCell(v.family, encoded[v.name], us // MS * MS, b""),)
    if isinstance(layout, Offsets):
        qualifier = layout.qualifier(shape.bucket, us)
        ser = shape.serialization
        if ser is not None:
            return (SetCell(ser.family, qualifier, us // MS * MS, ser.encode_entity(entity)),)
        v = shape.values[0]
        return (SetCell(v.family, qualifier, us // MS * MS, encoded[v.name]),)
    return layout.writer(shape)(us, entity, encoded)


def row(codec: TableCodec, entity: Any, parts: Mapping[str, bytes], us: int,
        encoded: Mapping[str, bytes], like: EncodedRow | None = None) -> EncodedRow:
    if like is not None and codec._like is not None:
        return EncodedRow(codec.table, codec.join(parts), us, like.mutations)
    problem = None if codec._time_check is None else codec._time_check(us)
    if problem is not None:
        raw = getattr(entity, codec.time_field)
        raise errors.ValidationError(f"{raw} {problem}", model=codec.model,
                                     field=codec.time_field, value=raw)
    mutations = _layout_cells(codec, us, entity, encoded)
    if codec._key_columns:
        mutations += codec._key_cells(entity, us)
    if codec._version_field is not None:
        version = codec._version_time(entity)
        mutations = tuple(SetCell(m.family, m.qualifier, version, m.value)
                          if type(m) is SetCell else m for m in mutations)
    if codec.shape.serialization is not None:
        for m in mutations:
            if type(m) is SetCell and len(m.value) > MAX_VALUE_BYTES:
                raise too_big(codec.model, m.family, m.qualifier, len(m.value))
    return EncodedRow(codec.table, codec.join(parts), us, mutations)


def encode(codec: TableCodec, entity: Any) -> EncodedRow:
    """``TableCodec.encode`` as it was."""
    us = time_of(codec, entity)
    parts = key_parts(codec, entity, us)
    return row(codec, entity, parts, us, encode_values(codec, entity))


def encode_event(spec: Any, entity: Any) -> tuple[EncodedRow, EncodedRow | None]:
    """The main and current-value rows of an event, as ``plan.events._encode`` made them."""
    codec = spec.codec
    us = time_of(codec, entity)
    parts = key_parts(codec, entity, us)
    encoded = encode_values(codec, entity)
    main = row(codec, entity, parts, us, encoded)
    current = None
    if spec.current_codec is not None:
        current = row(spec.current_codec, entity, parts, us, encoded, like=main)
    return main, current
