"""``latest_many`` against a loop of ``latest()`` calls, on the emulator through a delay proxy.

    python benchmarks/latest_many.py                # 500 entities, 10 ms RTT
    python benchmarks/latest_many.py --entities 1500 --rtt 2 --runs 5

For a model with a current-value table and one without, the newest event of
N entities is read twice in each run, back to back: by N ``latest()`` calls
(the baseline: what a user writes without ``latest_many``) and by one
``latest_many()`` (sync) — then the same on the asyncio API, where the
baseline is N ``await db.latest()`` calls in turn. The proxy (``_delay.py``)
delays every chunk by half the RTT and counts the gRPC calls, so each line
shows the round trips measured on the wire next to the plan's. Every time is
the median of ``--runs`` runs; the ratio is the median of per-run ratios.
Nothing here runs in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
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
from tsmodel.plan.reads import compile_latest_many  # noqa: E402

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
PROJECT, INSTANCE = "bench", "latest-many"


def model(current: bool) -> Any:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"HOST_{suffix}", family="m",
              current=f"CURRENT_HOST_{suffix}" if current else None)
    class Host:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value()

    return Host


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--entities", type=int, default=500)
    parser.add_argument("--rtt", type=float, default=10.0, help="round-trip time, ms")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from _delay import delay_process

    emulator = Emulator(find_emulator(), stop_with_parent=True)
    emulator.start()
    try:
        with delay_process(emulator.host_port, args.rtt / 2000) as proxy:
            print(f"{args.entities} entities, {args.rtt:g} ms RTT, median of {args.runs} runs")
            for current in (True, False):
                bench(current, args, proxy)
    finally:
        emulator.stop()
    return 0


def bench(current: bool, args: argparse.Namespace, proxy: Any) -> None:
    Host = model(current)
    n = args.entities
    backend = BigtableBackend(PROJECT, INSTANCE, emulator_host=proxy.host_port)
    conn = ts.Connection(backend)
    conn.create_tables(Host)
    conn.save_all([Host(hostname=f"h{i:05d}", time=T0 + timedelta(seconds=j), cpu=i + j / 10)
                   for i in range(n) for j in range(3)])
    keys = [(f"h{i:05d}",) for i in range(n)]
    plan = compile_latest_many(Host.__tsmodel__, keys, conn.features)
    label = "current table" if current else "no current table"

    def loop() -> list[Any]:
        return [conn.latest(Host, hostname=k[0]) for k in keys]

    def many() -> list[Any]:
        return list(conn.latest_many(Host, keys).found.values())

    assert many() == loop(), "the same answers"
    report(f"sync, {label}", loop, many, proxy, plan.round_trips, args.runs, n)

    async def amain() -> None:
        async with AsyncBigtableBackend(PROJECT, INSTANCE,
                                        emulator_host=proxy.host_port) as ab:
            db = ts.AsyncConnection(ab)

            async def aloop() -> list[Any]:
                return [await db.latest(Host, hostname=k[0]) for k in keys]

            async def amany() -> list[Any]:
                return list((await db.latest_many(Host, keys)).found.values())

            times: dict[str, list[float]] = {"loop": [], "many": []}
            calls: dict[str, int] = {}
            for _ in range(args.runs):
                for name, call in (("loop", aloop), ("many", amany)):
                    before, start = proxy.requests(), time.perf_counter()
                    got = await call()
                    times[name].append(time.perf_counter() - start)
                    calls[name] = proxy.requests() - before
                    assert len(got) == n
            show(f"async, {label}", times, calls, plan.round_trips)

    asyncio.run(amain())
    backend.close()


def report(label: str, loop: Any, many: Any, proxy: Any, planned: int, runs: int,
           n: int) -> None:
    times: dict[str, list[float]] = {"loop": [], "many": []}
    calls: dict[str, int] = {}
    for _ in range(runs):
        for name, call in (("loop", loop), ("many", many)):
            before, start = proxy.requests(), time.perf_counter()
            got = call()
            times[name].append(time.perf_counter() - start)
            calls[name] = proxy.requests() - before
            assert len(got) == n, "every entity has an event"
    show(label, times, calls, planned)


def show(label: str, times: dict[str, list[float]], calls: dict[str, int], planned: int) -> None:
    ratio = statistics.median(a / b for a, b in zip(times["loop"], times["many"], strict=True))
    print(f"{label:28} latest() x N: {statistics.median(times['loop']) * 1000:8.1f} ms, "
          f"{calls['loop']:5} gRPC calls | latest_many: "
          f"{statistics.median(times['many']) * 1000:7.1f} ms, {calls['many']:4} gRPC calls "
          f"(plan: {planned}) | {ratio:5.1f}x faster")


if __name__ == "__main__":
    sys.exit(main())
