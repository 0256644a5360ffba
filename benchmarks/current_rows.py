"""The cost of an exact current-value row: saves of events with an optional value.

    python benchmarks/current_rows.py                   # 0 and 10 ms RTT, 5 runs
    python benchmarks/current_rows.py --rtt 0 --runs 9 --events 20000 --hosts 200

A model with a current-value table and an optional value (``note``). An
event with a value of an optional field writes its current row only if the
row holds no newer cell (docs/writes.md "Optional values": a
``CheckAndMutateRow`` call per current row and batch on Bigtable, the same
check in the write's transaction on the embedded store), so that a late,
older event leaves no cell there. The baseline is the same events, the
same cells, of a model whose ``note`` is required (its current rows go in
the batch's ``MutateRows``), saved in the same run on fresh tables. Each line gives the median
time of ``--runs`` saves of ``--events`` events over ``--hosts`` entities
(batches of 1,000) and the ratio to the baseline; on the emulator, through
the delay proxy (``_delay.py``) at each ``--rtt``, with the gRPC calls it
counted. Nothing here runs in the test suite.
"""

from __future__ import annotations

import argparse
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
from tsmodel.backends.emulator import Emulator, find_emulator  # noqa: E402

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


def model(optional: bool) -> Any:
    suffix = uuid.uuid4().hex[:8]
    if optional:
        @ts.model(table=f"CR_{suffix}", family="m", current=f"CR_CUR_{suffix}")
        class Optional:
            host: str = ts.key()
            time: datetime = ts.timestamp(unit="ms")
            cpu: float = ts.value()
            note: str | None = ts.value(default=None)

        return Optional

    @ts.model(table=f"CR_{suffix}", family="m", current=f"CR_CUR_{suffix}")
    class Required:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value()
        note: str = ts.value()

    return Required


def events(cls: Any, n: int, hosts: int) -> list[Any]:
    return [cls(host=f"h{i % hosts:04d}", time=T0 + timedelta(milliseconds=i), cpu=i / n,
                note="n") for i in range(n)]


def timed(conn: ts.Connection, n: int, hosts: int, optional: bool, runs: int) -> float:
    """The median seconds of ``runs`` saves, each on fresh tables."""
    times = []
    for _ in range(runs):
        cls = model(optional)
        conn.create_tables(cls)
        batch = events(cls, n, hosts)
        start = time.perf_counter()
        result = conn.save_all(batch)
        times.append(time.perf_counter() - start)
        assert result.ok, result.summary()
        conn.drop_tables(cls)
    return statistics.median(times)


def line(where: str, base: float, exact: float, calls: str = "") -> None:
    print(f"{where:<24} required {base * 1000:8.1f} ms   optional {exact * 1000:8.1f} ms"
          f"   ratio {exact / base:5.2f}x{calls}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rtt", default="0,10", help="round-trip times, ms, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=100)
    args = parser.parse_args()
    n, hosts, runs = args.events, args.hosts, args.runs
    print(f"{n:,} events over {hosts} entities, batches of 1,000, median of {runs}")
    embedded = ts.connect(default=False)
    base = timed(embedded, n, hosts, False, runs)
    exact = timed(embedded, n, hosts, True, runs)
    line("embedded", base, exact)
    if find_emulator() is None:
        print("no emulator: the Bigtable rows are skipped")
        return 0
    from _delay import delay_process

    with Emulator(stop_with_parent=True) as emulator:
        for rtt in (float(x) for x in args.rtt.split(",")):
            with delay_process(emulator.host_port, rtt / 2000) as proxy:
                conn = ts.Connection(BigtableBackend("bench", "current",
                                                     emulator_host=proxy.host_port))
                before = proxy.requests()
                base = timed(conn, n, hosts, False, runs)
                middle = proxy.requests()
                exact = timed(conn, n, hosts, True, runs)
                after = proxy.requests()
                conn.close()
            line(f"emulator, {rtt:g} ms RTT", base, exact,
                 f"   gRPC calls per run {(middle - before) / runs:,.0f} -> "
                 f"{(after - middle) / runs:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
