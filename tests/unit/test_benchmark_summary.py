"""The summary on top of docs/benchmarks.md: drawn from the results on that page.

docs/plot_benchmarks.py computes the summary table and the chart
(docs/img/benchmarks.svg) from the results table and notes that
``benchmarks/run.py --markdown`` printed; here both are checked to be up
to date, and a few of their ratios are recomputed by hand from the page.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plot_benchmarks",
                                                  ROOT / "docs" / "plot_benchmarks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_summary_and_the_chart_are_up_to_date() -> None:
    plot = _script()
    page = PAGE.read_text(encoding="utf-8")
    assert plot.redrawn(page) == page, "run: python docs/plot_benchmarks.py"
    svg = (ROOT / "docs" / "img" / "benchmarks.svg").read_text(encoding="utf-8")
    assert plot.chart(page) == svg, "run: python docs/plot_benchmarks.py"


def test_the_summary_comes_first_and_says_when_it_was_measured() -> None:
    page = PAGE.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", page, re.M)
    assert headings[0] == "At a glance"
    summary = page.split("<!-- benchmark summary -->", 1)[1].split("<!-- end", 1)[0]
    assert re.search(r"a run of \d{4}-\d\d-\d\d, recorded in commit [0-9a-f]{7}", summary)
    assert "(img/benchmarks.svg)" in summary


def test_the_ratios_are_the_results_tables() -> None:
    # Recomputed here from the raw page text: the results rows of (a) and (b),
    # and the note giving the backend's own time per row of (b) in the same run.
    page = PAGE.read_text(encoding="utf-8")
    results = page.split("### With pipelined writes and concurrent reads", 1)[1]
    results = results.split("\n### ", 1)[0]
    summary = page.split("<!-- benchmark summary -->", 1)[1].split("<!-- end", 1)[0]

    def cells(letter: str) -> list[str]:
        row = next(line for line in results.splitlines() if line.startswith(f"| {letter} |"))
        return [c.strip() for c in row.strip("|").split("|")]

    def area(name: str) -> str:
        return next(line for line in summary.splitlines() if line.startswith(f"| **{name}**"))

    writes, reads = area("Writes"), area("Range reads")
    assert f"**{cells('a')[5]}**" in writes and f"| {cells('a')[9]} |" in writes
    assert f"**{cells('b')[5]}**" in reads and f"| {cells('b')[9]} |" in reads
    # The backend's own read as the query reads (read_batches since instances are
    # built a batch at a time; read_rows in runs before).
    backend_us = float(re.search(
        r"b@0ms: per instance, [^:]*: backend read_(?:batches|rows) ([\d.]+) us",
        results)[1])  # type: ignore[index]
    limit = 1e6 / backend_us / float(cells("b")[4].split()[0].replace(",", ""))
    assert f"| {limit:.1f}x (" in reads
