"""The columnar decoder (rows straight into Arrow columns) reads as the records do.

`ArrowColumns.rows_batch()` collects value bytes per column and decodes whole
columns (numpy, Arrow) where rows are plain events, else reads value by value
with the generated column decoder. On every shape of the oracle harness, the
rows of a read of everything decode to the records' values; each damaged
row (tests/unit/test_rendered_decoders.py) is refused with the records' error.
"""

from __future__ import annotations

from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.oracle.shapes import SHAPES, Shape, us_of  # noqa: E402
from tests.unit.test_rendered_decoders import (  # noqa: E402
    _damaged,
    _ev,
    _outcome,
    _plan_rows,
    _saved,
)
from tsmodel.declare.spec import spec_of  # noqa: E402
from tsmodel.io.arrow import ArrowColumns  # noqa: E402


def _arrow_events(shape: Shape, model: type, codec: Any, rows: list[Any]) -> list[Any]:
    batch = ArrowColumns(model).rows_batch(codec, rows, None)
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
            assert _arrow_events(shape, model, codec, rows) == \
                _record_events(shape, model, codec, rows)
        for row in rows:
            bad = row if how == "none" else _damaged(row, how, shape)
            if bad is None:
                continue
            want = _outcome(lambda bad=bad: _record_events(shape, model, codec, [bad]))
            got = _outcome(lambda bad=bad: _arrow_events(shape, model, codec, [bad]))
            assert got == want
        conn.close()

    run()
