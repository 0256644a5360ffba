"""What a write plan asks for, and what it reports.

The table writes and the read and write steps of a save, a delete, a repair
or a rollup refresh, and the fold of their outcomes into one `EntityResult`
per entity (`WriteResult`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, NamedTuple, cast, overload

import attrs

from tsmodel import errors
from tsmodel.ground.base import (
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    RowMutation,
)

__all__ = ["send_writes", "TableRole", "TableWrite", "TableOutcome", "Outcomes", "WriteStatus",
           "EntityResult", "EntityResults", "WriteResult", "FrameResult", "ReadStep", "WriteStep",
           "entity_status"]


class TableRole(enum.Enum):
    """What a table is to the entities a write stands for."""

    #: The model's main table: its outcome decides whether an entity was written.
    MAIN = "main"
    #: The current-value table.
    CURRENT = "current"
    #: An alternate-key table.
    ALTERNATE = "alternate"
    #: The snapshot table of a period.
    SNAPSHOT = "snapshot"
    #: A rollup table.
    ROLLUP = "rollup"


@attrs.frozen
class TableWrite:
    """One batch for one table: rows, and the entities each row stands for.

    Attributes:
        table: the table.
        rows: the row mutations.
        members: for each row, the index of the entity it writes for; or,
            with ``grouped``, the indexes of the entities it stands for.
        grouped: whether a row stands for several entities (a current-value
            row stands for the batch's events of one entity key).
        role: what the table is to those entities (its outcome in the main
            table decides an entity's status; see `Outcomes`).
    """

    table: str
    rows: Sequence[RowMutation]
    members: tuple[int, ...] | tuple[tuple[int, ...], ...]
    grouped: bool = False
    role: TableRole = TableRole.MAIN


class TableOutcome(NamedTuple):
    """An entity's outcome in one table (a ``(table, outcome)`` pair)."""

    table: str
    outcome: MutationOutcome


class WriteStatus(enum.Enum):
    """The outcome of saving one entity."""

    #: Written to the main table and every companion table.
    WRITTEN = "written"
    #: Not written to the main table. Its companion writes were not attempted,
    #: or were sent with the main write and have outcomes of their own.
    FAILED = "failed"
    #: The main table write may or may not have happened (timeout, lost
    #: connection). Saving the entity again is safe: writes are idempotent.
    UNKNOWN = "unknown"
    #: Written to the main table, but a companion table write failed or is
    #: unknown. Saving again (or a repair) brings the companions in step.
    PARTIAL = "partial"


@attrs.frozen
class EntityResult:
    """What happened to one entity of a save.

    Attributes:
        entity: the instance given.
        status: the overall `WriteStatus`.
        tables: the outcome in each table written, main table first: a
            `TableOutcome` (a ``(table, outcome)`` pair) each.
        row: the entity's row in the frame of a ``save_frame()`` (from 0),
            else ``None``.
    """

    entity: Any
    status: WriteStatus
    tables: tuple[TableOutcome, ...]
    row: int | None = None

    @property
    def error(self) -> BaseException | None:
        """The first error met, if any."""
        return next((o.error for _, o in self.tables if o.error is not None), None)


class EntityResults(Sequence[EntityResult]):
    """One `EntityResult` per entity of a write, in input order, made when first read.

    A write records its outcomes compactly (`Outcomes`: per entity, its main
    outcome and a tuple of table outcomes that entities with the same outcomes
    share). The `EntityResult` objects are built from those the first time
    one is read (by index or iteration), not when the write returns:
    `counts()` (what `WriteResult.ok` and `summary()` use) needs none. A
    sequence like a tuple, and equal to the tuple of the same results.
    """

    __slots__ = ("_entities", "_main", "_tables", "_made")

    def __init__(self, entities: Sequence[Any], main: Sequence[MutationOutcome | None],
                 tables: Sequence[tuple[TableOutcome, ...]]) -> None:
        if not len(entities) == len(main) == len(tables):
            raise ValueError("one entity, main outcome and table outcomes each")
        self._entities, self._main, self._tables = entities, main, tables
        self._made: tuple[EntityResult, ...] | None = None

    def _statuses(self) -> Iterator[tuple[WriteStatus, int]]:
        """Each run of entities with the same outcomes: its status and length."""
        last_main: Any = _NOTHING
        last_tables: Any = _NOTHING
        status, run = WriteStatus.WRITTEN, 0
        # Each distinct pair of outcome objects, by identity (they stay alive in the
        # lists): results in another order than written alternate between a few.
        known: dict[tuple[int, int], WriteStatus] = {}
        for main, tables in zip(self._main, self._tables, strict=True):
            if main is not last_main or tables is not last_tables:  # mostly shared
                if run:
                    yield status, run
                last_main, last_tables, run = main, tables, 0
                pair = (id(main), id(tables))
                found = known.get(pair)
                if found is None:
                    found = known[pair] = entity_status(main, tables)
                status = found
            run += 1
        if run:
            yield status, run

    def counts(self) -> dict[WriteStatus, int]:
        """How many entities ended in each status (without making their results)."""
        if self._made is not None:
            return _counts(r.status for r in self._made)
        out: dict[WriteStatus, int] = {}
        for status, run in self._statuses():
            out[status] = out.get(status, 0) + run
        return out

    def _results(self) -> tuple[EntityResult, ...]:
        made = self._made
        if made is None:
            out: list[EntityResult] = []
            append = out.append
            tables = iter(self._tables)
            entities = iter(self._entities)
            for status, run in self._statuses():
                for _ in range(run):
                    append(EntityResult(next(entities), status, next(tables)))
            made = self._made = tuple(out)
        return made

    def __len__(self) -> int:
        return len(self._main)

    @overload
    def __getitem__(self, index: int) -> EntityResult: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[EntityResult, ...]: ...

    def __getitem__(self, index: int | slice) -> EntityResult | tuple[EntityResult, ...]:
        return self._results()[index]

    def __iter__(self) -> Iterator[EntityResult]:
        return iter(self._results())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (EntityResults, tuple)):
            return self._results() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._results())

    def __repr__(self) -> str:
        return repr(self._results())

    def __reduce__(self) -> tuple[Any, ...]:
        return tuple, (self._results(),)


_NOTHING = object()


def _counts(statuses: Iterable[WriteStatus]) -> dict[WriteStatus, int]:
    out: dict[WriteStatus, int] = {}
    for status in statuses:
        out[status] = out.get(status, 0) + 1
    return out


class _Ended:
    """A `WriteResult` attribute: the results of the entities that ended in one
    status, in input order (a new list at each read)."""

    def __init__(self, status: WriteStatus) -> None:
        self.status = status
        self.__doc__ = f"The results of the entities {status.value}, in input order."

    @overload
    def __get__(self, result: None, owner: type | None = None) -> _Ended: ...

    @overload
    def __get__(self, result: WriteResult, owner: type | None = None) -> list[EntityResult]: ...

    def __get__(self, result: WriteResult | None, owner: type | None = None
                ) -> list[EntityResult] | _Ended:
        if result is None:
            return self
        status = self.status
        return [r for r in result.results if r.status is status]


@attrs.frozen
class WriteResult:
    """The per-entity outcome of ``save_all`` (or ``delete_all``), in input order.

    Attributes:
        results: one `EntityResult` per entity (a tuple, or `EntityResults`,
            which makes them when first read).
        action: what was written: ``"save"``, or ``"delete"`` (whose
            ``WRITTEN`` means deleted from every table; docs/deleting.md).
    """

    results: tuple[EntityResult, ...] | EntityResults
    action: str = "save"

    def counts(self) -> dict[WriteStatus, int]:
        """How many entities ended in each status (those with none left out)."""
        results = self.results
        if isinstance(results, EntityResults):
            return results.counts()
        return _counts(r.status for r in results)

    written = _Ended(WriteStatus.WRITTEN)
    failed = _Ended(WriteStatus.FAILED)
    unknown = _Ended(WriteStatus.UNKNOWN)
    partial = _Ended(WriteStatus.PARTIAL)

    @property
    def ok(self) -> bool:
        """Whether every entity was written everywhere."""
        return not any(n for s, n in self.counts().items() if s is not WriteStatus.WRITTEN)

    def __len__(self) -> int:
        return len(self.results)

    def summary(self) -> str:
        return _summary(self.counts().get)

    def raise_for_failures(self) -> None:
        """Raise `SaveError` unless every entity was written everywhere."""
        if not self.ok:
            at, first = next((i, r) for i, r in enumerate(self.results)
                             if r.status is not WriteStatus.WRITTEN)
            where = next((f" in table {table!r}" for table, o in first.tables
                          if o.status is not MutationStatus.APPLIED), "")
            entity = repr(first.entity)
            if len(entity) > _ENTITY_SHOWN:
                entity = entity[:_ENTITY_SHOWN - 3] + "..."
            raise errors.SaveError(
                f"{self.action} incomplete ({self.summary()}); first problem: entity "
                f"{at} ({entity}), {first.status.value}{where}: {first.error!r}", self)



@attrs.frozen
class FrameResult:
    """The outcome of a ``save_frame()``: counts per outcome, and the rows not written.

    Unlike `WriteResult`, it keeps nothing of a row written everywhere (the
    common case), so that its size does not grow with the rows saved: only
    how many rows had each `WriteStatus`, and the `EntityResult` of each row
    that was not written everywhere (failed, unknown or partial), its ``row``
    the row's index in the frame.

    Attributes:
        rows: the rows saved (every row of the frame, when it returns).
        written: the rows written to every table.
        failed: the rows not written to the main table.
        unknown: the rows whose main-table write may or may not have happened.
        partial: the rows written to the main table whose companion writes
            (current value, alternates, snapshots, rollups) did not all succeed.
        not_written: the `EntityResult` of each row not ``WRITTEN``, in the
            frame's order: its ``row``, ``status``, ``tables`` (each table's
            outcome), ``error`` and ``entity`` (the row as an instance, to save
            it again).
    """

    rows: int = 0
    written: int = 0
    failed: int = 0
    unknown: int = 0
    partial: int = 0
    not_written: tuple[EntityResult, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every row was written everywhere."""
        return self.written == self.rows

    def __len__(self) -> int:
        return self.rows

    def count(self, status: WriteStatus) -> int:
        """The rows of ``status``."""
        return int(getattr(self, status.value))

    def summary(self) -> str:
        return _summary(self.count)

    def raise_for_failures(self) -> None:
        """Raise `SaveError` (this result its ``result``) unless every row was written
        everywhere; its message names the first row not written."""
        if not self.ok:
            first = self.not_written[0]
            raise errors.SaveError(
                f"save incomplete ({self.summary()}); first problem: row {first.row}: "
                f"{first.status.value}: {first.error!r}", self)



#: The characters of an entity's repr that a `SaveError` message shows at most.
_ENTITY_SHOWN = 200


def _summary(count: Callable[[WriteStatus], int | None]) -> str:
    """``"3 written, 1 failed"``: the count of each status that has any."""
    return ", ".join(f"{count(s)} {s.value}" for s in WriteStatus if count(s)) \
        or "nothing to write"


def entity_status(main: MutationOutcome | None,
                  tables: Sequence[TableOutcome]) -> WriteStatus:
    """An entity's status from its main-table outcome and every table's.

    ``None`` for ``main``: no main write was recorded (a repair replays
    companions alone); the companions decide.
    """
    if main is not None:
        if main.status is MutationStatus.FAILED:
            return WriteStatus.FAILED
        if main.status is MutationStatus.UNKNOWN:
            return WriteStatus.UNKNOWN
    # The main outcome is APPLIED: any other table's not APPLIED makes it PARTIAL.
    for _, outcome in tables:  # a loop: all() of a generator costs more per entity
        if outcome.status is not MutationStatus.APPLIED:
            return WriteStatus.PARTIAL
    return WriteStatus.WRITTEN


class Outcomes:
    """The outcomes recorded for the entities of a plan, by entity index.

    Attributes:
        main: per entity, its main-table outcome (or the failure that refused
            it before anything was sent), ``None`` until recorded: the outcome
            that decides whether the entity was written.
        tables: per entity, each `TableOutcome` in the order recorded.
    """

    __slots__ = ("main", "tables")

    def __init__(self, n: int = 0) -> None:
        self.main: list[MutationOutcome | None] = [None] * n
        #: Immutable and shared: entities with the same outcomes hold one tuple, so
        #: that a save keeps no object per entity and table alive for the garbage
        #: collector to walk (backends return one shared APPLIED outcome).
        self.tables: list[tuple[TableOutcome, ...]] = [()] * n

    def extend(self, n: int) -> None:
        """Room for ``n`` more entities."""
        self.main.extend([None] * n)
        self.tables.extend([()] * n)

    def not_sent(self, i: int, role: TableRole, table: str, error: BaseException) -> None:
        """Entity ``i``'s write to ``table``, not sent because of ``error`` (a read it
        needed failed): FAILED, since nothing of it reached the server."""
        outcome = MutationOutcome(MutationStatus.FAILED, error)
        if role is TableRole.MAIN and self.main[i] is None:
            self.main[i] = outcome
        self.tables[i] = (*self.tables[i], TableOutcome(table, outcome))

    def record(self, write: TableWrite, outcomes: Sequence[MutationOutcome]) -> None:
        """The backend's outcome of each row of ``write``, for the entities it stands for."""
        if self._record_alike(write, outcomes):
            return
        tables, main = self.tables, self.main
        is_main = write.role is TableRole.MAIN
        pair: TableOutcome | None = None
        # The last tuple grown, and what it grew into: the next entity's is most
        # often the same tuple, growing by the same pair.
        before: tuple[TableOutcome, ...] | None = None
        after: tuple[TableOutcome, ...] = ()
        each: Iterable[tuple[int, MutationOutcome]]
        if write.grouped:  # a row for several entities: each gets the row's outcome
            each = ((i, outcome) for members, outcome in zip(write.members, outcomes,
                                                             strict=True)
                    for i in cast("tuple[int, ...]", members))
        else:
            each = zip(cast("tuple[int, ...]", write.members), outcomes, strict=True)
        for i, outcome in each:
            if pair is None or pair.outcome is not outcome:
                pair, before = TableOutcome(write.table, outcome), None
            held = tables[i]
            if held is not before:
                before, after = held, (*held, pair)
            tables[i] = after
            if is_main and main[i] is None:
                main[i] = outcome

    def _record_alike(self, write: TableWrite, outcomes: Sequence[MutationOutcome]) -> bool:
        """`record()` of the common case in whole-list steps: one outcome for every row
        (a backend gives every row it applied one shared object; equal outcomes,
        of the same status and error, are taken for one), entities that make one
        run of indexes in order (a batch: its main write, or its current-value
        rows' members together), each with equal table outcomes so far.
        ``False``, nothing recorded, for any other write."""
        n = len(outcomes)
        if not n:
            return False
        outcome = outcomes[0]
        if outcomes.count(outcome) != n:
            return False
        members = write.members
        if write.grouped:
            flat: Sequence[int] = sorted(chain.from_iterable(
                cast("tuple[tuple[int, ...], ...]", members)))
            if not flat:
                return False
            lo = flat[0]
            run: Sequence[int] = list(range(lo, lo + len(flat)))
        else:
            flat = cast("tuple[int, ...]", members)
            lo = flat[0]
            run = tuple(range(lo, lo + len(flat)))
        if flat != run:
            return False  # not one run in order, or an entity twice
        hi = lo + len(flat)
        tables, main = self.tables, self.main
        before = tables[lo]
        if tables[lo:hi].count(before) != len(flat):
            return False
        tables[lo:hi] = [(*before, TableOutcome(write.table, outcome))] * len(flat)
        if write.role is TableRole.MAIN:
            if main[lo:hi].count(None) == len(flat):
                main[lo:hi] = [outcome] * len(flat)
            else:
                for i in range(lo, hi):
                    if main[i] is None:
                        main[i] = outcome
        return True

    def recorded(self, i: int) -> bool:
        """Whether entity ``i`` has a main outcome (written, or refused)."""
        return self.main[i] is not None

    def failed(self, i: int) -> bool:
        """Whether entity ``i``'s main write FAILED (or it was refused)."""
        main = self.main[i]
        return main is not None and main.status is MutationStatus.FAILED

    def not_failed(self, batch: range) -> Sequence[int]:
        """The entities of ``batch`` whose main write did not fail (`failed()`), in order."""
        main = self.main[batch.start:batch.stop]
        if main and main.count(main[0]) == len(main):  # one outcome for all (or none)
            first = main[0]
            failed = first is not None and first.status is MutationStatus.FAILED
            return [] if failed else batch
        # Outcomes are mostly one shared object: look at each distinct one once.
        distinct = dict(zip(map(id, main), main, strict=True)).values()
        if not any(m is not None and m.status is MutationStatus.FAILED for m in distinct):
            return batch
        return [i for i, m in zip(batch, main, strict=True)
                if m is None or m.status is not MutationStatus.FAILED]

    def failures(self) -> int:
        """How many recorded row outcomes were not APPLIED (a repair's count)."""
        return sum(1 for out in self.tables for _, o in out
                   if o.status is not MutationStatus.APPLIED)

    def results(self, entities: Sequence[Any], order: Sequence[int] | None = None
                ) -> EntityResults:
        """One `EntityResult` per entity, in index order (made when first read); with
        ``order``, the input index of each entity, in input order."""
        if order is None:
            return EntityResults(entities, self.main, self.tables)
        n = len(order)
        kept: list[Any] = [None] * n
        main: list[MutationOutcome | None] = [None] * n
        tables: list[tuple[TableOutcome, ...]] = [()] * n
        for i, at in enumerate(order):
            kept[at], main[at], tables[at] = entities[i], self.main[i], self.tables[i]
        return EntityResults(kept, main, tables)


@attrs.frozen
class ReadStep:
    """Read each request whole; answer with its rows, or the `BackendError` it raised."""

    requests: tuple[ReadRequest, ...]

    @property
    def calls(self) -> tuple[ReadRequest, ...]:
        return self.requests


@attrs.frozen
class WriteStep:
    """Send each table write; answer with its outcomes, one per row.

    The writes of one step are independent (different tables, or rows
    that do not depend on each other): an executor may send them
    concurrently. A call refused as a whole fails each of its rows.
    """

    writes: tuple[TableWrite, ...]

    @property
    def calls(self) -> tuple[TableWrite, ...]:
        return self.writes


def send_writes(writes: Sequence[TableWrite],
                record: Callable[[TableWrite, Any], None]) -> Generator[WriteStep, Any, Any]:
    """One `WriteStep` of ``writes`` (none if empty), each outcome recorded; returns them."""
    if not writes:
        return ()
    outcomes = yield WriteStep(tuple(writes))
    for write, outcome in zip(writes, outcomes, strict=True):
        record(write, outcome)
    return outcomes

