"""Intelligent energy meters: a row per meter and day, a column per 15-minute offset.

The schema guide's IoT example: row key ``METER#DATE`` (``0000987654#20170726``:
the meter id left-padded to 10 digits, an 8-digit date), and 96 columns
``0000`` ... ``2345`` holding the reading of each quarter hour. A nightly job
copies one day of every meter into its own table, ``SENSOR_20170726``, for
"all data for a given day" queries. Run it with no server::

    python examples/energy_meters.py
"""

from __future__ import annotations

import os
import random
from datetime import datetime, timedelta, timezone

import tsmodel as ts


@ts.model(table="SENSOR", family="METER", current="CURRENT_SENSOR",
          layout=ts.offsets(timedelta(minutes=15)),
          snapshot=ts.snapshot("SENSOR_{period:%Y%m%d}", period="day"))
class MeterReading:
    """One quarter-hour reading of one meter."""

    meter: int = ts.key(width=10)
    time: datetime = ts.timestamp(bucket="day")
    kwh: float = ts.value()


DAY = datetime(2017, 7, 26, tzinfo=timezone.utc)
METERS = [987654, 123456, 555000, *range(1000, 1197)]  # 200 meters


def main() -> None:
    db = ts.connect(os.environ.get("TSMODEL_URL"))
    db.create_tables(MeterReading)
    rng = random.Random(987654)
    readings = [MeterReading(meter=m, time=DAY + timedelta(minutes=15 * i),
                             kwh=round(10 + rng.random() * 20, 2))
                for m in METERS for i in range(96 * 2)]  # two days
    result = db.save_all(readings)
    print(f"saved {len(readings)} readings of {len(METERS)} meters ({result.summary()})")
    print("row key:", ts.row_key(readings[0]).decode())

    one_day = MeterReading.range(DAY, DAY + timedelta(days=1), meter=987654)
    print("\none meter, one day:")
    print(one_day.explain())
    day = list(one_day)
    print(f"{len(day)} readings: {day[0].time:%H:%M} {day[0].kwh} kWh ... "
          f"{day[-1].time:%H:%M} {day[-1].kwh} kWh")

    start, end = DAY + timedelta(hours=23), DAY + timedelta(days=1, hours=1)
    across = MeterReading.range(start, end, meter=987654)
    print("\nacross midnight:")
    print(across.explain())
    for r in across:
        print(f"  {r.time:%Y-%m-%d %H:%M}  {r.kwh:6.2f} kWh")

    print("\nlatest reading of three meters (CURRENT_SENSOR):")
    for r in MeterReading.current().limit(3):
        print(f"  {r.meter:>10}  {r.time:%Y-%m-%d %H:%M}  {r.kwh:6.2f} kWh")

    print("\nnightly snapshot job for 2017-07-26:")
    report = ts.build_snapshot(MeterReading, DAY, batch_size=2000)
    print(" ", report)
    print(" ", ts.build_snapshot(MeterReading, DAY))
    day_rows = MeterReading.snapshot(DAY)
    print(day_rows.explain())
    total = sum(r.kwh for r in day_rows)
    print(f"all meters on {DAY:%Y-%m-%d}: {day_rows.count()} readings, {total:,.1f} kWh")
    db.close()


if __name__ == "__main__":
    main()
