"""Paging with cursors against one unpaged read, on the emulator through a delay proxy.

    python benchmarks/paging.py                   # 10,000 events, pages of 500, 10 ms RTT
    python benchmarks/paging.py --events 50000 --size 1000 --rtt 2 --runs 5

For a range of one entity (one read per page) and a range of a model salted
on time (three salt reads merged by time, and four guard reads, per page),
each run times back to back: the whole range read by one iteration (the
baseline), the same range walked page by page with ``page(size,
after=token)``, and the first and the last page alone (a cursor re-opens at
its row: the last page costs what the first does, not an offset's skip).
The proxy (``_delay.py``) delays every chunk by half the RTT and counts the
gRPC calls, so each line shows the round trips per page on the wire. Every
time is the median of ``--runs`` runs; the ratio is the median of per-run
ratios. Nothing here runs in the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import tsmodel as ts  # noqa: E402
from tsmodel.backends.bigtable import BigtableBackend  # noqa: E402
from tsmodel.backends.emulator import Emulator, find_emulator  # noqa: E402

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
PROJECT, INSTANCE = "bench", "paging"


def models() -> tuple[Any, Any]:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"HOST_{suffix}", family="m")
    class Host:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value()

    @ts.model(table=f"BATTERY_{suffix}", family="m")
    class Battery:
        kind = ts.constant("BAT")
        salt = ts.salt(3, on="time")
        time: datetime = ts.timestamp(unit="ms")
        pct: int = ts.value()

    return Host, Battery


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=500, help="events per page")
    parser.add_argument("--rtt", type=float, default=10.0, help="round-trip time, ms")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from _delay import delay_process

    emulator = Emulator(find_emulator(), stop_with_parent=True)
    emulator.start()
    try:
        with delay_process(emulator.host_port, args.rtt / 2000) as proxy:
            print(f"{args.events} events, pages of {args.size}, {args.rtt:g} ms RTT, "
                  f"median of {args.runs} runs")
            bench(args, proxy)
    finally:
        emulator.stop()
    return 0


def bench(args: argparse.Namespace, proxy: Any) -> None:
    Host, Battery = models()
    n, size = args.events, args.size
    conn = ts.Connection(BigtableBackend(PROJECT, INSTANCE, emulator_host=proxy.host_port))
    conn.create_tables(Host, Battery)
    conn.save_all([Host(hostname="h1", time=T0 + timedelta(seconds=i), cpu=i / 10)
                   for i in range(n)])
    conn.save_all([Battery(time=T0 + timedelta(seconds=i), pct=i % 100) for i in range(n)])
    end = T0 + timedelta(days=365)
    for label, qs in (("one entity", Host.using(conn).range(T0, end, hostname="h1")),
                      ("salted, merged by time", Battery.using(conn).range(T0, end))):
        report(label, qs, size, n, proxy, args.runs)
    conn.drop_tables(Host, Battery)
    conn.close()


def walk(qs: Any, size: int) -> tuple[list[Any], list[str]]:
    items: list[Any] = []
    tokens: list[str] = []
    token = None
    while True:
        page = qs.page(size, after=token)
        items += page.items
        if page.next is None:
            return items, tokens
        tokens.append(page.next)
        token = page.next


def report(label: str, qs: Any, size: int, n: int, proxy: Any, runs: int) -> None:
    everything = list(qs)
    paged, tokens = walk(qs, size)
    assert paged == everything and len(everything) == n, "the pages are the range"
    times: dict[str, list[float]] = {k: [] for k in ("whole", "paged", "first", "last")}
    calls: dict[str, int] = {}
    steps: dict[str, Callable[[], object]] = {
        "whole": lambda: list(qs), "paged": lambda: walk(qs, size),
        "first": lambda: qs.page(size), "last": lambda: qs.page(size, after=tokens[-1])}
    for _ in range(runs):
        for name, step in steps.items():
            before, start = proxy.requests(), time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
            calls[name] = proxy.requests() - before
    pages = len(tokens) + 1
    ratio = statistics.median(p / w for p, w in zip(times["paged"], times["whole"], strict=True))
    ms = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"{label:24} whole range: {ms['whole']:8.1f} ms, {calls['whole']:3} gRPC calls | "
          f"{pages} pages: {ms['paged']:8.1f} ms, {calls['paged'] / pages:4.1f} calls/page, "
          f"x{ratio:4.2f} the whole read | first page {ms['first']:6.1f} ms, "
          f"last page {ms['last']:6.1f} ms ({calls['last']} calls)")


if __name__ == "__main__":
    sys.exit(main())
