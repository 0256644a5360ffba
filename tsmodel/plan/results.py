"""What a write plan asks for, and what it reports.

The table writes and the read and write steps of a save, a delete, a repair
or a rollup refresh, and the fold of their outcomes into one `EntityResult`
per entity (`WriteResult`).
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from tsmodel import errors
from tsmodel.backends.base import (
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    RowMutation,
)

__all__ = ["TableWrite", "WriteStatus", "EntityResult", "WriteResult", "ReadStep",
           "WriteStep"]


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
    """

    table: str
    rows: tuple[RowMutation, ...]
    members: tuple[int, ...] | tuple[tuple[int, ...], ...]
    grouped: bool = False


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
        tables: the outcome in each table written, main table first.
        row: the entity's row in the frame of a ``save_frame()`` (from 0),
            else ``None``.
    """

    entity: Any
    status: WriteStatus
    tables: tuple[tuple[str, MutationOutcome], ...]
    row: int | None = None

    @property
    def error(self) -> BaseException | None:
        """The first error met, if any."""
        return next((o.error for _, o in self.tables if o.error is not None), None)


@attrs.frozen
class WriteResult:
    """The per-entity outcome of ``save_all`` (or ``delete_all``), in input order.

    Attributes:
        results: one `EntityResult` per entity.
        action: what was written: ``"save"``, or ``"delete"`` (whose
            ``WRITTEN`` means deleted from every table; docs/deleting.md).
    """

    results: tuple[EntityResult, ...]
    action: str = "save"

    def _with(self, status: WriteStatus) -> list[EntityResult]:
        return [r for r in self.results if r.status is status]

    @property
    def written(self) -> list[EntityResult]:
        return self._with(WriteStatus.WRITTEN)

    @property
    def failed(self) -> list[EntityResult]:
        return self._with(WriteStatus.FAILED)

    @property
    def unknown(self) -> list[EntityResult]:
        return self._with(WriteStatus.UNKNOWN)

    @property
    def partial(self) -> list[EntityResult]:
        return self._with(WriteStatus.PARTIAL)

    @property
    def ok(self) -> bool:
        """Whether every entity was written everywhere."""
        return all(r.status is WriteStatus.WRITTEN for r in self.results)

    def __len__(self) -> int:
        return len(self.results)

    def summary(self) -> str:
        counts = {s: len(self._with(s)) for s in WriteStatus}
        return ", ".join(f"{n} {s.value}" for s, n in counts.items() if n) or "nothing to write"

    def raise_for_failures(self) -> None:
        """Raise `SaveError` unless every entity was written everywhere."""
        if not self.ok:
            first = next(r for r in self.results if r.status is not WriteStatus.WRITTEN)
            raise errors.SaveError(
                f"{self.action} incomplete ({self.summary()}); first problem: "
                f"{first.status.value}: "
                f"{first.error!r}", self,
            )


_Outcomes = list[tuple[str, MutationOutcome]]


def _status(out: _Outcomes) -> WriteStatus:
    main = out[0][1].status
    if main is MutationStatus.FAILED:
        return WriteStatus.FAILED
    if main is MutationStatus.UNKNOWN:
        return WriteStatus.UNKNOWN
    for _, companion in out[1:]:  # a loop: all() of a generator costs more per entity
        if companion.status is not MutationStatus.APPLIED:
            return WriteStatus.PARTIAL
    return WriteStatus.WRITTEN




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

