"""The delete planner: events out of every table of their model, per-entity results.

Pure, like `tsmodel.plan.writes`: `delete_steps()` yields the
reads and writes a delete needs (`ReadStep`,
`WriteStep`: steps of `tsmodel.plan.calls` that go together) and receives
their answers; the drivers of `tsmodel.run.drive` carry them out
(``Connection.delete_all``, ``AsyncConnection.delete_all``).

A batch of deletes takes up to four round trips (six with rollups; one
more where an event is named with other values of an alternate key's
fields than stored, and that table keeps a version limit):

1. read the events' main rows (every stored version of each event, and
   the other events of a row they share), their current-value rows and
   their rows in the snapshot table of their period, and, for bucket rows
   with a version limit, the cell timestamps of their main and
   alternate-key rows, concurrently;
2. delete exactly the cells each stored version wrote in the main table
   (a bucket row keeps its other events' cells, and the key columns they
   share), and, in a bucket row with a version limit, the events a version
   of which is past the limit in a column it deletes from: pushed past the
   limit is gone for good (`tsmodel.plan.versions`);
3. only where a current-value row shows an event being deleted (or could
   not be read): read the entity's newest remaining event from the main
   table, newest first with a row limit where the backend scans in
   reverse (else the entity's whole history in the main table);
4. delete the events' cells from their alternate-key rows, from the
   snapshot table of their period (a period not built has no table: nothing
   to delete) and from the current-value row, and write the newest
   remaining event there (or nothing: the row is then gone), concurrently;
5. for a model with rollups, read the events left in the buckets the
   deleted events fell in and write those rollup rows anew (or delete them:
   a bucket left empty has no row), as a save does
   (`tsmodel.plan.rollups`).

Each entity's result is a `EntityResult`:
``WRITTEN`` means the deletion was written to the main table and every
companion table; ``FAILED`` that the main table refused it (nothing else
was sent); ``UNKNOWN`` that the main deletion may or may not have
happened (delete again: a deletion is idempotent); ``PARTIAL`` that a
companion deletion failed (``ts.repair`` over the event's time fixes it).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec, instance_spec
from tsmodel.ground.base import (
    DeleteCells,
    Features,
    Mutation,
    MutationOutcome,
    ReadRequest,
    Row,
    RowMutation,
    SetCell,
)
from tsmodel.plan.events import EncodedEvent, encode, encode_event
from tsmodel.plan.reads import QueryState, compile_query, time_span
from tsmodel.plan.results import (
    Outcomes,
    ReadStep,
    TableRole,
    TableWrite,
    WriteResult,
    WriteStep,
    send_writes,
)
from tsmodel.plan.rollups import RollupRefresh, refresh_steps
from tsmodel.plan.versions import (
    CellId,
    erase,
    past_limit,
    timestamps_read,
    version_limit,
    written_cells,
)

__all__ = ["DeletePlan", "delete_steps"]

_MS = 1_000

#: The steps of a delete: answered like a save's, returning its result.
DeleteSteps = Generator["ReadStep | WriteStep", Any, WriteResult]


class DeletePlan:
    """The deletes of some events, and the fold of their outcomes.

    Args:
        entities: model instances (of one model or several): each names the
            event (key fields and time) to delete. Its values need not be
            the stored ones: the stored versions are read and erased.
        features: the capabilities of the backend it runs on (reverse scans).

    Raises:
        ValidationError: an entity's key or time cannot be encoded.
    """

    def __init__(self, entities: Iterable[Any], features: Features | None = None) -> None:
        if isinstance(entities, type):  # delete_all(M) for delete_all([M(...), ...])
            instance_spec(entities)
        specs: dict[type, ModelSpec] = {}
        events = []
        for e in entities:
            spec = specs.get(type(e))
            if spec is None:
                spec = specs[type(e)] = instance_spec(e)
            events.append(encode_event(spec, e)._replace(spec=spec))
        self.events: list[EncodedEvent] = events
        self.features = features
        #: Per entity: its main outcome and each table's.
        self.outcomes = Outcomes(len(events))
        #: Per entity: its stored versions, encoded (the given event among them).
        self._versions: list[list[EncodedEvent]] = [[ev] for ev in events]
        #: Per entity: cells its main row keeps for other events (survivors).
        self._kept: dict[int, set[CellId]] = {}
        #: Per current-value row (table, key): the time of the event it shows,
        #: or None when it could not be read; absent: no such row.
        self._shown: dict[tuple[str, bytes], int | None] = {}
        #: Per current-value row: its newest remaining event (None: none).
        self._newest: dict[tuple[str, bytes], EncodedEvent | None] = {}
        #: Current-value rows whose newest remaining event could not be read.
        self._unread: set[tuple[str, bytes]] = set()
        #: Per entity of a model with snapshots: its row in its period's snapshot
        #: table (table, key), the cells to delete there, or the error reading it.
        self._snapshots: dict[int, tuple[str, bytes, tuple[Mutation, ...]] | BaseException] = {}
        #: Per bucket row with a version limit (table, key): its cells, values stripped.
        self._stamps: dict[tuple[str, bytes], Row] = {}
        #: Alternate-key tables whose rows' timestamps could not be read: the error.
        self._unstamped: dict[str, BaseException] = {}
        #: Per entity: the cell timestamps of the events past the version limit its
        #: main deletion takes with it (their current-value cells go too).
        self._pushed: dict[int, set[int]] = {}
        #: Per current-value row read: the columns it holds.
        self._columns: dict[tuple[str, bytes], set[tuple[str, bytes]]] = {}

    # -- round trip 1: what is stored ---------------------------------------------

    def stored_reads(self, batch: range) -> list[ReadRequest]:
        """The reads of the batch's main rows and current-value rows."""
        # What a batch learns of current-value rows is its own: a later batch
        # reads them again, after this one's writes.
        self._shown.clear()
        self._newest.clear()
        self._unread.clear()
        self._stamps.clear()
        self._unstamped.clear()
        self._columns.clear()
        main: dict[str, tuple[ModelSpec, set[bytes], list[int]]] = {}
        current: dict[str, tuple[ModelSpec, set[bytes]]] = {}
        for i in batch:
            ev = self.events[i]
            spec = ev.spec
            assert spec is not None
            _, keys, times = main.setdefault(ev.table, (spec, set(), []))
            keys.add(ev.key)
            times.append(ev.timestamp)
            if ev.current_table is not None and ev.current_key is not None:
                current.setdefault(ev.current_table, (spec, set()))[1].add(ev.current_key)
        out = []
        for table, (spec, keys, times) in main.items():
            whole = spec.key_columns or spec.version_field or not spec.event_time_cells
            out.append(spec.rows_read(
                keys, table=table,
                # Cells shared by the row's events (key columns) and version-stamped
                # cells are not in the events' time span: read the whole rows.
                timestamp_start=None if whole else min(times) // _MS * _MS,
                timestamp_end=None if whole else max(times) // _MS * _MS + _MS))
        for table, (spec, keys) in current.items():
            out.append(spec.rows_read(keys, table=table, cells_per_column=1))
        snapshots: dict[str, tuple[ModelSpec, set[bytes]]] = {}
        for i in batch:
            ev = self.events[i]
            assert ev.spec is not None
            if ev.spec.snapshot is not None:
                snap = ev.spec.snapshot.spec_for(ev.timestamp)
                snapshots.setdefault(snap.table, (snap, set()))[1].add(
                    snap.codec.encode(ev.entity).key)
        for spec, keys in snapshots.values():  # whole rows: the events they keep
            out.append(spec.rows_read(keys))
        # Bucket rows with a version limit: every cell's timestamp, for the versions
        # past the limit that go with the deleted cells.
        limited: dict[str, tuple[ModelSpec, set[bytes]]] = {}
        for i in batch:
            ev = self.events[i]
            assert ev.spec is not None
            if version_limit(ev.spec) is not None:
                limited.setdefault(ev.table, (ev.spec, set()))[1].add(ev.key)
            for alt, row in zip(ev.spec.alternates, ev.alternates, strict=True):
                if version_limit(alt) is not None:
                    limited.setdefault(alt.table, (alt, set()))[1].add(row.key)
        out.extend(timestamps_read(spec, keys) for spec, keys in limited.values())
        return out

    def absorb(self, batch: range, requests: Sequence[ReadRequest],
               answers: Sequence[Sequence[Row] | BaseException]) -> None:
        """Take in the rows `stored_reads()` asked for.

        A main read that failed FAILS its entities (nothing is sent for
        them); a current-value read that failed makes the row's newest
        remaining event be read and written, as if it showed a deleted one.
        """
        found: dict[tuple[str, bytes], Row] = {}
        failed: dict[str, BaseException] = {}
        for request, answer in zip(requests, answers, strict=True):
            stamps = request.filter.strip_values
            if isinstance(answer, BaseException):
                # A main table's: its entities fail (nothing is sent); an alternate's:
                # its deletions fail (PARTIAL).
                failed[request.table] = answer
                if stamps:
                    self._unstamped[request.table] = answer
            else:
                (self._stamps if stamps else found).update(
                    ((request.table, row.key), row) for row in answer)
        doomed: dict[tuple[str, bytes], set[int]] = {}
        for i in batch:
            ev = self.events[i]
            doomed.setdefault((ev.table, ev.key), set()).add(ev.timestamp)
            if ev.spec is not None and ev.spec.snapshot is not None:
                snap = ev.spec.snapshot.spec_for(ev.timestamp)
                doomed.setdefault((snap.table, snap.codec.encode(ev.entity).key),
                                  set()).add(ev.timestamp)
        for i in batch:
            ev = self.events[i]
            spec = ev.spec
            assert spec is not None
            if ev.table in failed:
                self.outcomes.not_sent(i, TableRole.MAIN, ev.table, failed[ev.table])
                continue
            row = found.get((ev.table, ev.key))
            if row is not None:
                gone = doomed[(ev.table, ev.key)]
                kept = self._kept.setdefault(i, set())
                for old in spec.codec.decode(type(ev.entity), row, history=True):
                    encoded = encode(spec, old)
                    if encoded.timestamp == ev.timestamp:
                        self._versions[i].append(encoded)
                    elif encoded.timestamp not in gone:
                        kept.update(written_cells(encoded.mutations))
            if spec.snapshot is not None:
                self._absorb_snapshot(i, spec, found, failed, doomed)
            slot = self._slot(ev)
            if slot is None or slot in self._shown:
                continue
            if slot[0] in failed:
                self._shown[slot] = None
                continue
            current = found.get(slot)
            codec = spec.current_codec
            assert codec is not None
            shown = codec.decode(type(ev.entity), current) if current is not None else []
            if current is not None:
                self._columns[slot] = {(c.family, c.qualifier) for c in current.cells}
            if shown:
                self._shown[slot] = codec.time_of(shown[0])
                # Its cells are erased with the deleted event's, if it is one of them.
                encoded = encode(spec, shown[0])
                for j in batch:
                    if self._slot(self.events[j]) == slot and \
                            self.events[j].timestamp == encoded.timestamp:
                        self._versions[j].append(encoded)

    def _absorb_snapshot(self, i: int, spec: ModelSpec, found: dict[tuple[str, bytes], Row],
                         failed: dict[str, BaseException],
                         doomed: dict[tuple[str, bytes], set[int]]) -> None:
        """(``doomed``: the times deleted in the batch, by table and row key.)

        The cells to delete from the snapshot table of the event's period:
        those of the event's versions there, but not those the row's other
        events share (key columns). A period not built has no table: nothing."""
        assert spec.snapshot is not None
        ev = self.events[i]
        snap = spec.snapshot.spec_for(ev.timestamp)
        if snap.table in failed:
            error = failed[snap.table]
            if not isinstance(error, errors.TableNotFoundError):
                self._snapshots[i] = error
            return
        key = snap.codec.encode(ev.entity).key
        row = found.get((snap.table, key))
        if row is None:
            return  # the snapshot does not hold it
        gone = doomed.get((snap.table, key), set())
        cells: set[CellId] = set()
        kept: set[CellId] = set()
        held = snap.codec.decode(type(ev.entity), row, history=True)
        for version in [*(v.entity for v in self._versions[i]), *(
                old for old in held if snap.codec.time_of(old) == ev.timestamp)]:
            cells.update(written_cells(snap.codec.encode(version).mutations))
        for other in held:
            if snap.codec.time_of(other) not in gone:
                kept.update(written_cells(snap.codec.encode(other).mutations))
        self._snapshots[i] = (snap.table, key, erase(cells - kept))

    def _stored(self, i: int) -> list[EncodedEvent]:
        """The stored versions of entity ``i``'s event, or the given event where none
        was read (its deletion retried after the main row went: its own rows)."""
        return self._versions[i][1:] or self._versions[i]

    def alternate_stamp_reads(self, batch: range) -> list[ReadRequest]:
        """The cell timestamps of the stored events' version-limited alternate rows
        that `stored_reads()` did not read: an entity given with other values of
        the alternate key's fields than stored names other rows (rare: a second
        round trip only then)."""
        limited: dict[str, tuple[ModelSpec, set[bytes]]] = {}
        for i in self._pending(batch):
            spec = self.events[i].spec
            assert spec is not None
            for v in self._versions[i][1:]:
                for alt, row in zip(spec.alternates, v.alternates, strict=True):
                    if version_limit(alt) is not None and alt.table not in self._unstamped \
                            and (alt.table, row.key) not in self._stamps:
                        limited.setdefault(alt.table, (alt, set()))[1].add(row.key)
        return [timestamps_read(spec, keys) for spec, keys in limited.values()]

    def absorb_stamps(self, requests: Sequence[ReadRequest],
                      answers: Sequence[Sequence[Row] | BaseException]) -> None:
        """Take in the rows `alternate_stamp_reads()` asked for (a failed read fails
        the table's alternate deletions: PARTIAL)."""
        for request, answer in zip(requests, answers, strict=True):
            if isinstance(answer, BaseException):
                self._unstamped[request.table] = answer
            else:
                self._stamps.update(((request.table, row.key), row) for row in answer)

    @staticmethod
    def _slot(ev: EncodedEvent) -> tuple[str, bytes] | None:
        if ev.current_table is None or ev.current_key is None:
            return None
        return ev.current_table, ev.current_key

    # -- round trip 2: the main table ---------------------------------------------

    def main_writes(self, batch: range) -> list[TableWrite]:
        """Deletions of exactly the cells each event's stored versions wrote."""
        by_table: dict[str, list[tuple[int, RowMutation]]] = {}
        for i in self._pending(batch):
            ev = self.events[i]
            assert ev.spec is not None
            kept = self._kept.get(i, set())
            cells = [c for v in self._versions[i] for c in written_cells(v.mutations)
                     if c not in kept]
            past = self._past_limit(ev.spec, ev.key, cells)
            if past:
                cells.extend(past)
                self._pushed[i] = {ts for _, _, ts in past}
            by_table.setdefault(ev.table, []).append((i, RowMutation(ev.key, erase(cells))))
        return [TableWrite(table, tuple(r for _, r in rows), tuple(i for i, _ in rows),
                           role=TableRole.MAIN) for table, rows in by_table.items()]

    def _past_limit(self, spec: ModelSpec, key: bytes, cells: list[CellId]) -> set[CellId]:
        """The cells of events past the version limit that go with ``cells``."""
        row = self._stamps.get((spec.table, key))
        return past_limit(spec, row.cells, cells) if row is not None and cells else set()

    def _pending(self, batch: range) -> list[int]:
        """The entities of ``batch`` with nothing recorded yet (not refused)."""
        return [i for i in batch if not self.outcomes.recorded(i)]

    def _live(self, batch: range) -> list[int]:
        """The entities whose main deletion was not refused."""
        recorded, failed = self.outcomes.recorded, self.outcomes.failed
        return [i for i in batch if recorded(i) and not failed(i)]

    # -- round trip 3: the newest remaining events --------------------------------

    def newest_reads(self, batch: range) -> list[tuple[tuple[str, bytes], ReadRequest]]:
        """Per current-value row showing a deleted event: the reads of its newest
        remaining event in the main table (one per salt value, or one)."""
        out: list[tuple[tuple[str, bytes], ReadRequest]] = []
        seen: set[tuple[str, bytes]] = set()
        for i in self._live(batch):
            ev = self.events[i]
            slot = self._slot(ev)
            if slot is None or slot in seen or slot not in self._shown:
                continue
            shown = self._shown[slot]
            if shown is not None and shown != ev.timestamp and \
                    shown not in self._pushed.get(i, ()):
                continue
            seen.add(slot)
            self._newest[slot] = None
            spec = ev.spec
            assert spec is not None and spec.current_key is not None
            fields = tuple((name, getattr(ev.entity, name)) for name in spec.current_key.fields)
            lo, hi = time_span(spec)
            state = QueryState(mode="range", start_us=lo, end_us=hi, fields=fields,
                               allow_scan=True, newest_first=True, limit=1)
            plan = compile_query(spec, state, self.features, main_table=True)
            out.extend((slot, request) for request in plan.requests)
        return out

    def absorb_newest(self, batch: range,
                      reads: Sequence[tuple[tuple[str, bytes], ReadRequest]],
                      answers: Sequence[Sequence[Row] | BaseException]) -> None:
        """Keep each current-value row's newest remaining event.

        A read that failed fails the row's current-value write (PARTIAL).
        """
        by_slot = {self._slot(self.events[i]): i for i in batch}
        failed: dict[tuple[str, bytes], BaseException] = {}
        for (slot, _), answer in zip(reads, answers, strict=True):
            if isinstance(answer, BaseException):
                failed[slot] = answer
                continue
            ev = self.events[by_slot[slot]]
            spec = ev.spec
            assert spec is not None
            model = type(ev.entity)
            for row in answer:
                for entity in spec.codec.decode(model, row):
                    us = spec.codec.time_of(entity)
                    best = self._newest[slot]
                    if best is None or us > best.timestamp:
                        self._newest[slot] = encode(spec, entity)
        for slot, error in failed.items():
            self._newest.pop(slot, None)
            self._unread.add(slot)
            for i in self._live(batch):
                if self._slot(self.events[i]) == slot:
                    self.outcomes.not_sent(i, TableRole.CURRENT, slot[0], error)

    # -- round trip 4: the companions ---------------------------------------------

    def companion_writes(self, batch: range) -> list[TableWrite]:
        """The alternate-key and snapshot deletions and the current-value rows, of
        live entities."""
        live = self._live(batch)
        alternates: dict[str, list[tuple[int, RowMutation]]] = {}
        roles: dict[str, TableRole] = {}
        for i in live:
            rows: dict[tuple[str, bytes], list[CellId]] = {}
            specs = {a.table: a for a in self.events[i].spec.alternates}  # type: ignore[union-attr]
            for v in self._stored(i):  # the rows the stored event wrote, not the given one's
                for alt in v.alternates:
                    rows.setdefault((alt.table, alt.key), []).extend(written_cells(alt.mutations))
            for (table, key), cells in rows.items():
                error = self._unstamped.get(table)
                if error is not None:  # its versions past the limit are unknown: send nothing
                    self.outcomes.not_sent(i, TableRole.ALTERNATE, table, error)
                    continue
                cells.extend(self._past_limit(specs[table], key, cells))
                alternates.setdefault(table, []).append((i, RowMutation(key, erase(cells))))
                roles[table] = TableRole.ALTERNATE
            snapshot = self._snapshots.get(i)
            if isinstance(snapshot, BaseException):  # its snapshot row could not be read
                table = self.events[i].spec.snapshot.table_for(  # type: ignore[union-attr]
                    self.events[i].timestamp)
                self.outcomes.not_sent(i, TableRole.SNAPSHOT, table, snapshot)
            elif snapshot is not None:
                alternates.setdefault(snapshot[0], []).append(
                    (i, RowMutation(snapshot[1], snapshot[2])))
                roles[snapshot[0]] = TableRole.SNAPSHOT
        out = [TableWrite(table, tuple(r for _, r in rows_), tuple(i for i, _ in rows_),
                          role=roles[table]) for table, rows_ in alternates.items()]
        # A current-value row holds one entity, each event's cells at its own time:
        # every column at a deleted event's time goes (a version whose current write
        # a newer event of its batch stood for may have left cells there).
        current: dict[tuple[str, bytes], tuple[list[int], set[tuple[str, bytes]], set[int]]] = {}
        for i in live:
            ev = self.events[i]
            slot = self._slot(ev)
            if slot is None or slot in self._unread:
                continue
            assert ev.spec is not None and ev.spec.current_codec is not None
            members, columns, times = current.setdefault(slot, ([], set(), set()))
            members.append(i)
            cell_timestamp = ev.spec.current_codec.layout.cell_timestamp
            times.add(cell_timestamp(ev.timestamp))
            # The events past the limit that went with it: older, but a current-value
            # row may keep their cells under the newer ones until GC.
            times.update(cell_timestamp(ts) for ts in self._pushed.pop(i, ()))
            for v in self._versions[i]:
                columns.update((m.family, m.qualifier) for m in v.current_mutations
                               if isinstance(m, (SetCell, DeleteCells)))
        by_table: dict[str, list[tuple[tuple[int, ...], RowMutation]]] = {}
        for slot, (members, columns, times) in current.items():
            newest = self._newest.get(slot)
            codec = self.events[members[0]].spec.current_codec  # type: ignore[union-attr]
            assert codec is not None
            lo = 0 if newest is None else codec.layout.cell_timestamp(newest.timestamp) + _MS
            hi = max(times) + _MS
            mutations = erase((f, q, t) for f, q in columns for t in times)
            if slot in self._newest and lo < hi:
                # Rewritten with the newest remaining event (or gone): no cell newer than
                # it, up to the deleted ones, is of an event the main table holds (an
                # event past a version limit that GC collected there may have left some).
                mutations += tuple(DeleteCells(f, q, lo, hi) for f, q in sorted(
                    columns | self._columns.get(slot, set())))
            if newest is not None:
                mutations += newest.current_mutations
            by_table.setdefault(slot[0], []).append((tuple(members),
                                                     RowMutation(slot[1], mutations)))
        out.extend(TableWrite(table, tuple(r for _, r in rows_), tuple(m for m, _ in rows_),
                              grouped=True, role=TableRole.CURRENT)
                   for table, rows_ in by_table.items())
        return out

    # -- round trip 5: the rollups ---------------------------------------------------

    def rollup_refresh(self, batch: range) -> RollupRefresh:
        """The recompute of the rollup rows that the deleted events fell in."""
        refresh = RollupRefresh(self.features)
        for i in self._live(batch):
            ev = self.events[i]
            if ev.spec is not None and ev.spec.rollups:
                refresh.add(ev.spec, ev.entity, (i,))
        return refresh

    # -- outcomes -------------------------------------------------------------------

    def record(self, write: TableWrite, outcomes: Sequence[MutationOutcome]) -> None:
        """Record the backend's outcome of each row of ``write``."""
        self.outcomes.record(write, outcomes)

    def result(self) -> WriteResult:
        """One `EntityResult` per event, in input order."""
        return WriteResult(self.outcomes.results([ev.entity for ev in self.events]),
                           action="delete")


def delete_steps(plan: DeletePlan, batch_size: int,
                 on_batch: Callable[[int], None] | None = None) -> DeleteSteps:
    """The steps of a delete, batch after batch; returns its `WriteResult`.

    ``on_batch`` is called with a batch's number of entities once it is done
    (the progress of a delete)."""
    n = len(plan.events)
    for start in range(0, n, batch_size):
        batch = range(start, min(start + batch_size, n))
        reads = plan.stored_reads(batch)
        plan.absorb(batch, reads, (yield ReadStep(tuple(reads))))
        stamps = plan.alternate_stamp_reads(batch)
        if stamps:  # the stored events' alternate rows are not the given ones
            plan.absorb_stamps(stamps, (yield ReadStep(tuple(stamps))))
        yield from send_writes(plan.main_writes(batch), plan.record)
        newest = plan.newest_reads(batch)
        if newest:
            answers = yield ReadStep(tuple(request for _, request in newest))
            plan.absorb_newest(batch, newest, answers)
        yield from send_writes(plan.companion_writes(batch), plan.record)
        refresh = plan.rollup_refresh(batch)
        if refresh:
            yield from refresh_steps(refresh, plan.record)
        if on_batch is not None:
            on_batch(len(batch))
    return plan.result()
