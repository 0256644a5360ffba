"""Draw the summary of docs/benchmarks.md from the benchmark's own output on that page.

    python docs/plot_benchmarks.py            # rewrite the summary and docs/img/benchmarks.svg
    python docs/plot_benchmarks.py --check    # exit 1 if either is out of date

The page holds what ``python benchmarks/run.py --rtt 0,10 --only abfgh
--markdown`` printed: the results table and the notes under it (section
"With pipelined writes and concurrent reads"). From those this script
computes, per area, three ratios against the official client (1x):
tsmodel's, and the limit of the transport: the rows per second of the
backend call alone as the notes measure it in the same run (``backend
mutate_rows 15.1 us`` per event: raw protobuf on gRPC to the emulator, no
model layer), or one round trip for a single save. It writes them as the
table between ``<!-- benchmark summary -->`` and ``<!-- end benchmark
summary -->``, and as the chart docs/img/benchmarks.svg (hand-written SVG:
no plotting library, the same bytes for the same figures). The run's date
and commit are the page's ``<!-- results run: ... -->`` line.
tests/unit/test_benchmark_summary.py fails when either is out of date.
"""

from __future__ import annotations

import re
import sys
from html import escape
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
CHART = ROOT / "docs" / "img" / "benchmarks.svg"
_SUMMARY = re.compile(r"(<!-- benchmark summary -->\n).*?(<!-- end benchmark summary -->)", re.S)
_RUN = re.compile(r"<!-- results run: (.+?) -->")


class Area(NamedTuple):
    """One area of the summary: ratios against the official client (1x)."""

    name: str
    what: str
    tsmodel: float        # at 0 ms RTT
    tsmodel_10ms: float   # at 10 ms RTT
    limit: float | None   # the transport alone, None: not measured
    limit_how: str
    target: str


def _results(page: str) -> tuple[dict[str, list[str]], str]:
    """The rows of the current results table by letter, and the notes under it."""
    section = page.split("### With pipelined writes and concurrent reads", 1)[1]
    section = section.split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 11 and re.fullmatch(r"[a-z]\d?", cells[0]):
            rows[cells[0]] = cells
    after = section.split("The notes it printed:", 1)[1]
    notes = re.split(r"```(?:text|\{\.text[^}]*\})\n", after, maxsplit=1)[1]
    return rows, notes.split("```", 1)[0]


def _number(text: str) -> float:
    return float(re.sub(r"[^0-9.]", "", text.split()[0]))


def _note(notes: str, key: str, pattern: str) -> float:
    found = _maybe_note(notes, key, pattern)
    if found is None:
        raise SystemExit(f"{PAGE.name}: no note {key}: ... matching {pattern!r}")
    return found


def _maybe_note(notes: str, key: str, pattern: str) -> float | None:
    for line in notes.splitlines():
        if line.startswith(f"{key}: "):
            found = re.search(pattern, line)
            if found:
                return float(found.group(1))
    return None


def areas(page: str) -> list[Area]:
    """The summary's areas, from the page's results table and notes."""
    rows, notes = _results(page)
    ratio = {k: (_number(r[5]), _number(r[9])) for k, r in rows.items() if "x" in r[5]}
    # Runs since the generated wire bytes break (a) down by CPU instead: the
    # write limit is a0's, a run of its own (--only a), not in this table.
    write_us = _maybe_note(notes, "a@0ms", r"backend mutate_rows ([\d.]+) us")
    # Runs since instances are decoded a batch at a time time the backend's
    # read_batches (what the query reads) as the read limit; earlier ones read_rows.
    read_call = "read_batches" if _maybe_note(
        notes, "b@0ms", r"backend read_batches ([\d.]+) us") is not None else "read_rows"
    read_us = _note(notes, "b@0ms", rf"backend {read_call} ([\d.]+) us")
    aio_us = _note(notes, "g4@0ms", r"backend read_rows ([\d.]+) us on grpc\.aio")

    def over(baseline: str, us: float) -> float:
        return 1e6 / us / _number(baseline)

    return [
        Area("Writes", "save_all of 50,000 events vs the client's MutationsBatcher",
             *ratio["a"], None if write_us is None else over(rows["a"][4], write_us),
             "not in this run: a0, the write limit, is measured apart" if write_us is None
             else f"backend mutate_rows alone, {write_us:g} µs an event", rows["a"][2]),
        Area("Range reads", "50,000 events into instances vs read_rows into Row objects",
             *ratio["b"], over(rows["b"][4], read_us),
             f"backend {read_call} alone, {read_us:g} µs a row", rows["b"][2]),
        Area("Async writes", "save_all vs BigtableDataClientAsync's mutations_batcher",
             *ratio["g1"], None, "not measured", rows["g1"][2]),
        Area("Async range reads", "range read vs BigtableDataClientAsync.read_rows",
             *ratio["g2"], over(rows["g2"][4], aio_us),
             f"grpc.aio read_rows alone, {aio_us:g} µs a row", rows["g2"][2]),
        Area("One save()", "median latency of save() vs two mutate_row calls",
             *ratio["f1"], _number(rows["f2"][8]),
             "one round trip; the official client takes "
             f"{_number(rows['f2'][8]):g} at 10 ms", "1 round trip"),
    ]


def summary(page: str) -> str:
    """The Markdown between the summary markers."""
    found = _RUN.search(page)
    run = found.group(1) if found else "date and commit unknown"
    lines = [
        "| area | official client | tsmodel, 0 ms | tsmodel, 10 ms RTT "
        "| limit of the transport | target |",
        "|---|---|---|---|---|---|",
    ]
    for a in areas(page):
        limit = "not measured" if a.limit is None else f"{a.limit:.1f}x ({a.limit_how})"
        lines.append(f"| **{a.name}**: {a.what} | 1x | **{a.tsmodel:.2f}x** | "
                     f"{a.tsmodel_10ms:.2f}x | {limit} | {a.target.replace('>= ', '≥ ')} |")
    return ("\n".join(lines) + "\n\nRatios of throughput (of latency for one `save()`) "
            "against the official client, higher is better; the limit of the transport "
            "is the same rows through tsmodel's backend alone, with no model layer "
            f"(measured in the same run). From the [results](#results) below: {run}.\n\n"
            "![tsmodel against the official client and the limit of the transport]"
            "(img/benchmarks.svg)\n")


def chart(page: str) -> str:
    """The SVG bar chart of `areas()`: one group of bars per area, on one scale."""
    rows = areas(page)
    top = max(max(a.tsmodel, a.tsmodel_10ms, a.limit or 0) for a in rows)
    scale_max = float(int(top) + 1 + (int(top) + 1) % 2)
    left, width, bar, gap = 150, 560, 12, 22
    group = 4 * bar + gap
    height = 60 + group * len(rows) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 130}" '
        f'height="{height}" viewBox="0 0 {left + width + 130} {height}" '
        'font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        f'<text x="{left}" y="20" font-size="14" font-weight="bold">'
        "Speed against the official client (1x), higher is better</text>",
    ]
    legend = [("#9e9e9e", "official client"), ("#3f51b5", "tsmodel, 0 ms"),
              ("#9fa8da", "tsmodel, 10 ms RTT"), ("#43a047", "limit of the transport")]
    for i, (colour, label) in enumerate(legend):
        x = left + i * 150
        out.append(f'<rect x="{x}" y="32" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{x + 16}" y="42">{escape(label)}</text>')
    y0 = 60

    def px(value: float) -> float:
        return round(width * value / scale_max, 1)

    for tick in range(0, int(scale_max) + 1, 2 if scale_max > 8 else 1):
        x = left + px(tick)
        out.append(f'<line x1="{x}" y1="{y0 - 4}" x2="{x}" y2="{y0 + group * len(rows)}" '
                   'stroke="#e0e0e0"/>')
        out.append(f'<text x="{x}" y="{y0 + group * len(rows) + 16}" '
                   f'text-anchor="middle">{tick}x</text>')
    for n, a in enumerate(rows):
        y = y0 + n * group
        out.append(f'<text x="{left - 8}" y="{y + 2 * bar + 4}" text-anchor="end" '
                   f'font-weight="bold">{escape(a.name)}</text>')
        bars = [(1.0, "#9e9e9e"), (a.tsmodel, "#3f51b5"), (a.tsmodel_10ms, "#9fa8da"),
                (a.limit, "#43a047")]
        for i, (value, colour) in enumerate(bars):
            top_y = y + i * bar
            if value is None:
                out.append(f'<text x="{left + 4}" y="{top_y + bar - 2}" fill="#757575">'
                           "not measured</text>")
                continue
            out.append(f'<rect x="{left}" y="{top_y}" width="{px(value)}" height="{bar - 2}" '
                       f'fill="{colour}"/>')
            out.append(f'<text x="{left + px(value) + 4}" y="{top_y + bar - 2}">'
                       f"{value:.2f}x</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def redrawn(page: str) -> str:
    """``page`` with its summary written anew."""
    if not _SUMMARY.search(page):
        raise SystemExit(f"{PAGE.name}: no <!-- benchmark summary --> markers")
    return _SUMMARY.sub(lambda m: f"{m.group(1)}\n{summary(page)}\n{m.group(2)}", page)


def main(argv: list[str]) -> int:
    page = PAGE.read_text(encoding="utf-8")
    new_page, new_chart = redrawn(page), chart(page)
    if "--check" in argv:
        old_chart = CHART.read_text(encoding="utf-8") if CHART.exists() else ""
        if new_page != page or new_chart != old_chart:
            print(f"{PAGE.relative_to(ROOT)}: the summary is out of date; run python "
                  "docs/plot_benchmarks.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new_page, encoding="utf-8")
    CHART.write_text(new_chart, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
