"""Key layouts of the reference that another program wrote, and the rows it prints.

Models describing tables of Google's time-series guide and patterns page as
another program would have written them (issue 11, key-level items), with
the rows exactly as the reference prints them. Each model comes from a
factory taking the table name, so the backend suite can give every test its
own table; the module-level models use the reference's names. Shared by
``tests/unit/test_adopted_keys.py`` and ``tests/backends/test_adopted_tables.py``.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import tsmodel as ts

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: java.lang.Long.MAX_VALUE
LONG_MAX = 9223372036854775807

#: A row as another program writes it: (row key, family, qualifier, cell timestamp, value).
Cell = tuple[bytes, str, bytes, datetime, bytes]


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


def guide_battery(table: str = "BATTERY") -> Any:
    @ts.model(table=table, family="METRIC")
    class GuideBattery:
        kind = ts.constant("BATTERY")
        salt = ts.salt(3, on="time", using=battery_salt, first=1)
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        user: str = ts.value("USER")
        percentage: int = ts.value("PERCENTAGE", codec=ts.Text(int))

    return GuideBattery


GuideBattery = guide_battery()
BATTERY_T0 = datetime(2015, 3, 1, 12, 45, 1, tzinfo=UTC)


def battery_time(key: bytes) -> datetime:
    """The event time of a row of the guide's battery tables (its last 3 digits: ms)."""
    return BATTERY_T0 + timedelta(milliseconds=int(key[-3:]))


#: The guide's salted table, as it prints it (``METRIC:USER: Corrie`` without its
#: stray space): row key, USER, PERCENTAGE.
GUIDE_BATTERY_ROWS = [
    (b"BATTERY#1#20150301124501003", b"Jo", b"96"),
    (b"BATTERY#1#20150301124501004", b"Sam", b"43"),
    (b"BATTERY#2#20150301124501002", b"Corrie", b"54"),
    (b"BATTERY#3#20150301124501005", b"Sam", b"38"),
    (b"BATTERY#3#20150301124501001", b"Corrie", b"98"),
]
GUIDE_BATTERY_CELLS: list[Cell] = [
    cell for key, user, percentage in GUIDE_BATTERY_ROWS
    for cell in ((key, "METRIC", b"USER", battery_time(key), user),
                 (key, "METRIC", b"PERCENTAGE", battery_time(key), percentage))]


# -- item 2: Long.MAX_VALUE - t --------------------------------------------------------------


def java_metric(table: str = "METRIC") -> Any:
    @ts.model(table=table, family="METRIC")
    class JavaMetric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms", reverse_from=2**63 - 1, digits=19)
        cpu1_usr: float = ts.value("CPU/CPU1_USR", codec=ts.Text(float, places=2))

    return JavaMetric


JavaMetric = java_metric()
#: The guide's METRIC row time, and the key a Java program reversing it writes.
METRIC_MS = 1426535612045
JAVA_METRIC_KEY = b"server1.aaa.bbb.com#9223370610319163762"


def java_metric_cells(hostname: bytes, ms_values: list[int]) -> list[Cell]:
    """The rows a Java program writes: ``HOSTNAME#(Long.MAX_VALUE - ms)``."""
    return [(hostname + b"#" + str(LONG_MAX - ms).encode(), "METRIC", b"CPU/CPU1_USR",
             at_ms(ms), b"0.%02d" % (i + 2)) for i, ms in enumerate(ms_values)]


# -- item 7: the patterns page's week1 bucket labels -----------------------------------------

#: The start of the patterns page's ``week1``: the Monday of its 2021-03-05 reports.
WEEK1 = datetime(2021, 3, 1, tzinfo=UTC)
#: t2021-03-05-1200, the first report of the patterns page's weather balloon.
BALLOON_T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)
_MINUTE = timedelta(minutes=1)


def week_cells(table: str = "BALLOON_CELLS") -> Any:
    """New cells for new events: ``asia-south2#3698#week1``, a column per measurement."""

    @ts.model(table=table, family="measurements", layout=ts.cells(), max_rate=1 / 60)
    class WeekCells:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(bucket="week", label="week{n}", origin=WEEK1,
                                      unsorted_labels=True)
        pressure: int = ts.value("pressure", codec=ts.Text(int))
        temp: float = ts.value("temp", codec=ts.Text(float))

    return WeekCells


def week_columns(table: str = "BALLOON_COLUMNS") -> Any:
    """New columns for new events: ``us-west2#3698#pressure#week1``, the value the qualifier."""

    @ts.model(table=table, family="measurements", layout=ts.columns(), max_rate=1 / 60)
    class WeekColumns:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        metric: str = ts.key()
        time: datetime = ts.timestamp(bucket="week", label="week{n}", origin=WEEK1,
                                      unsorted_labels=True)
        value: int = ts.value(codec=ts.Text(int))

    return WeekColumns


WeekCells = week_cells()
WeekColumns = week_columns()

#: The patterns page's week1 rows after three minutes.
GUIDE_WEEK_CELLS: list[Cell] = [
    (b"asia-south2#3698#week1", "measurements", q, BALLOON_T0 + i * _MINUTE, v)
    for q, values in ((b"pressure", (b"94558", b"94122", b"95992")),
                      (b"temp", (b"9.5", b"9.4", b"9.2")))
    for i, v in enumerate(values)]
GUIDE_WEEK_COLUMNS: list[Cell] = [
    (b"us-west2#3698#pressure#week1", "measurements", q, BALLOON_T0 + i * _MINUTE, b"")
    for i, q in enumerate((b"94558", b"94122", b"95992"))]


# -- item 9: decimal text with fixed places --------------------------------------------------


def fixed_quote(table: str = "QUOTE") -> Any:
    @ts.model(table=table, family="MD")
    class FixedQuote:
        exchange: str = ts.key(width=6)
        symbol: str = ts.key(width=5)
        time: datetime = ts.timestamp(unit="ms")
        bid: float = ts.value("BID", codec=ts.Text(float, places=2))
        ask: Decimal = ts.value("ASK", codec=ts.Text(Decimal, places=2))
        bid_size: int = ts.value("BIDSIZE", codec=ts.Text(int))
        ask_size: int = ts.value("ASKSIZE", codec=ts.Text(int))

    return FixedQuote


def meter_day(table: str = "SENSOR") -> Any:
    @ts.model(table=table, family="METER", layout=ts.offsets(timedelta(minutes=15)))
    class MeterDay:
        meter: int = ts.key(width=10)
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value(codec=ts.Text(float, places=2))

    return MeterDay


FixedQuote = fixed_quote()
MeterDay = meter_day()
QUOTE_T = at_ms(1426535612156)
#: The guide's QUOTE row: the cells tsmodel owns, then those of item 3 (key fields
#: also stored as columns), which it leaves alone.
GUIDE_QUOTE_CELLS: list[Cell] = [
    (b"NASDAQ#ZXZZT#1426535612156", "MD", q, QUOTE_T, v)
    for q, v in ((b"BID", b"600.55"), (b"ASK", b"600.60"), (b"BIDSIZE", b"500"),
                 (b"ASKSIZE", b"1500"), (b"SYMBOL", b"ZXZZT"),
                 (b"QUOTETIME", b"1426535612156"), (b"EXCHANGE", b"NASDAQ"))]
METER_DAY = datetime(2017, 7, 26, tzinfo=UTC)
#: The guide's SENSOR row (its last cell as iteration 2 prints it, 28.90), with the
#: row-level METER:ID column beside the offsets.
GUIDE_METER_CELLS: list[Cell] = [
    (b"0000987654#20170726", "METER", q, METER_DAY + offset, v)
    for q, offset, v in (
        (b"0000", timedelta(0), b"12.34"),
        (b"0015", timedelta(minutes=15), b"13.45"),
        (b"2330", timedelta(hours=23, minutes=30), b"27.89"),
        (b"2345", timedelta(hours=23, minutes=45), b"28.90"),
        (b"ID", timedelta(0), b"987654"))]
