"""The steps of a job, and the two loops that carry them out.

A job (`tsmodel.jobs.repair`, `tsmodel.jobs.snapshots`) is written
once, as a generator: it yields each call it needs (the step classes here)
and receives the answer, like `tsmodel.plan.deletes.delete_steps()` and
`tsmodel.plan.schema.plan_steps()`. It does no I/O itself.
`run_job()` answers with blocking calls on a
`Connection`; `run_job_async()` awaits the
same calls on an `AsyncConnection`,
the writes of one `Send` concurrently. The loops know nothing of
what a job does: the order of the calls, what is read and what is written
are the job's.

Large reads stream: a job asks for the rows of a `Scan` a chunk at
a time (`Rows`), so it holds one chunk and one write batch, whatever
the table's size.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from typing import Any, TypeVar

import attrs

from tsmodel import errors
from tsmodel.ground.base import MutationOutcome, ReadRequest, Row
from tsmodel.plan.calls import BackendCall, ListTables
from tsmodel.plan.results import TableWrite, WriteResult
from tsmodel.run.async_connection import AsyncConnection
from tsmodel.run.connection import Connection, QuerySet

__all__ = ["Read", "Scan", "Rows", "Send", "Save", "First", "BackendCall", "Step",
           "JobSteps", "require_tables", "run_job", "run_job_async"]

_R = TypeVar("_R")


@attrs.frozen
class Read:
    """Read one request whole; answered with its rows, a list.

    For small reads (a few row keys); a failed read raises out of the job.
    """

    request: ReadRequest


@attrs.frozen(eq=False)
class Scan:
    """A streamed read: ask for its rows with `Rows`.

    A value without I/O; the executor starts the read at the first
    `Rows` of it and ends it when the job ends. Each ``Scan``
    object is its own read (compared by identity).
    """

    request: ReadRequest


@attrs.frozen
class Rows:
    """The next rows of a scan; answered with a list, empty at its end.

    At least one row (unless the scan is over), then more until they hold
    ``cells`` cells: a chunk is bounded by cells, not rows, since a bucket
    row may hold thousands of events.
    """

    scan: Scan
    cells: int


@attrs.frozen
class Send:
    """Send table writes; answered with their outcomes, one list per write.

    The writes are independent (different tables, or rows that do not depend
    on each other): an executor may send them concurrently. A call refused
    as a whole fails each of its rows (``Connection.send``).
    """

    writes: tuple[TableWrite, ...]


@attrs.frozen
class Save:
    """Save entities as ``save_all(entities, raise_on_failure=False)`` does;
    answered with the `WriteResult`."""

    entities: tuple[Any, ...]


@attrs.frozen
class First:
    """Run a query on the executor's connection; answered with its first
    instance, or ``None``. The query is built unbound (``QuerySet(model)...``)."""

    query: QuerySet[Any]


#: What a job yields; `BackendCall` makes one
#: call of the backend itself (``create_table``, ``mutate_rows``).
Step = Read | Scan | Rows | Send | Save | First | BackendCall
#: A job: yields steps, receives their answers, returns its report.
JobSteps = Generator[Step, Any, _R]


def require_tables(model: str, tables: Sequence[str], *,
                   where: str | None = None) -> JobSteps[None]:
    """Check, before a job reads or writes anything, that the tables it reads exist.

    A job creates only the tables it writes (a snapshot, rollup or
    companion table, a migration's target): a main table missing means the
    wrong store or a model whose tables were never created, and an empty one
    made in passing would hide it.

    Args:
        model: the model's name, for the message.
        tables: the tables the job reads.
        where: the store's URL, for the message.

    Raises:
        TableNotFoundError: a table does not exist.
    """
    existing = set((yield ListTables()))
    missing = [t for t in tables if t not in existing]
    if missing:
        at = f" at {where}" if where else ""
        names = ", ".join(map(repr, missing))
        one = len(missing) == 1
        what = f"table {names} does" if one else f"tables {names} do"
        raise errors.TableNotFoundError(
            f"{model}: {what} not exist{at}, and the job reads {'it' if one else 'them'}: "
            "check the URL, or create the model's tables first (conn.create_tables(Model), "
            "'tsmodel schema apply'); nothing was written")


# -- blocking --------------------------------------------------------------------------


def run_job(steps: JobSteps[_R], conn: Connection) -> _R:
    """Carry out a job's steps with blocking calls on ``conn``; return its result.

    Raises:
        whatever the job raises, and a `BackendError` of a
        read (a failed write is an outcome, handed to the job).
    """
    scans: dict[Scan, Iterator[Row]] = {}
    try:
        step = next(steps)
        while True:
            step = steps.send(_answer(conn, step, scans))
    except StopIteration as done:
        result: _R = done.value
        return result
    finally:
        steps.close()
        for rows in scans.values():
            close = getattr(rows, "close", None)
            if close is not None:
                close()


def _answer(conn: Connection, step: Step, scans: dict[Scan, Iterator[Row]]) -> Any:
    if isinstance(step, Rows):
        rows = scans.get(step.scan)
        if rows is None:
            rows = scans[step.scan] = iter(conn.read(step.scan.request))
        return _take(rows, step.cells)
    if isinstance(step, Send):
        return [conn.send(write) for write in step.writes]
    if isinstance(step, Read):
        return list(conn.read(step.request))
    if isinstance(step, Save):
        return conn.save_all(step.entities, raise_on_failure=False, progress=False)
    if isinstance(step, First):
        return step.query.using(conn).first()
    if isinstance(step, BackendCall):
        return step.on(conn.backend)
    raise TypeError(f"not a job step: {step!r}")


def _take(rows: Iterator[Row], cells: int) -> list[Row]:
    out: list[Row] = []
    held = 0
    for row in rows:
        out.append(row)
        held += len(row.cells)
        if held >= cells:
            break
    return out


# -- asyncio ---------------------------------------------------------------------------


async def run_job_async(steps: JobSteps[_R], conn: AsyncConnection) -> _R:
    """`run_job()` on an event loop: the same steps, awaited.

    Raises:
        the same as `run_job()`.
    """
    scans: dict[Scan, AsyncIterator[Row]] = {}
    try:
        step = next(steps)
        while True:
            step = steps.send(await _answer_async(conn, step, scans))
    except StopIteration as done:
        result: _R = done.value
        return result
    finally:
        steps.close()
        for rows in scans.values():
            aclose = getattr(rows, "aclose", None)  # async generators: end the read now
            if aclose is not None:
                await aclose()


async def _answer_async(conn: AsyncConnection, step: Step,
                        scans: dict[Scan, AsyncIterator[Row]]) -> Any:
    if isinstance(step, Rows):
        rows = scans.get(step.scan)
        if rows is None:
            rows = scans[step.scan] = aiter(conn.read(step.scan.request))
        return await _take_async(rows, step.cells)
    if isinstance(step, Send):
        outcomes: list[list[MutationOutcome]] = await asyncio.gather(
            *(conn.send(write) for write in step.writes))
        return outcomes
    if isinstance(step, Read):
        return await conn.read_all(step.request)
    if isinstance(step, Save):
        result: WriteResult = await conn.save_all(step.entities, raise_on_failure=False,
                                                  progress=False)
        return result
    if isinstance(step, First):
        return await step.query.using(conn).first()
    if isinstance(step, BackendCall):
        return await step.on(conn.backend)
    raise TypeError(f"not a job step: {step!r}")


async def _take_async(rows: AsyncIterator[Row], cells: int) -> list[Row]:
    out: list[Row] = []
    held = 0
    while True:
        try:
            row = await anext(rows)
        except StopAsyncIteration:
            break
        out.append(row)
        held += len(row.cells)
        if held >= cells:
            break
    return out
