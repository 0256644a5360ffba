"""Value codecs: exact byte layouts and round trips.

``Int64`` is Bigtable's counter format (8-byte big-endian two's complement),
``Float64`` an 8-byte big-endian IEEE 754 double, ``Text`` the readable
decimal text of the reference tables (``MD:BID: 600.55``).
"""

import math
import struct
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given, settings

import tsmodel as ts
from tests import strategies as tst
from tsmodel.backends.base import Cell, Row, SetCell
from tsmodel.encoding.codecs import codec_for
from tsmodel.plan.events import encode_event

PROPS = settings(max_examples=200, deadline=None)
DAY = datetime(2015, 3, 16, tzinfo=timezone.utc)


# -- Int64 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value, data", [
    (0, b"\x00" * 8),
    (1, b"\x00" * 7 + b"\x01"),
    (-1, b"\xff" * 8),
    (256, b"\x00" * 6 + b"\x01\x00"),
    (-2, b"\xff" * 7 + b"\xfe"),
    (2**63 - 1, b"\x7f" + b"\xff" * 7),
    (-(2**63), b"\x80" + b"\x00" * 7),
    (253453634, bytes.fromhex("000000000f1b6542")),
])
def test_int64_is_8_byte_big_endian_twos_complement(value, data):
    assert ts.Int64().encode(value) == data
    assert ts.Int64().decode(data) == value
    assert type(ts.Int64().decode(data)) is int


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
def test_int64_overflow(value):
    with pytest.raises(ts.ValidationError, match="64-bit") as info:
        ts.Int64().encode(value)
    assert not isinstance(info.value, TypeError) and info.value.value == value
    assert "int64" in str(info.value) and str(value) in str(info.value)


# A codec called on its own refuses a value with tsmodel's error naming the codec and
# the value: FieldTypeError (also a TypeError) for a wrong type, ValidationError (a
# ValueError) for a value of the right type it cannot store; never a bare exception.
WRONG_TYPES = [
    (ts.Int64(), "x", "int64"), (ts.Int64(), 1.5, "int64"), (ts.Int64(), None, "int64"),
    (ts.Float64(), "x", "float64"), (ts.Float64(), b"1", "float64"),
    (ts.Utf8(), 5, "utf8"), (ts.Utf8(), b"x", "utf8"),
    (ts.Raw(), "s", "bytes"), (ts.Raw(), 5, "bytes"),
    (ts.Text(str), 5, "Text(str)"), (ts.Text(int), "7", "Text(int)"),
    (ts.Text(int), True, "Text(int)"), (ts.Text(float), "x", "Text(float)"),
    (ts.Text(Decimal, places=2), "1.00", "Text(Decimal, places=2)"),
    (ts.Bool(), 2, "bool"), (ts.Bool(), "no", "bool"), (ts.Bool(), None, "bool"),
]
OUT_OF_RANGE = [
    (ts.Float64(), 2**1024, "float64"), (ts.Utf8(), "\ud800", "utf8"),
    (ts.Text(float), 2**1024, "Text(float)"),
    (ts.Text(float, places=2), 1.234, "Text(float, places=2)"),
    (ts.Text(float, places=2), math.inf, "Text(float, places=2)"),
]


@pytest.mark.parametrize(("codec", "value", "name"), WRONG_TYPES)
def test_a_codec_refuses_a_wrong_type_with_a_field_type_error(codec, value, name):
    with pytest.raises(ts.FieldTypeError) as info:
        codec.encode(value)
    assert isinstance(info.value, TypeError) and info.value.value is value
    assert name in str(info.value) and repr(value) in str(info.value)
    assert type(value).__name__ in str(info.value)


@pytest.mark.parametrize(("codec", "value", "name"), OUT_OF_RANGE)
def test_a_codec_refuses_a_value_it_cannot_store_with_a_validation_error(codec, value, name):
    with pytest.raises(ts.ValidationError) as info:
        codec.encode(value)
    assert not isinstance(info.value, TypeError) and info.value.value is value
    assert name in str(info.value) and repr(value) in str(info.value)


@PROPS
@given(value=tst.int64s())
def test_int64_round_trip(value):
    data = ts.Int64().encode(value)
    assert len(data) == 8
    assert data == value.to_bytes(8, "big", signed=True)
    assert ts.Int64().decode(data) == value


# -- Float64 -------------------------------------------------------------------------------


@pytest.mark.parametrize("value, data", [
    (1.0, bytes.fromhex("3ff0000000000000")),
    (-2.0, bytes.fromhex("c000000000000000")),
    (0.0, b"\x00" * 8),
    (-0.0, b"\x80" + b"\x00" * 7),
    (0.02, bytes.fromhex("3f947ae147ae147b")),
    (math.inf, bytes.fromhex("7ff0000000000000")),
    (-math.inf, bytes.fromhex("fff0000000000000")),
])
def test_float64_is_big_endian_ieee754(value, data):
    assert ts.Float64().encode(value) == data
    back = ts.Float64().decode(data)
    assert back == value and math.copysign(1, back) == math.copysign(1, value)


def test_float64_nan_round_trips():
    data = ts.Float64().encode(math.nan)
    assert len(data) == 8 and data[:2] == b"\x7f\xf8"
    assert math.isnan(ts.Float64().decode(data))


def test_float64_accepts_ints():
    assert ts.Float64().encode(3) == struct.pack(">d", 3.0)
    assert type(ts.Float64().decode(ts.Float64().encode(3))) is float


@PROPS
@given(value=tst.float64s())
def test_float64_round_trip(value):
    data = ts.Float64().encode(value)
    assert data == struct.pack(">d", value)
    back = ts.Float64().decode(data)
    if math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value and math.copysign(1, back) == math.copysign(1, value)


# -- Utf8, Bool, Raw ------------------------------------------------------------------------


def test_utf8():
    assert ts.Utf8().encode("Zürich") == "Zürich".encode()
    assert ts.Utf8().decode(b"Z\xc3\xbcrich") == "Zürich"
    with pytest.raises(ts.CellDecodingError, match="UTF-8"):
        ts.Utf8().decode(b"\xff")


@PROPS
@given(value=tst.unicode_text())
def test_utf8_round_trip(value):
    assert ts.Utf8().decode(ts.Utf8().encode(value)) == value


def test_bool():
    assert ts.Bool().encode(True) == b"\x01"
    assert ts.Bool().encode(False) == b"\x00"
    assert ts.Bool().decode(b"\x01") is True
    assert ts.Bool().decode(b"\x00") is False


def test_raw():
    assert ts.Raw().encode(b"\x00\xff") == b"\x00\xff"
    assert ts.Raw().encode(bytearray(b"ab")) == b"ab"
    assert ts.Raw().encode(memoryview(b"ab")) == b"ab"
    assert type(ts.Raw().encode(bytearray(b"ab"))) is bytes


@PROPS
@given(value=tst.byte_strings())
def test_raw_round_trip(value):
    assert ts.Raw().decode(ts.Raw().encode(value)) == value


# -- Text ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec, value, data", [
    (ts.Text(float), 600.55, b"600.55"),
    (ts.Text(float), 0.02, b"0.02"),
    (ts.Text(float), 1500, b"1500.0"),
    (ts.Text(int), 89000, b"89000"),
    (ts.Text(int), -3, b"-3"),
    (ts.Text(str), "ZXZZT", b"ZXZZT"),
    (ts.Text(), "NASDAQ", b"NASDAQ"),
])
def test_text_stores_readable_text(codec, value, data):
    assert codec.encode(value) == data
    back = codec.decode(data)
    assert back == value and type(back) is codec.kind


def test_text_python_types():
    assert ts.Text(float).python_type == (float, int)
    assert ts.Text(int).python_type is int
    assert ts.Text(str).python_type is str
    assert repr(ts.Text(float)) == "Text(float)"


@pytest.mark.parametrize("kind", [bytes, 5, "int", None])
def test_text_of_another_kind_is_refused(kind):
    with pytest.raises(ts.DeclarationError, match="int, float or str") as info:
        ts.Text(kind)
    assert isinstance(info.value, TypeError)


@PROPS
@given(value=tst.float64s())
def test_text_float_round_trip(value):
    back = ts.Text(float).decode(ts.Text(float).encode(value))
    assert (math.isnan(back) and math.isnan(value)) or back == value


@PROPS
@given(value=tst.int64s())
def test_text_int_round_trip(value):
    assert ts.Text(int).decode(ts.Text(int).encode(value)) == value


# -- Text with fixed decimal places (issue 11, item 9) ---------------------------------------


@pytest.mark.parametrize("codec, value, data", [
    # The guide's cells: MD:ASK 600.60, METER:2345 28.90, GAME:KDA 7.00.
    (ts.Text(float, places=2), 600.60, b"600.60"),
    (ts.Text(float, places=2), 28.90, b"28.90"),
    (ts.Text(float, places=2), 7.0, b"7.00"),
    (ts.Text(float, places=2), 7, b"7.00"),
    (ts.Text(float, places=2), -0.5, b"-0.50"),
    (ts.Text(float, places=0), 1500.0, b"1500"),
    (ts.Text(Decimal, places=2), Decimal("600.6"), b"600.60"),
    (ts.Text(Decimal, places=2), Decimal("12.34"), b"12.34"),
    (ts.Text(Decimal), Decimal("600.60"), b"600.60"),
])
def test_text_places_writes_fixed_decimals(codec, value, data):
    """Item 9: ts.Text(float) wrote 600.6 where the guide shows 600.60."""
    assert codec.encode(value) == data
    back = codec.decode(data)
    assert back == value and type(back) is codec.kind


def test_text_decimal_keeps_its_places():
    assert str(ts.Text(Decimal, places=2).decode(b"7.00")) == "7.00"
    assert repr(ts.Text(float, places=2)) == "Text(float, places=2)"
    assert ts.Text(Decimal).python_type is Decimal


@pytest.mark.parametrize("value", [600.555, 0.1 + 0.2, 2.675, 1e-3])
def test_text_places_refuses_a_value_it_would_round(value):
    with pytest.raises(ValueError, match="exactly 2 decimal places"):
        ts.Text(float, places=2).encode(value)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_text_places_refuses_non_finite_floats(value):
    with pytest.raises(ValueError, match="no decimal text with 2 places"):
        ts.Text(float, places=2).encode(value)


@pytest.mark.parametrize("value", [Decimal("1.005"), Decimal("Infinity"), Decimal("NaN"),
                                   Decimal("sNaN")])
def test_text_places_refuses_decimals_it_cannot_write(value):
    with pytest.raises(ValueError, match="2 (decimal )?places"):
        ts.Text(Decimal, places=2).encode(value)


@pytest.mark.parametrize("data", [b"600.6", b"600.600", b"600", b" 600.60", b"6e2.00",
                                  b"nan", b"+600.60", b"600,60"])
def test_text_places_decodes_only_its_exact_text(data):
    with pytest.raises(ts.CellDecodingError, match="exactly 2 places"):
        ts.Text(float, places=2).decode(data)


def test_text_decimal_refuses_other_text():
    with pytest.raises(ts.CellDecodingError, match="does not hold Decimal text"):
        ts.Text(Decimal).decode(b"abc")


@pytest.mark.parametrize("kind, places", [(int, 2), (str, 2), (float, -1), (float, 2.0),
                                          (float, True), (Decimal, "2")])
def test_text_places_of_the_wrong_kind_is_refused(kind, places):
    with pytest.raises(ts.DeclarationError, match="places"):
        ts.Text(kind, places=places)


@PROPS
@given(cents=tst.int64s())
def test_text_places_round_trip(cents):
    value = cents / 100
    codec = ts.Text(float, places=2)
    try:
        data = codec.encode(value)
    except ValueError:  # beyond 2**53 a double has no exact cents
        assert abs(value) > 2**53 / 100
        return
    assert codec.decode(data) == value and codec.encode(codec.decode(data)) == data


@ts.model(table="METER_TEXT", family="METER")
class MeterText:
    meter: int = ts.key(width=10)
    time: datetime = ts.timestamp()
    kwh: float = ts.value("KWH", codec=ts.Text(float, places=2))
    price: Decimal = ts.value("PRICE", codec=ts.Text(Decimal, places=2))


def test_a_value_with_too_many_places_names_model_field_and_value():
    db = ts.connect()
    db.create_tables(MeterText)
    good = MeterText(meter=1, time=DAY, kwh=28.9, price=Decimal("7"))
    bad = MeterText(meter=2, time=DAY, kwh=28.901, price=Decimal("7"))
    with pytest.raises(ts.ValidationError) as info:
        db.save_all([good, bad])
    assert (info.value.model, info.value.field, info.value.value) == ("MeterText", "kwh", 28.901)
    assert "MeterText.kwh: 28.901 cannot be written with exactly 2 decimal places" in str(
        info.value)
    assert list(MeterText.range(DAY, DAY + timedelta(days=1), meter=1).using(db)) == []
    db.save(good)
    assert list(MeterText.range(DAY, DAY + timedelta(days=1), meter=1).using(db)) == [good]


# -- defaults from annotations ----------------------------------------------------------------


@pytest.mark.parametrize("annotation, codec", [(int, ts.Int64), (float, ts.Float64),
                                               (str, ts.Utf8), (bool, ts.Bool),
                                               (bytes, ts.Raw)])
def test_default_codec_of_each_annotation(annotation, codec):
    assert isinstance(codec_for(annotation), codec)


@pytest.mark.parametrize("annotation", [list, dict, datetime, object, None])
def test_no_default_codec_for_other_annotations(annotation):
    assert codec_for(annotation) is None


@ts.model(table="QUOTE", family="MD")
class TextQuote:
    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    time: datetime = ts.timestamp()
    bid: float = ts.value("BID", codec=ts.Text(float))
    bid_size: int = ts.value("BIDSIZE", codec=ts.Text(int))
    blk: int = ts.value("BLK")


def test_model_cells_use_the_declared_codecs():
    q = TextQuote(exchange="NASDAQ", symbol="ZXZZT", time=DAY, bid=600.55, bid_size=500, blk=1)
    event = encode_event(ts.spec_of(TextQuote), q)
    cells = {m.qualifier: m for m in event.mutations}
    assert all(isinstance(m, SetCell) for m in event.mutations)
    assert cells[b"BID"].value == b"600.55"
    assert cells[b"BIDSIZE"].value == b"500"
    assert cells[b"BLK"].value == b"\x00" * 7 + b"\x01"
    row = Row(event.key, tuple(Cell(m.family, m.qualifier, m.timestamp, m.value)
                               for m in event.mutations))
    assert ts.spec_of(TextQuote).codec.decode(TextQuote, row) == [q]


def test_text_int_field_refuses_bool():
    q = TextQuote(exchange="NASDAQ", symbol="ZXZZT", time=DAY, bid=1.0, bid_size=True, blk=1)
    with pytest.raises(ts.FieldTypeError, match="bid_size"):
        encode_event(ts.spec_of(TextQuote), q)
