"""The merge of a read plan's streams, without I/O.

A `ReadPlan` reads one or more requests (one per
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
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Any, Generic, TypeVar

from tsmodel import errors
from tsmodel.backends.base import ReadRequest, Row
from tsmodel.declare.spec import spec_of
from tsmodel.plan.reads import ReadPlan

__all__ = ["ReadMerge", "READ_AHEAD", "check_guard"]

_SINKS = ("instances", "records", "keys")

M = TypeVar("M")

#: The most requests of a plan read at once when they are read one after the
#: other anyway (concatenated or sorted streams): the next ones are already
#: streaming when the consumer reaches them. Streams merged by time are all
#: read at once: each one's first rows are needed before any event is certain.
READ_AHEAD = 8


class ReadMerge(Generic[M]):
    """The fold of one plan's streams into instances; see the module's docstring.

    Streams are numbered guards first, then the plan's requests
    (`streams`). The protocol of an executor:

        merge = ReadMerge(plan, model)
        while (i := merge.want()) is not None:
            # open every stream numbered below merge.opened not opened yet
            out = merge.give(i, next_rows_of(i))   # a list of rows, or None: the end
            yield from out

    Args:
        plan: the read plan.
        model: the model class whose instances are built.
        sink: what each row becomes: ``"instances"`` (of ``model``),
            ``"records"`` (each event's ``{field: value}`` record, times in
            µs: `records()`, for the columnar
            results of `tsmodel.io`), or ``"keys"`` (the row key,
            checked, one per row: for a count plan whose rows are events,
            read without their values).
    """

    def __init__(self, plan: ReadPlan, model: type[M], *, sink: str = "instances") -> None:
        if sink not in _SINKS:
            raise ValueError(f"sink must be one of {', '.join(_SINKS)}, got {sink!r}")
        self.plan = plan
        self.model = model
        self.sink = sink
        records = sink == "records"
        #: Every read of the plan: its guards, then its requests.
        self.streams: tuple[ReadRequest, ...] = (*plan.guards, *plan.requests)
        self._first = len(plan.guards)
        self._checked = 0  # guards found empty
        n = len(plan.requests)
        self._by_time = plan.merge == "time" and n > 1
        self._sort = plan.merge == "sort"
        reads_all = plan.limit is None or plan.reverse_after or self._sort
        if plan.limit == 0:
            width = 0  # nothing to read but the guards
        elif self._by_time:
            width = n
        else:
            width = min(n, READ_AHEAD) if reads_all else min(n, 1)
        self._width = width
        #: Whether several streams are read at once (then an executor reads
        #: each opened stream ahead of the merge, within bounds).
        self.concurrent = self._first + width > 1
        self._buffers: list[list[M]] = [[] for _ in range(n)]
        self._last: list[Any] = [None] * n  # the event time of each stream's last event
        self._ended = [False] * n
        self._open_streams = n  # requests not ended
        self._next = 0  # concatenated or sorted streams: the request read now
        time_field = spec_of(model).timestamp_field
        self._key: Callable[[Any], Any] = (itemgetter if records else attrgetter)(time_field)
        self._accept = plan.accept_record if records else plan.accept
        self._reversed: collections.deque[M] | None = (
            collections.deque(maxlen=plan.limit or None) if plan.reverse_after else None)
        self._remaining = plan.limit
        #: No stream is needed any more: the limit is reached or every stream ended.
        self.done = width == 0

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

        Returns:
            The instances certain now, in the answer's order.

        Raises:
            KeyDecodingError: a guard found a row (another program's salt), or a
                row's key does not match the table's key layout.
            CellDecodingError: a cell is not what its field declares.
        """
        if stream < self._first:
            self._check_guard(rows)
            return []
        j = stream - self._first
        if rows is None:
            self._ended[j] = True
            self._open_streams -= 1
            if not self._by_time:
                self._next += 1
            events: list[M] = []
        else:
            events = self._decode(self.plan.requests[j], rows)
        if self._by_time:
            return self._finish(self._merged(j, events))
        if self._sort:
            self._buffers[0].extend(events)
            if self._open_streams:
                return []
            everything, self._buffers[0] = self._buffers[0], []
            return self._finish(sorted(everything, key=self._key, reverse=self.plan.descending))
        return self._finish(events)

    # -- the fold ---------------------------------------------------------------------

    def _check_guard(self, rows: Sequence[Row] | None) -> None:
        check_guard(self.plan, rows or ())
        self._checked += 1

    def _decode(self, request: ReadRequest, rows: Sequence[Row]) -> list[M]:
        plan, model = self.plan, self.model
        assert plan.codec is not None
        only, history = plan.only, plan.history
        if self.sink == "keys":  # M is bytes then
            check: Any = plan.codec.check_key
            return [check(row.key) for row in rows]
        if self.sink == "records":  # M is the record type then
            records: Any = plan.codec.records
            if request.reverse:  # bucket rows read backwards: their events too
                return [e for row in rows for e in reversed(records(row, only, history))]
            return [e for row in rows for e in records(row, only, history)]
        decode = plan.codec.decode
        if request.reverse:
            return [e for row in rows for e in reversed(decode(model, row, only, history))]
        return [e for row in rows for e in decode(model, row, only, history)]

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

    def _merged(self, j: int, events: list[M]) -> list[M]:
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

    def _finish(self, out: list[M]) -> list[M]:
        """The client-side check, the reversal and the limit, on events in order."""
        plan = self.plan
        if out and plan.client_filters:  # without any, accept() says yes to all
            accept = self._accept
            out = [item for item in out if accept(item)]
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
