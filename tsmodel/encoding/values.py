"""Value fields: the column each one is stored in, and their validating encoder.

A `ValueEncoder` is compiled once per model, at declaration, from its
`ValueSpec` tuple. It is the one place where a value is checked and
encoded: every write path (saves, repairs, snapshot jobs) goes through it, so
a rule added here holds everywhere.
"""

from __future__ import annotations

from typing import Any

import attrs

from tsmodel import errors
from tsmodel.encoding.codecs import Codec, plain_value

__all__ = ["ValueSpec", "ValueEncoder", "MAX_VALUE_BYTES", "too_big"]

#: Bigtable advises keeping a value under ~10 MB.
MAX_VALUE_BYTES = 10 * 1024 * 1024


@attrs.frozen
class ValueSpec:
    """One value field and the column it is stored in.

    Attributes:
        optional: the field is ``Optional[...]``: ``None`` is a value, stored as
            no cell, so a missing cell reads as ``None``.
        has_default: a field that is not optional declares a default (a value
            or a factory, not ``None``): a stored event without its cell (one
            written before the field existed) reads as the default.
        default: that default, where ``has_default``: the declared value, or
            an ``attrs.Factory`` (a function's new value each time).
    """

    name: str
    family: str
    qualifier: bytes
    codec: Codec
    optional: bool
    allow_nan: bool
    has_default: bool = False
    default: Any = attrs.field(default=None, eq=False, repr=False)

    @property
    def stored(self) -> bool:
        """Whether every stored event must have the field's cell (strict decoding)."""
        return not self.optional and not self.has_default

    @property
    def factory_default(self) -> bool:
        """Whether the default comes from a factory (no one value known in advance)."""
        return self.has_default and isinstance(self.default, attrs.Factory)  # type: ignore[arg-type]

    def default_value(self) -> Any:
        """The default an event without the field's cell reads (``has_default``):
        the declared value, or the factory's new value."""
        default = self.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            factory = default.factory
            return factory(None) if default.takes_self else factory()
        return default

    @property
    def accepted_types(self) -> tuple[type, ...]:
        """The Python types the codec takes (``bool`` only where named)."""
        t = self.codec.python_type
        return t if isinstance(t, tuple) else (t,)


class ValueEncoder:
    """Checks and encodes the value fields of one model.

    Args:
        model: the model name, for messages.
        values: the value fields, in declaration order.
    """

    __slots__ = ("model", "values")

    def __init__(self, model: str, values: tuple[ValueSpec, ...]) -> None:
        self.model = model
        self.values = values

    def checked(self, v: ValueSpec, item: Any) -> bytes:
        """Encode ``item`` of field ``v`` with every check, raising the documented errors.

        The generated encoders (`tsmodel.layouts.render_write`) take a fast path
        for a value of exactly an accepted type that the codec takes, and
        this one for anything else.

        Raises:
            FieldTypeError: a value of the wrong type.
            ValidationError: ``None`` for a required value, a NaN not allowed,
                or a value the codec refuses.
        """
        if item is None:
            raise errors.ValidationError(
                "None given for a required value; annotate the field Optional[...] "
                "(with default=None) to make it optional",
                model=self.model, field=v.name, value=item,
            )
        expected = v.accepted_types
        given = item
        if not _of_types(item, expected):
            item = plain_value(item)  # a numpy scalar: its exact Python value
            if item is given or not _of_types(item, expected):
                names = "/".join(t.__name__ for t in expected)
                raise errors.FieldTypeError(
                    f"expected {names}, got {type(given).__name__} {given!r}",
                    model=self.model, field=v.name, value=given,
                )
        if not _equals_itself(item) and not v.allow_nan:  # NaN
            raise errors.ValidationError(
                "NaN refused; pass allow_nan=True to tsmodel.value() to store it",
                model=self.model, field=v.name, value=given,
            )
        try:
            return v.codec.encode(item)
        except (ValueError, OverflowError, UnicodeError) as exc:
            cls = errors.FieldTypeError if isinstance(exc, TypeError) else errors.ValidationError
            raise cls(str(exc), model=self.model, field=v.name, value=given) from None


def _of_types(item: Any, expected: tuple[type, ...]) -> bool:
    """Whether ``item`` is of the ``expected`` types (a bool only where named)."""
    return isinstance(item, expected) and (bool in expected or not isinstance(item, bool))


def _equals_itself(item: Any) -> bool:
    """False for a NaN, a signalling ``Decimal`` NaN included (comparing one raises)."""
    try:
        return bool(item == item)
    except ArithmeticError:
        return False


def too_big(model: str, family: str, qualifier: bytes, size: int,
            field: str | None = None) -> errors.ValidationError:
    """The error for a cell value over the ~10 MB Bigtable advises."""
    return errors.ValidationError(
        f"a cell value of {size} bytes is over the ~10 MB Bigtable advises for one value "
        f"({family}:{qualifier!r}); split the event",
        model=model, field=field, value=size,
    )
