"""Fuzzing: only tsmodel's own errors escape, each deriving from the right builtin.

Declarations with parameters of every type, values of every kind on save,
and stored bytes that tsmodel did not write (foreign row keys, damaged cells
and blobs) either work or raise a ``ts.TsModelError`` subclass: a
``DeclarationError`` (a ``TypeError``) when the class is defined, a
``ValidationError`` (a ``ValueError``; ``FieldTypeError`` also a
``TypeError``) on save, a ``KeyDecodingError`` or ``CellDecodingError`` (both
``ValueError``) on read. What does encode reads back equal.

The example counts are the test tier's (tests/budget.py): modest by default,
so the suite stays fast; to hunt, choose the deep tier
(``TSMODEL_TEST_TIER=deep``) or set ``FUZZ_N`` (e.g. ``FUZZ_N=3000``).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests import strategies as tst
from tests.budget import BUDGET
from tsmodel.backends.base import Cell, Row
from tsmodel.plan.events import encode_event

FUZZ = settings(max_examples=BUDGET.fuzz_examples, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
UTC = timezone.utc


def declare(body: dict[str, Any], annotations: dict[str, Any], options: dict[str, Any]) -> type:
    ns = {**body, "__annotations__": dict(annotations), "__module__": __name__}
    return ts.model(**options)(type("Fuzzed", (), ns))


def instance(cls: type, values: dict[str, Any]) -> Any:
    """An instance with ``values`` as given: attrs does not check them."""
    return cls(**values)


def row_of(encoded: Any) -> Row:
    cells = sorted((Cell(m.family, m.qualifier, m.timestamp, m.value)
                    for m in encoded.mutations if hasattr(m, "value")),
                   key=lambda c: (c.family, c.qualifier, -c.timestamp))
    return Row(encoded.key, tuple(cells))


def same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a)
                      and math.isnan(b))


# -- declarations --------------------------------------------------------------------------


@FUZZ
@given(declaration=tst.declarations(), data=st.data())
def test_declarations_raise_only_declaration_errors(declaration, data):
    body, annotations, options = declaration
    try:
        cls = declare(body, annotations, options)
    except ts.DeclarationError as exc:
        assert isinstance(exc, TypeError)
        assert "Fuzzed" in str(exc)
        return
    spec = ts.spec_of(cls)
    ts.table_specs(spec)
    values = {name: data.draw(tst.field_values(hint), label=name)
              for name, hint in annotations.items()}
    save_and_read_back(cls, spec, values)


def save_and_read_back(cls: type, spec: ts.ModelSpec, values: dict[str, Any]) -> None:
    entity = instance(cls, values)
    try:
        encoded = encode_event(spec, entity)
    except ts.ValidationError as exc:
        assert isinstance(exc, ValueError)
        assert exc.model == spec.name
        if isinstance(exc, ts.FieldTypeError):
            assert isinstance(exc, TypeError)
        return
    (back,) = spec.codec.decode(cls, row_of(encoded.main))
    for name in values:
        got, want = getattr(back, name), getattr(entity, name)
        if name == spec.timestamp_field:
            assert got == want
        elif name in spec.key_fields or any(v.name == name for v in spec.values):
            assert same(got, want) or (isinstance(want, bytes) and got == bytes(want)), name


# -- values on save ------------------------------------------------------------------------


@ts.model(table="FUZZ_ROWS", family="F", current="FUZZ_CURRENT")
class Columns:
    host: str = ts.key()
    n: int = ts.key(width=4)
    time: datetime = ts.timestamp()
    i: int = ts.value()
    x: float = ts.value("X")
    s: str | None = ts.value(default=None)
    b: bool | None = ts.value(default=None)
    raw: bytes | None = ts.value(default=None)
    t: float | None = ts.value(codec=ts.Text(float), default=None)


@ts.model(table="FUZZ_BLOB", family="F", serialization=ts.Protobuf())
class Blob:
    host: str = ts.key(width=8)
    salt = ts.salt(4, on="time")
    time: datetime = ts.timestamp(unit="us", reverse=True)
    i: int = ts.value()
    x: float | None = ts.value(default=None)
    s2: str | None = ts.value(default=None)
    b: bool | None = ts.value(default=None)


@ts.model(table="FUZZ_CELLS", family="F", layout=ts.cells(), max_rate=1)
class Bucketed:
    host: str = ts.key()
    time: datetime = ts.timestamp(bucket="hour")
    i: int = ts.value()
    x: float | None = ts.value(default=None)


MODELS = [Columns, Blob, Bucketed]


def annotations_of(cls: type) -> dict[str, Any]:
    hints = dict(cls.__annotations__)
    return {name: eval(hint, globals()) if isinstance(hint, str) else hint  # noqa: S307
            for name, hint in hints.items() if name in {a.name for a in cls.__attrs_attrs__}}


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
@FUZZ
@given(data=st.data())
def test_saving_raises_only_validation_errors(cls, data):
    values = {name: data.draw(tst.field_values(hint), label=name)
              for name, hint in annotations_of(cls).items()}
    save_and_read_back(cls, ts.spec_of(cls), values)


# -- stored bytes --------------------------------------------------------------------------


T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)
#: The last cell timestamp a datetime holds (see the xfail test below for later ones).
MAX_CELL_US = 253_402_300_799_999_000
SAMPLES = {
    Columns: Columns(host="web1", n=7, time=T0, i=5, x=0.5, s="é", b=True, raw=b"\x00",
                     t=1.5),
    Blob: Blob(host="web1", time=T0, i=5, x=0.5, s2="é", b=False),
    Bucketed: Bucketed(host="web1", time=T0, i=5, x=0.5),
}


def samples_of(cls: type) -> tuple[Row, tuple[bytes, ...], tuple[tuple[str, bytes], ...]]:
    row = row_of(encode_event(ts.spec_of(cls), SAMPLES[cls]).main)
    return row, tuple({c.value for c in row.cells}), tuple({(c.family, c.qualifier)
                                                           for c in row.cells})


@st.composite
def stored_rows(draw: st.DrawFn, cls: type) -> Row:
    sample, values, columns = samples_of(cls)
    key = draw(tst.stored_bytes((sample.key,)))
    column = st.one_of(st.sampled_from(columns), st.tuples(st.sampled_from(["F", "G"]),
                                                           tst.stored_bytes()))
    stamp = st.one_of(st.just(sample.cells[0].timestamp),
                      st.integers(0, MAX_CELL_US).map(lambda us: us // 1000 * 1000))
    cells = draw(st.lists(st.builds(lambda c, t, v: Cell(c[0], c[1], t, v), column, stamp,
                                    tst.stored_bytes(values)), max_size=6))
    cells.sort(key=lambda c: (c.family, c.qualifier, -c.timestamp))
    return Row(key, tuple(cells))


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
@FUZZ
@given(data=st.data())
def test_reading_stored_bytes_raises_only_decoding_errors(cls, data):
    row = data.draw(stored_rows(cls))
    try:
        ts.spec_of(cls).codec.decode(cls, row)
    except (ts.KeyDecodingError, ts.CellDecodingError) as exc:
        assert isinstance(exc, ValueError)


@FUZZ
@given(key=st.one_of(tst.stored_bytes((b"web1#0007#1614945600000",)), tst.junk()))
def test_decode_row_key_raises_only_key_decoding_errors(key):
    try:
        ts.decode_row_key(Columns, key)
    except ts.KeyDecodingTypeError as exc:
        assert isinstance(exc, TypeError) and not isinstance(key, (bytes, str))
    except ts.KeyDecodingError as exc:
        assert isinstance(exc, ValueError)


def _codec_id(codec: object) -> str:
    """``Int64``, ``Text(int)``: the same in every process (pytest-xdist's workers)."""
    shown = repr(codec)
    return type(codec).__name__ if " object at 0x" in shown else shown


@pytest.mark.parametrize("codec", [ts.Int64(), ts.Float64(), ts.Utf8(), ts.Bool(), ts.Raw(),
                                   ts.Text(int), ts.Text(float), ts.Text(str)], ids=_codec_id)
@FUZZ
@given(data=tst.stored_bytes((b"\x00" * 8, b"1.5", b"12", "é".encode())))
def test_codec_decode_raises_only_cell_decoding_errors(codec, data):
    try:
        value = codec.decode(data)
    except ts.CellDecodingError as exc:
        assert isinstance(exc, ValueError) and exc.data == data
        return
    if not isinstance(codec, ts.Text):  # Text reads "1_0" and " 1" too
        assert codec.encode(value) == data


def test_fuzz_declarations_cover_every_helper():
    """Each parameter slot of the strategy is one of a real helper."""
    helpers = {"key": ts.key, "timestamp": ts.timestamp, "value": ts.value,
               "constant": ts.constant, "salt": ts.salt, "alternate": ts.alternate,
               "snapshot": ts.snapshot, "protobuf": ts.Protobuf, "model": ts.model}
    import inspect

    for helper, name in tst.DECLARATION_SLOTS:
        params = inspect.signature(helpers[helper]).parameters
        assert name in params or helper == "model", (helper, name)


def test_cell_timestamp_past_the_year_9999_is_a_decoding_error():
    row = Row(b"web1#2021030512", (Cell("F", b"i", MAX_CELL_US + 1000, b"\x00" * 8),))
    with pytest.raises(ts.CellDecodingError, match="9999"):
        ts.spec_of(Bucketed).codec.decode(Bucketed, row)
