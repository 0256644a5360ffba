"""Stored bytes that tsmodel did not write, or that were damaged, never decode silently.

Every decoder either returns the value that was encoded or raises a
``TsModelError``: ``CellDecodingError`` for a cell (a ``ValueError``, with
optional ``model``, ``table``, ``row_key`` and ``column`` that the table codec
fills), ``KeyDecodingError`` for a row key. Nothing here does I/O.
"""

from datetime import datetime, timezone

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import tsmodel as ts
from tsmodel.backends.base import Cell, Row
from tsmodel.encoding.keys import SegmentValueError, StrSegment
from tsmodel.plan.events import encode_event

UTC = timezone.utc
T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)
FDP = descriptor_pb2.FieldDescriptorProto


# -- value codecs -------------------------------------------------------------------------


@pytest.mark.parametrize("codec, data, words", [
    pytest.param(ts.Int64(), b"\x01", ["int64", "8 bytes", "got 1"], id="int64-short"),
    pytest.param(ts.Int64(), b"", ["int64", "8 bytes", "got 0"], id="int64-empty"),
    pytest.param(ts.Float64(), b"\x00" * 9, ["float64", "8 bytes", "got 9"], id="float64-long"),
    pytest.param(ts.Utf8(), b"ab\xff", ["utf8", "UTF-8", "position 2"], id="utf8-invalid"),
    pytest.param(ts.Bool(), b"", ["bool", "0x00", "0x01", "b''"], id="bool-empty"),
    pytest.param(ts.Bool(), b"\x02", ["bool", "b'\\x02'"], id="bool-other-byte"),
    pytest.param(ts.Bool(), b"\x01\x00", ["bool", "2 bytes"], id="bool-two-bytes"),
    pytest.param(ts.Bool(), b"true", ["bool"], id="bool-text"),
    pytest.param(ts.Text(int), b"abc", ["Text(int)", "b'abc'"], id="text-int-letters"),
    pytest.param(ts.Text(int), b"\xff", ["Text(int)", "UTF-8"], id="text-int-invalid-utf8"),
    pytest.param(ts.Text(float), b"", ["Text(float)"], id="text-float-empty"),
    pytest.param(ts.Text(str), b"\xc3", ["Text(str)", "UTF-8"], id="text-str-truncated-utf8"),
])
def test_bad_cell_bytes_are_a_cell_decoding_error(codec, data, words):
    with pytest.raises(ts.CellDecodingError) as info:
        codec.decode(data)
    exc = info.value
    assert isinstance(exc, ValueError) and isinstance(exc, ts.TsModelError)
    assert exc.data == data
    for word in words:
        assert word in str(exc), f"{word!r} not in {str(exc)!r}"


def test_bool_decodes_exactly_the_two_bytes_it_writes():
    assert ts.Bool().decode(b"\x00") is False
    assert ts.Bool().decode(b"\x01") is True


def test_cell_decoding_error_names_where_the_cell_is():
    exc = ts.CellDecodingError("an int64 cell holds 8 bytes, got 1", data=b"\x01")
    assert str(exc) == "an int64 cell holds 8 bytes, got 1"
    assert (exc.model, exc.table, exc.row_key, exc.column, exc.field) == (None,) * 5
    located = exc.locate(model="Metric", table="METRIC", row_key=b"web1#1426535612045",
                         column="CPU:usr", field="cpu")
    assert located is exc
    assert str(exc) == ("Metric.cpu: table 'METRIC', row key b'web1#1426535612045', "
                        "column CPU:usr: an int64 cell holds 8 bytes, got 1")
    # what is already known stays
    exc.locate(model="Other", table=None)
    assert exc.model == "Metric" and exc.table == "METRIC"


# -- a float field refuses ints it would round --------------------------------------------


@ts.model(table="METRIC", family="M")
class Metric:
    host: str = ts.key()
    time: datetime = ts.timestamp()
    load: float = ts.value()
    text_load: float | None = ts.value(codec=ts.Text(float), default=None)


@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 1, 10**30, 2**64 + 1])
def test_int_that_a_double_would_round_is_refused(value):
    with pytest.raises(ts.ValidationError, match="load") as info:
        encode_event(ts.spec_of(Metric), Metric(host="h", time=T0, load=value))
    assert info.value.field == "load" and info.value.value == value
    assert "exactly" in str(info.value) and "float(" in str(info.value)


def test_int_that_text_float_would_round_is_refused():
    with pytest.raises(ts.ValidationError, match="text_load"):
        encode_event(ts.spec_of(Metric), Metric(host="h", time=T0, load=1.0,
                                                text_load=2**53 + 1))


@pytest.mark.parametrize("value", [2**53, -(2**53), 2**60, 10**22, 0, -7])
def test_int_a_double_holds_exactly_is_accepted(value):
    event = encode_event(ts.spec_of(Metric), Metric(host="h", time=T0, load=value))
    (cell,) = [m for m in event.mutations if m.qualifier == b"load"]
    assert ts.Float64().decode(cell.value) == value


def test_float_codec_refuses_inexact_int_on_its_own():
    with pytest.raises(ts.ValidationError, match="exactly"):
        ts.Float64().encode(2**53 + 1)
    assert ts.Float64().encode(1e30) == ts.Float64().encode(float(10**30))


# -- protobuf blobs -----------------------------------------------------------------------


def message_class(name, fields, syntax="proto2"):
    """A message class from (name, type, label) triples."""
    file = descriptor_pb2.FileDescriptorProto(name=f"tsmdec/{name}.proto", package="tsmdec",
                                              syntax=syntax)
    msg = file.message_type.add(name=name)
    for number, (field, kind, label) in enumerate(fields, start=1):
        msg.field.add(name=field, number=number, type=kind, label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tsmdec.{name}"))


@ts.model(table="WEATHER", family="data", serialization=ts.Protobuf(qualifier="m"))
class Balloon:
    location: str = ts.key()
    time: datetime = ts.timestamp()
    pressure: int = ts.value()
    note: str | None = ts.value(default=None)


def blob_row(blob: bytes) -> Row:
    key = encode_event(ts.spec_of(Balloon), Balloon(location="us", time=T0, pressure=1)).key
    return Row(key, (Cell("data", b"m", 1614945600000000, blob),))


def test_blob_lacking_a_required_value_is_an_error():
    """A message without ``pressure`` read back as pressure=0 before."""
    with pytest.raises(ts.CellDecodingError, match="pressure") as info:
        ts.spec_of(Balloon).codec.decode(Balloon, blob_row(b""))
    assert "Balloon" in str(info.value)


def test_blob_lacking_an_optional_value_reads_none():
    message = ts.spec_of(Balloon).serialization.message_class(pressure=5)
    (back,) = ts.spec_of(Balloon).codec.decode(Balloon, blob_row(message.SerializeToString()))
    assert back.pressure == 5 and back.note is None


def test_proto2_string_with_invalid_utf8_is_an_error():
    """upb hands proto2 strings over as bytes when they are not UTF-8."""
    blob = b"\x08\x05" + b"\x12\x02a\xff"  # pressure=5, note=b"a\xff"
    with pytest.raises(ts.CellDecodingError, match="note"):
        ts.spec_of(Balloon).codec.decode(Balloon, blob_row(blob))


def test_garbage_blob_is_a_cell_decoding_error():
    with pytest.raises(ts.CellDecodingError, match="cannot parse"):
        ts.spec_of(Balloon).codec.decode(Balloon, blob_row(b"\xff\xff\xff"))


def test_user_message_lacking_a_required_value_is_an_error():
    Reading = message_class("Reading", [("pressure", FDP.TYPE_INT64, FDP.LABEL_OPTIONAL)])

    @ts.model(table="T", family="F", serialization=ts.Protobuf(Reading))
    class Probe:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        pressure: int = ts.value()

    key = encode_event(ts.spec_of(Probe), Probe(host="h", time=T0, pressure=1)).key
    row = Row(key, (Cell("F", b"blob", 1614945600000000, Reading().SerializeToString()),))
    with pytest.raises(ts.CellDecodingError, match="pressure"):
        ts.spec_of(Probe).codec.decode(Probe, row)


# -- row keys -----------------------------------------------------------------------------


def test_key_segment_with_invalid_utf8_is_a_segment_value_error():
    with pytest.raises(SegmentValueError, match="UTF-8"):
        StrSegment("host").decode(b"\x91B")
    with pytest.raises(SegmentValueError, match="UTF-8"):
        StrSegment("host", width=4).decode(b"\xff   ")


def test_row_key_with_invalid_utf8_is_a_key_decoding_error():
    with pytest.raises(ts.KeyDecodingError, match="UTF-8"):
        ts.decode_row_key(Metric, b"\xff\xfe#1614945600000")


@pytest.mark.parametrize("key", [5, None, 1.5, ["web1"]])
def test_row_key_of_the_wrong_type_is_a_key_decoding_error(key):
    with pytest.raises(ts.KeyDecodingError, match="bytes or str") as info:
        ts.decode_row_key(Metric, key)
    assert isinstance(info.value, TypeError)
    assert "Metric" in str(info.value)


def test_row_key_as_str_with_a_lone_surrogate_is_a_key_decoding_error():
    with pytest.raises(ts.KeyDecodingError, match="UTF-8"):
        ts.decode_row_key(Metric, "web\ud8001#1614945600000")


def test_row_key_as_bytearray_decodes():
    key = bytearray(b"web1#1614945600000")
    assert ts.decode_row_key(Metric, key)["host"] == "web1"


@pytest.mark.parametrize("segment", [StrSegment("host"), StrSegment("host", width=8)])
def test_lone_surrogate_in_a_key_value_is_refused(segment):
    with pytest.raises(SegmentValueError, match="surrogate"):
        segment.encode("web\ud800")


def test_lone_surrogate_in_a_key_field_is_a_key_encoding_error():
    with pytest.raises(ts.KeyEncodingError, match="surrogate") as info:
        encode_event(ts.spec_of(Metric), Metric(host="web\udc80", time=T0, load=1.0))
    assert info.value.field == "host" and info.value.value == "web\udc80"


def test_lone_surrogate_in_a_string_value_is_a_validation_error():
    with pytest.raises(ts.ValidationError, match="note"):
        encode_event(ts.spec_of(Balloon), Balloon(location="us", time=T0, pressure=1,
                                                  note="a\ud800"))
