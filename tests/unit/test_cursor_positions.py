"""Positions and tokens without I/O (tsmodel.plan.cursors, ReadMerge's start).

* A merge stopped after any instance and started again from its position
  gives exactly the rest of the answer: the oracle is the lazy fold of whole
  streams of tests/unit/test_read_merge.py (chained, or ``heapq.merge`` by
  time with ties to the earlier stream), with ties across streams and
  several events of one time in a row, which real models rarely make.
* A narrowed request holds exactly the keys of the original from the mark on.
* Tokens round-trip, and any changed or missing byte is refused.
"""

from __future__ import annotations

import base64
import heapq
import itertools
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tsmodel.backends.base import CellBatch, ReadRequest, Row, RowRange, RowSet
from tsmodel.plan.cursors import CursorCodec, Mark, Position, resume_request
from tsmodel.plan.merge import ReadMerge
from tsmodel.plan.reads import ReadPlan

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


@ts.model(table="TICK", family="F")
class Tick:
    name: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    value: int = ts.value("V")


class Event(NamedTuple):
    time: datetime
    stream: int
    position: int


class FakeCodec:
    """Decodes a row to the events the test put under its key (oldest first); a
    batch of rows to their events and each row's number of them (``None``
    where each holds one)."""

    def __init__(self) -> None:
        self.events: dict[bytes, list[Event]] = {}

    def decode(self, model: Any, row: Row, only: Any, history: bool) -> list[Event]:
        return list(self.events[row.key])

    def batch_instances(self) -> Any:
        def decode(model: Any, batch: CellBatch) -> tuple[list[Event], list[int] | None]:
            counts = [len(self.events[key]) for key in batch.keys]
            flat = [e for key in batch.keys for e in self.events[key]]
            return flat, None if set(counts) == {1} else counts

        return decode


@st.composite
def plans(draw: Any) -> tuple[ReadPlan, list[list[Row]], FakeCodec]:
    """A plan of 1-4 streams merged by time or chained, each in time order (newest
    first when descending: reversed reads), with equal times across streams and rows."""
    merge = draw(st.sampled_from(["time", "concat"]))
    descending = draw(st.booleans())
    codec = FakeCodec()
    rows: list[list[Row]] = []
    requests = []
    for s in range(draw(st.integers(1, 4))):
        times = sorted(draw(st.lists(st.integers(0, 6), max_size=9)))
        per_row = draw(st.integers(1, 3))
        chunks = [times[i:i + per_row] for i in range(0, len(times), per_row)]
        stream = []
        for r, chunk in enumerate(chunks):
            key = b"%d#%03d" % (s, r)
            codec.events[key] = [Event(T0 + timedelta(milliseconds=t), s, p)
                                 for p, t in enumerate(chunk)]
            stream.append(Row(key, ()))
        rows.append(stream[::-1] if descending else stream)
        requests.append(ReadRequest("TICK", RowSet(ranges=(RowRange.prefix(b"%d#" % s),)),
                                    reverse=descending))
    limit = draw(st.one_of(st.none(), st.integers(0, 20)))
    plan = ReadPlan("Tick", "TICK", tuple(requests), merge, codec=codec,  # type: ignore[arg-type]
                    limit=limit, descending=descending)
    return plan, rows, codec


def oracle(plan: ReadPlan, rows: list[list[Row]], codec: FakeCodec) -> list[Event]:
    streams = [[e for row in stream for e in
                (codec.events[row.key][::-1] if plan.descending else codec.events[row.key])]
               for stream in rows]
    if plan.merge == "time" and len(streams) > 1:
        merged: Any = heapq.merge(*streams, key=lambda e: e.time, reverse=plan.descending)
    else:
        merged = itertools.chain.from_iterable(streams)
    out = list(merged)
    return out if plan.limit is None else out[:plan.limit]


def drive(merge: ReadMerge[Any], rows: list[list[Row]], sizes: list[int],
          stop: int | None = None, in_batches: bool = False,
          ) -> tuple[list[Event], Position | None]:
    """Run the merge as an executor does (reading what ``merge.streams`` ask), until
    ``stop`` instances are handed out; the instances and the position then.
    ``in_batches``: the rows given as a `CellBatch`, as an executor that reads
    batches gives them."""
    guards = len(merge.plan.guards)
    taken: dict[int, list[Row]] = {}
    batch = itertools.cycle(sizes)
    out: list[Event] = []
    handed = 0
    while (i := merge.want()) is not None:
        if i not in taken:
            request = merge.streams[i]
            taken[i] = [] if request is None else \
                [row for row in rows[i - guards] if request.rows.contains(row.key)]
        n = next(batch)
        got, taken[i] = taken[i][:n], taken[i][n:]
        handed = 0
        given: list[Any] = [CellBatch.of(got)] if in_batches and got else got
        for item in merge.give(i, given or None):
            out.append(item)
            handed += 1
            if len(out) == stop:
                return out, merge.position(handed)
    return out, merge.position(handed)


@settings(max_examples=300, deadline=None)
@given(case=plans(), sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       data=st.data(), in_batches=st.booleans())
def test_a_merge_started_from_any_position_gives_the_rest(case: Any, sizes: list[int],
                                                          data: st.DataObject,
                                                          in_batches: bool) -> None:
    plan, rows, codec = case
    want = oracle(plan, rows, codec)
    stops = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(want))), max_size=4))))
    got: list[Event] = []
    start: Position | None = None
    for stop in [*stops, None]:
        merge = ReadMerge(plan, Tick, start)
        part, start = drive(merge, rows, sizes, None if stop is None else stop - len(got),
                            in_batches)
        got += part
        assert start is not None
        assert start.emitted == len(got)
        if stop is None or len(got) < stop:
            break
    assert got == want


@given(ranges=st.lists(st.tuples(st.binary(max_size=3), st.binary(max_size=3)), max_size=3),
       keys=st.lists(st.binary(min_size=1, max_size=3), max_size=3),
       mark=st.binary(min_size=1, max_size=3), reverse=st.booleans(),
       probes=st.lists(st.binary(max_size=4), min_size=1, max_size=20))
def test_a_narrowed_request_holds_the_keys_from_the_mark_on(
        ranges: list[tuple[bytes, bytes]], keys: list[bytes], mark: bytes, reverse: bool,
        probes: list[bytes]) -> None:
    rows = RowSet(keys=tuple(keys), ranges=tuple(RowRange(a or None, b or None)
                                                  for a, b in ranges))
    request = ReadRequest("T", rows, reverse=reverse)
    narrowed = resume_request(request, Mark(mark, 0), None)
    for key in [*probes, mark, *keys]:
        expected = rows.contains(key) and (key <= mark if reverse else key >= mark)
        found = narrowed is not None and narrowed.rows.contains(key)
        assert found == expected, (key, narrowed)


positions = st.builds(
    Position, st.integers(0, 10**12), st.integers(0, 5), st.one_of(st.none(), st.integers(0, 5)),
    st.lists(st.tuples(st.integers(0, 5), st.builds(
        Mark, st.binary(max_size=40), st.integers(-(2**62), 2**62), st.integers(0, 10**6))),
        max_size=5).map(tuple))


@given(position=positions, secret=st.sampled_from([None, b"0123456789abcdef-secret"]))
def test_tokens_round_trip_and_refuse_every_change(position: Position,
                                                   secret: bytes | None) -> None:
    codec = CursorCodec("Tick", b"d" * 16, 6, secret)
    token = codec.encode(position)
    assert codec.decode(token) == position
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    for i in range(len(raw)):
        changed = bytearray(raw)
        changed[i] ^= 0x5A
        with pytest.raises(ts.InvalidCursorError):
            codec.decode(base64.urlsafe_b64encode(bytes(changed)).decode())
        with pytest.raises(ts.InvalidCursorError):
            codec.decode(base64.urlsafe_b64encode(raw[:i]).decode())
    with pytest.raises(ts.InvalidCursorError, match="another query"):
        CursorCodec("Tick", b"e" * 16, 6, secret).decode(token)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize("token", [
    "garbage",  # base64 of b"\x81\xaa\xdbj\x07": format byte 129
    "",
    "!!!",  # not base64
    "é",
    "AQA",  # b"\x01\x00": a format-1 head and nothing else
    _b64(bytes((0, 0)) + b"x" * 40),  # format byte 0
    _b64(bytes((200, 0)) + b"x" * 40),
])
def test_a_token_that_is_no_cursor_is_said_to_be_none(token: str) -> None:
    with pytest.raises(ts.InvalidCursorError) as info:
        CursorCodec("Tick", b"d" * 16, 6).decode(token)
    message = str(info.value)
    assert message.startswith("Tick: cursor refused: it is not a tsmodel cursor"), message
    assert "format" not in message


def test_a_cursor_of_another_format_names_the_formats() -> None:
    """A token built as format 1 is, with the format byte and its checksum of a later one."""
    import hashlib

    token = CursorCodec("Tick", b"d" * 16, 6).encode(Position(3, 0, None, ()))
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    head = bytes((2,)) + raw[1:-8]
    later = _b64(head + hashlib.blake2b(head, digest_size=8).digest())
    with pytest.raises(ts.InvalidCursorError, match="it is of format 2; this tsmodel reads "
                                                    "format 1"):
        CursorCodec("Tick", b"d" * 16, 6).decode(later)
