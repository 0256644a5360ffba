"""Timestamp encodings for row keys.

All arithmetic is done on integer microseconds since the Unix epoch (UTC), so
encodings are exact. An encoding has a *unit* (its granularity): a timestamp
that is not a whole number of units is refused, never truncated, because the
key could not give it back.
"""

from __future__ import annotations

import abc
import calendar
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Literal

import attrs

from tsmodel import errors

__all__ = [
    "EPOCH",
    "to_micros",
    "from_micros",
    "ceil_to",
    "floor_timestamp",
    "TimestampEncoding",
    "EpochEncoding",
    "FormatEncoding",
    "TimestampText",
]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)

#: Microseconds per unit name.
UNITS: dict[str, int] = {"us": 1, "ms": 1_000, "s": 1_000_000}
_DEFAULT_DIGITS = {"us": 16, "ms": 13, "s": 10}


def to_micros(dt: datetime, finer: Literal["refuse", "floor", "ceil"] = "refuse") -> int:
    """Microseconds since the epoch of a timezone-aware datetime.

    A datetime holds whole microseconds; a subclass may hold more (a pandas
    ``Timestamp``'s nanoseconds), which Bigtable cannot store.

    Args:
        finer: what a time finer than a microsecond gives: refused, or rounded
            down or up to the microsecond (a query bound: ``t >= start`` of a
            stored time ``t`` is ``t >= ceil(start)``, ``t <= as_of`` is
            ``t <= floor(as_of)``).

    Raises:
        TypeError: ``dt`` is not a datetime.
        ValueError: ``dt`` is naive, or finer than a microsecond and refused.
    """
    if not isinstance(dt, datetime):
        raise TypeError(f"expected a timezone-aware datetime, got {type(dt).__name__} {dt!r}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(
            f"naive datetime {dt.isoformat()} refused: its instant is ambiguous; "
            "attach a timezone, e.g. dt.replace(tzinfo=datetime.timezone.utc)"
        )
    since = dt - EPOCH
    us = since // _US
    if type(dt) is not datetime and us * _US != since:  # nanoseconds besides
        if finer == "refuse":
            raise ValueError(f"{dt} is finer than a microsecond, the finest time Bigtable "
                             "stores; round it first (e.g. pandas' .floor('us'))")
        us += finer == "ceil"
    return int(us)


#: The last whole millisecond a datetime can hold.
_MAX_US = (datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=timezone.utc) - EPOCH) // _US


def from_micros(us: int) -> datetime:
    """The UTC datetime ``us`` microseconds after the epoch."""
    return EPOCH + timedelta(0, 0, us)  # positional: a third faster than microseconds=us


def ceil_to(us: int, unit: int) -> int:
    """Round ``us`` up to a whole number of ``unit`` microseconds."""
    return -((-us) // unit) * unit


class TimestampEncoding(abc.ABC):
    """How a timestamp is written into a row key segment of fixed width."""

    #: Whether newer timestamps sort first.
    reverse: bool

    @property
    @abc.abstractmethod
    def width(self) -> int:
        """Width of the encoded segment, in bytes."""

    @property
    @abc.abstractmethod
    def unit(self) -> int:
        """Granularity, in microseconds."""

    @property
    @abc.abstractmethod
    def min_us(self) -> int:
        """Smallest encodable value, in microseconds (inclusive)."""

    @property
    @abc.abstractmethod
    def max_us(self) -> int:
        """Largest encodable value, in microseconds (inclusive)."""

    @abc.abstractmethod
    def encode_us(self, us: int) -> bytes:
        """The segment bytes of ``us``, which `check()` accepted."""

    @abc.abstractmethod
    def decode_us(self, data: bytes) -> int:
        """The microseconds a segment encodes; ``ValueError`` if malformed."""

    def decoder(self) -> Callable[[bytes], int]:
        """`decode_us()`, possibly specialised once for the per-row read path."""
        return self.decode_us

    def encoder(self) -> Callable[[int], bytes]:
        """`encode_us()`, possibly specialised once for the per-event write path."""
        return self.encode_us

    def check(self, us: int) -> str | None:
        """Why ``us`` cannot be encoded, or ``None`` when it can."""
        if not self.min_us <= us <= self.max_us:
            return (
                f"{_show(us)} is outside the encodable range {from_micros(self.min_us).isoformat()}"
                f" .. {from_micros(self.max_us).isoformat()} of {self.describe()}"
            )
        if us % self.unit:
            return (
                f"{_show(us)} is not a whole number of {_unit_name(self.unit)}, the unit of "
                f"{self.describe()}; round it first (tsmodel.floor_timestamp(dt, {self.unit}))"
            )
        return None

    @abc.abstractmethod
    def describe(self) -> str:
        """The encoding in words, for messages and plans."""


@attrs.frozen
class EpochEncoding(TimestampEncoding):
    """Epoch units as zero-padded decimal digits, e.g. 13-digit milliseconds.

    With ``reverse`` the digits are ``10**digits - 1 - t``: newest first. With
    ``reverse_from`` they are ``reverse_from - t`` instead, another program's
    reversal: Java's ``Long.MAX_VALUE - t`` is ``reverse_from=2**63 - 1`` in
    19 digits. ``digits`` must hold ``reverse_from``.
    """

    unit_name: str = "ms"
    digits: int = 13
    reverse: bool = False
    reverse_from: int | None = None

    @property
    def unit(self) -> int:
        return UNITS[self.unit_name]

    @property
    def width(self) -> int:
        return self.digits

    @property
    def base(self) -> int:
        """The number a reversed time is subtracted from."""
        return self.reverse_from if self.reverse_from is not None else 10**self.digits - 1

    @property
    def min_us(self) -> int:
        return 0

    @property
    def max_us(self) -> int:
        return min(self.base * self.unit, _MAX_US)

    def encode_us(self, us: int) -> bytes:
        return self.encoder()(us)

    def encoder(self) -> Callable[[int], bytes]:
        # The unit, the digits and the base are properties: read them once, not per key.
        unit, digits, base = self.unit, self.digits, self.base

        def encode_us(us: int) -> bytes:
            return b"%0*d" % (digits, us // unit)

        def encode_reversed(us: int) -> bytes:
            return b"%0*d" % (digits, base - us // unit)

        return encode_reversed if self.reverse else encode_us

    def decode_us(self, data: bytes) -> int:
        return self.decoder()(data)

    def arithmetic(self) -> tuple[int, int | None, int, int, int]:
        """What the digits mean, for a decoder of a whole column of them (Arrow's):
        ``(digits, base, unit, low, high)``: the number ``n`` the digits spell
        stands for ``(n if base is None else base - n) * unit`` microseconds,
        which must lie in ``low .. high``. `decoder()` applies the same."""
        return (self.digits, self.base if self.reverse else None, self.unit, self.min_us,
                self.max_us)

    def decoder(self) -> Callable[[bytes], int]:
        # The unit, the base and the range are properties: read them once, not per key.
        digits, base, unit, low, high = self.arithmetic()

        def decode_us(data: bytes) -> int:
            if len(data) != digits or not data.isdigit():
                raise ValueError(f"expected {digits} digits, got {data!r}")
            n = int(data) if base is None else base - int(data)
            if not low <= n * unit <= high:
                raise ValueError(
                    f"{data!r} is no time of {self.describe()}: it stands for {n} "
                    f"{self.unit_name} since the epoch, outside 0 .. {high // unit}")
            return n * unit

        return decode_us

    def describe(self) -> str:
        if self.reverse_from is not None:
            return f"{self.digits}-digit epoch {self.unit_name} reversed from {self.reverse_from}"
        rev = "reversed " if self.reverse else ""
        return f"{rev}{self.digits}-digit epoch {self.unit_name}"


def default_digits(unit_name: str) -> int:
    return _DEFAULT_DIGITS[unit_name]


# strftime directives allowed in an order-preserving format:
# (rank, width, unit in microseconds when it is the finest directive)
_DAY_US = 86_400_000_000
_DIRECTIVES: dict[str, tuple[int, int, int]] = {
    "Y": (0, 4, 0),
    "m": (1, 2, 0),
    "d": (2, 2, _DAY_US),
    "j": (2, 3, _DAY_US),
    "H": (3, 2, 3_600_000_000),
    "M": (4, 2, 60_000_000),
    "S": (5, 2, 1_000_000),
    "f": (6, 6, 1),
}
_REFUSED = {
    "y": "two-digit years sort 2099 before 2000",
    "b": "month names sort alphabetically, not in time order",
    "B": "month names sort alphabetically, not in time order",
    "a": "weekday names do not sort in time order",
    "A": "weekday names do not sort in time order",
    "I": "12-hour clocks sort 01 PM before 02 AM",
    "p": "AM/PM markers do not sort in time order",
    "z": "offsets vary; tsmodel always encodes UTC",
    "Z": "zone names vary; tsmodel always encodes UTC",
}
_TOKEN = re.compile(r"%(.)|([^%]+)")


@attrs.frozen
class FormatEncoding(TimestampEncoding):
    """An order-preserving calendar format in UTC, e.g. ``%Y%m%d%H%M%S``.

    Args:
        fmt: strftime-like format using only ``%Y %m %d %j %H %M %S %f``, from
            the most significant field down, with no gap, plus literals.
        millis: append three digits of milliseconds (needs ``%S`` last).
    """

    fmt: str
    millis: bool = False
    reverse: bool = attrs.field(default=False, init=False)
    _tokens: tuple[tuple[str, str], ...] = attrs.field(init=False, repr=False)
    _finest: int = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        tokens, finest = parse_format(self.fmt, self.millis)
        object.__setattr__(self, "_tokens", tokens)
        object.__setattr__(self, "_finest", finest)

    @property
    def unit(self) -> int:
        return 1_000 if self.millis else self._finest

    @property
    def width(self) -> int:
        total = sum(len(t) if kind == "lit" else _DIRECTIVES[t][1] for kind, t in self._tokens)
        return total + (3 if self.millis else 0)

    @property
    def min_us(self) -> int:
        return 0  # cell timestamps cannot be negative

    @property
    def max_us(self) -> int:
        return _MAX_US

    def encode_us(self, us: int) -> bytes:
        dt = from_micros(us)
        parts = [t if kind == "lit" else _field_text(dt, t) for kind, t in self._tokens]
        if self.millis:
            parts.append(f"{dt.microsecond // 1000:03d}")
        return "".join(parts).encode("ascii")

    def decode_us(self, data: bytes) -> int:
        text = data.decode("ascii")
        if len(text) != self.width:
            raise ValueError(f"expected {self.width} characters for {self.fmt!r}, got {text!r}")
        values = {"Y": 1970, "m": 1, "d": 1, "H": 0, "M": 0, "S": 0, "f": 0}
        pos = 0
        for kind, t in self._tokens:
            size = len(t) if kind == "lit" else _DIRECTIVES[t][1]
            chunk = text[pos : pos + size]
            pos += size
            if kind == "lit":
                if chunk != t:
                    raise ValueError(f"expected {t!r} at offset {pos - size} of {text!r}")
            elif not chunk.isdigit():
                raise ValueError(f"expected digits for %{t} in {text!r}")
            else:
                values[t] = int(chunk)
        return _components_to_us(values, text[pos:], self.millis)

    def describe(self) -> str:
        return f"format {self.fmt!r}" + (" + milliseconds" if self.millis else "")


def parse_format(fmt: str, millis: bool) -> tuple[tuple[tuple[str, str], ...], int]:
    """Check that ``fmt`` sorts in time order; return its tokens and finest unit.

    Raises:
        ValueError: the format does not sort in time order, with the reason.
    """
    tokens: list[tuple[str, str]] = []
    ranks: list[int] = []
    for directive, literal in _TOKEN.findall(fmt):
        if literal:
            tokens.append(("lit", literal))
            continue
        if directive in _REFUSED:
            raise ValueError(f"%{directive} in {fmt!r} cannot be used: {_REFUSED[directive]}")
        if directive not in _DIRECTIVES:
            raise ValueError(
                f"%{directive} in {fmt!r} is not allowed in a row key; use only "
                "%Y %m %d %j %H %M %S %f, most significant first"
            )
        tokens.append(("dir", directive))
        ranks.append(_DIRECTIVES[directive][0])
    names = [t for kind, t in tokens if kind == "dir"]
    if not names:
        raise ValueError(f"{fmt!r} has no time fields; a timestamp format needs at least %Y%m%d")
    expected = _expected_order(names)
    if names != expected[: len(names)]:
        raise ValueError(
            f"{fmt!r} does not sort in time order: fields must run from the most "
            f"significant down with no gap ({' '.join('%' + n for n in expected)}), "
            f"got {' '.join('%' + n for n in names) or 'none'}"
        )
    finest = _DIRECTIVES[names[-1]][2]
    if not finest:
        raise ValueError(
            f"{fmt!r} stops at a month or year: that is a time bucket, not a timestamp; "
            "go down to at least the day (%Y%m%d)"
        )
    if millis and names[-1] != "S":
        raise ValueError(
            f"millis=True appends milliseconds after seconds: {fmt!r} must end with %S"
        )
    return tuple(tokens), finest


def _expected_order(names: list[str]) -> list[str]:
    if "j" in names:
        return ["Y", "j", "H", "M", "S", "f"]
    return ["Y", "m", "d", "H", "M", "S", "f"]


def _field_text(dt: datetime, directive: str) -> str:
    if directive == "Y":
        return f"{dt.year:04d}"
    if directive == "j":
        return f"{dt.timetuple().tm_yday:03d}"
    if directive == "f":
        return f"{dt.microsecond:06d}"
    attr = {"m": "month", "d": "day", "H": "hour", "M": "minute", "S": "second"}[directive]
    return f"{getattr(dt, attr):02d}"


def _components_to_us(values: dict[str, int], rest: str, millis: bool) -> int:
    if "j" in values:
        year = values["Y"]
        days = 366 if calendar.isleap(year) else 365
        if not 1 <= values["j"] <= days:
            raise ValueError(f"day of year {values['j']:03d} does not exist in {year}")
        base = datetime(year, 1, 1, tzinfo=timezone.utc) + timedelta(days=values["j"] - 1)
        dt = base.replace(hour=values["H"], minute=values["M"], second=values["S"])
    else:
        dt = datetime(
            values["Y"], values["m"], values["d"], values["H"], values["M"], values["S"],
            tzinfo=timezone.utc,
        )
    micro = values["f"]
    if millis:
        if len(rest) != 3 or not rest.isdigit():
            raise ValueError(f"expected 3 digits of milliseconds, got {rest!r}")
        micro = int(rest) * 1000
    return to_micros(dt) + micro


def _show(us: int) -> str:
    try:
        return from_micros(us).isoformat()
    except OverflowError:
        return f"{us} us since the epoch"


def _unit_name(unit: int) -> str:
    names = {1: "microseconds", 1_000: "milliseconds", 1_000_000: "seconds",
             60_000_000: "minutes", 3_600_000_000: "hours", _DAY_US: "days"}
    return names.get(unit, f"{unit} microseconds")


def floor_timestamp(dt: datetime, unit_us: int = 1_000) -> datetime:
    """Round ``dt`` down to a whole number of ``unit_us`` microseconds (default: ms).

    Row keys refuse timestamps finer than their unit rather than truncate
    them silently; use this to truncate on purpose, e.g.
    ``floor_timestamp(datetime.now(timezone.utc))``.

    Raises:
        ArgumentTypeError: ``dt`` is not a datetime, or ``unit_us`` not an int.
        ArgumentError: ``dt`` is naive, or ``unit_us`` is below 1.
    """
    if isinstance(unit_us, bool) or not isinstance(unit_us, int):
        raise errors.ArgumentTypeError(
            f"floor_timestamp(dt, unit_us): unit_us must be an int, got {unit_us!r:.80}")
    if unit_us < 1:
        raise errors.ArgumentError(
            f"floor_timestamp(dt, unit_us): unit_us must be at least 1, got {unit_us!r}")
    try:
        us = to_micros(dt)
    except TypeError as exc:
        raise errors.ArgumentTypeError(f"floor_timestamp(dt): dt: {exc}") from None
    except ValueError as exc:
        raise errors.ArgumentError(f"floor_timestamp(dt): dt: {exc}") from None
    return from_micros(us - us % unit_us).astimezone(dt.tzinfo)


@attrs.frozen
class TimestampText:
    """A codec of the event time as readable text, for a timestamp also stored as a column.

    The text is what the row key holds, never reversed: epoch units as decimal
    digits (the guide's ``MD:QUOTETIME: 1426535612156``), or the formatted time.

    Args:
        encoding: the row key's encoding of the timestamp.
    """

    encoding: TimestampEncoding
    name = "timestamp-text"
    python_type = datetime

    def encode(self, value: datetime) -> bytes:
        us = to_micros(value)
        if isinstance(self.encoding, EpochEncoding):
            return str(us // self.encoding.unit).encode("ascii")
        return self.encoding.encode_us(us)

    def decode(self, data: bytes) -> datetime:
        """The time the text holds.

        Raises:
            CellDecodingError: the bytes are no time in this encoding.
        """
        try:
            if isinstance(self.encoding, EpochEncoding):
                if not data.isdigit():
                    raise ValueError("expected decimal digits")
                return from_micros(int(data) * self.encoding.unit)
            return from_micros(self.encoding.decode_us(data))
        except (ValueError, OverflowError, UnicodeDecodeError) as exc:
            raise errors.CellDecodingError(
                f"a timestamp-text cell ({self.encoding.describe()}, not reversed) does not "
                f"hold a time: {data[:32]!r} ({exc})", data=data) from None
