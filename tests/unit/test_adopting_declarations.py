"""Declarations for tables tsmodel did not create (issue 11, column-level items).

What each declaration accepts, what it refuses when the class is defined,
and the read plans it compiles to; the rows themselves are checked on both
backends in ``tests/backends/test_adopting_columns.py``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

import tsmodel as ts

UTC = timezone.utc
T0 = datetime.fromtimestamp(1426535612.045, UTC)


def refused(*words: str) -> pytest.RaisesContext[ts.DeclarationError]:
    return pytest.raises(ts.DeclarationError, match="(?s)" + ".*".join(map(re.escape, words)))


# -- 8: cell timestamps that are not event times ---------------------------------------


def test_event_time_cells_false_drops_the_cell_timestamp_filter() -> None:
    @ts.model(table="METRIC", family="METRIC", event_time_cells=False)
    class Metric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()

    plan = Metric.range(T0, T0 + timedelta(minutes=1), hostname="h").explain()
    (request,) = plan.requests
    assert (request.filter.timestamp_start, request.filter.timestamp_end) == (None, None)
    assert request.rows.ranges[0].start == b"h#1426535612045"
    assert any("time" in check for check in plan.client_filters)
    scan = Metric.range(T0, T0 + timedelta(minutes=1), allow_scan=True).limit(3).explain()
    assert scan.requests[0].limit is None  # the client checks times: no row limit on the server


def test_event_time_cells_false_keeps_the_max_age_filter() -> None:
    @ts.model(table="METRIC", family="METRIC", event_time_cells=False,
              retention=timedelta(days=3650 * 3))
    class Metric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()

    request = Metric.range(T0, T0 + timedelta(minutes=1), hostname="h").explain().requests[0]
    assert request.filter.timestamp_start is not None and request.filter.timestamp_end is None


@pytest.mark.parametrize("layout", [ts.cells(), ts.columns()], ids=["cells", "columns"])
def test_event_time_cells_false_refused_where_cells_hold_the_time(layout: ts.Layout) -> None:
    with refused("event_time_cells=False", "reads each event's time from its cell timestamp"):
        @ts.model(table="T", family="f", layout=layout, max_versions=10,
                  event_time_cells=False)
        class Balloon:
            balloon: str = ts.key()
            time: datetime = ts.timestamp(bucket="day")
            pressure: int = ts.value(codec=ts.Text(int))


def test_event_time_cells_false_refuses_a_current_table() -> None:
    with refused("current='CUR'", "Drop current="):
        @ts.model(table="T", family="f", current="CUR", event_time_cells=False)
        class Metric:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            cpu: float = ts.value()


def test_event_time_cells_must_be_a_bool() -> None:
    with refused("event_time_cells='no'", "True or False"):
        @ts.model(table="T", family="f", event_time_cells="no")  # type: ignore[arg-type]
        class Metric:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            cpu: float = ts.value()


# -- 3 and 5: key fields also stored as columns ----------------------------------------


def cells_of(model: type, entity: object) -> list[tuple[bytes, int, bytes]]:
    from tsmodel.plan.events import encode_event

    event = encode_event(ts.spec_of(model), entity)
    return sorted((m.qualifier, m.timestamp, m.value) for m in event.mutations)


def test_key_columns_are_written_from_the_key() -> None:
    @ts.model(table="QUOTE", family="MD")
    class Quote:
        exchange: str = ts.key(width=6, column="EXCHANGE")
        symbol: str = ts.key(width=5, column="SYMBOL")
        time: datetime = ts.timestamp(unit="ms", reverse=True, column="QUOTETIME")
        bid: float = ts.value("BID", codec=ts.Text(float))

    t = datetime.fromtimestamp(1426535612.156, UTC)
    assert ts.row_key(Quote(exchange="NYSE", symbol="ZX", time=t, bid=1.5)) == \
        b"NYSE  #ZX   #8573464387843"
    assert cells_of(Quote, Quote(exchange="NYSE", symbol="ZX", time=t, bid=1.5)) == [
        (b"BID", 1426535612156000, b"1.5"), (b"EXCHANGE", 1426535612156000, b"NYSE"),
        (b"QUOTETIME", 1426535612156000, b"1426535612156"),  # the time, never reversed
        (b"SYMBOL", 1426535612156000, b"ZX")]


def test_a_key_column_in_a_bucket_row_is_one_cell_at_the_bucket_start() -> None:
    @ts.model(table="SENSOR", family="METER", layout=ts.offsets(timedelta(minutes=15)))
    class Meter:
        meter: int = ts.key(width=10, column="ID", column_codec=ts.Int64())
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value()

    day = datetime(2017, 7, 26, tzinfo=UTC)
    at_noon = cells_of(Meter, Meter(meter=987654, time=day + timedelta(hours=12), kwh=1.0))
    assert at_noon[1] == (b"ID", int(day.timestamp()) * 10**6, (987654).to_bytes(8, "big"))


def test_a_format_timestamp_column_holds_the_formatted_time() -> None:
    @ts.model(table="GAME", family="GAME")
    class Game:
        game: str = ts.key()
        player: str = ts.key(column="PLAYER")
        time: datetime = ts.timestamp(format="%Y%m%d", column="DAY")
        win: bool = ts.value("WIN")

    march = datetime(2015, 3, 1, tzinfo=UTC)
    assert cells_of(Game, Game(game="LoL", player="Corrie", time=march, win=False))[0] == (
        b"DAY", int(march.timestamp()) * 10**6, b"20150301")


@pytest.mark.parametrize(("key", "words"), [
    (ts.key(width=10, column="0000"), ("METER:0000", "shaped like the offset columns")),
    (ts.key(width=10, column="kwh"), ("METER:kwh", "value field 'kwh'")),
    (ts.key(width=10, column=""), ("column=''", "non-empty")),
    (ts.key(width=10, column=7), ("column=7", "a str")),
    (ts.key(width=10, column="ID", column_codec=ts.Utf8()), ("does not take int",)),
    (ts.key(width=10, column="ID", column_codec=ts.Int64), ("column_codec=ts.Int64()",)),
])
def test_key_columns_refused(key: object, words: tuple[str, ...]) -> None:
    with refused(*words):
        @ts.model(table="SENSOR", family="METER", layout=ts.offsets(timedelta(minutes=15)))
        class Meter:
            meter: int = key
            time: datetime = ts.timestamp(bucket="day")
            kwh: float = ts.value()


def test_a_key_column_beside_new_columns_needs_another_family() -> None:
    with refused("m:BALLOON", "every qualifier of family 'm'"):
        @ts.model(table="T", family="m", layout=ts.columns(), max_rate=1 / 60)
        class Balloon:
            balloon: str = ts.key(column="BALLOON")
            time: datetime = ts.timestamp(bucket="day")
            pressure: int = ts.value(codec=ts.Text(int))

    @ts.model(table="T", family="m", layout=ts.columns(), max_rate=1 / 60)
    class Separate:
        balloon: str = ts.key(column="BALLOON")
        time: datetime = ts.timestamp(bucket="day")
        pressure: int = ts.value(codec=ts.Text(int), family="p")

    assert ts.spec_of(Separate).families == ("m", "p")


def test_a_bucket_timestamp_has_no_column() -> None:
    with refused("column='TIME'", "a bucket row holds the events of a whole bucket"):
        @ts.model(table="T", family="f", layout=ts.cells(), max_rate=1)
        class Balloon:
            balloon: str = ts.key()
            time: datetime = ts.timestamp(bucket="hour", column="TIME")
            pressure: int = ts.value()


def test_a_key_column_beside_a_serialized_event_needs_its_own_qualifier() -> None:
    with refused("data:blob", "serialized event"):
        @ts.model(table="T", family="data", serialization=ts.Protobuf())
        class Balloon:
            balloon: str = ts.key(column="blob")
            time: datetime = ts.timestamp()
            pressure: int = ts.value()


# -- 6: the short-and-wide month row -----------------------------------------------------


def garden_model(qualifier: str | None = "%-d", label: str = "%Y%m%d") -> type:
    @ts.model(table="GARDEN", family="TEMP",
              layout=ts.offsets(timedelta(days=1), qualifier=qualifier))
    class Garden:
        garden: str = ts.key()
        time: datetime = ts.timestamp(bucket="month", label=label)
        temp: float = ts.value(codec=ts.Text(float))

    return Garden


MARCH = datetime(2015, 3, 1, tzinfo=UTC)


def test_month_row_labelled_by_its_first_day_with_day_of_month_qualifiers() -> None:
    Garden = garden_model()
    first = Garden(garden="VEGGIEGARDEN", time=MARCH, temp=60.4)
    last = Garden(garden="VEGGIEGARDEN", time=MARCH + timedelta(days=30), temp=60.4)
    assert ts.row_key(first) == ts.row_key(last) == b"VEGGIEGARDEN#20150301"
    assert [q for q, _, _ in cells_of(Garden, first)] == [b"1"]
    assert [q for q, _, _ in cells_of(Garden, last)] == [b"31"]
    assert ts.decode_row_key(Garden, b"VEGGIEGARDEN#20150301")["time"] == MARCH
    with pytest.raises(ts.KeyDecodingError, match="first day of a month"):
        ts.decode_row_key(Garden, b"VEGGIEGARDEN#20150302")
    # 1 ... 31 do not sort in time order (10 before 2): no qualifier range, cells decide.
    request = Garden.range(MARCH + timedelta(days=1), MARCH + timedelta(days=3),
                           garden="VEGGIEGARDEN").explain().requests[0]
    assert request.filter.qualifier_start is None
    assert request.filter.timestamp_start == int((MARCH + timedelta(days=1)).timestamp()) * 10**6
    assert "named '%-d'" in ts.spec_of(Garden).layout.describe()


def test_zero_padded_day_qualifiers_keep_the_qualifier_range() -> None:
    Garden = garden_model("%d")
    assert cells_of(Garden, Garden(garden="G", time=MARCH + timedelta(days=8), temp=1.0))[0][0] \
        == b"09"
    request = Garden.range(MARCH + timedelta(days=1), MARCH + timedelta(days=3),
                           garden="G").explain().requests[0]
    assert (request.filter.qualifier_start, request.filter.qualifier_end) == (b"02", b"03\x00")
    assert garden_model(None, "%Y%m")(garden="G", time=MARCH, temp=1.0)  # default: 010000


@pytest.mark.parametrize(("bucket", "step", "qualifier", "words"), [
    ("month", timedelta(days=1), "%H", ("add %d",)),
    ("month", timedelta(days=1), "%u", ("add %d",)),
    ("month", timedelta(days=1), "%d%u", ("%u names no day of a month bucket", "use %d")),
    ("month", timedelta(hours=1), "%-d%H", ("ambiguous",)),
    ("month", timedelta(days=1), "%x", ("'%x' is no directive",)),
    ("month", timedelta(days=1), "T1%d", ("digits of 'T1'",)),
    ("month", timedelta(days=1), "%d-%d", ("%d appears twice",)),
    ("month", timedelta(days=1), "", ("empty format",)),
    ("day", timedelta(minutes=15), "%H", ("add %M",)),
    ("day", timedelta(minutes=15), "%-d %H%M", ("%d names no day of a day bucket",)),
    ("week", timedelta(hours=1), "%H", ("add %u",)),
    (timedelta(days=2), timedelta(hours=1), "%H", ("a bucket of a day",)),
])
def test_offset_qualifier_formats_refused(bucket: object, step: timedelta, qualifier: str,
                                          words: tuple[str, ...]) -> None:
    with refused(*words):
        @ts.model(table="T", family="f", layout=ts.offsets(step, qualifier=qualifier))
        class Reading:
            host: str = ts.key()
            time: datetime = ts.timestamp(bucket=bucket)
            v: float = ts.value()


@pytest.mark.parametrize(("label", "words"), [
    ("%Y%d%m", ("does not sort",)), ("%m%Y", ("does not sort",)), ("%Y%m%H", ("does not sort",))])
def test_month_labels_refused(label: str, words: tuple[str, ...]) -> None:
    with refused(*words):
        garden_model("%-d", label)


def test_a_key_column_shaped_like_a_day_of_the_month_is_refused() -> None:
    with refused("TEMP:7", "shaped like the offset columns"):
        @ts.model(table="GARDEN", family="TEMP",
                  layout=ts.offsets(timedelta(days=1), qualifier="%-d"))
        class Garden:
            garden: str = ts.key(column="7")
            time: datetime = ts.timestamp(bucket="month", label="%Y%m%d")
            temp: float = ts.value(codec=ts.Text(float))


# -- 4: amendment history as column versions ---------------------------------------------


def close_body(**extra: object) -> dict[str, object]:
    return {"symbol": ts.key(), "time": ts.timestamp(format="%Y%m%d"),
            "price": ts.value("PRICE", codec=ts.Text(float)), "entered": ts.version(), **extra}


def declare(body: dict[str, object], annotations: dict[str, object], **options: object) -> type:
    ns = dict(body, __annotations__=annotations, __module__=__name__)
    return ts.model(**{"table": "CLOSE", "family": "STOCK", **options})(type("Close", (), ns))


CLOSE_TYPES = {"symbol": str, "time": datetime, "price": float, "entered": datetime}


def test_a_version_field_stamps_every_cell_and_reads_filter_by_key() -> None:
    Close = declare(close_body(), CLOSE_TYPES)
    entered = datetime(2015, 3, 2, 9, 30, tzinfo=UTC)
    close = Close(symbol="ZXZZT", time=datetime(2015, 3, 1, tzinfo=UTC), price=558.4,
                  entered=entered)
    assert cells_of(Close, close) == [(b"PRICE", int(entered.timestamp()) * 10**6, b"558.4")]
    spec = ts.spec_of(Close)
    assert (spec.version_field, spec.event_time_cells, spec.max_versions) == ("entered", False,
                                                                              None)
    qs = Close.range(close.time, close.time + timedelta(days=1), symbol="ZXZZT")
    assert qs.explain().requests[0].filter.timestamp_start is None
    assert qs.explain().requests[0].filter.cells_per_column == 1
    assert qs.history().explain().requests[0].filter.cells_per_column is None
    assert qs.history().explain().history and "history" in repr(qs.history())
    kept = declare(close_body(), CLOSE_TYPES, max_versions=5)
    assert ts.table_specs(ts.spec_of(kept))[0].families[0][1].max_versions == 5
    assert kept.range(close.time, close.time + timedelta(days=1), symbol="ZXZZT").history() \
        .explain().requests[0].filter.cells_per_column == 5


@pytest.mark.parametrize(("entered", "error", "words"), [
    (datetime(2015, 3, 2, 9, 30, 0, 500, tzinfo=UTC), ts.ValidationError, "whole milliseconds"),
    (datetime(1969, 12, 31, tzinfo=UTC), ts.ValidationError, "from 1970 on"),
    (datetime(2015, 3, 2), ts.ValidationError, "naive"),
    ("2015-03-02", ts.FieldTypeError, "datetime"),
])
def test_bad_version_times_are_refused_before_writing(entered: object, error: type,
                                                      words: str) -> None:
    from tsmodel.plan.events import encode_event

    Close = declare(close_body(), CLOSE_TYPES)
    close = Close(symbol="ZXZZT", time=datetime(2015, 3, 1, tzinfo=UTC), price=1.0,
                  entered=entered)
    with pytest.raises(error, match=words) as info:
        encode_event(ts.spec_of(Close), close)
    assert (info.value.model, info.value.field, info.value.value) == ("Close", "entered", entered)


@pytest.mark.parametrize(("extra", "options", "words"), [
    ({}, {"layout": ts.cells(), "max_versions": 10}, ("needs a row per event",)),
    ({"note": ts.value(default=None)}, {}, ("optional value 'note'", "Make it required")),
    ({}, {"current": "CURRENT"}, ("with current=",)),
    ({}, {"alternates": [ts.alternate("BY_DAY", "time", "symbol")], "allow_hotspot": True},
     ("with alternates=",)),
    ({}, {"snapshot": ts.snapshot("CLOSE_{period:%Y%m}", period="month")}, ("with snapshot=",)),
    ({}, {"retention": timedelta(days=30)}, ("retention=", "max_versions=")),
    ({"again": ts.version()}, {}, ("two version fields",)),
])
def test_amendment_history_refusals(extra: dict[str, object], options: dict[str, object],
                                    words: tuple[str, ...]) -> None:
    body = close_body(**extra)
    types = {**CLOSE_TYPES, "note": str | None, "again": datetime}
    if options.get("layout") is not None:
        body["time"] = ts.timestamp(bucket="day")
    with refused(*words):
        declare(body, {k: v for k, v in types.items() if k in body}, **options)


def test_a_version_field_is_a_datetime() -> None:
    with refused("entered", "annotated 'datetime'"):
        declare(close_body(), {**CLOSE_TYPES, "entered": int})


def test_history_needs_a_version_field() -> None:
    @ts.model(table="CLOSE", family="STOCK")
    class Close:
        symbol: str = ts.key()
        time: datetime = ts.timestamp(format="%Y%m%d")
        price: float = ts.value()

    with pytest.raises(ts.QueryError, match="ts.version()"):
        Close.range(T0, T0 + timedelta(days=1), symbol="ZXZZT").history()


def test_a_promoted_value_takes_no_key_column() -> None:
    with refused("ts.key(column=...)", "alternate key of 'BY_SCORE'"):
        @ts.model(table="GAME", family="g",
                  alternates=[ts.alternate("BY_SCORE", "game",
                                           ("score", ts.key(width=6, column="S")), "time")])
        class Game:
            game: str = ts.key()
            time: datetime = ts.timestamp()
            score: int = ts.value()
