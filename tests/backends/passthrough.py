"""Backends that hand every call to another: tests subclass them and override what they watch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

from tsmodel.backends.base import (
    AsyncBackend,
    Backend,
    KeySample,
    MutationOutcome,
    ReadRequest,
    Row,
    RowMutation,
    TableSpec,
)


class PassThrough:
    """A :class:`Backend` over ``inner``; closing it leaves ``inner`` open (the session's)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.features = inner.features

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        return self.inner.read_rows(request)

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        return self.inner.mutate_rows(table, entries)

    def create_table(self, spec: TableSpec) -> None:
        self.inner.create_table(spec)

    def delete_table(self, name: str) -> None:
        self.inner.delete_table(name)

    def delete_family(self, table: str, family: str) -> None:
        self.inner.delete_family(table, family)

    def list_tables(self) -> list[str]:
        return self.inner.list_tables()

    def describe_table(self, name: str) -> TableSpec:
        return self.inner.describe_table(name)

    def sample_row_keys(self, table: str) -> list[KeySample]:
        return self.inner.sample_row_keys(table)

    def close(self) -> None:
        pass


class AsyncPassThrough:
    """An :class:`AsyncBackend` over ``inner``; closing it leaves ``inner`` open."""

    def __init__(self, inner: AsyncBackend) -> None:
        self.inner = inner
        self.features = inner.features

    def read_rows(self, request: ReadRequest) -> AsyncIterator[Row]:
        return self.inner.read_rows(request)

    async def mutate_rows(self, table: str,
                          entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        return await self.inner.mutate_rows(table, entries)

    async def create_table(self, spec: TableSpec) -> None:
        await self.inner.create_table(spec)

    async def delete_table(self, name: str) -> None:
        await self.inner.delete_table(name)

    async def delete_family(self, table: str, family: str) -> None:
        await self.inner.delete_family(table, family)

    async def list_tables(self) -> list[str]:
        return await self.inner.list_tables()

    async def describe_table(self, name: str) -> TableSpec:
        return await self.inner.describe_table(name)

    async def close(self) -> None:
        pass
