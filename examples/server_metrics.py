"""Server metrics, the reference's worked example: METRIC and CURRENT_METRIC.

Writes a few hours of metrics for a fleet of hosts, reads one host's range,
and prints the latest values of the whole fleet from the current-value table.

Run it with no server (embedded store, in memory)::

    python examples/server_metrics.py

or against the Cloud Bigtable emulator (``tsmodel`` starts nothing here)::

    TSMODEL_URL=bigtable-emulator://127.0.0.1:8086/demo/demo python examples/server_metrics.py
"""

from __future__ import annotations

import os
import random
from datetime import datetime, timedelta, timezone

import tsmodel as ts


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
class ServerMetric:
    """One set of metrics from one machine at one time.

    Row key ``HOSTNAME#TS`` (e.g. ``server1.aaa.bbb.com#1426535612045``);
    the current-value table's key is ``HOSTNAME``.
    """

    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu1_usr: float = ts.value("CPU/CPU1_USR")
    cpu1_nice: float = ts.value("CPU/CPU1_NICE")
    blk_read: int = ts.value("IO/BLK_READ")
    blk_wrtn: int = ts.value("IO/BLK_WRTN")


HOSTS = [f"server{i}.aaa.bbb.com" for i in range(1, 9)]
START = datetime(2015, 3, 16, 19, 0, tzinfo=timezone.utc)
INTERVAL = timedelta(seconds=5)
HOURS = 3


def generate(rng: random.Random) -> list[ServerMetric]:
    """Metrics every 5 seconds for every host, for a few hours."""
    events = []
    steps = int(timedelta(hours=HOURS) / INTERVAL)
    for host in HOSTS:
        read = wrtn = 0
        for step in range(steps):
            read += rng.randrange(0, 5000)
            wrtn += rng.randrange(0, 8000)
            events.append(ServerMetric(
                hostname=host, time=START + step * INTERVAL,
                cpu1_usr=round(rng.random(), 2), cpu1_nice=round(rng.random() / 10, 2),
                blk_read=read, blk_wrtn=wrtn,
            ))
    rng.shuffle(events)  # arrival order is not event order
    return events


def main() -> None:
    db = ts.connect(os.environ.get("TSMODEL_URL"))
    db.create_tables(ServerMetric)

    events = generate(random.Random(2015))
    result = db.save_all(events)
    print(f"saved {len(events)} events for {len(HOSTS)} hosts: {result.summary()}")
    print("row key of the first event:", ts.row_key(events[0]).decode())

    host = "server1.aaa.bbb.com"
    start, end = START + timedelta(hours=1), START + timedelta(hours=1, minutes=1)
    query = ServerMetric.range(start, end, hostname=host)
    print(f"\nread plan for {host}, {start:%H:%M} to {end:%H:%M}:")
    print(query.explain())
    rows = list(query)
    print(f"\n{len(rows)} events; the first three:")
    for m in rows[:3]:
        print(f"  {m.time:%H:%M:%S}  cpu1_usr={m.cpu1_usr:.2f}  blk_read={m.blk_read}")

    print("\nlatest metrics of the fleet (CURRENT_METRIC, one scan):")
    print(f"  {'hostname':<22} {'time':<8} {'cpu1_usr':>8} {'blk_read':>10} {'blk_wrtn':>10}")
    for m in ServerMetric.current():
        print(f"  {m.hostname:<22} {m.time:%H:%M:%S} {m.cpu1_usr:>8.2f} "
              f"{m.blk_read:>10} {m.blk_wrtn:>10}")
    db.close()


if __name__ == "__main__":
    main()
