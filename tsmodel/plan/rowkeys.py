"""Row keys of instances or of key field values, and typed fields of row keys."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.encoding.keys import SegmentValueError
from tsmodel.encoding.timestamps import from_micros
from tsmodel.layouts import TableCodec
from tsmodel.layouts.codec import SALT_FIELD
from tsmodel.plan.events import encode_event

__all__ = ["row_key", "current_row_key", "encode_row_key", "decode_row_key"]


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


def encode_row_key(model: type, fields: Mapping[str, Any], *,
                   table: str | None = None) -> bytes:
    """The row key of key field values in one of ``model``'s tables, without an instance.

    The inverse of `decode_row_key()`, encoding as a save does: the
    timestamp is a timezone-aware ``datetime`` (any instant of its bucket,
    for a bucket layout), and the salt is computed (a ``"__salt__"`` given
    must be that salt).

    Args:
        model: a model class.
        fields: the key field values by name; the current-value table needs
            no timestamp.
        table: the table of the key, by name: the main table (the default),
            the current-value table or an alternate-key table.

    Raises:
        KeyEncodingError: a key field of the table has no value, a value does
            not fit its segment (`KeyTypeError` for a wrong type), or
            ``"__salt__"`` is not the key's salt.
        ValidationError: the timestamp is naive, or not a ``datetime``.
        QueryError: a name is not a key field of the model, or the model has
            no table named ``table``.
    """
    spec = spec_of(model)
    codec = _codec(spec, table)
    _check_names(spec, codec, fields)
    entity = SimpleNamespace(**{k: v for k, v in fields.items() if k != SALT_FIELD})
    us = codec.time_of(entity) if spec.timestamp_field in codec.key.fields else 0
    key = codec.join(codec.key_parts(entity, us))
    _check_salt(spec.name, codec, key, fields.get(SALT_FIELD))
    return key


def _check_names(spec: ModelSpec, codec: TableCodec, fields: Mapping[str, Any]) -> None:
    """Refuse names that are not key fields, and key fields of the table without a value."""
    unknown = [name for name in fields
               if name not in (*spec.key_fields, spec.timestamp_field, SALT_FIELD)]
    if unknown:
        raise errors.QueryError(
            f"{spec.name} has no key field {', '.join(map(repr, unknown))} (key fields: "
            f"{', '.join((*spec.key_fields, spec.timestamp_field))})")
    missing = next((name for name in codec.key.fields if name not in fields), None)
    if missing is not None:
        raise errors.KeyEncodingError(
            f"no value given; the row key of table {codec.table!r} is "
            f"{codec.key.describe_order()}", model=spec.name, field=missing)


def _check_salt(model: str, codec: TableCodec, key: bytes, given: object) -> None:
    """Refuse a ``"__salt__"`` that is not the salt of ``key``."""
    if given is None:
        return
    salt = codec.decode_key(key).get(SALT_FIELD)
    if given != salt:
        raise errors.KeyEncodingError(
            f"{given!r} is not the salt of row key {key!r} of table {codec.table!r} "
            f"({'it has no salt' if salt is None else f'its fields hash to {salt}'})",
            model=model, field=SALT_FIELD, value=given)


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
    raw = _key_bytes(spec.name, key)
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


def _key_bytes(model: str, key: object) -> bytes:
    """The bytes of a row key given as bytes (or bytearray, memoryview) or UTF-8 text."""
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    if not isinstance(key, str):
        raise errors.KeyDecodingTypeError(
            f"{model}: a row key is bytes or str, not {type(key).__name__} {key!r}")
    try:
        return key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise errors.KeyDecodingError(
            f"{model}: row key {key!r} is not valid UTF-8 text ({exc.reason}); pass the "
            "key's bytes") from None
