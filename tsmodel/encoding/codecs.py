"""Value codecs: how a field value becomes cell bytes and back.

The binary codecs match Bigtable's own conventions: integers are 8-byte
big-endian two's complement (what ``ReadModifyWrite`` increments and
Bigtable SQL's ``TO_INT64`` read), floats are 8-byte IEEE 754 big-endian.
``Text`` stores numbers as decimal strings, as the reference tables print them.
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from tsmodel import errors
from tsmodel.encoding.ordering import (
    ByteRange,
    Interval,
    float64_ranges,
    int64_ranges,
    plain_ranges,
)

__all__ = ["Codec", "Int64", "Float64", "Utf8", "Bool", "Raw", "Text", "codec_for", "fixed_width",
           "plain_value"]

_N = TypeVar("_N", int, float)
_INT64 = struct.Struct(">q")
_FLOAT64 = struct.Struct(">d")
#: Every int of at most this magnitude is exactly a double.
_EXACT_INT = 2**53
#: The most bytes of a refused cell that an error message shows.
_SHOWN = 32


def _show(data: bytes) -> str:
    return repr(data) if len(data) <= _SHOWN else f"{data[:_SHOWN]!r}... ({len(data)} bytes)"


def _refuse(codec: str, data: bytes, what: str) -> errors.CellDecodingError:
    """The error for cell bytes a codec cannot decode."""
    article = "an" if codec[0] in "aeio" else "a"
    return errors.CellDecodingError(
        f"{article} {codec} cell {what}: {_show(data)} (written by another codec, or "
        "damaged: declare ts.value(codec=...) to match the stored bytes, or rewrite the "
        "event)", data=data)


def _wrong_size(codec: str, data: bytes) -> errors.CellDecodingError:
    return _refuse(codec, data, f"holds 8 bytes, got {len(data)}")


def _utf8(codec: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(codec, data, f"is not valid UTF-8 ({exc.reason} at position "
                                   f"{exc.start})") from None


def fixed_width(codec: Any) -> int | None:
    """The length of every value ``codec`` encodes, where it is always the same: 8
    bytes for `Int64` and `Float64`, 1 for `Bool` (these classes exactly, not a
    subclass, which may encode otherwise); ``None`` for any other codec."""
    return _FIXED_WIDTHS.get(type(codec))


#: The Python types a numpy scalar may stand for (`plain_value()`).
_PLAIN = frozenset((int, float, bool, str, bytes))


def plain_value(value: Any) -> Any:
    """The Python value of a numpy scalar that holds exactly it, else ``value`` itself.

    ``np.int64(3)`` is ``3``, ``np.float32(0.5)`` is ``0.5``, ``np.bool_(True)``
    is ``True``: what a frame's numpy column is saved as. A scalar no Python
    value holds exactly (``np.longdouble(1) / 3``) stays as it is, to be
    refused by the field's type check. Called on the checked paths only
    (a value not of a field's own types), never imports numpy.
    """
    if type(value).__module__ != "numpy":
        return value
    try:
        plain = value.item()
        same = type(plain) in _PLAIN and (bool(plain == value)
                                          or (plain != plain and value != value))
    except (AttributeError, TypeError, ValueError, ArithmeticError):
        return value
    return plain if same else value


def _wrong_type(codec: str, value: Any, expected: str) -> errors.FieldTypeError:
    """The error for a value of a type the codec does not encode."""
    return errors.FieldTypeError(
        f"the {codec} codec encodes {expected}, not {type(value).__name__} {value!r}",
        value=value)


def _out_of_range(codec: str, value: Any, what: str) -> errors.ValidationError:
    """The error for a value of the right type that the codec cannot store."""
    return errors.ValidationError(f"{value!r} {what} (the {codec} codec)", value=value)


def _check_exact_float(value: Any) -> None:
    """Refuse an int that a double would round (beyond 2**53, not a multiple of its step).

    Raises:
        ValidationError: the stored value would not be ``value``.
    """
    if isinstance(value, int) and not -_EXACT_INT <= value <= _EXACT_INT:
        try:
            exact = int(float(value)) == value
        except OverflowError:
            return  # the codec refuses it as out of range
        if not exact:
            raise errors.ValidationError(
                f"the int {value} is not exactly a 64-bit float: it would be stored as "
                f"{float(value)!r}; pass float({value}) to accept the rounding, or declare "
                "the field int", value=value,
            )


class Codec(Protocol):
    """Turns one Python value into cell bytes and back."""

    #: The Python type(s) this codec accepts.
    python_type: type | tuple[type, ...]
    #: A short name shown in error messages and docs.
    name: str

    def encode(self, value: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


class _Packed(Generic[_N]):
    """A number in 8 bytes big-endian, `Int64` or `Float64`: their decoding."""

    name: ClassVar[str]
    #: The number's format.
    _packing: ClassVar[struct.Struct]

    def decode(self, data: bytes) -> _N:
        """The number of 8 bytes.

        Raises:
            CellDecodingError: ``data`` is not 8 bytes long.
        """
        try:
            value: _N = self._packing.unpack(data)[0]
        except struct.error:
            raise _wrong_size(self.name, data) from None
        return value


class Int64(_Packed[int]):
    """A signed 64-bit integer, 8 bytes big-endian (Bigtable's counter format)."""

    python_type = int
    name = "int64"
    _packing = _INT64

    def encode(self, value: int) -> bytes:
        """The 8 bytes of ``value``.

        Raises:
            FieldTypeError: not an int (nor an integer type, such as numpy's).
            ValidationError: an int beyond the signed 64-bit range.
        """
        try:
            return _INT64.pack(value)
        except struct.error:
            if not hasattr(value, "__index__"):
                raise _wrong_type(self.name, value, "an int") from None
            raise _out_of_range(self.name, value,
                                "does not fit in a signed 64-bit integer") from None

    def exact(self) -> tuple[type, Any, tuple[type[Exception], ...]]:
        """`encode()` of an ``int`` (exactly), as the generated encoders call it: the
        type, the function (the same bytes), and what it raises where `encode()`
        raises (then the checked path raises the documented error)."""
        return int, _INT64.pack, (struct.error,)

    def byte_ranges(self, interval: Interval) -> list[ByteRange]:
        """The cell values of the ints in ``interval``: a server-side filter's ranges."""
        return int64_ranges(interval)


class Float64(_Packed[float]):
    """An IEEE 754 double, 8 bytes big-endian."""

    python_type = (float, int)
    name = "float64"
    _packing = _FLOAT64

    def encode(self, value: float) -> bytes:
        """The 8 bytes of ``value``.

        Raises:
            FieldTypeError: not a float or an int (nor a type with ``__float__``).
            ValidationError: an int that a double would round (beyond 2**53), or
                beyond the range of doubles.
        """
        if type(value) is not float:
            _check_exact_float(value)
        try:
            return _FLOAT64.pack(value)
        except (struct.error, OverflowError):
            if not hasattr(value, "__float__"):
                raise _wrong_type(self.name, value, "a float or an int") from None
            raise _out_of_range(self.name, value, "does not fit in a 64-bit float") from None

    def exact(self) -> tuple[type, Any, tuple[type[Exception], ...]]:
        """`encode()` of a ``float`` (exactly), as the generated encoders call it: the
        type and the function (the same bytes; a float always packs)."""
        return float, _FLOAT64.pack, ()

    def byte_ranges(self, interval: Interval) -> list[ByteRange]:
        """The cell values of the floats in ``interval``: a server-side filter's ranges."""
        return float64_ranges(interval)


class Utf8:
    """A string, UTF-8 encoded."""

    python_type = str
    name = "utf8"

    def encode(self, value: str) -> bytes:
        """The UTF-8 bytes of ``value``.

        Raises:
            FieldTypeError: not a ``str``.
            ValidationError: a string UTF-8 cannot encode (a lone surrogate).
        """
        try:
            return value.encode("utf-8")
        except AttributeError:
            raise _wrong_type(self.name, value, "a str") from None
        except UnicodeEncodeError as exc:
            raise _out_of_range(self.name, value, f"is not valid Unicode ({exc.reason} at "
                                                  f"position {exc.start})") from None

    def decode(self, data: bytes) -> str:
        """The text of UTF-8 bytes.

        Raises:
            CellDecodingError: ``data`` is not valid UTF-8.
        """
        return _utf8(self.name, data)

    def byte_ranges(self, interval: Interval) -> list[ByteRange]:
        """The cell values of the strings in ``interval`` (UTF-8 sorts by code point)."""
        return plain_ranges(interval, self.encode)


class Bool:
    """A boolean, one byte ``0x00`` or ``0x01``.

    Decoding accepts exactly these two cells: an empty cell or another byte
    is not a boolean this codec wrote, and is refused rather than read as
    ``True``.
    """

    python_type = bool
    name = "bool"

    def encode(self, value: bool) -> bytes:
        """``0x01`` for ``True``, ``0x00`` for ``False``.

        Raises:
            FieldTypeError: not a bool (a numpy bool is one), rather than
                store its truth value.
        """
        if value is True or value is False:
            return b"\x01" if value else b"\x00"
        plain = plain_value(value)
        if type(plain) is not bool:
            raise _wrong_type(self.name, value, "a bool")
        return b"\x01" if plain else b"\x00"

    def decode(self, data: bytes) -> bool:
        """``False`` for ``0x00``, ``True`` for ``0x01``.

        Raises:
            CellDecodingError: any other bytes.
        """
        if data == b"\x01":
            return True
        if data == b"\x00":
            return False
        size = f"holds {len(data)} bytes" if len(data) != 1 else "holds another byte"
        raise _refuse(self.name, data, f"holds one byte, 0x00 or 0x01; this one {size}")

    def byte_ranges(self, interval: Interval) -> list[ByteRange]:
        """The cell values of the booleans in ``interval`` (``False < True``)."""
        return [(self.encode(b), True, self.encode(b), True) for b in (False, True)
                if interval.contains(b)]


class Raw:
    """Bytes stored as they are."""

    python_type = (bytes, bytearray, memoryview)
    name = "bytes"

    def encode(self, value: bytes) -> bytes:
        """``value`` as ``bytes``.

        Raises:
            FieldTypeError: not bytes, a bytearray or a memoryview.
        """
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise _wrong_type(self.name, value, "bytes, a bytearray or a memoryview")
        return bytes(value)

    def decode(self, data: bytes) -> bytes:
        return data

    def byte_ranges(self, interval: Interval) -> list[ByteRange]:
        """The cell values in ``interval``: the bytes themselves."""
        return plain_ranges(interval, self.encode)


class Text:
    """A number or string stored as readable ASCII/UTF-8 text (``b"600.55"``).

    Args:
        kind: the Python type to decode to: ``int``, ``float``, ``str`` or
            ``decimal.Decimal``.
        places: for ``float`` and ``Decimal``, write exactly this many digits
            after the decimal point, as another program may have (the guide's
            ``600.60``, ``28.90``, ``7.00``). A value with more places is
            refused, never rounded (round it first: ``round(x, places)``);
            decoding accepts only text with exactly these places, so a value
            read and written back keeps its bytes. ``None`` (the default):
            the shortest text that reads back as the value (``600.6``).

    Raises:
        DeclarationError: another ``kind``, or ``places`` that is not an int
            of at least 0 for a ``float`` or ``Decimal``.
    """

    name = "text"

    def __init__(self, kind: type = str, *, places: int | None = None) -> None:
        if kind not in (int, float, str, Decimal):
            raise errors.DeclarationError(
                f"ts.Text(kind={kind!r}): the Text codec decodes to int, float or str (or "
                "decimal.Decimal); e.g. ts.Text(float)")
        if places is not None and (kind not in (float, Decimal) or isinstance(places, bool)
                                   or not isinstance(places, int) or places < 0):
            raise errors.DeclarationError(
                f"ts.Text({kind.__name__}, places={places!r}): places is the number of digits "
                "after the decimal point of a float or Decimal, an int of at least 0, e.g. "
                "ts.Text(float, places=2)")
        self.kind = kind
        self.places = places
        self.python_type: type | tuple[type, ...] = (float, int) if kind is float else kind
        self._fixed: re.Pattern[bytes] | None = None if places is None else re.compile(
            rb"-?[0-9]+" + (rb"\.[0-9]{%d}" % places if places else b""))

    def encode(self, value: Any) -> bytes:
        """The text of ``value``.

        Raises:
            FieldTypeError: not a value of ``kind`` (an int for ``float``; a
                bool for none).
            ValidationError: with ``places``, a value that does not have at most
                that many decimal places, or is not finite; an int a
                ``Text(float)`` would round (beyond 2**53), or beyond the range of
                doubles.
        """
        self._check_kind(value)
        if self.kind is float:
            _check_exact_float(value)
            try:
                number = float(value)
            except OverflowError:
                raise _out_of_range(repr(self), value,
                                    "does not fit in a 64-bit float") from None
            if self.places is not None:
                return self._encode_places(number)
            return repr(number).encode("utf-8")
        if self.kind is Decimal and self.places is not None:
            return self._encode_places(value)
        return str(value).encode("utf-8")

    def _check_kind(self, value: object) -> None:
        """Refuse a value that is not of ``kind`` (an int for ``float``; a bool for none)."""
        kinds = self.python_type if isinstance(self.python_type, tuple) else (self.python_type,)
        if not isinstance(value, kinds) or isinstance(value, bool):
            names = " or ".join(t.__name__ for t in kinds)
            raise _wrong_type(repr(self), value, f"a {names}")

    def _encode_places(self, value: float | Decimal) -> bytes:
        places = self.places
        finite = exact = False
        text = ""
        try:
            finite = math.isfinite(value)  # a signalling Decimal NaN raises
            text = f"{value:.{places}f}"
            exact = finite and (
                float(text) == value if self.kind is float else Decimal(text) == value)
        except (ArithmeticError, ValueError):
            pass
        if not finite:
            raise errors.ValidationError(
                f"{value!r} has no decimal text with {places} places ({self!r})", value=value)
        if not exact:
            raise errors.ValidationError(
                f"{value!r} cannot be written with exactly {places} decimal places "
                f"({self!r}) without rounding it; round it first (round(value, {places})) "
                "or declare more places", value=value)
        return text.encode("ascii")

    def decode(self, data: bytes) -> Any:
        """The value of the text.

        Raises:
            CellDecodingError: ``data`` is not UTF-8 text of a ``kind`` value
                (with ``places``, of a decimal with exactly that many places).
        """
        text = _utf8(repr(self), data)
        if self._fixed is not None and self._fixed.fullmatch(data) is None:
            raise _refuse(repr(self), data, f"does not hold a decimal with exactly "
                                            f"{self.places} places")
        try:
            return self.kind(text)
        except (ValueError, ArithmeticError):  # decimal.InvalidOperation is no ValueError
            raise _refuse(repr(self), data, f"does not hold {self.kind.__name__} text") from None

    def __repr__(self) -> str:
        places = "" if self.places is None else f", places={self.places}"
        return f"Text({self.kind.__name__}{places})"


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


#: `fixed_width()` of each codec class whose values are all of one length.
_FIXED_WIDTHS: dict[type, int] = {Int64: 8, Float64: 8, Bool: 1}
