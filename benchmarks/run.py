"""Run every tsmodel benchmark and print the figures with their ratios.

    python benchmarks/run.py            # the full run (a few minutes)
    python benchmarks/run.py --quick    # small data, for a smoke test
    python benchmarks/run.py --markdown # the results table in Markdown
    python benchmarks/run.py --rtt 0,10 # (a), (b), (f), (g), (h) through a delay proxy

(a) saving events, (b) range reads into model instances, (c) latest lookups,
(f) ``save()`` of one event at a time, (g) the asyncio API against the
official async client and (h) a salted range read against an unsalted one
and (i) columnar results (Arrow and pandas exports, count() without values;
needs ``tsmodel-bigtable[pandas]``) run on a Cloud Bigtable emulator that this script
starts (or the one given with ``--emulator``); (d) the embedded store and
(e) memory of a streaming read need no server. With ``--rtt``, (a), (b),
(f), (g) and (h) run once per round-trip time given, tsmodel and its
baseline both connected to the emulator through a loopback proxy that delays
each chunk by half of it and counts the gRPC calls (``_delay.py``), and the
table has a group of columns per round-trip time. Every figure is the median
of ``--runs`` runs (at least 3), each run timing tsmodel and its baseline
back to back; the ratio is the median of the per-run ratios.
Nothing here runs in the test suite.
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

#: Every figure: a writes, b range reads, c latest lookups, d embedded store,
#: e memory, f save() of one event, g asyncio API, h salted range reads, i columnar,
#: p each storage pattern's saves and range reads.
ALL = "abcdefghip"
#: The figures measured on the emulator, and those of them --rtt runs through the proxy.
ON_EMULATOR, PROXIED = "abcfghip", "abfgh"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.quick:
        args.events = args.events or 10_000
        args.stream_rows = args.stream_rows or 100_000
        args.lookups = args.lookups or 200
        args.saves = args.saves or 30
    args.events = args.events or 50_000
    args.saves = args.saves or 100
    args.stream_rows = args.stream_rows or 1_000_000
    args.frame_rows = [int(n) for n in (args.frame_rows or (
        "10000,100000" if args.quick else "100000,1000000")).split(",")]
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
    if only & set(ON_EMULATOR):
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
    if only & set("fg"):
        print(f"{' and '.join(f'({k})' for k in 'fg' if k in only)}: "
              f"{args.saves:,} single saves per side and run")
    proxied = "".join(k for k in PROXIED if k in only)
    if args.rtt and proxied:
        print(f"{', '.join(proxied)} through a loopback delay proxy at "
              f"{', '.join(f'{rtt:g}' for rtt in args.rtt)} ms RTT, baselines alike"
              + ("; the rest without it, in the 0 ms columns"
                 if only - set(PROXIED) and 0 in args.rtt else ""))
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
    parser.add_argument("--frame-rows", default="",
                        help="DataFrame sizes of (a1, a2), comma-separated, the smallest "
                             "first (default 100000,1000000; --quick 10000,100000)")
    parser.add_argument("--saves", type=int, default=0,
                        help="single saves per side and run in (f) and (g)")
    parser.add_argument("--salted-rows", type=int, default=1000,
                        help="rows per range read of (h)")
    parser.add_argument("--only", default=ALL, help="which of " + ", ".join(ALL) + " to run")
    parser.add_argument("--emulator", metavar="HOST:PORT", help="use this running emulator")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--rtt", metavar="MS", default="",
                        help="run (a), (b), (f), (g) and (h) through a delay proxy at each "
                             "of these round-trip times, in ms (e.g. 0,10)")
    return parser


def _rtts(text: str) -> list[float]:
    """``"0,10"`` -> ``[0.0, 10.0]``; an empty text -> no proxy at all."""
    rtts = [float(part) for part in text.split(",") if part.strip()]
    if any(rtt < 0 for rtt in rtts):
        raise ValueError("round-trip times must be >= 0 ms")
    return rtts


def _bigtable(args: argparse.Namespace, only: set[str], log) -> tuple[str | None, list[Result]]:  # type: ignore[no-untyped-def]
    from tsmodel.backends.emulator import Emulator, find_emulator

    emulator = None
    binary = None
    host_port = args.emulator
    if host_port is None:
        binary = find_emulator()
        emulator = Emulator(binary, stop_with_parent=True)
        emulator.start()
        host_port = emulator.host_port
    log(f"emulator on {host_port}")
    results: list[Result] = []
    try:
        if args.rtt and only & set(PROXIED):  # these through the proxy instead
            results += _delayed(args, host_port, only, log)
            only = only - set(PROXIED)
        if only:
            results += _measure(args, host_port, only, None, None, log)
    finally:
        if emulator is not None:
            emulator.stop()
    return binary, results


def _measure(args: argparse.Namespace, host_port: str, only: set[str],
             requests: Callable[[], int] | None, rtt: float | None,
             log: Callable[[str], None]) -> list[Result]:
    """The emulator figures of ``only`` on ``host_port`` (a proxy when ``rtt`` is set)."""
    from _bigtable import BigtableSuite

    at = "" if rtt is None else f", {rtt:g} ms RTT"
    results: list[Result] = []
    suite = BigtableSuite(host_port, args.events, args.runs, args.lookups, log, args.saves)
    try:
        if "a" in only:
            log(f"(a) writes{at}")
            results.append(suite.writes())
            if rtt is None:
                log("(a) writes against the write limit")
                limit = suite.write_limit()
                results.append(limit)
                from _frames import frame_results

                log("(a1, a2) save_frame of DataFrames against the write limit; its memory")
                results += frame_results(host_port, limit.baseline or 0.0, args.frame_rows, log)
                suite._tsmodel_write()  # the tables as the figures after expect them
        if "b" in only:
            log(f"(b) range reads{at}")
            results.append(suite.reads())
            if rtt is None:
                log("(b0-b2) the read limit, instances and to_arrow() as shares of it")
                results += suite.read_limits()
        if "c" in only:
            log(f"(c) latest lookups{at}")
            results += suite.lookups_()
        if "f" in only:
            log(f"(f) save() of one event{at}")
            results += suite.single_saves(requests, rtt)
        if "g" in only:
            from _async import AsyncSuite

            log(f"(g) asyncio API vs the official async client{at}")
            asynchronous = AsyncSuite(suite)
            try:
                results += asynchronous.all(requests, rtt)
            finally:
                asynchronous.close()
        if "h" in only:
            from _salted import SaltedSuite

            log(f"(h) salted range reads{at}")
            salted = SaltedSuite(f"bigtable-emulator://{host_port}/bench/bench", args.events,
                                 args.salted_rows, args.runs, log)
            try:
                results.append(salted.run())
            finally:
                salted.close()
        if "p" in only and rtt is None:
            from _patterns import PatternSuite

            log("(p) each storage pattern's saves and range reads, embedded store and emulator")
            results += PatternSuite("embedded", None, args.runs, log).run()
            results += PatternSuite("emulator", f"bigtable-emulator://{host_port}/bench/bench",
                                    args.runs, log).run()
        if "i" in only:
            from _columnar import ColumnarSuite

            log(f"(i) columnar results{at}")
            columnar = ColumnarSuite(host_port, args.events, args.runs, log)
            try:
                results += columnar.run()
            finally:
                columnar.close()
    finally:
        suite.close()
    for result in results:
        result.rtt = rtt
    return results


def _delayed(args: argparse.Namespace, host_port: str, only: set[str],
             log: Callable[[str], None]) -> list[Result]:
    """The proxied figures once per round-trip time, through a delay proxy; baselines alike."""
    from _delay import delay_process

    results: list[Result] = []
    proxied = only & set(PROXIED)
    for rtt in args.rtt:
        with delay_process(host_port, rtt / 2000) as proxy:
            log(f"{rtt:g} ms RTT: proxy on {proxy.host_port} ({rtt / 2:g} ms each way)")
            results += _measure(args, proxy.host_port, proxied, proxy.requests, rtt, log)
    for key, call in (("a", "save_all"), ("g1", "async save_all")):
        throughput = {r.rtt: r.tsmodel for r in results if r.key == key}
        if len(throughput) < 2:
            continue
        low = min(throughput)
        for result in results:
            if result.key == key and result.rtt != low:
                kept = result.tsmodel / throughput[low]
                result.notes.insert(0, f"{call} at {result.rtt:g} ms keeps {kept:.0%} of its "
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
