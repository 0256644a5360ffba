"""Instances decoded a whole batch at a time read as the rows read one by one.

`TableCodec.batch_instances()` decodes a `CellBatch` of plain event rows
straight into instances (`render_batch_instances()`), or declines the batch
(``None``), which the merge then decodes row by row. On models whose rows are
plain events with keys ending in the time's digits (ms, s reversed, µs; text,
bool and number values; values of one width in two families; salted by time
and by a key field; times in a format of one width), a batch of the
stored rows must give exactly the instances of `TableCodec.decode()` over the
same rows, and must not be declined. With one row damaged (each way of
tests/whole_key_rows.py, and cells a byte short and a byte long), a batch is
declined or gives what the rows give: never an instance the rows refuse,
never another value.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests.oracle.shapes import REVERSED
from tests.unit.test_rendered_decoders import _outcome
from tests.whole_key_rows import (
    BUCKET_DAMAGES,
    DAMAGES,
    START,
    bucket_damaged,
    bucket_models,
    draw_bucket_event,
    draw_event,
    format_models,
    full,
    group_damaged,
    optional_models,
    salted_models,
    stored_rows,
    whole_key_models,
)
from tsmodel.backends.base import Cell, CellBatch, Row
from tsmodel.declare.spec import spec_of
from tsmodel.layouts._source import rendered


def _fields(instances: list[Any]) -> list[tuple[tuple[str, str], ...]]:
    """Each instance's fields, values by ``repr`` (floats: -0.0 is not 0.0)."""
    return [tuple((k, repr(v)) for k, v in attrs.asdict(i, recurse=False).items())
            for i in instances]


def _rows_outcome(codec: Any, model: type, rows: list[Row]) -> Any:
    """The rows decoded one by one: each row's instances' fields, or the error."""
    return _outcome(lambda: [_fields(codec.decode(model, row)) for row in rows])


def _batch_outcome(decode: Any, model: type, rows: list[Row]) -> Any:
    """A batch of ``rows`` decoded whole as `_rows_outcome()` gives the rows, or ``None``
    where the decoder declines it."""
    found = decode(model, CellBatch.of(rows))
    if found is None:
        return None
    instances, counts = found
    if counts is None:
        counts = [1] * len(rows)
    assert len(counts) == len(rows) and sum(counts) == len(instances)
    out, start = [], 0
    for count in counts:
        out.append(_fields(instances[start:start + count]))
        start += count
    return ("ok", out)


def _held_to_rows(model: type, draw: Any, damage: Any, days: int = 1) -> None:
    """Events drawn by ``draw(data, model, i)`` saved; a batch of the stored rows must
    decode as the rows do; then with one row changed by ``damage(data, rows,
    at)`` (``None``: the rows as stored), it must be declined or decode as the
    rows do."""
    conn = ts.connect("memory://")
    conn.create_tables(model)

    @settings(max_examples=15, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        events = [draw(data, model, i) for i in range(data.draw(st.integers(1, 16)))]
        assert conn.save_all(events).ok
        plan, rows = stored_rows(conn, model, days=days)
        codec = plan.codec
        decode = codec.batch_instances()
        assert decode is not None, "no batch decoder for rows of a fixed shape"
        whole = _batch_outcome(decode, model, rows)
        if full(model, rows):
            assert whole is not None, "a batch of stored rows declined"
        if whole is not None:
            assert whole == _rows_outcome(codec, model, rows)
        if damage is None:
            return
        # Rows of earlier examples stay in the store: a draw bounded by their
        # number would differ when hypothesis replays an example.
        damage(data, rows, data.draw(st.integers(0, 10**6)) % len(rows))
        found = _batch_outcome(decode, model, rows)
        if found is not None:  # taken whole: exactly what the rows read
            assert found == _rows_outcome(codec, model, rows)

    run()
    conn.close()


def _sizes(data: st.DataObject, rows: list[Row], at: int) -> None:
    """A value a byte short, the next row's a byte long."""
    if len(rows) < 2:
        return
    at = min(at, len(rows) - 2)
    for i, change in ((at, lambda v: v[:-1]), (at + 1, lambda v: v + b"\0")):
        rows[i] = Row(rows[i].key, tuple(
            Cell(c.family, c.qualifier, c.timestamp, change(c.value))
            if c.qualifier == rows[i].cells[0].qualifier else c for c in rows[i].cells))


def _plain_models() -> list[type]:
    return whole_key_models() + salted_models() + format_models() + optional_models()


_MODELS = [m.__name__ for m in _plain_models()]


@pytest.mark.parametrize("name", _MODELS)
@pytest.mark.parametrize("how", ["none", *DAMAGES, "sizes"])
def test_a_batch_decodes_as_its_rows_or_is_declined(how: str, name: str) -> None:
    [model] = [m for m in _plain_models() if m.__name__ == name]

    def damage(data: st.DataObject, rows: list[Row], at: int) -> None:
        if how == "sizes":
            _sizes(data, rows, at)
        else:
            rows[at] = group_damaged(rows[at], how)

    _held_to_rows(model, draw_event, None if how == "none" else damage)


_BUCKET_MODELS = [m.__name__ for m in bucket_models()]


@pytest.mark.parametrize("name", _BUCKET_MODELS)
@pytest.mark.parametrize("how", ["none", *BUCKET_DAMAGES])
def test_a_batch_of_bucket_rows_decodes_as_its_rows_or_is_declined(how: str,
                                                                   name: str) -> None:
    [model] = [m for m in bucket_models() if m.__name__ == name]

    def damage(data: st.DataObject, rows: list[Row], at: int) -> None:
        rows[at] = bucket_damaged(rows[at], how, data)

    _held_to_rows(model, draw_bucket_event, None if how == "none" else damage, days=3)


def test_a_declined_batch_leaves_the_error_to_the_rows_in_a_query() -> None:
    """Through a query: a damaged row among plain ones is refused, naming its key."""
    model = whole_key_models()[0]
    conn = ts.connect("memory://")
    conn.create_tables(model)
    events = [model(host="a", time=START + timedelta(seconds=i), cpu=i / 4, blk=i,
                    name=str(i), up=True) for i in range(300)]
    assert conn.save_all(events).ok
    plan, rows = stored_rows(conn, model)
    qs = model.range(START, START + timedelta(days=1), allow_scan=True).using(conn)
    assert _fields(list(qs)) == _fields(events)
    bad = rows[200]
    conn.backend.mutate_rows(plan.table, [ts.backends.base.RowMutation(bad.key, (
        ts.backends.base.SetCell("M", b"IO/BLK", bad.cells[0].timestamp, b"\x01" * 3),))])
    with pytest.raises(ts.CellDecodingError, match=repr(bad.key).replace("\\", "\\\\")):
        list(qs)
    conn.close()


def test_the_oracle_shape_of_plain_rows_decodes_whole_batches() -> None:
    model = REVERSED.make_model("BATCHREV")
    codec = spec_of(model).codec
    decode = codec.batch_instances()
    assert decode is not None
    assert rendered(decode).startswith("def batch_instances(cls, batch):")
    assert decode in codec.generated()  # `tsmodel codec` prints it


def test_a_newest_first_read_of_buckets_gives_each_row_backwards() -> None:
    """Bucket rows read backwards (`newest_first()`): each batch's rows newest first,
    each row's events too, as the rows read one by one give them."""
    model = bucket_models()[0]  # Hourly
    conn = ts.connect("memory://")
    conn.create_tables(model)
    events = [model(host="a", time=START + timedelta(minutes=7 * i), cpu=i / 4, blk=i,
                    name=str(i), up=bool(i % 2)) for i in range(60)]
    assert conn.save_all(events).ok
    qs = model.range(START, START + timedelta(days=1), allow_scan=True).using(conn)
    assert _fields(list(qs)) == _fields(events)
    assert _fields(list(qs.newest_first())) == _fields(events[::-1])
    assert _fields(list(qs.newest_first().limit(7))) == _fields(events[::-1][:7])
    conn.close()


def test_models_with_rows_of_no_fixed_shape_have_no_batch_decoder() -> None:
    @ts.model(table="BI_OPT", family="F")
    class Optional_:  # no value every row has: no fixed shape
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        x: float | None = ts.value("X", default=None)
        note: str | None = ts.value("N", default=None)

    assert spec_of(Optional_).codec.batch_instances() is None


def test_rows_of_optional_values_decode_in_batches_where_every_row_has_them() -> None:
    """A model with optional and defaulted values: a batch whose rows have every
    value's cell is decoded whole; one with a row without one is declined (its
    rows read it), and the query reads the events as saved either way."""
    [model] = optional_models()
    conn = ts.connect("memory://")
    conn.create_tables(model)
    events = [model(host="a", time=START + timedelta(seconds=i), cpu=i / 4, blk=i,
                    note=str(i), level=i % 3) for i in range(20)]
    assert conn.save_all(events).ok
    plan, rows = stored_rows(conn, model)
    decode = plan.codec.batch_instances()
    assert decode is not None
    found = decode(model, CellBatch.of(rows))
    assert found is not None and _fields(found[0]) == _fields(events)
    sparse = [attrs.evolve(e, blk=None) if i == 5 else e for i, e in enumerate(events)]
    assert conn.save_all(sparse).ok
    plan, rows = stored_rows(conn, model)
    assert len(rows[5].cells) == 3  # no BLK cell: the row is of another shape
    assert decode(model, CellBatch.of(rows)) is None
    qs = model.range(START, START + timedelta(days=1), allow_scan=True).using(conn)
    assert _fields(list(qs)) == _fields(sparse)
    conn.close()


def test_a_wrapper_of_read_rows_is_read_through_it() -> None:
    """A backend that overrides ``read_rows`` (a subclass) or wraps another and hands
    the rest on by ``__getattr__`` is read through its ``read_rows``, never around
    it by the wrapped backend's own batches; one that declares ``read_batches``
    too is read in batches."""
    from tsmodel.backends.embedded import EmbeddedBackend
    from tsmodel.ground.base import own_batch_reader

    model = whole_key_models()[0]
    events = [model(host="a", time=START + timedelta(seconds=i), cpu=i / 4, blk=i,
                    name=str(i), up=True) for i in range(40)]

    class Counted(EmbeddedBackend):
        rows = 0

        def read_rows(self, request: Any) -> Any:
            for row in super().read_rows(request):
                self.rows += 1
                yield row

    class Wrapper:
        def __init__(self, inner: Any) -> None:
            self.inner, self.rows = inner, 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def read_rows(self, request: Any) -> Any:
            for row in self.inner.read_rows(request):
                self.rows += 1
                yield row

    class Batched(Counted):
        batches = 0

        def read_batches(self, request: Any) -> Any:
            for batch in super().read_batches(request):
                self.batches += 1
                yield batch

    counted = Counted()
    for backend in (counted, Wrapper(EmbeddedBackend()), Batched()):
        conn = ts.Connection(backend)
        conn.create_tables(model)
        assert conn.save_all(events).ok
        qs = model.range(START, START + timedelta(days=1), allow_scan=True).using(conn)
        assert _fields(list(qs)) == _fields(events)
        if isinstance(backend, Batched):
            assert own_batch_reader(backend) is not None and backend.batches > 0
        else:
            assert own_batch_reader(backend) is None and backend.rows == len(events)
    assert own_batch_reader(EmbeddedBackend()) is not None
