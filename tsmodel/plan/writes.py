"""The write planner: events in, per-table mutations and per-entity results out.

Pure: it encodes, groups and folds; executors (`Connection`,
the repair and snapshot jobs) send what it plans and hand the outcomes back.

A save goes batch by batch. Each batch writes each event to its model's
main table and to the companion tables: the current-value table (one row per
entity key: the newest event of the batch stands for the others) and each
alternate-key table, and adds its events to the rows of increment rollups; last,
the rollup rows its events fall in are recomputed from the main table
(`tsmodel.plan.rollups`). `WritePlan.result()` folds the outcomes
into one `EntityResult` per entity (`tsmodel.plan.results`);
`tsmodel.plan.schedule.SaveSchedule` hands the calls out.
"""

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any, cast

from tsmodel import errors
from tsmodel.declare import sizing
from tsmodel.declare.spec import ModelSpec, instance_spec
from tsmodel.ground.base import (
    DeclaredColumns,
    DeclaredRows,
    DeleteCells,
    Mutation,
    MutationOutcome,
    ReadRequest,
    Row,
    RowMutation,
    SetCell,
)
from tsmodel.layouts import EncodedRow
from tsmodel.plan.events import (
    CheckedEvents,
    EncodedEvent,
    LayOut,
    PlainRows,
    check_all,
    encode,
    encode_event,
)
from tsmodel.plan.results import Outcomes, TableRole, TableWrite, WriteResult
from tsmodel.plan.retention import retention_message, retention_problems
from tsmodel.plan.rollups import Increments, RollupRefresh
from tsmodel.plan.versions import erase, past_limit, timestamps_read, version_limit, written_cells

_MS = 1_000
#: The most cell timestamps one prior read filters by (`WritePlan.prior_reads()`):
#: the embedded store tests them in SQL, a parameter each (its limit: 32,766).
_TIMES_PER_READ = 5_000
#: The most reads of one table's rows by their own times in a batch; past it, one
#: read of all the batch's times (`WritePlan.prior_reads()`).
_GROUP_READS = 16
#: A checked tuple's row key and event time.
_KEY_AND_TIME = itemgetter(0, 1)
#: A checked tuple's row key.
_KEY = itemgetter(0)
#: What stands for a plain event once its batch is answered (see `WritePlan.let_go()`).
_WRITTEN = cast("EncodedEvent", None)

#: ``EncodedEvent`` and ``encode_event`` (tsmodel.plan.events) stay importable from here.
__all__ = ["WritePlan", "prepare_save", "EncodedEvent", "encode_event"]


def _distinct_events(tuples: list[tuple[Any, ...]]) -> bool:
    """Whether no two checked tuples share their row key and event time: most often
    their row keys alone differ (a set of the keys, no pair made per event)."""
    return len(set(map(_KEY, tuples))) == len(tuples) or \
        len(set(map(_KEY_AND_TIME, tuples))) == len(tuples)


class WritePlan:
    """The writes of a batch of encoded events, and the fold of their outcomes.

    Args:
        events: the encoded events, in input order; or `check_all()`'s
            `CheckedEvents`, laid out batch by batch (`lay_out()`).
        order: where the events are planned in another order than the
            input's (`prepare_save()`), the input index of each; `result()`
            answers in input order.
    """

    def __init__(self, events: Sequence[EncodedEvent] | CheckedEvents,
                 order: Sequence[int] | None = None) -> None:
        self._order = order
        if isinstance(events, CheckedEvents):
            #: Per entity, the function that lays its checked tuple out (or None).
            self._lay_outs: list[LayOut | None] = events.lay_outs
            self.entities: list[Any] = events.entities
            self.events = cast("list[EncodedEvent]", events.events)
            self._plain_of: dict[LayOut, PlainRows] = events.plain
            #: The events' main-table rows as columns, where they came with them.
            self._columns: DeclaredColumns | None = events.columns
        else:
            self.events = list(events)
            self.entities = [ev.entity for ev in self.events]
            self._lay_outs = []
            self._plain_of = {}
            self._columns = None
        #: The batches (by their first index) written as their checked tuples.
        self._plain: dict[int, tuple[range, PlainRows]] = {}
        #: Per entity: its main outcome and each table's.
        self.outcomes = Outcomes(len(self.events))
        #: The checked tuples of the events laid out by `lay_out()`, until
        #: `let_go()` puts them back.
        self._checked: dict[int, tuple[Any, ...]] = {}
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

    def lay_out(self, batch: range) -> None:
        """Lay the cells of the batch's checked events out (before planning its writes).

        A batch of one model's events that need no laying out (`PlainRows`:
        the common case), none twice, stays its checked tuples: its writes
        carry them down to the backend (`DeclaredRows`)."""
        events: list[Any] = self.events  # checked tuples until laid out here
        lay_outs, entities, checked = self._lay_outs, self.entities, self._checked
        if self.plain(batch) is not None:
            return
        if batch and self._plain_of and type(events[batch[0]]) is tuple:
            first = lay_outs[batch[0]]
            plain = self._plain_of.get(first)  # type: ignore[arg-type]
            tuples = events[batch.start:batch.stop]
            if plain is not None and lay_outs[batch.start:batch.stop].count(first) == len(batch) \
                    and set(map(type, tuples)) == {tuple} \
                    and _distinct_events(tuples):
                # (Versions of one event, same row and time, go as one write: laid out.)
                self._plain[batch.start] = (batch, plain)
                return
        for i in batch:
            ev = events[i]
            if type(ev) is tuple:
                lay_out = lay_outs[i]
                assert lay_out is not None
                checked[i] = ev
                events[i] = lay_out(entities[i], ev)

    def plain(self, batch: range) -> PlainRows | None:
        """The `PlainRows` of a batch written as its checked tuples, else ``None``."""
        found = self._plain.get(batch.start)
        return found[1] if found is not None and found[0] == batch else None

    def extend(self, events: Sequence[EncodedEvent] | CheckedEvents) -> None:
        """Plan more events after those planned (a streamed save's next batch): encoded
        events, or `check_all()`'s, laid out batch by batch as the constructor's."""
        if isinstance(events, CheckedEvents):
            lay_outs = self._lay_outs
            lay_outs.extend([None] * (len(self.events) - len(lay_outs)))
            lay_outs.extend(events.lay_outs)
            self._plain_of.update(events.plain)
            self.entities.extend(events.entities)
            self.events.extend(cast("list[EncodedEvent]", events.events))
            self.outcomes.extend(len(events.entities))
            return
        self.events.extend(events)
        self.entities.extend(ev.entity for ev in events)
        self.outcomes.extend(len(events))

    def let_go(self, batch: range) -> None:
        """Drop the events of a batch whose calls are answered: nothing reads them again
        (the results are the entities' and the outcomes), and a streamed save keeps
        none of their cells or values."""
        self._plain.pop(batch.start, None)
        for kept in (self._checked, self._stale, self._moved, self._moved_alt):
            if kept:  # a batch of plain events has none
                for i in batch:
                    kept.pop(i, None)
        self.events[batch.start:batch.stop] = [_WRITTEN] * len(batch)

    # -- corrections ------------------------------------------------------------------

    def prior_reads(self, batch: range) -> list[ReadRequest]:
        """The reads of stored events that the events of ``batch`` may correct.

        Only models whose cells depend on their values (``corrections_read_first``)
        need them: reads of the batch's rows in each main table, of the cells at
        the timestamps the batch's events write in them (a stored event they
        correct has its cells there: same key and time) and no others. A bucket
        row holds every event saved into it: a shuffled batch spans the whole
        bucket, and reading its span back made each save read all the events
        before it. Rows whose events have the same times are read together (at
        most `_GROUP_READS` reads, else one of every time); more times than a
        read's filter takes (`_TIMES_PER_READ`) are read in several. A layout
        that counts versions per column reads more than `_GROUP_READS` times by
        their span instead. Hand the rows to `absorb()`.
        """
        if self.plain(batch) is not None:
            return []
        wanted: dict[str, tuple[ModelSpec, dict[bytes, set[int]]]] = {}
        for i in batch:
            ev = self.events[i]
            if ev.spec is not None and ev.spec.corrections_read_first:
                times_of = wanted.setdefault(ev.table, (ev.spec, {}))[1]
                times_of.setdefault(ev.key, set()).update(_cell_times(ev))
        reads = []
        for table, (spec, times_of) in wanted.items():
            # Rows with the same times share a read; rows of many different times
            # (a shuffled save of many entities) share one of all their times.
            groups: dict[frozenset[int], list[bytes]] = {}
            for key, times in times_of.items():
                groups.setdefault(frozenset(times), []).append(key)
            if len(groups) > _GROUP_READS:
                groups = {frozenset().union(*groups): list(times_of)}
            # Every version: a stored cell past the version limit is still there
            # until GC runs, and must not come back beside the correction.
            versions = spec.codec.layout.read_versions
            for group, keys in groups.items():
                ordered = sorted(group)
                if versions is not None and len(ordered) > _GROUP_READS:
                    # Cells counted per column: the times cannot be kept by the
                    # backend after the count, and as the server's filter, an
                    # interleave of a range per time, many outgrow the 20 KB
                    # Cloud Bigtable takes. Their span, as before (such rows hold
                    # few events: a row per event).
                    reads.append(spec.rows_read(
                        keys, table=table, timestamp_start=ordered[0] // _MS * _MS,
                        timestamp_end=ordered[-1] // _MS * _MS + _MS,
                        cells_per_column=versions))
                    continue
                for at in range(0, len(ordered), _TIMES_PER_READ):
                    reads.append(spec.rows_read(
                        keys, table=table, timestamps=ordered[at:at + _TIMES_PER_READ],
                        cells_per_column=versions))
        return reads

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
                    self.events[i] = ev = self._correct(i, ev, encode(ev.spec, old))

    def refuse(self, batch: range, table: str, error: BaseException) -> None:
        """FAIL the events of ``batch`` in main table ``table``: nothing is sent for them.

        For a prior read of ``table`` that failed: without it, a correction
        could leave cells of the event it replaces (or, an alternate-key
        table's timestamps, bring back an event past its version limit).
        Their companions are not attempted either, as for any FAILED main write.
        """
        # What refused an entity stands for its main outcome, whatever the table.
        for i in batch:
            if self.events[i].table == table or any(
                    alt.table == table for alt, _, _ in self._moved_alt.get(i, ())):
                self.outcomes.not_sent(i, TableRole.MAIN, table, error)
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
                        written_cells(encoded.mutations))
        for i in batch:
            cells = self._moved.pop(i, None)
            ev = self.events[i]
            row = found.get((ev.table, ev.key))
            if cells is None or row is None or i in self._refused:
                continue
            assert ev.spec is not None
            past = past_limit(ev.spec, row.cells, cells) - written[(ev.table, ev.key)]
            if past:
                self.events[i] = ev._replace(mutations=erase(past) + ev.mutations,
                                              declared=None)
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
        return ev._replace(mutations=mutations, alternates=tuple(alternates), declared=None)

    def main_writes(self, batch: range) -> list[TableWrite]:
        """The main-table writes of the events in ``batch``, one per table.

        Several versions of one event (same table, key and time) in a batch
        are one write, of the last in input order: Bigtable does not apply the
        entries of a bulk call in order. The earlier versions share its outcome.
        Versions whose cells carry different times (amendments stamped with
        their version time) write different cells, and are each written.
        """
        plain = self.plain(batch)
        if plain is not None:  # one table, each event once: its checked tuples
            checked: list[Any] = self.events[batch.start:batch.stop]
            columns = self._columns
            rows = DeclaredRows(plain.declared, checked, 0, None if columns is None else
                                columns[batch.start:batch.stop])
            return [TableWrite(plain.table, rows, tuple(batch), role=TableRole.MAIN)]
        self._dedupe(batch)
        by_table: dict[str, list[int]] = {}
        skipped = self._superseded | self._refused
        for i in batch:
            if i not in skipped:
                by_table.setdefault(self.events[i].table, []).append(i)
        return [self._write(table, [(i, self.events[i].row_mutation()) for i in winners],
                            TableRole.MAIN) for table, winners in by_table.items()]

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

    def _write(self, table: str, rows: list[tuple[int, RowMutation]],
               role: TableRole) -> TableWrite:
        """A table write of ``rows`` for their entities (and those they supersede)."""
        mutations = tuple([row for _, row in rows])
        if not self._groups:
            return TableWrite(table, mutations, tuple(i for i, _ in rows), role=role)
        return TableWrite(table, mutations, tuple(tuple(self._groups.get(i, (i,)))
                                                  for i, _ in rows), grouped=True, role=role)

    def companion_writes(self, batch: range) -> list[TableWrite]:
        """The current-value, alternate-key and increment-rollup writes of ``batch``.

        Entities whose main write FAILED get none. Call it after the main
        step's outcomes are recorded (an entity with no recorded main outcome
        counts as written, which is how a repair replays companions).
        """
        failed = self.outcomes.failed
        plain = self.plain(batch)
        if plain is not None:
            if plain.current_table is None:
                return []
            return self._plain_current_writes(plain, self.outcomes.not_failed(batch))
        live = [i for i in batch if i not in self._superseded and not failed(i)]
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
                                  grouped=True, role=TableRole.CURRENT))
        return out

    def _plain_current_writes(self, plain: PlainRows, live: Sequence[int]) -> list[TableWrite]:
        """`_current_writes()` of a batch of checked tuples: the newest event per
        current-value key (the tuple's last item) stands for the others.

        The same rows and members as a loop over the events would give (keys in
        the order they first come, each key's entities in order, the newest
        the last of those at the latest time), in whole-list steps: the
        entities grouped by key by a stable sort, each group's newest found by
        ``max`` and ``index``."""
        events: list[Any] = self.events
        entities = list(live)
        if not entities:
            return []
        rows = list(map(events.__getitem__, entities))
        keys = list(map(_LAST, rows))
        if keys.count(keys[0]) == len(keys):  # one key (one entity's events)
            groups = [entities]
        else:
            order = sorted(range(len(keys)), key=keys.__getitem__)
            groups = sorted((list(map(entities.__getitem__, run))
                             for _, run in groupby(order, keys.__getitem__)), key=_FIRST)
        checked = []
        for group in groups:
            times = list(map(_TIME, map(events.__getitem__, group)))
            latest = max(times)
            checked.append(events[group[len(times) - 1 - times[::-1].index(latest)]])
        assert plain.current_table is not None
        return [TableWrite(plain.current_table,
                           DeclaredRows(plain.declared, checked, len(checked[0]) - 1),
                           tuple(map(tuple, groups)), grouped=True, role=TableRole.CURRENT)]

    def _alternate_writes(self, live: list[int]) -> list[TableWrite]:
        by_table: dict[str, list[tuple[int, RowMutation]]] = {}
        for i in live:
            for row in (*self._stale.get(i, ()), *self.events[i].alternates):
                by_table.setdefault(row.table, []).append((i, row.row_mutation()))
        return [self._write(table, items, TableRole.ALTERNATE)
                for table, items in by_table.items()]

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
                           grouped=True, role=TableRole.ROLLUP)
                for table, items in increments.rows().items()]

    def rollup_refresh(self, batch: range) -> RollupRefresh:
        """The recompute of the rollup rows that the batch's events fall in.

        Entities whose main write FAILED are left out (nothing changed for
        them); call it once the main outcomes are recorded.
        """
        refresh = RollupRefresh()
        if self.plain(batch) is not None:
            return refresh  # no rollup
        failed = self.outcomes.failed
        for i in batch:
            ev = self.events[i]
            if ev.spec is None or not ev.spec.rollups or i in self._superseded or failed(i):
                continue
            refresh.add(ev.spec, ev.entity, self._groups.get(i, (i,)), recomputed_only=True)
        return refresh

    def record(self, write: TableWrite, outcomes: Sequence[MutationOutcome]) -> None:
        """Record the backend's outcome of each row of ``write``."""
        self.outcomes.record(write, outcomes)

    def failures(self) -> int:
        """How many recorded row outcomes were not APPLIED (a repair's count)."""
        return self.outcomes.failures()

    def result(self) -> WriteResult:
        """One `EntityResult` per event, in input order."""
        return WriteResult(self.outcomes.results(self.entities, self._order))


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
    # The main row's cells, where both tables lay them out alike: written as declared.
    return RowMutation(ev.current_key, mutations, None,
                       ev.declared if mutations is ev.mutations else None)


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
    kept = set() if new is None else set(written_cells(new.mutations))
    return erase(cell for cell in written_cells(old.mutations) if cell not in kept)


def _cell_times(ev: EncodedEvent) -> set[int]:
    """The timestamps of the cells an event writes (its event time's millisecond,
    whatever it writes): those of a stored event it may correct."""
    times = {ev.timestamp // _MS * _MS}
    times.update(m.timestamp for m in ev.mutations if type(m) is SetCell)
    return times


def _cell_time(ev: EncodedEvent) -> int:
    """The timestamp of the cells an event sets: its time floored to the millisecond,
    or its version time (a model with a version field stamps every cell with it)."""
    return next((m.timestamp for m in ev.mutations if type(m) is SetCell),
                ev.timestamp // _MS * _MS)



# -- the sequence of a save, for any executor ------------------------------------


def prepare_save(entities: Iterable[Any], accept_expired: bool) -> WritePlan:
    """Validate and encode every entity, check retention, and plan the writes.

    Raises:
        ValidationError: an entity cannot be stored; nothing is planned.
        RetentionError: unless ``accept_expired``, events already older than
            a family's max age.
    """
    checked = check_all(entities)
    if not accept_expired:
        problems = retention_problems(checked.entities)
        if problems:
            raise errors.RetentionError(retention_message(problems), problems)
    # Checked events are laid out batch by batch (`WritePlan.lay_out()`, called
    # by the schedule before it plans a batch).
    order = _row_order(checked)
    if order is None:
        return WritePlan(checked)
    entities, events = checked.entities, checked.events
    return WritePlan(checked._replace(entities=[entities[i] for i in order],
                                      events=[events[i] for i in order]), order)


def _limit_unreached(spec: ModelSpec) -> bool:
    """Whether no column of ``spec``'s bucket rows holds more versions than it keeps,
    while its entities keep to the declared ``max_rate`` (or it keeps every one)."""
    limit = version_limit(spec)
    if limit is None:
        return True
    needed = sizing.events_per_bucket(spec)
    return needed is not None and needed <= limit


#: More than any version limit.
_FOREVER = 2**63
#: A checked tuple's current-value key (its last item) and event time (item 1); a
#: list's first item.
_LAST, _TIME, _FIRST = itemgetter(-1), itemgetter(1), itemgetter(0)
#: An encoded event's table, row key and event time; its table and row key.
_ROW_AND_TIME = itemgetter(1, 2, 3)
_ROW = itemgetter(1, 2)


def _row_order(checked: CheckedEvents) -> list[int] | None:
    """The order to write a validated save's events in where it is not the input's:
    by table, row key and event time, for events that read before they write
    because their cells depend on their values (``ts.columns()``: a correction
    deletes the column the old value wrote), ``None`` for any other save.

    A prior read filters by the batch's cell times, and past a few runs of
    times the server sends their span (`tsmodel.backends.bigtable`): in input
    order, each batch of a shuffled save spans its rows' whole bucket, and
    reading it brought back every event saved before it. In row order a row's
    batches span times apart. The order changes nothing stored: versions of
    one event (same row and time) keep their input order (a stable sort), and
    events of other rows or times write other cells, whose order Bigtable does
    not keep. Only models without alternate-key tables or rollups (their rows
    may gather events of several main rows) are taken, and whose version limit
    no column reaches at the declared ``max_rate`` (which events a correction
    pushes past the limit depends on what came before it).
    """
    events = checked.events
    if len(events) < 2 or any(lay_out is not None for lay_out in checked.lay_outs):
        return None  # checked apart from laid out: cells that do not depend on values
    seen: ModelSpec | None = None
    limit = _FOREVER
    for ev in events:  # mostly one model's: its spec checked once
        spec = ev.spec
        if spec is not seen:
            if spec is None or not spec.layout.cells_depend_on_values or spec.alternates \
                    or spec.rollups or not _limit_unreached(spec):
                return None
            seen = spec
            limit = min(limit, version_limit(spec) or _FOREVER)
    if len(events) > limit and max(Counter(map(_ROW, events)).values()) > limit:
        return None  # more events in a row than max_rate lets in: input order
    keys = list(map(_ROW_AND_TIME, events))
    order = sorted(range(len(events)), key=keys.__getitem__)
    return None if all(i == n for n, i in enumerate(order)) else order


