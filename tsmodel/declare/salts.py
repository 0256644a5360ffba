"""Definition-time checks of another program's salt function (``ts.salt(using=...)``).

A salted table written by another program can be read only with the salt
function that program used: a row key is canonical when its salt is the one
the function gives for its fields. ``@model`` cannot prove a function right,
but it refuses the mistakes that would make every read or write wrong:
a function that raises, returns something that is no salt value of the key,
gives two answers for one key (random, time-dependent or stateful), or calls
Python's ``hash()``, which is randomized per process for ``str``, ``bytes``
and ``datetime``.
"""

from __future__ import annotations

import builtins
import dis
from collections.abc import Callable, Iterator
from typing import Any

from tsmodel import errors
from tsmodel.encoding.keys import (
    BucketSegment,
    IntSegment,
    KeyLayout,
    SaltSegment,
    Segment,
    SegmentValueError,
    StrSegment,
    TimestampSegment,
)

__all__ = ["check_salt_function"]

#: Sample times: the epoch, the guide's 2015-03-01T12:45:01.001Z and
#: 2015-03-16T19:53:32.045Z, the patterns page's 2021-03-05T12:00Z, 2038.
_SAMPLE_US = (0, 1_425_213_901_001_000, 1_426_535_612_045_000, 1_614_945_600_000_000,
              2_147_483_648_000_000)
#: Calls per sample key: a function picking one of 3 salts at random passes 5 samples
#: with probability (1/9)**5.
_CALLS = 3
_SAMPLE_TEXT = ("a", "Z", "Corrie", "ZXZZT", "server1.aaa.bbb.com", "us-west2")


def check_salt_function(model: str, table: str, key: KeyLayout) -> None:
    """Refuse a salt of ``key`` whose fields are not in the key, or whose function fails.

    Raises:
        DeclarationError: naming the model, the salt and what its function did.
    """
    salt = key.salt()
    if salt is None:
        return
    missing = [name for name in salt.on if name not in key.fields]
    if missing:
        raise errors.DeclarationError(
            f"{model}: salt(on={missing[0]!r}) of table {table!r} names no field of its row "
            f"key {key.describe_order()}; a salt hashes fields of the key it is in")
    if salt.using is None:
        return
    where = f"{model}.{salt.name}: ts.salt(using={_name(salt.using)})"
    if _calls_builtin_hash(salt.using):
        raise errors.DeclarationError(
            f"{where} calls Python's hash(), which is randomized per process for str, bytes "
            "and datetime: another process would compute other salts. Use a stable hash "
            "(zlib.crc32, hashlib) of the values")
    for encoded in _samples(key, salt.on):
        _call_repeatedly(where, key, salt, encoded)


def _call_repeatedly(where: str, key: KeyLayout, salt: SaltSegment,
                encoded: dict[str, bytes]) -> None:
    try:
        answers = [key.salt_of(salt, encoded) for _ in range(_CALLS)]
    except SegmentValueError as exc:
        raise errors.DeclarationError(
            f"{where}: on a sample key, {exc}") from exc.__cause__
    first = answers[0]
    again = next((other for other in answers if other != first), first)
    if first != again:
        shown = ", ".join(f"{name}={encoded[name]!r}" for name in salt.on)
        raise errors.DeclarationError(
            f"{where} is not deterministic: it gave {first} then {again} for the key "
            f"segments {shown}; a salt must be the same for a key on every call, in every "
            "process, or reads would miss rows")


def _samples(key: KeyLayout, on: tuple[str, ...]) -> Iterator[dict[str, bytes]]:
    """Encoded segments of a few sample values of the ``on`` fields, side by side."""
    segments = {name: next(s for s in key.segments if s.field == name) for name in on}
    columns = {name: list(_encoded_samples(seg)) for name, seg in segments.items()}
    if not all(columns.values()):
        return
    for i in range(max(len(values) for values in columns.values())):
        yield {name: values[i % len(values)] for name, values in columns.items()}


def _encoded_samples(seg: Segment) -> Iterator[bytes]:
    for value in _sample_values(seg):
        try:
            yield seg.encode(value)
        except SegmentValueError:
            continue  # a sample the segment does not hold (too wide, before its range)


def _sample_values(seg: Segment) -> list[Any]:
    if isinstance(seg, TimestampSegment):
        unit = seg.encoding.unit
        return [us - us % unit for us in _SAMPLE_US]
    if isinstance(seg, BucketSegment):
        return list(_SAMPLE_US)
    if isinstance(seg, IntSegment):
        return [0, 3698, 987_654, 10**seg.width - 1]
    if isinstance(seg, StrSegment):
        return [text.ljust(seg.width, "Z")[:seg.width] if seg.width else text
                for text in _SAMPLE_TEXT]
    return []


def _calls_builtin_hash(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is, or its code loads, Python's randomized ``hash``."""
    if function is builtins.hash:
        return True
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    scope = getattr(function, "__globals__", {})
    if scope.get("hash", builtins.hash) is not builtins.hash:
        return False
    return any(ins.opname == "LOAD_GLOBAL" and ins.argval == "hash"
               for ins in dis.get_instructions(code))


def _name(function: Callable[..., Any]) -> str:
    return str(getattr(function, "__qualname__", None) or repr(function))
