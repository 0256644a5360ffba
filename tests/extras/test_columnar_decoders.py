"""The columnar decoders (rows straight into Arrow columns) read as the records do.

`ArrowColumns.rows_batch()` collects value bytes per column and decodes whole
columns (numpy, Arrow) where rows are plain events, else reads value by value
with the generated column decoder. On every shape of the oracle harness, the
rows of a read of everything decode to the records' values; each damaged
row (tests/unit/test_rendered_decoders.py) is refused with the records' error.
The same holds for `ArrowColumns.cells_batch()`, which takes the rows as the
readers hand them in columns (`CellBatch`, no `Row` objects).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tsmodel as ts  # noqa: E402
from tests.oracle.shapes import SHAPES, Shape, us_of  # noqa: E402
from tests.unit.test_rendered_decoders import (  # noqa: E402
    _damaged,
    _ev,
    _outcome,
    _plan_rows,
    _saved,
)
from tests.whole_key_rows import (  # noqa: E402
    START,
    bucket_damaged,
    bucket_models,
    draw_bucket_event,
    draw_event,
    full,
    group_damaged,
    optional_models,
    stored_rows,
    whole_key_models,
)
from tsmodel.backends.base import Cell, CellBatch, Row  # noqa: E402
from tsmodel.declare.spec import spec_of  # noqa: E402
from tsmodel.io.arrow import ArrowColumns  # noqa: E402


def _arrow_events(shape: Shape, model: type, codec: Any, rows: list[Any],
                  batched: bool = False) -> list[Any]:
    columns = ArrowColumns(model)
    batch = columns.cells_batch(codec, CellBatch.of(rows), None) if batched \
        else columns.rows_batch(codec, rows, None)
    out = []
    for r in batch.to_pylist():
        r["time"] = us_of(r["time"])
        out.append(_ev(shape, r).strict())
    return out


def _record_events(shape: Shape, model: type, codec: Any, rows: list[Any]) -> list[Any]:
    defaults = {v.name: v.default_value() for v in spec_of(model).values if v.has_default}
    return [_ev(shape, {**defaults, **r}).strict() for row in rows for r in codec.records(row)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@pytest.mark.parametrize("how", ["none", "key", "foreign column", "bytes", "dropped"])
def test_columns_read_and_refuse_as_records(shape: Shape, how: str) -> None:
    @settings(max_examples=5, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        model, conn, _ = _saved(shape, data)
        codec, rows = _plan_rows(model, conn, shape)
        if how == "none":
            want_all = _record_events(shape, model, codec, rows)
            assert _arrow_events(shape, model, codec, rows) == want_all
            assert _arrow_events(shape, model, codec, rows, batched=True) == want_all
        for row in rows:
            bad = row if how == "none" else _damaged(row, how, shape)
            if bad is None:
                continue
            want = _outcome(lambda bad=bad: _record_events(shape, model, codec, [bad]))
            for batched in (False, True):
                got = _outcome(lambda bad=bad, batched=batched: _arrow_events(
                    shape, model, codec, [bad], batched))
                assert got == want
            # a damaged row among good ones: the batch is read as its rows are
            many = [bad, *rows] if how != "none" else rows
            want = _outcome(lambda many=many: _record_events(shape, model, codec, many))
            got = _outcome(lambda many=many: _arrow_events(shape, model, codec, many, True))
            assert got == want
        conn.close()

    run()


# -- keys decoded a whole column at a time ------------------------------------------------
#
# Rows of one cell per value field, all required, go through ``raw_columns(...,
# deferred)``: their keys are decoded a whole column at a time (numpy for the time
# segment's digits, the declared decoding once per distinct head). Of the oracle's
# shapes only ``reversed`` has that shape, so these models add the others: several
# key fields, an int segment, seconds, reversed digits, microseconds. A group
# of rows with one of them damaged reads (or is refused) as the records read it.

def _events_of_batch(model: type, batch: Any) -> list[dict[str, Any]]:
    out = []
    for r in batch.to_pylist():
        r["time"] = us_of(r["time"])
        out.append(r)
    return out


@pytest.mark.parametrize("how", ["none", "tail digit", "short key", "no separator",
                                 "cell time", "no cells", "older version", "foreign column",
                                 "bytes", "dropped"])
def test_keys_decoded_whole_read_a_group_as_records(how: str) -> None:
    plain = whole_key_models()
    models = plain + optional_models()
    conn = ts.connect("memory://")
    conn.create_tables(*models)

    @settings(max_examples=15, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        model = data.draw(st.sampled_from(models))
        events = [draw_event(data, model, i) for i in range(data.draw(st.integers(1, 12)))]
        conn.save_all(events)
        plan, rows = stored_rows(conn, model)
        codec, columns = plan.codec, ArrowColumns(model)
        names = tuple(n for n, _, _ in columns.columns)
        raw, _ = codec.column_decoders(names)
        flat: list[Any] = []
        if model in plain:  # Row objects of optional values are read row by row
            order = raw(rows, None, flat) if raw is not None else None
            assert order, "the rows are not collected with their keys undecoded"
            assert columns._key_columns(codec, flat[0::len(order)], flat[1::len(order)]), \
                "the keys are not decoded as a whole"
        collect = codec.batch_decoder(names)
        assert collect is not None
        # Rows of optional values are taken whole where each has every value's cell.
        assert (collect(CellBatch.of(rows)) is not None) == full(model, rows), \
            "the batch is not taken a whole list at a time"
        if how != "none":
            # Rows of earlier examples stay in the store: a draw bounded by their
            # number would differ when hypothesis replays an example.
            at = data.draw(st.integers(0, 10**6)) % len(rows)
            rows[at] = group_damaged(rows[at], how)
        defaults = {v.name: v.default_value() for v in spec_of(model).values if v.has_default}
        want = _outcome(lambda: [{**defaults, **r} for row in rows for r in codec.records(row)])
        for got in (
                _outcome(lambda: _events_of_batch(model, columns.rows_batch(codec, rows, None))),
                _outcome(lambda: _events_of_batch(model, columns.cells_batch(
                    codec, CellBatch.of(rows), None)))):
            if want[0] == "ok" and got[0] == "ok":  # floats: -0.0 == 0.0, compare their bits
                assert [{k: repr(v) for k, v in r.items()} for r in got[1]] == \
                    [{k: repr(v) for k, v in r.items()} for r in want[1]]
            assert got == want

    run()
    conn.close()


@pytest.mark.parametrize("field", ["cpu", "blk"])
def test_cells_of_other_sizes_summing_to_the_width_are_refused_as_records(
        field: str) -> None:
    # One cell a byte short, the next a byte long: the column's bytes have the
    # length of whole values, but no cell is one; the records refuse the first.
    metric = whole_key_models()[0]
    conn = ts.connect("memory://")
    conn.create_tables(metric)
    conn.save_all([metric(host="a", time=START + timedelta(seconds=i), cpu=0.5 + i, blk=i,
                          name="n", up=True) for i in range(3)])
    plan, rows = stored_rows(conn, metric)
    qualifier = b"CPU/USR" if field == "cpu" else b"IO/BLK"
    for at, change in ((0, lambda v: v[:-1]), (1, lambda v: v + b"\0")):
        rows[at] = Row(rows[at].key, tuple(
            Cell(c.family, c.qualifier, c.timestamp, change(c.value))
            if c.qualifier == qualifier else c for c in rows[at].cells))
    codec = plan.codec
    want = _outcome(lambda: [r for row in rows for r in codec.records(row)])
    assert want[0] == "CellDecodingError"
    got = _outcome(lambda: _events_of_batch(
        metric, ArrowColumns(metric).rows_batch(codec, rows, None)))
    assert got == want
    conn.close()


def test_batches_read_into_columns_are_left_as_the_reader_handed_them() -> None:
    """`ArrowColumns.cell_batches()` groups batches without changing them (a reader may
    keep them: a replay, a cache)."""
    models = whole_key_models()
    model = models[0]
    conn = ts.connect("memory://")
    conn.create_tables(model)
    events = [model(host="a", time=START + timedelta(seconds=i), cpu=i / 2, blk=i,
                    name=str(i), up=bool(i % 2)) for i in range(10)]
    assert conn.save_all(events).ok
    plan, rows = stored_rows(conn, model)
    batches = [CellBatch.of(rows[:4]), CellBatch.of(rows[4:])]
    columns = ArrowColumns(model)
    [out] = columns.cell_batches(plan.codec, batches, None, 1000)
    assert out.column("blk").to_pylist() == list(range(10))
    assert [list(b.rows()) for b in batches] == [rows[:4], rows[4:]]


# -- bucket rows read a batch at a time ---------------------------------------------------
#
# ``ts.cells()`` buckets with every value required hold a cell per event in each
# value column; `ArrowColumns.cells_batch()` takes them a whole list at a time
# (`render_bucket_batch_columns`). The oracle's CELLS shape has an optional value
# (its rows have no fixed shape), so these models are its all-required kin. A
# batch with one row damaged reads (or is refused) as the records read it.


@pytest.mark.parametrize("how", ["none", "key", "no cells", "older version", "same time",
                                 "cell time", "foreign column", "other family", "bytes",
                                 "dropped", "swapped"])
def test_bucket_batches_read_as_records(how: str) -> None:
    models = bucket_models()
    conn = ts.connect("memory://")
    conn.create_tables(*models)

    @settings(max_examples=15, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        model = data.draw(st.sampled_from(models))
        events = [draw_bucket_event(data, model, i)
                  for i in range(data.draw(st.integers(1, 20)))]
        conn.save_all(events)
        plan, rows = stored_rows(conn, model, days=3)
        codec, columns = plan.codec, ArrowColumns(model)
        assert columns.takes_batches(codec)
        collect = codec.batch_decoder(tuple(n for n, _, _ in columns.columns))
        assert collect is not None and collect(CellBatch.of(rows)) is not None, \
            "the batch is not taken a whole list at a time"
        if how != "none":
            at = data.draw(st.integers(0, 10**6)) % len(rows)
            rows[at] = bucket_damaged(rows[at], how, data)
        want = _outcome(lambda: [r for row in rows for r in codec.records(row)])
        got = _outcome(lambda: _events_of_batch(model, columns.cells_batch(
            codec, CellBatch.of(rows), None)))
        if want[0] == "ok" and got[0] == "ok":  # floats: -0.0 == 0.0, compare their bits
            assert [{k: repr(v) for k, v in r.items()} for r in got[1]] == \
                [{k: repr(v) for k, v in r.items()} for r in want[1]]
        assert got == want

    run()
    conn.close()
