"""Sample rows (`TableSample`) and their drawing: row keys down, ``family:qualifier`` across.

Three formats: ``text`` (a grid that fits a terminal width: columns that do
not fit go on to a next grid, the row keys repeated), ``markdown`` (a pipe
table; a column's versions one per line) and ``html`` (a ``<table>``).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timezone

import attrs

__all__ = ["FORMATS", "SampleCell", "TableSample", "render"]

FORMATS = ("text", "markdown", "html")
_KEY = "row key"


@attrs.frozen
class SampleCell:
    """One cell version as the grid shows it.

    Attributes:
        timestamp: the cell timestamp, in microseconds.
        text: the value: decoded by its field's codec where a field declares
            the column, else the raw bytes as text (hex when not UTF-8).
    """

    timestamp: int
    text: str


@attrs.frozen
class TableSample:
    """The rows sample events made in one table.

    Attributes:
        table: the table name.
        role: ``"main"``, ``"alternate-key"``, ``"current-value"`` or ``"snapshot"``.
        describes: how the table lays events out, in words.
        columns: the ``family:qualifier`` columns, in Bigtable's order.
        rows: per row, its key and per column its cells, newest first.
    """

    table: str
    role: str
    describes: str
    columns: tuple[str, ...]
    rows: tuple[tuple[bytes, dict[str, tuple[SampleCell, ...]]], ...]


def render(tables: Sequence[TableSample], fmt: str, *, width: int = 100) -> str:
    """The tables in ``fmt`` (one of `FORMATS`), ending with a newline."""
    draw = {"text": lambda t: _text(t, width), "markdown": _markdown, "html": _html}[fmt]
    return "\n".join(draw(t) for t in tables)


# -- what every format shows ------------------------------------------------------------


def _title(table: TableSample) -> str:
    return f"{table.table} ({table.role} table): {table.describes}"


def _times(table: TableSample) -> tuple[str, str]:
    """The format of the table's cell timestamps and what the caption says of them."""
    stamps = [c.timestamp for _, cols in table.rows for cells in cols.values() for c in cells]
    if not stamps:
        return "%Y-%m-%d %H:%M", "no rows"
    fmt = "%H:%M"
    if any(us % 60_000_000 for us in stamps):
        fmt += ":%S"
    if any(us % 1_000_000 for us in stamps):
        fmt += ".%f"
    days = {_utc(us).date() for us in stamps}
    if len(days) == 1:
        return fmt, f"cell timestamps (after @) on {days.pop().isoformat()}, UTC"
    return "%Y-%m-%d " + fmt, "cell timestamps (after @) in UTC"


def _utc(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1e6, timezone.utc)


def _cell_lines(cells: tuple[SampleCell, ...], fmt: str) -> list[str]:
    """A column's versions, newest first: ``value @time`` each."""
    out = []
    for cell in cells:
        when = _utc(cell.timestamp).strftime(fmt)
        out.append(f"{cell.text} @{when[:-3] if fmt.endswith('%f') else when}")
    return out


def _key(key: bytes) -> str:
    text = key.decode("utf-8", errors="backslashreplace")
    return repr(text) if text != text.strip() or not text.isprintable() else text


def _grid(table: TableSample) -> tuple[list[str], list[list[list[str]]], str]:
    """The header, the rows (each a list of cell lines per column) and the caption."""
    fmt, note = _times(table)
    header = [_KEY, *table.columns]
    rows = [[[_key(key)], *(_cell_lines(cols.get(c, ()), fmt) for c in table.columns)]
            for key, cols in table.rows]
    return header, rows, f"{note}; a column's versions newest first"


# -- text -------------------------------------------------------------------------------


def _text(table: TableSample, width: int) -> str:
    header, rows, note = _grid(table)
    widths = [max([len(header[i]), *(len(line) for r in rows for line in r[i])])
              for i in range(len(header))]
    parts = [_title(table), note]
    if not rows:
        return "\n".join([*parts, "(no rows)", ""])
    for chunk in _chunks(widths, width):
        parts += ["", *_text_grid(header, rows, widths, chunk)]
    return "\n".join(parts) + "\n"


def _chunks(widths: list[int], width: int) -> list[list[int]]:
    """Column indexes per grid, the row key (0) in each, each as wide as fits."""
    chunks: list[list[int]] = []
    current = [0]
    used = widths[0] + 4
    for i in range(1, len(widths)):
        if len(current) > 1 and used + widths[i] + 3 > width:
            chunks.append(current)
            current, used = [0], widths[0] + 4
        current.append(i)
        used += widths[i] + 3
    chunks.append(current)
    return chunks


def _text_grid(header: list[str], rows: list[list[list[str]]], widths: list[int],
               chunk: list[int]) -> list[str]:
    def rule(char: str) -> str:
        return "+" + "+".join(char * (widths[i] + 2) for i in chunk) + "+"

    def line(cells: list[str]) -> str:
        padded = (c.ljust(widths[i]) for i, c in zip(chunk, cells, strict=True))
        return "| " + " | ".join(padded) + " |"

    # A rule between rows only where a row takes several lines (a column's versions).
    tall = any(len(row[i]) > 1 for row in rows for i in chunk)
    out = [rule("-"), line([header[i] for i in chunk]), rule("=")]
    for row in rows:
        height = max(len(row[i]) for i in chunk)
        for n in range(height):
            out.append(line([row[i][n] if n < len(row[i]) else "" for i in chunk]))
        if tall:
            out.append(rule("-"))
    if not tall:
        out.append(rule("-"))
    return out


# -- markdown and html ------------------------------------------------------------------


def _markdown(table: TableSample) -> str:
    header, rows, note = _grid(table)

    def cell(lines: list[str]) -> str:
        return "<br>".join(html.escape(s, quote=False).replace("|", "\\|") for s in lines)

    out = [f"**{html.escape(_title(table), quote=False)}** ({note})", ""]
    out.append("| " + " | ".join(cell([h]) for h in header) + " |")
    out.append("|" + "---|" * len(header))
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def _html(table: TableSample) -> str:
    header, rows, note = _grid(table)
    e = html.escape
    out = ['<table class="tsmodel-layout">',
           f"<caption><strong>{e(_title(table))}</strong><br>{e(note)}</caption>",
           "<thead><tr>" + "".join(f"<th>{_html_column(h)}</th>" for h in header) +
           "</tr></thead>",
           "<tbody>"]
    for row in rows:
        cells = [f'<td class="key">{e(row[0][0])}</td>']
        cells += ["<td>" + "<br>".join(_html_cell(s) for s in lines) + "</td>"
                  for lines in row[1:]]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out) + "\n"


def _html_column(name: str) -> str:
    """A column heading: the family above the qualifier, so that columns stay narrow."""
    family, colon, qualifier = name.partition(":")
    if not colon:
        return html.escape(name)
    return f'<span class="family">{html.escape(family)}:</span><br>{html.escape(qualifier)}'


def _html_cell(line: str) -> str:
    value, at, when = line.rpartition(" @")
    return f'{html.escape(value)} <span class="time">@{html.escape(when)}</span>' if at \
        else html.escape(line)
