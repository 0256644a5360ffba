"""Decoding row keys one after the other: what a key decoded before leaves known.

`KeyLayout.decode()` keeps the segments before the last of the key it decoded
last (the entity of a run of rows) and decodes only the last segment of a key
that starts with the same bytes. These tests decode sequences of keys, good
and damaged, through one layout and compare each answer with values worked
out here by hand, and with the answer of a layout that has decoded nothing
before.
"""

import struct
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tsmodel.backends.base import Cell, Row
from tsmodel.encoding.keys import (
    IntSegment,
    KeyLayout,
    SaltSegment,
    SegmentValueError,
    StrSegment,
    TimestampSegment,
)
from tsmodel.encoding.timestamps import EpochEncoding

MS = 1_000
T1 = 1426535612045  # ms
T2 = 1426535617045


def host_layout() -> KeyLayout:
    """``hostname#13-digit ms``, the ServerMetric key."""
    return KeyLayout((StrSegment("hostname"), TimestampSegment("time", EpochEncoding())))


def quote_layout() -> KeyLayout:
    """``exchange(6)#symbol(5)#13-digit ms``: fixed-width segments before the time."""
    return KeyLayout((StrSegment("exchange", width=6), StrSegment("symbol", width=5),
                      TimestampSegment("time", EpochEncoding())))


def host(name: str, ms: int) -> dict[str, object]:
    return {"hostname": name, "time": ms * MS}


def test_two_hosts_interleaved_decode_each_to_its_own_fields():
    layout = host_layout()
    keys = [b"web1#1426535612045", b"db2#1426535617045", b"web1#1426535617045",
            b"web1#1426535612045", b"db2#1426535612045"]
    expected = [host("web1", T1), host("db2", T2), host("web1", T2), host("web1", T1),
                host("db2", T1)]
    assert [layout.decode(k) for k in keys] == expected


def test_a_host_whose_name_starts_another_hosts_name_is_not_taken_for_it():
    layout = host_layout()
    keys = [b"web1#1426535612045", b"web10#1426535612045", b"web1#1426535617045",
            b"web#1426535617045", b"web10#1426535617045"]
    expected = [host("web1", T1), host("web10", T1), host("web1", T2), host("web", T2),
                host("web10", T2)]
    assert [layout.decode(k) for k in keys] == expected


def test_a_damaged_key_after_a_good_one_of_the_same_host_is_refused_as_alone():
    layout = host_layout()
    assert layout.decode(b"web1#1426535612045") == host("web1", T1)
    damaged = {
        b"web1#14265356120x5": "expected 13 digits, got b'14265356120x5'",
        b"web1#142653561204": "does not end with a 13-byte segment",
        b"web1#14265356120450": "does not end with a 13-byte segment",
        b"web1#": "does not end with a 13-byte segment",
        b"web1##426535612045": "expected 13 digits, got b'#426535612045'",
    }
    for key, words in damaged.items():
        with pytest.raises(SegmentValueError, match=words) as raised:
            layout.decode(key)
        assert str(raised.value) == _message_of(host_layout(), key)
        # The good key's host is still known, and still right.
        assert layout.decode(b"web1#1426535617045") == host("web1", T2)


def test_a_damaged_host_after_a_good_key_is_refused():
    layout = host_layout()
    assert layout.decode(b"web1#1426535612045") == host("web1", T1)
    with pytest.raises(SegmentValueError, match="not valid UTF-8"):
        layout.decode(b"web1\xff#1426535612045")
    with pytest.raises(SegmentValueError, match="missing a separator after offset 0"):
        layout.decode(b"web11426535612045")
    with pytest.raises(SegmentValueError, match="empty variable-width segment"):
        layout.decode(b"#1426535612045")
    assert layout.decode(b"web1#1426535617045") == host("web1", T2)


def test_fixed_width_segments_before_the_time():
    layout = quote_layout()
    keys = [b"NASDAQ#ZXZZT#1426535612045", b"NASDAQ#ZXZZT#1426535617045",
            b"NASDAQ#ZXZ  #1426535617045", b"NYSE  #ZXZZT#1426535612045"]
    expected = [
        {"exchange": "NASDAQ", "symbol": "ZXZZT", "time": T1 * MS},
        {"exchange": "NASDAQ", "symbol": "ZXZZT", "time": T2 * MS},
        {"exchange": "NASDAQ", "symbol": "ZXZ", "time": T2 * MS},
        {"exchange": "NYSE", "symbol": "ZXZZT", "time": T1 * MS},
    ]
    assert [layout.decode(k) for k in keys] == expected
    with pytest.raises(SegmentValueError, match="has no separator at offset 12"):
        layout.decode(b"NASDAQ#ZXZZTT1426535612045")


def test_a_key_of_one_segment_and_a_salted_key():
    current = KeyLayout((StrSegment("hostname"),))
    assert [current.decode(k) for k in (b"web1", b"web10", b"web1")] == [
        {"hostname": "web1"}, {"hostname": "web10"}, {"hostname": "web1"}]
    with pytest.raises(SegmentValueError, match="empty variable-width segment"):
        current.decode(b"")
    salted = KeyLayout((SaltSegment(4, ("user",)), IntSegment("user", 3),
                        TimestampSegment("time", EpochEncoding())))
    assert salted.decode(b"2#042#1426535612045") == {"__salt__": 2, "user": 42,
                                                    "time": T1 * MS}
    assert salted.decode(b"2#042#1426535617045") == {"__salt__": 2, "user": 42,
                                                    "time": T2 * MS}
    assert salted.decode(b"3#042#1426535617045") == {"__salt__": 3, "user": 42,
                                                    "time": T2 * MS}
    with pytest.raises(SegmentValueError, match="expected a salt 0..3, got b'7'"):
        salted.decode(b"7#042#1426535617045")


def _message_of(layout: KeyLayout, key: bytes) -> str:
    """The error of a layout that has decoded nothing before."""
    with pytest.raises(SegmentValueError) as raised:
        layout.decode(key)
    return str(raised.value)


def _alone(key: bytes) -> object:
    """What a layout that has decoded nothing before answers for ``key``."""
    try:
        return host_layout().decode(key)
    except SegmentValueError as exc:
        return ("error", str(exc))


_PARTS = st.sampled_from([b"web1", b"web10", b"web", b"db2", b"", b"web1\xff", b"w#b"])
_TIMES = st.sampled_from([b"1426535612045", b"1426535617045", b"142653561204", b"14265356120x5",
                          b"", b"14265356120450", b"9999999999999"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_PARTS, _TIMES), min_size=1, max_size=12))
def test_keys_decode_as_they_would_alone(pairs):
    layout = host_layout()
    for name, time in pairs:
        key = name + b"#" + time
        try:
            got: object = layout.decode(key)
        except SegmentValueError as exc:
            got = ("error", str(exc))
        assert got == _alone(key)


@ts.model(table="METRIC", family="METRIC")
class Metric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value("CPU")


def _row(key: bytes, ms: int, cpu: float) -> Row:
    return Row(key, (Cell("METRIC", b"CPU", ms * MS, struct.pack(">d", cpu)),))


def test_records_of_rows_of_two_hosts_and_a_damaged_row():
    codec = ts.spec_of(Metric).codec
    rows = [_row(b"web1#1426535612045", T1, 0.5), _row(b"web10#1426535612045", T1, 0.25),
            _row(b"web1#1426535617045", T2, 0.75)]
    assert [codec.records(r) for r in rows] == [
        [{"cpu": 0.5, "hostname": "web1", "time": T1 * MS}],
        [{"cpu": 0.25, "hostname": "web10", "time": T1 * MS}],
        [{"cpu": 0.75, "hostname": "web1", "time": T2 * MS}]]
    with pytest.raises(ts.KeyDecodingError) as raised:
        codec.records(_row(b"web1#14265356120x5", T2, 0.75))
    assert str(raised.value) == ("Metric: row key b'web1#14265356120x5' of table 'METRIC': "
                                 "expected 13 digits, got b'14265356120x5'")
    assert codec.decode(Metric, rows[2]) == [Metric(
        hostname="web1", time=datetime.fromtimestamp(T2 / 1000, tz=timezone.utc), cpu=0.75)]


def test_reversed_times_decode_and_times_out_of_range_are_refused():
    newest_first = TimestampSegment("time", EpochEncoding("ms", 13, reverse=True))
    assert newest_first.decode(b"%013d" % (10**13 - 1 - T1)) == T1 * MS
    java = TimestampSegment("time", EpochEncoding("ms", 19, True, 2**63 - 1))
    assert java.decode(b"9223370610319163762") == (2**63 - 1 - 9223370610319163762) * MS
    last_ms = 253402300799999  # 9999-12-31T23:59:59.999
    for data, n in ((b"0000000000000000000", 2**63 - 1),
                    (b"9999999999999999999", 2**63 - 1 - 9999999999999999999)):
        with pytest.raises(SegmentValueError) as raised:
            java.decode(data)
        assert str(raised.value) == (
            f"{data!r} is no time of 19-digit epoch ms reversed from 9223372036854775807: it "
            f"stands for {n} ms since the epoch, outside 0 .. {last_ms}")
    seconds = TimestampSegment("time", EpochEncoding("s", 10))
    assert seconds.decode(b"1426535612") == 1426535612 * 1_000_000
    with pytest.raises(SegmentValueError, match=r"^expected 10 digits, got b'142653561'$"):
        seconds.decode(b"142653561")
