"""Properties of the row key codec, checked with Hypothesis.

* Round trip: ``decode_row_key(M, row_key(x))`` gives back the key fields.
* Order: the byte order of keys is the tuple order of their values (newest
  first for reversed timestamps).
* Isolation: no row of another entity ever falls inside the row ranges that
  a query of one entity reads, for full keys, key prefixes, salted keys and
  the current-value table.

The strategies are in ``tests/strategies.py``.
"""

import zlib
from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests import strategies as tst
from tsmodel.encoding.keys import IntSegment, SegmentValueError, StrSegment
from tsmodel.encoding.timestamps import from_micros, to_micros

PROPS = settings(max_examples=200, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = settings(max_examples=100, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def conn():
    c = ts.connect("memory://", default=False)
    yield c
    c.close()


# -- models ------------------------------------------------------------------------------


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
class Host:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")


@ts.model(table="QUOTE", family="MD", current="CURRENT_QUOTE")
class Quote:
    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    time: datetime = ts.timestamp(unit="ms")


@ts.model(table="SENSOR", family="METER")
class Meter:
    meter: int = ts.key(width=10)
    time: datetime = ts.timestamp(unit="s")


@ts.model(table="WEATHER", family="data")
class Balloon:
    location: str = ts.key()
    balloon_id: int = ts.key(width=4)
    time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")


@ts.model(table="BATTERY", family="METRIC")
class SaltedBattery:
    kind = ts.constant("BATTERY")
    bucket = ts.salt(3, on="time")
    user: str = ts.key()
    time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)


def time_model(name: str, **options):
    """A model ``h#<time>`` with the given timestamp encoding."""
    ns = {"__annotations__": {"host": str, "time": datetime}, "__module__": __name__,
          "host": ts.key(), "time": ts.timestamp(**options)}
    return ts.model(table="T", family="F")(type(name, (), ns))


MINUTE, SECOND, HOUR, DAY, MS, US = (60_000_000, 1_000_000, 3_600_000_000, 86_400_000_000,
                                     1_000, 1)

#: (model, strategy of its timestamps, newest first?)
ENCODINGS = {
    "ms": (time_model("Ms", unit="ms"), tst.epoch_datetimes("ms"), False),
    "us": (time_model("Us", unit="us"), tst.epoch_datetimes("us"), False),
    "s": (time_model("S", unit="s"), tst.epoch_datetimes("s"), False),
    "ms-14": (time_model("Ms14", unit="ms", digits=14), tst.epoch_datetimes("ms", 14), False),
    "ms-reversed": (time_model("RMs", unit="ms", reverse=True), tst.epoch_datetimes("ms"), True),
    "us-reversed": (time_model("RUs", unit="us", reverse=True), tst.epoch_datetimes("us"), True),
    "s-reversed": (time_model("RS", unit="s", reverse=True), tst.epoch_datetimes("s"), True),
    "day": (time_model("Day", format="%Y%m%d"), tst.format_datetimes(DAY), False),
    "day-of-year-hour": (time_model("Doy", format="%Y%j%H"), tst.format_datetimes(HOUR), False),
    "minute": (time_model("Minute", format="%Y-%m-%d-%H%M"), tst.format_datetimes(MINUTE),
               False),
    "second": (time_model("Second", format="%Y%m%d%H%M%S"), tst.format_datetimes(SECOND),
               False),
    "millis": (time_model("Millis", format="%Y%m%d%H%M%S", millis=True),
               tst.format_datetimes(MS), False),
    "micros": (time_model("Micros", format="%Y%m%dT%H%M%S.%f"), tst.format_datetimes(US),
               False),
}


def in_ranges(plan: ts.ReadPlan, key: bytes) -> bool:
    return any(r.contains(key) for req in plan.requests for r in req.rows.ranges)


def all_ranges(plan: ts.ReadPlan):
    return [r for req in plan.requests for r in req.rows.ranges]


def time_span():
    """(start, end) with start <= end, anywhere in the 13-digit ms range, any microsecond."""
    t = tst.aware_datetimes(-10**12, 10**16 + 10**12)
    return st.tuples(t, t).map(lambda p: tuple(sorted(p, key=to_micros)))


# -- round trip ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ENCODINGS))
@PROPS
@given(data=st.data())
def test_timestamp_round_trip(name, data):
    model, times, _ = ENCODINGS[name]
    when = data.draw(times)
    key = ts.row_key(model(host="h", time=when))
    assert key.startswith(b"h#")
    assert len(key) == 2 + ts.spec_of(model).timestamp.width
    assert ts.decode_row_key(model, key) == {"host": "h", "time": when}


@PROPS
@given(host=tst.variable_width_text(), when=tst.epoch_datetimes("ms"))
def test_variable_width_string_round_trip(host, when):
    e = Host(hostname=host, time=when)
    assert ts.decode_row_key(Host, ts.row_key(e)) == {"hostname": host, "time": when}
    assert ts.current_row_key(e) == host.encode("utf-8")


@PROPS
@given(exchange=tst.fixed_width_text(6), symbol=tst.fixed_width_text(5),
       when=tst.epoch_datetimes("ms"))
def test_fixed_width_string_round_trip(exchange, symbol, when):
    key = ts.row_key(Quote(exchange=exchange, symbol=symbol, time=when))
    assert key[6:7] == b"#" and key[12:13] == b"#" and len(key) == 26
    assert ts.decode_row_key(Quote, key) == {"exchange": exchange, "symbol": symbol,
                                             "time": when}


@PROPS
@given(meter=tst.key_ints(10), when=tst.epoch_datetimes("s"))
def test_int_round_trip(meter, when):
    key = ts.row_key(Meter(meter=meter, time=when))
    assert key[:10] == str(meter).zfill(10).encode()
    fields = ts.decode_row_key(Meter, key)
    assert fields == {"meter": meter, "time": when}
    assert type(fields["meter"]) is int


@PROPS
@given(meter=tst.key_ints(10), host=tst.variable_width_text())
def test_text_of_a_key_value_parses_back(meter, host):
    assert IntSegment("meter", 10).parse(str(meter)) == meter
    assert StrSegment("host").parse(host) == host


@pytest.mark.parametrize("text", ["forty", "", " 42", "4_2", "+42", "4.0", "\u0664\u0662"])
def test_only_ascii_digits_parse_as_an_integer(text):
    with pytest.raises(SegmentValueError, match="is not an integer"):
        IntSegment("meter", 10).parse(text)
    with pytest.raises(SegmentValueError, match="is negative"):  # the encoder's refusal
        IntSegment("meter", 10).encode(IntSegment("meter", 10).parse("-5"))


def test_timestamps_have_no_text_form_at_the_segment():
    with pytest.raises(NotImplementedError, match="TimestampSegment has no text form"):
        ts.spec_of(Meter).timestamp.parse("2015-03-16T19:53:32Z")


@PROPS
@given(location=tst.variable_width_text(), balloon=tst.key_ints(4),
       when=tst.format_datetimes(MINUTE))
def test_mixed_key_round_trip(location, balloon, when):
    key = ts.row_key(Balloon(location=location, balloon_id=balloon, time=when))
    assert ts.decode_row_key(Balloon, key) == {"location": location, "balloon_id": balloon,
                                               "time": when}


@PROPS
@given(user=tst.variable_width_text(ascii_only=True), when=tst.format_datetimes(MS))
def test_salted_round_trip_and_salt(user, when):
    key = ts.row_key(SaltedBattery(user=user, time=when))
    fields = ts.decode_row_key(SaltedBattery, key)
    encoded_time = key.rsplit(b"#", 1)[1]
    assert fields == {"user": user, "time": when, "__salt__": zlib.crc32(encoded_time) % 3}
    assert key.startswith(b"BATTERY#%d#" % fields["__salt__"])


# -- byte order = tuple order ------------------------------------------------------------


def same_order(a, b, ka: bytes, kb: bytes) -> None:
    assert (ka < kb) == (a < b), (a, b, ka, kb)
    assert (ka == kb) == (a == b), (a, b, ka, kb)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
@PROPS
@given(data=st.data())
def test_timestamp_byte_order_is_time_order(name, data):
    model, times, newest_first = ENCODINGS[name]
    t1, t2 = data.draw(times), data.draw(times)
    k1 = ts.row_key(model(host="h", time=t1))
    k2 = ts.row_key(model(host="h", time=t2))
    u1, u2 = to_micros(t1), to_micros(t2)
    if newest_first:
        same_order(u2, u1, k1, k2)
    else:
        same_order(u1, u2, k1, k2)


@PROPS
@given(a=st.tuples(tst.variable_width_text(), tst.epoch_datetimes("ms")),
       b=st.tuples(tst.variable_width_text(), tst.epoch_datetimes("ms")))
def test_variable_width_byte_order_is_tuple_order(a, b):
    ka = ts.row_key(Host(hostname=a[0], time=a[1]))
    kb = ts.row_key(Host(hostname=b[0], time=b[1]))
    same_order((a[0], to_micros(a[1])), (b[0], to_micros(b[1])), ka, kb)


@PROPS
@given(host=tst.variable_width_text(max_bytes=8), suffix=tst.variable_width_text(max_bytes=8),
       t1=tst.epoch_datetimes("ms"), t2=tst.epoch_datetimes("ms"))
def test_a_hostname_sorts_before_its_extensions_whatever_the_times(host, suffix, t1, t2):
    # the sharpest case of tuple order: "server1" < "server10" at any times
    ka = ts.row_key(Host(hostname=host, time=t1))
    kb = ts.row_key(Host(hostname=host + suffix, time=t2))
    assert ka < kb


@PROPS
@given(a=st.tuples(tst.fixed_width_text(6), tst.fixed_width_text(5), tst.epoch_datetimes()),
       b=st.tuples(tst.fixed_width_text(6), tst.fixed_width_text(5), tst.epoch_datetimes()))
def test_fixed_width_byte_order_is_tuple_order(a, b):
    ka = ts.row_key(Quote(exchange=a[0], symbol=a[1], time=a[2]))
    kb = ts.row_key(Quote(exchange=b[0], symbol=b[1], time=b[2]))
    same_order((a[0], a[1], to_micros(a[2])), (b[0], b[1], to_micros(b[2])), ka, kb)


@PROPS
@given(a=st.tuples(tst.key_ints(10), tst.epoch_datetimes("s")),
       b=st.tuples(tst.key_ints(10), tst.epoch_datetimes("s")))
def test_int_byte_order_is_tuple_order(a, b):
    ka = ts.row_key(Meter(meter=a[0], time=a[1]))
    kb = ts.row_key(Meter(meter=b[0], time=b[1]))
    same_order((a[0], to_micros(a[1])), (b[0], to_micros(b[1])), ka, kb)


@PROPS
@given(a=st.tuples(tst.variable_width_text(), tst.key_ints(4), tst.format_datetimes(MINUTE)),
       b=st.tuples(tst.variable_width_text(), tst.key_ints(4), tst.format_datetimes(MINUTE)))
def test_mixed_byte_order_is_tuple_order(a, b):
    ka = ts.row_key(Balloon(location=a[0], balloon_id=a[1], time=a[2]))
    kb = ts.row_key(Balloon(location=b[0], balloon_id=b[1], time=b[2]))
    same_order((a[0], a[1], to_micros(a[2])), (b[0], b[1], to_micros(b[2])), ka, kb)


@PROPS
@given(a=st.tuples(tst.variable_width_text(), tst.epoch_datetimes("ms")),
       b=st.tuples(tst.variable_width_text(), tst.epoch_datetimes("ms")))
def test_reversed_byte_order_is_entity_then_newest_first(a, b):
    model = ENCODINGS["ms-reversed"][0]
    ka = ts.row_key(model(host=a[0], time=a[1]))
    kb = ts.row_key(model(host=b[0], time=b[1]))
    same_order((a[0], -to_micros(a[1])), (b[0], -to_micros(b[1])), ka, kb)


def test_right_aligned_strings_order_by_length_first():
    """Documented: right alignment gives numeric-string order, not string order."""
    model = ts.model(table="T", family="F")(type("Right", (), {
        "__annotations__": {"code": str, "time": datetime}, "__module__": __name__,
        "code": ts.key(width=4, align="right"), "time": ts.timestamp()}))
    when = from_micros(0)

    def key(code: str) -> bytes:
        return ts.row_key(model(code=code, time=when))

    assert key("9") < key("10") < key("100")
    assert key("B") < key("AA")  # shorter first, unlike str order


# -- isolation: no row of another entity inside an entity's ranges --------------------


@PROPS
@given(pair=tst.distinct_pair(tst.variable_width_text()), when=tst.epoch_datetimes("ms"),
       span=time_span())
def test_full_key_range_isolates_a_variable_width_entity(conn, pair, when, span):
    a, b = pair
    start, end = span
    plan = Host.range(start, end, hostname=a).using(conn).explain()
    assert not in_ranges(plan, ts.row_key(Host(hostname=b, time=when)))
    # and the range is exact for the entity itself: [start, end)
    inside = to_micros(start) <= to_micros(when) < to_micros(end)
    assert in_ranges(plan, ts.row_key(Host(hostname=a, time=when))) == inside


@PROPS
@given(pair=tst.distinct_pair(tst.variable_width_text()), when=tst.epoch_datetimes("ms"),
       span=time_span())
def test_reversed_full_key_range_is_exact_and_isolated(conn, pair, when, span):
    model = ENCODINGS["ms-reversed"][0]
    a, b = pair
    start, end = span
    plan = model.range(start, end, host=a).using(conn).explain()
    assert not in_ranges(plan, ts.row_key(model(host=b, time=when)))
    inside = to_micros(start) <= to_micros(when) < to_micros(end)
    assert in_ranges(plan, ts.row_key(model(host=a, time=when))) == inside


@PROPS
@given(pair=tst.distinct_pair(tst.fixed_width_text(6)), symbols=st.tuples(
    tst.fixed_width_text(5), tst.fixed_width_text(5)), when=tst.epoch_datetimes("ms"),
    span=time_span())
def test_prefix_range_isolates_a_fixed_width_exchange(conn, pair, symbols, when, span):
    a, b = pair
    start, end = span
    plan = Quote.range(start, end, exchange=a).using(conn).explain()
    assert len(plan.requests) == 1
    assert not in_ranges(plan, ts.row_key(Quote(exchange=b, symbol=symbols[1], time=when)))
    # every row of the exchange is read; the time is filtered on cells and client-side
    assert in_ranges(plan, ts.row_key(Quote(exchange=a, symbol=symbols[0], time=when)))


@PROPS
@given(first=st.tuples(tst.fixed_width_text(6), tst.fixed_width_text(5)),
       second=st.tuples(tst.fixed_width_text(6), tst.fixed_width_text(5)),
       when=tst.epoch_datetimes("ms"), span=time_span())
def test_full_key_range_isolates_a_fixed_width_entity(conn, first, second, when, span):
    start, end = span
    plan = Quote.range(start, end, exchange=first[0], symbol=first[1]).using(conn).explain()
    other = ts.row_key(Quote(exchange=second[0], symbol=second[1], time=when))
    inside = to_micros(start) <= to_micros(when) < to_micros(end)
    assert in_ranges(plan, other) == (first == second and inside)


@PROPS
@given(pair=tst.distinct_pair(tst.variable_width_text()), ids=st.tuples(
    tst.key_ints(4), tst.key_ints(4)), when=tst.format_datetimes(MINUTE), span=time_span())
def test_prefix_range_isolates_a_variable_width_location(conn, pair, ids, when, span):
    a, b = pair
    start, end = span
    plan = Balloon.range(start, end, location=a).using(conn).explain()
    assert not in_ranges(plan, ts.row_key(Balloon(location=b, balloon_id=ids[1], time=when)))
    assert in_ranges(plan, ts.row_key(Balloon(location=a, balloon_id=ids[0], time=when)))


@PROPS
@given(pair=tst.distinct_pair(tst.key_ints(10)), when=tst.epoch_datetimes("s"),
       span=time_span())
def test_full_key_range_isolates_an_int_entity(conn, pair, when, span):
    a, b = pair
    start, end = span
    plan = Meter.range(start, end, meter=a).using(conn).explain()
    assert not in_ranges(plan, ts.row_key(Meter(meter=b, time=when)))
    inside = to_micros(start) <= to_micros(when) < to_micros(end)
    assert in_ranges(plan, ts.row_key(Meter(meter=a, time=when))) == inside


@FEW
@given(pair=tst.distinct_pair(tst.variable_width_text(ascii_only=True)),
       when=tst.format_datetimes(MS), span=time_span())
def test_salted_ranges_isolate_a_user_and_cover_every_salt(conn, pair, when, span):
    a, b = pair
    start, end = span
    plan = SaltedBattery.range(start, end, user=a).using(conn).explain()
    if plan.requests:
        assert len(plan.requests) == 3 and plan.merge == "time"
    assert not in_ranges(plan, ts.row_key(SaltedBattery(user=b, time=when)))
    inside = to_micros(start) <= to_micros(when) < to_micros(end)
    assert in_ranges(plan, ts.row_key(SaltedBattery(user=a, time=when))) == inside


@PROPS
@given(pair=tst.distinct_pair(tst.variable_width_text()))
def test_current_row_of_one_host_is_exactly_its_row(conn, pair):
    a, b = pair
    plan = Host.current(hostname=a).using(conn).explain()
    assert plan.table == "CURRENT_METRIC"
    assert in_ranges(plan, a.encode())
    assert not in_ranges(plan, b.encode())


@PROPS
@given(pair=tst.distinct_pair(tst.fixed_width_text(6)), symbols=st.tuples(
    tst.fixed_width_text(5), tst.fixed_width_text(5)))
def test_current_prefix_isolates_an_exchange(conn, pair, symbols):
    a, b = pair
    plan = Quote.current(exchange=a).using(conn).explain()
    key_a = ts.current_row_key(Quote(exchange=a, symbol=symbols[0], time=from_micros(0)))
    key_b = ts.current_row_key(Quote(exchange=b, symbol=symbols[1], time=from_micros(0)))
    assert in_ranges(plan, key_a)
    assert not in_ranges(plan, key_b)


def _outcome(encode: Any, value: Any) -> tuple[str, Any]:
    try:
        return "bytes", encode(value)
    except Exception as exc:  # noqa: BLE001 - the refusal itself is compared
        return type(exc).__name__, str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segment=st.sampled_from([StrSegment("s"), StrSegment("s", width=4),
                                StrSegment("s", width=3, align="right", pad="0")]),
       values=st.lists(st.one_of(st.text(max_size=6), st.sampled_from(["a", "a#", "", "\ud800"]),
                                 st.integers(), st.none()), max_size=8))
def test_the_str_encoder_of_the_write_path_encodes_and_refuses_as_encode(
        segment: StrSegment, values: list[Any]) -> None:
    """`StrSegment.encoder()` keeps the bytes of strings it has encoded: every value, seen
    once or again, gives `encode()`'s bytes or its refusal."""
    encoder = segment.encoder()
    for value in values + values:
        assert _outcome(encoder, value) == _outcome(segment.encode, value)
