"""Run every tsmodel benchmark and print the figures with their ratios.

    python benchmarks/run.py            # the full run (a few minutes)
    python benchmarks/run.py --quick    # small data, for a smoke test
    python benchmarks/run.py --markdown # the results table in Markdown
    python benchmarks/run.py --rtt 0,10 # (a) and (b) through a delay proxy

(a) saving events, (b) range reads into model instances and (c) latest
lookups run on a Cloud Bigtable emulator that this script starts (or the one
given with ``--emulator``); (d) the embedded store and (e) memory of a
streaming read need no server. With ``--rtt``, (a) and (b) run once per
round-trip time given, tsmodel and its baseline both connected to the
emulator through a loopback proxy that delays each chunk by half of it
(``_delay.py``), and the table has a group of columns per round-trip time.
Every figure is the median of ``--runs`` runs (at least 3), each run timing
tsmodel and its baseline back to back; the ratio is the median of the
per-run ratios. Nothing here runs in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import Result, environment, median, table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.quick:
        args.events = args.events or 10_000
        args.stream_rows = args.stream_rows or 100_000
        args.lookups = args.lookups or 200
    args.events = args.events or 50_000
    args.stream_rows = args.stream_rows or 1_000_000
    args.lookups = args.lookups or 1_000
    if args.runs < 3:
        sys.exit("--runs must be at least 3: every figure is a median")
    try:
        args.rtt = _rtts(args.rtt)
    except ValueError as exc:
        sys.exit(f"--rtt: {exc}")
    only = set(args.only)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results: list[Result] = []
    emulator_binary = None
    started = time.perf_counter()
    if only & set("abc"):
        emulator_binary, bigtable_results = _bigtable(args, only, log)
        results += bigtable_results
    if "d" in only:
        from _embedded import EmbeddedSuite

        log("(d) embedded store vs plain sqlite3")
        results += EmbeddedSuite(args.events, args.runs, log).run()
    if "e" in only:
        results += _memory(args, log)
    print("\n".join(environment(emulator_binary)))
    print(f"command: python benchmarks/run.py {' '.join(argv or sys.argv[1:])}".rstrip())
    print(f"{args.events:,} events of 10 hosts; median of {args.runs} runs; "
          f"{time.perf_counter() - started:.0f} s in all")
    if args.rtt and only & set("ab"):
        print(f"(a) and (b) through a loopback delay proxy at "
              f"{', '.join(f'{rtt:g}' for rtt in args.rtt)} ms RTT, baselines alike")
    print()
    print(table(results, args.markdown))
    notes = [f"{r.label}: {note}" for r in results for note in r.notes]
    if notes:
        print("\n" + "\n".join(notes))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data: a smoke test")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (>= 3)")
    parser.add_argument("--events", type=int, default=0, help="events written and read")
    parser.add_argument("--lookups", type=int, default=0, help="latest() calls per run")
    parser.add_argument("--stream-rows", type=int, default=0, help="rows of the memory test")
    parser.add_argument("--only", default="abcde", help="which of a, b, c, d, e to run")
    parser.add_argument("--emulator", metavar="HOST:PORT", help="use this running emulator")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--rtt", metavar="MS", default="",
                        help="run (a) and (b) through a delay proxy at each of these "
                             "round-trip times, in ms (e.g. 0,10)")
    return parser


def _rtts(text: str) -> list[float]:
    """``"0,10"`` -> ``[0.0, 10.0]``; an empty text -> no proxy at all."""
    rtts = [float(part) for part in text.split(",") if part.strip()]
    if any(rtt < 0 for rtt in rtts):
        raise ValueError("round-trip times must be >= 0 ms")
    return rtts


def _bigtable(args: argparse.Namespace, only: set[str], log) -> tuple[str | None, list[Result]]:  # type: ignore[no-untyped-def]
    from _bigtable import BigtableSuite

    from tsmodel.backends.emulator import Emulator, find_emulator

    emulator = None
    binary = None
    host_port = args.emulator
    if host_port is None:
        binary = find_emulator()
        emulator = Emulator(binary)
        emulator.start()
        host_port = emulator.host_port
    log(f"emulator on {host_port}")
    results: list[Result] = []
    try:
        if args.rtt and only & set("ab"):  # (a) and (b) through the proxy instead
            results += _delayed(args, host_port, only, log)
            only = only - set("ab")
        if only:
            suite = BigtableSuite(host_port, args.events, args.runs, args.lookups, log)
            try:
                if "a" in only:
                    log("(a) writes")
                    results.append(suite.writes())
                if "b" in only:
                    log("(b) range reads")
                    results.append(suite.reads())
                if "c" in only:
                    log("(c) latest lookups")
                    results += suite.lookups_()
            finally:
                suite.close()
    finally:
        if emulator is not None:
            emulator.stop()
    return binary, results


def _delayed(args: argparse.Namespace, host_port: str, only: set[str],
             log: Callable[[str], None]) -> list[Result]:
    """(a) and (b) once per round-trip time, through a delay proxy; baselines alike."""
    from _bigtable import BigtableSuite
    from _delay import delay_process

    results: list[Result] = []
    writes: dict[float, Result] = {}
    for rtt in args.rtt:
        with delay_process(host_port, rtt / 2000) as proxy:
            log(f"{rtt:g} ms RTT: proxy on {proxy.host_port} ({rtt / 2:g} ms each way)")
            suite = BigtableSuite(proxy.host_port, args.events, args.runs, args.lookups, log)
            try:
                for key, measure in (("a", suite.writes), ("b", suite.reads)):
                    if key not in only:
                        continue
                    log(f"({key}) {'writes' if key == 'a' else 'range reads'}, {rtt:g} ms RTT")
                    result = measure()
                    result.rtt = rtt
                    results.append(result)
                    if key == "a":
                        writes[rtt] = result
            finally:
                suite.close()
    if writes:
        low = min(writes)
        for rtt, result in writes.items():
            if rtt != low:
                kept = result.tsmodel / writes[low].tsmodel
                result.notes.insert(0, f"save_all at {rtt:g} ms keeps {kept:.0%} of its "
                                       f"{low:g} ms throughput (target >= 90%)")
    return results


def _memory(args: argparse.Namespace, log) -> list[Result]:  # type: ignore[no-untyped-def]
    rows = args.stream_rows
    script = str(HERE / "_memory.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}

    def child(*argv: str) -> dict[str, float]:
        done = subprocess.run([sys.executable, script, *argv], capture_output=True, text=True,
                              env=env, check=True)
        return json.loads(done.stdout) if done.stdout.strip() else {}

    with tempfile.TemporaryDirectory(prefix="tsmodel-bench-") as tmp:
        db = str(Path(tmp) / "stream.db")
        log(f"(e) writing {rows:,} rows to {db}")
        child("build", db, str(rows))
        small = rows // 10
        full, tenth, held = [], [], []
        for run in range(args.runs):
            full.append(child("stream", db, str(rows)))
            tenth.append(child("stream", db, str(small)))
            held.append(child("hold", db, str(small)))
            log(f"  (e) run {run + 1}: streaming {rows:,} rows: +{_mib(full[-1]):.1f} MiB, "
                f"{small:,} rows: +{_mib(tenth[-1]):.1f} MiB; holding {small:,}: "
                f"+{_mib(held[-1]):.1f} MiB")
    grow_full = median([_mib(r) for r in full])
    grow_tenth = median([_mib(r) for r in tenth])
    grow_held = median([_mib(r) for r in held])
    speed = median([r["rows"] / r["seconds"] for r in full])
    flat = grow_full <= max(2 * grow_tenth, grow_tenth + 16)
    result = Result("e", f"peak RSS growth, streaming {rows:,} rows into instances",
                    "MiB", grow_full, grow_tenth, None,
                    "flat", flat, args.runs)
    result.notes.append(
        f"baseline column: the same stream of {small:,} rows; holding those {small:,} "
        f"instances in lists instead takes +{grow_held:.0f} MiB "
        f"(~{grow_held * rows / small:,.0f} MiB for {rows:,}); stream speed {speed:,.0f} rows/s")
    return [result]


def _mib(run: dict[str, float]) -> float:
    return (run["peak"] - run["before"]) / 2**20


if __name__ == "__main__":
    raise SystemExit(main())
