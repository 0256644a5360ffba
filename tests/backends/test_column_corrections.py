"""Saves into ``ts.columns()`` buckets read back only what they can correct.

A correction in this layout (same key and time, another value) writes another
column, so a save reads the event's stored cells first to delete the old
one. These tests hold two things on both backends: the read-back of a save
is bounded by the cells stored at the batch's own times (a shuffled save
spans the whole bucket: reading the span back made it quadratic), and a
shuffled batch correcting some events among many leaves exactly the cells a
plain-Python model of the table expects.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tests.backends.passthrough import PassThrough
from tsmodel.backends.base import Backend, ReadRequest, Row
from tsmodel.plan import writes

UTC = timezone.utc
T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)
HOSTS = ("h1", "h2")


class CellCounter(PassThrough):
    """Counts the cells every read hands back."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.cells = 0

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        for row in self.inner.read_rows(request):
            self.cells += len(row.cells)
            yield row


def _model() -> Any:
    @ts.model(table=f"COLFIX_{uuid.uuid4().hex[:8].upper()}", family="m",
              layout=ts.columns(), max_rate=1 / 60)
    class Reading:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="week")
        value: int = ts.value(codec=ts.Text(int))

    return Reading


def _us(t: datetime) -> int:
    return int((t - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 1_000_000


def _events(model: Any, values: dict[tuple[str, int], int]) -> list[Any]:
    return [model(host=h, time=T0 + timedelta(minutes=m), value=v)
            for (h, m), v in values.items()]


def _stored(backend: Backend, model: Any,
            versions: int | None = None) -> Counter[tuple[str, str, bytes, int, bytes]]:
    """Every cell of the table: (host, family, qualifier, timestamp, value); with
    ``versions``, only the newest ``versions`` cells of each column of a row, as
    garbage collection leaves them (the emulator collects at times of its own)."""
    out: Counter[tuple[str, str, bytes, int, bytes]] = Counter()
    for row in backend.read_rows(ReadRequest(model.__tsmodel__.table)):
        kept: Counter[tuple[str, bytes]] = Counter()
        for c in row.cells:  # a column's cells newest first
            kept[c.family, c.qualifier] += 1
            if versions is None or kept[c.family, c.qualifier] <= versions:
                out[row.key.split(b"#")[0].decode(), c.family, c.qualifier, c.timestamp,
                    c.value] += 1
    return out


def _expected(values: dict[tuple[str, int], int]) -> Counter[tuple[str, str, bytes, int, bytes]]:
    """The cells of ``values`` in this layout: one empty cell per event, the value
    in the qualifier, at the event time."""
    return Counter((h, "m", str(v).encode(), _us(T0 + timedelta(minutes=m)), b"")
                   for (h, m), v in values.items())


def _shuffled(backend: Any, seed: int, minutes: int
              ) -> tuple[Any, ts.Connection, random.Random, dict[tuple[str, int], int],
                         list[Any]]:
    """A fresh model's table on ``backend`` (batches of 100 events), and a reading a
    minute of each host, shuffled: the model, connection, generator, values, events."""
    model = _model()
    conn = ts.Connection(backend, batch_size=100)
    conn.create_tables(model)
    rng = random.Random(seed)
    values = {(h, m): 94000 + rng.randrange(2000) for h in HOSTS for m in range(minutes)}
    events = _events(model, values)
    rng.shuffle(events)
    return model, conn, rng, values, events


def test_a_shuffled_save_reads_back_only_cells_at_its_own_times(backend: Backend) -> None:
    counter = CellCounter(backend)
    model, conn, rng, values, events = _shuffled(counter, seed=24, minutes=1000)
    try:
        assert conn.save_all(events).ok
        # Nothing was stored at any of these times: nothing to read back (the
        # span of each shuffled batch holds every event saved before it).
        assert counter.cells == 0
        again = list(events)
        rng.shuffle(again)
        counter.cells = 0
        assert conn.save_all(again).ok
        # Saved again, unchanged: each batch reads its own events' cells, once.
        assert counter.cells == len(events)
        assert _stored(backend, model) == _expected(values)
    finally:
        conn.drop_tables(model)


@pytest.mark.parametrize("batch_size", [1000, 2000])
def test_a_shuffled_batch_correcting_some_events_among_many(backend: Backend,
                                                           batch_size: int) -> None:
    model = _model()
    conn = ts.Connection(backend, batch_size=batch_size)
    conn.create_tables(model)
    rng = random.Random(7)
    first = {(h, m): 1000 + rng.randrange(500) for h in HOSTS for m in range(0, 1500, 2)}
    try:
        events = _events(model, first)
        rng.shuffle(events)
        assert conn.save_all(events).ok
        assert _stored(backend, model) == _expected(first)
        # One batch: new events between the stored ones, some stored ones again
        # unchanged, and some corrected (their old columns must go).
        second = {(h, m): 2000 + rng.randrange(500) for h in HOSTS for m in range(1, 1500, 2)}
        stored = sorted(first)
        corrected = rng.sample(stored, 40)
        second.update({k: first[k] + 10_000 for k in corrected})
        second.update({k: first[k] for k in rng.sample(stored, 60) if k not in corrected})
        events = _events(model, second)
        rng.shuffle(events)
        assert conn.save_all(events).ok
        assert _stored(backend, model) == _expected({**first, **second})
        # Every event read back as the model answers it, corrections included.
        got = {(e.host, round((e.time - T0).total_seconds()) // 60): e.value
               for h in HOSTS
               for e in model.range(T0, T0 + timedelta(days=2), host=h).using(conn)}
        assert got == {**first, **second}
    finally:
        conn.drop_tables(model)


@pytest.mark.parametrize("times_per_read", [7, 5_000])
def test_corrections_of_many_rows_read_in_parts(backend: Backend, times_per_read: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # 20 rows of different times (more than share reads: one read of all times),
    # and, at 7 times a read, each row's cells read back in several parts.
    monkeypatch.setattr(writes, "_TIMES_PER_READ", times_per_read)
    model = _model()
    conn = ts.Connection(backend, batch_size=500)
    conn.create_tables(model)
    rng = random.Random(11)
    hosts = [f"h{n:02d}" for n in range(20)]
    first = {(h, m): 100 + rng.randrange(50) for h in hosts for m in rng.sample(range(300), 20)}
    try:
        events = _events(model, first)
        rng.shuffle(events)
        assert conn.save_all(events).ok
        stored = sorted(first)
        second = {k: first[k] + 1_000 for k in rng.sample(stored, 50)}
        second.update({k: first[k] for k in rng.sample(stored, 100) if k not in second})
        second.update({(h, m): 7 for h in hosts for m in range(300, 310)})
        events = _events(model, second)
        rng.shuffle(events)
        assert conn.save_all(events).ok
        assert _stored(backend, model) == _expected({**first, **second})
    finally:
        conn.drop_tables(model)


class Requests(PassThrough):
    """Keeps every read request."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.requests: list[ReadRequest] = []

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        self.requests.append(request)
        return self.inner.read_rows(request)


def test_a_prior_read_fits_cloud_bigtables_filter_limit(backend: Backend) -> None:
    # A model whose value is promoted into an alternate key reads before it writes,
    # with one version per column (a step that counts cells: the given times cannot
    # be kept client-side). A batch of 1,000 events a second apart is 1,000 runs of
    # times: as ranges of an interleave, over the 20 KB a filter may have on Cloud
    # Bigtable (the emulator does not check), so the whole save would fail there.
    from tsmodel.backends import _bigtable_wire as wire
    from tsmodel.backends.bigtable import _client_side

    @ts.model(table=f"PRIOR_{uuid.uuid4().hex[:8].upper()}", family="F",
              alternates=[ts.alternate(f"PRIOR_ALT_{uuid.uuid4().hex[:8].upper()}",
                                       "user", "time")])
    class Battery:
        salt = ts.salt(3, on="time")
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        user: str = ts.value("USER")
        pct: int = ts.value("PCT")

    recorder = Requests(backend)
    conn = ts.Connection(recorder)
    conn.create_tables(Battery)
    events = [Battery(time=T0 + timedelta(seconds=i), user="u", pct=i % 100)
              for i in range(1_000)]
    random.Random(3).shuffle(events)
    assert conn.save_all(events).ok
    assert recorder.requests, "the model reads before it writes"
    for request in recorder.requests:
        sent, _ = _client_side(request)
        pb = wire.read_request("projects/p/instances/i/tables/t", None, sent)
        assert pb is not None and pb.filter.ByteSize() <= 20 * 1024, pb.filter.ByteSize()


def test_a_shuffled_save_reads_each_row_in_spans_apart(backend: Backend) -> None:
    # The server sends a prior read the cells of its times' span (past 16 runs of
    # times, `_SERVER_TIME_RUNS`): read in input order, each shuffled batch spans
    # its rows' whole bucket and brings back every event saved before it. Written
    # in row order, the batches' spans of a row do not overlap, so a save into a
    # fresh table is sent nothing back; its results stay in input order.
    recorder = Requests(backend)
    model, conn, rng, values, events = _shuffled(recorder, seed=5, minutes=500)
    # Versions of one event in the save: the one given last is stored.
    for key in rng.sample(sorted(values), 30):
        for _ in range(2):
            values[key] = 1 + rng.randrange(90000)
            events.insert(rng.randrange(len(events) + 1), _events(model, {key: values[key]})[0])
        at = max(n for n, e in enumerate(events)
                 if (e.host, round((e.time - T0).total_seconds()) // 60) == key)
        values[key] = events[at].value
    try:
        result = conn.save_all(events)
        assert result.ok
        assert [r.entity for r in result.results] == events
        assert _stored(backend, model) == _expected(values)
        spans: dict[bytes, list[tuple[int, int]]] = {}
        for request in recorder.requests:
            times = request.filter.timestamps
            if request.filter.strip_values:
                continue  # a correction's read of the row's versions (`stamp_reads()`)
            assert times, request
            for key in request.rows.keys:
                spans.setdefault(key, []).append((min(times), max(times)))
        assert spans, "the model reads before it writes"
        for key, row_spans in spans.items():
            row_spans.sort()
            for (_, end), (start, _) in itertools.pairwise(row_spans):
                # (Two versions of one event may meet at a batch's edge: one time.)
                assert end <= start, (key, row_spans)
    finally:
        conn.drop_tables(model)


def test_a_row_over_its_version_limit_keeps_input_order(backend: Backend) -> None:
    # Four events of one hour's row at max_rate=2/3600 (two a bucket, the version
    # limit): over the rate, which events a correction pushes past the limit
    # depends on what was written before it, so a validated save keeps input
    # order and stores what the streamed save (always input order) stores.
    # Compared as garbage collection leaves the rows (the newest two cells of
    # each column): the emulator collects at times of its own, so the cells
    # past the limit still there differ from run to run.
    def model() -> Any:
        @ts.model(table=f"OVER_{uuid.uuid4().hex[:8].upper()}", family="m",
                  layout=ts.columns(), max_rate=2 / 3600, max_versions=2)
        class Reading:
            host: str = ts.key()
            time: datetime = ts.timestamp(bucket="hour")
            value: int = ts.value(codec=ts.Text(int))

        return Reading

    validated, streamed = model(), model()
    conn = ts.Connection(backend, batch_size=2)
    conn.create_tables(validated, streamed)
    given = [(0, 2), (3, 2), (2, 2), (2, 3), (1, 3), (1, 2)]  # (ten minutes, value)
    try:
        for m, validate_first in ((validated, True), (streamed, False)):
            events = [m(host="h", time=T0 + timedelta(minutes=10 * t), value=v)
                      for t, v in given]
            assert conn.save_all(events, validate_first=validate_first).ok
        assert _stored(backend, validated, 2) == _stored(backend, streamed, 2)
    finally:
        conn.drop_tables(validated, streamed)
