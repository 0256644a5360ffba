"""Row keys of instances, and typed fields of row keys: the public helpers."""

from __future__ import annotations

from typing import Any

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.encoding.keys import SegmentValueError
from tsmodel.encoding.timestamps import from_micros
from tsmodel.layouts import TableCodec
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


def decode_row_key(model: type, key: bytes | str, *,
                   table: str | None = None) -> dict[str, Any]:
    """The typed key fields of a row key of one of ``model``'s tables.

    The timestamp comes back as a UTC ``datetime`` (a current-value key has
    none); the salt, if any, under ``"__salt__"``.

    Args:
        model: a model class.
        key: the row key, as bytes or UTF-8 text.
        table: the table the key comes from, by name: the main table (the
            default), the current-value table or an alternate-key table.

    Raises:
        KeyDecodingError: the key does not match the table's key layout, or is
            not the key tsmodel would write for the values it holds (a wrong
            salt, a non-canonical padding).
        QueryError: the model has no table named ``table``.
    """
    spec = spec_of(model)
    codec = _codec(spec, table)
    raw = key.encode("utf-8") if isinstance(key, str) else key
    values = codec.decode_key(raw)
    _check_canonical(spec.name, codec, raw, values)
    if spec.timestamp_field in values:
        values[spec.timestamp_field] = from_micros(values[spec.timestamp_field])
    return values


def _tables(spec: ModelSpec) -> list[tuple[TableCodec, str]]:
    """The codec and role of each table of a model whose keys it can decode."""
    tables = [(spec.codec, "main"), *((alt.codec, "alternate key") for alt in spec.alternates)]
    if spec.current_codec is not None:
        tables.append((spec.current_codec, "current value"))
    return tables


def _codec(spec: ModelSpec, table: str | None) -> TableCodec:
    """The codec of the model's table named ``table`` (``None``: the main table)."""
    if table is None:
        return spec.codec
    tables = _tables(spec)
    for codec, _ in tables:
        if codec.table == table:
            return codec
    names = ", ".join(f"{codec.table!r} ({role})" for codec, role in tables)
    raise errors.QueryError(f"{spec.name} has no table {table!r}: its tables are {names}")


def _check_canonical(model: str, codec: TableCodec, raw: bytes, values: dict[str, Any]) -> None:
    """Refuse a key that tsmodel would not write for the values it decodes to."""
    where = f"row key {raw!r} of table {codec.table!r}"
    try:
        canonical = codec.key.encode(values)
    except SegmentValueError as exc:
        raise errors.KeyDecodingError(f"{model}: {where}: {exc}") from None
    if canonical != raw:
        raise errors.KeyDecodingError(
            f"{model}: {where} is not canonical: its values encode to {canonical!r}")

