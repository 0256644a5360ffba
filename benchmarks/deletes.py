"""Deleting and updating one event against ``save()`` of one, on the emulator, delayed.

    python benchmarks/deletes.py                # 10 ms RTT, 5 runs
    python benchmarks/deletes.py --rtt 2 --runs 9

A model with a current-value table and an alternate-key table that
promotes a value. Each run saves one event (the baseline: a read before
the correction, then the writes, on a connection whose main table has
taken a write), deletes an event the current row does not show,
deletes the entity's newest event (the current row then shows the previous
one), and updates one value field of an event; sync, then asyncio. The
proxy (``_delay.py``) delays every chunk by half the RTT and counts the gRPC
calls, so each line shows the latency in round trips and the calls on the
wire beside the round trips of docs/deleting.md. Times are medians of
``--runs`` runs; the ratio is to the median ``save()`` of the same run.
Nothing here runs in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import tsmodel as ts  # noqa: E402
from tsmodel.backends.bigtable import BigtableBackend  # noqa: E402
from tsmodel.backends.bigtable_async import AsyncBigtableBackend  # noqa: E402
from tsmodel.backends.emulator import Emulator, find_emulator  # noqa: E402

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
PROJECT, INSTANCE = "bench", "deletes"
#: The round trips docs/deleting.md gives for each operation. The alternate key
#: promotes a value (rack), so a save reads the event's row before writing
#: (docs/writes.md "Corrections"): 2 round trips, and an update 1 + 2.
PLANNED = {"save()": 2, "delete(), not shown": 3, "delete(), newest": 4,
           "update()": 3}


def model() -> Any:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"HOST_{suffix}", family="m", current=f"CURRENT_HOST_{suffix}",
              alternates=[ts.alternate(f"HOST_BY_RACK_{suffix}", "rack", "time", "hostname")])
    class Host:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        rack: str = ts.value()
        cpu: float = ts.value()

    return Host


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rtt", type=float, default=10.0, help="round-trip time, ms")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from _delay import delay_process

    emulator = Emulator(find_emulator(), stop_with_parent=True)
    emulator.start()
    try:
        with delay_process(emulator.host_port, args.rtt / 2000) as proxy:
            print(f"{args.rtt:g} ms RTT, median of {args.runs} runs")
            bench_sync(args, proxy)
            asyncio.run(bench_async(args, proxy))
    finally:
        emulator.stop()
    return 0


def events(Host: Any, run: int) -> list[Any]:
    return [Host(hostname=f"h{run}", time=T0 + timedelta(seconds=s), rack="r1", cpu=s / 10)
            for s in range(3)]


def sync_steps(conn: ts.Connection, Host: Any,
               run: int) -> list[tuple[str, Callable[[], Any]]]:
    older, middle, newest = events(Host, run)
    conn.save_all([older, middle, newest])
    return [
        ("save()", lambda: conn.save(older)),
        ("delete(), not shown", lambda: conn.delete(middle)),
        ("delete(), newest", lambda: conn.delete(newest)),
        ("update()", lambda: conn.update(Host, hostname=older.hostname, time=older.time,
                                         cpu=0.0)),
    ]


def bench_sync(args: argparse.Namespace, proxy: Any) -> None:
    Host = model()
    backend = BigtableBackend(PROJECT, INSTANCE, emulator_host=proxy.host_port)
    conn = ts.Connection(backend)
    conn.create_tables(Host)
    conn.save_all(events(Host, -1))  # the main table has taken a write
    times: dict[str, list[float]] = {name: [] for name in PLANNED}
    calls: dict[str, int] = {}
    for run in range(args.runs):
        for name, call in sync_steps(conn, Host, run):
            before, start = proxy.requests(), time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
            calls[name] = proxy.requests() - before
        assert conn.latest(Host, hostname=f"h{run}").cpu == 0.0
    show("sync", times, calls, args.rtt)
    backend.close()


async def async_steps(db: ts.AsyncConnection, Host: Any,
                      run: int) -> list[tuple[str, Callable[[], Awaitable[Any]]]]:
    older, middle, newest = events(Host, run)
    await db.save_all([older, middle, newest])
    return [
        ("save()", lambda: db.save(older)),
        ("delete(), not shown", lambda: db.delete(middle)),
        ("delete(), newest", lambda: db.delete(newest)),
        ("update()", lambda: db.update(Host, hostname=older.hostname, time=older.time,
                                       cpu=0.0)),
    ]


async def bench_async(args: argparse.Namespace, proxy: Any) -> None:
    Host = model()
    async with AsyncBigtableBackend(PROJECT, INSTANCE, emulator_host=proxy.host_port) as ab:
        db = ts.AsyncConnection(ab)
        await db.create_tables(Host)
        await db.save_all(events(Host, -1))
        times: dict[str, list[float]] = {name: [] for name in PLANNED}
        calls: dict[str, int] = {}
        for run in range(args.runs):
            for name, call in await async_steps(db, Host, run):
                before, start = proxy.requests(), time.perf_counter()
                await call()
                times[name].append(time.perf_counter() - start)
                calls[name] = proxy.requests() - before
    show("async", times, calls, args.rtt)


def show(api: str, times: dict[str, list[float]], calls: dict[str, int], rtt: float) -> None:
    base = times["save()"]
    for name, measured in times.items():
        ms = statistics.median(measured) * 1000
        ratio = statistics.median(t / b for t, b in zip(measured, base, strict=True))
        print(f"{api:5} {name:21} {ms:7.1f} ms = {ms / rtt:4.1f} round trips "
              f"(planned {PLANNED[name]}), {calls[name]:2} gRPC calls, x{ratio:4.1f} save()")


if __name__ == "__main__":
    sys.exit(main())
