"""The query face of a model: the `Model` base and `@model` with its query class methods.

``@ts.model`` is `tsmodel.declare.model.model` (the declaration, checked
once into a frozen spec) followed by the query class methods of `Model`
(``range``, ``latest``, ``current``...), given to the model class and its
rollup row classes when they do not derive from `Model`. Each is a thin
starter of a `QuerySet` on the default connection, or, with ``using``,
of a `QuerySet` or an `AsyncQuerySet` on the connection given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar, overload

import attrs
from typing_extensions import Self, Unpack, dataclass_transform

from tsmodel import errors
from tsmodel.declare import model as _declare
from tsmodel.declare.fields import key, timestamp, value, version
from tsmodel.declare.options import ModelArguments
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.plan.reads import LatestResult
from tsmodel.run.async_connection import AsyncConnection, AsyncQuerySet
from tsmodel.run.connection import Connection, QuerySet, bind

__all__ = ["Model", "model", "QUERY_METHODS"]

T = TypeVar("T", bound=type)

#: The query class methods of `Model` that `model` gives every model class.
QUERY_METHODS = ("range", "latest", "latest_many", "current", "snapshot", "using", "rollup")


@dataclass_transform(kw_only_default=True,
                     field_specifiers=(attrs.field, key, timestamp, value, version))
def model(cls: None = None, /, **options: Unpack[ModelArguments]) -> Callable[[T], T]:
    """Declare a model class: its table, row key, timestamp and value columns.

    Fields are declared in the class body with `key()`, `timestamp()`
    and `value()`; `constant()` and `salt()` add row key segments.
    Key segments come in declaration order; the timestamp must be the last.
    The class gets the query class methods of `Model` (``range``,
    ``latest``...); derive it from `Model` for type checkers to know them.

    Args:
        **options: the model's options, keyword arguments named, typed and
            described (with their defaults) once, by `tsmodel.ModelOptions`;
            ``table=`` and ``family=`` are required.

    Raises:
        DeclarationError: the declaration cannot work; the message says why
            and how to fix it. ``@ts.model`` without arguments is refused: a
            model needs at least ``@ts.model(table="...", family="...")``.
    """
    declare = _declare.model(cls, **options)

    def wrap(klass: T) -> T:
        built = declare(klass)
        _give_query_methods(built)
        for rollup in spec_of(built).rollups:
            _give_query_methods(rollup.model)
        return built

    return wrap


def _give_query_methods(cls: type) -> None:
    """Give a model class the query class methods of `Model`, unless it derives from it."""
    if issubclass(cls, Model):
        return
    for method in QUERY_METHODS:
        setattr(cls, method, classmethod(getattr(Model, method).__func__))


class Model:
    """Optional base class: gives type checkers the query class methods.

    `tsmodel.model` adds the same methods to classes that do not derive from it.
    """

    __slots__ = ()
    __tsmodel__: ClassVar[ModelSpec]
    DoesNotExist: ClassVar[type[errors.DoesNotExist]]

    @overload
    @classmethod
    def using(cls, connection: AsyncConnection) -> AsyncQuerySet[Self]: ...

    @overload
    @classmethod
    def using(cls, connection: Connection) -> QuerySet[Self]: ...

    @classmethod
    def using(cls, connection: Connection | AsyncConnection,
              ) -> QuerySet[Self] | AsyncQuerySet[Self]:
        """Queries of this model on ``connection`` instead of the default one.

        ``ServerMetric.using(db).latest(hostname=...)``; on an
        `AsyncConnection`, an `AsyncQuerySet`:
        ``await ServerMetric.using(adb).latest(hostname=...)``.
        """
        return bind(cls, connection)

    @classmethod
    def range(
        cls, start: datetime, end: datetime, *, allow_scan: bool = False, **key_fields: Any,
    ) -> QuerySet[Self]:
        """Events with ``start <= timestamp < end``; see `tsmodel.QuerySet.range()`."""
        return QuerySet(cls).range(start, end, allow_scan=allow_scan, **key_fields)

    @classmethod
    def latest(cls, *, as_of: datetime | None = None, **key_fields: Any) -> Self:
        """The newest event of one entity (at or before ``as_of``); see
        `tsmodel.QuerySet.latest()`."""
        return QuerySet(cls).latest(as_of=as_of, **key_fields)

    @classmethod
    def latest_many(cls, keys: Iterable[Mapping[str, Any] | tuple[Any, ...]], *,
                    as_of: datetime | None = None) -> LatestResult[Self]:
        """The newest event of each of many entities (at or before ``as_of``); see
        `tsmodel.QuerySet.latest_many()`."""
        return QuerySet(cls).latest_many(keys, as_of=as_of)

    @classmethod
    def snapshot(cls, period: datetime, **key_prefix: Any) -> QuerySet[Self]:
        """Every event of one period, from its snapshot table; see `QuerySet.snapshot()`."""
        return QuerySet(cls).snapshot(period, **key_prefix)

    @classmethod
    def rollup(cls, every: str | timedelta) -> QuerySet[Any]:
        """Queries of the model's rollup table of bucket size ``every``; see
        `tsmodel.QuerySet.rollup()`."""
        return QuerySet(cls).rollup(every)

    @classmethod
    def current(cls, *, allow_scan: bool = False, **key_prefix: Any) -> QuerySet[Self]:
        """The newest event of every entity (or of a key prefix), from the current table."""
        return QuerySet(cls).current(allow_scan=allow_scan, **key_prefix)

