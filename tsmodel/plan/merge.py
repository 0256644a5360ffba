"""The merge of a read plan's streams, without I/O.

A A `ReadPlan` reads one or more requests (one per
salt value, per key range or per bucket label) and may first read guards.
`ReadMerge` is everything that happens to their rows: the guards'
check, decoding, the merge of the streams (concatenated, merged by event
time, or sorted), the client-side check, the reversal and the limit. It
does no I/O: an executor asks it which stream it needs next
(`ReadMerge.want()`), reads a batch of that stream's rows however it
reads (a lazy iterator, a producer thread, an asyncio task) and hands them
over (`ReadMerge.give()`), which returns the instances that are certain
by then, in order. The sync and async executors (`tsmodel.run.fanout`)
drive this one merge.

The answer is the one a lazy fold of the streams gives (``heapq.merge`` by
event time, ties to the earlier stream), whatever the batches: a batch only
makes more of the answer certain.

The merge also knows where the answer stands (`ReadMerge.position()`, a
`Position`), and starts from one: the requests are narrowed to the marks'
rows (`resume_request()`) and what came up to each mark is left out. A page token and the iterator's
resume after a broken stream both start a merge this way.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Any, Generic, TypeVar

from tsmodel import errors
from tsmodel.declare.spec import spec_of
from tsmodel.encoding.timestamps import to_micros
from tsmodel.ground.base import CellBatch, ReadRequest, Row
from tsmodel.plan.cursors import Mark, Position, resume_request
from tsmodel.plan.reads import ReadPlan

__all__ = ["ReadMerge", "READ_AHEAD", "check_guard", "reads_whole_rows"]

M = TypeVar("M")

#: The most requests of a plan read at once when they are read one after the
#: other anyway (concatenated or sorted streams): the next ones are already
#: streaming when the consumer reaches them. Streams merged by time are all
#: read at once: each one's first rows are needed before any event is certain.
READ_AHEAD = 8
_SINKS = ("instances", "records", "keys", "rows", "batches")


#: The row an instance came from: its stream, its key, and every instance of it (in
#: the stream's order; ``None``: the row's one instance), from which a `Mark` is
#: made. A tuple: one is built per row read, and a class's instance costs
#: several times as much.
_RowRef = tuple[int, bytes, "list[Any] | None"]
#: An instance on its way through the merge, with the row it came from.
_Item = tuple[Any, _RowRef]


class ReadMerge(Generic[M]):
    """The fold of one plan's streams into instances; see the module's docstring.

    Streams are numbered guards first, then the plan's requests
    (`streams`). The protocol of an executor:

        merge = ReadMerge(plan, model)
        while (i := merge.want()) is not None:
            # open every stream numbered below merge.opened not opened yet
            out = merge.give(i, next_rows_of(i))   # a list of rows, or None: the end
            yield from out

    A stream numbered here as ``None`` has nothing left to read (a resumed
    read): the executor gives ``None`` for it at once.

    Args:
        plan: the read plan.
        model: the model class whose instances are built.
        start: where to start: after what an earlier read handed out
            (``None``: from the beginning).
        sink: what each row becomes: ``"instances"`` (of ``model``),
            ``"records"`` (each event's ``{field: value}`` record, times in
            µs: `records()`, for the columnar
            results of `tsmodel.io`), or ``"keys"`` (the row key,
            checked, once per event: for a count plan whose rows are events,
            read without their values), or ``"rows"`` (each row as read, for
            a plan that `reads_whole_rows()`: the columnar results decode them),
            or ``"batches"`` (as ``"rows"``, the rows as the reads hand them in
            columns: `tsmodel.ground.base.CellBatch` es, each one item, marked
            whole by its last row).
    """

    def __init__(self, plan: ReadPlan, model: type[M], start: Position | None = None, *,
                 sink: str = "instances") -> None:
        if sink not in _SINKS:
            raise ValueError(f"sink must be one of {', '.join(_SINKS)}, got {sink!r}")
        self.plan = plan
        self.model = model
        self.sink = sink
        records = sink == "records"
        start = start or Position()
        #: Where the merge started (what an earlier read handed out).
        self.start = start
        remaining = None if plan.limit is None else max(plan.limit - start.emitted, 0)
        #: Every read of the plan: its guards, then its requests (``None``: nothing left).
        self.streams: tuple[ReadRequest | None, ...] = (*plan.guards, *(
            None if j < start.done else resume_request(req, start.mark(j), remaining)
            for j, req in enumerate(plan.requests)))
        self._first = len(plan.guards)
        self._checked = 0  # guards found empty
        n = len(plan.requests)
        self._by_time = plan.merge == "time" and n > 1
        self._sort = plan.merge == "sort"
        reads_all = plan.limit is None or plan.reverse_after or self._sort
        if remaining == 0:
            width = 0  # nothing to read but the guards
        elif self._by_time:
            width = n
        else:
            width = min(n, READ_AHEAD) if reads_all else min(n, 1)
        self._width = width
        #: Whether several streams are read at once (then an executor reads
        #: each opened stream ahead of the merge, within bounds).
        self.concurrent = self._first + width > 1
        self._buffers: list[list[_Item]] = [[] for _ in range(n)]
        self._last: list[Any] = [None] * n  # the event time of each stream's last event
        self._ended = [False] * n
        self._open_streams = n  # requests not ended
        self._next = 0  # concatenated or sorted streams: the request read now
        time_field = spec_of(model).timestamp_field
        time_of = (itemgetter if records else attrgetter)(time_field)
        self._key: Callable[[_Item], Any] = lambda item: time_of(item[0])
        #: An item's time in µs, for positions (a row key of the "keys" sink has none).
        self._time: Callable[[Any], int] = (
            time_of if records else (lambda e: 0) if sink in ("keys", "rows", "batches")
            else (lambda e: to_micros(time_of(e))))
        self._accept = plan.accept_record if records else plan.accept
        #: The decoder of a whole `CellBatch` into instances, where the plan's rows
        #: have a fixed shape (plain events, buckets) and are read whole, without
        #: ``only`` or ``history`` (`TableCodec.batch_instances`).
        self._batch_decode = plan.codec.batch_instances() if (
            sink == "instances" and plan.codec is not None and plan.only is None
            and not plan.history) else None
        #: Whether an executor that can read the rows in `CellBatch` es should: the
        #: ``"batches"`` sink, or instances decoded a whole batch at a time.
        self.takes_batches = sink == "batches" or self._batch_decode is not None
        self._reversed: collections.deque[_Item] | None = (
            collections.deque(maxlen=plan.limit or None) if plan.reverse_after else None)
        self._remaining = remaining
        #: No stream is needed any more: the limit is reached or every stream ended.
        self.done = width == 0
        # Where the answer stands: instances handed out, each stream's last one.
        self._emitted = start.emitted
        self._marks: dict[int, _Item] = {}
        self._last_stream: int | None = None
        self._pending: list[_Item] = []  # the last batch given, handed out in part
        # What a resumed read leaves out: up to each mark in its row, and (merged
        # by time) what came before the last event handed out.
        self._skip_row = {j: m for j, m in start.marks if j >= start.done}
        self._time_floor: dict[int, tuple[int, bool]] = {}
        if self._by_time and start.last is not None:
            last = start.mark(start.last)
            if last is not None:  # drop t before T; at T, the streams up to the last one
                self._time_floor = {j: (last.time_us, j < start.last) for j in range(n)}

    # -- the executor's side --------------------------------------------------------

    @property
    def opened(self) -> int:
        """How many streams (by number) may be read now: each one the first time
        it is counted here, before the merge needs its rows."""
        return self._first + min(len(self._ended), self._next + self._width)

    @property
    def remaining(self) -> int | None:
        """Instances still to give before the limit, when the plan stops there
        (``None``: no limit, or the plan reads every stream to the end)."""
        return self._remaining if self._reversed is None else None

    def want(self) -> int | None:
        """The stream whose next rows the merge needs, or ``None``: it needs no more."""
        if self._checked < self._first:
            return self._checked
        if self.done:
            return None
        if not self._by_time:
            return self._first + self._next
        return self._first + self._lagging()

    def give(self, stream: int, rows: Sequence[Row] | None) -> list[M]:
        """Hand over the next rows of ``stream`` (``None``: it ended).

        The instances of the call before count as handed out now (see
        `position()`).

        Returns:
            The instances certain now, in the answer's order.

        Raises:
            KeyDecodingError: a guard found a row (another program's salt), or a
                row's key does not match the table's key layout.
            CellDecodingError: a cell is not what its field declares.
        """
        self._commit(len(self._pending))
        if stream < self._first:
            self._check_guard(rows)
            return []
        j = stream - self._first
        if rows is None:
            self._ended[j] = True
            self._open_streams -= 1
            if not self._by_time:
                self._next += 1
            events: list[_Item] = []
        else:
            events = self._decode(j, rows)
        if self._by_time:
            out = self._finish(self._merged(j, events))
        elif self._sort:
            self._buffers[0].extend(events)
            if self._open_streams:
                return []
            everything, self._buffers[0] = self._buffers[0], []
            out = self._finish(sorted(everything, key=self._key, reverse=self.plan.descending))
        else:
            out = self._finish(events)
        self._pending = out
        return [item[0] for item in out]

    # -- where the answer stands ------------------------------------------------------

    def position(self, handed: int) -> Position | None:
        """Where the answer stands once ``handed`` instances of the last `give()`
        (and all of the ones before) are handed out.

        Returns:
            The position, or ``None`` when no position in the table stands for
            it (a plan sorted or reversed in memory, after its first instance).
        """
        self._commit(handed)
        emitted = self._emitted
        if self._sort or self.plan.reverse_after:
            return Position() if emitted == self.start.emitted == 0 else None
        marks = {j: m for j, m in self.start.marks}
        marks.update((j, _mark(item, self._time)) for j, item in self._marks.items())
        if self._by_time:
            last = self._last_stream if self._last_stream is not None else self.start.last
            return Position(emitted, 0, last, tuple(sorted(marks.items())))
        done = max(self._next, self.start.done)
        return Position(emitted, done, None,
                        tuple((j, m) for j, m in sorted(marks.items()) if j >= done))

    def _commit(self, handed: int) -> None:
        """Count the first ``handed`` instances of the last batch as handed out."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        handed_out = pending[:handed]
        if not handed_out:
            return
        self._emitted += len(handed_out)
        marks = self._marks
        if self._by_time:
            marks.update({item[1][0]: item for item in handed_out})
        else:
            last = handed_out[-1]
            marks[last[1][0]] = last
        self._last_stream = handed_out[-1][1][0]

    # -- the fold ---------------------------------------------------------------------

    def _check_guard(self, rows: Sequence[Any] | None) -> None:
        if rows and type(rows[0]) is CellBatch:  # read as the requests are: in batches
            rows = [row for batch in rows for row in batch.rows()]
        check_guard(self.plan, rows or ())
        self._checked += 1

    def _decode(self, j: int, rows: Sequence[Any]) -> list[_Item]:
        if self.sink == "batches":
            return self._batches(j, rows)
        if rows and type(rows[0]) is CellBatch:  # instances of rows read in batches
            return self._instance_batches(j, rows)
        plan, model = self.plan, self.model
        assert plan.codec is not None
        only, history = plan.only, plan.history
        decode: Any = plan.codec.decode
        if self.sink == "keys":  # M is bytes then: the row key, checked, once per event
            count: Any = plan.codec.count_events
            decode = lambda model, row, only, history: [row.key] * count(row, only)  # noqa: E731
        elif self.sink == "rows":  # M is Row then: a row is one item, marked whole
            decode = lambda model, row, only, history: [row]  # noqa: E731
        elif self.sink == "records":  # M is the record type then
            records: Any = plan.codec.records
            decode = lambda model, row, only, history: records(row, only, history)  # noqa: E731
        reverse = plan.requests[j].reverse  # bucket rows read backwards: their events too
        resuming = bool(self._skip_row or self._time_floor)
        out: list[_Item] = []
        append = out.append
        for row in rows:
            events = decode(model, row, only, history)
            if reverse:
                events.reverse()
            ref = (j, row.key, events)
            for e in (self._resumed(j, row.key, events) if resuming else events):
                append((e, ref))
        return out

    def _instance_batches(self, j: int, batches: Sequence[CellBatch]) -> list[_Item]:
        """The items of rows given in `CellBatch` es: each batch decoded whole
        (`_batch_decode`: one instance per row, or each bucket row's events,
        reversed where the row is read backwards, as `_decode()` reverses
        them); a batch it leaves (rows of another shape, a value that does
        not decode) and a resumed stream's first batch, row by row, as rows
        given one by one are."""
        decode, model = self._batch_decode, self.model
        reverse = self.plan.requests[j].reverse
        out: list[_Item] = []
        for batch in batches:
            resumed = j in self._skip_row or j in self._time_floor
            found = None if decode is None or resumed else decode(model, batch)
            if found is None:
                out += self._decode(j, list(batch.rows()))
                continue
            instances, counts = found
            if counts is None:  # a row per instance
                out += [(e, (j, key, None)) for e, key in zip(instances, batch.keys,
                                                              strict=True)]
                continue
            start = 0
            for key, count in zip(batch.keys, counts, strict=True):
                if count:
                    events = instances[start:start + count]
                    start += count
                    if reverse:
                        events.reverse()
                    ref = (j, key, events)
                    out += [(e, ref) for e in events]
        return out

    def _batches(self, j: int, batches: Sequence[Any]) -> list[_Item]:
        """The items of the ``"batches"`` sink: each batch whole, marked by its last row
        (a resumed stream's rows up to where the read stood left out, as whole
        rows of the ``"rows"`` sink are)."""
        out: list[_Item] = []
        for batch in batches:
            if self._skip_row or self._time_floor:
                kept = [row for row in batch.rows() if self._resumed(j, row.key, [row])]
                if not kept:
                    continue
                batch = CellBatch.of(kept)
            events = [batch]
            out.append((batch, (j, batch.keys[-1], events)))
        return out

    def _resumed(self, j: int, key: bytes, events: list[Any]) -> list[Any]:
        """What of a resumed stream's row comes after where the read stood."""
        mark = self._skip_row.pop(j, None)
        if mark is not None and key == mark.row_key:
            events = _after_mark(events, mark, self._time, self.plan.requests[j].reverse)
        floor = self._time_floor.get(j)
        if floor is None:
            return events
        time_us, at_too = floor
        desc = self.plan.descending
        for k, e in enumerate(events):
            t = self._time(e)
            if (t > time_us if desc else t < time_us) or (t == time_us and at_too):
                continue
            del self._time_floor[j]  # a stream in time order: the rest comes after
            return events[k:]
        return []

    def _lagging(self) -> int:
        """The open stream behind the others in time: its next events may come first."""
        last, ended, descending = self._last, self._ended, self.plan.descending
        best = -1
        for j, key in enumerate(last):
            if ended[j]:
                continue
            if key is None:
                return j
            if best < 0 or (key > last[best] if descending else key < last[best]):
                best = j
        return best

    def _merged(self, j: int, events: list[_Item]) -> list[_Item]:
        """The events of every stream certain to come before any event still unread.

        Each stream is in time order: none of its future events comes before
        the last one read. The lagging stream's last time bounds what is
        certain; events at that very time wait (a later batch may bring an
        equal time from an earlier stream, which comes first).
        """
        buffers, last, key = self._buffers, self._last, self._key
        if events:
            buffers[j].extend(events)
            last[j] = key(events[-1])
        descending = self.plan.descending
        if self._open_streams:
            lag = self._lagging()
            bound = last[lag]
            if bound is None:
                return []
            parts = []
            for buffer in buffers:
                cut = _before(buffer, bound, key, descending)
                if cut:
                    parts.append(buffer[:cut])
                    del buffer[:cut]
        else:
            parts = [buffer for buffer in buffers if buffer]
            self._buffers = [[] for _ in buffers]
        if len(parts) == 1:
            return parts[0]
        # Stable: equal times keep the order of the streams, as heapq.merge does.
        return sorted(itertools.chain.from_iterable(parts), key=key, reverse=descending)

    def _finish(self, out: list[_Item]) -> list[_Item]:
        """The client-side check, the reversal and the limit, on events in order."""
        plan = self.plan
        if out and plan.client_filters:  # without any, accept() says yes to all
            accept = self._accept
            out = [item for item in out if accept(item[0])]
        finished = not self._open_streams
        if self._reversed is not None:
            self._reversed.extend(out)
            out = list(reversed(self._reversed)) if finished else []
        if self._remaining is not None:
            if len(out) >= self._remaining:
                out, finished = out[:self._remaining], True
            self._remaining -= len(out)
        self.done = self.done or finished
        return out


def _mark(item: _Item, time_of: Callable[[Any], Any]) -> Mark:
    """The mark just after ``item`` in its row."""
    inst, (_, key, events) = item
    t = time_of(inst)
    if events is None:  # the row's one instance
        return Mark(key, t, 1)
    seen = 0
    for e in events:
        if time_of(e) == t:
            seen += 1
        if e is inst:
            break
    return Mark(key, t, seen)


def _after_mark(events: list[Any], mark: Mark, time_of: Callable[[Any], Any],
                reverse: bool) -> list[Any]:
    """The events of the mark's row after it (in the row's order: oldest first,
    newest first when ``reverse``). Events gone since are not looked for: the
    cut falls before the first event past the mark's time."""
    seen = 0
    for k, e in enumerate(events):
        t = time_of(e)
        if (t > mark.time_us) if not reverse else (t < mark.time_us):
            return events[k:]
        if t == mark.time_us:
            seen += 1
            if seen == mark.seen:
                return events[k + 1:]
    return []


def reads_whole_rows(plan: ReadPlan) -> bool:
    """Whether the answer of ``plan`` is its rows' events, whole rows in the order read
    (no filter, limit, reversal or merge by event time in between), so that
    the merge may hand out rows (sink ``"rows"``) for a columnar decoder."""
    return (not plan.client_filters and plan.limit is None and not plan.reverse_after
            and plan.merge != "sort" and not (plan.merge == "time" and len(plan.requests) > 1)
            and not plan.history and not any(r.reverse for r in plan.requests))


def check_guard(plan: ReadPlan, found: Sequence[Row]) -> None:
    """Refuse the answer when a guard read of ``plan`` found a row.

    Raises:
        KeyDecodingError: naming the model, the table and the row key.
    """
    if found:
        raise errors.KeyDecodingError(
            f"{plan.model}: table {plan.table!r} has row {found[0].key!r} under a salt value "
            "the model does not have: rows of another program's salts would be missed; "
            "the answer is refused rather than given in part")


def _before(events: list[Any], bound: Any, key: Callable[[Any], Any], descending: bool) -> int:
    """How many of ``events`` (in time order) come strictly before ``bound``."""
    lo, hi = 0, len(events)
    if not hi or not (key(events[0]) > bound if descending else key(events[0]) < bound):
        return 0
    if key(events[-1]) > bound if descending else key(events[-1]) < bound:
        return hi
    while lo < hi:  # binary search: the first event not before the bound
        mid = (lo + hi) // 2
        k = key(events[mid])
        if k > bound if descending else k < bound:
            lo = mid + 1
        else:
            hi = mid
    return lo
