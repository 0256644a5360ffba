"""``ts.Protobuf()``: the whole event in one serialized cell ("single-timestamp serialized").

The weather-balloon pattern of the reference: row key
``us-west2#3698#2021-03-05-1200``, one column ``measurements_blob`` holding a
protobuf message. Nothing here does I/O: mutations come from
``tsmodel.plan.events.encode_event`` and rows are built by hand for ``decode_row``.
"""

from datetime import datetime, timezone

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import tsmodel as ts
from tsmodel.backends.base import Cell, Row, SetCell
from tsmodel.plan.events import encode_event

UTC = timezone.utc
T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)
T0_US = 1614945600000000
FDP = descriptor_pb2.FieldDescriptorProto


def message_class(name: str, fields, syntax: str = "proto2", package: str = "tsmtest"):
    """A message class built at run time from (name, protobuf type) pairs."""
    file = descriptor_pb2.FileDescriptorProto(name=f"{package}/{name}.proto", package=package,
                                              syntax=syntax)
    msg = file.message_type.add(name=name)
    for number, (field, kind) in enumerate(fields, start=1):
        msg.field.add(name=field, number=number, type=kind, label=FDP.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))


@ts.model(table="WEATHER", family="data",
          serialization=ts.Protobuf(qualifier="measurements_blob"))
class Balloon:
    location: str = ts.key()
    balloon_id: int = ts.key(width=4)
    time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
    pressure: int = ts.value()
    temperature: float = ts.value()
    humidity: int | None = ts.value(default=None)
    altitude: int | None = ts.value(default=None)
    note: str | None = ts.value(default=None)
    ok: bool | None = ts.value(default=None)
    raw: bytes | None = ts.value(default=None)


def balloon(**changes) -> Balloon:
    values = {"location": "us-west2", "balloon_id": 3698, "time": T0, "pressure": 94558,
              "temperature": 9.6, "humidity": 61, "altitude": 612}
    values.update(changes)
    return Balloon(**values)


def row_of(event) -> Row:
    return Row(event.key, tuple(Cell(m.family, m.qualifier, m.timestamp, m.value)
                                for m in event.mutations))


def round_trip(model, entity):
    spec = ts.spec_of(model)
    (back,) = spec.codec.decode(model, row_of(encode_event(spec, entity)))
    return back


# -- generated message ---------------------------------------------------------------------


def test_event_is_one_set_cell_with_a_protobuf_blob():
    event = encode_event(ts.spec_of(Balloon), balloon())
    assert event.key == b"us-west2#3698#2021-03-05-1200"
    (cell,) = event.mutations
    assert isinstance(cell, SetCell)
    assert (cell.family, cell.qualifier, cell.timestamp) == ("data", b"measurements_blob", T0_US)
    msg = ts.spec_of(Balloon).serialization.message_class()
    msg.ParseFromString(cell.value)
    assert (msg.pressure, msg.temperature, msg.humidity, msg.altitude) == (94558, 9.6, 61, 612)
    assert not msg.HasField("note")


def test_generated_message_numbers_fields_in_declaration_order():
    descriptor = ts.spec_of(Balloon).serialization.message_class.DESCRIPTOR
    assert [(f.name, f.number) for f in descriptor.fields] == [
        ("pressure", 1), ("temperature", 2), ("humidity", 3), ("altitude", 4), ("note", 5),
        ("ok", 6), ("raw", 7)]
    assert descriptor.fields_by_name["pressure"].type == FDP.TYPE_INT64
    assert descriptor.fields_by_name["temperature"].type == FDP.TYPE_DOUBLE
    assert descriptor.fields_by_name["note"].type == FDP.TYPE_STRING
    assert descriptor.fields_by_name["ok"].type == FDP.TYPE_BOOL
    assert descriptor.fields_by_name["raw"].type == FDP.TYPE_BYTES


def test_blob_decodes_to_the_same_instance():
    b = balloon(note="läuft", ok=False, raw=b"\x00\xff")
    assert round_trip(Balloon, b) == b


def test_optional_none_fields_round_trip_as_none():
    b = balloon(humidity=None, altitude=None)
    back = round_trip(Balloon, b)
    assert back == b
    assert back.humidity is None and back.altitude is None and back.note is None


def test_falsy_values_are_not_mistaken_for_none():
    b = balloon(humidity=0, note="", ok=False, raw=b"", temperature=0.0, pressure=0)
    back = round_trip(Balloon, b)
    assert back == b
    assert back.humidity == 0 and back.note == "" and back.ok is False and back.raw == b""


def test_serialization_is_deterministic():
    first = encode_event(ts.spec_of(Balloon), balloon()).mutations
    second = encode_event(ts.spec_of(Balloon), balloon()).mutations
    assert first == second


def test_validation_still_applies_to_serialized_fields():
    with pytest.raises(ts.ValidationError, match="pressure"):
        encode_event(ts.spec_of(Balloon), balloon(pressure=None))
    with pytest.raises(ts.FieldTypeError, match="temperature"):
        encode_event(ts.spec_of(Balloon), balloon(temperature="9.6"))
    with pytest.raises(ts.ValidationError, match="NaN"):
        encode_event(ts.spec_of(Balloon), balloon(temperature=float("nan")))


def test_row_without_the_blob_is_refused():
    """A row with no cell of the model is no event of it (it decoded to all-None)."""
    spec = ts.spec_of(Balloon)
    with pytest.raises(ts.CellDecodingError) as info:
        spec.codec.decode(
            Balloon, Row(b"us-west2#3698#2021-03-05-1200", (Cell("data", b"other", T0_US, b"x"),)))
    err = info.value
    assert (err.model, err.table, err.row_key) == ("Balloon", spec.table,
                                                   b"us-west2#3698#2021-03-05-1200")
    assert "required" in str(err)


def test_newest_blob_of_a_row_wins():
    spec = ts.spec_of(Balloon)
    old = encode_event(spec, balloon(pressure=1)).mutations[0]
    new = encode_event(spec, balloon(pressure=2)).mutations[0]
    row = Row(b"us-west2#3698#2021-03-05-1200",
              (Cell("data", b"measurements_blob", T0_US, new.value),
               Cell("data", b"measurements_blob", T0_US - 60_000_000, old.value)))
    assert spec.codec.decode(Balloon, row)[-1].pressure == 2


def test_corrupt_blob_raises_value_error():
    with pytest.raises(ValueError, match="cannot parse"):
        ts.spec_of(Balloon).serialization.decode(b"\xff\xff\xff")


def test_default_qualifier_is_blob():
    @ts.model(table="T", family="F", serialization=ts.Protobuf())
    class Small:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        v: float = ts.value()

    (cell,) = encode_event(ts.spec_of(Small), Small(host="h", time=T0, v=1.0)).mutations
    assert cell.qualifier == b"blob"


def test_with_a_current_table_both_rows_get_the_blob():
    @ts.model(table="W", family="data", current="CURRENT_W",
              serialization=ts.Protobuf(qualifier="measurements_blob"))
    class Tracked:
        location: str = ts.key()
        time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
        pressure: int = ts.value()

    spec = ts.spec_of(Tracked)
    event = encode_event(spec, Tracked(location="us-west2", time=T0, pressure=94558))
    current = event.current_row_mutation()
    assert current.key == b"us-west2"
    assert current.mutations == event.mutations
    back = spec.current_codec.decode(Tracked, Row(current.key, tuple(
        Cell(m.family, m.qualifier, m.timestamp, m.value) for m in current.mutations)))[-1]
    assert back == Tracked(location="us-west2", time=T0, pressure=94558)


# -- declaration checks -----------------------------------------------------------------------


def test_empty_qualifier_is_refused():
    with pytest.raises(ts.DeclarationError, match="qualifier"):
        @ts.model(table="T", family="F", serialization=ts.Protobuf(qualifier=""))
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            v: float = ts.value()


def test_value_in_another_family_is_refused():
    with pytest.raises(ts.DeclarationError, match="one cell in family 'F'"):
        @ts.model(table="T", family="F", serialization=ts.Protobuf())
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            v: float = ts.value(family="G")


def test_codec_without_a_protobuf_type_is_refused():
    with pytest.raises(ts.DeclarationError, match="no protobuf type"):
        @ts.model(table="T", family="F", serialization=ts.Protobuf())
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            v: float = ts.value(codec=ts.Text(float))


# -- a user-supplied message class -----------------------------------------------------------


Measurements = message_class("Measurements", [
    ("pressure", FDP.TYPE_INT64), ("temperature", FDP.TYPE_DOUBLE),
    ("humidity", FDP.TYPE_INT64), ("extra", FDP.TYPE_STRING),
])


@ts.model(table="WEATHER2", family="data",
          serialization=ts.Protobuf(Measurements, qualifier="measurements_blob"))
class UserBalloon:
    location: str = ts.key()
    balloon_id: int = ts.key(width=4)
    time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
    pressure: int = ts.value()
    temperature: float = ts.value()
    humidity: int | None = ts.value(default=None)


def user_balloon(**changes) -> UserBalloon:
    values = {"location": "us-west2", "balloon_id": 3698, "time": T0, "pressure": 94558,
              "temperature": 9.6, "humidity": 61}
    values.update(changes)
    return UserBalloon(**values)


def test_user_message_class_is_used():
    spec = ts.spec_of(UserBalloon)
    assert spec.serialization.message_class is Measurements
    (cell,) = encode_event(spec, user_balloon()).mutations
    assert cell.qualifier == b"measurements_blob"
    msg = Measurements.FromString(cell.value)
    assert (msg.pressure, msg.temperature, msg.humidity) == (94558, 9.6, 61)
    assert not msg.HasField("extra")


def test_user_message_round_trips():
    assert round_trip(UserBalloon, user_balloon()) == user_balloon()
    assert round_trip(UserBalloon, user_balloon(humidity=None)).humidity is None


def test_blob_written_by_another_producer_is_read():
    blob = Measurements(pressure=96025, temperature=9.5, humidity=66, extra="ignored")
    row = Row(b"us-west2#3698#2021-03-05-1203",
              (Cell("data", b"measurements_blob", T0_US + 180_000_000,
                    blob.SerializeToString()),))
    (back,) = ts.spec_of(UserBalloon).codec.decode(UserBalloon, row)
    assert back == user_balloon(time=datetime(2021, 3, 5, 12, 3, tzinfo=UTC), pressure=96025,
                                temperature=9.5, humidity=66)


def test_user_message_missing_a_field_is_refused():
    Partial = message_class("Partial", [("pressure", FDP.TYPE_INT64)])
    with pytest.raises(ts.DeclarationError) as info:
        @ts.model(table="T", family="F", serialization=ts.Protobuf(Partial))
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            pressure: int = ts.value()
            temperature: float = ts.value()
    assert "M.temperature" in str(info.value)
    assert "tsmtest.Partial" in str(info.value) and "'temperature'" in str(info.value)


def test_user_message_with_an_incompatible_type_is_refused():
    Wrong = message_class("Wrong", [("pressure", FDP.TYPE_STRING)])
    with pytest.raises(ts.DeclarationError, match="cannot hold"):
        @ts.model(table="T", family="F", serialization=ts.Protobuf(Wrong))
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            pressure: int = ts.value()


def test_optional_value_on_a_proto3_field_without_presence_is_refused():
    """None would come back as 0.0 from a field without presence: refuse it up front."""
    NoPresence = message_class("NoPresence", [("pressure", FDP.TYPE_INT64),
                                              ("temperature", FDP.TYPE_DOUBLE)],
                               syntax="proto3")
    with pytest.raises(ts.DeclarationError, match="no presence"):
        @ts.model(table="T", family="F", serialization=ts.Protobuf(NoPresence))
        class P3:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            pressure: int = ts.value()
            temperature: float | None = ts.value(default=None)


@pytest.mark.parametrize("narrow", [FDP.TYPE_INT32, FDP.TYPE_UINT64, FDP.TYPE_FLOAT])
def test_message_field_narrower_than_the_value_is_refused(narrow):
    """An int32 field would refuse 2**40 at save time: refuse the declaration instead."""
    Narrow = message_class(f"Narrow{narrow}", [("v", narrow)])
    annotation = float if narrow == FDP.TYPE_FLOAT else int
    with pytest.raises(ts.DeclarationError, match="cannot hold"):
        ts.model(table="T", family="F", serialization=ts.Protobuf(Narrow))(type("N", (), {
            "__annotations__": {"host": str, "time": datetime, "v": annotation},
            "__module__": __name__, "host": ts.key(), "time": ts.timestamp(),
            "v": ts.value()}))

    assert user_balloon(humidity=2**40).humidity == 2**40
    assert round_trip(UserBalloon, user_balloon(humidity=2**40)).humidity == 2**40


@pytest.mark.parametrize("raw", [bytearray(b"ab"), memoryview(b"ab")])
def test_bytes_like_values_serialize(raw):
    back = round_trip(Balloon, balloon(raw=raw))
    assert back.raw == b"ab"


# -- messages tsmodel cannot use are refused at declaration ---------------------------------


def labeled_message_class(name: str, fields, oneofs=()):
    """A proto2 message class from (name, type, label[, oneof index]) tuples."""
    file = descriptor_pb2.FileDescriptorProto(name=f"tsmlab/{name}.proto", package="tsmlab",
                                              syntax="proto2")
    msg = file.message_type.add(name=name)
    for oneof in oneofs:
        msg.oneof_decl.add(name=oneof)
    for number, (field, kind, label, *oneof) in enumerate(fields, start=1):
        added = msg.field.add(name=field, number=number, type=kind, label=label)
        if oneof:
            added.oneof_index = oneof[0]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tsmlab.{name}"))


def declare_serialized(message, **values):
    body = {"host": ts.key(), "time": ts.timestamp(), "__module__": __name__}
    annotations = {"host": str, "time": datetime}
    for name, (hint, field) in values.items():
        body[name] = field
        annotations[name] = hint
    body["__annotations__"] = annotations
    return ts.model(table="T", family="F", serialization=ts.Protobuf(message))(
        type("Probe", (), body))


def test_repeated_field_named_like_a_value_field_is_refused():
    Repeated = labeled_message_class("Repeated", [("pressure", FDP.TYPE_INT64,
                                                   FDP.LABEL_REPEATED)])
    with pytest.raises(ts.DeclarationError, match="repeated") as info:
        declare_serialized(Repeated, pressure=(int, ts.value()))
    assert "Probe.pressure" in str(info.value) and "tsmlab.Repeated" in str(info.value)


def test_required_field_that_is_no_value_field_is_refused():
    Required = labeled_message_class("Required", [
        ("pressure", FDP.TYPE_INT64, FDP.LABEL_OPTIONAL),
        ("station", FDP.TYPE_STRING, FDP.LABEL_REQUIRED)])
    with pytest.raises(ts.DeclarationError, match="required") as info:
        declare_serialized(Required, pressure=(int, ts.value()))
    assert "station" in str(info.value) and "Probe" in str(info.value)


def test_required_field_for_an_optional_value_is_refused():
    Required = labeled_message_class("RequiredOpt", [
        ("pressure", FDP.TYPE_INT64, FDP.LABEL_REQUIRED)])
    with pytest.raises(ts.DeclarationError, match="required"):
        declare_serialized(Required, pressure=(int | None, ts.value(default=None)))


def test_required_field_for_a_required_value_is_accepted():
    Required = labeled_message_class("RequiredReq", [
        ("pressure", FDP.TYPE_INT64, FDP.LABEL_REQUIRED)])
    Probe = declare_serialized(Required, pressure=(int, ts.value()))
    event = Probe(host="h", time=T0, pressure=3)
    assert round_trip(Probe, event) == event


def test_two_value_fields_in_one_oneof_are_refused():
    """Setting the second field of a oneof clears the first: a value would be lost."""
    OneOf = labeled_message_class("OneOf", [
        ("pressure", FDP.TYPE_INT64, FDP.LABEL_OPTIONAL, 0),
        ("humidity", FDP.TYPE_INT64, FDP.LABEL_OPTIONAL, 0)], oneofs=["reading"])
    with pytest.raises(ts.DeclarationError, match="oneof"):
        declare_serialized(OneOf, pressure=(int, ts.value()), humidity=(int, ts.value()))


@pytest.mark.parametrize("message", [5, object, "tsmtest.Measurements", Cell])
def test_message_that_is_not_a_message_class_is_refused(message):
    with pytest.raises(ts.DeclarationError, match="message class"):
        declare_serialized(message, pressure=(int, ts.value()))
