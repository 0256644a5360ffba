"""Row keys of tables that tsmodel did not create (issue 11, key-level items).

Each layout here is one the reference prints or describes but tsmodel could
not declare before: the guide's ``Long.MAX_VALUE - t`` reversal (item 2),
its salted ``BATTERY#1#...`` table under its own hash (item 1), and the
patterns page's ``week1`` bucket labels (item 7). The expected keys are the
reference's, or computed by the reference's recipe, never taken from what
tsmodel returned. Reads and writes on both backends are in
``tests/backends/test_foreign_keys.py``.
"""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings

import tsmodel as ts
from tests import strategies as tst

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PROPS = settings(max_examples=200, deadline=None)
#: java.lang.Long.MAX_VALUE
LONG_MAX = 9223372036854775807


def at_ms(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


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
