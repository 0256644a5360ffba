"""The merge of a read plan's streams (ReadMerge), against a lazy fold of whole streams.

The oracle is the fold the executors did before the merge existed: the streams
chained, merged by time with ``heapq.merge`` (ties to the earlier stream) or
sorted, then filtered, reversed (holding at most ``limit``) and cut at the limit.
ReadMerge must give exactly that, whatever batches the rows arrive in.
"""

from __future__ import annotations

import collections
import heapq
import itertools
from datetime import datetime
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tsmodel.backends.base import CellBatch, ReadRequest, Row
from tsmodel.plan.merge import READ_AHEAD, ReadMerge
from tsmodel.plan.reads import ReadPlan


@ts.model(table="TICK", family="F")
class Tick:
    name: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    value: int = ts.value("V")


class Event(NamedTuple):
    time: int
    stream: int
    position: int


class FakeCodec:
    """Decodes a row to the events the test put under its key; a batch of rows
    (`TableCodec.batch_instances`) to its events and each row's number of them
    (``None`` where each row holds one), or ``None`` (the merge then decodes
    its rows one by one) where the batch's first key is one the codec
    declines."""

    def __init__(self) -> None:
        self.events: dict[bytes, list[Event]] = {}
        self.declined: set[bytes] = set()

    def decode(self, model: Any, row: Row, only: Any, history: bool) -> list[Event]:
        return self.events[row.key]

    def batch_instances(self) -> Any:
        def decode(model: Any, batch: CellBatch) -> tuple[list[Event], list[int] | None] | None:
            if batch.keys[0] in self.declined:
                return None
            counts = [len(self.events[key]) for key in batch.keys]
            flat = [e for key in batch.keys for e in self.events[key]]
            return flat, None if set(counts) == {1} else counts

        return decode


def make_plan(streams: list[list[list[Event]]], merge: str, *, descending: bool = False,
              limit: int | None = None, reverse_after: bool = False, even_only: bool = False,
              guards: int = 0) -> tuple[ReadPlan, list[list[Row]]]:
    """A plan of one request per stream (each a list of rows, each a list of events)."""
    codec = FakeCodec()
    rows = []
    for s, stream in enumerate(streams):
        rows.append([])
        for r, events in enumerate(stream):
            key = b"%d#%d" % (s, r)
            codec.events[key] = events
            rows[-1].append(Row(key, ()))
    return ReadPlan(
        "Tick", "TICK", tuple(ReadRequest("TICK") for _ in streams), merge,
        client_filters=("time is even",) if even_only else (), codec=codec,  # type: ignore[arg-type]
        accept=(lambda e: e.time % 2 == 0) if even_only else _accept_all,
        limit=limit, descending=descending, reverse_after=reverse_after,
        guards=tuple(ReadRequest("TICK", limit=1) for _ in range(guards))), rows


def _accept_all(item: Any) -> bool:
    return True


def oracle(plan: ReadPlan, rows: list[list[Row]]) -> list[Event]:
    codec = plan.codec
    assert isinstance(codec, FakeCodec)
    streams = [[e for row in stream for e in codec.events[row.key]] for stream in rows]
    key = lambda e: e.time  # noqa: E731
    if plan.merge == "sort":
        merged: Any = sorted(itertools.chain.from_iterable(streams), key=key,
                             reverse=plan.descending)
    elif plan.merge == "time" and len(streams) > 1:
        merged = heapq.merge(*streams, key=key, reverse=plan.descending)
    else:
        merged = itertools.chain.from_iterable(streams)
    kept = [e for e in merged if plan.accept(e)]
    if plan.reverse_after:
        kept = list(reversed(collections.deque(kept, maxlen=plan.limit or None)))
    return kept if plan.limit is None else kept[:plan.limit]


def run(plan: ReadPlan, rows: list[list[Row]], sizes: list[int],
        in_batches: bool = False) -> tuple[list[Event], int]:
    """Drive the merge as an executor does, in batches of ``sizes`` (cycled);
    also returns the most streams opened. ``in_batches``: each batch of a
    request's rows given as `CellBatch` es (one or two), as an executor reading
    batches gives them where the merge `takes_batches`."""
    merge = ReadMerge(plan, Tick)
    pos = [0] * len(merge.streams)
    data = [[] for _ in plan.guards] + rows
    batch = itertools.cycle(sizes)
    out: list[Event] = []
    while (i := merge.want()) is not None:
        assert i < merge.opened, "a stream is needed before it may be opened"
        taken: list[Any] = data[i][pos[i]:pos[i] + next(batch)]
        pos[i] += len(taken)
        if in_batches and taken and i >= len(plan.guards):
            assert merge.takes_batches
            half = (len(taken) + 1) // 2
            taken = [CellBatch.of(taken[:half])] + (
                [CellBatch.of(taken[half:])] if taken[half:] else [])
        out += merge.give(i, taken or None)
    return out, merge.opened


def sorted_streams(draw: Any, count: int, descending: bool) -> list[list[list[Event]]]:
    streams = []
    for s in range(count):
        times = sorted(draw(st.lists(st.integers(0, 12), max_size=8)), reverse=descending)
        events = [Event(t, s, p) for p, t in enumerate(times)]
        # one event per row, or a few per row (bucket rows)
        per_row = draw(st.integers(1, 3))
        streams.append([events[i:i + per_row] for i in range(0, len(events), per_row)])
    return streams


@st.composite
def cases(draw: Any) -> tuple[ReadPlan, list[list[Row]], list[int], bool]:
    merge = draw(st.sampled_from(["time", "concat", "sort"]))
    descending = draw(st.booleans())
    streams = sorted_streams(draw, draw(st.integers(1, 5)), descending and merge == "time")
    plan, rows = make_plan(
        streams, merge, descending=descending,
        limit=draw(st.none() | st.integers(0, 10)), reverse_after=draw(st.booleans()),
        even_only=draw(st.booleans()), guards=draw(st.integers(0, 2)))
    in_batches = draw(st.booleans())
    if in_batches:  # some batches left to the rows
        assert isinstance(plan.codec, FakeCodec)
        keys = [row.key for stream in rows for row in stream]
        plan.codec.declined = set(draw(st.lists(st.sampled_from(keys)))) if keys else set()
    return plan, rows, draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)), in_batches


@settings(max_examples=400, deadline=None)
@given(cases())
def test_the_merge_gives_the_lazy_folds_answer_whatever_the_batches(
        case: tuple[ReadPlan, list[list[Row]], list[int], bool]) -> None:
    plan, rows, sizes, in_batches = case
    assert run(plan, rows, sizes, in_batches)[0] == oracle(plan, rows)


def test_equal_times_come_in_the_order_of_the_streams() -> None:
    a = [[Event(1, 0, 0)], [Event(5, 0, 1)], [Event(7, 0, 2)]]
    b = [[Event(5, 1, 0)], [Event(5, 1, 1)], [Event(6, 1, 2)]]
    plan, rows = make_plan([a, b], "time")
    got, _ = run(plan, rows, [1])
    assert [(e.time, e.stream) for e in got] == [(1, 0), (5, 0), (5, 1), (5, 1), (6, 1), (7, 0)]


def test_events_come_out_before_every_stream_ended() -> None:
    """Streaming: once each stream gave its first rows, the earliest events are certain."""
    streams = [[[Event(10 * r + s, s, r)] for r in range(5)] for s in range(3)]
    plan, rows = make_plan(streams, "time")
    merge = ReadMerge(plan, Tick)
    out = []
    for s in range(3):
        assert merge.want() == s
        out += merge.give(s, rows[s][:2])
    # Certain: what comes before the lagging stream's last time (10), which may repeat.
    assert [e.time for e in out] == [0, 1, 2]
    assert not merge.done


def test_time_merges_open_every_stream_and_concatenations_a_few_ahead() -> None:
    many = [[[Event(s, s, 0)]] for s in range(READ_AHEAD + 4)]
    assert ReadMerge(make_plan(many, "time")[0], Tick).opened == len(many)
    assert ReadMerge(make_plan(many, "concat")[0], Tick).opened == READ_AHEAD
    assert ReadMerge(make_plan(many, "sort", limit=1)[0], Tick).opened == READ_AHEAD
    # A limit that the first streams may reach: the next one opens when needed.
    assert ReadMerge(make_plan(many, "concat", limit=3)[0], Tick).opened == 1
    assert ReadMerge(make_plan(many, "concat", limit=3, guards=1)[0], Tick).opened == 2
    assert ReadMerge(make_plan(many, "time", limit=0, guards=1)[0], Tick).opened == 1


def test_a_guard_that_finds_a_row_refuses_the_answer_before_any_event() -> None:
    plan, rows = make_plan([[[Event(1, 0, 0)]]], "concat", guards=1)
    merge = ReadMerge(plan, Tick)
    assert merge.want() == 0
    with pytest.raises(ts.KeyDecodingError, match=r"TICK.*b'BATTERY#7#1'.*salt value"):
        merge.give(0, [Row(b"BATTERY#7#1", ())])


def test_a_guard_read_in_batches_that_finds_a_row_refuses_the_answer_alike() -> None:
    # An executor reading a merge's streams in batches reads its guards so too.
    plan, rows = make_plan([[[Event(1, 0, 0)]]], "concat", guards=1)
    merge = ReadMerge(plan, Tick)
    assert merge.takes_batches and merge.want() == 0
    with pytest.raises(ts.KeyDecodingError, match=r"TICK.*b'BATTERY#7#1'.*salt value"):
        merge.give(0, [CellBatch.of([Row(b"BATTERY#7#1", ())])])


def test_the_limit_ends_the_merge_and_says_so() -> None:
    streams = [[[Event(t, s, t)] for t in range(10)] for s in range(2)]
    plan, rows = make_plan(streams, "time", limit=3)
    merge = ReadMerge(plan, Tick)
    assert merge.remaining == 3
    out = merge.give(0, rows[0]) + merge.give(1, rows[1])
    assert [e.time for e in out] == [0, 0, 1] and merge.done and merge.want() is None
