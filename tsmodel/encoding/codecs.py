"""Value codecs: how a field value becomes cell bytes and back.

The binary codecs match Bigtable's own conventions: integers are 8-byte
big-endian two's complement (what ``ReadModifyWrite`` increments and
Bigtable SQL's ``TO_INT64`` read), floats are 8-byte IEEE 754 big-endian.
``Text`` stores numbers as decimal strings, as the reference tables print them.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Protocol

__all__ = ["Codec", "Int64", "Float64", "Utf8", "Bool", "Raw", "Text", "codec_for"]

_INT64 = struct.Struct(">q")
_FLOAT64 = struct.Struct(">d")


class Codec(Protocol):
    """Turns one Python value into cell bytes and back."""

    #: The Python type(s) this codec accepts.
    python_type: type | tuple[type, ...]
    #: A short name shown in error messages and docs.
    name: str

    def encode(self, value: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


class Int64:
    """A signed 64-bit integer, 8 bytes big-endian (Bigtable's counter format)."""

    python_type = int
    name = "int64"

    def encode(self, value: int) -> bytes:
        try:
            return _INT64.pack(value)
        except struct.error as exc:
            raise OverflowError(f"{value} does not fit in a signed 64-bit integer") from exc

    def decode(self, data: bytes) -> int:
        if len(data) != 8:
            raise ValueError(f"an int64 cell holds 8 bytes, got {len(data)}: {data!r}")
        return int(_INT64.unpack(data)[0])


class Float64:
    """An IEEE 754 double, 8 bytes big-endian."""

    python_type = (float, int)
    name = "float64"

    def encode(self, value: float) -> bytes:
        try:
            return _FLOAT64.pack(value)
        except (struct.error, OverflowError) as exc:
            raise OverflowError(f"{value} does not fit in a 64-bit float") from exc

    def decode(self, data: bytes) -> float:
        if len(data) != 8:
            raise ValueError(f"a float64 cell holds 8 bytes, got {len(data)}: {data!r}")
        return float(_FLOAT64.unpack(data)[0])


class Utf8:
    """A string, UTF-8 encoded."""

    python_type = str
    name = "utf8"

    def encode(self, value: str) -> bytes:
        return value.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")


class Bool:
    """A boolean, one byte ``0x00`` or ``0x01``."""

    python_type = bool
    name = "bool"

    def encode(self, value: bool) -> bytes:
        return b"\x01" if value else b"\x00"

    def decode(self, data: bytes) -> bool:
        return data != b"\x00"


class Raw:
    """Bytes stored as they are."""

    python_type = (bytes, bytearray, memoryview)
    name = "bytes"

    def encode(self, value: bytes) -> bytes:
        return bytes(value)

    def decode(self, data: bytes) -> bytes:
        return data


class Text:
    """A number or string stored as readable ASCII/UTF-8 text (``b"600.55"``).

    Args:
        kind: the Python type to decode to: ``int``, ``float`` or ``str``.
    """

    name = "text"

    def __init__(self, kind: type = str) -> None:
        if kind not in (int, float, str):
            raise TypeError(f"Text codec decodes to int, float or str, not {kind!r}")
        self.kind = kind
        self.python_type: type | tuple[type, ...] = (float, int) if kind is float else kind

    def encode(self, value: Any) -> bytes:
        return (repr(float(value)) if self.kind is float else str(value)).encode("utf-8")

    def decode(self, data: bytes) -> Any:
        return self.kind(data.decode("utf-8"))

    def __repr__(self) -> str:
        return f"Text({self.kind.__name__})"


_BY_TYPE: dict[Any, Any] = {
    int: Int64(),
    float: Float64(),
    str: Utf8(),
    bool: Bool(),
    bytes: Raw(),
}


def codec_for(annotation: Any) -> Codec | None:
    """The default codec for a field annotation (``int``, ``float``...), if any."""
    codec: Codec | None = _BY_TYPE.get(annotation)
    return codec


def is_nan(value: Any) -> bool:
    """Whether ``value`` is a float NaN."""
    return isinstance(value, float) and math.isnan(value)
