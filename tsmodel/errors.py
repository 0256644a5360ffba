"""The exception hierarchy of tsmodel.

Every exception tsmodel raises derives from `TsModelError`. Each
subclass also derives from the builtin that matches its meaning, so code that
catches ``ValueError`` or ``TypeError`` keeps working.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

__all__ = [
    "TsModelError",
    "DeclarationError",
    "ValidationError",
    "FieldTypeError",
    "KeyEncodingError",
    "KeyTypeError",
    "KeyDecodingError",
    "KeyDecodingTypeError",
    "CellDecodingError",
    "RetentionError",
    "QueryError",
    "ScanRefusedError",
    "InvalidCursorError",
    "DoesNotExist",
    "BackendError",
    "TableNotFoundError",
    "BackendUnreachableError",
    "ReadInterruptedError",
    "SaveError",
    "ConfigurationError",
    "EmulatorNotFoundError",
    "ExtraNotInstalledError",
    "ArgumentError",
    "ArgumentTypeError",
]


class TsModelError(Exception):
    """Base class of every error raised by tsmodel."""


class DeclarationError(TsModelError, TypeError):
    """A model class is declared in a way that cannot work.

    Raised when the class is defined, never on first use.
    """


class ValidationError(TsModelError, ValueError):
    """A value cannot be stored as declared.

    Attributes:
        model: the model class name, or ``None``.
        field: the field name, or ``None``.
        value: the offending value.
        result: raised by a streamed ``save_all(..., validate_first=False)``,
            the `WriteResult` of the entities
            before the batch that held the bad one (they were sent); by a
            ``save_frame(..., validate_first=False)``, the `FrameResult` of the
            chunks before the bad row's; else ``None``.
        row: raised by ``save_frame()``, the index of the bad row in the frame
            (from 0); else ``None``.
    """

    result: Any = None
    row: int | None = None

    def __init__(
        self, message: str, *, model: str | None = None, field: str | None = None,
        value: Any = None,
    ) -> None:
        prefix = ""
        if model and field:
            prefix = f"{model}.{field}: "
        elif model:
            prefix = f"{model}: "
        super().__init__(prefix + message)
        self.model = model
        self.field = field
        self.value = value


class FieldTypeError(ValidationError, TypeError):
    """A value has the wrong Python type for its field."""


class KeyEncodingError(ValidationError):
    """A key field value cannot be encoded into a row key segment."""


def key_error(exc: ValueError, *, model: str, field: str | None, value: object) -> KeyEncodingError:
    """The tsmodel error for a segment encoder's refusal (type errors stay TypeErrors)."""
    cls = KeyTypeError if isinstance(exc, TypeError) else KeyEncodingError
    return cls(str(exc), model=model, field=field, value=value)


class KeyTypeError(KeyEncodingError, FieldTypeError):
    """A key field value has the wrong Python type."""


class RetentionError(ValidationError):
    """Events are older than a family's max age: GC would delete them once written.

    Attributes:
        problems: one `RetentionProblem` per event.
    """

    def __init__(self, message: str, problems: Sequence[Any]) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class KeyDecodingError(TsModelError, ValueError):
    """A row key does not match the model's key layout."""


class KeyDecodingTypeError(KeyDecodingError, TypeError):
    """A row key to decode is neither ``bytes`` nor ``str``."""


class CellDecodingError(TsModelError, ValueError):
    """A stored cell does not hold what its field declares: corrupt or foreign data.

    The codec that refuses the bytes says what is wrong; the table codec that
    read the cell fills in where it is (`locate()`). The message shows
    every part that is known.

    Attributes:
        reason: what is wrong with the bytes.
        data: the offending bytes, or ``None``.
        model: the model class name, or ``None``.
        field: the value field, or ``None``.
        table: the table, or ``None``.
        row_key: the row key, or ``None``.
        column: the column as ``family:qualifier``, or ``None``.
    """

    def __init__(
        self, reason: str, *, data: bytes | None = None, model: str | None = None,
        field: str | None = None, table: str | None = None, row_key: bytes | None = None,
        column: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.data = data
        self.model = model
        self.field = field
        self.table = table
        self.row_key = row_key
        self.column = column

    def locate(
        self, *, model: str | None = None, field: str | None = None, table: str | None = None,
        row_key: bytes | None = None, column: str | None = None,
    ) -> CellDecodingError:
        """Fill in where the cell is (parts already known are kept); returns ``self``."""
        self.model = self.model or model
        self.field = self.field or field
        self.table = self.table or table
        self.row_key = self.row_key if self.row_key is not None else row_key
        self.column = self.column or column
        return self

    def __str__(self) -> str:
        who = ".".join(p for p in (self.model, self.field) if p)
        where = ", ".join(
            part for part in (
                f"table {self.table!r}" if self.table else "",
                f"row key {self.row_key!r}" if self.row_key is not None else "",
                f"column {self.column}" if self.column else "",
            ) if part)
        prefix = ": ".join(p for p in (who, where) if p)
        return f"{prefix}: {self.reason}" if prefix else self.reason


class QueryError(TsModelError, ValueError):
    """A query cannot be built as asked."""


class ScanRefusedError(QueryError):
    """The query cannot be served from a row-key prefix and would scan the table.

    Pass ``allow_scan=True`` to run it anyway. Each refusal is logged at
    DEBUG on the ``tsmodel.queries`` logger.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        logging.getLogger("tsmodel.queries").debug("scan refused: %s", message)


class InvalidCursorError(QueryError):
    """A cursor (a page token) cannot re-open this query.

    It is malformed, damaged, truncated or altered, signed with another
    secret (or not signed where a ``cursor_secret`` is set), or made by
    another query. The message says which.
    """


class DoesNotExist(TsModelError, LookupError):
    """No row matches a lookup. Each model class has its own subclass."""


class BackendError(TsModelError, RuntimeError):
    """The storage backend failed. ``__cause__`` holds the backend's exception."""


class TableNotFoundError(BackendError, LookupError):
    """A table does not exist on the backend."""


class BackendUnreachableError(BackendError, ConnectionError):
    """The backend cannot be reached: nothing listens at its address, or it does not answer.

    Attributes:
        address: where the backend was looked for (``"HOST:PORT"``).
        listening: ``False`` when no connection could be made (nothing listens
            there: a stopped emulator, a wrong port); ``True`` when one was
            made but no answer came within ``timeout``.
        timeout: the seconds waited.
    """

    def __init__(self, message: str, *, address: str = "", listening: bool = False,
                 timeout: float = 0.0) -> None:
        super().__init__(message)
        self.address = address
        self.listening = listening
        self.timeout = timeout


class ReadInterruptedError(BackendError):
    """A read broke off with an error that may pass, the backend's own retries spent.

    Backends raise it for transient failures (a stream cut with UNAVAILABLE,
    DEADLINE_EXCEEDED or ABORTED, a reset connection, a locked database);
    a QuerySet's iterator then re-opens the read after the last instance it
    handed out. When its attempts run out it raises this error again, with
    ``cursor`` set.

    Attributes:
        cursor: raised by a QuerySet's iterator: the token that re-opens the
            query after the last instance handed out
            (``qs.after(exc.cursor)``), or ``None`` (raised by a backend, or
            the query hands out no cursors).
    """

    cursor: str | None = None


class SaveError(TsModelError, RuntimeError):
    """Some entities were not written, or their outcome is unknown.

    Attributes:
        result: the `WriteResult` with one outcome per entity (from
            ``save_frame()``: the `FrameResult`, counts and the rows not written).
    """

    def __init__(self, message: str, result: Any) -> None:
        # ``result`` is a WriteResult (tsmodel.plan.results); typed Any because this
        # module is the lowest layer and imports nothing of tsmodel.
        super().__init__(message)
        self.result = result


class ConfigurationError(TsModelError, ValueError):
    """A connection URL or setting is not understood."""


class EmulatorNotFoundError(TsModelError, FileNotFoundError):
    """The Cloud Bigtable emulator (``cbtemulator``) is not installed."""


class ExtraNotInstalledError(TsModelError, ImportError):
    """A feature needs an optional dependency that is not installed.

    The message names the package and the extra that installs it, from the
    package index and from a checkout (`install_hint()`).
    """


class ArgumentError(TsModelError, ValueError):
    """A public call got an argument it cannot take, and no other class fits.

    ``qs.page(0)``, ``qs.limit(-1)``, ``save_frame(..., rows=0)``: the message
    names the call, the argument and the value.
    """


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong type (``ts.spec_of(object())``, ``qs.limit("a")``,
    ``qs[2:5]``), or an object used where it does not work (iterating an
    `AsyncQuerySet` with ``for``)."""


def install_hint(extra: str) -> str:
    """How to install tsmodel's ``extra``, from the package index and from a checkout."""
    return (f"pip install 'tsmodel-bigtable[{extra}]' (from a checkout of tsmodel: "
            f"pip install -e '.[{extra}]' --config-settings editable_mode=strict)")
