"""Row keys of instances, and typed fields of row keys: the public helpers."""

from __future__ import annotations

from typing import Any

from tsmodel import errors
from tsmodel.declare.spec import spec_of
from tsmodel.encoding.keys import SegmentValueError
from tsmodel.encoding.timestamps import from_micros
from tsmodel.plan.writes import encode_event

__all__ = ["row_key", "current_row_key", "decode_row_key"]


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
    current = encode_event(spec, entity).current if spec.current_codec is not None else None
    if current is None:
        raise errors.QueryError(f"{spec.name} declares no current-value table (current=...)")
    return current.key


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
    values = spec.codec.decode_key(raw)
    try:
        canonical = spec.key.encode(values)
    except SegmentValueError as exc:
        raise errors.KeyDecodingError(f"{spec.name}: row key {raw!r}: {exc}") from None
    if canonical != raw:
        raise errors.KeyDecodingError(
            f"{spec.name}: row key {raw!r} is not canonical: its values encode to {canonical!r}"
        )
    values[spec.timestamp_field] = from_micros(values[spec.timestamp_field])
    return values
