"""Row keys of tables that tsmodel did not create (issue 11, key-level items).

Each layout here is one the reference prints or describes but tsmodel could
not declare before: the guide's ``Long.MAX_VALUE - t`` reversal (item 2),
its salted ``BATTERY#1#...`` table under its own hash (item 1), and the
patterns page's ``week1`` bucket labels (item 7). The expected keys are the
reference's, or computed by the reference's recipe, never taken from what
tsmodel returned. Reads and writes on both backends are in
``tests/backends/test_adopted_tables.py``.
"""

import random
import re
import zlib
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings

import tsmodel as ts
from tests import strategies as tst
from tests.reference_layouts import (
    BALLOON_T0,
    BATTERY_T0,
    EPOCH,
    GUIDE_BATTERY_ROWS,
    LONG_MAX,
    UTC,
    WEEK1,
    GuideBattery,
    WeekCells,
    WeekColumns,
    at_ms,
    battery_salt,
    battery_time,
)
from tsmodel.plan import reads as ts_reads

PROPS = settings(max_examples=200, deadline=None)


# -- item 2: Long.MAX_VALUE - t ----------------------------------------------------------------


@ts.model(table="METRIC_REV", family="METRIC")
class JavaMetric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms", reverse_from=2**63 - 1, digits=19)
    cpu: float = ts.value("CPU/CPU1_USR")


def test_java_long_reversal_is_the_guides_recipe():
    """Item 2: only 10**digits - 1 - t could be declared."""
    m = JavaMetric(hostname="server1.aaa.bbb.com", time=at_ms(1426535612045), cpu=0.02)
    assert LONG_MAX - 1426535612045 == 9223370610319163762
    assert ts.row_key(m) == b"server1.aaa.bbb.com#9223370610319163762"
    assert ts.decode_row_key(JavaMetric, b"server1.aaa.bbb.com#9223370610319163762") == {
        "hostname": "server1.aaa.bbb.com", "time": at_ms(1426535612045)}
    assert ts.spec_of(JavaMetric).reversed_time


@PROPS
@given(pair=tst.distinct_pair(tst.epoch_datetimes("ms")))
def test_java_long_reversal_round_trips_newest_first(pair):
    a, b = sorted(pair)
    key_a = ts.row_key(JavaMetric(hostname="h", time=a, cpu=0.0))
    key_b = ts.row_key(JavaMetric(hostname="h", time=b, cpu=0.0))
    assert key_b < key_a and len(key_a) == len(key_b) == len(b"h#") + 19
    assert ts.decode_row_key(JavaMetric, key_a)["time"] == a
    assert int(key_a[2:]) == LONG_MAX - (a - EPOCH) // timedelta(milliseconds=1)


@pytest.mark.parametrize("kwargs, message", [
    ({"reverse_from": 2**63 - 1}, "declare its width as well, digits=N"),
    ({"reverse_from": 2**63 - 1, "digits": 18}, "has 19 digits, more than digits=18"),
    ({"reverse_from": 10**12, "digits": 13}, "runs out before today"),
    ({"reverse_from": 2**63 - 1, "digits": 19, "format": "%Y%m%d"}, "needs epoch digits"),
    ({"reverse_from": True, "digits": 19}, "reverse_from must be an int"),
    ({"reverse_from": "java", "digits": 19}, "reverse_from must be an int"),
    ({"reverse_from": 0, "digits": 19}, "at least 1"),
    # Widths no row key holds, and a base of more digits than Python prints: refused
    # at once (10**digits was computed first, for as long as it took).
    ({"digits": 10**9}, "digits=1000000000: a row key holds at most 4096 bytes"),
    ({"digits": 4097}, "digits=4097: a row key holds at most 4096 bytes"),
    ({"reverse_from": 10**5000, "digits": 19}, "has more than 19 digits"),
    ({"reverse_from": 10**5000, "digits": 4096}, "has more than 4096 digits"),
])
def test_foreign_reversal_must_declare_a_width_that_holds_it(kwargs, message):
    with pytest.raises(ts.DeclarationError, match=message) as info:
        @ts.model(table="T", family="f")
        class Bad:
            host: str = ts.key()
            time: datetime = ts.timestamp(**kwargs)
    assert "Bad.time" in str(info.value)


def test_a_zero_padded_foreign_reversal_is_fixed_width():
    @ts.model(table="T", family="f")
    class Padded:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="s", reverse_from=10**12, digits=15)

    key = ts.row_key(Padded(host="h", time=at_ms(1426535612000)))
    assert key == b"h#" + str(10**12 - 1426535612).zfill(15).encode()


@pytest.mark.parametrize("key, why", [
    (b"h#9999999999999999999", "outside 0 .."),       # above the base: no time gives it
    (b"h#1000000000000000000", "outside 0 .."),       # past the year 9999
    (b"h#922337061031916376", "19-byte segment"),     # 18 digits
])
def test_keys_no_time_reverses_to_are_refused(key, why):
    with pytest.raises(ts.KeyDecodingError, match=why):
        ts.decode_row_key(JavaMetric, key)


# -- item 1: another program's salt function -------------------------------------------------


def test_the_guides_salted_keys_under_its_own_salt_function():
    """Item 1: only CRC-32 mod N could be declared; the guide's salts are 1..3."""
    for key, user, percentage in GUIDE_BATTERY_ROWS:
        event = GuideBattery(time=battery_time(key), user=user.decode(),
                             percentage=int(percentage))
        assert ts.row_key(event) == key
        assert ts.decode_row_key(GuideBattery, key) == {
            "__salt__": int(key.split(b"#")[1]), "time": battery_time(key)}
    salt = ts.spec_of(GuideBattery).salt
    assert salt.describe() == "salt: battery_salt(time), 1..3, 1 digit(s)"


@PROPS
@given(when=tst.format_datetimes(1_000))
def test_salted_keys_round_trip_under_the_functions_salt(when):
    key = ts.row_key(GuideBattery(time=when, user="Jo", percentage=1))
    decoded = ts.decode_row_key(GuideBattery, key)
    assert decoded == {"__salt__": battery_salt(when), "time": when}
    utc = when.astimezone(UTC)
    assert key == b"BATTERY#%d#%s%03d" % (battery_salt(when), utc.strftime(
        "%Y%m%d%H%M%S").encode(), utc.microsecond // 1000)
    assert ts.encode_row_key(GuideBattery, decoded) == key


@pytest.mark.parametrize("key, why", [
    (b"BATTERY#0#20150301124501003", "expected a salt 1..3"),
    (b"BATTERY#4#20150301124501003", "expected a salt 1..3"),
    (b"BATTERY#2#20150301124501003", "not canonical"),  # battery_salt gives 1
])
def test_keys_under_other_salts_are_refused(key, why):
    with pytest.raises(ts.KeyDecodingError, match=why):
        ts.decode_row_key(GuideBattery, key)


def test_reads_guard_every_key_under_another_salt():
    plan = GuideBattery.range(BATTERY_T0, BATTERY_T0 + timedelta(seconds=1)).explain()
    assert [r.rows.ranges[0].start[:10] for r in plan.requests] == [
        b"BATTERY#1#", b"BATTERY#2#", b"BATTERY#3#"]
    (guard,) = plan.guards
    assert guard.limit == 1 and [(r.start, r.end) for r in guard.rows.ranges] == [
        (b"BATTERY#", b"BATTERY#1#"), (b"BATTERY#1$", b"BATTERY#2#"),
        (b"BATTERY#2$", b"BATTERY#3#"), (b"BATTERY#3$", b"BATTERY$")]


def test_crc_salts_can_start_at_one_too():
    @ts.model(table="S", family="m")
    class FromOne:
        kind = ts.constant("BATTERY")
        salt = ts.salt(3, on="time", first=1)
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)

    key = ts.row_key(FromOne(time=battery_time(b"003")))
    assert key == b"BATTERY#%d#20150301124501003" % (zlib.crc32(b"20150301124501003") % 3 + 1)
    assert ts.spec_of(FromOne).salt.describe() == "salt: crc32(time) mod 3 + 1, 1 digit(s)"


def test_a_salt_function_of_key_fields_reads_one_salt():
    def by_user(user: str) -> int:
        return zlib.crc32(user.encode()) % 16

    @ts.model(table="S", family="m")
    class PerUser:
        salt = ts.salt(16, on="user", using=by_user)
        user: str = ts.key()
        time: datetime = ts.timestamp()

    key = ts.row_key(PerUser(user="Corrie", time=at_ms(1426535612045)))
    assert key == b"%02d#Corrie#1426535612045" % by_user("Corrie")
    plan = PerUser.range(at_ms(0), at_ms(1), user="Corrie").explain()
    assert [r.rows.ranges[0].start for r in plan.requests] == [
        b"%02d#Corrie#0000000000000" % by_user("Corrie")]
    assert plan.guards == ()


def _flaky(time):
    return random.choice((1, 2, 3))


def _python_hash(time):
    return hash(time) % 3 + 1


@pytest.mark.parametrize("using, kwargs, message", [
    (_flaky, {}, "is not deterministic: it gave"),
    (_python_hash, {}, "calls Python's hash()"),
    (hash, {}, "calls Python's hash()"),
    (lambda time: 0, {}, "returned 0 for time=datetime.datetime(1970, 1, 1, 0, 0, "),
    (lambda time: True, {}, "returned True"),
    (lambda time: 1.0, {}, "returned 1.0"),
    (lambda time: 1 / 0, {}, "raised ZeroDivisionError"),
    (lambda: 1, {}, "raised TypeError"),
    ("battery_salt", {}, "using must be a function"),
    (int, {}, "using must be a function"),
    (battery_salt, {"first": -1}, "first must be an int, at least 0"),
    (battery_salt, {"first": "1"}, "first must be an int"),
])
def test_salt_functions_are_checked_when_the_class_is_defined(using, kwargs, message):
    with pytest.raises(ts.DeclarationError, match=re.escape(message)) as info:
        @ts.model(table="B", family="M")
        class Bad:
            kind = ts.constant("BATTERY")
            salt = ts.salt(3, on="time", using=using, first=kwargs.get("first", 1))
            time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
    assert "Bad.salt" in str(info.value)


def test_a_shadowed_hash_is_no_builtin_hash():
    def salted(time, hash=lambda t: 1):  # noqa: A002 - the point of the test
        return hash(time)

    @ts.model(table="B", family="M")
    class Shadowed:
        kind = ts.constant("BATTERY")
        salt = ts.salt(3, on="time", using=salted, first=1)
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)

    assert ts.row_key(Shadowed(time=BATTERY_T0)).startswith(b"BATTERY#1#")


def test_an_alternate_salt_must_hash_fields_of_its_key():
    with pytest.raises(ts.DeclarationError, match="names no field of its row key"):
        @ts.model(table="G", family="g", alternates=[
            ts.alternate("G_BY_DAY", ts.salt(4, on="player"), "game", "time")])
        class Game:
            game: str = ts.key()
            time: datetime = ts.timestamp()


def _fails_in_2030(time: datetime) -> int:
    return 7 if time.year == 2030 else battery_salt(time)


@ts.model(table="BATTERY_2030", family="METRIC")
class Battery2030:
    kind = ts.constant("BATTERY")
    salt = ts.salt(3, on="time", using=_fails_in_2030, first=1)
    time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
    percentage: int = ts.value("PERCENTAGE")


def test_a_salt_the_function_cannot_give_names_model_salt_and_value():
    db = ts.connect()
    db.create_tables(Battery2030)
    good = Battery2030(time=BATTERY_T0, percentage=98)
    bad = Battery2030(time=BATTERY_T0.replace(year=2030), percentage=54)
    with pytest.raises(ts.KeyEncodingError) as info:
        db.save_all([good, bad])
    assert (info.value.model, info.value.field, info.value.value) == ("Battery2030", "salt", 7)
    assert "returned 7 for time=datetime.datetime(2030, 3, 1, 12, 45, 1" in str(info.value)
    assert list(Battery2030.range(BATTERY_T0, BATTERY_T0 + timedelta(seconds=1)).using(db)) == []
    with pytest.raises(ts.KeyEncodingError, match="a salt of this key is an int in 1..3"):
        ts.encode_row_key(Battery2030, {"time": bad.time})


# -- item 7: week1-style bucket labels ---------------------------------------------------------


def test_the_patterns_pages_week1_keys():
    """Item 7: labels such as week1 could not be declared at all."""
    cells = WeekCells(location="asia-south2", balloon=3698, time=BALLOON_T0, pressure=94558,
                      temp=9.5)
    columns = WeekColumns(location="us-west2", balloon=3698, metric="pressure",
                          time=BALLOON_T0, value=94558)
    assert ts.row_key(cells) == b"asia-south2#3698#week1"
    assert ts.row_key(columns) == b"us-west2#3698#pressure#week1"
    assert ts.decode_row_key(WeekColumns, b"us-west2#3698#pressure#week10") == {
        "location": "us-west2", "balloon": 3698, "metric": "pressure",
        "time": WEEK1 + timedelta(weeks=9)}


def test_week_numbers_are_refused_by_default():
    with pytest.raises(ts.DeclarationError, match=r"pass unsorted_labels=True") as info:
        @ts.model(table="B", family="m", layout=ts.cells(), max_rate=1 / 60)
        class Balloon:
            location: str = ts.key()
            time: datetime = ts.timestamp(bucket="week", label="week{n}", origin=WEEK1)
    assert "week10 sorts before week9" in str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"label": "week%V"}, "label='week{n}', origin=<the start of week1>, unsorted_labels=True"),
    ({"label": "week{n}", "unsorted_labels": True}, "give origin=, the start of bucket 1"),
    ({"unsorted_labels": True}, "not for the default label"),
    ({"origin": WEEK1}, "not for the default label"),
    ({"label": "week{n}{n}", "origin": WEEK1, "unsorted_labels": True}, "must hold {n} once"),
    ({"label": "%Y{n}", "origin": WEEK1, "unsorted_labels": True}, "must hold {n} once"),
    ({"label": "w#{n}", "origin": WEEK1, "unsorted_labels": True}, "holds the separator"),
    ({"label": "week{n}", "origin": datetime(2021, 3, 1), "unsorted_labels": True},
     "origin must be a timezone-aware datetime"),
    ({"label": "week{n}", "origin": "2021-03-01", "unsorted_labels": True},
     "origin must be a timezone-aware datetime"),
    ({"label": "week{n}", "origin": WEEK1 + timedelta(microseconds=1), "unsorted_labels": True},
     "whole millisecond"),
    ({"label": "week{n}", "origin": WEEK1, "unsorted_labels": 1},
     "unsorted_labels must be True or False"),
    ({"bucket": "month", "label": "m{n}", "origin": WEEK1, "unsorted_labels": True},
     "buckets of one duration"),
    ({"bucket": None, "origin": WEEK1, "unsorted_labels": True}, "declare bucket=... too"),
])
def test_numbered_labels_are_checked_when_the_class_is_defined(kwargs, message):
    kwargs = {"bucket": "week", **kwargs}
    with pytest.raises(ts.DeclarationError, match=re.escape(message)) as info:
        @ts.model(table="B", family="m", layout=ts.cells(), max_rate=1 / 60)
        class Bad:
            location: str = ts.key()
            time: datetime = ts.timestamp(**kwargs)
    assert "Bad.time" in str(info.value)


@pytest.mark.parametrize("label", [b"week0", b"week01", b"wk1", b"week", b"week1x",
                                   b"week9999999"])
def test_labels_that_number_no_bucket_are_refused(label):
    with pytest.raises(ts.KeyDecodingError, match="week"):
        ts.decode_row_key(WeekCells, b"asia-south2#3698#" + label)


def test_a_time_before_week1_names_model_field_and_value():
    early = WeekCells(location="x", balloon=1, time=WEEK1 - timedelta(seconds=1), pressure=1,
                      temp=1.0)
    with pytest.raises(ts.KeyEncodingError, match="before the first bucket") as info:
        ts.row_key(early)
    assert (info.value.model, info.value.field, info.value.value) == (
        "WeekCells", "time", early.time)


@PROPS
@given(when=tst.aware_datetimes(1_614_556_800_000_000, 253_402_300_799_000_000, 1_000))
def test_numbered_labels_round_trip(when):
    key = ts.row_key(WeekCells(location="x", balloon=1, time=when, pressure=1, temp=1.0))
    start = ts.decode_row_key(WeekCells, key)["time"]
    assert timedelta(0) <= when - start < timedelta(weeks=1)
    assert (start - WEEK1) % timedelta(weeks=1) == timedelta(0)
    assert key == b"x#0001#week%d" % ((start - WEEK1) // timedelta(weeks=1) + 1)


def _spans(plan):
    return [(r.rows.ranges[0].start, r.rows.ranges[0].end) for r in plan.requests]


def test_a_range_reads_each_week_of_it():
    plan = WeekCells.range(WEEK1 + timedelta(weeks=8, days=6), WEEK1 + timedelta(weeks=10),
                           location="asia-south2", balloon=3698).explain()
    assert _spans(plan) == [(b"asia-south2#3698#week9", b"asia-south2#3698#week9\x00"),
                            (b"asia-south2#3698#week10", b"asia-south2#3698#week10\x00")]
    assert plan.merge == "time" and "one read per bucket" in plan.reason


def test_a_long_range_reads_every_week_and_sorts():
    span = (WEEK1, WEEK1 + timedelta(weeks=ts_reads.MAX_LABEL_READS + 1))
    plan = WeekCells.range(*span, location="asia-south2", balloon=3698).explain()
    assert _spans(plan) == [(b"asia-south2#3698#", b"asia-south2#3698$")]
    assert plan.merge == "sort" and "sorted by time" in plan.reason
    short = WeekCells.range(span[0], span[1] - timedelta(weeks=1), location="asia-south2",
                            balloon=3698).explain()
    assert len(short.requests) == ts_reads.MAX_LABEL_READS


def test_a_range_before_week1_reads_nothing():
    plan = WeekCells.range(WEEK1 - timedelta(weeks=3), WEEK1, location="x",
                           balloon=1).explain()
    assert plan.requests == ()


def test_rows_read_by_a_key_prefix_are_sorted_by_time():
    plan = WeekColumns.range(WEEK1, WEEK1 + timedelta(weeks=2), location="us-west2",
                             balloon=3698).explain()
    assert plan.merge == "sort" and "events sorted by time" in plan.reason
