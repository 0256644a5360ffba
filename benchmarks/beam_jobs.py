"""Beam jobs on the DirectRunner against the single-process jobs, on an embedded store file.

    python benchmarks/beam_jobs.py                    # 1,000,000 events
    python benchmarks/beam_jobs.py --events 100000    # a quicker run
    python benchmarks/beam_jobs.py --workers 2        # DirectRunner, 2 worker processes

Needs the beam extra (``pip install 'tsmodel-bigtable[beam]'``). Writes a SQLite file
of ``--events`` meter readings of one day (4 salts), then measures, each in
a child process of its own (so that its peak resident memory, Linux
``VmHWM``, is its own):

* snapshot: ``ts.build_snapshot`` (the baseline) against ``tsmodel.jobs.beam.snapshot``;
* migration to 8 salts: a streamed ``save_all`` of the range read (the
  baseline) against ``tsmodel.jobs.beam.migrate`` (without its verification
  pass, then the verification pass alone).

Each line gives events per second, the peak memory, and the ratio of the
Beam job's time and memory to the baseline's of the same run. The
DirectRunner runs in this machine's process(es): it shows what the
transforms cost, not what Dataflow's workers would do. Nothing here runs in
the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import tsmodel as ts  # noqa: E402

DAY = datetime(2024, 5, 1, tzinfo=timezone.utc)
METERS = 1_000


@ts.model(table="BENCH_READING", family="R", snapshot=ts.snapshot("BENCH_READING_{period:%Y%m%d}"))
class Reading:
    salt = ts.salt(4, on="meter")
    meter: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    kwh: float = ts.value("KWH")


@ts.model(table="BENCH_READING_V2", family="R")
class ReadingV2:
    salt = ts.salt(8, on="meter")
    meter: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    kwh: float = ts.value("KWH")


def build(path: str, events: int) -> None:
    per_meter = events // METERS
    step = timedelta(days=1) / per_meter
    with ts.connect(f"sqlite:///{path}", default=False) as conn:
        conn.create_tables(Reading)
        conn.save_all((Reading(meter=f"m{m:04d}", time=DAY + i * step, kwh=i / 4)
                       for m in range(METERS) for i in range(per_meter)),
                      validate_first=False)


def _peak() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def child(kind: str, path: str, workers: int) -> dict[str, Any]:
    from tsmodel.jobs import beam as tsbeam

    url = f"sqlite:///{path}"
    options = [f"--direct_num_workers={workers}",
               "--direct_running_mode=" + ("in_memory" if workers == 1 else "multi_processing")]
    began = time.monotonic()
    events = 0
    if kind == "snapshot-single":
        with ts.connect(url, default=False) as conn:
            events = ts.build_snapshot(Reading, DAY, connection=conn, progress=False,
                                       restart=True).events_written
    elif kind == "snapshot-beam":
        events = tsbeam.snapshot(url, Reading, DAY, options=options).counters["events_written"]
    elif kind == "migrate-single":
        with ts.connect(url, default=False) as conn:
            conn.create_tables(ReadingV2)
            read = Reading.range(DAY, DAY + timedelta(days=1), allow_scan=True).using(conn)
            result = conn.save_all((ReadingV2(meter=r.meter, time=r.time, kwh=r.kwh)
                                    for r in read), validate_first=False)
            events = len(result)
    elif kind == "migrate-beam":
        report = tsbeam.migrate(url, Reading, ReadingV2, verify=False, options=options,
                                start=DAY, end=DAY + timedelta(days=1))
        events = report.counters["events_written"]
    elif kind == "verify-beam":
        report = tsbeam.migrate(url, Reading, ReadingV2, copy=False, options=options,
                                start=DAY, end=DAY + timedelta(days=1))
        assert report.verification is not None and report.verification.ok, report
        events = report.verification.source_events + report.verification.target_events
    return {"seconds": time.monotonic() - began, "events": events, "peak": _peak()}


def measure(kind: str, path: str, workers: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--path", path,
                          "--workers", str(workers)], capture_output=True, text=True,
                         check=False, env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    if out.returncode:
        raise SystemExit(f"{kind} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=1, help="DirectRunner workers")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--path", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.path, args.workers)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bench.db")
        began = time.monotonic()
        build(path, args.events)
        print(f"{args.events:,} events written in {time.monotonic() - began:.0f} s "
              f"({os.cpu_count()} CPUs, DirectRunner with {args.workers} worker(s))")
        rows = []
        for job, single, beam in (("snapshot", "snapshot-single", "snapshot-beam"),
                                  ("migration to 8 salts", "migrate-single", "migrate-beam")):
            base = measure(single, path, args.workers)
            mine = measure(beam, path, args.workers)
            rows.append((job, base, mine))
        check = measure("verify-beam", path, args.workers)
    print("| job | single process | Beam DirectRunner | time ratio | memory ratio |")
    print("|---|---|---|---|---|")
    for job, base, mine in rows:
        print(f"| {job} | {_figure(base)} | {_figure(mine)} | "
              f"{mine['seconds'] / base['seconds']:.1f} | {mine['peak'] / base['peak']:.1f} |")
    print(f"| migration verification (both sides read) | | {_figure(check)} | | |")
    return 0


def _figure(r: dict[str, Any]) -> str:
    return (f"{r['events']:,} events, {r['seconds']:.0f} s, "
            f"{r['events'] / r['seconds']:,.0f} events/s, {r['peak'] / 2**20:,.0f} MiB peak")


if __name__ == "__main__":
    sys.exit(main())
