"""Byte-exact row keys of the reference texts, and their decoding.

The row keys printed in /work/shared/reference/*.txt (Google's time-series
schema guide and patterns) are the test vectors: each model below is the one
the text describes, and ``ts.row_key`` must give exactly the printed key.
"""

import re
import zlib
from datetime import datetime, timedelta, timezone

import attrs
import pytest

import tsmodel as ts

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def at_ms(ms: int) -> datetime:
    """The UTC instant ``ms`` milliseconds after the epoch, exactly."""
    return EPOCH + timedelta(milliseconds=ms)


# -- financial market data: NASDAQ#ZXZZT#1426535612156 ---------------------------------


@ts.model(table="QUOTE", family="MD")
class Quote:
    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    time: datetime = ts.timestamp(unit="ms")
    bid: float = ts.value("BID")
    ask: float = ts.value("ASK")


@ts.model(table="TRADE", family="MD")
class Trade:
    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    time: datetime = ts.timestamp(unit="ms")
    last_sale: float = ts.value("LASTSALE")
    volume: int = ts.value("VOLUME")


def test_quote_key_is_the_reference_key():
    q = Quote(exchange="NASDAQ", symbol="ZXZZT", time=at_ms(1426535612156), bid=600.55, ask=600.60)
    assert ts.row_key(q) == b"NASDAQ#ZXZZT#1426535612156"


def test_trade_key_is_the_reference_key():
    t = Trade(exchange="NASDAQ", symbol="ZXZZT", time=at_ms(1426535612045), last_sale=600.58,
              volume=89000)
    assert ts.row_key(t) == b"NASDAQ#ZXZZT#1426535612045"


def test_short_exchange_and_symbol_are_right_padded_with_spaces():
    q = Quote(exchange="NYSE", symbol="IBM", time=at_ms(1426535612156), bid=1.0, ask=2.0)
    key = ts.row_key(q)
    assert key == b"NYSE  #IBM  #1426535612156"
    # each part sits at a predictable offset
    assert key.index(b"#") == 6
    assert key.index(b"#", 7) == 12
    assert len(key) == len(b"NASDAQ#ZXZZT#1426535612156")


def test_quote_key_decodes_to_typed_fields():
    fields = ts.decode_row_key(Quote, b"NYSE  #IBM  #1426535612156")
    assert fields == {"exchange": "NYSE", "symbol": "IBM", "time": at_ms(1426535612156)}
    assert fields["time"].tzinfo is not None
    assert fields["time"].utcoffset() == timedelta(0)


def test_decode_accepts_str_keys():
    assert ts.decode_row_key(Quote, "NASDAQ#ZXZZT#1426535612156") == {
        "exchange": "NASDAQ", "symbol": "ZXZZT", "time": at_ms(1426535612156),
    }


def test_key_of_an_instance_in_another_zone_is_the_same_instant():
    local = at_ms(1426535612156).astimezone(timezone(timedelta(hours=-4)))
    q = Quote(exchange="NASDAQ", symbol="ZXZZT", time=local, bid=1.0, ask=1.0)
    assert ts.row_key(q) == b"NASDAQ#ZXZZT#1426535612156"


# -- server metrics: server1.aaa.bbb.com#1426535612045 / CURRENT_METRIC ---------------


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
class ServerMetric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu1_usr: float = ts.value("CPU/CPU1_USR")
    blk_read: int = ts.value("IO/BLK_READ")


def _metric() -> ServerMetric:
    return ServerMetric(hostname="server1.aaa.bbb.com", time=at_ms(1426535612045),
                        cpu1_usr=0.02, blk_read=253453634)


def test_metric_key_is_the_reference_key():
    assert ts.row_key(_metric()) == b"server1.aaa.bbb.com#1426535612045"


def test_current_metric_key_is_the_hostname():
    assert ts.current_row_key(_metric()) == b"server1.aaa.bbb.com"


def test_metric_key_decodes():
    assert ts.decode_row_key(ServerMetric, b"server1.aaa.bbb.com#1426535612045") == {
        "hostname": "server1.aaa.bbb.com", "time": at_ms(1426535612045),
    }


def test_current_row_key_needs_a_current_table():
    q = Quote(exchange="NASDAQ", symbol="ZXZZT", time=at_ms(1426535612156), bid=1.0, ask=1.0)
    with pytest.raises(ts.QueryError, match="current"):
        ts.current_row_key(q)


# -- weather balloons: us-west2#3698#2021-03-05-1200 --------------------------------


@ts.model(table="WEATHER", family="data")
class Balloon:
    location: str = ts.key()
    balloon_id: int = ts.key(width=4)
    time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
    pressure: int = ts.value()
    temperature: float = ts.value()
    humidity: int = ts.value()
    altitude: int = ts.value()


@pytest.mark.parametrize("minute, pressure", [(0, 94558), (1, 94122), (2, 95992), (3, 96025)])
def test_balloon_keys_are_the_reference_keys(minute, pressure):
    b = Balloon(location="us-west2", balloon_id=3698,
                time=datetime(2021, 3, 5, 12, minute, tzinfo=UTC),
                pressure=pressure, temperature=9.6, humidity=61, altitude=612)
    assert ts.row_key(b) == f"us-west2#3698#2021-03-05-120{minute}".encode()


def test_balloon_id_is_zero_padded_to_its_width():
    b = Balloon(location="asia-south2", balloon_id=7, time=datetime(2021, 3, 5, 12, tzinfo=UTC),
                pressure=1, temperature=1.0, humidity=1, altitude=1)
    assert ts.row_key(b) == b"asia-south2#0007#2021-03-05-1200"


def test_balloon_key_decodes_to_typed_fields():
    fields = ts.decode_row_key(Balloon, b"us-west2#3698#2021-03-05-1200")
    assert fields == {"location": "us-west2", "balloon_id": 3698,
                      "time": datetime(2021, 3, 5, 12, 0, tzinfo=UTC)}
    assert type(fields["balloon_id"]) is int


# -- battery: BATTERY#Corrie#20150301124501001 ----------------------------------------


@ts.model(table="BATTERY", family="METRIC")
class Battery:
    kind = ts.constant("BATTERY")
    user: str = ts.key()
    time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
    percentage: int = ts.value("PERCENTAGE")


@pytest.mark.parametrize("user, millis, key", [
    ("Corrie", 1, b"BATTERY#Corrie#20150301124501001"),
    ("Corrie", 3, b"BATTERY#Corrie#20150301124501003"),
    ("Jo", 2, b"BATTERY#Jo#20150301124501002"),
    ("Sam", 4, b"BATTERY#Sam#20150301124501004"),
    ("Sam", 5, b"BATTERY#Sam#20150301124501005"),
])
def test_battery_keys_are_the_reference_keys(user, millis, key):
    b = Battery(user=user, time=datetime(2015, 3, 1, 12, 45, 1, millis * 1000, tzinfo=UTC),
                percentage=98)
    assert ts.row_key(b) == key


def test_battery_constant_is_not_an_attribute():
    assert "kind" not in {f.name for f in attrs.fields(Battery)}
    with pytest.raises(TypeError):
        Battery(kind="BATTERY", user="Jo", time=datetime(2015, 3, 1, tzinfo=UTC), percentage=1)


def test_battery_key_decodes_without_the_constant():
    assert ts.decode_row_key(Battery, b"BATTERY#Corrie#20150301124501001") == {
        "user": "Corrie", "time": datetime(2015, 3, 1, 12, 45, 1, 1000, tzinfo=UTC),
    }


def test_battery_key_with_another_constant_does_not_decode():
    with pytest.raises(ts.KeyDecodingError, match="BATTERY"):
        ts.decode_row_key(Battery, b"BATTERX#Corrie#20150301124501001")


# -- salted battery: BATTERY#<salt>#20150301124501003 -------------------------------


@ts.model(table="BATTERY_SALTED", family="METRIC")
class SaltedBattery:
    kind = ts.constant("BATTERY")
    bucket = ts.salt(3, on="time")
    time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
    user: str = ts.value("USER")
    percentage: int = ts.value("PERCENTAGE")


SALTED_KEY = re.compile(rb"^BATTERY#([0-2])#(\d{17})$")


@pytest.mark.parametrize("millis", [1, 2, 3, 4, 5])
def test_salted_key_has_a_stable_crc32_salt(millis):
    b = SaltedBattery(time=datetime(2015, 3, 1, 12, 45, 1, millis * 1000, tzinfo=UTC),
                      user="Corrie", percentage=98)
    key = ts.row_key(b)
    m = SALTED_KEY.match(key)
    assert m is not None, key
    encoded_time = f"2015030112450100{millis}".encode()
    assert m.group(2) == encoded_time
    salt = int(m.group(1))
    assert salt == zlib.crc32(encoded_time) % 3
    assert salt == ts.spec_of(SaltedBattery).salt.salt_of({"time": encoded_time})
    # the same event always gets the same key (no per-process hash seed)
    assert ts.row_key(b) == key


def test_salted_reference_key_pinned():
    # crc32(b"20150301124501003") % 3 == 0: pinned so that a change of hash shows.
    b = SaltedBattery(time=datetime(2015, 3, 1, 12, 45, 1, 3000, tzinfo=UTC), user="Jo",
                      percentage=96)
    assert ts.row_key(b) == b"BATTERY#0#20150301124501003"


def test_salted_key_decodes_with_its_salt():
    assert ts.decode_row_key(SaltedBattery, b"BATTERY#0#20150301124501003") == {
        "time": datetime(2015, 3, 1, 12, 45, 1, 3000, tzinfo=UTC), "__salt__": 0,
    }


def test_salt_outside_its_buckets_does_not_decode():
    with pytest.raises(ts.KeyDecodingError, match="salt"):
        ts.decode_row_key(SaltedBattery, b"BATTERY#3#20150301124501003")


def test_salts_spread_over_every_bucket():
    salts = {
        ts.row_key(SaltedBattery(time=datetime(2015, 3, 1, 12, 45, 1, ms * 1000, tzinfo=UTC),
                                 user="x", percentage=1))[8:9]
        for ms in range(30)
    }
    assert salts == {b"0", b"1", b"2"}


@ts.model(table="SALTED_KEYFIELD", family="F")
class NamedSalt:
    salt: str = ts.key()
    bucket = ts.salt(3, on="time")
    time: datetime = ts.timestamp()


def test_decode_row_key_keeps_a_key_field_named_salt():
    key = ts.row_key(NamedSalt(salt="abc", time=at_ms(1426535612045)))
    assert ts.decode_row_key(NamedSalt, key)["salt"] == "abc"


# -- energy meters: 0000987654#20170726 -------------------------------------------


@ts.model(table="SENSOR", family="METER")
class MeterDay:
    meter: int = ts.key(width=10)
    day: datetime = ts.timestamp(format="%Y%m%d")
    reading: float | None = ts.value("0000", default=None)


def test_meter_key_is_the_reference_key():
    m = MeterDay(meter=987654, day=datetime(2017, 7, 26, tzinfo=UTC), reading=12.34)
    assert ts.row_key(m) == b"0000987654#20170726"


def test_meter_key_decodes_to_an_int_and_a_day():
    assert ts.decode_row_key(MeterDay, b"0000987654#20170726") == {
        "meter": 987654, "day": datetime(2017, 7, 26, tzinfo=UTC),
    }


def test_meter_day_refuses_a_time_within_the_day():
    m = MeterDay(meter=987654, day=datetime(2017, 7, 26, 0, 15, tzinfo=UTC), reading=1.0)
    with pytest.raises(ts.ValidationError, match="days"):
        ts.row_key(m)


# -- games: LoL#Corrie#20150301 ----------------------------------------------------


@ts.model(table="GAME", family="GAME")
class Game:
    game: str = ts.key()
    player: str = ts.key()
    day: datetime = ts.timestamp(format="%Y%m%d")
    win: bool = ts.value("WIN")
    kda: float = ts.value("KDA")


@pytest.mark.parametrize("game, player, day, key", [
    ("LoL", "Corrie", 1, b"LoL#Corrie#20150301"),
    ("LoL", "Corrie", 3, b"LoL#Corrie#20150303"),
    ("LoL", "Jo", 2, b"LoL#Jo#20150302"),
    ("Starcraft", "Eriko", 3, b"Starcraft#Eriko#20150303"),
])
def test_game_keys_are_the_reference_keys(game, player, day, key):
    g = Game(game=game, player=player, day=datetime(2015, 3, day, tzinfo=UTC), win=True, kda=7.0)
    assert ts.row_key(g) == key


def test_game_keys_sort_as_the_reference_table():
    rows = [("LoL", "Corrie", 1), ("LoL", "Corrie", 3), ("LoL", "Jo", 2), ("LoL", "Sam", 2),
            ("Starcraft", "Eriko", 3)]
    keys = [ts.row_key(Game(game=g, player=p, day=datetime(2015, 3, d, tzinfo=UTC), win=True,
                            kda=1.0)) for g, p, d in rows]
    assert keys == sorted(keys)


# -- vegetable garden: VEGGIEGARDEN#20150301 (timestamp right after a constant) -----


def test_veggiegarden_key_with_allow_hotspot():
    @ts.model(table="GARDEN", family="DAILY", allow_hotspot=True)
    class Garden:
        place = ts.constant("VEGGIEGARDEN")
        day: datetime = ts.timestamp(format="%Y%m%d")
        temp: float = ts.value("TEMP")

    g = Garden(day=datetime(2015, 3, 1, tzinfo=UTC), temp=60.4)
    assert ts.row_key(g) == b"VEGGIEGARDEN#20150301"
    assert ts.decode_row_key(Garden, b"VEGGIEGARDEN#20150331") == {
        "day": datetime(2015, 3, 31, tzinfo=UTC),
    }


def test_veggiegarden_without_allow_hotspot_is_refused():
    with pytest.raises(ts.DeclarationError, match="hotspot"):
        @ts.model(table="GARDEN", family="DAILY")
        class Garden:
            place = ts.constant("VEGGIEGARDEN")
            day: datetime = ts.timestamp(format="%Y%m%d")
            temp: float = ts.value("TEMP")


def test_battery_timestamp_only_key_needs_allow_hotspot():
    with pytest.raises(ts.DeclarationError, match="allow_hotspot=True"):
        @ts.model(table="BATTERY", family="METRIC")
        class HotBattery:
            kind = ts.constant("BATTERY")
            time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)

    @ts.model(table="BATTERY", family="METRIC", allow_hotspot=True)
    class LowRateBattery:
        kind = ts.constant("BATTERY")
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        user: str = ts.value("USER")

    b = LowRateBattery(time=datetime(2015, 3, 1, 12, 45, 1, 1000, tzinfo=UTC), user="Corrie")
    assert ts.row_key(b) == b"BATTERY#20150301124501001"


# -- reversed timestamps ------------------------------------------------------------


@ts.model(table="RMETRIC", family="METRIC")
class ReversedMetric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(reverse=True)
    cpu: float = ts.value()


def test_reversed_timestamp_is_ten_to_the_thirteen_minus_one_minus_ms():
    m = ReversedMetric(hostname="server1", time=at_ms(1426535612045), cpu=0.5)
    expected = 10**13 - 1 - 1426535612045
    assert ts.row_key(m) == b"server1#" + str(expected).zfill(13).encode()
    assert ts.row_key(m) == b"server1#8573464387954"


def test_reversed_timestamp_sorts_newest_first_and_decodes():
    older = ReversedMetric(hostname="s", time=at_ms(1426535612045), cpu=0.0)
    newer = ReversedMetric(hostname="s", time=at_ms(1426535612046), cpu=0.0)
    assert ts.row_key(newer) < ts.row_key(older)
    assert ts.decode_row_key(ReversedMetric, ts.row_key(newer))["time"] == newer.time


def test_reversed_epoch_edges():
    first = ReversedMetric(hostname="s", time=EPOCH, cpu=0.0)
    assert ts.row_key(first) == b"s#9999999999999"
    last = ReversedMetric(hostname="s", time=at_ms(10**13 - 1), cpu=0.0)
    assert ts.row_key(last) == b"s#0000000000000"


# -- other epoch units -------------------------------------------------------------


@pytest.mark.parametrize("unit, digits, expected", [
    ("s", None, b"h#1426535612"),
    ("ms", None, b"h#1426535612000"),
    ("us", None, b"h#1426535612000000"),
    ("ms", 14, b"h#01426535612000"),
])
def test_epoch_units_and_digits(unit, digits, expected):
    @ts.model(table="T", family="F")
    class M:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit=unit, digits=digits)

    m = M(host="h", time=at_ms(1426535612000))
    assert ts.row_key(m) == expected
    assert ts.decode_row_key(M, expected)["time"] == at_ms(1426535612000)


# -- keys that do not match the layout ---------------------------------------------


@pytest.mark.parametrize("model, key", [
    (Quote, b"NASDAQ#ZXZZT#142653561215"),        # timestamp one digit short
    (Quote, b"NASDAQ#ZXZZT1426535612156"),        # missing separator
    (Quote, b"NASDA#ZXZZT#1426535612156"),        # fixed width wrong
    (ServerMetric, b"server1.aaa.bbb.com"),       # no timestamp
    (ServerMetric, b"server1#14265356120x5"),     # not digits
    (Balloon, b"us-west2#36a8#2021-03-05-1200"),  # int not digits
    (Balloon, b"us-west2#3698#2021-13-05-1200"),  # month 13
    (Balloon, b"us-west2#3698#2021/03/05-1200"),  # literal wrong
    (MeterDay, b"0000987654#2017072"),           # day too short
])
def test_malformed_keys_raise_key_decoding_error(model, key):
    with pytest.raises(ts.KeyDecodingError) as info:
        ts.decode_row_key(model, key)
    assert isinstance(info.value, ValueError)
    assert model.__name__ in str(info.value)


@ts.model(table="DOY", family="F")
class DayOfYear:
    host: str = ts.key()
    day: datetime = ts.timestamp(format="%Y%j")


def test_day_of_year_format_round_trips():
    d = DayOfYear(host="h", day=datetime(2016, 12, 31, tzinfo=UTC))
    assert ts.row_key(d) == b"h#2016366"
    assert ts.decode_row_key(DayOfYear, b"h#2016366")["day"] == d.day


@pytest.mark.parametrize("key", [b"h#2015400", b"h#2015000"])
def test_day_of_year_out_of_range_does_not_decode(key):
    with pytest.raises(ts.KeyDecodingError):
        ts.decode_row_key(DayOfYear, key)
