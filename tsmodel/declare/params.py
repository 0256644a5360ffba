"""Declaration parameters: their types and ranges, checked when a model class is defined.

The field helpers (``ts.key()``, ``ts.value()``...) only record what they are
given: inside a class body the model and the field have no name yet.
``@model`` checks every parameter here, once it knows both, so that a mistake
raises `DeclarationError` naming the model, the field,
the parameter and the value given, and saying what to pass instead. What a
parameter means (a unit, a format, a bucket) is checked where it is used.
``@model``'s own options are checked by the validators of `ModelOptions`
(``tsmodel/declare/options.py``), with the helpers here.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from tsmodel import errors
from tsmodel.declare.fields import (
    Constant,
    KeyInfo,
    Salt,
    TimestampInfo,
    ValueInfo,
)

__all__ = ["show", "refuse", "check_int", "check_bool", "check_text", "check_info",
           "check_name", "check_codec", "MAX_TABLE_NAME", "MAX_FAMILY_NAME"]

#: Bigtable's longest table ID and column family name.
MAX_TABLE_NAME = 50
MAX_FAMILY_NAME = 64
#: Bigtable's table IDs and family names: ASCII, not starting with '-' or '.'.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
_SHOWN = 60


def show(value: object) -> str:
    """``repr(value)``, shortened for a message."""
    try:
        text = repr(value)
    except Exception:  # a user object whose repr fails must not hide the real mistake
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def refuse(where: str, call: str, param: str, value: object,
           expected: str) -> errors.DeclarationError:
    return errors.DeclarationError(
        f"{where}: {call}({param}={show(value)}): {param} must be {expected}")


def check_int(where: str, call: str, param: str, value: object, *, minimum: int | None,
              example: str, optional: bool = False) -> None:
    """An int (not a bool) of at least ``minimum`` (``None``: the caller checks the range)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or (
            minimum is not None and value < minimum):
        least = "" if minimum is None else f", at least {minimum}"
        none = " or None" if optional else ""
        raise refuse(where, call, param, value,
                     f"an int{least}{none}, e.g. {param}={example}")


def check_bool(where: str, call: str, param: str, value: object) -> None:
    if not isinstance(value, bool):
        raise refuse(where, call, param, value, "True or False")


def check_text(where: str, call: str, param: str, value: object, *, example: str,
               optional: bool = False) -> None:
    """A str that UTF-8 can encode (no lone surrogate)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        none = " or None" if optional else ""
        raise refuse(where, call, param, value, f"a str{none}, e.g. {param}={example}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise refuse(where, call, param, value,
                     f"text UTF-8 can encode; {value[exc.start]!r} at index {exc.start} is a "
                     "lone surrogate") from None


def check_name(where: str, call: str, param: str, value: object, *, limit: int,
               what: str) -> None:
    """A Bigtable table ID or column family name.

    Raises:
        DeclarationError: not a str of 1..``limit`` ASCII letters, digits,
            ``_``, ``-`` and ``.``, not starting with ``-`` or ``.``.
    """
    if not isinstance(value, str) or len(value) > limit or not _NAME.match(value):
        raise refuse(where, call, param, value,
                     f"a {what} name: 1-{limit} ASCII letters, digits, '_', '-' and '.', "
                     "not starting with '-' or '.'")


def check_codec(where: str, codec: object, param: str = "ts.value(codec") -> None:
    """An object that satisfies the `Codec` protocol.

    Raises:
        DeclarationError: a codec class instead of an instance, or an object
            without ``encode``, ``decode``, a ``name`` and a ``python_type``.
    """
    if isinstance(codec, type):
        prefix = "ts." if codec.__module__.startswith("tsmodel.") else ""
        raise errors.DeclarationError(
            f"{where}: {param}={codec.__name__}): pass an instance of the codec, "
            f"{param.split('(')[-1]}={prefix}{codec.__name__}()")
    lacks = [f"{method}()" for method in ("encode", "decode")
             if not callable(getattr(codec, method, None))]
    if not isinstance(getattr(codec, "name", None), str):
        lacks.append("a name (str)")
    kinds = getattr(codec, "python_type", None)
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if not kinds or not all(isinstance(k, type) for k in kinds):
        lacks.append("a python_type (a type or a tuple of types)")
    if lacks:
        raise errors.DeclarationError(
            f"{where}: {param}={show(codec)}) is not a codec: it lacks "
            f"{', '.join(lacks)}. A codec has encode(value) -> bytes, decode(bytes) -> value, "
            "name and python_type (see ts.Codec), e.g. codec=ts.Text(float)")


def check_info(where: str, info: Any) -> None:
    """Check the parameters of one declared field, constant or salt (``where``: ``M.f``).

    Raises:
        DeclarationError: a parameter of the wrong type or out of range.
    """
    if isinstance(info, KeyInfo):
        _key(where, info)
    elif isinstance(info, TimestampInfo):
        _timestamp(where, info)
    elif isinstance(info, ValueInfo):
        _value(where, info)
    elif isinstance(info, Constant):
        check_text(where, "ts.constant", "text", info.text, example="'BATTERY'")
    elif isinstance(info, Salt):
        _salt(where, info)


def _key(where: str, info: KeyInfo) -> None:
    call = "ts.key"
    # The range (an int key needs a width) is checked with the annotation, in model.py.
    check_int(where, call, "width", info.width, minimum=None, example="8", optional=True)
    if not isinstance(info.pad, str) or len(info.pad) != 1 or not info.pad.isascii():
        raise refuse(where, call, "pad", info.pad, "one ASCII character, e.g. pad=' '")
    if info.align not in ("left", "right"):
        raise refuse(where, call, "align", info.align, "'left' or 'right'")
    check_int(where, call, "max_length", info.max_length, minimum=1, example="64")
    _column(where, call, info.column)
    if info.column_codec is not None:
        check_codec(where, info.column_codec, "ts.key(column_codec")


def _timestamp(where: str, info: TimestampInfo) -> None:
    call = "ts.timestamp"
    check_text(where, call, "unit", info.unit, example="'ms'")
    check_int(where, call, "digits", info.digits, minimum=None, example="13", optional=True)
    check_text(where, call, "format", info.format, example="'%Y%m%d%H%M'", optional=True)
    check_bool(where, call, "millis", info.millis)
    check_bool(where, call, "reverse", info.reverse)
    check_int(where, call, "reverse_from", info.reverse_from, minimum=1, example="2**63 - 1",
         optional=True)
    if info.bucket is not None and not isinstance(info.bucket, (str, timedelta)):
        raise refuse(where, call, "bucket", info.bucket,
                     "'minute', 'hour', 'day', 'week', 'month', a timedelta or None")
    check_text(where, call, "label", info.label, example="'%Y-%m-%d'", optional=True)
    if info.origin is not None and (not isinstance(info.origin, datetime)
                                    or info.origin.utcoffset() is None):
        raise refuse(where, call, "origin", info.origin,
                     "a timezone-aware datetime (the start of bucket 1) or None")
    check_bool(where, call, "unsorted_labels", info.unsorted_labels)
    _column(where, call, info.column)


def _column(where: str, call: str, column: object) -> None:
    check_text(where, call, "column", column, example="'SYMBOL'", optional=True)
    if column == "":
        raise refuse(where, call, "column", column, "a non-empty qualifier, or None")


def _value(where: str, info: ValueInfo) -> None:
    call = "ts.value"
    check_text(where, call, "qualifier", info.qualifier, example="'CPU/USR'", optional=True)
    if info.qualifier == "":
        raise refuse(where, call, "qualifier", info.qualifier,
                     "non-empty (None: the field name)")
    if info.family is not None:
        check_name(where, call, "family", info.family, limit=MAX_FAMILY_NAME,
                   what="column family")
    if info.codec is not None:
        check_codec(where, info.codec)
    check_bool(where, call, "allow_nan", info.allow_nan)


def _salt(where: str, info: Salt) -> None:
    call = "ts.salt"
    check_int(where, call, "buckets", info.buckets, minimum=None, example="4")
    on = info.on
    if not isinstance(on, tuple) or not all(isinstance(name, str) for name in on):
        raise refuse(where, call, "on", on,
                     "a field name or a list of field names, e.g. on='time'")
    if info.using is not None and (not callable(info.using) or isinstance(info.using, type)):
        raise refuse(where, call, "using", info.using,
                     "a function of the on fields' values returning the salt value, or None")
    check_int(where, call, "first", info.first, minimum=0, example="1")
