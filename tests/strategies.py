"""Every Hypothesis strategy of the test suite, in one place.

The strategies generate values that a row key segment accepts (so that the
round-trip and order properties can be stated without filtering) and the
timestamps each encoding can hold, as timezone-aware datetimes in assorted
time zones.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import strategies as st

from tsmodel.encoding.timestamps import from_micros

__all__ = [
    "variable_width_text",
    "fixed_width_text",
    "key_ints",
    "zones",
    "aware_datetimes",
    "epoch_datetimes",
    "format_datetimes",
    "distinct_pair",
    "int64s",
    "float64s",
    "byte_strings",
    "unicode_text",
]

#: First code point a variable-width segment accepts with the ``#`` separator
#: (the separator and everything below it are refused).
_ABOVE_HASH = ord("#") + 1
#: First code point a space-padded fixed-width segment accepts.
_SPACE = ord(" ")

_US_PER_UNIT = {"us": 1, "ms": 1_000, "s": 1_000_000}


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def variable_width_text(*, max_bytes: int = 24, ascii_only: bool = False) -> st.SearchStrategy[str]:
    """Non-empty strings a variable-width key segment accepts (``#`` separator).

    Every character sorts above the separator; surrogates (which UTF-8
    cannot encode) are excluded.
    """
    chars = st.characters(
        min_codepoint=_ABOVE_HASH,
        max_codepoint=0x7E if ascii_only else None,
        exclude_categories=("Cs",),
    )
    return st.text(chars, min_size=1, max_size=max_bytes).filter(
        lambda s: _utf8_len(s) <= max_bytes
    )


def fixed_width_text(width: int, *, ascii_only: bool = False) -> st.SearchStrategy[str]:
    """Strings a fixed-width, space-padded, left-aligned key segment accepts.

    At most ``width`` UTF-8 bytes, no character below the pad (space), and
    not ending with the pad. The empty string is allowed (all padding).
    """
    chars = st.characters(
        min_codepoint=_SPACE,
        max_codepoint=0x7E if ascii_only else None,
        exclude_categories=("Cs",),
    )
    return st.text(chars, max_size=width).filter(
        lambda s: _utf8_len(s) <= width and not s.endswith(" ")
    )


def key_ints(width: int) -> st.SearchStrategy[int]:
    """Integers a zero-padded integer key segment of ``width`` digits accepts."""
    return st.integers(min_value=0, max_value=10**width - 1)


def zones() -> st.SearchStrategy[timezone]:
    """UTC and a few fixed offsets, including non-whole-hour ones."""
    return st.sampled_from([
        timezone.utc,
        timezone(timedelta(hours=5, minutes=30)),
        timezone(timedelta(hours=-8)),
        timezone(timedelta(hours=14)),
        timezone(timedelta(hours=-12)),
    ])


def aware_datetimes(min_us: int, max_us: int, unit_us: int = 1) -> st.SearchStrategy[datetime]:
    """Aware datetimes between two epoch-microsecond bounds, whole ``unit_us`` multiples.

    The instant is drawn as an integer number of units, so it is exact, then
    shown in one of :func:`zones` (the zone never changes the instant).
    """
    lo = -((-min_us) // unit_us)
    hi = max_us // unit_us

    def build(n: int, tz: timezone) -> datetime:
        utc = from_micros(n * unit_us)
        try:
            return utc.astimezone(tz)
        except OverflowError:  # year 1 or 9999 shown in a far zone
            return utc

    return st.builds(build, st.integers(min_value=lo, max_value=hi), zones())


def epoch_datetimes(unit: str = "ms", digits: int | None = None) -> st.SearchStrategy[datetime]:
    """The instants an epoch encoding (``unit``, ``digits``) can hold."""
    default = {"us": 16, "ms": 13, "s": 10}[unit]
    per = _US_PER_UNIT[unit]
    top = (10 ** (digits or default) - 1) * per
    return aware_datetimes(0, top, per)


# Year 1 .. the last millisecond of 9999: the range of FormatEncoding.
_FORMAT_MIN_US = 0  # cell timestamps cannot be negative: formats start at 1970
_FORMAT_MAX_US = 253_402_300_799_999_000


def format_datetimes(unit_us: int) -> st.SearchStrategy[datetime]:
    """The instants a calendar-format encoding whose unit is ``unit_us`` can hold."""
    return aware_datetimes(_FORMAT_MIN_US, _FORMAT_MAX_US, unit_us)


def distinct_pair(values: st.SearchStrategy[object]) -> st.SearchStrategy[tuple[object, object]]:
    """Two different values of one strategy."""
    return st.tuples(values, values).filter(lambda p: p[0] != p[1])


def int64s() -> st.SearchStrategy[int]:
    """Every signed 64-bit integer."""
    return st.integers(min_value=-(2**63), max_value=2**63 - 1)


def float64s() -> st.SearchStrategy[float]:
    """Every double, NaN and infinities included."""
    return st.floats(allow_nan=True, allow_infinity=True)


def byte_strings() -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, empty included."""
    return st.binary(max_size=64)


def unicode_text() -> st.SearchStrategy[str]:
    """Any text UTF-8 can encode."""
    return st.text(st.characters(exclude_categories=("Cs",)), max_size=32)
