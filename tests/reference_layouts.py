"""Key layouts of the reference that another program wrote, and the rows it prints.

Models describing tables of Google's time-series guide and patterns page as
another program would have written them (issue 11, key-level items), with
the rows exactly as the reference prints them. Shared by
``tests/unit/test_foreign_keys.py`` and ``tests/backends/test_foreign_keys.py``.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

import tsmodel as ts

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: java.lang.Long.MAX_VALUE
LONG_MAX = 9223372036854775807


def at_ms(ms: int) -> datetime:
    """The UTC instant ``ms`` milliseconds after the epoch, exactly."""
    return EPOCH + timedelta(milliseconds=ms)


# -- item 1: the guide's salted BATTERY table ------------------------------------------------


def battery_salt(time: datetime) -> int:
    """The salt of the guide's salted table, 1..3.

    The guide does not say which hash it took ("a hash of the timestamp ...
    divided by 3"); this one, SHA-256 of the epoch milliseconds' decimal text
    modulo 3 with 0 written as 3, gives the five salts it prints.
    """
    ms = (time - EPOCH) // timedelta(milliseconds=1)
    return int(hashlib.sha256(str(ms).encode()).hexdigest(), 16) % 3 or 3


@ts.model(table="BATTERY", family="METRIC")
class GuideBattery:
    kind = ts.constant("BATTERY")
    salt = ts.salt(3, on="time", using=battery_salt, first=1)
    time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
    user: str = ts.value("USER")
    percentage: int = ts.value("PERCENTAGE", codec=ts.Text(int))


#: The guide's salted table, as it prints it (``METRIC:USER: Corrie`` without its
#: stray space): row key, USER, PERCENTAGE.
GUIDE_BATTERY_ROWS = [
    (b"BATTERY#1#20150301124501003", b"Jo", b"96"),
    (b"BATTERY#1#20150301124501004", b"Sam", b"43"),
    (b"BATTERY#2#20150301124501002", b"Corrie", b"54"),
    (b"BATTERY#3#20150301124501005", b"Sam", b"38"),
    (b"BATTERY#3#20150301124501001", b"Corrie", b"98"),
]
BATTERY_T0 = datetime(2015, 3, 1, 12, 45, 1, tzinfo=UTC)


def battery_time(key: bytes) -> datetime:
    """The event time of a row of the guide's battery tables (its last 3 digits: ms)."""
    return BATTERY_T0 + timedelta(milliseconds=int(key[-3:]))
