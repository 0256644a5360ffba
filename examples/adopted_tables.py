"""Tables another program wrote, described with models and read through tsmodel.

Four layouts of Google's time-series guide that tsmodel does not choose for
new tables but reads and writes exactly when a table already uses them:

* the guide's salted battery table, ``BATTERY#1#20150301124501003``, salted
  by the writer's own function with salts 1 to 3;
* keys reversed as Java's ``Long.MAX_VALUE - t`` (19 digits);
* the patterns page's ``week1``, ``week2`` ... bucket labels, which do not
  sort in time order;
* decimal text with fixed places, the energy meter's ``28.90``.

The rows are written here as the other program would, cell by cell through
the backend, then read with the models. See docs/adopting.md. Run it with
no server::

    python examples/adopted_tables.py
"""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timedelta, timezone

import tsmodel as ts
from tsmodel.ground.base import GcRule, RowMutation, SetCell, TableSpec

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def battery_salt(time: datetime) -> int:
    """The writer's salt: SHA-256 of the epoch milliseconds' text, mod 3, 0 written as 3.

    The guide does not say which hash it used; this one gives the salts it prints.
    """
    ms = (time - EPOCH) // MS
    return int(hashlib.sha256(str(ms).encode()).hexdigest(), 16) % 3 or 3


@ts.model(table="BATTERY", family="METRIC")
class Battery:
    """The guide's salted table: BATTERY#<salt 1..3>#<yyyyMMddHHmmssSSS>."""

    kind = ts.constant("BATTERY")
    salt = ts.salt(3, on="time", using=battery_salt, first=1)
    time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
    user: str = ts.value("USER")
    percentage: int = ts.value("PERCENTAGE", codec=ts.Text(int))


@ts.model(table="METRIC", family="METRIC")
class Metric:
    """Server metrics a Java program keys HOSTNAME#(Long.MAX_VALUE - epoch ms)."""

    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms", reverse_from=2**63 - 1, digits=19)
    cpu1_usr: float = ts.value("CPU/CPU1_USR", codec=ts.Text(float, places=2))


WEEK1 = datetime(2021, 3, 1, tzinfo=UTC)  # the Monday the balloon's week1 starts


@ts.model(table="BALLOON", family="measurements", layout=ts.cells(), max_rate=1 / 60)
class Balloon:
    """The patterns page's bucket rows, LOCATION#BALLOON#week<n>, n counted from WEEK1."""

    location: str = ts.key()
    balloon: int = ts.key(width=4)
    time: datetime = ts.timestamp(bucket="week", label="week{n}", origin=WEEK1,
                                  unsorted_labels=True)
    pressure: int = ts.value("pressure", codec=ts.Text(int))


@ts.model(table="SENSOR", family="METER", layout=ts.offsets(timedelta(minutes=15)))
class Meter:
    """The guide's energy meters, readings written with two decimal places."""

    meter: int = ts.key(width=10)
    time: datetime = ts.timestamp(bucket="day")
    kwh: float = ts.value(codec=ts.Text(float, places=2))


BATTERY_T0 = datetime(2015, 3, 1, 12, 45, 1, tzinfo=UTC)
BALLOON_T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)
METER_DAY = datetime(2017, 7, 26, tzinfo=UTC)

#: What the other programs wrote: table -> [(row key, family, qualifier, time, value)].
THEIR_ROWS = {
    "BATTERY": [
        (key, "METRIC", q, BATTERY_T0 + int(key[-3:]) * MS, v)
        for key, user, pct in ((b"BATTERY#1#20150301124501003", b"Jo", b"96"),
                               (b"BATTERY#1#20150301124501004", b"Sam", b"43"),
                               (b"BATTERY#2#20150301124501002", b"Corrie", b"54"),
                               (b"BATTERY#3#20150301124501005", b"Sam", b"38"),
                               (b"BATTERY#3#20150301124501001", b"Corrie", b"98"))
        for q, v in ((b"USER", user), (b"PERCENTAGE", pct))],
    "METRIC": [
        (b"server1.aaa.bbb.com#%d" % (2**63 - 1 - ms), "METRIC", b"CPU/CPU1_USR",
         EPOCH + ms * MS, value)
        for ms, value in ((1426535612045, b"0.02"), (1426535617045, b"0.07"))],
    "BALLOON": [
        (b"asia-south2#3698#week%d" % week, "measurements", b"pressure", when, value)
        for week, when, value in ((1, BALLOON_T0, b"94558"),
                                  (1, BALLOON_T0 + timedelta(minutes=1), b"94122"),
                                  (1, BALLOON_T0 + timedelta(minutes=2), b"95992"),
                                  (10, WEEK1 + timedelta(weeks=9), b"96021"))],
    "SENSOR": [
        (b"0000987654#20170726", "METER", q, METER_DAY + timedelta(minutes=m), v)
        for q, m, v in ((b"0000", 0, b"12.34"), (b"0015", 15, b"13.45"),
                        (b"2330", 1410, b"27.89"), (b"2345", 1425, b"28.90"))],
}


def write_as_another_program(db: ts.Connection) -> None:
    """Create the tables and write their rows cell by cell, without tsmodel's models."""
    for table, cells in THEIR_ROWS.items():
        family = cells[0][1]
        db.backend.create_table(TableSpec(table, ((family, GcRule()),)))
        rows: dict[bytes, list[SetCell]] = {}
        for key, fam, qualifier, when, value in cells:
            rows.setdefault(key, []).append(
                SetCell(fam, qualifier, (when - EPOCH) // timedelta(microseconds=1), value))
        db.backend.mutate_rows(table, [RowMutation(k, tuple(c)) for k, c in rows.items()])


def main() -> None:
    db = ts.connect(os.environ.get("TSMODEL_URL"))
    write_as_another_program(db)

    print("the guide's salted battery table, all five events in time order:")
    for b in Battery.range(BATTERY_T0, BATTERY_T0 + timedelta(seconds=1)):
        print(f"  {ts.row_key(b).decode()}  {b.user:<6} {b.percentage}%")

    print("\nLong.MAX_VALUE - t keys, newest first:")
    span = (datetime(2015, 3, 16, 19, 53, tzinfo=UTC), datetime(2015, 3, 16, 19, 54, tzinfo=UTC))
    for m in Metric.range(*span, hostname="server1.aaa.bbb.com"):
        print(f"  {ts.row_key(m).decode()}  {m.time:%H:%M:%S.%f}  {m.cpu1_usr:.2f}")

    print("\nweek1 ... week10, one read per week:")
    weeks = Balloon.range(WEEK1, WEEK1 + timedelta(weeks=10), location="asia-south2",
                          balloon=3698)
    print(weeks.explain().reason)
    for b in weeks:
        print(f"  {ts.row_key(b).decode():<24} {b.time:%Y-%m-%d %H:%M}  {b.pressure} Pa")

    print("\nreadings with two places, read and written back byte for byte:")
    day = list(Meter.range(METER_DAY, METER_DAY + timedelta(days=1), meter=987654))
    print("  " + ", ".join(f"{r.time:%H%M}: {r.kwh}" for r in day))
    print("  " + ", ".join(ts.Text(float, places=2).encode(r.kwh).decode() for r in day))


if __name__ == "__main__":
    main()
