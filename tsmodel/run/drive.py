"""The two drivers of the step protocol (`tsmodel.plan.calls`): blocking and asyncio.

Every operation that needs more than one backend call is planned as steps:
saves and deletes (`SaveSchedule`, `delete_steps()`), schema plans and
their application, the jobs (repair, snapshots, backfills, migrations,
rollup rebuilds), ``latest_many``, the chunks of a frame save (`chunk_saves()`).
`drive()` carries the steps out with
blocking calls on a `Connection`, `adrive()` awaits them on an
`AsyncConnection`. What each step means on a connection is said once
(`_call()`: a value on the first, an awaitable on the second); the drivers
only hand the answers back, and make the steps handed out together
concurrently where the backend's calls overlap (threads, or tasks).

However a driver ends (done, an error, cancelled), it leaves no call
running behind it, ends the planner (``close()``) and closes the scans it
opened.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, TypeVar

from tsmodel import errors
from tsmodel.ground.base import Row
from tsmodel.plan.calls import (
    First,
    FirstOf,
    Read,
    Rows,
    Save,
    Scan,
    Schedule,
    Steps,
    Write,
    schedule_of,
)
from tsmodel.plan.results import FrameResult, WriteResult
from tsmodel.run.fanout import AStreamed, Streamed, astream, stream
from tsmodel.run.frame_steps import ChunkSave

__all__ = ["drive", "adrive", "chunk_saves", "first", "afirst"]

_R = TypeVar("_R")
M = TypeVar("M")


def _call(step: Any, conn: Any, op: Any) -> Any:
    """The connection's call that answers ``step`` (not `Rows`, `FirstOf`): its answer on a
    `Connection`, an awaitable of it on an `AsyncConnection` (their methods
    have the same names). ``op``: the operation the calls belong to (a
    save's, a delete's); ``None``: each call is an operation of its own."""
    kind = type(step)
    if kind is Write:
        return conn.send(step.write) if op is None else conn._send(step.write, op)
    if kind is Read:
        return conn._read_whole(step.request, op, step.failures)
    if kind is Save:
        return conn.save_all(step.entities, raise_on_failure=False, progress=step.progress,
                             accept_expired=step.accept_expired,
                             validate_first=step.validate_first)
    if kind is First:
        return step.query.using(conn).first()
    return step.on(conn.backend)  # a BackendCall


def drive(steps: Steps[_R] | Schedule[_R], conn: Any, op: Any = None) -> _R:
    """Carry out ``steps`` with blocking calls on the `Connection` ``conn``; their result.

    Raises:
        BackendError: a read the planner does not take as an answer (a failed
            write is an outcome); and whatever the planner raises.
    """
    schedule = schedule_of(steps)
    scans: dict[Scan, Iterator[Row]] = {}
    out: dict[Future[Any], Any] = {}
    try:
        while not schedule.done:
            handed = schedule.ready()
            if not out and (len(handed) == 1 or not conn.features.concurrent_calls):
                for ticket, step in handed:  # nothing to overlap: no thread hop
                    schedule.answer(ticket, _answer(step, conn, op, scans))
                continue
            pool = conn._workers()
            for ticket, step in handed:
                out[pool.submit(_answer, step, conn, op, scans)] = ticket
            finished, _ = wait(out, return_when=FIRST_COMPLETED)
            for future in finished:
                schedule.answer(out.pop(future), future.result())
        return schedule.result()
    finally:
        for future in out:
            future.cancel()
        wait(out)
        schedule.close()
        for rows in scans.values():
            getattr(rows, "close", lambda: None)()


def _answer(step: Any, conn: Any, op: Any, scans: dict[Scan, Iterator[Row]]) -> Any:
    if type(step) is FirstOf:
        return first(stream(step.plan, conn, step.model))
    if type(step) is Save and step.refusals:
        try:
            return _call(step, conn, op)
        except errors.ValidationError as exc:
            return exc
    if type(step) is not Rows:
        return _call(step, conn, op)
    rows = scans.get(step.scan)
    if rows is None:
        rows = scans[step.scan] = iter(conn.read(step.scan.request))
    out: list[Row] = []
    held = 0
    for row in rows:
        out.append(row)
        held += len(row.cells)
        if held >= step.cells:
            break
    return out


async def adrive(steps: Steps[_R] | Schedule[_R], conn: Any, op: Any = None) -> _R:
    """`drive()` on an event loop, on the `AsyncConnection` ``conn``: the steps
    handed out together go as tasks.

    Raises:
        BackendError: as for `drive()`; and whatever the planner raises.
    """
    schedule = schedule_of(steps)
    scans: dict[Scan, AsyncIterator[Row]] = {}
    out: dict[asyncio.Future[Any], Any] = {}
    try:
        while not schedule.done:
            handed = schedule.ready()
            if len(handed) == 1 and not out:  # nothing to overlap: no task
                schedule.answer(handed[0][0], await _aanswer(handed[0][1], conn, op, scans))
                continue
            out.update((asyncio.ensure_future(_aanswer(step, conn, op, scans)), ticket)
                       for ticket, step in handed)
            done, _ = await asyncio.wait(out, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                schedule.answer(out.pop(task), task.result())
        return schedule.result()
    finally:
        for task in out:  # cancelled or failed: leave no call running behind
            task.cancel()
        await asyncio.gather(*out, return_exceptions=True)
        schedule.close()
        for arows in scans.values():
            aclose = getattr(arows, "aclose", None)  # async generators: end the read now
            if aclose is not None:
                await aclose()


async def _aanswer(step: Any, conn: Any, op: Any, scans: dict[Scan, AsyncIterator[Row]]) -> Any:
    if type(step) is FirstOf:
        return await afirst(astream(step.plan, conn, step.model))
    if type(step) is Save and step.refusals:
        try:
            return await _call(step, conn, op)
        except errors.ValidationError as exc:
            return exc
    if type(step) is not Rows:
        return await _call(step, conn, op)
    rows = scans.get(step.scan)
    if rows is None:
        rows = scans[step.scan] = aiter(conn.read(step.scan.request))
    out: list[Row] = []
    held = 0
    async for row in rows:
        out.append(row)
        held += len(row.cells)
        if held >= step.cells:
            break
    return out


def chunk_saves(steps: Generator[ChunkSave, WriteResult, FrameResult],
                accept_expired: bool) -> Steps[FrameResult]:
    """The chunk saves of `frame_steps()` as `Save` steps: each chunk's ``save_all``
    (its ``ValidationError`` handed back to the frame's steps, which name the row)."""
    try:
        entities, hook, checked = next(steps)
        while True:
            done = yield Save(entities, progress=hook, accept_expired=accept_expired,
                              validate_first=checked, refusals=True)
            if isinstance(done, errors.ValidationError):
                entities, hook, checked = steps.throw(done)
            else:
                entities, hook, checked = steps.send(done)
    except StopIteration as stop:
        result: FrameResult = stop.value
        return result
    finally:
        steps.close()


def first(items: Streamed[M]) -> M | None:
    """The first of ``items``, or ``None``; the reads end now, not when collected."""
    try:
        return next(items, None)
    finally:
        items.close()


async def afirst(items: AStreamed[M]) -> M | None:
    """The first of ``items``, or ``None``; the reads end now, not when collected."""
    try:
        async for item in items:
            return item
        return None
    finally:
        await items.aclose()
