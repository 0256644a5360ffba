"""Frames in: save_frame() of pandas, polars and Arrow data, on both backends.

The oracle of each test is independent of the frame path: the same events
saved with ``save_all`` into a second set of tables (every table of the
model compared cell for cell: main, current-value, alternates, rollups),
and the reference model of the oracle harness (tests/oracle/reference.py)
for what reads return.
"""

from __future__ import annotations

import enum
import gc
import random
import sys
import tracemalloc
import types
import uuid
from collections.abc import Sequence
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
from tests.backends.passthrough import PassThrough  # noqa: E402
from tests.oracle.ops import aware  # noqa: E402
from tests.oracle.reference import Ev, Reference  # noqa: E402
from tests.oracle.shapes import ROWS, SHAPES, Shape, us_of  # noqa: E402
from tsmodel.backends.base import (  # noqa: E402
    Backend,
    MutationOutcome,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    RowMutation,
    RowSet,
)
from tsmodel.io.frames import FrameEncoder, _ColumnCheck  # noqa: E402

UTC = timezone.utc
backend, emulator = _backends.backend, _backends.emulator
EXAMPLES = {"embedded": 4, "emulator": 2}
_ARROW = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "bool": pa.bool_()}


def _tables(model: type) -> list[tuple[str, ReadFilter]]:
    spec = ts.spec_of(model)
    # A bucket table's versions past its limit are read as garbage collection leaves
    # them (the emulator collects within about a second: a dump taken before would
    # differ from one taken after).
    kept = ReadFilter(versions_kept=spec.max_versions)
    out = [(spec.table, kept), *((a.table, ReadFilter()) for a in spec.alternates),
           *((r.table, ReadFilter()) for r in spec.rollups)]
    if spec.current_table is not None:
        out.append((spec.current_table, ReadFilter(versions_kept=1)))
    return out


def dump(backend: Backend, model: type) -> list[dict[bytes, list[tuple[Any, ...]]]]:
    """Every cell of every table of the model (table names left out)."""
    out = []
    for table, row_filter in _tables(model):
        out.append({row.key: sorted((c.family, c.qualifier, c.timestamp, c.value)
                                    for c in row.cells)
                    for row in backend.read_rows(ReadRequest(table, RowSet(), row_filter))})
    return out


def arrow_of(shape: Shape, events: list[Ev]) -> Any:
    """The events as an Arrow table, a column per field, times in UTC."""
    columns: dict[str, Any] = {}
    for seg in shape.key:
        if seg.field is not None and seg.kind not in ("salt", "time"):
            kind = "int" if seg.kind == "int" else "str"
            columns[seg.field] = pa.array([e.get(seg.field) for e in events], _ARROW[kind])
    columns["time"] = pa.array([aware(e.t, 0) for e in events], pa.timestamp("us", tz="UTC"))
    for v in shape.values:
        if v.name not in columns:
            columns[v.name] = pa.array([e.get(v.name) for e in events], _ARROW[v.kind])
    return pa.table(columns)


def frame_as(kind: str, table: Any) -> Any:
    if kind == "pandas":
        return table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype(),
                                             pa.bool_(): pd.BooleanDtype(),
                                             pa.string(): pd.StringDtype()}.get)
    if kind == "polars":
        return pl.from_arrow(table)
    if kind == "batches":
        return table.to_batches(max_chunksize=3)
    return table


def _fresh(backend: Backend, shape: Shape) -> tuple[type, ts.Connection]:
    model = shape.make_model(uuid.uuid4().hex[:10].upper())
    conn = ts.Connection(backend)
    conn.create_tables(model)
    return model, conn


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_a_frame_saves_what_save_all_saves(backend: Backend, shape: Shape,
                                           request: pytest.FixtureRequest) -> None:
    kind = request.node.callspec.params["backend"]

    @settings(max_examples=EXAMPLES[kind], deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        framed, conn = _fresh(backend, shape)
        listed, _ = _fresh(backend, shape)
        try:
            ref = Reference(shape)
            how = data.draw(st.sampled_from(["arrow", "pandas", "polars", "batches"]),
                            label="input")
            rows = data.draw(st.integers(1, 7), label="rows per chunk")
            for batch in data.draw(st.lists(tst.oracle_batches(shape), min_size=1,
                                            max_size=2), label="batches"):
                result = conn.save_frame(framed, frame_as(how, arrow_of(shape, batch)),
                                         rows=rows, progress=False)
                assert result.ok, result.summary()
                assert (result.rows, result.written, result.not_written) == \
                    (len(batch), len(batch), ())
                # The oracle: save_all of the same chunks (a current-value row takes
                # the newest event of each save_all; a late older event's cell stays).
                # A chunk never spans two record batches (frame_as: 3 rows each).
                pieces = ([batch[i:i + 3] for i in range(0, len(batch), 3)]
                          if how == "batches" else [batch])
                # The reference takes the same chunks: a version limit applies per save
                # (an event a chunk pushes past it is gone for good).
                for piece in pieces:
                    for at in range(0, len(piece), rows):
                        chunk = piece[at:at + rows]
                        assert conn.save_all([listed(**{**e.fields(),
                                                        "time": aware(e.t, e.zone)})
                                              for e in chunk]).ok
                        ref.save(chunk)
            assert dump(backend, framed) == dump(backend, listed)
            got = framed.range(aware(min(shape.times), 0),  # type: ignore[attr-defined]
                               aware(max(shape.times) + 1, 0), allow_scan=True).using(conn)
            assert sorted(Ev(tuple((n, getattr(i, n)) for n in shape.key_fields),
                             us_of(i.time), tuple((v.name, getattr(i, v.name))
                                                  for v in shape.values)).strict()
                          for i in got) == sorted(e.strict() for e in ref.visible())
        finally:
            conn.drop_tables(framed)
            conn.drop_tables(listed)

    run()


def test_a_frame_in_chunks_pushes_versions_past_the_limit_as_its_saves_do(
        backend: Backend) -> None:
    # A hypothesis draw of the test above: ts.columns() keeps two versions of a column
    # (the value is the qualifier). Saved a row a chunk, the event at 23:00 is pushed
    # past the limit by the one at 23:00:00.001 before the correction of 23:15 moves
    # out of that column: gone for good, though one save of the four would keep it.
    # The test above fed its reference the whole frame as one save.
    shape = next(s for s in SHAPES if s.name == "columns")
    h0 = min(shape.times)
    keys = (("host", "h1"), ("metric", "cpu"))
    first = [Ev(keys, h0 + 15 * 60_000_000, (("value", 1),))]
    second = [Ev(keys, h0, (("value", 1),)), Ev(keys, h0 + 1000, (("value", 1),)),
              Ev(keys, h0 + 15 * 60_000_000, (("value", 2),))]
    framed, conn = _fresh(backend, shape)
    ref = Reference(shape)
    try:
        for batch in (first, second):
            assert conn.save_frame(framed, arrow_of(shape, batch), rows=1, progress=False).ok
            for e in batch:
                ref.save([e])
        got = framed.range(aware(h0, 0), aware(max(shape.times) + 1, 0),  # type: ignore[attr-defined]
                           allow_scan=True).using(conn)
        answer = sorted((us_of(i.time) - h0, i.value) for i in got)
        assert answer == sorted((e.t - h0, e.get("value")) for e in ref.visible())
        assert answer == [(1000, 1), (15 * 60_000_000, 2)]
    finally:
        conn.drop_tables(framed)


@pytest.fixture
def rows_model(backend: Backend) -> Any:
    model, conn = _fresh(backend, ROWS)
    yield model, conn
    conn.drop_tables(model)


T0 = datetime(2015, 3, 2, tzinfo=UTC)


def _frame(n: int, bad_at: int | None = None) -> Any:
    hosts = [(i % 3) + 1 for i in range(n)]
    if bad_at is not None:
        hosts[bad_at] = 12345  # wider than the key's 3 digits
    return pd.DataFrame({"site": ["s"] * n, "host": pd.array(hosts, dtype="Int64"),
                         "time": [T0 + timedelta(seconds=i) for i in range(n)],
                         "x": pd.array(range(n), dtype="Int64")})


def test_a_bad_row_is_named_and_nothing_is_written(rows_model: Any, backend: Backend) -> None:
    model, conn = rows_model
    with pytest.raises(ts.ValidationError) as info:
        conn.save_frame(model, _frame(10, bad_at=7), rows=3, progress=False)
    exc = info.value
    assert exc.row == 7 and exc.field == "host" and exc.value == 12345
    assert str(exc).startswith("row 7: ") and "12345" in str(exc)
    assert all(not t for t in dump(backend, model))  # validated first: nothing written


def _mixed_frame(n: int, bad_at: int) -> Any:
    """``x`` an object column of ints with one string: Arrow holds no such column."""
    frame = _frame(n)
    frame["x"] = pd.Series([i if i != bad_at else "seven" for i in range(n)], dtype=object)
    return frame


@pytest.mark.parametrize("validate_first", [True, False])
def test_a_value_arrow_cannot_hold_is_refused_naming_its_row(
        rows_model: Any, backend: Backend, validate_first: bool) -> None:
    """A column mixing types is a bad row of the frame like any other (not pyarrow's
    ``ArrowInvalid`` or ``ArrowTypeError``), found as its chunk is read."""
    model, conn = rows_model
    with pytest.raises(ts.ValidationError) as info:
        conn.save_frame(model, _mixed_frame(10, bad_at=7), rows=3,
                        validate_first=validate_first, progress=False)
    exc = info.value
    assert (exc.row, exc.field, exc.value) == (7, "x", "seven")
    assert str(exc).startswith("row 7: ") and "'seven'" in str(exc)
    assert model.__name__ in str(exc)
    written = len(dump(backend, model)[0])
    if validate_first:
        assert written == 0
    else:  # rows 0-5 were written, in the chunks before the bad row's (rows 6-8)
        assert isinstance(exc.result, ts.FrameResult)
        assert (exc.result.rows, exc.result.written) == (6, 6) and written == 6


def test_streamed_a_bad_row_stops_its_chunk(rows_model: Any, backend: Backend) -> None:
    model, conn = rows_model
    # Batches of 5 rows, saved 3 rows at a time: chunks of rows 0-2, 3-4, 5-7, 8-9.
    batches = iter(pa.Table.from_pandas(_frame(10, bad_at=7)).to_batches(max_chunksize=5))
    with pytest.raises(ValueError, match="validate_first=False"):
        conn.save_frame(model, batches, progress=False)
    with pytest.raises(ts.ValidationError) as info:
        conn.save_frame(model, batches, rows=3, validate_first=False, progress=False)
    exc = info.value
    assert exc.row == 7
    # Rows 0-4 were written; nothing of the chunk of rows 5-7, nor after it.
    assert isinstance(exc.result, ts.FrameResult)
    assert (exc.result.rows, exc.result.written) == (5, 5) and exc.result.ok
    assert len(dump(backend, model)[0]) == 5


def test_the_columns_must_be_the_models_fields(rows_model: Any) -> None:
    model, conn = rows_model
    with pytest.raises(ts.ValidationError, match="'y' is no field"):
        conn.save_frame(model, _frame(2).assign(y=1), progress=False)
    with pytest.raises(ts.ValidationError, match="no column for 'x'"):
        conn.save_frame(model, _frame(2).drop(columns="x"), progress=False)
    with pytest.raises(TypeError, match="takes a pandas or polars DataFrame"):
        conn.save_frame(model, 42, progress=False)
    # A field with a default may be left out (note=None).
    assert conn.save_frame(model, _frame(2), progress=False).ok


def test_a_pandas_frame_with_two_columns_of_one_name_is_refused(rows_model: Any,
                                                                 backend: Backend) -> None:
    # pyarrow refuses the frame before the columns are checked: the save must say
    # which model and column, as it does for Arrow and polars data.
    model, conn = rows_model
    frame = _frame(2)
    frame.columns = ["site", "host", "time", "time"]
    with pytest.raises(ts.ValidationError, match="two columns named 'time'") as info:
        conn.save_frame(model, frame, progress=False)
    assert (info.value.model, info.value.field) == (model.__name__, "time")
    assert not any(dump(backend, model))  # nothing written


@pytest.mark.parametrize("how", ["save_frame", "to_pandas round trip"])
def test_a_pandas_nan_is_the_number_in_a_required_field_that_allows_it(
        backend: Backend, how: str) -> None:
    # NaN is pandas' missing value, but a field that cannot be None and takes NaN
    # has no missing value: its NaN is the number, as to_pandas() writes it.
    @ts.model(table=f"NAN{uuid.uuid4().hex[:8].upper()}", family="f")
    class Probe:
        probe: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        temp: float = ts.value(allow_nan=True)
        hum: float = ts.value(allow_nan=True, default=0.5)

    conn = ts.Connection(backend)
    conn.create_tables(Probe)
    try:
        times = [T0 + timedelta(seconds=i) for i in range(3)]
        temps, hums = [float("nan"), 1.5, float("nan")], [0.25, float("nan"), float("nan")]
        frame = pd.DataFrame({"probe": "p1", "time": times, "temp": temps, "hum": hums})
        if how != "save_frame":
            conn.save_all([Probe(probe="p1", time=t, temp=a, hum=b)
                           for t, a, b in zip(times, temps, hums, strict=True)])
            frame = Probe.range(T0, T0 + timedelta(hours=1), probe="p1").using(conn).to_pandas()
            conn.delete_all(Probe(probe="p1", time=t, temp=0.0) for t in times)
        result = conn.save_frame(Probe, frame, progress=False)
        assert result.ok and result.written == 3
        got = [(e.time, repr(e.temp), repr(e.hum))
               for e in Probe.range(T0, T0 + timedelta(hours=1), probe="p1").using(conn)]
        assert got == [(t, repr(a), repr(b)) for t, a, b in zip(times, temps, hums, strict=True)]
    finally:
        conn.drop_tables(Probe)


def test_an_optional_field_that_allows_nan_keeps_missing_and_nan_apart(
        backend: Backend) -> None:
    # In an Optional float field declared allow_nan, None (no cell) and NaN (a cell
    # holding NaN) are two values: every columnar result, and the frame saved back,
    # must keep them apart, as the instances do.
    @ts.model(table=f"ONAN{uuid.uuid4().hex[:8].upper()}", family="f")
    class Probe:
        probe: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        temp: float | None = ts.value(allow_nan=True, default=None)
        hum: float | None = ts.value(default=None)  # no NaN: NaN is its missing value

    conn = ts.Connection(backend)
    conn.create_tables(Probe)
    try:
        times = [T0 + timedelta(seconds=i) for i in range(4)]
        temps = [None, float("nan"), 1.5, None]
        hums = [0.25, None, None, 2.0]
        conn.save_all([Probe(probe="p1", time=t, temp=a, hum=b)
                       for t, a, b in zip(times, temps, hums, strict=True)])
        qs = Probe.range(T0, T0 + timedelta(hours=1), probe="p1").using(conn)

        def kind(v: Any) -> str:  # the oracle's three cases, whatever the container
            if v is None or v is pd.NA:
                return "missing"
            return "nan" if v != v else repr(float(v))

        expected = [kind(v) for v in temps]
        assert [kind(e.temp) for e in qs] == expected
        assert [kind(v) for v in qs.to_arrow().column("temp").to_pylist()] == expected
        assert [kind(v) for v in qs.to_polars()["temp"].to_list()] == expected
        frame = qs.to_pandas()
        assert str(frame["temp"].dtype) == "Float64"
        assert [kind(v) for v in frame["temp"].array] == expected
        assert frame["temp"].isna().tolist() == [v is None for v in temps]
        assert str(frame["hum"].dtype) == "float64"  # NaN is missing there, as documented
        assert frame["hum"].isna().tolist() == [v is None for v in hums]

        conn.delete_all(Probe(probe="p1", time=t) for t in times)
        assert conn.save_frame(Probe, frame, progress=False).written == len(times)
        assert [(kind(e.temp), kind(e.hum)) for e in qs] == [
            (kind(a), kind(b)) for a, b in zip(temps, hums, strict=True)]
    finally:
        conn.drop_tables(Probe)


def _numpy_model() -> Any:
    s = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"NPY{s}", family="f", current=f"NPY_CUR{s}",
              rollups=[ts.rollup(f"NPY_1H{s}", "1h")])
    class Reading:
        site: str = ts.key()
        unit: int = ts.key(width=4)
        time: datetime = ts.timestamp(unit="ms")
        n: int = ts.value()
        x: float = ts.value()
        ok: bool | None = ts.value(default=None)

    return Reading


def test_numpy_scalars_save_as_their_exact_python_values(backend: Backend) -> None:
    # A frame's numpy-typed columns are saved as their values; an instance holding
    # the same numpy scalars (a frame's row, a numpy computation) saves the same,
    # wherever the scalar is exactly a value of the field's type.
    np = pytest.importorskip("numpy")
    Reading = _numpy_model()
    conn = ts.Connection(backend)
    conn.create_tables(Reading)
    try:
        times = [T0 + timedelta(seconds=i) for i in range(3)]
        plain = [dict(n=2**62 + i, x=[0.5, 1.0, 0.1][i], ok=[True, False, None][i])
                 for i in range(3)]  # the oracle: plain Python values
        numpyish = [dict(n=np.int64(2**62) + i, x=[np.float32(0.5), np.int32(1),
                                                   np.float64(0.1)][i],
                         ok=[np.bool_(True), np.bool_(False), None][i]) for i in range(3)]
        result = conn.save_all([Reading(site="s", unit=np.int64(7), time=t, **v)
                                for t, v in zip(times, numpyish, strict=True)])
        assert result.ok
        got = list(Reading.range(T0, T0 + timedelta(hours=1), site="s", unit=7).using(conn))
        assert [(e.unit, e.n, e.x, e.ok) for e in got] == [
            (7, v["n"], v["x"], v["ok"]) for v in plain]
        assert all(type(e.n) is int and type(e.x) is float for e in got)
        assert Reading.using(conn).latest(site="s", unit=np.int64(7)).n == plain[-1]["n"]
        (hour,) = Reading.using(conn).rollup("1h").range(T0, T0 + timedelta(hours=1),
                                                        site="s", unit=7)
        assert (hour.n_sum, hour.x_sum) == (sum(v["n"] for v in plain),
                                            sum(v["x"] for v in plain))

        # The same events from a frame of numpy columns: the same cells.
        frame = pd.DataFrame({"site": "s", "unit": np.int64(8), "time": times,
                              "n": np.array([v["n"] for v in plain], dtype=np.int64),
                              "x": np.array([v["x"] for v in plain]),
                              "ok": pd.array([v["ok"] for v in plain], dtype="boolean")})
        assert conn.save_frame(Reading, frame, progress=False).written == 3
        assert [(e.n, e.x, e.ok) for e in Reading.range(
            T0, T0 + timedelta(hours=1), site="s", unit=8).using(conn)] == [
            (v["n"], v["x"], v["ok"]) for v in plain]
    finally:
        conn.drop_tables(Reading)


@pytest.mark.parametrize(("field", "make", "error"), [
    ("n", lambda np: np.bool_(True), ts.FieldTypeError),      # a bool is no int
    ("n", lambda np: np.float64(2.0), ts.FieldTypeError),     # a float is no int
    ("n", lambda np: np.uint64(2**64 - 1), ts.ValidationError),  # beyond int64
    ("x", lambda np: np.longdouble(1) / 3, ts.FieldTypeError),  # no double holds it
    ("x", lambda np: np.float32("nan"), ts.ValidationError),  # NaN not allowed
    ("unit", lambda np: np.float64(7.0), ts.KeyTypeError),
])
def test_a_numpy_scalar_that_is_not_a_value_of_the_field_is_refused(
        field: str, make: Any, error: type[Exception]) -> None:
    np = pytest.importorskip("numpy")
    Reading = _numpy_model()
    value = make(np)
    values = {"site": "s", "unit": 7, "time": T0, "n": 1, "x": 0.5, field: value}
    db = ts.connect("memory://", default=False)
    db.create_tables(Reading)
    with pytest.raises(error) as info:
        db.save(Reading(**values))
    assert type(info.value) is error or issubclass(type(info.value), error)
    assert f"Reading.{field}" in str(info.value) and info.value.value is value
    assert not list(Reading.range(T0, T0 + timedelta(hours=1), site="s", unit=7).using(db))


def test_a_generator_of_batches_is_saved_chunk_by_chunk(rows_model: Any) -> None:
    model, conn = rows_model
    table = pa.Table.from_pandas(_frame(50))
    result = conn.save_frame(model, (b for b in table.to_batches(max_chunksize=7)),
                             rows=10, validate_first=False, progress=False)
    assert result.ok and (result.rows, result.written) == (50, 50)
    got = model.range(T0, T0 + timedelta(hours=1), allow_scan=True).using(conn)
    assert sorted((i.host, i.time, i.x) for i in got) == sorted(
        zip(table["host"].to_pylist(), table["time"].to_pylist(), table["x"].to_pylist(),
            strict=True))


async def test_the_async_connection_saves_frames(rows_model: Any, backend: Backend) -> None:
    model, conn = rows_model
    listed, _ = _fresh(backend, ROWS)
    try:
        frame = pl.from_pandas(_frame(20))
        async with asynchronous(backend) as ab:
            result = await ts.AsyncConnection(ab).save_frame(model, frame, rows=6,
                                                             progress=False)
        assert isinstance(result, ts.FrameResult)
        assert result.ok and (result.rows, result.written, result.not_written) == (20, 20, ())
        assert conn.save_all([listed(site="s", host=(i % 3) + 1, time=T0 + timedelta(seconds=i),
                                     x=i) for i in range(20)]).ok
        assert dump(backend, model) == dump(backend, listed)
    finally:
        conn.drop_tables(listed)


def test_progress_counts_the_rows_of_the_whole_frame(rows_model: Any) -> None:
    model, conn = rows_model
    seen: list[tuple[int, int | None]] = []
    result = conn.save_frame(model, _frame(25), rows=10,
                             progress=lambda done, total: seen.append((done, total)))
    assert result.ok
    assert seen[-1] == (25, 25) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    streamed: list[tuple[int, int | None]] = []
    conn.save_frame(model, iter(pa.Table.from_pandas(_frame(7)).to_batches()),
                    validate_first=False, progress=lambda d, t: streamed.append((d, t)))
    assert streamed[-1] == (7, None)


async def test_the_async_connection_names_a_bad_row(rows_model: Any, backend: Backend) -> None:
    model, _ = rows_model
    async with asynchronous(backend) as ab:
        aconn = ts.AsyncConnection(ab)
        with pytest.raises(ts.ValidationError) as info:
            await aconn.save_frame(model, _frame(10, bad_at=7), rows=3, progress=False)
        assert info.value.row == 7 and info.value.field == "host"
        assert all(not t for t in dump(backend, model))  # validated first: nothing written
        batches = iter(pa.Table.from_pandas(_frame(10, bad_at=7)).to_batches(max_chunksize=5))
        with pytest.raises(ts.ValidationError) as info:
            await aconn.save_frame(model, batches, rows=3, validate_first=False,
                                   progress=False)
        assert info.value.row == 7 and info.value.result.rows == 5


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("zone", ["UTC", "+00:00", "Europe/Paris", "+05:30"])
def test_times_in_any_zone_and_unit_save_the_same_instants(
        rows_model: Any, backend: Backend, unit: str, zone: str) -> None:
    model, conn = rows_model
    listed, _ = _fresh(backend, ROWS)
    try:
        times = [T0 + timedelta(seconds=7 * i) for i in range(6)]
        table = pa.table({"site": ["s"] * 6, "host": pa.array([1, 2, 3] * 2, pa.int64()),
                          "time": pa.array(times, pa.timestamp("us", tz="UTC")).cast(
                              pa.timestamp(unit, tz=zone)),
                          "x": pa.array(range(6), pa.int64())})
        result = conn.save_frame(model, table, rows=4, progress=False)
        assert result.ok and result.rows == 6
        assert conn.save_all([listed(site="s", host=[1, 2, 3][i % 3], time=t, x=i)
                              for i, t in enumerate(times)]).ok
        assert dump(backend, model) == dump(backend, listed)
    finally:
        conn.drop_tables(listed)


def test_sub_microsecond_times_are_refused_in_utc_as_in_any_other_zone(
        rows_model: Any, backend: Backend) -> None:
    """A time of nanoseconds Arrow cannot make a datetime of (it raised KeyError in
    UTC): refused in any zone, naming its row, as ``save_all`` refuses the instance
    (Bigtable stores microseconds; a time is never truncated); nothing written."""
    model, conn = rows_model
    ns = pa.array([T0] * 3, pa.timestamp("ns", tz="UTC")).cast(pa.int64()).to_pylist()
    ns[1] += 1
    for zone in ("UTC", "Europe/Paris"):
        frame = pa.table({"site": ["s"] * 3, "host": pa.array([1, 2, 3], pa.int64()),
                          "time": pa.array(ns, pa.timestamp("ns", tz=zone)),
                          "x": pa.array([1, 2, 3], pa.int64())})
        with pytest.raises(ts.ValidationError) as info:
            conn.save_frame(model, frame, progress=False)
        assert (info.value.row, info.value.field) == (1, "time"), zone
        assert "finer than a microsecond" in str(info.value), zone
        assert all(not t for t in dump(backend, model)), zone


def test_a_missing_time_is_refused_naming_its_row(rows_model: Any, backend: Backend) -> None:
    model, conn = rows_model
    table = pa.table({"site": ["s"] * 3, "host": pa.array([1, 2, 3], pa.int64()),
                      "time": pa.array([T0, None, T0], pa.timestamp("ms", tz="UTC")),
                      "x": pa.array([1, 2, 3], pa.int64())})
    with pytest.raises(ts.ValidationError) as info:
        conn.save_frame(model, table, progress=False)
    assert info.value.row == 1 and info.value.field == "time"
    assert all(not t for t in dump(backend, model))


class FailingSites(PassThrough):
    """The real backend, except for the rows of some sites (a row key starts with its
    site): a main-table write of site ``bad`` fails (not applied), of ``unk`` is
    applied but answered UNKNOWN (as after a lost answer), an alternate-table write
    of ``par`` fails (not applied)."""

    def __init__(self, inner: Backend, main: str, alternate: str) -> None:
        super().__init__(inner)
        self.main, self.alternate = main, alternate

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        applied = iter(self.inner.mutate_rows(table, [
            e for e in entries if not self._failed(table, e.key)]))
        out = []
        for e in entries:
            if self._failed(table, e.key):
                out.append(MutationOutcome(MutationStatus.FAILED, ts.BackendError("refused")))
            elif table == self.main and e.key.startswith(b"unk"):
                next(applied)
                out.append(MutationOutcome(MutationStatus.UNKNOWN, ts.BackendError("lost")))
            else:
                out.append(next(applied))
        return out

    def _failed(self, table: str, key: bytes) -> bool:
        return ((table == self.main and key.startswith(b"bad"))
                or (table == self.alternate and key.startswith(b"par")))


def _sites_frame(sites: list[str]) -> Any:
    n = len(sites)
    return pd.DataFrame({"site": sites, "host": pd.array([(i % 3) + 1 for i in range(n)],
                                                          dtype="Int64"),
                         "time": [T0 + timedelta(seconds=i) for i in range(n)],
                         "x": pd.array(range(n), dtype="Int64")})


@pytest.mark.parametrize("seed", [1, 2])
def test_the_rows_not_written_are_reported_each_by_its_index(
        rows_model: Any, backend: Backend, seed: int) -> None:
    model, _ = rows_model
    spec = ts.spec_of(model)
    conn = ts.Connection(FailingSites(backend, spec.table, spec.alternates[0].table))
    rng = random.Random(seed)
    sites = [rng.choice(["ok", "ok", "ok", "bad", "unk", "par"]) for _ in range(60)]
    result = conn.save_frame(model, _sites_frame(sites), rows=7, raise_on_failure=False,
                             progress=False)
    # The oracle: what each row's site makes of its writes (a row the server may
    # have applied is UNKNOWN, never FAILED).
    status = {"ok": ts.WriteStatus.WRITTEN, "bad": ts.WriteStatus.FAILED,
              "unk": ts.WriteStatus.UNKNOWN, "par": ts.WriteStatus.PARTIAL}
    expected = [(i, status[s]) for i, s in enumerate(sites) if s != "ok"]
    assert [(r.row, r.status) for r in result.not_written] == expected
    assert all(r.error is not None and r.entity.site == sites[r.row]
               and r.entity.x == r.row for r in result.not_written)
    assert (result.rows, result.written, result.failed, result.unknown, result.partial) == (
        60, sites.count("ok"), sites.count("bad"), sites.count("unk"), sites.count("par"))
    assert not result.ok and result.summary().startswith(f"{sites.count('ok')} written")
    with pytest.raises(ts.SaveError) as info:
        conn.save_frame(model, _sites_frame(sites), rows=7, progress=False)
    again = info.value.result
    assert isinstance(again, ts.FrameResult) and again.summary() == result.summary()
    assert [(r.row, r.status) for r in again.not_written] == expected
    assert f"first problem: row {expected[0][0]}: " in str(info.value)


@pytest.mark.parametrize("seed", [1, 2])
def test_rows_saved_column_wise_and_not_written_are_named(backend: Backend, seed: int) -> None:
    """A model whose chunks are saved from their columns (no instance made): each row not
    written is reported by its index, with the instance the row makes."""
    name = "CW" + uuid.uuid4().hex[:8].upper()

    @ts.model(table=name, family="m", current=name + "_NOW")
    class Site:
        site: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        x: int = ts.value()

    conn = ts.Connection(FailingSites(backend, name, name + "_NOW"))
    conn.create_tables(Site)
    try:
        rng = random.Random(seed)
        sites = [rng.choice(["ok", "ok", "ok", "bad", "unk", "par"]) for _ in range(60)]
        times = [T0 + timedelta(seconds=i) for i in range(60)]
        frame = pd.DataFrame({"site": sites, "time": times,
                              "x": pd.array(range(60), dtype="Int64")})
        encoder = FrameEncoder(Site, _ColumnCheck(Site))
        assert encoder.encoded(pa.RecordBatch.from_pandas(frame), False) is not None
        result = conn.save_frame(Site, frame, rows=7, raise_on_failure=False, progress=False)
        status = {"bad": ts.WriteStatus.FAILED, "unk": ts.WriteStatus.UNKNOWN,
                  "par": ts.WriteStatus.PARTIAL}
        assert [(r.row, r.status) for r in result.not_written] == \
            [(i, status[s]) for i, s in enumerate(sites) if s != "ok"]
        assert all(r.entity == Site(site=sites[r.row], time=times[r.row], x=r.row)
                   for r in result.not_written)
        assert result.written == sites.count("ok")
    finally:
        conn.drop_tables(Site)


def _deep_size(root: Any) -> int:
    """The bytes of the objects reachable from ``root`` (classes, modules and
    functions, shared by everything, left out)."""
    seen: set[int] = set()
    todo, size = [root], 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType,
                                               enum.Enum)):
            continue
        seen.add(id(obj))
        size += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return size


def test_the_result_keeps_nothing_per_row_written(rows_model: Any, backend: Backend,
                                                  request: pytest.FixtureRequest) -> None:
    """Memory: neither the result nor anything else the save leaves behind grows with
    the rows written (before, the result kept an EntityResult and an instance a row,
    about 500 bytes)."""
    model, conn = rows_model

    def held(n: int) -> tuple[int, int]:
        frame = _frame(n)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            result = conn.save_frame(model, frame, rows=500, progress=False)
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert result.ok and result.rows == n
        return _deep_size(result), after - before

    held(300)  # caches warmed
    (small, small_left), (large, large_left) = held(600), held(3_000)
    assert large == small, (small, large)
    # What else is left behind: on the embedded store only, since the Bigtable wire
    # keeps its last few thousand entries (a cache of bounded size, about as large as
    # what 4,000 rows would have left behind at 500 bytes a row).
    if request.node.callspec.params["backend"] == "embedded":
        assert large_left - small_left < 20 * 2_400, (small_left, large_left)


def _bad_values(shape: Shape) -> list[tuple[str, Any]]:
    """Values to put in one row, field by field: some refused by the model, some not."""
    out: list[tuple[str, Any]] = [("time", None)]
    for seg in shape.key:
        if seg.field is None or seg.kind in ("salt", "time"):
            continue
        if seg.kind == "int":
            out += [(seg.field, 10 ** seg.width if seg.width else -1), (seg.field, -1)]
        else:
            out += [(seg.field, v) for v in ("", "x#y", "\x00", "é" * 40, None)]
    for v in shape.values:
        if v.kind == "float":
            out += [(v.name, x) for x in (float("nan"), float("inf"), None)]
        elif v.kind == "int":
            out += [(v.name, -2**63), (v.name, None)]
        else:
            out += [(v.name, None)]
    return out


def _outcome(call: Any) -> tuple[Any, ...] | None:
    """What a save raised, as something to compare (``None``: nothing raised)."""
    try:
        call()
    except (ts.ValidationError, TypeError, ValueError) as exc:
        row = getattr(exc, "row", None)
        text = str(exc).removeprefix(f"row {row}: ") if row is not None else str(exc)
        return (type(exc), getattr(exc, "field", None), repr(getattr(exc, "value", None)),
                text)
    return None


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_a_bad_row_is_refused_as_save_all_refuses_it(backend: Backend, shape: Shape,
                                                     request: pytest.FixtureRequest) -> None:
    """The frame path against the instance path: the same rows refused with the same
    error (the frame's naming the row), nothing written; the same cells otherwise."""
    kind = request.node.callspec.params["backend"]

    @settings(max_examples=3 * EXAMPLES[kind], deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        framed, conn = _fresh(backend, shape)
        listed, _ = _fresh(backend, shape)
        try:
            batch = data.draw(tst.oracle_batches(shape), label="batch")
            at = data.draw(st.integers(0, len(batch) - 1), label="row")
            name, bad = data.draw(st.sampled_from(_bad_values(shape)), label="value")
            table = arrow_of(shape, batch)
            column = table.column(name).to_pylist()
            column[at] = bad
            table = table.set_column(table.schema.get_field_index(name), name,
                                     pa.array(column, table.schema.field(name).type))

            def instances() -> list[Any]:
                rows = [{**e.fields(), "time": aware(e.t, e.zone)} for e in batch]
                # In pandas a float column's NaN is a missing value (its convention,
                # and what to_pandas() writes for one).
                nan = isinstance(bad, float) and bad != bad
                rows[at][name] = None if nan and how == "pandas" else bad
                return [listed(**r) for r in rows]

            how = data.draw(st.sampled_from(["arrow", "pandas", "polars"]), label="input")
            expected = _outcome(lambda: conn.save_all(instances()))
            frame = frame_as(how, table)
            caught: list[BaseException] = []

            def save() -> None:
                try:
                    conn.save_frame(framed, frame, rows=3, progress=False)
                except BaseException as exc:
                    caught.append(exc)
                    raise

            assert _outcome(save) == expected
            if expected is None:
                assert dump(backend, framed) == dump(backend, listed)
            else:
                assert getattr(caught[0], "row", None) == at
                assert all(not t for t in dump(backend, framed))  # nothing written
        finally:
            conn.drop_tables(framed)
            conn.drop_tables(listed)

    run()


@pytest.mark.parametrize("kind", ["pandas", "polars", "arrow table", "arrow batches"])
def test_an_empty_frame_has_its_columns_checked_too(rows_model: Any, kind: str) -> None:
    # A pipeline whose frame comes out empty today and full tomorrow must learn of a
    # wrong column today: the columns are the frame's, whatever its rows.
    model, conn = rows_model
    empty = _frame(2).iloc[0:0]
    for frame, error in ((empty.assign(y=1), "'y' is no field"),
                         (empty.drop(columns="x"), "no column for 'x'")):
        table = pa.Table.from_pandas(frame, preserve_index=False)
        given = {"pandas": frame, "polars": pytest.importorskip("polars").from_arrow(table),
                 "arrow table": table,
                 "arrow batches": [pa.RecordBatch.from_pandas(frame, preserve_index=False)]}[kind]
        with pytest.raises(ts.ValidationError, match=error):
            conn.save_frame(model, given, progress=False)
    # Right columns and no rows, or no columns at all: nothing to write.
    assert conn.save_frame(model, empty, progress=False).rows == 0
    assert conn.save_frame(model, pd.DataFrame(), progress=False).rows == 0


def test_a_frame_of_rows_without_columns_is_refused(rows_model: Any) -> None:
    model, conn = rows_model
    with pytest.raises(ts.ValidationError, match="no column for "):
        conn.save_frame(model, pd.DataFrame(index=range(3)), progress=False)


def _bucket_models() -> list[type]:
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"FRAME_WEEK_{suffix}", family="measurements", layout=ts.cells(),
              max_rate=1 / 60)
    class Balloon:  # the reference's new cells for new events, in week buckets
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(bucket="week")
        pressure: int = ts.value()
        temperature: float = ts.value("temp")

    @ts.model(table=f"FRAME_HOUR_{suffix}", family="M", layout=ts.cells(), max_rate=1 / 5,
              current=f"FRAME_HOUR_CUR_{suffix}")
    class Hourly:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour", label="%Y%m%d%H")
        cpu: float = ts.value("CPU")
        note: str | None = ts.value("NOTE")

    @ts.model(table=f"FRAME_METER_{suffix}", family="METER", layout=ts.offsets(
        timedelta(minutes=15)), current=f"FRAME_METER_CUR_{suffix}")
    class Meter:  # the reference's column per time offset, in day buckets
        meter: int = ts.key(width=10)
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value()

    @ts.model(table=f"FRAME_MONTH_{suffix}", family="M", layout=ts.cells(),
              max_rate=1 / 3600)
    class Monthly:  # month labels (a bucket of no fixed length)
        site: str = ts.key()
        time: datetime = ts.timestamp(bucket="month")
        kwh: int = ts.value()

    return [Balloon, Hourly, Meter, Monthly]


def _bucket_rows(at: int, rng: random.Random) -> list[dict[str, Any]]:
    if at == 0:
        return [dict(location=loc, balloon=3698, time=T0 + timedelta(minutes=i),
                     pressure=94000 + rng.randrange(2000),
                     temperature=round(rng.uniform(8, 11), 1))
                for loc in ("us-west2", "asia-south2") for i in range(0, 14 * 1440, 97)]
    if at == 1:
        return [dict(host=h, time=T0 + timedelta(seconds=37 * i), cpu=i / 4,
                     note=None if i % 3 else f"n{i}")
                for h in ("a", "b") for i in range(300)]
    if at == 2:
        return [dict(meter=m, time=T0 + timedelta(minutes=15 * i), kwh=rng.random())
                for m in (987654, 1001) for i in rng.sample(range(4 * 24 * 9), 200)]
    return [dict(site=site, time=T0 + timedelta(hours=7 * i), kwh=i)
            for site in ("x", "y") for i in range(0, 24 * 60, 5)]


@pytest.mark.parametrize("at", [0, 1, 2, 3])
def test_a_frame_of_bucket_rows_saves_what_save_all_saves(backend: Backend, at: int) -> None:
    # A time bucket's key segment is a label of the bucket, not epoch digits: the
    # frame's rows are saved as save_all saves them (the same cells in every table),
    # their labels taken a bucket at a time.
    framed, listed = _bucket_models()[at], _bucket_models()[at]
    conn = ts.Connection(backend)
    conn.create_tables(framed, listed)
    try:
        rows = _bucket_rows(at, random.Random(at))
        frame = pd.DataFrame(rows)
        if at != 2:  # (an offsets bucket has no column-wise check: row by row)
            encoder = FrameEncoder(framed, _ColumnCheck(framed))
            assert encoder.encoded(pa.RecordBatch.from_pandas(frame), False) is not None, \
                "the frame is not encoded a whole column at a time"
        result = conn.save_frame(framed, frame, rows=100, progress=False)
        assert result.ok and result.rows == len(rows), result.summary()
        assert conn.save_all([listed(**r) for r in rows]).ok
        assert dump(backend, framed) == dump(backend, listed)
        got = sorted((tuple(getattr(e, k) for k in rows[0]) for e in framed.range(
            T0, T0 + timedelta(days=500), allow_scan=True).using(conn)), key=repr)
        assert got == sorted((tuple(r.values()) for r in rows), key=repr)
    finally:
        conn.drop_tables(framed, listed)


def test_codec_prints_every_model_of_the_buckets_example() -> None:
    # With pyarrow installed, ``tsmodel codec`` renders save_frame()'s encoder too:
    # the week buckets' label in the key has none, and the command printed nothing
    # but an AssertionError for the reference's balloon example.
    from tests.test_cli import ok

    out = ok("codec", "examples/weather_balloons.py")
    for model in ("BalloonRow", "BalloonBlob", "BalloonWeek", "BalloonMetric"):
        assert f"# -- model {model} " in out
    assert "<tsmodel codec BalloonWeek.BALLOON_WEEKS encode_event" in out
    assert "<tsmodel codec BalloonRow.BALLOON_ROWS encode_frame" in out
