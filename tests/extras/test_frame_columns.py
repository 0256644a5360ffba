"""The frame encoder (`tsmodel.io.frame_columns`), held to the per-event check of a save.

``save_frame()`` checks and encodes a chunk's Arrow columns a whole column at a
time. The oracle is the declared row-wise codec: the chunk's rows made
instances as the frame makes them (Arrow's Python values, times in UTC)
and checked by `check_all()`, the per-event check every save makes. On
every oracle shape, with good values and with a bad value put in one row,
in Arrow types of several widths and encodings: where the column-wise
encoding gives rows, they are the very tuples the per-event check returns
(so the same cells are written, in every table); where the per-event check
refuses a row, the column-wise encoding gives none (the chunk then goes
through the per-event check, whose error, naming the row, is raised: the
errors themselves are compared end to end by ``test_frames.py``).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tsmodel as ts  # noqa: E402
from tests import strategies as tst  # noqa: E402
from tests.oracle.ops import aware  # noqa: E402
from tests.oracle.shapes import SHAPES, Shape  # noqa: E402
from tsmodel.io.frames import FrameEncoder, _ColumnCheck, _maker, _python_columns  # noqa: E402
from tsmodel.plan.events import check_all  # noqa: E402

UTC = timezone.utc
_MODELS: dict[str, type] = {}

#: Arrow types a column of each kind of field may come in (the first: the plain one).
_INTS = [pa.int64(), pa.int32(), pa.uint8(), pa.uint64(), pa.int16()]
_FLOATS = [pa.float64(), pa.float32()]
_STRS = [pa.string(), pa.large_string()]
_UNITS = ["us", "ms", "s", "ns"]
_ZONES = ["UTC", "+00:00", "Etc/UTC", "Europe/Paris", None]

#: Values no field of a shape takes, or takes only in part (put in one row).
_BAD = st.sampled_from([None, "text", 1.5, float("nan"), float("inf"), 2**70, 2**53 + 1, -1,
                        True, "", "a#b", "\x00", " " * 40, "é" * 300, 0])


def _model(shape: Shape) -> type:
    return _MODELS.get(shape.name) or _MODELS.setdefault(shape.name, shape.make_model("FC"))


def _kind(shape: Shape, name: str) -> str:
    for seg in shape.key:
        if seg.field == name:
            return "int" if seg.kind == "int" else "str"
    return shape.value(name).kind


def _array(values: list[Any], kind: str, data: st.DataObject, name: str) -> Any:
    """``values`` as an Arrow array of a type drawn for ``kind`` (inferred where the
    values do not fit it: a bad value put in)."""
    choices = {"int": _INTS, "float": _FLOATS + [pa.int64()], "str": _STRS,
               "bool": [pa.bool_()]}[kind]
    arrow_type = data.draw(st.sampled_from(choices), label=f"type of {name}")
    try:
        array = pa.array(values, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        try:
            array = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            return None
    if kind == "str" and data.draw(st.booleans(), label=f"dictionary {name}"):
        array = array.dictionary_encode()
    return array


def _table(shape: Shape, rows: list[dict[str, Any]], data: st.DataObject) -> Any:
    """The rows as an Arrow table, types and time unit and zone drawn."""
    columns: dict[str, Any] = {}
    unit = data.draw(st.sampled_from(_UNITS), label="unit")
    zone = data.draw(st.sampled_from(_ZONES), label="zone")
    times = [r["time"] for r in rows]
    try:
        columns["time"] = pa.array(times, pa.timestamp(unit, tz=zone))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        try:
            columns["time"] = pa.array(times)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            return None  # no column of one type
    for name in rows[0]:
        if name == "time":
            continue
        array = _array([r[name] for r in rows], _kind(shape, name), data, name)
        if array is None:
            return None
        columns[name] = array
    return pa.table(columns)


def _compare(model: type, table: Any) -> bool:
    """The column-wise encoding of ``table`` against `check_all()` of its instances;
    whether the column-wise encoding gave rows."""
    column_check = _ColumnCheck(model)
    encoder = FrameEncoder(model, column_check)
    data = table.combine_chunks().to_batches()[0] if table.num_rows else None
    assert data is not None
    names = tuple(data.schema.names)
    try:
        columns = _python_columns(pa, data)
    except (OverflowError, ValueError):
        expected = None  # the frame's own conversion refuses it
    else:
        make = _maker(model, names)
        try:
            instances = [make(*row) for row in zip(*columns.values(), strict=True)]
            expected = check_all(instances).events
        except (ts.ValidationError, TypeError, ValueError):
            expected = None
    chunk = encoder.checked(0, data, accept_expired=True)
    if chunk is None:
        return False
    assert expected is not None, "a row the per-event check refuses passed column-wise"
    assert chunk.checked is not None
    assert chunk.checked.events == expected
    if expected and columns:  # the instances a result names are the frame's
        assert chunk.instances[len(expected) - 1] == instances[-1]
    return True


def _rows(shape: Shape, events: list[Any]) -> list[dict[str, Any]]:
    return [{**e.fields(), "time": aware(e.t, 0)} for e in events]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_shape_encodes_columns_as_it_checks_events(shape: Shape, data: Any) -> None:
    model = _model(shape)
    events = data.draw(st.lists(tst.oracle_events(shape), min_size=1, max_size=6))
    table = _table(shape, _rows(shape, events), data)
    if table is not None:
        _compare(model, table)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), bad=_BAD)
def test_every_shape_refuses_a_bad_row_as_the_event_check_does(shape: Shape, data: Any,
                                                                bad: Any) -> None:
    model = _model(shape)
    events = data.draw(st.lists(tst.oracle_events(shape), min_size=1, max_size=4))
    rows = _rows(shape, events)
    at = data.draw(st.integers(0, len(rows) - 1))
    field = data.draw(st.sampled_from(sorted(rows[0])))
    rows[at][field] = bad
    table = _table(shape, rows, data)
    if table is not None:
        _compare(model, table)


@ts.model(table="FC_METRIC", family="m", current="FC_CURRENT")
class Metric:
    """Rows of server metrics with a current-value row: what frames mostly save."""

    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value()
    reads: int = ts.value()
    up: bool = ts.value()
    note: str = ts.value()


@ts.model(table="FC_OPTIONAL", family="m")
class Optional_:
    """A value that may be None (not written: no cell), and one missing from the frame."""

    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float | None = ts.value(default=None)
    note: str = ts.value(default="n/a")


_T0 = datetime(2015, 3, 16, 19, tzinfo=UTC)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b#c", "", "host-1"]),
                          st.integers(-10**6, 10**6), st.floats(allow_nan=False),
                          st.integers(-2**63, 2**63 - 1), st.booleans(),
                          st.text(max_size=4)),
                min_size=1, max_size=8),
       st.sampled_from(_UNITS))
def test_a_model_with_a_current_row_encodes_columns_as_it_checks_events(
        rows: list[tuple[Any, ...]], unit: str) -> None:
    table = pa.table({
        "host": pa.array([r[0] for r in rows], pa.string()),
        "time": pa.array([_T0 + timedelta(milliseconds=r[1] * (1000 if unit == "s" else 1))
                          for r in rows], pa.timestamp(unit, tz="UTC")),
        "cpu": pa.array([r[2] for r in rows], pa.float64()),
        "reads": pa.array([r[3] for r in rows], pa.int64()),
        "up": pa.array([r[4] for r in rows], pa.bool_()),
        "note": pa.array([r[5] for r in rows], pa.string()),
    })
    taken = _compare(Metric, table)
    # The common case is taken column-wise; a key value the segment refuses (the
    # separator in a variable-width key, or nothing) is not.
    assert taken == (not any("#" in r[0] or not r[0] for r in rows))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.one_of(st.none(), st.floats())),
                min_size=1, max_size=8))
def test_an_optional_value_and_a_missing_column_encode_as_they_check(
        rows: list[tuple[Any, ...]]) -> None:
    table = pa.table({
        "host": pa.array([r[0] for r in rows], pa.string()),
        "time": pa.array([_T0 + timedelta(seconds=i) for i in range(len(rows))],
                         pa.timestamp("ms", tz="UTC")),
        "cpu": pa.array([r[1] for r in rows], pa.float64()),
    })
    taken = _compare(Optional_, table)
    assert taken == (not any(r[1] is not None and r[1] != r[1] for r in rows))


# -- the Bigtable entries of a batch, written from its columns ----------------------------

_KEYS = st.binary(min_size=1, max_size=200)
_VALUES = st.one_of(st.binary(min_size=8, max_size=8), st.binary(max_size=300))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["m", "family"]), st.binary(max_size=130)),
                min_size=1, max_size=3),
       st.booleans(), st.data())
def test_the_entries_written_from_columns_are_the_row_writers(
        columns: list[tuple[str, bytes]], exact: bool, data: st.DataObject) -> None:
    """The columns writer against the row writer of the same declaration, on the same
    rows: the same bytes and sizes (the row writer is held to the message-built
    requests by tests/unit/test_wire_bytes.py), or the batch left to the row writer."""
    from tsmodel.backends import _bigtable_wire as wire
    from tsmodel.backends._bigtable_columns import columns_writer
    from tsmodel.ground.base import DeclaredCells, DeclaredColumns

    declared = DeclaredCells("M.T", tuple(columns), exact)
    width = data.draw(st.sampled_from([None, 8, 1]), label="value width")
    value = _VALUES if width is None else st.binary(min_size=width, max_size=width)
    times = st.one_of(st.integers(1, 2**62), st.integers(-5, 5),
                      st.sampled_from([1_426_532_400_000_000, 1_426_532_400_005_123]))
    rows = data.draw(st.lists(st.tuples(_KEYS, times, *[value] * len(columns)),
                              min_size=1, max_size=12), label="rows")
    checked = [(key, us, *values) for key, us, *values in rows]
    cut = data.draw(st.integers(0, len(rows) - 1), label="first row")
    whole = DeclaredColumns(pa.array([r[0] for r in rows], pa.binary()),
                            np.array([r[1] for r in rows], np.int64),
                            [pa.array([r[2 + i] for r in rows], pa.binary())
                             for i in range(len(columns))])
    # A batch sliced from its chunk:
    got = columns_writer(declared, wire._set_cell_head, wire.MAX_ROW_KEY)(whole[cut:])
    expected = wire._rendered(declared)[1](checked[cut:], 0, range(len(rows) - cut))
    ordinary = all(r[1] > (0 if exact else 999) and r[1] * (1000 if exact else 1) < 2**63
                   for r in rows[cut:])
    assert (got is not None) == ordinary
    if got is not None:
        assert got == expected


# -- a time bucket's label, a bucket at a time -------------------------------------------

def _buckets() -> list[Any]:
    from tsmodel.encoding.buckets import make_bucket

    return [make_bucket("minute"), make_bucket("hour"), make_bucket("day", "%Y%m%d"),
            make_bucket("week"), make_bucket("month"), make_bucket("month", "%Y%m%d"),
            make_bucket(timedelta(minutes=15)),
            make_bucket("week", "week{n}", origin=datetime(2021, 3, 1, tzinfo=timezone.utc),
                        unsorted_labels=True)]


@pytest.mark.parametrize("at", range(8))
@settings(max_examples=60, deadline=None)
@given(times=st.lists(st.integers(0, 4_102_444_800_000_000), min_size=0, max_size=40),
       near=st.lists(st.integers(0, 40 * 86_400_000_000), max_size=40))
def test_bucket_labels_are_the_segments_own(at: int, times: list[int],
                                            near: list[int]) -> None:
    # Each row's label, found a bucket at a time, is what the key segment's encoder
    # writes for that row's time (the oracle: the encoder called per time); a time
    # the segment refuses (before a numbered bucket's origin) leaves the chunk to the
    # row-wise check.
    import pyarrow.compute as pc

    from tsmodel.encoding.keys import BucketSegment
    from tsmodel.io.frame_columns import FrameColumns
    from tsmodel.layouts.render_write import NotColumnWise

    segment = BucketSegment("time", _buckets()[at])
    labels = FrameColumns(pa, pc, np).bucket_labels(segment.bucket, segment.encode)
    base = 1_614_556_800_000_000  # 2021-03-01: many times in a few buckets
    for us in (times, [base + d for d in near]):
        try:
            want = [segment.encode(t) for t in us]
        except ValueError:
            with pytest.raises(NotColumnWise):
                labels(np.array(us, np.int64))
            continue
        assert labels(np.array(us, np.int64)).to_pylist() == want
