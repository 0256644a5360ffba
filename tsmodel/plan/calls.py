"""The one step protocol: what every operation asks of a connection, as typed values.

A planner yields steps and receives their answers; it performs no I/O. Two
drivers carry the steps out (`tsmodel.run.drive`: ``drive()`` with blocking
calls on a `Connection`, ``adrive()`` awaiting them on an `AsyncConnection`);
they know what each step means on a connection and nothing of what an
operation does: the order of the steps and what may go at once are the
planner's.

The steps:

- `Read`: read one request whole, answered with its rows (a list);
- `Scan` and `Rows`: a streamed read, asked for a chunk of rows at a time;
- `Write`: send one table write, answered with its outcomes;
- `Save`: save entities as ``save_all`` does, answered with the `WriteResult`;
- `First`: the first instance of a query, or of a read plan (`FirstOf`);
- the backend calls (`ListTables`, `CreateTable`, `MutateRows`...): each
  makes the one backend method it stands for with ``call.on(backend)``,
  awaited or not (an `AsyncBackend`'s methods are coroutines of the same
  names), so nothing dispatches on a method's name;
- `Together` (and `Send`, `ReadStep`, `WriteStep`): steps that may go
  concurrently, at most ``most`` at once, answered with the list of their
  answers, in order.

A planner is either a generator of steps (`Steps`; `Stepwise` hands its
steps out one after the other) or a `Schedule` of its own, which hands out
any number of steps at once with a ticket each and takes their answers in
any order (`tsmodel.plan.schedule.SaveSchedule`: several batches of a save
on the way at once).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import attrs

from tsmodel.ground.base import ReadRequest, RowMutation, TableSpec
from tsmodel.plan.results import ReadStep, TableWrite, WriteStep

__all__ = ["Read", "Scan", "Rows", "Write", "Send", "Save", "First", "FirstOf", "Together",
           "ListTables", "DescribeTable", "CreateTable", "DeleteTable", "DeleteFamily",
           "MutateRows", "BackendCall", "Step", "Steps", "Schedule", "Stepwise", "schedule_of"]

_R = TypeVar("_R")
_R_co = TypeVar("_R_co", covariant=True)


@attrs.frozen
class Read:
    """Read one request whole; answered with its rows, a list.

    For small reads (a few row keys). A failed read raises out of the
    operation, unless ``failures``: then its `BackendError` is the answer (a
    save's prior reads: the entities that needed it fail, the others go on).
    """

    request: ReadRequest
    failures: bool = False


@attrs.frozen(eq=False)
class Scan:
    """A streamed read: ask for its rows with `Rows`.

    A value without I/O; the driver starts the read at the first `Rows` of
    it and ends it when the operation ends (returns, raises or is
    cancelled). Each ``Scan`` object is its own read (compared by identity).
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
class Write:
    """Send one table write; answered with its outcomes, one per row.

    Paced as the server asks; a call refused as a whole fails each of its
    rows (an outcome, not an error).
    """

    write: TableWrite


@attrs.frozen
class Send:
    """Send table writes; answered with their outcomes, one list per write.

    The writes are independent (different tables, or rows that do not depend
    on each other): a driver may send them concurrently (`Together` of a
    `Write` each).
    """

    writes: tuple[TableWrite, ...]


@attrs.frozen
class Save:
    """Save entities as ``save_all(entities, raise_on_failure=False)`` does, with the
    options given; answered with the `WriteResult`. With ``refusals``, a
    ``ValidationError`` of the save is the answer instead of ending the driver.

    ``entities`` is taken as ``save_all`` takes it: one by one, in order.
    """

    entities: Iterable[Any]
    progress: Any = False
    accept_expired: bool = False
    validate_first: bool = True
    refusals: bool = False


@attrs.frozen
class First:
    """Run a query on the driver's connection; answered with its first
    instance, or ``None``. The query is built unbound (``QuerySet(model)...``)."""

    query: Any


@attrs.frozen
class FirstOf:
    """The first instance a `ReadPlan` yields for ``model``, or ``None``
    (the plan `latest()` runs for one entity)."""

    plan: Any
    model: type


@attrs.frozen
class Together:
    """Steps that may go concurrently; answered with the list of their answers.

    At most ``most`` are on the way at once (``None``: all of them); a
    driver whose backend's calls do not overlap makes them one after the
    other, in order.
    """

    steps: tuple[Any, ...]
    most: int | None = None


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


#: A call of the backend itself; `on(backend)` makes it.
BackendCall = ListTables | DescribeTable | CreateTable | DeleteTable | DeleteFamily | MutateRows

#: What a planner yields (a `Scan` is no step: `Rows` of it are).
Step = (Read | Rows | Write | Send | Save | First | FirstOf | Together | ReadStep | WriteStep
        | BackendCall)
#: A planner written as a generator: yields steps, receives their answers, returns its result.
Steps = Generator[Any, Any, _R]


class Schedule(Protocol[_R_co]):
    """A planner that hands out several steps at once, each with a ticket.

    A driver loops until `done`: it makes every step `ready()` hands out
    (concurrently where the backend's calls overlap), `answer()` s each with
    its ticket, in any order, then returns `result()`. `close()` is called
    however the driver ends.
    """

    @property
    def done(self) -> bool: ...

    def ready(self) -> list[tuple[Any, Any]]: ...

    def answer(self, ticket: Any, answer: Any) -> None: ...

    def result(self) -> _R_co: ...

    def close(self) -> None: ...


def _members(step: Any) -> tuple[tuple[Any, ...], int | None] | None:
    """The steps a group stands for and the most at once; ``None``: not a group."""
    kind = type(step)
    if kind is Together:
        return step.steps, step.most
    if kind is Send or kind is WriteStep:
        return tuple(Write(w) for w in step.writes), None
    if kind is ReadStep:  # a save's or a delete's reads: a failure is an answer
        return tuple(Read(r, failures=True) for r in step.requests), None
    return None


class Stepwise(Generic[_R]):
    """The `Schedule` of a generator of steps: one step (or group) after the other.

    The steps of a group (`Together`, `Send`, `ReadStep`, `WriteStep`) are
    handed out together, at most its ``most`` at once, and the generator
    gets the list of their answers once every one is in.
    """

    def __init__(self, steps: Steps[_R]) -> None:
        self._steps = steps
        self._done = False
        self._result: Any = None
        self._members: tuple[Any, ...] = ()
        self._most = 0
        self._next = 0
        self._waiting = 0
        self._answers: list[Any] = []
        self._group = False
        self._advance(None)

    @property
    def done(self) -> bool:
        return self._done

    def ready(self) -> list[tuple[Any, Any]]:
        """The steps that may go now: (ticket, step) pairs, each to `answer()`."""
        start = self._next
        stop = min(len(self._members), start + self._most - self._waiting)
        if stop <= start:
            return []
        self._next = stop
        self._waiting += stop - start
        return [(i, self._members[i]) for i in range(start, stop)]

    def answer(self, ticket: int, answer: Any) -> None:
        self._answers[ticket] = answer
        self._waiting -= 1
        if self._waiting == 0 and self._next == len(self._members):
            self._advance(self._answers if self._group else answer)

    def result(self) -> _R:
        if not self._done:
            raise RuntimeError("the steps are not done: answer every step first")
        result: _R = self._result
        return result

    def close(self) -> None:
        self._steps.close()

    def _advance(self, answer: Any) -> None:
        try:
            step = self._steps.send(answer)
            group = _members(step)
            while group is not None and not group[0]:  # nothing to ask: answer at once
                step = self._steps.send([])
                group = _members(step)
        except StopIteration as stop:
            self._done, self._result, self._members = True, stop.value, ()
            return
        self._group = group is not None
        self._members = (step,) if group is None else group[0]
        n = len(self._members)
        self._most = n if group is None or group[1] is None else group[1]
        self._next = self._waiting = 0
        self._answers = [None] * n


def schedule_of(steps: Steps[_R] | Schedule[_R]) -> Schedule[_R]:
    """``steps`` as a `Schedule`: a generator is handed out by `Stepwise`."""
    if isinstance(steps, Generator):
        return Stepwise(steps)
    return steps
