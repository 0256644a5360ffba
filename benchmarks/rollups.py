"""Rollups: a day's ``resample("1h")`` from the rollup against the raw events.

    python benchmarks/rollups.py                    # the emulator and the embedded store
    python benchmarks/rollups.py --hosts 5 --runs 5 --only embedded

A model of server metrics (one event every 10 s per host, two float
values and an int) with a 1-hour rollup. For each backend it saves one day
of events of ``--hosts`` hosts with the rollup declared (recomputed, then
in ``mode="increment"``: only the int field is summed) and, in the same
run, without (the baseline of the save), then resamples one host's day
to 1-hour buckets from the rollup and, in the same run, from the raw
events (``resample("1h", fields=...)`` over an unaligned range reads the
raw rows: the baseline of the read). Rows are counted by a proxy of the
backend; times are medians of ``--runs`` runs. Nothing here runs in the
test suite.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import tsmodel as ts  # noqa: E402
from tsmodel.backends.base import Backend, ReadRequest, Row  # noqa: E402

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)


def model(mode: str | None) -> Any:
    """The model with a 1-hour rollup kept in ``mode`` (``None``: no rollup)."""
    s = uuid.uuid4().hex[:8].upper()
    rollups = [ts.rollup(f"BR_1H_{s}", "1h", mode=mode)] if mode else []

    @ts.model(table=f"BR_{s}", family="M", rollups=rollups)
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value()
        mem: float = ts.value()
        reqs: int = ts.value()

    return Metric


class Counting:
    """The backend, counting the rows each read returns."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.features = inner.features
        self.rows = 0

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        for row in self.inner.read_rows(request):
            self.rows += 1
            yield row

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def events(Metric: Any, hosts: int) -> list[Any]:
    return [Metric(host=f"h{h:03d}", time=T0 + timedelta(seconds=10 * i), cpu=(i % 100) / 7,
                   mem=float(i % 13), reqs=i % 50)
            for h in range(hosts) for i in range(8_640)]


def run(backend: Backend, hosts: int, runs: int) -> list[tuple[str, str, str, str]]:
    saves: list[tuple[float, float, float]] = []
    reads: list[tuple[float, float]] = []
    rows: tuple[int, int] = (0, 0)
    for _ in range(runs):
        counting = Counting(backend)
        db = ts.Connection(counting)  # type: ignore[arg-type]
        timed = []
        for mode in ("recompute", None, "increment"):
            Metric = model(mode)
            db.create_tables(Metric)
            batch = events(Metric, hosts)
            start = time.perf_counter()
            assert db.save_all(batch).ok
            timed.append((len(batch) / (time.perf_counter() - start), Metric))
        saves.append((timed[0][0], timed[1][0], timed[2][0]))
        Metric = timed[0][1]
        qs = Metric.range(T0, T0 + DAY, host="h000").using(db)
        figures = []
        for query in (qs, Metric.range(T0, T0 + DAY - timedelta(milliseconds=1),
                                       host="h000").using(db)):
            counting.rows = 0
            start = time.perf_counter()
            windows = query.resample("1h").all()
            figures.append((time.perf_counter() - start, counting.rows, len(windows)))
        assert qs.resample("1h").explain().source == "rollup"
        reads.append((figures[0][0], figures[1][0]))
        rows = (figures[0][1], figures[1][1])
        for _, M in timed:
            db.drop_tables(M)
    with_r = statistics.median(s[0] for s in saves)
    without = statistics.median(s[1] for s in saves)
    increment = statistics.median(s[2] for s in saves)
    rollup_t = statistics.median(r for r, _ in reads)
    raw_t = statistics.median(b for _, b in reads)
    return [
        ("rows read per entity, resample('1h') of a day", f"{rows[0]}", f"{rows[1]} (raw)",
         "<= 24: " + ("yes" if rows[0] <= 24 else "NO")),
        ("resample('1h') of a day, one host", f"{rollup_t * 1e3:.1f} ms",
         f"{raw_t * 1e3:.1f} ms (raw)", f"{raw_t / rollup_t:.1f}x faster"),
        (f"save_all of {hosts * 8640:,} events", f"{with_r:,.0f} ev/s with rollup",
         f"{without:,.0f} ev/s without", f"{without / with_r:.2f}x the time"),
        (f"save_all of {hosts * 8640:,} events, mode='increment'",
         f"{increment:,.0f} ev/s with rollup", f"{without:,.0f} ev/s without",
         f"{without / increment:.2f}x the time"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=["embedded", "emulator"], default=None)
    args = parser.parse_args()
    from tsmodel.backends.embedded import EmbeddedBackend

    print(f"{args.hosts} hosts x 8,640 events (one day every 10 s); median of {args.runs} runs")
    print("| backend | measurement | rollup | baseline | ratio |")
    print("|---|---|---|---|---|")
    if args.only in (None, "embedded"):
        for line in run(EmbeddedBackend(), args.hosts, args.runs):
            print("| embedded | " + " | ".join(line) + " |")
    if args.only in (None, "emulator"):
        from tsmodel.backends.bigtable import BigtableBackend
        from tsmodel.backends.emulator import Emulator, find_emulator

        emu = Emulator(find_emulator(), stop_with_parent=True)
        emu.start()
        try:
            backend = BigtableBackend(project="bench", instance="rollups",
                                      emulator_host=emu.host_port)
            for line in run(backend, args.hosts, args.runs):
                print("| emulator | " + " | ".join(line) + " |")
            backend.close()
        finally:
            emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
