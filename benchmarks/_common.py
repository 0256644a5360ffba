"""Timing, results and the report of the benchmarks."""

from __future__ import annotations

import gc
import os
import platform
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds ``fn()`` took (after a full garbage collection), and its result."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median(values: list[float]) -> float:
    return statistics.median(values)


@dataclass
class Result:
    """One measurement: tsmodel against its baseline, median of the runs.

    ``ratio`` is what the target is about; ``higher_is_better`` says which way.
    """

    key: str
    what: str
    unit: str
    tsmodel: float
    baseline: float | None
    ratio: float | None
    target: str
    met: bool | None
    runs: int
    notes: list[str] = field(default_factory=list)
    #: Show the ratio as a percentage (a cost ratio) rather than "N.NNx".
    percent: bool = False
    #: The round-trip time of the delay proxy it ran through, in ms (None: no proxy).
    rtt: float | None = None

    @property
    def label(self) -> str:
        """``key``, with the round-trip time when there is one: ``a@10ms``."""
        return self.key if self.rtt is None else f"{self.key}@{self.rtt:g}ms"


def ratio_result(key: str, what: str, unit: str, ours: list[float], theirs: list[float],
                 goal: float, *, target: str, higher_is_better: bool = True) -> Result:
    """Medians and the median of per-run ratios (each run compares its own pair)."""
    ratios = [(o / t) if higher_is_better else (t / o)
              for o, t in zip(ours, theirs, strict=True)]
    ratio = median(ratios)
    met = ratio >= goal
    return Result(key, what, unit, median(ours), median(theirs), ratio, target, met, len(ours))


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "MiB":
        return f"{value:+.1f} MiB"
    if abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def table(results: list[Result], markdown: bool) -> str:
    """One row per result; or, when some ran through the delay proxy, see :func:`rtt_rows`."""
    if any(r.rtt is not None for r in results):
        header, rows = rtt_rows(results)
    else:
        header = ["", "measurement", "tsmodel", "baseline", "ratio", "target", "met"]
        rows = [[r.key, r.what, *_figures(r)[:3], r.target, _figures(r)[3]] for r in results]
    return _layout(header, rows, markdown)


def rtt_rows(results: list[Result]) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows with one group of columns per round-trip time.

    A row per figure (``key``), in the order of the keys; per round-trip
    time its tsmodel, baseline, ratio and met columns ("" where it did not
    run). Figures measured without the proxy go in the 0 ms columns when
    0 ms is among the round-trip times, in columns of their own otherwise.
    """
    rtts = sorted({r.rtt for r in results if r.rtt is not None})
    unproxied = 0.0 if 0.0 in rtts else None
    groups: list[float | None] = list(rtts)
    if unproxied is None and any(r.rtt is None for r in results):
        groups.insert(0, None)
    by_key: dict[str, dict[float | None, Result]] = {}
    for r in results:
        by_key.setdefault(r.key, {})[unproxied if r.rtt is None else r.rtt] = r
    header = ["", "measurement", "target"]
    for group in groups:
        when = "no proxy" if group is None else f"{group:g} ms"
        header += [f"{when} tsmodel", f"{when} baseline", f"{when} ratio", f"{when} met"]
    rows = []
    for key, cells in sorted(by_key.items()):
        first = next(iter(cells.values()))
        row = [key, first.what, first.target]
        for group in groups:
            row += _figures(cells[group]) if group in cells else [""] * 4
        rows.append(row)
    return header, rows


def _figures(r: Result) -> list[str]:
    """tsmodel, baseline, ratio and met, as printed."""
    ratio = ("-" if r.ratio is None else
             f"{r.ratio * 100:.2f} %" if r.percent else f"{r.ratio:.2f}x")
    return [fmt(r.tsmodel, r.unit), fmt(r.baseline, r.unit), ratio,
            {True: "yes", False: "NO", None: "-"}[r.met]]


def _layout(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True))
            for row in rows]
    return "\n".join(out)


def environment(emulator_binary: str | None) -> list[str]:
    """Machine and versions, for the report."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages * size / 2**30:.0f} GiB RAM"
    except (ValueError, OSError, AttributeError):
        pass
    versions = []
    for dist in ("google-cloud-bigtable", "grpcio", "protobuf", "cachetools", "attrs"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    lines = [
        f"machine: {cpu}, {os.cpu_count()} CPUs{memory}; {platform.system()} {platform.release()}",
        f"python {sys.version.split()[0]} ({platform.python_implementation()}); "
        f"SQLite {sqlite3.sqlite_version}; " + ", ".join(versions),
    ]
    if emulator_binary:
        lines.append(f"emulator: {emulator_binary} ({_sdk_version(emulator_binary)})")
    return lines


def _sdk_version(binary: str) -> str:
    """The Cloud SDK version the emulator ships with, from the SDK's VERSION file."""
    for parent in Path(binary).resolve().parents:
        version = parent / "VERSION"
        if version.is_file():
            return "Cloud SDK " + version.read_text().strip()
    return "Cloud SDK version unknown"
