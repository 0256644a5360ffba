"""The steps of a job, and the tables it needs.

A job (`tsmodel.jobs.repair`, `tsmodel.jobs.snapshots`) is written
once, as a generator: it yields each step it needs (the step protocol of
`tsmodel.plan.calls`: `Read` a request whole, `Rows` of a streamed `Scan` a
chunk at a time, `Send` table writes, `Save` entities, `First` of a query, a
backend call) and receives the answer, like `tsmodel.plan.deletes.delete_steps()`
and `tsmodel.plan.schema.plan_steps()`. It does no I/O itself. The drivers of
`tsmodel.run.drive` carry it out: ``drive(job, conn)`` with blocking calls on a
`Connection`, ``await adrive(job, conn)`` on an `AsyncConnection`, the writes
of one `Send` concurrently where the backend's calls overlap. They know
nothing of what a job does: the order of the steps, what is read and what is
written are the job's.

Large reads stream: a job asks for the rows of a `Scan` a chunk at
a time (`Rows`), so it holds one chunk and one write batch, whatever
the table's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from tsmodel import errors
from tsmodel.plan.calls import (
    BackendCall,
    First,
    ListTables,
    Read,
    Rows,
    Save,
    Scan,
    Send,
    Step,
    Steps,
)

__all__ = ["Read", "Scan", "Rows", "Send", "Save", "First", "BackendCall", "Step",
           "JobSteps", "require_tables"]

_R = TypeVar("_R")

#: A job: yields steps, receives their answers, returns its report.
JobSteps = Steps[_R]


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
