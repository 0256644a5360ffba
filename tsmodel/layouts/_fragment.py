"""A function's source being rendered: its lines and the objects they name.

The codec generators (`tsmodel.layouts.render_write`) build one `Fragment`
per generated function; each `Layout` adds the lines that lay an event's
cells out (`Layout.render_writer`). Objects the lines use (codecs, column
names, helper functions) are bound once under fresh names in the function's
globals, so the source shows their names and never their ``repr``.
"""

from __future__ import annotations

import keyword
import re
from typing import Any

__all__ = ["Fragment"]

_NOT_IDENTIFIER = re.compile(r"\W")


class Fragment:
    """The lines of one generated function and the namespace they see.

    Args:
        indent: the indentation of the function body (four spaces).
    """

    def __init__(self, indent: str = "    ") -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {}
        self._taken: set[str] = set()
        self._bound: dict[int, str] = {}
        self._indent = indent

    def _fresh(self, hint: str) -> str:
        base = _NOT_IDENTIFIER.sub("_", hint) or "x"
        if base[0].isdigit() or keyword.iskeyword(base):
            base = "_" + base
        name, n = base, 1
        while name in self._taken or name in self.namespace:
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        return name

    def bind(self, obj: Any, hint: str) -> str:
        """The global name under which the function sees ``obj`` (one name per object)."""
        known = self._bound.get(id(obj))
        if known is not None and self.namespace[known] is obj:
            return known
        name = self._fresh(hint if hint[:1].isupper() or hint == "new" else hint.upper())
        self.namespace[name] = obj
        self._bound[id(obj)] = name
        return name

    def build(self, cls: Any, *args: str) -> str:
        """The expression of a named tuple ``cls(*args)``, built by ``tuple.__new__``.

        The same tuple, without the Python-level ``__new__`` a named tuple
        class defines: ``args`` must be every field's expression, in order.
        """
        fields = getattr(cls, "_fields", None)
        if fields is None or len(fields) != len(args):
            raise TypeError(f"{cls.__name__} takes {fields}, got {len(args)} expressions")
        new = self.bind(tuple.__new__, "new")
        items = ", ".join(args) + ("," if len(args) == 1 else "")
        return f"{new}({self.bind(cls, cls.__name__)}, ({items}))"

    def local(self, hint: str) -> str:
        """A fresh local variable name."""
        return self._fresh(hint.lower())

    def emit(self, line: str, depth: int = 0) -> None:
        """Add ``line`` to the body, ``depth`` levels below the body's indentation."""
        self.lines.append(self._indent * (depth + 1) + line)

    def literal(self, value: str | bytes | int | None) -> str:
        """A literal for a plain value (str, bytes, int, None): shown as it is."""
        if value is None or type(value) in (str, bytes, int):
            return repr(value)
        raise TypeError(f"not a plain literal: {value!r}")

    def source(self, header: str) -> str:
        """The function's whole source: ``header`` (``def f(x):``) and the body."""
        return "\n".join([header, *self.lines]) + "\n"
