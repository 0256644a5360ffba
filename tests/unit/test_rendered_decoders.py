"""Every rendering of a table's declaration reads what the reference says was saved.

The decoders are generated from the declaration (tsmodel/layouts/render_read.py):
records, instances and columns. On every layout shape of the oracle harness
(tests/oracle/shapes.py), events drawn by the harness are saved on the
embedded store, the rows of the query's read plan are read once, and each
rendering decodes them: the events must be the reference's
(tests/oracle/reference.py), and the three renderings must agree value for
value. Then each row is damaged (a value cell's bytes, a dropped value
cell, a foreign column, a key): every rendering refuses it with the same
error, naming the model, the table and the row key.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests import strategies as tst
from tests.oracle.ops import aware
from tests.oracle.reference import Ev, Reference
from tests.oracle.shapes import SHAPES, Shape, us_of
from tsmodel.backends.base import Cell, CellBatch, Row
from tsmodel.declare.spec import spec_of
from tsmodel.layouts._source import rendered
from tsmodel.layouts.render_read import render_columns


def _saved(shape: Shape, data: st.DataObject) -> tuple[type, ts.Connection, Reference]:
    model = shape.make_model(uuid.uuid4().hex[:10].upper())
    conn = ts.connect("memory://")
    conn.create_tables(model)
    ref = Reference(shape)
    for batch in data.draw(st.lists(tst.oracle_batches(shape), min_size=1, max_size=3),
                           label="batches"):
        result = conn.save_all([model(**{**e.fields(), "time": aware(e.t, e.zone)})
                                for e in batch])
        assert result.ok, result.summary()
        ref.save(batch)
    return model, conn, ref


def _plan_rows(model: type, conn: ts.Connection, shape: Shape) -> tuple[Any, list[Row]]:
    """The codec and the rows of a read of every event (the plan's filters applied)."""
    qs = model.range(aware(min(shape.times), 0), aware(max(shape.times) + 1, 0),  # type: ignore[attr-defined]
                     allow_scan=True).using(conn)
    plan = qs.explain()
    rows = [row for request in plan.requests for row in conn.backend.read_rows(request)]
    return plan.codec, rows


def _columns_of(codec: Any, names: tuple[str, ...], rows: list[Row]) -> list[dict[str, Any]]:
    decode = render_columns(codec, names)
    cols = decode(rows)
    n = len(cols[names[0]])
    assert all(len(c) == n for c in cols.values())
    return [{k: cols[k][i] for k in names} for i in range(n)]


def _ev(shape: Shape, record: dict[str, Any]) -> Ev:
    t = record["time"]
    return Ev(tuple((n, record[n]) for n in shape.key_fields),
              t if isinstance(t, int) else us_of(t),
              tuple((v.name, record.get(v.name)) for v in shape.values))


def _names(model: type) -> tuple[str, ...]:
    spec = spec_of(model)
    return (*spec.key.fields, *(v.name for v in spec.values if v.name not in spec.key.fields))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_every_rendering_reads_what_was_saved(shape: Shape) -> None:
    @settings(max_examples=10, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        model, conn, ref = _saved(shape, data)
        codec, rows = _plan_rows(model, conn, shape)
        records = [r for row in rows for r in codec.records(row)]
        instances = [i for row in rows for i in codec.decode(model, row)]
        columns = _columns_of(codec, _names(model), rows)
        want = sorted(e.strict() for e in ref.visible())
        assert sorted(_ev(shape, r).strict() for r in records) == want
        # Instances and columns: the records, value for value, in the same order.
        assert [_ev(shape, {n: getattr(i, n) for n in _names(model)}).strict()
                for i in instances] == [_ev(shape, r).strict() for r in records]
        defaults = {v.name: v.default_value() for v in spec_of(model).values if v.has_default}
        assert columns == [{n: r.get(n, defaults.get(n)) for n in _names(model)}
                           for r in records]
        # Instances of the rows in one batch (where the declaration has that
        # rendering): the rows' instances, row by row, unless it declines.
        batched = codec.batch_instances()
        found = None if batched is None else batched(model, CellBatch.of(rows))
        if found is not None:
            got, counts = found
            assert counts is None or (len(counts) == len(rows) and sum(counts) == len(got))
            assert [_ev(shape, {n: getattr(i, n) for n in _names(model)}).strict()
                    for i in got] == [_ev(shape, r).strict() for r in records]
        conn.close()

    run()


def _damaged(row: Row, how: str, shape: Shape) -> Row | None:
    """``row`` damaged one way, or ``None`` where it cannot be."""
    cells = list(row.cells)
    if how == "key":
        return Row(row.key + b"\xff#x", row.cells)
    if how == "foreign column":
        ts_ = cells[0].timestamp if cells else 0
        return Row(row.key, (*cells, Cell("F", b"ZZ-not-a-field", ts_, b"?")))
    valued = [i for i, c in enumerate(cells) if c.value]
    if not valued:
        return None
    i = valued[0]
    c = cells[i]
    if how == "bytes":
        cells[i] = Cell(c.family, c.qualifier, c.timestamp, b"\xff" * 3)
    elif how == "dropped":
        del cells[i]
    return Row(row.key, tuple(cells))


def _outcome(fn: Any) -> Any:
    try:
        return ("ok", fn())
    except ts.TsModelError as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@pytest.mark.parametrize("how", ["key", "foreign column", "bytes", "dropped"])
def test_every_rendering_refuses_a_damaged_row_alike(shape: Shape, how: str) -> None:
    @settings(max_examples=5, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        model, conn, _ = _saved(shape, data)
        codec, rows = _plan_rows(model, conn, shape)
        names = _names(model)
        refused = 0
        for row in rows:
            bad = _damaged(row, how, shape)
            if bad is None:
                continue
            got = {
                "records": _outcome(lambda bad=bad: [_ev(shape, r).strict()
                                                     for r in codec.records(bad)]),
                "instances": _outcome(lambda bad=bad: [
                    _ev(shape, {n: getattr(i, n) for n in names}).strict()
                    for i in codec.decode(model, bad)]),
                "columns": _outcome(lambda bad=bad: [
                    _ev(shape, r).strict() for r in _columns_of(codec, names, [bad])]),
            }
            # Columns hold a defaulted value's default where records leave it out.
            if got["records"][0] == "ok" and got["columns"][0] == "ok":
                assert len(got["records"][1]) == len(got["columns"][1])
                got["columns"] = got["records"]
            assert got["records"] == got["instances"] == got["columns"], got
            batched = codec.batch_instances()
            found = None if batched is None else batched(model, CellBatch.of([bad]))
            if found is not None:  # taken whole: what the row reads, never a refused row
                assert got["instances"] == ("ok", [
                    _ev(shape, {n: getattr(i, n) for n in names}).strict()
                    for i in found[0]]), (found, got)
            kind, message = got["records"]
            if kind != "ok":
                refused += 1
                assert kind in ("KeyDecodingError", "CellDecodingError"), got
                assert spec_of(model).name in message and codec.table in message, message
                assert repr(bad.key) in message, message
            elif how == "key":
                raise AssertionError(f"a damaged key read as {got}")
        if how == "key" or (how == "bytes" and not shape.serialized
                            and shape.layout != "columns"):
            assert refused or not rows  # every key, every number cell: none reads
        conn.close()

    run()


def test_the_rendered_source_is_there_to_read() -> None:
    from tests.oracle.shapes import ROWS

    model = ROWS.make_model("SRC")
    records, decode = spec_of(model).codec.decoders
    assert "def records(row" in rendered(records) and "raise missing_value" in rendered(records)
    assert "cls(**values)" in rendered(decode)
