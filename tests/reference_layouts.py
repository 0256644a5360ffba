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


# -- item 7: the patterns page's week1 bucket labels -----------------------------------------

#: The start of the patterns page's ``week1``: the Monday of its 2021-03-05 reports.
WEEK1 = datetime(2021, 3, 1, tzinfo=UTC)
#: t2021-03-05-1200, the first report of the patterns page's weather balloon.
BALLOON_T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)


@ts.model(table="BALLOON_CELLS", family="measurements", layout=ts.cells(), max_rate=1 / 60)
class WeekCells:
    """New cells for new events: ``asia-south2#3698#week1``, a column per measurement."""

    location: str = ts.key()
    balloon: int = ts.key(width=4)
    time: datetime = ts.timestamp(bucket="week", label="week{n}", origin=WEEK1,
                                  unsorted_labels=True)
    pressure: int = ts.value("pressure", codec=ts.Text(int))
    temp: float = ts.value("temp", codec=ts.Text(float))


@ts.model(table="BALLOON_COLUMNS", family="measurements", layout=ts.columns(),
          max_rate=1 / 60)
class WeekColumns:
    """New columns for new events: ``us-west2#3698#pressure#week1``, the value the qualifier."""

    location: str = ts.key()
    balloon: int = ts.key(width=4)
    metric: str = ts.key()
    time: datetime = ts.timestamp(bucket="week", label="week{n}", origin=WEEK1,
                                  unsorted_labels=True)
    value: int = ts.value(codec=ts.Text(int))


#: The patterns page's two week1 rows: (row key, qualifier, cell timestamp, value).
GUIDE_WEEK_CELLS = [
    (b"asia-south2#3698#week1", b"pressure", BALLOON_T0, b"94558"),
    (b"asia-south2#3698#week1", b"pressure", BALLOON_T0 + timedelta(minutes=1), b"94122"),
    (b"asia-south2#3698#week1", b"pressure", BALLOON_T0 + timedelta(minutes=2), b"95992"),
    (b"asia-south2#3698#week1", b"temp", BALLOON_T0, b"9.5"),
    (b"asia-south2#3698#week1", b"temp", BALLOON_T0 + timedelta(minutes=1), b"9.4"),
    (b"asia-south2#3698#week1", b"temp", BALLOON_T0 + timedelta(minutes=2), b"9.2"),
]
GUIDE_WEEK_COLUMNS = [
    (b"us-west2#3698#pressure#week1", b"94558", BALLOON_T0, b""),
    (b"us-west2#3698#pressure#week1", b"94122", BALLOON_T0 + timedelta(minutes=1), b""),
    (b"us-west2#3698#pressure#week1", b"95992", BALLOON_T0 + timedelta(minutes=2), b""),
]
