"""Bad values are refused before anything is written.

Every refusal is a ``ts.ValidationError`` (a ``ValueError``; wrong Python
types are ``ts.FieldTypeError``, also a ``TypeError``) that names the model,
the field and the value, in its message and in ``.model``/``.field``/``.value``.
"""

import math
from datetime import datetime, timedelta, timezone

import pytest

import tsmodel as ts
from tsmodel.backends.base import DeleteCells, ReadRequest, SetCell
from tsmodel.plan.events import encode_event

UTC = timezone.utc
T0 = datetime(2015, 3, 16, 19, 53, 32, 156000, tzinfo=UTC)


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
class ServerMetric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu1_usr: float = ts.value("CPU/CPU1_USR")
    blk_read: int = ts.value("IO/BLK_READ")
    note: str | None = ts.value(default=None)
    ratio: float = ts.value(default=0.0, allow_nan=True)


@ts.model(table="QUOTE", family="MD")
class Quote:
    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    time: datetime = ts.timestamp()
    bid: float = ts.value("BID")


@ts.model(table="SENSOR", family="METER")
class Meter:
    meter: int = ts.key(width=10)
    time: datetime = ts.timestamp(unit="s")
    reading: float = ts.value()


def metric(**changes):
    values = {"hostname": "server1", "time": T0, "cpu1_usr": 0.02, "blk_read": 253453634}
    values.update(changes)
    return ServerMetric(**values)


def quote(**changes):
    values = {"exchange": "NASDAQ", "symbol": "ZXZZT", "time": T0, "bid": 600.55}
    values.update(changes)
    return Quote(**values)


def meter(**changes):
    values = {"meter": 987654, "time": T0.replace(microsecond=0), "reading": 12.34}
    values.update(changes)
    return Meter(**values)


def refusal(entity, error=ts.ValidationError) -> ts.ValidationError:
    """The error that saving ``entity`` raises, checked to come before any mutation."""
    with pytest.raises(error) as info:
        encode_event(ts.spec_of(entity), entity)
    # row_key goes through the same validation
    with pytest.raises(error):
        ts.row_key(entity)
    assert isinstance(info.value, ts.TsModelError)
    return info.value


def assert_names(err: ts.ValidationError, model: str, field: str, value) -> None:
    assert err.model == model
    assert err.field == field
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(err.value)
    else:
        assert err.value == value
    assert str(err).startswith(f"{model}.{field}: ")


# -- key fields ------------------------------------------------------------------------


def test_value_wider_than_its_field():
    err = refusal(quote(exchange="NASDAQX"))
    assert isinstance(err, ValueError)
    assert_names(err, "Quote", "exchange", "NASDAQX")
    assert "'NASDAQX'" in str(err) and "width 6" in str(err) and "never truncated" in str(err)


def test_width_is_counted_in_utf8_bytes():
    err = refusal(quote(symbol="ÉÉÉ"))  # 3 characters, 6 bytes
    assert_names(err, "Quote", "symbol", "ÉÉÉ")
    assert "6 bytes" in str(err)


@pytest.mark.parametrize("host, what", [
    ("server#1", "the separator"),
    ("#", "the separator"),
    ("server 1", "byte b' '"),
    ("server!1", "byte b'!'"),
    ("server\x001", "byte b'\\x00'"),
])
def test_separator_or_lower_byte_inside_a_variable_width_field(host, what):
    err = refusal(metric(hostname=host))
    assert_names(err, "ServerMetric", "hostname", host)
    assert what in str(err)
    assert repr(host) in str(err)
    assert "width=N" in str(err)


def _host_model(separator: str):
    @ts.model(table="T", family="f", separator=separator)
    class Host:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        v: int = ts.value()

    return Host


#: ASCII punctuation a model takes as its separator (the declaration's rule).
_SEPARATORS = [c for c in map(chr, range(0x21, 0x7F)) if not c.isalnum()]


@pytest.mark.parametrize("separator, host", [
    ("|", "abc"), ("|", "a#b"), ("#", "a#b"), ("_", "web-1"), ("!", "a!b"), ("#", "a b"),
])
def test_the_advice_for_a_refused_variable_width_value_works(separator, host):
    """The message's fix is right: a separator it names takes the value (and
    reads it back); where it names none, no separator the declaration
    allows would take it (oracle: every byte of the value above the separator)."""
    with pytest.raises(ts.KeyEncodingError) as refused:
        ts.row_key(_host_model(separator)(host=host, time=T0, v=1))
    message = str(refused.value)
    fits = [c for c in _SEPARATORS if min(host.encode()) > ord(c)]
    if "separator='!'" in message:
        assert fits and fits[0] == "!"
        model = _host_model("!")
        key = ts.row_key(model(host=host, time=T0, v=1))
        assert ts.decode_row_key(model, key)["host"] == host
    else:
        assert "no separator" in message and not fits


def test_empty_variable_width_field():
    err = refusal(metric(hostname=""))
    assert_names(err, "ServerMetric", "hostname", "")
    assert "empty" in str(err)


def test_variable_width_field_over_max_length():
    @ts.model(table="T", family="F")
    class Short:
        host: str = ts.key(max_length=8)
        time: datetime = ts.timestamp()

    assert ts.row_key(Short(host="a" * 8, time=T0)) == b"a" * 8 + b"#1426535612156"
    err = refusal(Short(host="a" * 9, time=T0))
    assert_names(err, "Short", "host", "a" * 9)
    assert "max_length=8" in str(err)


@pytest.mark.parametrize("symbol", ["IBM ", " ", "IB\tM", "IB\x00"])
def test_fixed_width_string_ending_with_the_pad_or_below_it(symbol):
    err = refusal(quote(symbol=symbol))
    assert_names(err, "Quote", "symbol", symbol)
    assert "pad" in str(err)


def test_fixed_width_string_with_inner_pad_is_accepted():
    assert ts.row_key(quote(symbol="A B")) == b"NASDAQ#A B  #1426535612156"
    assert ts.decode_row_key(Quote, b"NASDAQ#A B  #1426535612156")["symbol"] == "A B"


def test_right_aligned_fixed_width_string_may_not_start_with_the_pad():
    @ts.model(table="T", family="F")
    class Right:
        code: str = ts.key(width=5, pad="0", align="right")
        time: datetime = ts.timestamp()

    assert ts.row_key(Right(code="42", time=T0)).startswith(b"00042#")
    err = refusal(Right(code="042", time=T0))
    assert "start" in str(err)


@pytest.mark.parametrize("value, words", [
    (-1, ["-1", "negative"]),
    (10**10, ["10000000000", "11 digits", "width 10"]),
])
def test_int_key_negative_or_too_many_digits(value, words):
    err = refusal(meter(meter=value))
    assert_names(err, "Meter", "meter", value)
    for word in words:
        assert word in str(err)


def test_int_key_at_its_edges():
    assert ts.row_key(meter(meter=0)).startswith(b"0000000000#")
    assert ts.row_key(meter(meter=10**10 - 1)).startswith(b"9999999999#")


@pytest.mark.parametrize("entity, field, value", [
    (lambda: meter(meter="987654"), "meter", "987654"),
    (lambda: meter(meter=True), "meter", True),
    (lambda: meter(meter=9.0), "meter", 9.0),
    (lambda: quote(exchange=42), "exchange", 42),
])
def test_wrong_type_of_key_value_is_a_validation_error(entity, field, value):
    e = entity()
    err = refusal(e)
    assert_names(err, type(e).__name__, field, value)
    assert type(value).__name__ in str(err)


def test_wrong_type_of_key_value_is_a_type_error():
    err = refusal(meter(meter="987654"))
    assert isinstance(err, TypeError)
    assert isinstance(err, ts.FieldTypeError)


# -- value fields ----------------------------------------------------------------------


@pytest.mark.parametrize("field, value, expected", [
    ("cpu1_usr", "0.02", "float/int"),
    ("cpu1_usr", True, "float/int"),
    ("cpu1_usr", [0.1], "float/int"),
    ("blk_read", True, "int"),
    ("blk_read", 1.5, "int"),
    ("blk_read", "7", "int"),
    ("note", 7, "str"),
    ("note", b"x", "str"),
])
def test_wrong_type_of_value(field, value, expected):
    err = refusal(metric(**{field: value}), ts.FieldTypeError)
    assert isinstance(err, TypeError) and isinstance(err, ValueError)
    assert_names(err, "ServerMetric", field, value)
    assert f"expected {expected}" in str(err)
    assert repr(value) in str(err)


def test_int_for_a_float_field_is_accepted():
    event = encode_event(ts.spec_of(ServerMetric), metric(cpu1_usr=1))
    cell = next(m for m in event.mutations if m.qualifier == b"CPU/CPU1_USR")
    assert cell.value == b"\x3f\xf0" + b"\x00" * 6  # 1.0 as a big-endian double


def test_missing_required_value():
    err = refusal(metric(cpu1_usr=None))
    assert_names(err, "ServerMetric", "cpu1_usr", None)
    assert "None" in str(err) and "Optional" in str(err)


def test_optional_none_erases_the_column_of_its_row():
    """A row holds one event: None erases the column up to this event's cell, older
    versions included, so a current-value row never keeps an older event's cell."""
    event = encode_event(ts.spec_of(ServerMetric), metric(note=None))
    (erase,) = [m for m in event.mutations if getattr(m, "qualifier", None) == b"note"]
    assert erase == DeleteCells("METRIC", b"note", 0, event.timestamp + 1000)


def test_nan_is_refused():
    err = refusal(metric(cpu1_usr=float("nan")))
    assert_names(err, "ServerMetric", "cpu1_usr", float("nan"))
    assert "NaN" in str(err) and "allow_nan=True" in str(err)


def test_nan_is_accepted_with_allow_nan():
    event = encode_event(ts.spec_of(ServerMetric), metric(ratio=float("nan")))
    (cell,) = [m for m in event.mutations if m.qualifier == b"ratio"]
    assert isinstance(cell, SetCell)
    assert cell.value[:2] == b"\x7f\xf8"


def test_int_too_big_for_int64():
    err = refusal(metric(blk_read=2**63))
    assert_names(err, "ServerMetric", "blk_read", 2**63)
    assert "64-bit" in str(err)


def test_int_too_big_for_a_double():
    err = refusal(metric(cpu1_usr=10**400))
    assert_names(err, "ServerMetric", "cpu1_usr", 10**400)


def test_instance_of_another_model():
    with pytest.raises(ts.FieldTypeError, match="expected a Quote instance"):
        encode_event(ts.spec_of(Quote), metric())


# -- timestamps ------------------------------------------------------------------------


def test_naive_datetime_is_refused():
    naive = datetime(2015, 3, 16, 19, 53, 32)
    err = refusal(metric(time=naive))
    assert_names(err, "ServerMetric", "time", naive)
    assert "naive" in str(err) and "tzinfo" in str(err)
    assert naive.isoformat() in str(err)


@pytest.mark.parametrize("value", [1426535612156, "2015-03-16", None])
def test_timestamp_that_is_not_a_datetime(value):
    err = refusal(metric(time=value), ts.FieldTypeError)
    assert_names(err, "ServerMetric", "time", value)
    assert "datetime" in str(err)


@pytest.mark.parametrize("when", [
    datetime(2300, 1, 1, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
    datetime(1900, 1, 1, tzinfo=UTC),
])
def test_timestamp_outside_the_encodable_range(when):
    err = refusal(metric(time=when))
    assert_names(err, "ServerMetric", "time", when)
    assert "outside the encodable range" in str(err)
    assert "13-digit epoch ms" in str(err)


def test_encodable_range_edges():
    first = datetime(1970, 1, 1, tzinfo=UTC)
    last = first + timedelta(milliseconds=10**13 - 1)
    assert ts.row_key(metric(time=first)) == b"server1#0000000000000"
    assert ts.row_key(metric(time=last)) == b"server1#9999999999999"
    refusal(metric(time=last + timedelta(milliseconds=1)))


def test_sub_unit_precision_is_refused_not_truncated():
    fine = T0 + timedelta(microseconds=1)
    err = refusal(metric(time=fine))
    assert_names(err, "ServerMetric", "time", fine)
    assert "not a whole number of milliseconds" in str(err)
    assert "floor_timestamp" in str(err)


def test_floor_timestamp_fixes_sub_unit_precision():
    fine = T0 + timedelta(microseconds=999)
    floored = ts.floor_timestamp(fine)
    assert floored == T0
    assert ts.row_key(metric(time=floored)) == b"server1#1426535612156"


def test_floor_timestamp_to_seconds_keeps_the_zone():
    zone = timezone(timedelta(hours=5, minutes=30))
    fine = datetime(2015, 3, 16, 19, 53, 32, 156789, tzinfo=zone)
    floored = ts.floor_timestamp(fine, 1_000_000)
    assert floored == fine.replace(microsecond=0)
    assert floored.utcoffset() == zone.utcoffset(None)
    assert ts.row_key(meter(time=floored)).endswith(b"#" + str(int(floored.timestamp())).encode())
    err = refusal(meter(time=fine))
    assert "not a whole number of seconds" in str(err)


def test_floor_timestamp_before_the_epoch_rounds_down():
    fine = datetime(1969, 12, 31, 23, 59, 59, 999500, tzinfo=UTC)
    assert ts.floor_timestamp(fine) == datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)


def test_floor_timestamp_refuses_naive_datetimes():
    with pytest.raises(ValueError, match="naive"):
        ts.floor_timestamp(datetime(2015, 1, 1))


@pytest.mark.parametrize("entity", [
    pytest.param(lambda: metric(time=datetime(2300, 1, 1, tzinfo=UTC)), id="out-of-range"),
    pytest.param(lambda: metric(time=T0 + timedelta(microseconds=1)), id="sub-unit"),
])
def test_timestamp_refusals_name_the_value(entity):
    e = entity()
    err = refusal(e)
    assert e.time.isoformat() in str(err) or repr(e.time) in str(err), str(err)


def test_wide_epoch_out_of_range_is_a_validation_error():
    @ts.model(table="T", family="F")
    class Wide:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms", digits=15)

    with pytest.raises(ts.ValidationError, match="outside the encodable range"):
        ts.row_key(Wide(host="h", time=datetime(1960, 1, 1, tzinfo=UTC)))


def test_calendar_format_before_1970_is_refused_before_writing():
    @ts.model(table="T", family="F")
    class Daily:
        host: str = ts.key()
        day: datetime = ts.timestamp(format="%Y%m%d")
        v: float = ts.value()

    e = Daily(host="h", day=datetime(1960, 1, 1, tzinfo=UTC), v=1.0)
    try:
        event = encode_event(ts.spec_of(Daily), e)
    except ts.ValidationError:
        return
    assert all(m.timestamp >= 0 for m in event.mutations), event.mutations


# -- the error hierarchy -------------------------------------------------------------


def test_error_classes_inherit_the_matching_builtins():
    assert issubclass(ts.ValidationError, ValueError)
    assert issubclass(ts.FieldTypeError, ts.ValidationError)
    assert issubclass(ts.FieldTypeError, TypeError)
    assert issubclass(ts.KeyEncodingError, ts.ValidationError)
    assert issubclass(ts.KeyDecodingError, ValueError)
    assert issubclass(ts.ScanRefusedError, ts.QueryError)
    assert issubclass(ts.QueryError, ValueError)


def test_validation_error_message_prefix():
    assert str(ts.ValidationError("bad", model="M", field="f", value=1)) == "M.f: bad"
    assert str(ts.ValidationError("bad", model="M")) == "M: bad"
    assert str(ts.ValidationError("bad")) == "bad"


# -- nothing is written when one entity is bad --------------------------------------


@pytest.fixture
def conn():
    pytest.importorskip("tsmodel.backends.embedded")
    c = ts.connect("memory://", default=False)
    try:
        c.create_tables(ServerMetric)
        yield c
    finally:
        c.close()


def _rows(conn, table):
    return list(conn.read(ReadRequest(table)))


@pytest.mark.parametrize("bad", [
    pytest.param(lambda: metric(hostname="srv#9"), id="bad-key"),
    pytest.param(lambda: metric(hostname="srv9", cpu1_usr=float("nan")), id="nan"),
    pytest.param(lambda: metric(hostname="srv9", time=datetime(2015, 1, 1)), id="naive"),
    pytest.param(lambda: metric(hostname="srv9", blk_read="x"), id="type"),
])
def test_save_all_writes_nothing_when_the_last_entity_is_bad(conn, bad):
    good = [metric(hostname=f"srv{i}") for i in range(5)]
    with pytest.raises(ts.ValidationError):
        conn.save_all(good + [bad()])
    assert _rows(conn, "METRIC") == []
    assert _rows(conn, "CURRENT_METRIC") == []
    # the same good entities do save, so the store was usable all along
    result = conn.save_all(good)
    assert result.ok and len(result) == 5
    assert len(_rows(conn, "METRIC")) == 5
    assert len(_rows(conn, "CURRENT_METRIC")) == 5


def test_save_all_from_a_generator_writes_nothing_when_the_last_is_bad(conn):
    def entities():
        for i in range(3):
            yield metric(hostname=f"srv{i}")
        yield metric(hostname="srv3", cpu1_usr=None)

    with pytest.raises(ts.ValidationError, match="cpu1_usr"):
        conn.save_all(entities())
    assert _rows(conn, "METRIC") == []


# -- a model class where an instance goes, and the other way round -----------------------


@pytest.mark.parametrize("call", [
    pytest.param(lambda c: c.save(ServerMetric), id="save"),
    pytest.param(lambda c: c.save_all([metric(), ServerMetric]), id="save_all"),
    pytest.param(lambda c: c.delete(ServerMetric), id="delete"),
    pytest.param(lambda c: c.delete_all([ServerMetric]), id="delete_all"),
    pytest.param(lambda c: c.save_all(ServerMetric), id="save_all-of-the-class"),
    pytest.param(lambda c: c.save_all(ServerMetric, validate_first=False),
                 id="save_all-streamed"),
    pytest.param(lambda c: c.delete_all(ServerMetric), id="delete_all-of-the-class"),
    pytest.param(lambda c: ts.row_key(ServerMetric), id="row_key"),
])
def test_the_model_class_where_instances_go_is_named(conn, call):
    with pytest.raises(ts.FieldTypeError) as info:
        call(conn)
    message = str(info.value)
    assert "expected instances of ServerMetric, got the class ServerMetric itself" in message
    assert "member_descriptor" not in message
    assert info.value.model == "ServerMetric" and info.value.value is ServerMetric
    assert _rows(conn, "METRIC") == []


@pytest.mark.parametrize("call", [
    pytest.param(lambda c: c.update(metric(), cpu1_usr=0.5), id="update"),
    pytest.param(lambda c: c.latest(metric(), hostname="srv1"), id="latest"),
    pytest.param(lambda c: c.range(metric(), T0, T0, hostname="srv1"), id="range"),
])
def test_an_instance_where_the_model_class_goes_is_named(conn, call):
    with pytest.raises(ts.FieldTypeError, match="expected the model class ServerMetric, got an "
                                               "instance of it"):
        call(conn)
