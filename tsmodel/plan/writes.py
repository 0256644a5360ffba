"""The write planner: events in, per-table mutations and per-entity results out.

Pure: it encodes, groups and folds; executors (`Connection`,
the repair and snapshot jobs) send what it plans and hand the outcomes back.

A save goes batch by batch. Each batch writes each event to its model's
main table and to the companion tables: the current-value table (one row per
entity key: the newest event of the batch stands for the others) and each
alternate-key table, and adds its events to the rows of increment rollups; last,
the rollup rows its events fall in are recomputed from the main table
(`tsmodel.plan.rollups`). `SaveSchedule` hands
the calls out, several batches at once, companions with their main write once the main table is
known to take writes, and order kept between writes where Bigtable's "last
written wins" makes it matter. `WritePlan.result()` folds the outcomes
into one `EntityResult` per entity.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, cast

import attrs

from tsmodel import errors
from tsmodel.backends.base import (
    AddToCell,
    DeleteCells,
    Mutation,
    MutationOutcome,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowSet,
    SetCell,
)
from tsmodel.declare.spec import ModelSpec, instance_spec
from tsmodel.layouts import EncodedRow
from tsmodel.plan.retention import retention_message, retention_problems
from tsmodel.plan.rollups import Increments, RollupRefresh
from tsmodel.plan.versions import erase, past_limit, timestamps_read, version_limit
from tsmodel.settings import check_flag, check_whole

_MS = 1_000

__all__ = ["EncodedEvent", "encode_event", "TableWrite", "WritePlan", "WriteStatus",
           "EntityResult", "WriteResult", "ReadStep", "WriteStep", "WriteFlow",
           "SaveSchedule", "prepare_save", "schedule_save", "refresh_steps",
           "check_write_options"]


class EncodedEvent(NamedTuple):
    """One validated event, encoded for every table of its model.

    One flat tuple: a save keeps one per entity until it returns, and the
    fewer objects it keeps, the less the garbage collector walks (with
    50,000 events, a row object per table cost a third of encoding time).

    Attributes:
        entity: the model instance.
        table: the main table.
        key: its row key there.
        timestamp: the event time in microseconds.
        mutations: its cells there.
        current_table: the current-value table, or ``None``.
        current_key: its row key there, or ``None``.
        current_mutations: its cells there (often the same tuple as ``mutations``).
        alternates: its row in each alternate-key table.
        spec: the model's spec, where the event may correct one stored before
            (its cells depend on its values) or has rollups: a batch that holds
            one reads before or after its writes, and goes alone.
    """

    entity: Any
    table: str
    key: bytes
    timestamp: int
    mutations: tuple[Mutation, ...]
    current_table: str | None = None
    current_key: bytes | None = None
    current_mutations: tuple[Mutation, ...] = ()
    alternates: tuple[EncodedRow, ...] = ()
    spec: ModelSpec | None = None

    @classmethod
    def of(cls, entity: Any, main: EncodedRow, current: EncodedRow | None = None,
           alternates: tuple[EncodedRow, ...] = (),
           spec: ModelSpec | None = None) -> EncodedEvent:
        """The event from its rows in each table."""
        if current is None:
            return cls(entity, *main, None, None, (), alternates, spec)
        return cls(entity, *main, current.table, current.key, current.mutations,
                   alternates, spec)

    @property
    def main(self) -> EncodedRow:
        """Its row in the main table."""
        return EncodedRow(self.table, self.key, self.timestamp, self.mutations)

    @property
    def current(self) -> EncodedRow | None:
        """Its row in the current-value table, or ``None``."""
        if self.current_table is None or self.current_key is None:
            return None
        return EncodedRow(self.current_table, self.current_key, self.timestamp,
                          self.current_mutations)

    def row_mutation(self) -> RowMutation:
        return RowMutation(self.key, self.mutations)

    def current_row_mutation(self) -> RowMutation | None:
        if self.current_key is None:
            return None
        return RowMutation(self.current_key, self.current_mutations)


def encode_event(spec: ModelSpec, entity: Any) -> EncodedEvent:
    """Validate an instance and encode it for every table of its model.

    Raises:
        ValidationError: a value cannot be stored; the message names the model,
            the field and the value. Nothing is encoded half-way.
    """
    if instance_spec(entity) is not spec:
        raise errors.FieldTypeError(
            f"expected a {spec.name} instance, got {type(entity).__name__}",
            model=spec.name, value=entity,
        )
    return _encode(spec, entity)


def _encode(spec: ModelSpec, entity: Any) -> EncodedEvent:
    return _encoder(spec)(entity)


def event_encoder(spec: ModelSpec) -> Callable[[Any], EncodedEvent]:
    """The generated encoder of ``spec``'s events in its main and current-value tables."""
    return spec.codec.event_encoder(spec.current_codec, EncodedEvent)


def _encoder(spec: ModelSpec) -> Callable[[Any], EncodedEvent]:
    """The encoder of ``spec``'s events: the main table's generated event encoder
    (main and current-value rows), then the alternate-key rows where there are."""
    event = event_encoder(spec)
    if not spec.alternates and not spec.corrections_read_first and not spec.rollups:
        return event  # the common case: the generated function alone
    alternates = tuple(alt.codec.encode for alt in spec.alternates)
    marked = spec if spec.corrections_read_first or spec.rollups else None

    def encode(entity: Any) -> EncodedEvent:
        main = event(entity)
        return main._replace(alternates=tuple(alt(entity) for alt in alternates), spec=marked)

    return encode


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


class WritePlan:
    """The writes of a batch of encoded events, and the fold of their outcomes.

    Args:
        events: the encoded events, in input order.
    """

    def __init__(self, events: Sequence[EncodedEvent]) -> None:
        self.events = list(events)
        #: Per entity: (table, outcome), main table first.
        self._outcomes: list[_Outcomes] = [[] for _ in events]
        #: Per entity: alternate rows of the event it corrects, to delete.
        self._stale: dict[int, list[EncodedRow]] = {}
        #: Entities whose later version in the same batch is written instead.
        self._superseded: set[int] = set()
        #: Per entity written for earlier versions of itself: all their indexes.
        self._groups: dict[int, list[int]] = {}
        #: Entities failed before anything was sent for them (see `refuse()`).
        self._refused: set[int] = set()
        #: Per entity correcting an event in a bucket row with a version limit:
        #: the main-table cells it deletes (see `stamp_reads()`).
        self._moved: dict[int, list[tuple[str, bytes, int]]] = {}
        #: Per entity correcting an event in alternate rows with a version limit:
        #: (the alternate's spec, the row key, the cells it deletes there).
        self._moved_alt: dict[int, list[tuple[ModelSpec, bytes, list[tuple[str, bytes, int]]]]] = {}

    def extend(self, events: Sequence[EncodedEvent]) -> None:
        """Plan more events after those planned (a streamed save's next batch)."""
        self.events.extend(events)
        self._outcomes.extend([] for _ in events)

    def let_go(self, batch: range) -> None:
        """Drop the cells of a batch whose calls are answered: keep what results need."""
        events = self.events
        for i in batch:
            ev = events[i]
            events[i] = EncodedEvent(ev.entity, ev.table, ev.key, ev.timestamp, ())
        for i in batch:
            self._stale.pop(i, None)
            self._moved.pop(i, None)
            self._moved_alt.pop(i, None)

    # -- corrections ------------------------------------------------------------------

    def prior_reads(self, batch: range) -> list[ReadRequest]:
        """The reads of stored events that the events of ``batch`` may correct.

        Only models whose cells depend on their values (``corrections_read_first``)
        need them: one read per main table, of the batch's rows, in the batch's
        span of cell timestamps. Hand the rows to `absorb()`.
        """
        wanted: dict[str, tuple[ModelSpec, set[bytes], list[int]]] = {}
        for i in batch:
            ev = self.events[i]
            if ev.spec is not None and ev.spec.corrections_read_first:
                spec, keys, times = wanted.setdefault(ev.table, (ev.spec, set(), []))
                keys.add(ev.key)
                times.append(ev.timestamp)
        return [ReadRequest(table, RowSet(keys=tuple(sorted(keys))), ReadFilter(
                    families=spec.families, timestamp_start=min(times) // _MS * _MS,
                    timestamp_end=max(times) // _MS * _MS + _MS,
                    # Every version: a stored cell past the version limit is still
                    # there until GC runs, and must not come back beside the correction.
                    cells_per_column=spec.codec.layout.read_versions))
                for table, (spec, keys, times) in wanted.items()]

    def absorb(self, batch: range, found: Mapping[tuple[str, bytes], Row]) -> None:
        """Turn the stored events that ``batch`` corrects into deletions of their cells.

        ``found`` holds the rows `prior_reads()` selected, by (table, row key).
        Cells of a stored event with the same key and time that the new event no
        longer writes are deleted with its main row (atomically); alternate rows
        under a key it no longer has are deleted with the alternate writes.
        """
        # Each row is decoded once for the batch, its events found by time: a
        # bucket row holds many events, and a batch many events of one row.
        stored: dict[tuple[str, bytes], dict[int, list[Any]]] = {}
        for i in batch:
            ev = self.events[i]
            where = (ev.table, ev.key)
            row = found.get(where)
            if ev.spec is None or row is None:
                continue
            by_time = stored.get(where)
            if by_time is None:
                by_time = stored[where] = _by_time(ev.spec, type(ev.entity), row)
            for old in by_time.get(ev.timestamp, ()):
                if old != ev.entity:
                    self.events[i] = ev = self._correct(i, ev, _encode(ev.spec, old))

    def refuse(self, batch: range, table: str, error: BaseException) -> None:
        """FAIL the events of ``batch`` in main table ``table``: nothing is sent for them.

        For a prior read of ``table`` that failed: without it, a correction
        could leave cells of the event it replaces (or, an alternate-key
        table's timestamps, bring back an event past its version limit).
        Their companions are not attempted either, as for any FAILED main write.
        """
        pair = (table, MutationOutcome(MutationStatus.FAILED, error))
        for i in batch:
            if self.events[i].table == table or any(
                    alt.table == table for alt, _, _ in self._moved_alt.get(i, ())):
                self._outcomes[i].append(pair)
                self._refused.add(i)

    def stamp_reads(self, batch: range) -> list[ReadRequest]:
        """The reads of the cell timestamps of bucket rows with a version limit
        that corrections of ``batch`` delete cells from (`tsmodel.plan.versions`):
        the events pushed past the limit of those columns go with them.

        Only corrections that move an event to other cells (``ts.columns()``: a
        new value is a new column; a promoted value changed: another alternate
        row) or delete a cell of it have any, in the main table and in the
        alternate-key tables alike. Hand the rows to `absorb_stamps()`.
        """
        wanted: dict[str, tuple[ModelSpec, set[bytes]]] = {}
        for i in batch:
            if i in self._moved:
                ev = self.events[i]
                assert ev.spec is not None
                wanted.setdefault(ev.table, (ev.spec, set()))[1].add(ev.key)
            for alt, key, _ in self._moved_alt.get(i, ()):
                wanted.setdefault(alt.table, (alt, set()))[1].add(key)
        return [timestamps_read(spec, keys) for spec, keys in wanted.values()]

    def absorb_stamps(self, batch: range, found: Mapping[tuple[str, bytes], Row]) -> None:
        """Delete, with each correction's stale cells, the events past the version limit.

        A cell the batch writes again (an event saved again beside the correction)
        is never among them: it is the batch's, whatever the row held before.
        """
        written: dict[tuple[str, bytes], set[tuple[str, bytes, int]]] = {}
        for i in batch:
            ev = self.events[i]
            if i not in self._refused:
                for encoded in (ev.main, *ev.alternates):
                    written.setdefault((encoded.table, encoded.key), set()).update(
                        (m.family, m.qualifier, m.timestamp) for m in encoded.mutations
                        if isinstance(m, SetCell))
        for i in batch:
            cells = self._moved.pop(i, None)
            ev = self.events[i]
            row = found.get((ev.table, ev.key))
            if cells is None or row is None or i in self._refused:
                continue
            assert ev.spec is not None
            past = past_limit(ev.spec, row.cells, cells) - written[(ev.table, ev.key)]
            if past:
                self.events[i] = ev._replace(mutations=erase(past) + ev.mutations)
        for i in batch:
            for alt, key, deleted in self._moved_alt.pop(i, ()):
                stamps = found.get((alt.table, key))
                if stamps is None or i in self._refused:
                    continue
                past = past_limit(alt, stamps.cells, deleted) - written.get((alt.table, key),
                                                                            set())
                if past:
                    self._erase_with(i, alt.table, key, erase(past))

    def _erase_with(self, i: int, table: str, key: bytes, erased: tuple[Mutation, ...]) -> None:
        """Prepend ``erased`` to entity ``i``'s write of alternate row (table, key)."""
        ev = self.events[i]
        alternates = tuple(row._replace(mutations=erased + row.mutations)
                           if (row.table, row.key) == (table, key) else row
                           for row in ev.alternates)
        if alternates != ev.alternates:
            self.events[i] = ev._replace(alternates=alternates)
            return
        self._stale[i] = [row._replace(mutations=erased + row.mutations)
                          if (row.table, row.key) == (table, key) else row
                          for row in self._stale.get(i, ())]

    def _correct(self, i: int, ev: EncodedEvent, old: EncodedEvent) -> EncodedEvent:
        mutations = _stale(old.main, ev.main) + ev.mutations
        if ev.spec is not None and version_limit(ev.spec) is not None:
            stale = [(m.family, m.qualifier, m.timestamp_start or 0) for m in mutations
                     if isinstance(m, DeleteCells)]
            if stale:
                self._moved.setdefault(i, []).extend(stale)
        alternates = []
        assert ev.spec is not None
        for alt, before, after in zip(ev.spec.alternates, old.alternates, ev.alternates,
                                      strict=True):
            if before.key == after.key:
                gone = _stale(before, after)
                alternates.append(after._replace(mutations=gone + after.mutations))
            else:
                gone = _stale(before, None)
                alternates.append(after)
                self._stale.setdefault(i, []).append(before._replace(mutations=gone))
            if gone and version_limit(alt) is not None:  # events past the limit go too
                self._moved_alt.setdefault(i, []).append((alt, before.key, [
                    (m.family, m.qualifier, m.timestamp_start or 0) for m in gone
                    if isinstance(m, DeleteCells)]))
        return ev._replace(mutations=mutations, alternates=tuple(alternates))

    def main_writes(self, batch: range) -> list[TableWrite]:
        """The main-table writes of the events in ``batch``, one per table.

        Several versions of one event (same table, key and time) in a batch
        are one write, of the last in input order: Bigtable does not apply the
        entries of a bulk call in order. The earlier versions share its outcome.
        Versions whose cells carry different times (amendments stamped with
        their version time) write different cells, and are each written.
        """
        self._dedupe(batch)
        by_table: dict[str, list[int]] = {}
        skipped = self._superseded | self._refused
        for i in batch:
            if i not in skipped:
                by_table.setdefault(self.events[i].table, []).append(i)
        return [self._write(table, [(i, self.events[i].row_mutation()) for i in winners])
                for table, winners in by_table.items()]

    def _dedupe(self, batch: range) -> None:
        last: dict[tuple[Any, ...], int] = {}
        for i in batch:
            ev = self.events[i]
            last[(ev.table, ev.key, ev.timestamp)] = i
        if len(last) == len(batch):
            return  # the common case: no event twice
        # Versions of one event in cells of their own (amendments stamped with their
        # version times) are separate writes; versions of the same cells are one.
        last = {}
        for i in batch:
            ev = self.events[i]
            last[(ev.table, ev.key, ev.timestamp, _cell_time(ev))] = i
        for i in batch:
            ev = self.events[i]
            winner = last[(ev.table, ev.key, ev.timestamp, _cell_time(ev))]
            if winner != i:
                self._superseded.add(i)
                self._groups.setdefault(winner, [winner]).append(i)

    def _write(self, table: str, rows: list[tuple[int, RowMutation]]) -> TableWrite:
        """A table write of ``rows`` for their entities (and those they supersede)."""
        mutations = tuple([row for _, row in rows])
        if not self._groups:
            return TableWrite(table, mutations, tuple(i for i, _ in rows))
        return TableWrite(table, mutations, tuple(tuple(self._groups.get(i, (i,)))
                                                  for i, _ in rows), grouped=True)

    def companion_writes(self, batch: range) -> list[TableWrite]:
        """The current-value, alternate-key and increment-rollup writes of ``batch``.

        Entities whose main write FAILED get none. Call it after the main
        step's outcomes are recorded (an entity with no recorded main outcome
        counts as written, which is how a repair replays companions).
        """
        outcomes, failed = self._outcomes, MutationStatus.FAILED
        live = [i for i in batch if i not in self._superseded
                and not (outcomes[i] and outcomes[i][0][1].status is failed)]
        return [*self._current_writes(live), *self._alternate_writes(live),
                *self._increment_writes(live)]

    def _current_writes(self, live: list[int]) -> list[TableWrite]:
        """The newest event per current-value row; it stands for the others."""
        newest: dict[tuple[str, bytes], int] = {}
        members: dict[tuple[str, bytes], list[int]] = {}
        events = self.events
        for i in live:
            ev = events[i]
            if ev.current_table is None or ev.current_key is None:
                continue
            slot = (ev.current_table, ev.current_key)
            members.setdefault(slot, []).extend(self._groups.get(i, (i,)))
            best = newest.get(slot)
            if best is None or ev.timestamp >= events[best].timestamp:
                newest[slot] = i
        by_table: dict[str, list[tuple[str, bytes]]] = {}
        for slot in newest:
            by_table.setdefault(slot[0], []).append(slot)
        out = []
        for table, slots in by_table.items():
            rows = tuple([_current_row(events[newest[s]]) for s in slots])
            out.append(TableWrite(table, rows, tuple(tuple(members[s]) for s in slots),
                                  grouped=True))
        return out

    def _alternate_writes(self, live: list[int]) -> list[TableWrite]:
        by_table: dict[str, list[tuple[int, RowMutation]]] = {}
        for i in live:
            for row in (*self._stale.get(i, ()), *self.events[i].alternates):
                by_table.setdefault(row.table, []).append((i, row.row_mutation()))
        return [self._write(table, items) for table, items in by_table.items()]

    def _increment_writes(self, live: list[int]) -> list[TableWrite]:
        """The ``AddToCell`` rows of the increment rollups: one per rollup row, its
        events' sums (an event saved twice in a batch counts once, as stored)."""
        increments = Increments()
        for i in live:
            ev = self.events[i]
            if ev.spec is not None and ev.spec.rollups:
                increments.add(ev.spec, ev.entity, self._groups.get(i, (i,)))
        if not increments:
            return []
        return [TableWrite(table, tuple(r for _, r in items), tuple(m for m, _ in items),
                           grouped=True) for table, items in increments.rows().items()]

    def rollup_refresh(self, batch: range) -> RollupRefresh:
        """The recompute of the rollup rows that the batch's events fall in.

        Entities whose main write FAILED are left out (nothing changed for
        them); call it once the main outcomes are recorded.
        """
        refresh = RollupRefresh()
        outcomes, failed = self._outcomes, MutationStatus.FAILED
        for i in batch:
            ev = self.events[i]
            if ev.spec is None or not ev.spec.rollups or i in self._superseded or (
                    outcomes[i] and outcomes[i][0][1].status is failed):
                continue
            refresh.add(ev.spec, ev.entity, self._groups.get(i, (i,)), recomputed_only=True)
        return refresh

    def record(self, write: TableWrite, outcomes: Sequence[MutationOutcome]) -> None:
        """Record the backend's outcome of each row of ``write``."""
        out = self._outcomes
        grouped = write.grouped
        pair: tuple[str, MutationOutcome] | None = None
        for members, outcome in zip(write.members, outcomes, strict=True):
            # Backends return one shared APPLIED outcome: its rows share one pair
            # too, rather than keeping a tuple per entity and table alive.
            if pair is None or pair[1] is not outcome:
                pair = (write.table, outcome)
            if grouped:
                for i in cast("tuple[int, ...]", members):
                    out[i].append(pair)
            else:
                out[cast(int, members)].append(pair)

    def failures(self) -> int:
        """How many recorded row outcomes were not APPLIED (a repair's count)."""
        return sum(1 for out in self._outcomes for _, o in out
                   if o.status is not MutationStatus.APPLIED)

    def result(self) -> WriteResult:
        """One `EntityResult` per event, in input order."""
        return WriteResult(tuple(
            EntityResult(ev.entity, _status(out), tuple(out))
            for ev, out in zip(self.events, self._outcomes, strict=True)
        ))


def _by_time(spec: ModelSpec, cls: Callable[..., Any], row: Row) -> dict[int, list[Any]]:
    """The stored events of ``row`` by event time (µs), each time's in row order."""
    codec = spec.codec
    out: dict[int, list[Any]] = {}
    for old in codec.decode(cls, row):
        out.setdefault(codec.time_of(old), []).append(old)
    return out


def _current_row(ev: EncodedEvent) -> RowMutation:
    """An event's write of its current-value row: exactly its cells, for every reader.

    The newest event erases the older cells of the columns it has no value
    for, but a late, older event written after it would leave its cells
    there, under no newer cell: another reader would see two events mixed.
    An event with a cell in a column the newest event may lack (an optional
    value's, or the empty marker of an event without values) is therefore
    written only if the row holds no newer cell, checked and applied
    atomically (`RowMutation.unless_newer`): a ``CheckAndMutateRow`` call on
    Cloud Bigtable instead of an entry of the batch's ``MutateRows``. Its
    retry is as safe as a plain write's, whatever arrives between; other
    events (no such cell: theirs are hidden under a newer event's) go as
    before.
    """
    assert ev.current_key is not None
    mutations = ev.current_mutations
    spec = ev.spec or instance_spec(ev.entity)
    late = _may_lack(spec)
    if late:
        for m in mutations:
            if type(m) is SetCell and (m.family, m.qualifier) in late:
                return RowMutation(ev.current_key, mutations, unless_newer=m.timestamp + _MS)
    return RowMutation(ev.current_key, mutations)


def _may_lack(spec: ModelSpec) -> frozenset[tuple[str, bytes]]:
    """The current-value columns an event may have no cell in: its optional values'
    and, where every value is optional, the empty marker's (none, serialized)."""
    if spec.serialization is not None:
        return frozenset()
    columns = {(v.family, v.qualifier) for v in spec.values if v.optional}
    if columns and len(columns) == len(spec.values):
        columns.add((spec.family, b""))
    return frozenset(columns)


def _stale(old: EncodedRow, new: EncodedRow | None) -> tuple[Mutation, ...]:
    """Deletions of the cells ``old`` wrote that ``new`` (a correction) does not write."""
    kept = set() if new is None else {(m.family, m.qualifier, m.timestamp)
                                      for m in new.mutations if isinstance(m, SetCell)}
    return tuple(DeleteCells(m.family, m.qualifier, m.timestamp, m.timestamp + _MS)
                 for m in old.mutations
                 if isinstance(m, SetCell) and (m.family, m.qualifier, m.timestamp) not in kept)


def _cell_time(ev: EncodedEvent) -> int:
    """The timestamp of the cells an event sets: its time floored to the millisecond,
    or its version time (a model with a version field stamps every cell with it)."""
    return next((m.timestamp for m in ev.mutations if type(m) is SetCell),
                ev.timestamp // _MS * _MS)


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


def encode_all(entities: Iterable[Any]) -> list[EncodedEvent]:
    """Encode every entity before anything is written (so nothing is half-written)."""
    encoders: dict[type, Callable[[Any], EncodedEvent]] = {}  # once per model class
    out = []
    for e in entities:
        encode = encoders.get(type(e))
        if encode is None:
            encode = encoders[type(e)] = _encoder(instance_spec(e))
        out.append(encode(e))
    return out


# -- the sequence of a save, for any executor ------------------------------------


def prepare_save(entities: Iterable[Any], accept_expired: bool) -> WritePlan:
    """Validate and encode every entity, check retention, and plan the writes.

    Raises:
        ValidationError: an entity cannot be stored; nothing is planned.
        RetentionError: unless ``accept_expired``, events already older than
            a family's max age.
    """
    events = encode_all(entities)
    if not accept_expired:
        problems = retention_problems(ev.entity for ev in events)
        if problems:
            raise errors.RetentionError(retention_message(problems), problems)
    return WritePlan(events)


def schedule_save(entities: Iterable[Any], batch_size: int, flow: WriteFlow, *,
                  trusted: set[str], accept_expired: bool,
                  validate_first: bool) -> SaveSchedule:
    """The schedule of a ``save_all``, for any executor.

    With ``validate_first`` every entity is encoded before the first call
    (`prepare_save()`), else batch by batch as the save goes
    (`SaveSchedule.streaming()`).
    """
    if isinstance(entities, type):  # save_all(M) for save_all([M(...), ...])
        instance_spec(entities)
    if validate_first:
        return SaveSchedule(prepare_save(entities, accept_expired), batch_size, flow,
                            trusted=trusted)
    return SaveSchedule.streaming(entities, batch_size, flow, trusted=trusted,
                                  accept_expired=accept_expired)


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


#: The steps of one batch of a save, answered one by one.
BatchSteps = Generator["ReadStep | WriteStep", Any, None]


@attrs.frozen
class WriteFlow:
    """How much of a save may be on the way at once.

    Attributes:
        batches: batches whose calls may be out at the same time; ``1``
            sends one batch after the other.
        bytes: the most bytes of mutations out at the same time (estimated
            from keys, qualifiers and values; one batch may always go, however
            large).
        companions_with_main: send a batch's current-value and alternate-key
            writes together with its main-table write, once the main table
            has taken a write on this connection (see `SaveSchedule`);
            ``False`` always waits for the main outcome first.
        server_rate_limits: pace writes as the server asks (Cloud Bigtable's
            ``RateLimitInfo``: slow down by a factor, at most once per
            period; `tsmodel.plan.pacing`); ``False`` ignores it. The
            embedded store and the emulator never ask.
    """

    batches: int = attrs.field(default=4)
    bytes: int = attrs.field(default=64 * 2**20)
    companions_with_main: bool = attrs.field(default=True)
    server_rate_limits: bool = attrs.field(default=True)

    @batches.validator
    @bytes.validator
    def _positive(self, attribute: attrs.Attribute[Any], value: int) -> None:
        check_whole(attribute.name, value, what="WriteFlow field")

    @companions_with_main.validator
    @server_rate_limits.validator
    def _flag(self, attribute: attrs.Attribute[Any], value: bool) -> None:
        check_flag(attribute.name, value, what="WriteFlow field")


def check_write_options(batch_size: Any, flow: Any) -> None:
    """Refuse a connection's ``batch_size`` or ``flow`` of the wrong type or range.

    Raises:
        ConfigurationError: naming the option and the value.
    """
    check_whole("batch_size", batch_size)
    if not isinstance(flow, WriteFlow):
        raise errors.ConfigurationError(
            f"setting 'flow' must be a ts.WriteFlow (ts.WriteFlow(batches=4, ...)), "
            f"got {flow!r}")


#: The flow of a save unless told otherwise.
DEFAULT_FLOW = WriteFlow()

#: What `SaveSchedule.ready()` hands out: a ticket to answer with, and the
#: call to make (rows for a read, outcomes for a write).
Call = tuple[Any, "ReadRequest | TableWrite"]


class _Batch:
    """One batch of a save on its way: its steps, and the answers awaited."""

    __slots__ = ("number", "rows", "steps", "answers", "waiting", "size", "alone")

    def __init__(self, number: int, rows: range, steps: BatchSteps, size: int,
                 alone: bool) -> None:
        self.number = number
        self.rows = rows
        self.steps = steps
        self.answers: list[Any] = []
        self.waiting = 0
        self.size = size
        self.alone = alone


class _Footprint:
    """The cells one table write sets and the spans it deletes, row by row.

    Two writes to one table must land in input order when one sets a cell
    the other sets too (same row key and timestamp: Bigtable keeps the last
    written) or when one deletes a span of timestamps in a row where the
    other sets a cell (a current-value row clears the older cells of a value
    that is now ``None``). Columns are not told apart: a conflict found may
    be a false one, which only makes a call wait.
    """

    __slots__ = ("table", "cells", "deletes", "_times")

    def __init__(self, write: TableWrite) -> None:
        self.table = write.table
        cells: set[tuple[bytes, int]] = set()
        deletes: dict[bytes, tuple[int, int]] = {}
        for row in write.rows:
            key = row.key
            for m in row.mutations:
                kind = type(m)
                if kind is SetCell:
                    cells.add((key, m.timestamp))  # type: ignore[union-attr]
                    continue
                if kind is AddToCell:  # additions commute: no order to keep
                    continue
                if kind is DeleteCells:
                    start, end = m.timestamp_start, m.timestamp_end  # type: ignore[union-attr]
                    lo = start or 0
                    hi = _FOREVER if end is None else end
                else:  # a whole family or row
                    lo, hi = 0, _FOREVER
                was = deletes.get(key)
                deletes[key] = (lo, hi) if was is None else (min(lo, was[0]), max(hi, was[1]))
        self.cells = cells
        self.deletes = deletes
        self._times: dict[bytes, tuple[int, int]] | None = None

    def times(self) -> dict[bytes, tuple[int, int]]:
        """Per row key, the span of the timestamps of the cells it sets (made when asked)."""
        if self._times is None:
            times: dict[bytes, tuple[int, int]] = {}
            for key, ts in self.cells:
                was = times.get(key)
                times[key] = (ts, ts) if was is None else (min(ts, was[0]), max(ts, was[1]))
            self._times = times
        return self._times

    def conflicts(self, other: _Footprint) -> bool:
        """Whether the two writes must land in the order they were planned."""
        if other.table != self.table:
            return False
        if not self.cells.isdisjoint(other.cells):
            return True
        return _deletes_hit(self.deletes, other) or _deletes_hit(other.deletes, self)


_FOREVER = 2**63


def _deletes_hit(deletes: dict[bytes, tuple[int, int]], other: _Footprint) -> bool:
    if not deletes:
        return False
    times = other.times()
    for key, (lo, hi) in deletes.items():
        span = times.get(key)
        if span is not None and span[0] < hi and lo <= span[1]:
            return True
        if key in other.deletes:  # two deletions of one row: keep their order too
            return True
    return False


class SaveSchedule:
    """The calls of a save, handed out as soon as they may go (no I/O of its own).

    The batches of ``plan`` go in input order. Each batch reads what its
    corrections need (`WritePlan.prior_reads()`), writes its main-table
    rows, and writes its companion rows: with the main rows when its main
    tables have already taken a write of this connection (``trusted``), else
    once the main outcomes are in, so that an entity the main table refused
    gets none (a first save on a misconfigured table leaves no stray
    current-value or alternate rows).

    Up to ``flow.batches`` batches (and ``flow.bytes``) are out at once.
    A batch that reads first, reads its rollup buckets after its writes,
    or sends its companions after its main write, goes alone: what it
    reads must include every earlier write, and what it writes from its
    reads must land before any later write. Any
    other batch's writes are handed out at once, except a write that must
    land after one handed out before it and not yet answered: one that sets
    a cell it sets too, or deletes cells where it sets some, in the same
    row of the same table (`_Footprint`). Bigtable keeps the cell
    written last, so order is kept wherever it matters, and only there.

    An executor loops until `done`: it makes every call `ready()`
    hands out (concurrently or not), and `answer()` each one with the
    rows read (or the `BackendError` raised) or the
    outcomes written. Then `result()` folds the outcomes, one
    `EntityResult` per entity.

    Args:
        plan: the planned save.
        batch_size: entities per batch.
        flow: what may be out at once.
        trusted: main tables that have taken a write (shared by the saves of
            a connection; updated here as outcomes come in).
    """

    def __init__(self, plan: WritePlan, batch_size: int, flow: WriteFlow = DEFAULT_FLOW, *,
                 trusted: set[str] | None = None) -> None:
        self.plan = plan
        self.flow = flow
        self.trusted = set() if trusted is None else trusted
        n = len(plan.events)
        self._batches: Iterator[range] = iter([range(i, min(i + batch_size, n))
                                               for i in range(0, n, batch_size)])
        self._next: range | None = next(self._batches, None)
        #: A streamed save: the entities not yet encoded, and what stopped them.
        self._source: Iterator[Any] | None = None
        self._accept_expired = False
        self._error: errors.ValidationError | None = None
        self._out: dict[int, _Batch] = {}
        self._bytes = 0
        self._number = 0
        #: Writes handed out and not answered, and writes held back, by ticket.
        self._sent: dict[Any, _Footprint] = {}
        self._held: list[tuple[Any, TableWrite, _Footprint]] = []
        self._handed: list[Call] = []
        #: The last batch asked about, the trusted tables then, and (together, alone).
        self._kinds: tuple[range | None, int, tuple[bool, bool]] = (None, 0, (False, True))
        #: Called with a batch's number of entities once it is answered in full
        #: (the progress of a save); ``None``: nothing is called.
        self.on_batch: Callable[[int], None] | None = None

    @classmethod
    def streaming(cls, entities: Iterable[Any], batch_size: int,
                  flow: WriteFlow = DEFAULT_FLOW, *, trusted: set[str] | None = None,
                  accept_expired: bool = False) -> SaveSchedule:
        """A save that validates and encodes each batch as it goes.

        The next batch is encoded while earlier ones are on the way, and a
        batch's cells are let go once its calls are answered: memory holds
        the batches in flight and one result per entity, whatever the
        number of entities. An entity that cannot be stored stops the save
        at its batch: the batches before it are still answered, then
        `result()` raises its `ValidationError`
        with ``result`` set to theirs.
        """
        self = cls(WritePlan(()), batch_size, flow, trusted=trusted)
        self._source = iter(entities)
        self._accept_expired = accept_expired
        self._batches = self._encode_batches(batch_size)
        self._next = next(self._batches, None)
        return self

    def _encode_batches(self, batch_size: int) -> Iterator[range]:
        """Encode the source batch by batch (for `streaming()`)."""
        assert self._source is not None
        plan = self.plan
        while True:
            chunk = list(itertools.islice(self._source, batch_size))
            if not chunk:
                return
            try:
                events = encode_all(chunk)
                if not self._accept_expired:
                    problems = retention_problems(ev.entity for ev in events)
                    if problems:
                        raise errors.RetentionError(retention_message(problems), problems)
            except errors.ValidationError as exc:
                self._error = exc
                return
            start = len(plan.events)
            plan.extend(events)
            yield range(start, start + len(events))

    @property
    def done(self) -> bool:
        """Whether every batch has been answered in full."""
        return self._next is None and not self._out

    def ready(self) -> list[Call]:
        """The calls that may go now: (ticket, call) pairs, each to `answer()`."""
        while self._next is not None and self._may_start(self._next):
            self._start(self._next)
            self._next = next(self._batches, None)  # a streamed save encodes it now
        self._release()
        handed, self._handed = self._handed, []
        return handed

    def answer(self, ticket: Any, answer: Any) -> None:
        """The answer of one call: rows or a BackendError for a read, outcomes for a write."""
        number, index = ticket
        batch = self._out[number]
        self._sent.pop(ticket, None)
        batch.answers[index] = answer
        batch.waiting -= 1
        if batch.waiting == 0:
            self._advance(batch, batch.answers)

    def result(self) -> WriteResult:
        """One `EntityResult` per entity, in input order (once `done`)."""
        if not self.done:
            raise RuntimeError("the save is not done: answer every call first")
        if self._error is not None:
            self._error.result = self.plan.result()
            raise self._error
        return self.plan.result()

    def _kind(self, batch: range) -> tuple[bool, bool]:
        """Whether the batch sends its companions with its main rows, and whether it
        goes alone (it reads first, or sends its companions after its main rows).

        One pass over the batch, kept for the batch waiting to start (asked at
        every `ready()` until it starts, and while no table's trust changed)."""
        if self._kinds[0] is not batch or self._kinds[1] != len(self.trusted):
            together = self.flow.companions_with_main
            reads = False
            trusted, events = self.trusted, self.plan.events
            for i in batch:
                ev = events[i]
                reads = reads or (ev.spec is not None and _reads(ev.spec))
                together = together and ev.table in trusted
            self._kinds = (batch, len(self.trusted), (together, reads or not together))
        return self._kinds[2]

    def _may_start(self, batch: range) -> bool:
        out = self._out
        if not out:
            return True
        if len(out) >= self.flow.batches or self._bytes >= self.flow.bytes:
            return False
        return not any(b.alone for b in out.values()) and not self._kind(batch)[1]

    def _start(self, batch: range) -> None:
        events = self.plan.events
        size = sum(_size(events[i]) for i in batch)
        together, alone = self._kind(batch)
        self._number += 1
        job = _Batch(self._number, batch,
                     _batch_steps(self.plan, batch, together, self.trusted), size, alone)
        self._out[job.number] = job
        self._bytes += size
        self._advance(job, None)

    def _advance(self, batch: _Batch, answers: list[Any] | None) -> None:
        try:
            step = batch.steps.send(answers)
        except StopIteration:
            del self._out[batch.number]
            self._bytes -= batch.size
            if self._source is not None:
                self.plan.let_go(batch.rows)
            if self.on_batch is not None:
                self.on_batch(len(batch.rows))
            return
        batch.answers = [None] * len(step.calls)
        batch.waiting = len(step.calls)
        calls: tuple[ReadRequest | TableWrite, ...] = step.calls
        for i, call in enumerate(calls):
            ticket = (batch.number, i)
            if isinstance(call, TableWrite):
                self._held.append((ticket, call, _Footprint(call)))
            else:
                self._handed.append((ticket, call))

    def _release(self) -> None:
        """Hand out the held writes that need not wait for an earlier one."""
        if not self._held:
            return
        ahead = list(self._sent.values())
        still = []
        for ticket, write, footprint in self._held:
            if any(footprint.conflicts(other) for other in ahead):
                still.append((ticket, write, footprint))
            else:
                self._sent[ticket] = footprint
                self._handed.append((ticket, write))
            ahead.append(footprint)
        self._held = still


def _size(ev: EncodedEvent) -> int:
    """About the bytes an event sends: its main row, once per table it goes to."""
    size = len(ev.key)
    for m in ev.mutations:
        if type(m) is SetCell:  # the common case, without two getattr() calls
            size += 16 + len(m[1]) + len(m[3])
        else:
            size += 16 + len(getattr(m, "qualifier", b"")) + len(getattr(m, "value", b""))
    return size * (1 + (ev.current_key is not None) + len(ev.alternates))


def _batch_steps(plan: WritePlan, batch: range, together: bool,
                 trusted: set[str]) -> BatchSteps:
    """The steps of one batch: prior reads, the main and companion writes, then the
    rollup refresh."""
    reads = plan.prior_reads(batch)
    if reads:
        answers = yield ReadStep(tuple(reads))
        plan.absorb(batch, _found(plan, batch, reads, answers))
        stamps = plan.stamp_reads(batch)
        if stamps:  # corrections that move events in bucket rows with a version limit
            answers = yield ReadStep(tuple(stamps))
            plan.absorb_stamps(batch, _found(plan, batch, stamps, answers))
    main = plan.main_writes(batch)
    writes = [*main, *plan.companion_writes(batch)] if together else main
    if writes:
        outcomes = yield WriteStep(tuple(writes))
        for write, outcome in zip(writes, outcomes, strict=True):
            plan.record(write, outcome)
        for write, outcome in zip(main, outcomes, strict=False):
            _learn(trusted, write.table, outcome)
    if not together:
        # The companions are planned once the main outcomes are recorded:
        # an entity the main table refused gets none.
        companions = plan.companion_writes(batch)
        if companions:
            outcomes = yield WriteStep(tuple(companions))
            for write, outcome in zip(companions, outcomes, strict=True):
                plan.record(write, outcome)
    refresh = plan.rollup_refresh(batch)
    if refresh:
        yield from refresh_steps(refresh, plan.record)


def _reads(spec: ModelSpec) -> bool:
    """Whether a save of ``spec``'s events reads: corrections, or recomputed rollups."""
    return spec.corrections_read_first or any(r.mode == "recompute" for r in spec.rollups)


def refresh_steps(refresh: RollupRefresh, record: Callable[[TableWrite, Sequence[
        MutationOutcome]], None]) -> Generator[ReadStep | WriteStep, Any, None]:
    """Recompute rollup rows: read their buckets' events, then write them whole.

    The steps of a save's batch, a delete's and a repair's: ``record`` takes
    each write's outcomes (a failed read FAILS its slots' rows: ``PARTIAL``).
    """
    reads = refresh.plan_reads()
    answers = yield ReadStep(tuple(reads))
    rows, refused = refresh.rows(answers)
    for table, members, outcome in refused:
        record(TableWrite(table, (), (members,), grouped=True), (outcome,))
    writes = [TableWrite(table, tuple(r for _, r in items), tuple(m for m, _ in items),
                         grouped=True) for table, items in rows.items()]
    if writes:
        outcomes = yield WriteStep(tuple(writes))
        for write, outcome in zip(writes, outcomes, strict=True):
            record(write, outcome)


def _learn(trusted: set[str], table: str, outcomes: Sequence[MutationOutcome]) -> None:
    """Trust a main table that applied a write; stop trusting one that refused a whole call."""
    if any(o.status is MutationStatus.APPLIED for o in outcomes):
        trusted.add(table)
    elif outcomes and all(o.status is MutationStatus.FAILED for o in outcomes):
        trusted.discard(table)


def _found(plan: WritePlan, batch: range, reads: Sequence[ReadRequest],
           answers: Sequence[Sequence[Row] | BaseException]) -> dict[tuple[str, bytes], Row]:
    """The rows a batch's corrections need; a failed read fails its table's entities."""
    found: dict[tuple[str, bytes], Row] = {}
    for request, answer in zip(reads, answers, strict=True):
        if isinstance(answer, BaseException):
            plan.refuse(batch, request.table, answer)
        else:
            found.update(((request.table, row.key), row) for row in answer)
    return found
