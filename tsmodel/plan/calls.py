"""The backend calls that step-wise planners yield, as typed values.

Planners written as generators (the schema plan and apply, the jobs) yield
one of these when they need the backend, and receive its answer. Each call
knows the one backend method it stands for (`on()`), so that a blocking
driver (``answer = call.on(backend)``) and an event-loop driver
(``answer = await call.on(backend)``: an `AsyncBackend`'s methods are
coroutines of the same names) make it alike, and nothing dispatches on a
method's name. Rows are read through the drivers' own read steps, not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from tsmodel.ground.base import RowMutation, TableSpec

__all__ = ["ListTables", "DescribeTable", "CreateTable", "DeleteTable", "DeleteFamily",
           "MutateRows", "BackendCall"]


@attrs.frozen
class ListTables:
    """``backend.list_tables()``: the names of the tables (a ``list[str]``)."""

    def on(self, backend: Any) -> Any:
        return backend.list_tables()


@attrs.frozen
class DescribeTable:
    """``backend.describe_table(name)``: the table's `TableSpec`."""

    name: str

    def on(self, backend: Any) -> Any:
        return backend.describe_table(self.name)


@attrs.frozen
class CreateTable:
    """``backend.create_table(spec)``: create the table, or add its missing families
    and set the GC rules of those named."""

    spec: TableSpec

    def on(self, backend: Any) -> Any:
        return backend.create_table(self.spec)


@attrs.frozen
class DeleteTable:
    """``backend.delete_table(name)``."""

    name: str

    def on(self, backend: Any) -> Any:
        return backend.delete_table(self.name)


@attrs.frozen
class DeleteFamily:
    """``backend.delete_family(table, family)``."""

    table: str
    family: str

    def on(self, backend: Any) -> Any:
        return backend.delete_family(self.table, self.family)


@attrs.frozen
class MutateRows:
    """``backend.mutate_rows(table, entries)``: one `MutationOutcome` per entry."""

    table: str
    entries: Sequence[RowMutation]

    def on(self, backend: Any) -> Any:
        return backend.mutate_rows(self.table, self.entries)


#: A call a step-wise planner yields; `on(backend)` makes it.
BackendCall = ListTables | DescribeTable | CreateTable | DeleteTable | DeleteFamily | MutateRows
