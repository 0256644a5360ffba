"""Row keys: segments, their encoders, and the layout that joins them.

Pure functions, no I/O. A row key is a sequence of segments joined by a
one-byte separator (``#`` by default). Every segment encoder:

* round-trips exactly (``decode(encode(v)) == v``);
* preserves order (``encode(a) < encode(b)`` exactly when ``a < b``), so the
  byte order of keys equals the tuple order of their values (right-aligned
  strings order by length first, like numbers);
* refuses a value that does not fit, and never truncates it.

Fixed-width segments always take the same number of bytes; variable-width
segments may not contain the separator nor any byte that sorts below it, so
that the key of one entity can never fall inside another entity's range.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from tsmodel.encoding.buckets import Bucket
from tsmodel.encoding.codecs import plain_value
from tsmodel.encoding.timestamps import TimestampEncoding, from_micros

__all__ = [
    "Segment",
    "ConstantSegment",
    "StrSegment",
    "IntSegment",
    "TimestampSegment",
    "SaltSegment",
    "BucketSegment",
    "KeyLayout",
    "SaltFunction",
    "stable_hash",
]


def _separator_fix(low: int) -> str:
    """How to store a value whose lowest byte is ``low`` in a variable-width segment.

    Another separator helps only if it sorts below every byte of the values;
    ``'!'`` is the lowest one allowed (``'|'``, above letters and digits, would
    refuse ``'abc'``).
    """
    if low > ord("!"):
        return ("Declare a fixed width (ts.key(width=N)) or a separator that sorts below "
                "every character of the values, such as separator='!'")
    return "Declare a fixed width (ts.key(width=N)): no separator sorts below it"


@functools.cache
def _bytes_up_to(highest: int) -> re.Pattern[bytes]:
    """A pattern finding any byte ``<= highest``: faster than ``min(data)`` on keys."""
    return re.compile(b"[\\x00-" + re.escape(bytes([highest])) + b"]")


class SegmentValueError(ValueError):
    """A value does not fit its segment; the mapper adds model and field names."""


class SegmentTypeError(SegmentValueError, TypeError):
    """A value has the wrong Python type for its segment."""


class Segment:
    """One part of a row key."""

    #: The field this segment encodes, or ``None`` for constants and salts.
    field: str | None = None
    @property
    def width(self) -> int | None:
        """Exact width in bytes, or ``None`` for variable width."""
        return None

    @property
    def max_width(self) -> int:
        """The most bytes the segment can take."""
        assert self.width is not None
        return self.width

    def encode(self, value: Any) -> bytes:
        raise NotImplementedError

    def encoder(self) -> Callable[[Any], bytes]:
        """`encode()`, possibly specialised once for the per-event write path."""
        return self.encode

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError

    def decoder(self) -> Callable[[bytes], Any]:
        """`decode()`, possibly specialised once for the per-row read path."""
        return self.decode

    def parse(self, text: str) -> Any:
        """The value of this segment's field written as text (a command line, a file).

        Strings are the text itself, integers are parsed. Timestamp segments
        take microseconds, which nobody types: parse their text as an ISO 8601
        ``datetime`` instead.

        Raises:
            SegmentValueError: the text is not a value of the segment.
        """
        raise NotImplementedError(f"{type(self).__name__} has no text form")

    def describe(self) -> str:
        raise NotImplementedError


@attrs.frozen
class ConstantSegment(Segment):
    """A literal, such as ``BATTERY``."""

    text: str

    @property
    def width(self) -> int:
        return len(self.text.encode("utf-8"))

    def encode(self, value: Any = None) -> bytes:
        return self.text.encode("utf-8")

    def decode(self, data: bytes) -> str:
        if data != self.text.encode("utf-8"):
            raise SegmentValueError(f"expected the constant {self.text!r}, got {data!r}")
        return self.text

    def describe(self) -> str:
        return f"constant {self.text!r}"


#: The most strings a key segment's encoder keeps the bytes of (`StrSegment.encoder()`).
_KNOWN_STRINGS = 4096
#: Bucket labels a `BucketSegment` keeps: events come in a few buckets at a time.
_KNOWN_LABELS = 1024


@attrs.frozen
class StrSegment(Segment):
    """A string field, fixed width (padded) or variable width.

    Attributes:
        field: the field name.
        width: fixed width in UTF-8 bytes, or ``None`` for variable width.
        pad: the padding character of fixed-width values.
        align: ``"left"`` pads on the right (``"ZXZZT "``) and keeps string
            order; ``"right"`` pads on the left, which orders values by length
            first (numeric-string order: ``"  9" < " 10"``), not as strings.
        max_length: the most UTF-8 bytes of a variable-width value.
        separator: the key's separator; a variable-width value may not contain
            it nor any character that sorts below it.
    """

    field: str
    width: int | None = None
    pad: str = " "
    align: str = "left"
    max_length: int = 256
    separator: bytes = b"#"

    @property
    def max_width(self) -> int:
        return self.width if self.width is not None else self.max_length

    def encoder(self) -> Callable[[Any], bytes]:
        return self.keeping_encoder()[0]

    def keeping_encoder(self) -> tuple[Callable[[Any], bytes], dict[str, bytes]]:
        """`encoder()`, and the strings it keeps the bytes of.

        A key's strings repeat from event to event (a host, a sensor): what
        `encode()` returned for a str is kept (never a refusal: it raises
        before anything is kept), a bounded number of them. A generated
        encoder may look a str up in the dict first, and call the encoder
        (which keeps what it returns) only when it is not there.
        """
        encode = self.encode
        known: dict[str, bytes] = {}

        def encode_known(value: Any) -> bytes:
            if type(value) is not str:
                return encode(value)
            data = known.get(value)
            if data is None:
                data = encode(value)
                if len(known) < _KNOWN_STRINGS:
                    known[value] = data
            return data

        return encode_known, known

    def encode(self, value: str) -> bytes:
        if not isinstance(value, str):
            raise SegmentTypeError(f"expected str, got {type(value).__name__} {value!r}")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SegmentValueError(
                f"{value!r} holds a lone surrogate ({value[exc.start]!r} at index {exc.start}), "
                "which UTF-8 cannot encode; decode the text that produced it with "
                "errors='replace', or drop the character"
            ) from None
        if self.width is None:
            return self._encode_variable(value, data)
        return self._encode_fixed(value, data)

    def _encode_variable(self, value: str, data: bytes) -> bytes:
        if not data:
            raise SegmentValueError("an empty string cannot be a variable-width key segment")
        if len(data) > self.max_length:
            raise SegmentValueError(
                f"{value!r} is {len(data)} bytes, over max_length={self.max_length}"
            )
        if _bytes_up_to(self.separator[0]).search(data) is None:
            return data
        low = min(data)
        if low <= self.separator[0]:
            what = "the separator" if low == self.separator[0] else f"byte {bytes([low])!r}"
            raise SegmentValueError(
                f"{value!r} contains {what}; a variable-width key segment may contain neither "
                f"the separator {self.separator.decode()!r} (one entity's rows could fall "
                "inside another's range) nor characters that sort below it (keys would not "
                f"sort like their values). {_separator_fix(low)}"
            )
        return data

    def _encode_fixed(self, value: str, data: bytes) -> bytes:
        assert self.width is not None
        if len(data) > self.width:
            raise SegmentValueError(
                f"{value!r} is {len(data)} bytes, wider than the field's width {self.width}; "
                "values are never truncated: widen the field"
            )
        pad = self.pad.encode("utf-8")
        edge = data[-1:] if self.align == "left" else data[:1]
        if data and (edge == pad or min(data) < pad[0]):
            raise SegmentValueError(
                f"{value!r} cannot be padded with {self.pad!r}: a value may not "
                f"{'end' if self.align == 'left' else 'start'} with the pad character nor "
                "contain characters that sort below it (the key would be ambiguous or "
                "out of order)"
            )
        filler = pad * (self.width - len(data))
        return data + filler if self.align == "left" else filler + data

    def decode(self, data: bytes) -> str:
        """The value of a segment's bytes.

        A variable-width segment holding the separator or a byte below it is
        refused as `encode()` refuses such a value: it is no key of this
        layout (a foreign or damaged row such as ``h13#x`` as the last segment).
        """
        if self.width is None:
            if not data:
                raise SegmentValueError(f"{self.field}: empty variable-width segment")
            if _bytes_up_to(self.separator[0]).search(data) is not None:
                low = min(data)
                what = (f"the separator {self.separator.decode()!r}"
                        if low == self.separator[0] else f"byte {bytes([low])!r}")
                text = data.decode("utf-8", "backslashreplace")
                raise SegmentValueError(
                    f"{text!r} contains {what}, which no value of the variable-width "
                    f"segment {self.field} holds (a foreign or damaged row key)")
        else:
            pad = self.pad.encode("utf-8")
            data = data.rstrip(pad) if self.align == "left" else data.lstrip(pad)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SegmentValueError(
                f"{self.field}: segment {data!r} is not valid UTF-8 ({exc.reason} at "
                f"position {exc.start})") from None

    def parse(self, text: str) -> str:
        return text

    def describe(self) -> str:
        if self.width is None:
            return f"{self.field}: variable-width string (at most {self.max_length} bytes)"
        side = "right" if self.align == "left" else "left"
        return f"{self.field}: string, {self.width} bytes, {side}-padded with {self.pad!r}"


@attrs.frozen
class IntSegment(Segment):
    """A non-negative integer left-padded with zeros to a fixed width."""

    field: str
    width: int

    def encode(self, value: int) -> bytes:
        if isinstance(value, bool) or not isinstance(value, int):
            plain = plain_value(value)  # a numpy scalar: its exact Python value
            if plain is value or isinstance(plain, bool) or not isinstance(plain, int):
                raise SegmentTypeError(f"expected int, got {type(value).__name__} {value!r}")
            value = plain
        if value < 0:
            raise SegmentValueError(
                f"{value} is negative; zero-padded integer key segments hold 0 .. "
                f"{10**self.width - 1} (negative numbers would sort wrongly)"
            )
        text = str(value)
        if len(text) > self.width:
            raise SegmentValueError(
                f"{value} has {len(text)} digits, more than the field's width {self.width}"
            )
        return text.zfill(self.width).encode("ascii")

    def decode(self, data: bytes) -> int:
        if not data.isdigit():
            raise SegmentValueError(f"expected {self.width} digits, got {data!r}")
        return int(data)

    def parse(self, text: str) -> int:
        if re.fullmatch(r"-?[0-9]+", text) is None:  # int() would take "4_2" and " 42"
            raise SegmentValueError(f"{text!r} is not an integer")
        return int(text)

    def describe(self) -> str:
        return f"{self.field}: integer, {self.width} digits, zero-padded"


@attrs.frozen
class TimestampSegment(Segment):
    """The event time, through a `TimestampEncoding`.

    Values are integer microseconds since the epoch (UTC).
    """

    field: str
    encoding: TimestampEncoding

    @property
    def width(self) -> int:
        return self.encoding.width

    def encode(self, value: int) -> bytes:
        problem = self.encoding.check(value)
        if problem:
            raise SegmentValueError(problem)
        return self.encoding.encode_us(value)

    def encoder(self) -> Callable[[int], bytes]:
        # The range and unit checks are properties computed on every call of
        # encode(); the write path checks against bounds read once instead.
        low, high, unit = self.encoding.min_us, self.encoding.max_us, self.encoding.unit
        encode_us, checked = self.encoding.encoder(), self.encode

        def encode(value: int) -> bytes:
            if low <= value <= high and not value % unit:
                return encode_us(value)
            return checked(value)  # raises the reason

        return encode

    def decode(self, data: bytes) -> int:
        return self.decoder()(data)

    def decoder(self) -> Callable[[bytes], int]:
        decode_us = self.encoding.decoder()

        def decode(data: bytes) -> int:
            try:
                return decode_us(data)
            except ValueError as exc:
                raise SegmentValueError(str(exc)) from exc

        return decode

    def describe(self) -> str:
        return f"{self.field}: {self.encoding.describe()}"


@attrs.frozen
class BucketSegment(Segment):
    """The label of the time bucket holding the event time (e.g. ``20170726``).

    Encodes microseconds to the label of their bucket; decodes a label to the
    bucket's start.
    """

    field: str
    bucket: Bucket
    #: The labels of the buckets met, by their start (`encode()`), a bounded number.
    _labels: dict[int, bytes] = attrs.field(factory=dict, init=False, repr=False, eq=False)

    @property
    def width(self) -> int | None:
        return self.bucket.width

    @property
    def max_width(self) -> int:
        return self.bucket.max_width

    def encode(self, value: int) -> bytes:
        if value < 0:
            raise SegmentValueError(f"{value} us is before 1970; cell timestamps cannot be")
        if value < self.bucket.first_us:
            raise SegmentValueError(
                f"{from_micros(value).isoformat()} is before the first bucket of "
                f"{self.bucket.describe()}")
        start = self.bucket.start(value)
        label = self._labels.get(start)
        if label is None:  # a label is worked out once per bucket met (a strftime a week)
            label = self.bucket.label(start)
            if len(self._labels) >= _KNOWN_LABELS:
                self._labels.clear()
            self._labels[start] = label
        return label

    def decode(self, data: bytes) -> int:
        try:
            return self.bucket.parse(data)
        except ValueError as exc:
            raise SegmentValueError(str(exc)) from exc

    def describe(self) -> str:
        return f"{self.field}: {self.bucket.describe()}"


def stable_hash(data: bytes) -> int:
    """A hash that is the same in every process and language: CRC-32 (IEEE)."""
    return zlib.crc32(data)


#: A salt function of another program: the ``on`` fields' values, as the row key
#: holds them (a timestamp as a UTC ``datetime``), in, the salt value out.
SaltFunction = Callable[..., int]


@attrs.frozen
class SaltSegment(Segment):
    """The salt of a row: one of ``buckets`` values from ``first`` on, zero-padded digits.

    By default the salt is ``stable_hash`` of the encoded ``on`` segments,
    modulo ``buckets``, plus ``first``. With ``using``, it is what that
    function returns for the ``on`` fields' values (another program's salt),
    checked to be one of the salt's values. The salt spreads sequential
    writes over ``buckets`` key ranges; a time range read then needs one scan
    per salt value.

    Attributes:
        buckets: the number of salt values.
        on: the fields the salt is computed from.
        using: another program's salt function, or ``None`` for CRC-32.
        first: the smallest salt value (the guide's salts run 1 .. 3).
        name: the salt's name in the model, for messages.
    """

    buckets: int
    on: tuple[str, ...]
    using: SaltFunction | None = None
    first: int = 0
    name: str = "salt"

    @property
    def width(self) -> int:
        return len(str(self.first + self.buckets - 1))

    @property
    def values(self) -> range:
        """Every salt value, in key order."""
        return range(self.first, self.first + self.buckets)

    def salt_of(self, encoded: Mapping[str, bytes]) -> int:
        """The CRC-32 salt of an entity, from the encoded segments it is computed on.

        A salt declared ``using`` a function is computed by
        `KeyLayout.salt_of()`, which has the typed values it takes.
        """
        assert self.using is None
        return stable_hash(b"#".join(encoded[name] for name in self.on)) % self.buckets + self.first

    def call(self, args: Sequence[Any]) -> int:
        """The salt value ``using`` gives for the ``on`` fields' ``args``, checked.

        Raises:
            SegmentValueError: the function raised, or returned something that
                is not one of the salt's values (``.value`` holds it).
        """
        assert self.using is not None
        shown = ", ".join(f"{name}={arg!r}" for name, arg in zip(self.on, args, strict=True))
        try:
            value = self.using(*args)
        except Exception as exc:  # the user's function: its failure names the key it met
            error = SegmentValueError(
                f"the salt function {_function_name(self.using)} raised {exc!r} for {shown}")
            error.value = args[0] if len(args) == 1 else tuple(args)  # type: ignore[attr-defined]
            raise error from exc
        if isinstance(value, bool) or not isinstance(value, int) or value not in self.values:
            error = SegmentValueError(
                f"the salt function {_function_name(self.using)} returned {value!r} for "
                f"{shown}; a salt of this key is an int in {self.first}..{self.values[-1]}")
            error.value = value  # type: ignore[attr-defined]
            raise error
        return value

    def encode(self, value: int) -> bytes:
        return str(value).zfill(self.width).encode("ascii")

    def decode(self, data: bytes) -> int:
        if len(data) != self.width or not data.isdigit() or int(data) not in self.values:
            raise SegmentValueError(
                f"expected a salt {self.encode(self.first).decode()}.."
                f"{self.encode(self.values[-1]).decode()}, got {data!r}")
        return int(data)

    def all_values(self) -> range:
        return self.values

    def describe(self) -> str:
        on = ", ".join(self.on)
        digits = f"{self.width} digit(s)"
        if self.using is not None:
            return (f"salt: {_function_name(self.using)}({on}), {self.first}.."
                    f"{self.values[-1]}, {digits}")
        plus = f" + {self.first}" if self.first else ""
        return f"salt: crc32({on}) mod {self.buckets}{plus}, {digits}"


def _function_name(function: Callable[..., Any]) -> str:
    return str(getattr(function, "__qualname__", None) or repr(function))


#: A segment's decoding, worked out once: (where its value goes, its width, its decoder).
_Decoding = tuple[str | None, int | None, Callable[[bytes], Any]]
#: What `KeyLayout.decode()` knows of the key it decoded last: the bytes of its
#: segments before the last one (with the separator after them), and their values.
#: ``()`` before any key: ``key.startswith(())`` is false.
_Known = tuple[bytes | tuple[()], dict[str, Any]]


@attrs.frozen
class KeyLayout:
    """An ordered list of segments joined by a separator."""

    segments: tuple[Segment, ...]
    separator: bytes = b"#"
    #: Per segment but the last, then the last: its decoding, worked out once.
    _decoding: tuple[_Decoding, ...] = attrs.field(init=False, eq=False, repr=False)
    _last: _Decoding = attrs.field(init=False, eq=False, repr=False)
    #: The segments before the last of the key decoded last (one item, replaced
    #: whole: threads decoding at once see one key's or another's).
    _known: list[_Known] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        decoding = tuple(
            (seg.field if seg.field is not None else
             "__salt__" if isinstance(seg, SaltSegment) else None, seg.width, seg.decoder())
            for seg in self.segments)
        object.__setattr__(self, "_decoding", decoding[:-1])
        object.__setattr__(self, "_last", decoding[-1] if decoding else (None, None, bytes))
        object.__setattr__(self, "_known", [((), {})])

    def salt_of(self, salt: SaltSegment, encoded: Mapping[str, bytes]) -> int:
        """The salt value of a key whose field segments are ``encoded``.

        A salt function gets the ``on`` fields' values as this key holds them:
        decoded from their segments, a timestamp as a UTC ``datetime``.

        Raises:
            SegmentValueError: the salt function raised or returned no salt
                value (``.field`` is the salt's name).
        """
        if salt.using is None:
            return salt.salt_of(encoded)
        try:
            return salt.call([self._typed(name, encoded[name]) for name in salt.on])
        except SegmentValueError as exc:
            exc.field = salt.name  # type: ignore[attr-defined]
            raise

    def _typed(self, name: str, data: bytes) -> Any:
        seg = next(s for s in self.segments if s.field == name)
        value = seg.decode(data)
        if isinstance(seg, (TimestampSegment, BucketSegment)):
            return from_micros(value)
        return value

    @property
    def max_length(self) -> int:
        """The longest key this layout can produce, in bytes."""
        seps = len(self.separator) * max(len(self.segments) - 1, 0)
        return sum(s.max_width for s in self.segments) + seps

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(s.field for s in self.segments if s.field is not None)

    def describe_order(self) -> str:
        """The layout in words, for messages and plans: ``BATTERY#<salt>#<time>``."""
        return self.separator.decode().join(
            s.text if isinstance(s, ConstantSegment) else
            "<salt>" if isinstance(s, SaltSegment) else f"<{s.field}>"
            for s in self.segments)

    def salt(self) -> SaltSegment | None:
        return next((s for s in self.segments if isinstance(s, SaltSegment)), None)

    def encode_segments(self, values: Mapping[str, Any]) -> dict[str, bytes]:
        """Encode every field segment; raises `SegmentValueError` with ``.field``."""
        encoded: dict[str, bytes] = {}
        for seg in self.segments:
            if seg.field is None:
                continue
            try:
                encoded[seg.field] = seg.encode(values[seg.field])
            except SegmentValueError as exc:
                exc.field = seg.field  # type: ignore[attr-defined]
                raise
        return encoded

    def join(self, encoded: Mapping[str, bytes], salt: int | None = None) -> bytes:
        """The row key from encoded field segments (and the salt, if any)."""
        parts = []
        for seg in self.segments:
            if seg.field is not None:
                parts.append(encoded[seg.field])
            elif isinstance(seg, SaltSegment):
                parts.append(seg.encode(self.salt_of(seg, encoded) if salt is None else salt))
            else:
                parts.append(seg.encode(None))
        return self.separator.join(parts)

    def encode(self, values: Mapping[str, Any]) -> bytes:
        """The row key of ``values`` (field name to value; timestamps in µs)."""
        return self.join(self.encode_segments(values))

    def prefix(self, encoded: Sequence[bytes]) -> bytes:
        """The key prefix of the first ``len(encoded)`` segments, with a trailing separator."""
        return b"".join(part + self.separator for part in encoded)

    def decode(self, key: bytes) -> dict[str, Any]:
        """The field values of a row key (salt under ``"__salt__"``).

        Consecutive keys of one entity share the segments before the last (the
        entity, then its time): those of the key decoded last are known, and
        only the last segment is decoded again.

        Raises:
            SegmentValueError: the key does not match the layout.
        """
        head, known = self._known[0]
        if key.startswith(head):
            # Each segment before the last ended where it did in the key decoded
            # last, whose bytes these are (separators included): the same values.
            values = known.copy()
            pos = len(head)
        else:
            values, pos = self._decode_head(key)
            self._known[0] = (key[:pos], values.copy())
        name, width, decode = self._last
        if width is not None and len(key) - pos != width:
            raise SegmentValueError(f"key {key!r} does not end with a {width}-byte segment")
        value = decode(key[pos:])
        if name is not None:
            values[name] = value
        return values

    def _decode_head(self, key: bytes) -> tuple[dict[str, Any], int]:
        """The values of the segments before the last, and where the last one starts."""
        values: dict[str, Any] = {}
        pos = 0
        sep = self.separator
        for name, width, decode in self._decoding:
            end = pos + width if width is not None else key.find(sep, pos)
            if end < 0:
                raise SegmentValueError(
                    f"key {key!r} is missing a separator after offset {pos}")
            if key[end:end + len(sep)] != sep:
                raise SegmentValueError(f"key {key!r} has no separator at offset {end}")
            value = decode(key[pos:end])
            if name is not None:
                values[name] = value
            pos = end + len(sep)
        return values, pos
