"""``qs.resample(every)``: a range's aggregates per entity and bucket, lazily.

The plan (`tsmodel.plan.rollups.compile_resample()`) picks the source:
a rollup table that covers the range, else the raw events; both are folded
by the same `Accumulator` into
`Window`s. The sync and async forms run the
same plan, each with its connection's stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from tsmodel import errors
from tsmodel.declare.rollups import label_of, parse_every
from tsmodel.ground.base import Features
from tsmodel.io import pandas as _pandas
from tsmodel.io import polars as _polars
from tsmodel.io import require
from tsmodel.io.arrow import window_table
from tsmodel.plan.rollups import ResamplePlan, Window, Windows, compile_resample
from tsmodel.run.fanout import astream, stream

__all__ = ["Resample", "every_of"]


def every_of(spec_name: str, every: object) -> int:
    """A step (``"1h"``, a ``timedelta``) in microseconds.

    Raises:
        QueryError: not a positive whole number of milliseconds.
    """
    try:
        return parse_every(every, spec_name)[0]
    except errors.DeclarationError as exc:
        raise errors.QueryError(str(exc)) from None


class Resample:
    """A resample of a range query: iterate it (or ``async for`` on an async
    connection) for its `Window`s, by entity
    then time; `explain()` shows whether a rollup or the raw events serve it.

    Built by `tsmodel.QuerySet.resample()`; nothing is read until iterated.
    """

    def __init__(self, query: Any, every: int, fields: str | Sequence[str] | None) -> None:
        #: The range query (a `QuerySet` or an `AsyncQuerySet`; not imported: they
        #: import this).
        self.query = query
        self.every = every
        #: The fields asked for: a string is one field's name, as in ``ts.rollup()``.
        self.fields = None if fields is None else (fields,) if isinstance(fields, str) \
            else tuple(fields)
        self.explain()  # fail fast, no I/O

    def explain(self, features: Features | None = None) -> ResamplePlan:
        """The plan: its source (``plan.source``: ``"rollup"`` or ``"raw"``) and read."""
        q = self.query
        if features is None:
            features = q._bound_features()
        return compile_resample(q._spec, q._state, self.every, self.fields, features)

    def _model(self, plan: ResamplePlan) -> type:
        return self.query.model if plan.rollup is None else plan.rollup.model

    def __iter__(self) -> Iterator[Window]:
        return iter(self.all())

    def all(self) -> list[Window]:
        """Every window (reads the rollup rows or the raw events of the range)."""
        conn = self.query._conn()
        plan = self.explain(conn.features)
        fold = Windows(self.query._spec, plan)
        item: Any
        for item in stream(plan.read, conn, self._model(plan)):
            fold.feed(item)
        return fold.finish()

    def __aiter__(self) -> AsyncIterator[Window]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[Window]:
        for window in await self.aall():
            yield window

    async def aall(self) -> list[Window]:
        """`all()` on an `AsyncConnection`."""
        conn = self.query._connection
        if not self.query._runs_async:
            raise errors.ArgumentTypeError(
                f"{self.query!r} does not run on an AsyncConnection: iterate the "
                "resample with `for`, or bind the query with Model.using(adb)")
        plan = self.explain(conn.features)
        fold = Windows(self.query._spec, plan)
        item: Any
        async for item in astream(plan.read, conn, self._model(plan)):
            fold.feed(item)
        return fold.finish()

    # -- columnar results -----------------------------------------------------------

    def to_arrow(self) -> Any:
        """The windows as a ``pyarrow.Table``, a row per window, by entity then time.

        Columns: the key fields, ``start``, ``end``, ``count``, then per
        field ``f``: ``f_count``, ``f_sum``, ``f_min``, ``f_max``, ``f_last``
        and ``f_mean`` (see `tsmodel.io.arrow.window_table`). On an
        `AsyncConnection` it returns an awaitable: ``await qs.resample("1h").to_arrow()``.

        Raises:
            ExtraNotInstalledError: pyarrow is not installed.
        """
        require("pyarrow", "arrow", "to_arrow()")
        return self._columnar("to_arrow()", lambda table: table)

    def to_pandas(self) -> Any:
        """The windows as a ``pandas.DataFrame`` (the columns of `to_arrow()`).

        Nullable dtypes (``Int64`` counts and int aggregates), ``category``
        for string key fields, ``datetime64[<unit>, UTC]`` for ``start`` and
        ``end``. On an `AsyncConnection`, await it.

        Raises:
            ExtraNotInstalledError: pandas or pyarrow is not installed.
        """
        _pandas.require_all("to_pandas()")
        return self._columnar("to_pandas()", _pandas.frame_of)

    def to_polars(self) -> Any:
        """The windows as a ``polars.DataFrame`` (the columns of `to_arrow()`).
        On an `AsyncConnection`, await it.

        Raises:
            ExtraNotInstalledError: polars or pyarrow is not installed.
        """
        _polars.require_all("to_polars()")
        return self._columnar("to_polars()", _polars.frame_of)

    def _columnar(self, what: str, convert: Callable[[Any], Any]) -> Any:
        if self.query._runs_async:
            return self._acolumnar(what, convert)
        return convert(self._table(self.all(), what))

    async def _acolumnar(self, what: str, convert: Callable[[Any], Any]) -> Any:
        return convert(self._table(await self.aall(), what))

    def _table(self, windows: list[Window], what: str) -> Any:
        return window_table(self.query._spec, self.explain().fields, self.every, windows, what)

    def __repr__(self) -> str:
        return f"<Resample every {label_of(self.every)} of {self.query!r}>"
