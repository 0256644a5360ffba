"""Flow control of a save: its calls handed out as soon as they may go.

`SaveSchedule` performs no I/O: it hands out the calls of several batches of
a `WritePlan` at once (`WriteFlow`: batches and bytes in flight), companions
with their main write once the main table is known to take writes, and keeps
order between writes where Bigtable's "last written wins" makes it matter.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any

import attrs

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec, instance_spec
from tsmodel.ground.base import (
    AddToCell,
    DeclaredRows,
    DeleteCells,
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    Row,
    SetCell,
)
from tsmodel.plan.calls import Read, Write
from tsmodel.plan.events import CheckedEvents, EncodedEvent, PlainRows, check_all
from tsmodel.plan.results import ReadStep, TableWrite, WriteResult, WriteStep, send_writes
from tsmodel.plan.retention import retention_message, retention_problems
from tsmodel.plan.rollups import refresh_steps
from tsmodel.plan.writes import WritePlan, prepare_save
from tsmodel.settings import check_flag, check_whole

__all__ = ["WriteFlow", "DEFAULT_FLOW", "SaveSchedule", "schedule_save",
           "check_write_options"]


def schedule_save(entities: Iterable[Any], batch_size: int, flow: WriteFlow, *,
                  trusted: set[str], accept_expired: bool,
                  validate_first: bool) -> SaveSchedule:
    """The schedule of a ``save_all``, for any executor.

    With ``validate_first`` every entity is encoded before the first call
    (`prepare_save()`), else batch by batch as the save goes
    (`SaveSchedule.streaming()`). Events given as `CheckedEvents` (a frame's
    chunk, checked column-wise with its retention: `tsmodel.io.frames`) are
    planned as they are.
    """
    if isinstance(entities, CheckedEvents):
        return SaveSchedule(WritePlan(entities), batch_size, flow, trusted=trusted)
    if isinstance(entities, type):  # save_all(M) for save_all([M(...), ...])
        instance_spec(entities)
    if validate_first:
        return SaveSchedule(prepare_save(entities, accept_expired), batch_size, flow,
                            trusted=trusted)
    return SaveSchedule.streaming(entities, batch_size, flow, trusted=trusted,
                                  accept_expired=accept_expired)



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
#: step to make (`Read`: rows or the BackendError, `Write`: outcomes).
Call = tuple[Any, "Read | Write"]


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

    Its row keys come first: writes to rows apart (the common case: each
    batch of a save writes its own events' rows) never conflict, and their
    cells and spans are not worked out.
    """

    __slots__ = ("table", "keys", "_write", "_cells", "_deletes", "_times")

    def __init__(self, write: TableWrite) -> None:
        self.table = write.table
        rows = write.rows
        if isinstance(rows, DeclaredRows):
            self.keys = set(map(itemgetter(rows.key_at), rows.checked))
        else:
            self.keys = {row.key for row in rows}
        self._write: TableWrite | None = write
        self._cells: set[tuple[bytes, int]] = set()
        self._deletes: dict[bytes, tuple[int, int]] = {}
        self._times: dict[bytes, tuple[int, int]] | None = None

    @property
    def cells(self) -> set[tuple[bytes, int]]:
        """(row key, timestamp) of each cell it sets."""
        self._rows()
        return self._cells

    @property
    def deletes(self) -> dict[bytes, tuple[int, int]]:
        """Per row key, the span of the timestamps it deletes there."""
        self._rows()
        return self._deletes

    def _rows(self) -> None:
        """Work the cells and deletions out, once (when keys meet another write's)."""
        write, self._write = self._write, None
        if write is None:
            return
        cells: set[tuple[bytes, int]] = set()
        deletes: dict[bytes, tuple[int, int]] = {}
        rows = write.rows
        if isinstance(rows, DeclaredRows):  # the declared cells: one timestamp per row
            at, stamp = rows.key_at, rows.declared.stamp
            cells = {(row[at], stamp(row[1])) for row in rows.checked}
            rows = ()
        for row in rows:
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
        self._cells = cells
        self._deletes = deletes

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
        if other.table != self.table or self.keys.isdisjoint(other.keys):
            return False  # cells and deletions are all in rows of their keys
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

    A driver (`tsmodel.run.drive`) loops until `done`: it makes every step
    `ready()` hands out (a `Read`, a `Write`; concurrently or not), and
    `answer()` s each one with the rows read (or the `BackendError` raised)
    or the outcomes written. Then `result()` folds the outcomes, one
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
                # Checked as a validated save checks (`check_all()`): a batch of plain
                # events goes down as its checked tuples, with no object per event.
                checked = check_all(chunk)
                if not self._accept_expired:
                    problems = retention_problems(checked.entities)
                    if problems:
                        raise errors.RetentionError(retention_message(problems), problems)
            except errors.ValidationError as exc:
                self._error = exc
                return
            start = len(plan.events)
            plan.extend(checked)
            yield range(start, start + len(chunk))

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

    def close(self) -> None:
        """Nothing to end: the batches' steps are let go with the schedule."""

    def _kind(self, batch: range) -> tuple[bool, bool]:
        """Whether the batch sends its companions with its main rows, and whether it
        goes alone (it reads first, or sends its companions after its main rows).

        One pass over the batch, kept for the batch waiting to start (asked at
        every `ready()` until it starts, and while no table's trust changed)."""
        if self._kinds[0] is not batch or self._kinds[1] != len(self.trusted):
            self.plan.lay_out(batch)
            together = self.flow.companions_with_main
            reads = False
            trusted, events = self.trusted, self.plan.events
            plain = self.plan.plain(batch)
            for i in (() if plain is not None else batch):
                ev = events[i]
                reads = reads or (ev.spec is not None and _reads(ev.spec))
                together = together and ev.table in trusted
            if plain is not None:
                together = together and plain.table in trusted
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
        self.plan.lay_out(batch)
        events = self.plan.events
        plain = self.plan.plain(batch)
        if plain is not None:
            size = _plain_size(plain, events[batch.start:batch.stop])
        else:
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
            # What results need is kept; the batch's cells go (the garbage collector
            # would walk them again and again while the save goes on).
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
                self._handed.append((ticket, Read(call, failures=True)))

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
                self._handed.append((ticket, Write(write)))
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


def _plain_size(plain: PlainRows, checked: Sequence[Any]) -> int:
    """`_size()` of a batch of checked tuples (`PlainRows`), from the tuples: the row
    key (item 0) and the values (items 2 on) summed column by column, those of a
    fixed width (`DeclaredCells.widths`) counted without looking."""
    declared = plain.declared
    columns = declared.columns
    count = len(columns)
    fixed = sum(w for w in declared.widths if w is not None)
    size = (16 * count + sum(len(q) for _, q in columns) + fixed) * len(checked)
    for at in (0, *(2 + i for i, w in enumerate(declared.widths) if w is None)):
        size += sum(map(len, map(itemgetter(at), checked)))
    return size * (2 if plain.current_table is not None else 1)


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
        yield from send_writes(plan.companion_writes(batch), plan.record)
    refresh = plan.rollup_refresh(batch)
    if refresh:
        yield from refresh_steps(refresh, plan.record)


def _reads(spec: ModelSpec) -> bool:
    """Whether a save of ``spec``'s events reads: corrections, or recomputed rollups."""
    return spec.corrections_read_first or any(r.mode == "recompute" for r in spec.rollups)



def _learn(trusted: set[str], table: str, outcomes: Sequence[MutationOutcome]) -> None:
    """Trust a main table that applied a write; stop trusting one that refused a whole call."""
    if any(o.status is MutationStatus.APPLIED for o in outcomes):
        trusted.add(table)
    elif outcomes and all(o.status is MutationStatus.FAILED for o in outcomes):
        trusted.discard(table)


def _found(plan: WritePlan, batch: range, reads: Sequence[ReadRequest],
           answers: Sequence[Sequence[Row] | BaseException]) -> dict[tuple[str, bytes], Row]:
    """The rows a batch's corrections need; a failed read fails its table's entities.

    A row read in parts (several reads of one table, each of other cell
    timestamps) is put back together, its cells in a row's order."""
    found: dict[tuple[str, bytes], Row] = {}
    for request, answer in zip(reads, answers, strict=True):
        if isinstance(answer, BaseException):
            plan.refuse(batch, request.table, answer)
            continue
        for row in answer:
            where = (request.table, row.key)
            part = found.get(where)
            if part is not None:
                row = Row(row.key, tuple(sorted(
                    (*part.cells, *row.cells),
                    key=lambda c: (c.family, c.qualifier, -c.timestamp))))
            found[where] = row
    return found
