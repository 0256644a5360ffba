"""Cursors on every backend: pages, tokens, and the iterator's own resume (docs/paging.md).

Every answer is compared with an oracle written apart from tsmodel: the
reference model of the oracle harness (tests/oracle/reference.py) for the
shapes of tests/oracle/shapes.py, or the saved events sorted by hand.

* Paging through a range (or ``current()``) page by page, the pages
  concatenate to the unpaged answer: every shape, any page size, limit,
  order and ``only()``, pages re-opened on fresh connections, with and
  without a ``cursor_secret``.
* A token re-opens the query in another process (``tests/backends/cursor_app.py``).
* Tampered, truncated, foreign and wrongly signed tokens raise
  ``InvalidCursorError``.
* A token is a position, not a snapshot: events written between pages come
  when they sort after it, never when they sort before it.
* ``iterator()`` resumes by itself after a broken stream (a backend wrapper
  that breaks reads on both backends; the fault-injecting proxy on the
  emulator), and gives up with a cursor when re-opening brings nothing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests import strategies as tst
from tests.backends import cursor_app
from tests.backends.conftest import asynchronous
from tests.backends.passthrough import AsyncPassThrough, PassThrough
from tests.oracle.machine import _only
from tests.oracle.ops import aware
from tests.oracle.reference import Ev, Reference, Refused
from tests.oracle.shapes import SHAPES, Shape, us_of
from tsmodel.backends.base import Backend, ReadRequest, Row
from tsmodel.run import fanout
from tsmodel.run.cache import CachingBackend

UTC = timezone.utc
SECRET = "a cursor secret of the test suite"
#: Examples per shape and backend.
EXAMPLES = {"embedded": 20, "emulator": 8}
#: The last microsecond a datetime holds.
_LAST_US = 253_402_300_799_999_999
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _kind(request: pytest.FixtureRequest) -> str:
    return str(request.node.callspec.params["backend"])


def _ev(shape: Shape, item: Any) -> Ev:
    keys = tuple((n, getattr(item, n)) for n in shape.key_fields)
    values = tuple((v.name, getattr(item, v.name)) for v in shape.values)
    return Ev(keys, us_of(item.time), values)


def _walk(pages: Any, size: int) -> tuple[list[Any], list[int], list[str | None]]:
    """Every page of a walk: items, page lengths, tokens; checks each page's shape."""
    items, lengths, tokens = [], [], []
    token = None
    for _ in range(10_000):
        page = pages(token)
        items += page.items
        lengths.append(len(page))
        tokens.append(page.next)
        assert len(page) <= size
        if page.next is None:
            return items, lengths, tokens
        assert len(page) == size, "a page before the last one is full"
        assert isinstance(page.next, str) and page.next.isascii()
        assert all(c.isalnum() or c in "-_" for c in page.next), "URL-safe"
        token = page.next
    raise AssertionError("the walk did not end")


# -- pages concatenate to the unpaged answer ------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_pages_concatenate_to_the_unpaged_answer(backend: Backend, shape: Shape,
                                                 request: pytest.FixtureRequest) -> None:
    @settings(max_examples=EXAMPLES[_kind(request)], deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        model = shape.make_model(uuid.uuid4().hex[:10].upper())
        secret = data.draw(st.sampled_from([SECRET, None]), label="secret")
        conn = ts.Connection(backend, cursor_secret=secret)
        conn.create_tables(model)
        try:
            ref = Reference(shape)
            for batch in data.draw(st.lists(tst.oracle_batches(shape), min_size=1, max_size=6),
                                   label="saves"):
                conn.save_all([model(**{**e.fields(), "time": aware(e.t, e.zone)})
                               for e in batch])
                ref.save(batch)
            q = data.draw(tst.oracle_range_queries(shape), label="query")
            lo, hi = min(q.start, q.end), max(q.start, q.end)
            if data.draw(st.sampled_from([True, True, False]), label="wide"):  # most events
                lo, hi = 0, _LAST_US
                q = replace(q, fields=tuple(data.draw(tst.oracle_key_prefixes(shape)).items()))
            current = shape.current and data.draw(st.integers(0, 3), label="current") == 0
            if current:  # the current-value table, newest first not asked
                q = replace(q, fields=data.draw(tst.oracle_current_queries(shape)).fields,
                            refine=replace(q.refine, newest_first=False))
            try:
                want = (ref.current(dict(q.fields), allow_scan=q.allow_scan) if current else
                        ref.range(lo, hi, dict(q.fields), allow_scan=q.allow_scan,
                                  newest_first=q.refine.newest_first))
            except Refused:
                assume(False)
                return
            if q.refine.only is not None:
                want = _only(want, q.refine.only)
            limit = data.draw(st.one_of(st.none(), st.integers(0, 12)), label="limit")
            expected = [e.strict() for e in want.events][:limit]
            size = data.draw(st.integers(1, 4), label="size")
            fresh = data.draw(st.booleans(), label="each page on a fresh connection")

            def query(c: ts.Connection) -> Any:
                qs = model.using(c).current(allow_scan=q.allow_scan, **dict(q.fields)) \
                    if current else model.using(c).range(aware(lo, q.zone), aware(hi, q.zone),
                                                         allow_scan=q.allow_scan, **dict(q.fields))
                qs = qs.newest_first() if q.refine.newest_first else qs
                qs = qs.only(*q.refine.only) if q.refine.only is not None else qs
                return qs if limit is None else qs.limit(limit)

            def pages(token: str | None) -> Any:
                c = ts.Connection(backend, cursor_secret=secret) if fresh else conn
                return query(c).page(size, after=token)

            items, lengths, _ = _walk(pages, size)
            assert [_ev(shape, e).strict() for e in items] == expected
            assert len(lengths) == max(1, -(-len(expected) // size))
            # The iterator's cursor after any row re-opens the rest.
            cut = data.draw(st.integers(0, len(expected)), label="cut")
            it = query(conn).iterator()
            head = [_ev(shape, e).strict() for e in list(_take(it, cut))]
            rest = [_ev(shape, e).strict() for e in query(conn).after(it.cursor)]
            it.close()
            assert head + rest == expected
        finally:
            conn.drop_tables(model)

    run()


def _take(it: Iterator[Any], n: int) -> Iterator[Any]:
    for _ in range(n):
        yield next(it)


# -- a model salted on time: streams merged by time -----------------------------------------


def _readings(conn: ts.Connection, model: type, n: int, step_ms: int = 7) -> list[Any]:
    events = [model(time=cursor_app.START + timedelta(milliseconds=step_ms * i),
                    host=f"h{i % 5}", value=i) for i in range(n)]
    conn.save_all(events)
    return events


def _rows(events: list[Any], newest_first: bool = False) -> list[list[Any]]:
    """The oracle: the events in time order, as the app prints them."""
    return _printed(sorted(events, key=lambda e: e.time, reverse=newest_first))


def _printed(items: list[Any]) -> list[list[Any]]:
    return [[e.host, int(e.time.timestamp() * 1_000_000), e.value] for e in items]


@pytest.mark.parametrize("newest_first", [False, True])
def test_salted_streams_merged_by_time_page_exactly(backend: Backend, table_name: str,
                                                    newest_first: bool) -> None:
    model = cursor_app.declare(table_name)
    conn = ts.Connection(backend, cursor_secret=SECRET)
    conn.create_tables(model)
    try:
        events = _readings(conn, model, 40)
        qs = model.using(conn).range(cursor_app.START, cursor_app.END)
        qs = qs.newest_first() if newest_first else qs
        plan = qs.explain()
        assert plan.merge == "time" and len(plan.requests) == 3
        assert any(r.reverse for r in plan.requests) == newest_first
        for size in (1, 3, 8, 40, 41):
            items, _, _ = _walk(lambda token, n=size: qs.page(n, after=token), size)
            assert _printed(items) == _rows(events, newest_first), f"size {size}"
    finally:
        conn.drop_tables(model)


def _url(backend: Backend, tmp_path: Any) -> tuple[str, Backend]:
    """A URL another process opens to the same data, and a backend on it here."""
    from tsmodel.backends.bigtable import BigtableBackend
    from tsmodel.backends.embedded import EmbeddedBackend

    if isinstance(backend, BigtableBackend):
        return (f"bigtable-emulator://{backend.emulator_host}/{backend.project}/"
                f"{backend.instance}", backend)
    path = tmp_path / "cursors.db"
    return f"sqlite:///{path}", EmbeddedBackend(str(path))


def test_a_token_reopens_the_query_in_another_process(backend: Backend, table_name: str,
                                                      tmp_path: Any) -> None:
    url, here = _url(backend, tmp_path)
    model = cursor_app.declare(table_name)
    conn = ts.Connection(here, cursor_secret=SECRET)
    conn.create_tables(model)
    try:
        events = _readings(conn, model, 30)
        first = cursor_app.page(conn, model, None, 7)
        out = subprocess.run(
            [sys.executable, "-m", "tests.backends.cursor_app", url, table_name, SECRET,
             str(first["next"]), "9"], cwd=ROOT, capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, *sys.path])})
        second = json.loads(out.stdout)
        third = cursor_app.page(conn, model, second["next"], 100)  # back in this process
        assert third["next"] is None
        assert first["items"] + second["items"] + third["items"] == _rows(events, True)
        # The other process's secret was the same: a connection without it refuses.
        with pytest.raises(ts.InvalidCursorError, match="signed"):
            cursor_app.page(ts.Connection(here), model, second["next"], 5)
    finally:
        conn.drop_tables(model)
        if here is not backend:
            here.close()


# -- tokens that do not fit -------------------------------------------------------------------


def test_altered_truncated_and_foreign_tokens_raise(backend: Backend, table_name: str) -> None:
    model = cursor_app.declare(table_name)
    signed = ts.Connection(backend, cursor_secret=SECRET)
    plain = ts.Connection(backend)
    signed.create_tables(model)
    try:
        _readings(signed, model, 12)
        qs = model.range(cursor_app.START, cursor_app.END)
        for conn in (signed, plain):
            token = qs.using(conn).page(3).next
            assert token is not None
            raw = _raw(token)
            refused = 0
            for i in range(len(token)):  # every character changed
                for c in ("A", "z", "-", "0"):
                    changed = token[:i] + c + token[i + 1:]
                    if changed == token or _raw(changed) == raw:
                        continue  # the same bytes (unused bits of the last character)
                    with pytest.raises(ts.InvalidCursorError):
                        qs.using(conn).page(3, after=changed)
                    refused += 1
            assert refused >= 3 * len(token)
            for n in range(len(token)):  # every truncation
                with pytest.raises(ts.InvalidCursorError):
                    qs.using(conn).page(3, after=token[:n])
            for junk in ("", "!!!", "é", token + "A", token + token):
                with pytest.raises(ts.InvalidCursorError):
                    qs.using(conn).page(3, after=junk)
            with pytest.raises(TypeError):
                qs.using(conn).after(raw)  # type: ignore[arg-type]
            foreign = [
                qs.newest_first(),
                model.range(cursor_app.START, cursor_app.END - timedelta(seconds=1)),
                qs.only("value"),
                cursor_app.declare(table_name + "x").range(cursor_app.START, cursor_app.END),
                qs.where(value__gte=0),  # a value condition the server applies
            ]
            for other in foreign:
                with pytest.raises(ts.InvalidCursorError, match="another query"):
                    other.using(conn).page(3, after=token)
            # Queries that differ only in a server-side value condition differ too.
            narrow = qs.where(value__gt=1).using(conn).page(2).next
            assert narrow is not None
            with pytest.raises(ts.InvalidCursorError, match="another query"):
                qs.where(value__gt=2).using(conn).page(2, after=narrow)
            # The limit and the page size are not the query: they may differ.
            assert len(qs.using(conn).limit(5).page(4, after=token)) == 2
        with pytest.raises(ts.InvalidCursorError, match="not signed"):
            qs.using(signed).page(3, after=qs.using(plain).page(3).next)
        with pytest.raises(ts.InvalidCursorError, match="no cursor_secret"):
            qs.using(plain).page(3, after=qs.using(signed).page(3).next)
        other_secret = ts.Connection(backend, cursor_secret=SECRET + "!")
        with pytest.raises(ts.InvalidCursorError, match="another secret"):
            qs.using(other_secret).page(3, after=qs.using(signed).page(3).next)
        with pytest.raises(ts.ConfigurationError, match="at least 16 bytes"):
            ts.Connection(backend, cursor_secret="short")
    finally:
        signed.drop_tables(model)


def _raw(token: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except ValueError:
        return None


def test_queries_sorted_in_memory_hand_out_no_cursors(backend: Backend, table_name: str) -> None:
    week1 = datetime(2024, 1, 1, tzinfo=UTC)

    @ts.model(table=table_name, family="F", layout=ts.cells(), max_versions=1000)
    class Balloon:
        location: str = ts.key()
        time: datetime = ts.timestamp(bucket="week", label="week{n}", origin=week1,
                                      unsorted_labels=True)
        pressure: int = ts.value("P")

    conn = ts.Connection(backend)
    conn.create_tables(Balloon)
    try:
        events = [Balloon(location=loc, time=week1 + timedelta(days=3 * i), pressure=i)
                  for i in range(40) for loc in ("a", "b")]
        conn.save_all(events)
        qs = Balloon.using(conn).range(week1, week1 + timedelta(weeks=30), allow_scan=True)
        assert qs.explain().merge == "sort"
        with pytest.raises(ts.QueryError, match="hands out no cursors"):
            qs.page(5)
        it = qs.iterator()
        assert next(it) is not None
        with pytest.raises(ts.QueryError, match="sorted in memory"):
            it.cursor  # noqa: B018
        it.close()
        assert len(list(qs)) == len(events)  # iterating works all the same
    finally:
        conn.drop_tables(Balloon)


# -- a position, not a snapshot ---------------------------------------------------------------


def _bucket_model(table: str) -> type:
    @ts.model(table=table, family="F", layout=ts.cells(), max_versions=1000)
    class Game:
        game: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour", label="%Y%m%d%H")
        score: int = ts.value("S")

    return Game


def _row_model(table: str) -> type:
    @ts.model(table=table, family="F")
    class Game:
        game: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        score: int = ts.value("S")

    return Game


@pytest.mark.parametrize("declare", [_bucket_model, _row_model], ids=["buckets", "rows"])
@pytest.mark.parametrize("newest_first", [False, True])
def test_events_written_between_pages_come_when_they_sort_after(
        backend: Backend, table_name: str, declare: Any, newest_first: bool) -> None:
    model = declare(table_name)
    conn = ts.Connection(backend)
    conn.create_tables(model)
    h0 = datetime(2024, 5, 1, 10, tzinfo=UTC)
    try:
        minutes = [0, 10, 20, 30, 40, 50, 60, 70, 80]  # two hour buckets
        saved = {m: model(game="g", time=h0 + timedelta(minutes=m), score=m) for m in minutes}
        conn.save_all(list(saved.values()))
        qs = model.using(conn).range(h0 - timedelta(hours=1), h0 + timedelta(hours=3), game="g")
        qs = qs.newest_first() if newest_first else qs
        first = qs.page(4)  # ends inside a bucket row
        shown = {e.time for e in first}
        last = first.items[-1].time
        # New events on both sides of the position, in its own bucket row too.
        late = [5, 15, 25, 35, 45, 55, 65, 75, 85, 95]
        conn.save_all([model(game="g", time=h0 + timedelta(minutes=m), score=1000 + m)
                       for m in late])
        for m in (30, 40):  # corrections of events on both sides of it
            conn.save(model(game="g", time=h0 + timedelta(minutes=m), score=-m))
        everything = {m: m for m in minutes} | {m: 1000 + m for m in late} | {30: -30, 40: -40}
        after = sorted((h0 + timedelta(minutes=m), s) for m, s in everything.items()
                       if (h0 + timedelta(minutes=m) < last if newest_first
                           else h0 + timedelta(minutes=m) > last))
        want = after[::-1] if newest_first else after
        rest, _, _ = _walk(lambda token: qs.page(3, after=token or first.next), 3)
        assert [(e.time, e.score) for e in rest] == want
        assert not shown & {e.time for e in rest}, "no event twice"
    finally:
        conn.drop_tables(model)


# -- the iterator resumes by itself -----------------------------------------------------------


class Breaking(PassThrough):
    """Reads that break off with ReadInterruptedError: the n-th read (counted from 0)
    before its row number ``plan[n]`` (if it has one; ``None``: never, ``-1``: at
    once, rows or not); counts the reads and the breaks."""

    def __init__(self, inner: Backend, plan: list[int | None]) -> None:
        super().__init__(inner)
        self.plan = plan
        self.reads = 0
        self.broken = 0

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        cut = self.plan[self.reads] if self.reads < len(self.plan) else None
        self.reads += 1
        return self._rows(self.inner.read_rows(request), cut)

    def _rows(self, rows: Iterator[Row], cut: int | None) -> Iterator[Row]:
        try:
            if cut == -1:
                self.broken += 1
                raise ts.ReadInterruptedError("injected: the read failed")
            for n, row in enumerate(rows):
                if n == cut:
                    self.broken += 1
                    raise ts.ReadInterruptedError("injected: the stream broke off")
                yield row
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()


@pytest.fixture
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "RESUME_DELAY", 0.0)


@pytest.mark.usefixtures("no_wait")
@pytest.mark.parametrize("declare", [cursor_app.declare, _bucket_model], ids=["salted", "buckets"])
def test_iterator_resumes_after_broken_streams(backend: Backend, table_name: str,
                                               declare: Any) -> None:
    model = declare(table_name)
    ts.Connection(backend).create_tables(model)
    try:
        if declare is _bucket_model:
            h0 = datetime(2024, 5, 1, tzinfo=UTC)
            events = [model(game="g", time=h0 + timedelta(minutes=7 * i), score=i)
                      for i in range(60)]
            ts.Connection(backend).save_all(events)
            qs = model.range(h0, h0 + timedelta(days=1), game="g")
        else:
            events = _readings(ts.Connection(backend), model, 60)
            qs = model.range(cursor_app.START, cursor_app.END)
        for newest_first in (False, True):
            q = qs.newest_first() if newest_first else qs
            want = sorted(events, key=lambda e: e.time, reverse=newest_first)
            # Reads break after a few rows; some run through.
            cuts = [1, 2, 1, 3, None] if declare is _bucket_model else \
                [None, 4, None, 7, None, None, 3, 9, None] * 20
            breaking = Breaking(backend, cuts)
            got = list(q.using(ts.Connection(breaking)))
            assert got == want
            assert breaking.broken >= 4, "streams broke"
    finally:
        ts.Connection(backend).drop_tables(model)


@pytest.mark.usefixtures("no_wait")
def test_iterator_gives_up_with_a_cursor(backend: Backend, table_name: str) -> None:
    model = cursor_app.declare(table_name)
    conn = ts.Connection(backend, cursor_secret=SECRET)
    conn.create_tables(model)
    try:
        events = _readings(conn, model, 30)
        qs = model.range(cursor_app.START, cursor_app.END)
        plan = qs.explain()
        opened = len(plan.guards) + len(plan.requests)
        # The first opening runs until its last read has given 8 rows; then 4 openings
        # (the first, and 3 re-openings) break at once: no new instance.
        breaking = Breaking(backend, [None] * (opened - 1) + [8] + [-1] * 4 * opened)
        got: list[Any] = []
        with pytest.raises(ts.ReadInterruptedError, match="re-opened 3 times") as info:
            for e in qs.using(ts.Connection(breaking, cursor_secret=SECRET)):
                got.append(e)
        assert info.value.cursor is not None
        assert isinstance(info.value.__cause__, ts.ReadInterruptedError)
        rest = list(qs.using(conn).after(info.value.cursor))
        assert got + rest == sorted(events, key=lambda e: e.time)
        assert got, "some instances came before the streams broke for good"
    finally:
        conn.drop_tables(model)


class BreakingBatches(Breaking):
    """`Breaking` of reads in column batches (``read_batches``): the n-th read breaks
    off before its batch number ``plan[n]``; counts the reads in batches apart."""

    batch_reads = 0

    def read_batches(self, request: ReadRequest) -> Iterator[Any]:
        cut = self.plan[self.reads] if self.reads < len(self.plan) else None
        self.reads += 1
        self.batch_reads += 1
        return self._rows(self.inner.read_batches(request), cut)  # type: ignore[attr-defined]


def _arrow_table(qs: Any, breaking: BreakingBatches, how: str) -> Any:
    """``qs.to_arrow()`` on a connection reading through ``breaking``: ``how`` says
    which (the sync API, the async one on a thread-backed backend, a read cache)."""
    if how == "sync":
        return qs.using(ts.Connection(breaking)).to_arrow()
    if how == "cached":
        return qs.using(ts.Connection(CachingBackend(breaking))).to_arrow()
    from tsmodel.backends.threaded import ThreadedBackend

    async def run() -> Any:
        async with ts.AsyncConnection(ThreadedBackend(breaking)) as adb:
            return await qs.using(adb).to_arrow()

    return asyncio.run(run())


@pytest.mark.usefixtures("no_wait")
@pytest.mark.parametrize("how", ["sync", "async", "cached"])
def test_columnar_reads_in_batches_resume_after_broken_streams(backend: Backend,
                                                               table_name: str,
                                                               how: str) -> None:
    """``to_arrow()`` reads whole rows in column batches, on the sync API, the async
    one and through a read cache; a stream broken off between batches is resumed
    after the last row of the last batch, no row lost or twice."""
    pytest.importorskip("pyarrow")

    @ts.model(table=table_name, family="M")
    class Gauge:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        level: float = ts.value("L")

    conn = ts.Connection(backend)
    conn.create_tables(Gauge)
    try:
        t0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
        # Enough rows for each read to come in two batches or more: a batch is 256
        # rows or more (on Cloud Bigtable, the responses of a group of up to 256).
        events = [Gauge(host="h", time=t0 + timedelta(seconds=i), level=i / 4)
                  for i in range(2000)]
        assert conn.save_all(events).ok
        qs = Gauge.range(t0, t0 + timedelta(days=1), host="h")
        breaking = BreakingBatches(backend, [1, 2, None])
        table = _arrow_table(qs, breaking, how)
        assert table.column("level").to_pylist() == [e.level for e in events]
        assert [t.timestamp() for t in table.column("time").to_pylist()] == \
            [e.time.timestamp() for e in events]
        assert breaking.batch_reads == breaking.reads == 3, "read in batches"
        assert breaking.broken == 2, "broken twice"
    finally:
        conn.drop_tables(Gauge)


# -- asyncio ------------------------------------------------------------------------------


class AsyncBreaking(AsyncPassThrough):
    """:class:`Breaking` for an AsyncBackend."""

    def __init__(self, inner: Any, plan: list[int | None]) -> None:
        super().__init__(inner)
        self.plan = plan
        self.reads = 0
        self.broken = 0

    def read_rows(self, request: ReadRequest) -> AsyncIterator[Row]:
        cut = self.plan[self.reads] if self.reads < len(self.plan) else None
        self.reads += 1
        return self._rows(self.inner.read_rows(request), cut)

    async def _rows(self, rows: AsyncIterator[Row], cut: int | None) -> AsyncIterator[Row]:
        n = 0
        try:
            async for row in rows:
                if n == cut:
                    self.broken += 1
                    raise ts.ReadInterruptedError("injected: the stream broke off")
                n += 1
                yield row
        finally:
            aclose = getattr(rows, "aclose", None)
            if aclose is not None:
                await aclose()


@pytest.mark.usefixtures("no_wait")
def test_async_pages_and_resume(backend: Backend, table_name: str) -> None:
    model = cursor_app.declare(table_name)
    conn = ts.Connection(backend, cursor_secret=SECRET)
    conn.create_tables(model)

    async def run() -> None:
        async with asynchronous(backend) as inner:
            breaking = AsyncBreaking(inner, [None, 4, None, 7, None, None, 3, 9, None] * 20)
            adb = ts.AsyncConnection(breaking, cursor_secret=SECRET)
            qs = model.using(adb).range(cursor_app.START, cursor_app.END).newest_first()
            want = sorted(events, key=lambda e: e.time, reverse=True)
            assert [e async for e in qs] == want
            assert breaking.broken >= 3
            # Pages: the first on the sync connection, the rest on the async one.
            sync_qs = model.using(conn).range(cursor_app.START, cursor_app.END).newest_first()
            first = sync_qs.page(6)
            got, token = list(first), first.next
            while token is not None:
                page = await qs.page(6, after=token)
                got += page.items
                token = page.next
            assert got == want
            it = qs.aiterator()
            head = [await it.__anext__() for _ in range(5)]
            rest = list(sync_qs.after(it.cursor))
            await it.aclose()
            assert head + rest == want
            assert await qs.after(first.next).first() == want[6]

    try:
        events = _readings(conn, model, 40)
        asyncio.run(run())
    finally:
        conn.drop_tables(model)


# -- what a page costs --------------------------------------------------------------------


class Counting(PassThrough):
    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.reads = 0
        self.rows = 0

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        self.reads += 1
        return self._count(self.inner.read_rows(request))

    def _count(self, rows: Iterator[Row]) -> Iterator[Row]:
        for row in rows:
            self.rows += 1
            yield row


def test_a_page_costs_the_reads_of_its_plan(backend: Backend, table_name: str) -> None:
    salted = cursor_app.declare(table_name)
    plain = _row_model(table_name + "p")
    conn = ts.Connection(backend)
    conn.create_tables(salted, plain)
    try:
        _readings(conn, salted, 30)
        conn.save_all([plain(game="g", time=cursor_app.START + timedelta(seconds=i), score=i)
                       for i in range(30)])
        counting = Counting(backend)
        c = ts.Connection(counting)
        one = plain.using(c).range(cursor_app.START, cursor_app.END, game="g")
        page = one.page(10)
        assert (counting.reads, counting.rows) == (1, 11), "one read: 10 rows and the peek"
        counting.reads = counting.rows = 0
        one.page(10, after=page.next)
        assert (counting.reads, counting.rows) == (1, 12), "and the mark's row again"
        merged = salted.using(c).range(cursor_app.START, cursor_app.END)
        plan = merged.explain()
        counting.reads = 0
        merged.page(10, after=merged.page(10).next)
        assert counting.reads == 2 * (len(plan.guards) + len(plan.requests))
    finally:
        conn.drop_tables(salted, plain)


# -- the fault-injecting proxy on the emulator --------------------------------------------------


@pytest.mark.emulator
@pytest.mark.usefixtures("no_wait")
def test_iterator_resumes_what_the_bigtable_backend_gives_up(
        emulator: Any, table_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams cut by the proxy; the backend retries nothing (``retry_attempts=1``,
    as when its deadline has passed), so that each cut reaches the QuerySet."""
    from tests.faults.proxy import FaultProxy, Faults
    from tsmodel.backends.bigtable import BigtableBackend

    direct = ts.Connection(BigtableBackend("p", "i", emulator_host=emulator.host_port))
    model = cursor_app.declare(table_name)
    bucketed = _bucket_model(table_name + "b")
    direct.create_tables(model, bucketed)
    h0 = datetime(2024, 5, 1, tzinfo=UTC)
    try:
        events = _readings(direct, model, 120)
        games = [bucketed(game="g", time=h0 + timedelta(minutes=3 * i), score=i)
                 for i in range(120)]
        direct.save_all(games)
        with FaultProxy(emulator.host_port, seed=3) as proxy:
            proxied = ts.connect(f"bigtable-emulator://{proxy.host_port}/p/i", default=False,
                                 retry_attempts=1, cursor_secret=SECRET)
            # Exactness is the point here (the bound has its own test): with four
            # faulted calls per opening, 3 openings in a row may well bring nothing.
            monkeypatch.setattr(fanout, "RESUME_ATTEMPTS", 50)
            resumed: list[BaseException] = []
            resume = fanout._Resuming._resume

            def counted(self: Any, exc: ts.ReadInterruptedError) -> float:
                resumed.append(exc)
                return resume(self, exc)

            monkeypatch.setattr(fanout._Resuming, "_resume", counted)
            proxy.faults = Faults(read_cut=0.25, read_rst=0.15)
            for newest_first in (False, True, False, True):
                for qs, saved in ((model.range(cursor_app.START, cursor_app.END), events),
                                  (bucketed.range(h0, h0 + timedelta(days=1), game="g"),
                                   games)):
                    q = qs.newest_first() if newest_first else qs
                    want = sorted(saved, key=lambda e: e.time, reverse=newest_first)
                    assert list(q.using(proxied)) == want
            cuts = sum(n for kind, n in proxy.injected.items() if kind.startswith("read."))
            assert cuts >= 4, proxy.injected
            assert len(resumed) >= 3, "the cuts reached the QuerySet, which resumed"
            proxied.close()
    finally:
        direct.drop_tables(model, bucketed)
        direct.close()
