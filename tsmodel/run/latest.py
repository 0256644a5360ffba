"""The executors of a multi-entity lookup (`LatestManyPlan`).

The plan says what to read: the current rows of every entity by key, a few
hundred keys per request, or one newest-row plan per entity where the model
has no current-value table. These functions only make those reads, at most
``plan.concurrency`` at once (threads on a backend whose calls overlap,
tasks on an event loop), and hand the answers to ``plan.result``, which
decodes with the table's codec.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Protocol, TypeVar

from tsmodel.ground.base import ReadRequest, Row
from tsmodel.plan.reads import LatestManyPlan, LatestResult, ReadPlan

__all__ = ["run_latest_many", "arun_latest_many"]

M = TypeVar("M")
_T = TypeVar("_T")
_R = TypeVar("_R")


class Lookups(Protocol):
    """What `run_latest_many()` reads with: a `tsmodel.Connection`."""

    def read(self, request: ReadRequest) -> Iterator[Row]: ...

    def each(self, call: Callable[[_T], _R], items: Sequence[_T], most: int) -> list[_R]: ...


class AsyncLookups(Protocol):
    """What `arun_latest_many()` reads with: a `tsmodel.AsyncConnection`."""

    async def read_all(self, request: ReadRequest) -> list[Row]: ...


def run_latest_many(plan: LatestManyPlan, conn: Lookups, model: type[M],
                    newest: Callable[[ReadPlan], M | None]) -> LatestResult[M]:
    """Run ``plan`` on a sync connection.

    Args:
        plan: the lookup's plan.
        conn: the connection.
        model: the model class.
        newest: runs one entity's read plan and returns its first instance
            (the query layer's executor), for a model without a current table.
    """
    if not plan.current:
        return plan.result(model, newest=conn.each(newest, plan.entities, plan.concurrency))

    def read(request: ReadRequest) -> list[Row]:
        return list(conn.read(request))

    return plan.result(model, rows=conn.each(read, plan.requests, plan.concurrency))


async def arun_latest_many(plan: LatestManyPlan, conn: AsyncLookups, model: type[M],
                           newest: Callable[[ReadPlan], Awaitable[M | None]],
                           ) -> LatestResult[M]:
    """Run ``plan`` on an event loop: `run_latest_many()`'s reads as tasks."""
    if not plan.current:
        return plan.result(model, newest=await _aeach(newest, plan.entities, plan.concurrency))
    return plan.result(model, rows=await _aeach(conn.read_all, plan.requests, plan.concurrency))


async def _aeach(call: Callable[[_T], Awaitable[_R]], items: Sequence[_T], most: int) -> list[_R]:
    """``await call(item)`` of every item, in order, at most ``most`` at once.

    A failure cancels the calls still running before it propagates."""
    gate = asyncio.Semaphore(most)

    async def one(item: _T) -> _R:
        async with gate:
            return await call(item)

    tasks = [asyncio.ensure_future(one(item)) for item in items]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()  # a no-op on the finished ones
        await asyncio.gather(*tasks, return_exceptions=True)
