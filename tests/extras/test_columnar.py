"""Columnar results (to_arrow, to_pandas, to_polars) on both backends.

Every shape of the oracle harness (tests/oracle/shapes.py) saves drawn
batches and runs drawn range and current() queries as Arrow tables; each
answer is compared with the reference model (tests/oracle/reference.py: what
the saved events say the query returns) and with the instances the same
query builds. The dtypes are checked against the model's declaration.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tsmodel as ts  # noqa: E402
from tests import strategies as tst  # noqa: E402
from tests.backends import conftest as _backends  # noqa: E402
from tests.backends.conftest import asynchronous  # noqa: E402
from tests.oracle.ops import RangeQuery, Refine, aware  # noqa: E402
from tests.oracle.reference import Answer, Ev, Reference, Refused  # noqa: E402
from tests.oracle.shapes import CELLS, ROWS, ROWS_US, SHAPES, Shape, us_of  # noqa: E402
from tests.whole_key_rows import bucket_models  # noqa: E402
from tsmodel.backends.base import Backend  # noqa: E402

UTC = timezone.utc
#: The conformance suite's fixtures: the embedded store and the emulator.
backend, emulator = _backends.backend, _backends.emulator
#: Examples per shape and backend.
EXAMPLES = {"embedded": 8, "emulator": 3}


def _events_of_table(shape: Shape, table: Any) -> list[Ev]:
    """An Arrow table of results as events; a value column left out by only() is None."""
    out = []
    for row in table.to_pylist():
        when = row["time"]
        assert isinstance(when, datetime) and when.utcoffset() == timedelta(0), when
        out.append(Ev(tuple((n, row[n]) for n in shape.key_fields), us_of(when),
                      tuple((v.name, row.get(v.name)) for v in shape.values)))
    return out


def _events_of_instances(shape: Shape, items: list[Any]) -> list[Ev]:
    return [Ev(tuple((n, getattr(i, n)) for n in shape.key_fields), us_of(i.time),
               tuple((v.name, getattr(i, v.name)) for v in shape.values)) for i in items]


def _refined(qs: Any, refine: Refine) -> Any:
    if refine.newest_first:
        qs = qs.newest_first()
    if refine.only is not None:
        qs = qs.only(*refine.only)
    if refine.limit is not None:
        qs = qs.limit(refine.limit)
    return qs


def _async_arrow(backend: Backend, qs: Any) -> tuple[Any, Any]:
    """``qs.to_arrow()`` and its ``to_arrow_batches()`` on the async API, on the
    asyncio backend of ``backend``'s kind and store."""
    async def run() -> tuple[Any, Any]:
        async with asynchronous(backend) as ab:
            aqs = qs.using(ts.AsyncConnection(ab))
            return await aqs.to_arrow(), [b async for b in aqs.to_arrow_batches(rows=7)]

    return asyncio.run(run())


def _check(shape: Shape, want: Answer | Refused, refine: Refine, run: Any, what: str,
           backend: Backend) -> None:
    """The query as Arrow against the reference and against its instances, and the
    async API's Arrow against the sync one's."""
    if isinstance(want, Refused):
        with pytest.raises((ts.QueryError, ts.DoesNotExist)) as raised:
            run().to_arrow()
        assert type(raised.value).__name__ == want.kind or want.kind in [
            c.__name__ for c in type(raised.value).__mro__], what
        return
    qs = run()
    table = qs.to_arrow()
    got = _events_of_table(shape, table)
    if refine.only is not None:
        assert set(table.column_names) == {*shape.key_fields, "time", *refine.only}, what
        want = Answer(tuple(replace(e, values=tuple(
            (k, v if k in refine.only else None) for k, v in e.values)) for e in want.events))
    assert want.problem(got, refine.limit) is None, (
        f"{what}\n  expected: {want.events[:refine.limit]!r}\n  got:      {got!r}")
    instances = _events_of_instances(shape, list(qs))
    assert [e.strict() for e in got] == [e.strict() for e in instances], what
    async_table, async_batches = _async_arrow(backend, qs)
    assert async_table.equals(table), what
    assert all(b.num_rows == 7 for b in async_batches[:-1]), what
    streamed = pa.Table.from_batches(async_batches, table.schema)  # dictionaries per batch
    assert streamed.to_pylist() == table.to_pylist(), what


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_arrow_answers_as_the_reference(backend: Backend, shape: Shape,
                                        request: pytest.FixtureRequest) -> None:
    kind = request.node.callspec.params["backend"]

    @settings(max_examples=EXAMPLES[kind], deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        model = shape.make_model(uuid.uuid4().hex[:10].upper())
        conn = ts.Connection(backend)
        conn.create_tables(model)
        try:
            ref = Reference(shape)
            for batch in data.draw(st.lists(tst.oracle_batches(shape), min_size=1,
                                            max_size=3), label="batches"):
                result = conn.save_all([model(**{**e.fields(), "time": aware(e.t, e.zone)})
                                        for e in batch])
                assert result.ok, result.summary()
                ref.save(batch)
            everything = RangeQuery(min(shape.times), max(shape.times) + 1, (), True,
                                    data.draw(tst.oracle_refinements(shape), label="refine"))
            for q in [everything, *data.draw(st.lists(tst.oracle_range_queries(shape),
                                                      max_size=2), label="range queries")]:
                try:
                    want: Answer | Refused = ref.range(
                        q.start, q.end, dict(q.fields), allow_scan=q.allow_scan,
                        newest_first=q.refine.newest_first)
                except Refused as refused:
                    want = refused
                _check(shape, want, q.refine, lambda q=q: _refined(model.range(
                    aware(q.start, q.zone), aware(q.end, -q.zone), allow_scan=q.allow_scan,
                    **dict(q.fields)).using(conn), q.refine), repr(q), backend)
            if shape.current:
                q = data.draw(tst.oracle_current_queries(shape), label="current query")
                try:
                    want = ref.current(dict(q.fields), allow_scan=q.allow_scan)
                except Refused as refused:
                    want = refused
                _check(shape, want, q.refine, lambda: _refined(model.current(
                    allow_scan=q.allow_scan, **dict(q.fields)).using(conn), q.refine), repr(q),
                       backend)
        finally:
            conn.drop_tables(model)

    run()


@pytest.fixture
def rows_model(backend: Backend) -> Any:
    """The ROWS shape's model with a few events: (model, connection, events saved)."""
    model = ROWS.make_model(uuid.uuid4().hex[:10].upper())
    conn = ts.Connection(backend)
    conn.create_tables(model)
    t0 = datetime(2015, 3, 2, tzinfo=UTC)
    events = [model(site=site, host=host, time=t0 + timedelta(seconds=i), x=i * host,
                    note=None if i % 3 else f"n{i}")
              for site in ("a", "b") for host in (1, 2) for i in range(7)]
    assert conn.save_all(events).ok
    yield model, conn, events
    conn.drop_tables(model)


def test_dtypes_follow_the_declaration(rows_model: Any) -> None:
    model, conn, events = rows_model
    qs = model.range(datetime(2015, 3, 1, tzinfo=UTC), datetime(2015, 3, 3, tzinfo=UTC),
                     site="a").using(conn)
    table = qs.to_arrow()
    assert table.schema == pa.schema([
        ("site", pa.dictionary(pa.int32(), pa.string())), ("host", pa.int64()),
        ("time", pa.timestamp("ms", tz="UTC")), ("x", pa.int64()), ("note", pa.string())])
    assert table.num_rows == 14
    frame = qs.to_pandas()
    assert {c: str(t) for c, t in frame.dtypes.items()} == {
        "site": "category", "host": "Int64", "time": "datetime64[ms, UTC]", "x": "Int64",
        "note": "string"}
    assert frame["note"].isna().sum() == sum(1 for e in events if e.site == "a"
                                             and e.note is None)
    polars = qs.to_polars()
    assert polars.schema == pl.Schema({
        "site": pl.Categorical(), "host": pl.Int64(), "time": pl.Datetime("ms", "UTC"),
        "x": pl.Int64(), "note": pl.String()})
    expected = sorted((e.site, e.host, e.time, e.x, e.note) for e in events if e.site == "a")
    assert sorted(polars.rows()) == expected
    assert sorted(tuple(None if pd.isna(v) else v for v in row)
                  for row in frame.itertuples(index=False, name=None)) == expected


def test_microsecond_times_and_nullable_bools(backend: Backend) -> None:
    model = ROWS_US.make_model(uuid.uuid4().hex[:10].upper())
    conn = ts.Connection(backend)
    conn.create_tables(model)
    try:
        t0 = datetime(2015, 3, 16, 19, 53, 32, 1, tzinfo=UTC)
        events = [model(dev="d1", time=t0 + timedelta(microseconds=7 * i), v=i / 4,
                        ok=(None, True, False)[i % 3]) for i in range(5)]
        assert conn.save_all(events).ok
        frame = model.range(t0, t0 + timedelta(seconds=1), dev="d1").using(conn).to_pandas()
        assert {c: str(t) for c, t in frame.dtypes.items()} == {
            "dev": "category", "time": "datetime64[us, UTC]", "v": "float64", "ok": "boolean"}
        assert list(frame["time"]) == [e.time for e in events]
        assert [None if pd.isna(b) else bool(b) for b in frame["ok"]] == [e.ok for e in events]
    finally:
        conn.drop_tables(model)


def test_an_empty_result_has_the_schema(rows_model: Any) -> None:
    model, conn, _ = rows_model
    qs = model.range(datetime(2000, 1, 1, tzinfo=UTC), datetime(2000, 1, 2, tzinfo=UTC),
                     site="a").using(conn)
    full = model.range(datetime(2015, 3, 1, tzinfo=UTC), datetime(2015, 3, 3, tzinfo=UTC),
                       site="a").using(conn)
    table = qs.to_arrow()
    assert table.num_rows == 0 and table.schema == full.to_arrow().schema
    assert list(qs.to_pandas().columns) == ["site", "host", "time", "x", "note"]
    assert qs.to_polars().schema == full.to_polars().schema
    assert list(qs.to_arrow_batches()) == []


def test_batches_stream_and_stop(rows_model: Any) -> None:
    model, conn, events = rows_model
    qs = model.range(datetime(2015, 3, 1, tzinfo=UTC), datetime(2015, 3, 3, tzinfo=UTC),
                     allow_scan=True).using(conn)
    batches = list(qs.to_arrow_batches(rows=5))
    assert [b.num_rows for b in batches] == [5] * 5 + [3]
    assert pa.Table.from_batches(batches).to_pylist() == qs.to_arrow().to_pylist()
    assert len(qs.to_arrow()) == len(events)
    stream = qs.to_arrow_batches(rows=2)
    assert next(stream).num_rows == 2
    stream.close()  # the reads still streaming end
    with pytest.raises(ValueError, match="rows per batch"):
        qs.to_arrow_batches(rows=0)


def test_history_gives_the_version_column(backend: Backend) -> None:
    @ts.model(table="HIST_" + uuid.uuid4().hex[:8], family="F", max_versions=None)
    class Reading:
        meter: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        kwh: float = ts.value("KWH")
        entered: datetime = ts.version()

    conn = ts.Connection(backend)
    conn.create_tables(Reading)
    try:
        t0 = datetime(2020, 1, 1, tzinfo=UTC)
        first = [Reading(meter="m", time=t0, kwh=1.0, entered=t0 + timedelta(hours=1))]
        second = [Reading(meter="m", time=t0, kwh=1.5, entered=t0 + timedelta(hours=2))]
        assert conn.save_all(first).ok and conn.save_all(second).ok
        qs = Reading.range(t0, t0 + timedelta(days=1), meter="m").using(conn)
        rows = qs.history().to_arrow().to_pylist()
        assert rows == [{"meter": "m", "time": t0, "kwh": k, "entered": e}
                        for k, e in ((1.0, t0 + timedelta(hours=1)),
                                     (1.5, t0 + timedelta(hours=2)))]
        assert qs.to_arrow().to_pylist() == rows[1:]
    finally:
        conn.drop_tables(Reading)


def test_bucket_rows_newest_first_and_limit(backend: Backend) -> None:
    model = CELLS.make_model(uuid.uuid4().hex[:10].upper())
    conn = ts.Connection(backend)
    conn.create_tables(model)
    try:
        ref = Reference(CELLS)
        events = [Ev(tuple(ent.items()), t, tuple((v.name, v.choices[(i + j) % len(v.choices)])
                                                  for v in CELLS.values))
                  for i, t in enumerate(CELLS.times) for j, ent in enumerate(CELLS.entities)]
        assert conn.save_all([model(**{**e.fields(), "time": aware(e.t, 0)})
                              for e in events]).ok
        ref.save(events)
        lo, hi = min(CELLS.times), max(CELLS.times) + 1
        fields = dict(CELLS.entities[0])
        want = ref.range(lo, hi, fields, newest_first=True)
        got = model.range(aware(lo, 0), aware(hi, 0), **fields).using(conn) \
            .newest_first().limit(3).to_arrow()
        assert want.problem(_events_of_table(CELLS, got), 3) is None
    finally:
        conn.drop_tables(model)


async def test_async_results_are_the_sync_ones(rows_model: Any, backend: Backend) -> None:
    model, conn, _ = rows_model
    start, end = datetime(2015, 3, 1, tzinfo=UTC), datetime(2015, 3, 3, tzinfo=UTC)
    sync = model.range(start, end, allow_scan=True).using(conn)
    async with asynchronous(backend) as ab:
        adb = ts.AsyncConnection(ab)
        qs = model.using(adb).range(start, end, allow_scan=True)
        assert (await qs.to_arrow()).to_pylist() == sync.to_arrow().to_pylist()
        assert (await qs.to_pandas()).equals(sync.to_pandas())
        assert (await qs.to_polars()).equals(sync.to_polars())
        sizes = [b.num_rows async for b in qs.to_arrow_batches(rows=10)]
        assert sizes == [10, 10, 8]


def test_a_snapshot_reads_into_columns(rows_model: Any, backend: Backend) -> None:
    model, conn, events = rows_model
    day = datetime(2015, 3, 2, tzinfo=UTC)
    ts.build_snapshot(model, day, connection=conn, progress=False)
    try:
        table = model.snapshot(day, site="b").using(conn).to_arrow()
        assert sorted((r["site"], r["host"], r["time"], r["x"], r["note"])
                      for r in table.to_pylist()) == sorted(
            (e.site, e.host, e.time, e.x, e.note) for e in events if e.site == "b")
    finally:
        backend.delete_table(ts.spec_of(model).snapshot.table_for(
            int(day.timestamp()) * 1_000_000))


# -- bucket rows read a batch at a time ----------------------------------------------------
#
# ``ts.cells()`` buckets whose values are all required hold a cell per event in each
# value column: the streamed batches of a query are read a whole list at a time
# (`tsmodel.layouts.render_read.render_bucket_batch_columns`). Their columns are
# held to a plain-Python oracle: every event saved, in key order (host, bucket),
# then time, values as saved.


def test_bucket_rows_to_arrow_answer_as_the_oracle(backend: Backend) -> None:
    model = bucket_models()[0]  # hourly ts.cells() buckets, every value required
    conn = ts.Connection(backend)
    conn.create_tables(model)
    try:
        t0 = datetime(2015, 3, 16, 19, 53, tzinfo=UTC)
        events = [model(host=host, time=t0 + timedelta(seconds=41 * i + len(host)),
                        cpu=i / 8 - 3, blk=(i * 7919) % 1000 - 500, name=f"{host}{i % 5}",
                        up=bool(i % 3))
                  for host in ("b", "a", "c.x") for i in range(200)]
        assert conn.save_all(events).ok
        qs = model.range(t0 - timedelta(hours=1), t0 + timedelta(days=1),
                         allow_scan=True).using(conn)
        from tsmodel.io.arrow import ArrowColumns
        assert ArrowColumns(model).takes_batches(qs.explain().codec)
        want = [(e.host, us_of(e.time), e.cpu, e.blk, e.name, e.up)
                for e in sorted(events, key=lambda e: (e.host.encode(), e.time))]
        table = qs.to_arrow()
        assert table.column_names == ["host", "time", "cpu", "blk", "name", "up"]
        got = [(r["host"], us_of(r["time"]), r["cpu"], r["blk"], r["name"], r["up"])
               for r in table.to_pylist()]
        assert got == want
        batches = list(qs.to_arrow_batches(rows=97))
        assert [len(b) for b in batches[:-1]] == [97] * (len(batches) - 1)
        assert [(r["host"], us_of(r["time"]), r["cpu"], r["blk"], r["name"], r["up"])
                for b in batches for r in b.to_pylist()] == want
        frame = qs.to_pandas()
        assert list(frame["blk"]) == [w[3] for w in want]
        assert qs.to_polars()["name"].to_list() == [w[4] for w in want]
        # a range starting and ending inside buckets, for one host
        lo, hi = t0 + timedelta(minutes=37), t0 + timedelta(hours=1, minutes=11)
        part = model.range(lo, hi, host="a").using(conn).to_arrow()
        assert [(r["host"], us_of(r["time"]), r["cpu"], r["blk"], r["name"], r["up"])
                for r in part.to_pylist()] == \
            [w for w in want if w[0] == "a" and us_of(lo) <= w[1] < us_of(hi)]
    finally:
        conn.drop_tables(model)


def _columns_model(suffix: str) -> Any:
    @ts.model(table=f"BUCKET_NEWCOLS_{suffix}", family="M", layout=ts.columns(),
              max_rate=1 / 5)
    class Readings:
        host: str = ts.key()
        metric: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        value: int = ts.value(codec=ts.Text(int))

    return Readings


def test_column_bucket_rows_to_arrow_answer_as_the_oracle(backend: Backend) -> None:
    # ``ts.columns()`` buckets (the value in the qualifier) are read a batch at a time
    # too; events in time order within a row, values as saved, whatever their order
    # as qualifiers (b"-3" < b"10" < b"9").
    model = _columns_model(uuid.uuid4().hex[:10].upper())
    conn = ts.Connection(backend)
    conn.create_tables(model)
    try:
        t0 = datetime(2015, 3, 16, 19, 53, tzinfo=UTC)
        events = [model(host=host, metric=metric, time=t0 + timedelta(seconds=41 * i),
                        value=(i * 7919) % 1000 - 500)
                  for host in ("b", "a") for metric in ("mem", "cpu") for i in range(150)]
        assert conn.save_all(events).ok
        qs = model.range(t0 - timedelta(hours=1), t0 + timedelta(days=1),
                         allow_scan=True).using(conn)
        from tsmodel.io.arrow import ArrowColumns
        assert ArrowColumns(model).takes_batches(qs.explain().codec)
        want = [(e.host, e.metric, us_of(e.time), e.value)
                for e in sorted(events, key=lambda e: (e.host, e.metric, e.time))]
        table = qs.to_arrow()
        assert [(r["host"], r["metric"], us_of(r["time"]), r["value"])
                for r in table.to_pylist()] == want
        assert [(r["host"], r["metric"], us_of(r["time"]), r["value"])
                for b in qs.to_arrow_batches(rows=61) for r in b.to_pylist()] == want
        assert list(qs.to_pandas()["value"]) == [w[3] for w in want]
        assert qs.to_polars()["time"].len() == len(want)
        lo, hi = t0 + timedelta(minutes=37), t0 + timedelta(hours=1, minutes=11)
        part = model.range(lo, hi, host="a", metric="cpu").using(conn).to_arrow()
        assert [(r["host"], r["metric"], us_of(r["time"]), r["value"])
                for r in part.to_pylist()] == \
            [w for w in want if w[:2] == ("a", "cpu") and us_of(lo) <= w[2] < us_of(hi)]
    finally:
        conn.drop_tables(model)


def test_bucket_rows_with_optional_values_to_arrow_answer_as_the_oracle(
        backend: Backend) -> None:
    # Optional values of ``ts.cells()`` buckets: an event without one has no cell in
    # its column (null in the columns, None as the oracle has it).
    @ts.model(table=f"BUCKET_SPARSE_{uuid.uuid4().hex[:10].upper()}", family="M",
              layout=ts.cells(), max_rate=1 / 5)
    class Sparse:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        cpu: float = ts.value("CPU/USR")
        load: float | None = ts.value("LOAD")
        note: str | None = ts.value("NOTE", family="N")

    conn = ts.Connection(backend)
    conn.create_tables(Sparse)
    try:
        t0 = datetime(2015, 3, 16, 19, 53, tzinfo=UTC)
        events = [Sparse(host=host, time=t0 + timedelta(seconds=41 * i), cpu=i / 8,
                         load=None if i % 3 else i / 2, note=None if i % 4 == 1 else f"n{i}")
                  for host in ("b", "a") for i in range(200)]
        assert conn.save_all(events).ok
        qs = Sparse.range(t0 - timedelta(hours=1), t0 + timedelta(days=1),
                          allow_scan=True).using(conn)
        from tsmodel.io.arrow import ArrowColumns
        assert ArrowColumns(Sparse).takes_batches(qs.explain().codec)
        want = [(e.host, us_of(e.time), e.cpu, e.load, e.note)
                for e in sorted(events, key=lambda e: (e.host, e.time))]
        rows = [(r["host"], us_of(r["time"]), r["cpu"], r["load"], r["note"])
                for r in qs.to_arrow().to_pylist()]
        assert rows == want
        assert [(r["host"], us_of(r["time"]), r["cpu"], r["load"], r["note"])
                for b in qs.to_arrow_batches(rows=53) for r in b.to_pylist()] == want
        frame = qs.to_pandas()
        assert [None if pd_isna(x) else x for x in frame["note"]] == [w[4] for w in want]
        assert qs.to_polars()["load"].to_list() == [w[3] for w in want]
    finally:
        conn.drop_tables(Sparse)


def test_rows_with_optional_values_to_arrow_answer_as_the_oracle(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    # A row per event with optional and defaulted values: batches whose rows all have
    # every value's cell are decoded a column at a time, the others row by row, and
    # both answer as the events saved (the oracle), sync and async.
    @ts.model(table=f"ROW_SPARSE_{uuid.uuid4().hex[:10].upper()}", family="M")
    class Sparse:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU/USR")
        load: float | None = ts.value("LOAD", default=None)
        note: str | None = ts.value("NOTE", family="N", default=None)
        level: int = ts.value("LEVEL", default=3)

    conn = ts.Connection(backend)
    conn.create_tables(Sparse)
    try:
        t0 = datetime(2015, 3, 16, 19, 53, tzinfo=UTC)
        # Host a has every value of every event; host b lacks one, late in its range.
        events = [Sparse(host=host, time=t0 + timedelta(seconds=41 * i), cpu=i / 8,
                         load=None if (host, i) == ("b", 1700) else i / 2, note=f"n{i}",
                         level=i % 5)
                  for host in ("b", "a") for i in range(2000)]
        assert conn.save_all(events).ok
        qs = Sparse.range(t0 - timedelta(hours=1), t0 + timedelta(days=2),
                          allow_scan=True).using(conn)
        codec = qs.explain().codec
        assert codec.batch_decoder(("host", "time", "cpu", "load", "note", "level"))
        want = [(e.host, us_of(e.time), e.cpu, e.load, e.note, e.level)
                for e in sorted(events, key=lambda e: (e.host, e.time))]

        def seen(table: Any) -> list[tuple[Any, ...]]:
            return [(r["host"], us_of(r["time"]), r["cpu"], r["load"], r["note"], r["level"])
                    for r in table.to_pylist()]

        from tsmodel.io.arrow import ArrowColumns

        whole = ArrowColumns._whole
        taken: list[int] = []

        def counted(self: Any, *args: Any) -> Any:
            found = whole(self, *args)
            taken.append(found is not None and found.num_rows)
            return found

        monkeypatch.setattr(ArrowColumns, "_whole", counted)
        table = qs.to_arrow()
        assert seen(table) == want
        # Every batch of rows the reader handed over is decoded a column at a time
        # but the one with host b's row without a load, read row by row (a reader's
        # batch holds at most 511 rows).
        assert 4000 - 511 <= sum(taken) < 4000, taken
        of_a = Sparse.range(t0, t0 + timedelta(days=2), host="a").using(conn)
        taken.clear()
        assert seen(of_a.to_arrow()) == [w for w in want if w[0] == "a"]
        assert sum(taken) == 2000, taken
        taken.clear()
        assert [w for b in qs.to_arrow_batches(rows=333) for w in seen(b)] == want
        assert 4000 - 511 <= sum(taken) < 4000, taken
        async_table, async_batches = _async_arrow(backend, qs)
        assert seen(async_table) == want
        assert [w for b in async_batches for w in seen(b)] == want
        assert table.schema.field("load").nullable and table.column("load").null_count == 1
    finally:
        conn.drop_tables(Sparse)


def pd_isna(x: Any) -> bool:
    import pandas as pd

    return bool(pd.isna(x))
