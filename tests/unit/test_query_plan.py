"""Read plans of queries, inspected with ``explain()``: nothing is read.

The plan says which table, which row ranges (one per salt value), which
server-side filters, which client-side checks and which limit a query uses.
"""

from datetime import datetime, timedelta, timezone

import attrs
import pytest

import tsmodel as ts
import tsmodel.run.connection as connection_module
from tsmodel.backends.base import ReadFilter, RowRange, RowSet

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def at_ms(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


T1 = at_ms(1426535612000)
T2 = at_ms(1426535613000)


@pytest.fixture(autouse=True)
def default_connection():
    """Queries that run need a default connection: make it in-memory."""
    previous = connection_module._default
    conn = ts.connect("memory://", default=False)
    ts.set_default_connection(conn)
    try:
        yield conn
    finally:
        ts.set_default_connection(previous)
        conn.close()


@attrs.frozen
class FakeConnection:
    """Just the feature flags a plan depends on; it has no backend to read."""

    features: ts.Features


def with_reverse_scan(flag: bool) -> FakeConnection:
    return FakeConnection(ts.Features(reverse_scan=flag))


# -- models -----------------------------------------------------------------------------


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
class ServerMetric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu1_usr: float = ts.value("CPU/CPU1_USR")
    blk_read: int = ts.value("IO/BLK_READ")
    mem: float | None = ts.value("MEM/USED", family="MEM", default=None)


@ts.model(table="QUOTE", family="MD", current="CURRENT_QUOTE")
class Quote:
    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    time: datetime = ts.timestamp(unit="ms")
    bid: float = ts.value("BID")


@ts.model(table="TRADE", family="MD")
class Trade:
    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    time: datetime = ts.timestamp(unit="ms")
    last_sale: float = ts.value("LASTSALE")


@ts.model(table="BATTERY", family="METRIC")
class SaltedBattery:
    kind = ts.constant("BATTERY")
    bucket = ts.salt(3, on="time")
    time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
    user: str = ts.value("USER")


@ts.model(table="RMETRIC", family="METRIC")
class ReversedMetric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(reverse=True)
    cpu: float = ts.value()


@ts.model(table="UMETRIC", family="METRIC")
class MicroMetric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="us")
    cpu: float = ts.value()


@ts.model(table="GARDEN", family="DAILY", allow_hotspot=True)
class Garden:
    place = ts.constant("VEGGIEGARDEN")
    day: datetime = ts.timestamp(format="%Y%m%d")
    temp: float = ts.value("TEMP")


@ts.model(table="WEATHER", family="data", serialization=ts.Protobuf(qualifier="blob"))
class Balloon:
    location: str = ts.key()
    balloon_id: int = ts.key(width=4)
    time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
    pressure: int = ts.value()


def host_range(**kwargs) -> ts.QuerySet:
    return ServerMetric.range(T1, T2, hostname="server1.aaa.bbb.com", **kwargs)


def only_request(plan: ts.ReadPlan):
    assert len(plan.requests) == 1, plan
    return plan.requests[0]


# -- full key ---------------------------------------------------------------------------


def test_full_key_range_is_exactly_prefix_plus_encoded_bounds():
    plan = host_range().explain()
    assert isinstance(plan, ts.ReadPlan)
    assert plan.model == "ServerMetric" and plan.table == "METRIC"
    req = only_request(plan)
    assert req.table == "METRIC"
    assert req.rows.keys == ()
    assert req.rows.ranges == (RowRange(b"server1.aaa.bbb.com#1426535612000",
                                        b"server1.aaa.bbb.com#1426535613000"),)
    # The key range selects the times: no cell timestamp filter, so a row whose
    # cells do not carry its event time is read (and refused), never left out.
    assert req.filter == ReadFilter(families=("MEM", "METRIC"), cells_per_column=1)
    assert req.limit is None and req.reverse is False
    assert plan.scan is False and plan.merge == "concat" and plan.client_filters == ()
    assert "time range in the row key" in plan.reason


def test_full_key_range_of_fixed_width_fields_is_padded():
    plan = Quote.range(T1, T2, exchange="NYSE", symbol="IBM").explain()
    assert only_request(plan).rows.ranges == (
        RowRange(b"NYSE  #IBM  #1426535612000", b"NYSE  #IBM  #1426535613000"),)


def test_sub_unit_bounds_round_up_to_the_next_unit():
    start = T1 + timedelta(microseconds=1)
    end = T2 + timedelta(microseconds=1)  # an event at T2 is before end: it is included
    req = only_request(ServerMetric.range(start, end, hostname="h").explain())
    assert req.rows.ranges == (RowRange(b"h#1426535612001", b"h#1426535613001"),)
    assert (req.filter.timestamp_start, req.filter.timestamp_end) == (None, None)


def test_bounds_in_another_zone_are_the_same_instants():
    zone = timezone(timedelta(hours=-7))
    plan = ServerMetric.range(T1.astimezone(zone), T2.astimezone(zone),
                              hostname="server1.aaa.bbb.com").explain()
    assert plan == host_range().explain()


def test_end_past_the_encodable_range_is_clamped():
    req = only_request(ServerMetric.range(T1, datetime(2300, 1, 1, tzinfo=UTC),
                                          hostname="h").explain())
    assert req.rows.ranges == (RowRange(b"h#1426535612000", b"h#9999999999999\x00"),)


def test_start_before_the_epoch_is_clamped():
    req = only_request(ServerMetric.range(datetime(1960, 1, 1, tzinfo=UTC), T1,
                                          hostname="h").explain())
    assert req.rows.ranges == (RowRange(b"h#0000000000000", b"h#1426535612000"),)


def test_a_scan_filters_by_cell_timestamp() -> None:
    """Without the time in the key range, the cell timestamps select the events."""
    req = only_request(ServerMetric.range(datetime(1960, 1, 1, tzinfo=UTC), T1 + timedelta(
        microseconds=1), allow_scan=True).explain())
    assert req.rows.ranges == (RowRange(),) or req.rows == RowSet()
    assert (req.filter.timestamp_start, req.filter.timestamp_end) == (0, 1426535612001000)


def test_reversed_timestamps_swap_the_bounds():
    req = only_request(ReversedMetric.range(T1, T2, hostname="h").explain())
    newest = str(10**13 - 1 - 1426535612999).encode()  # last ms before T2
    oldest = str(10**13 - 1 - 1426535612000).encode()  # T1
    assert req.rows.ranges == (RowRange(b"h#" + newest, b"h#" + oldest + b"\x00"),)


def test_microsecond_keys_keep_a_client_time_check():
    # cells carry millisecond timestamps, so the cell filter alone is coarser than the key
    plan = MicroMetric.range(T1, T2, hostname="h").explain()
    assert only_request(plan).rows.ranges == (RowRange(b"h#1426535612000000",
                                                       b"h#1426535613000000"),)
    assert plan.client_filters == ("1426535612000000 <= time (us) < 1426535613000000",)


def test_timestamp_only_key_reads_one_range():
    plan = Garden.range(datetime(2015, 3, 1, tzinfo=UTC), datetime(2015, 3, 5, tzinfo=UTC)
                        ).explain()
    assert only_request(plan).rows.ranges == (RowRange(b"VEGGIEGARDEN#20150301",
                                                       b"VEGGIEGARDEN#20150305"),)
    assert plan.scan is False


def test_calendar_bounds_round_up_to_whole_days():
    plan = Garden.range(datetime(2015, 3, 1, 6, tzinfo=UTC), datetime(2015, 3, 5, 6, tzinfo=UTC)
                        ).explain()
    assert only_request(plan).rows.ranges == (RowRange(b"VEGGIEGARDEN#20150302",
                                                       b"VEGGIEGARDEN#20150306"),)


# -- salts ----------------------------------------------------------------------------


def test_salted_model_reads_one_range_per_salt_merged_by_time():
    plan = SaltedBattery.range(datetime(2015, 3, 1, tzinfo=UTC),
                               datetime(2015, 3, 2, tzinfo=UTC)).explain()
    assert len(plan.requests) == 3
    assert plan.merge == "time"
    assert [r.rows.ranges for r in plan.requests] == [
        (RowRange(b"BATTERY#%d#20150301000000000" % s, b"BATTERY#%d#20150302000000000" % s),)
        for s in range(3)
    ]
    assert "3 salt values" in plan.reason
    assert "merge: time (3 reads)" in str(plan)


def test_salted_limit_is_pushed_into_every_salt_read():
    plan = SaltedBattery.range(datetime(2015, 3, 1, tzinfo=UTC),
                               datetime(2015, 3, 2, tzinfo=UTC)).limit(7).explain()
    assert [r.limit for r in plan.requests] == [7, 7, 7]


# -- key prefixes and scans --------------------------------------------------------------


def test_key_prefix_reads_the_prefix_with_a_cell_time_filter():
    plan = Quote.range(T1, T2, exchange="NYSE").explain()
    req = only_request(plan)
    assert req.rows.ranges == (RowRange(b"NYSE  #", b"NYSE  $"),)
    assert req.filter.timestamp_start == 1426535612000000
    assert req.filter.timestamp_end == 1426535613000000
    # Cell timestamps are the event times in whole ms: the filter is exact.
    assert plan.client_filters == ()
    assert plan.scan is False
    assert "key prefix from exchange" in plan.reason
    assert "cell timestamp filter" in plan.reason


def test_key_prefix_pushes_the_limit():
    # rows outside the time range have no cell left after the exact timestamp filter, so
    # they are not returned and do not count toward the server-side limit
    assert only_request(Quote.range(T1, T2, exchange="NYSE").limit(5).explain()).limit == 5


def test_non_prefix_query_is_refused_when_built():
    with pytest.raises(ts.ScanRefusedError) as info:
        Quote.range(T1, T2, symbol="IBM")
    msg = str(info.value)
    assert "full table scan" in msg
    assert "allow_scan=True" in msg
    assert "symbol" in msg and "<exchange>#<symbol>#<time>" in msg
    assert isinstance(info.value, ts.QueryError) and isinstance(info.value, ValueError)


def test_query_without_key_fields_is_refused():
    with pytest.raises(ts.ScanRefusedError, match="no key field narrows"):
        ServerMetric.range(T1, T2)


def test_allow_scan_returns_a_scan_plan_with_a_client_filter():
    plan = Quote.range(T1, T2, symbol="IBM", allow_scan=True).explain()
    req = only_request(plan)
    assert plan.scan is True
    assert req.rows.is_whole_table()
    assert "symbol == 'IBM'" in plan.client_filters
    assert plan.client_filters == ("symbol == 'IBM'",)  # time: exact server filter
    assert req.filter.timestamp_start == 1426535612000000
    assert "(SCAN)" in str(plan)
    assert req.limit is None


def test_allow_scan_after_a_prefix_scans_the_prefix():
    plan = Quote.range(T1, T2, allow_scan=True, exchange="NYSE", symbol="IBM").explain()
    assert plan.scan is False  # both given: a full key, no scan
    plan = ServerMetric.range(T1, T2, allow_scan=True).explain()
    assert plan.scan is True and only_request(plan).rows.is_whole_table()


# -- columns, limits, order -------------------------------------------------------------


def test_only_puts_a_columns_filter_in():
    req = only_request(host_range().only("cpu1_usr").explain())
    assert req.filter.columns == (("METRIC", b"CPU/CPU1_USR"),)
    req = only_request(host_range().only("cpu1_usr", "mem").explain())
    assert req.filter.columns == (("METRIC", b"CPU/CPU1_USR"), ("MEM", b"MEM/USED"))
    assert "columns=METRIC:CPU/CPU1_USR,MEM:MEM/USED" in str(host_range().only(
        "cpu1_usr", "mem").explain())


def test_only_refuses_unknown_and_key_fields():
    with pytest.raises(ts.QueryError, match="not value fields"):
        host_range().only("hostname")
    with pytest.raises(ts.QueryError, match="'nope'"):
        host_range().only("nope")


def test_only_on_a_serialized_model_reads_the_whole_blob():
    qs = Balloon.range(datetime(2021, 3, 5, 12, tzinfo=UTC), datetime(2021, 3, 5, 13, tzinfo=UTC),
                       location="us-west2", balloon_id=3698).only("pressure")
    req = only_request(qs.explain())
    assert req.filter.columns is None
    assert req.rows.ranges == (RowRange(b"us-west2#3698#2021-03-05-1200",
                                        b"us-west2#3698#2021-03-05-1300"),)


def test_limit_is_pushed_into_a_single_request():
    req = only_request(host_range().limit(10).explain())
    assert req.limit == 10
    assert "limit: 10 rows" in str(host_range().limit(10).explain())


def test_newest_first_uses_a_reverse_scan_when_the_backend_has_one():
    req = only_request(host_range().newest_first().limit(3).using(with_reverse_scan(True))
                       .explain())
    assert req.reverse is True and req.limit == 3


def test_newest_first_without_reverse_scan_reads_forward_without_limit():
    req = only_request(host_range().newest_first().limit(3).using(with_reverse_scan(False))
                       .explain())
    assert req.reverse is False and req.limit is None


def test_newest_first_on_reversed_keys_is_the_natural_order():
    qs = ReversedMetric.range(T1, T2, hostname="h").newest_first().limit(3)
    req = only_request(qs.using(with_reverse_scan(True)).explain())
    assert req.reverse is False and req.limit == 3


# -- the current-value table --------------------------------------------------------------


def test_current_reads_the_whole_current_table():
    plan = ServerMetric.current().explain()
    req = only_request(plan)
    assert plan.table == req.table == "CURRENT_METRIC"
    assert req.rows.is_whole_table()
    assert req.filter.timestamp_start is None and req.filter.timestamp_end is None
    assert req.filter.cells_per_column == 1
    assert plan.scan is False and plan.client_filters == ()
    assert "whole table" in str(plan)


def test_current_of_every_key_field_reads_exactly_one_row():
    req = only_request(ServerMetric.current(hostname="server1").explain())
    assert req.rows.ranges == (RowRange(b"server1", b"server1\x00"),)
    (r,) = req.rows.ranges
    assert r.contains(b"server1")
    assert not r.contains(b"server10") and not r.contains(b"server")


def test_current_of_fixed_width_key_reads_the_padded_row():
    req = only_request(Quote.current(exchange="NYSE", symbol="IBM").explain())
    assert req.rows.ranges == (RowRange(b"NYSE  #IBM  ", b"NYSE  #IBM  \x00"),)


def test_current_of_a_prefix_reads_the_prefix():
    req = only_request(Quote.current(exchange="NYSE").explain())
    assert req.rows.ranges == (RowRange(b"NYSE  #", b"NYSE  $"),)


def test_current_limit_is_pushed():
    assert only_request(ServerMetric.current().limit(4).explain()).limit == 4


def test_current_of_a_non_prefix_needs_allow_scan():
    with pytest.raises(ts.ScanRefusedError, match="allow_scan=True"):
        Quote.current(symbol="IBM")
    plan = Quote.current(symbol="IBM", allow_scan=True).explain()
    assert plan.scan is True and plan.client_filters == ("symbol == 'IBM'",)


def test_current_scan_with_a_client_filter_does_not_push_the_limit():
    plan = Quote.current(symbol="IBM", allow_scan=True).limit(2).explain()
    assert plan.client_filters
    assert only_request(plan).limit is None


def test_current_needs_a_current_table():
    with pytest.raises(ts.QueryError, match="current='TABLE'"):
        Trade.current()


def test_current_refuses_unknown_fields():
    with pytest.raises(ts.QueryError, match="'time' is not a key field"):
        ServerMetric.current(time=T1)


def test_latest_needs_every_key_field_before_reading():
    with pytest.raises(ts.QueryError, match="missing: symbol"):
        Quote.latest(exchange="NYSE")
    with pytest.raises(ts.QueryError, match="missing: exchange, symbol"):
        Trade.latest()


# -- immutability, slicing ------------------------------------------------------------------


def test_refinements_return_new_querysets_and_leave_the_original_alone():
    qs = host_range()
    before = qs.explain()
    refined = [qs.limit(3), qs.only("cpu1_usr"), qs.newest_first(), qs[:2],
               qs.using(with_reverse_scan(True))]
    for other in refined:
        assert other is not qs
        assert isinstance(other, ts.QuerySet)
    assert qs.explain() == before
    assert only_request(qs.explain()).limit is None
    assert only_request(refined[0].explain()).limit == 3
    assert only_request(refined[3].explain()).limit == 2
    assert only_request(refined[1].explain()).filter.columns is not None


def test_limits_chain_as_replacements():
    qs = host_range().limit(3).limit(8)
    assert only_request(qs.explain()).limit == 8


@pytest.mark.parametrize("item", [slice(None, 4), slice(0, 4)])
def test_leading_slices_are_limits(item):
    assert only_request(host_range()[item].explain()).limit == 4


def test_empty_slice_is_the_same_queryset():
    qs = host_range()
    assert qs[:] is qs


@pytest.mark.parametrize("item", [slice(2, 5), slice(None, None, 2), slice(1, None), 0, 3,
                                  "a"])
def test_other_slices_and_indexes_raise_type_error(item):
    with pytest.raises(TypeError, match=r"\[:n\]"):
        host_range()[item]


def test_negative_slice_stop_raises_value_error():
    # like Django: a negative index is a ValueError ("negative")
    with pytest.raises(ValueError, match="negative"):
        host_range()[:-1]


def test_slice_of_a_slice_never_widens():
    assert only_request(host_range()[:3][:10].explain()).limit == 3


@pytest.mark.parametrize("n, error", [(-1, ValueError), (1.5, TypeError), ("3", TypeError),
                                      (True, TypeError)])
def test_bad_limits(n, error):
    with pytest.raises(error):
        host_range().limit(n)


def test_running_an_unbound_queryset_is_a_type_error(default_connection):
    unbound = ts.QuerySet(ServerMetric).limit(1)
    with pytest.raises(TypeError, match="start with ServerMetric.range"):
        unbound.explain()
    with pytest.raises(TypeError, match="start with ServerMetric.range"):
        list(unbound)


@pytest.mark.parametrize("build", [
    lambda: ts.QuerySet(ServerMetric).limit(3).range(T1, T2, hostname="server1.aaa.bbb.com"),
    lambda: host_range().limit(3).range(T1, T2, hostname="server1.aaa.bbb.com"),
    lambda: host_range().range(T1, T2, hostname="server1.aaa.bbb.com").limit(3),
])
def test_refinements_compose_in_any_order(build):
    plan = build().explain()
    assert plan.limit == 3
    assert plan == host_range().limit(3).explain()


def test_only_and_newest_first_survive_a_new_range():
    qs = host_range().only("cpu1_usr").newest_first().range(T1, T2, hostname="h2")
    plan = qs.explain()
    assert plan.only == ("cpu1_usr",) and plan.reverse_after
    assert "hostname='h2'" in repr(qs) and "newest_first" in repr(qs)


def test_explain_opens_no_connection():
    ts.set_default_connection(None)
    try:
        host_range().explain()
        import tsmodel.run.connection as connection_module
        assert connection_module._default is None
    finally:
        ts.set_default_connection(None)


def test_bool_runs_the_query(default_connection):
    default_connection.create_tables(ServerMetric)
    assert not host_range()
    default_connection.save(ServerMetric(hostname="server1.aaa.bbb.com", time=T1,
                                         cpu1_usr=0.5, blk_read=1))
    assert host_range()
    assert host_range().exists()


def test_repr_shows_the_query():
    text = repr(host_range().limit(5))
    assert text.startswith("<QuerySet ServerMetric range")
    assert "hostname='server1.aaa.bbb.com'" in text and "limit=5" in text


def test_connection_range_is_the_same_plan(default_connection):
    via_conn = default_connection.range(ServerMetric, T1, T2, hostname="server1.aaa.bbb.com")
    assert via_conn.explain() == host_range().explain()


# -- time ranges -----------------------------------------------------------------------------


def test_empty_time_range_reads_nothing():
    plan = ServerMetric.range(T1, T1, hostname="h").explain()
    assert plan.requests == ()
    assert "nothing to read" in str(plan)


def test_salted_empty_time_range_reads_nothing():
    assert SaltedBattery.range(T1, T1).explain().requests == ()


def test_time_range_inside_one_unit_reads_nothing():
    # no whole second lies in [x.1s, x.9s): the key range is empty
    @ts.model(table="S", family="F")
    class PerSecond:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="s")

    plan = PerSecond.range(T1 + timedelta(milliseconds=100), T1 + timedelta(milliseconds=900),
                           host="h").explain()
    assert plan.requests == ()


def test_time_range_before_the_epoch_reads_nothing():
    plan = ServerMetric.range(datetime(1960, 1, 1, tzinfo=UTC), datetime(1961, 1, 1, tzinfo=UTC),
                              hostname="h").explain()
    assert plan.requests == ()


def test_start_after_end_is_refused():
    with pytest.raises(ts.QueryError, match="after end"):
        ServerMetric.range(T2, T1, hostname="h")


@pytest.mark.parametrize("which", ["start", "end"])
def test_naive_datetimes_are_refused(which):
    bounds = {"start": T1, "end": T2}
    bounds[which] = datetime(2015, 3, 16, 19, 53)
    with pytest.raises(ts.ValidationError, match=f"range {which}: naive") as info:
        ServerMetric.range(bounds["start"], bounds["end"], hostname="h")
    assert info.value.model == "ServerMetric"


def test_non_datetime_bounds_are_type_errors():
    with pytest.raises(ts.FieldTypeError):
        ServerMetric.range(1426535612000, T2, hostname="h")


def test_unknown_key_field_is_refused():
    with pytest.raises(ts.QueryError, match="'host' is not a key field"):
        ServerMetric.range(T1, T2, host="h")
    with pytest.raises(ts.QueryError, match="'time' is not a key field"):
        ServerMetric.range(T1, T2, time=T1)


def test_key_value_that_cannot_be_encoded_is_refused_when_built():
    with pytest.raises(ts.KeyEncodingError) as info:
        ServerMetric.range(T1, T2, hostname="a#b")
    assert (info.value.model, info.value.field, info.value.value) == ("ServerMetric",
                                                                       "hostname", "a#b")
    with pytest.raises(ts.KeyEncodingError, match="wider"):
        Quote.range(T1, T2, exchange="NASDAQX")


def test_main_table_keeps_a_range_on_the_main_table():
    """What a repair compiles: the main table, even where an alternate key serves better."""
    from tsmodel.plan.reads import QueryState, compile_query

    @ts.model(table="GAME", family="G", alternates=[ts.alternate("GAME_BY_DAY", "game", "time",
                                                                 "player")])
    class Game:
        game: str = ts.key()
        player: str = ts.key()
        time: datetime = ts.timestamp(format="%Y%m%d")
        kda: float = ts.value()

    spec = Game.__tsmodel__
    state = QueryState(mode="range", start_us=0, end_us=86_400_000_000,
                       fields=(("game", "LoL"),), allow_scan=True)
    assert compile_query(spec, state).table == "GAME_BY_DAY"
    plan = compile_query(spec, state, main_table=True)
    assert plan.table == "GAME"
    assert [r.rows.ranges for r in plan.requests] == [(RowRange.prefix(b"LoL#"),)]
