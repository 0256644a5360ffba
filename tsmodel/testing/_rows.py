"""Read a table's raw rows and compare them with the expected ones, cell by cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TypeAlias

from tsmodel.encoding.timestamps import to_micros
from tsmodel.ground.base import Backend, ReadRequest, RowRange, RowSet
from tsmodel.ground.gc import collects
from tsmodel.run.connection import Connection

__all__ = ["Versions", "ExpectedCell", "ExpectedRows", "table_rows", "assert_rows"]

#: A column's versions as read: ``(timestamp in microseconds, value)``, newest first.
Versions: TypeAlias = list[tuple[int, bytes]]

#: What a column should hold: a value (``bytes``, or ``str`` for its UTF-8
#: bytes) compared with the newest version only, or every version as
#: ``(timestamp, value)`` pairs, newest first, the timestamp in microseconds
#: since the epoch or an aware `datetime`.
ExpectedCell: TypeAlias = bytes | str | Sequence[tuple[int | datetime, bytes | str]]

#: Row key (``bytes``, or ``str`` for its UTF-8 bytes) → ``"family:qualifier"`` → cell.
ExpectedRows: TypeAlias = Mapping[bytes | str, Mapping[str, ExpectedCell]]


def table_rows(source: Connection | Backend, table: str, *, prefix: bytes | str | None = None,
               after_gc: bool = False) -> dict[bytes, dict[str, Versions]]:
    """A table's rows as stored: row key → ``"family:qualifier"`` → versions.

    Args:
        source: a `Connection` or an open backend.
        table: the table's name.
        prefix: read only the row keys that start with it.
        after_gc: leave out the versions the table's GC rules collect (and
            the rows left with none), as the table is once garbage collection
            has run. Bigtable and the emulator collect when they get to it, so
            two stores written alike may differ in them until then; the
            embedded store collects when asked.

    Returns:
        Rows in key order; in each, columns in the order the backend returns
        them (family, then qualifier) and their versions ``(timestamp in
        microseconds, value)``, newest first. A qualifier that is not UTF-8
        shows its bytes as ``\\xNN`` escapes.
    """
    backend = source.backend if isinstance(source, Connection) else source
    rows = RowSet() if prefix is None else RowSet(ranges=(RowRange.prefix(_bytes(prefix)),))
    result: dict[bytes, dict[str, Versions]] = {}
    for row in backend.read_rows(ReadRequest(table, rows=rows)):
        columns: dict[str, Versions] = {}
        for cell in row.cells:
            columns.setdefault(_column(cell.family, cell.qualifier), []).append(
                (cell.timestamp, cell.value))
        result[row.key] = columns
    return _after_gc(backend, table, result) if after_gc else result


def _after_gc(backend: Backend, table: str,
              rows: dict[bytes, dict[str, Versions]]) -> dict[bytes, dict[str, Versions]]:
    """``rows`` without the versions the table's GC rules collect now."""
    now = to_micros(datetime.now(timezone.utc))
    collected = {family: collects(rule, now)
                 for family, rule in backend.describe_table(table).families}
    kept_rows: dict[bytes, dict[str, Versions]] = {}
    for key, columns in rows.items():
        kept_columns: dict[str, Versions] = {}
        for column, versions in columns.items():
            test = collected[column.partition(":")[0]]
            kept = [(ts, value) for rank, (ts, value) in enumerate(versions)
                    if not test(rank, ts)]
            if kept:
                kept_columns[column] = kept
        if kept_columns:
            kept_rows[key] = kept_columns
    return kept_rows


def assert_rows(source: Connection | Backend, table: str, expected: ExpectedRows, *,
                prefix: bytes | str | None = None, after_gc: bool = False) -> None:
    """Check that ``table`` holds exactly the ``expected`` rows and cells.

    Every row and every column must be as expected, no more and no fewer (with
    ``prefix``: among the row keys that start with it). A column expected as a
    single value is compared with its newest version; a column expected as a
    list of ``(timestamp, value)`` pairs, with all of its versions:

        assert_rows(conn, "METRIC", {
            "server1#1426535612045": {
                "METRIC:CPU/CPU1_USR": struct.pack(">d", 0.02),
                "METRIC:NOTE": [(1426535612045000, "rebooted")],
            },
        })

    Args:
        source: a `Connection` or an open backend.
        table: the table's name.
        expected: row key → ``"family:qualifier"`` → value or versions
            (`ExpectedRows`).
        prefix: compare only the row keys that start with it.
        after_gc: compare the rows as they are once garbage collection has
            run (see `table_rows`).

    Raises:
        AssertionError: the rows differ; the message lists every missing,
            unexpected and different row and cell.
    """
    # pytest shows the caller's line and this message, not this helper's source.
    __tracebackhide__ = True
    want = {_bytes(key): {column: _expected_cell(cell) for column, cell in columns.items()}
            for key, columns in expected.items()}
    got = table_rows(source, table, prefix=prefix, after_gc=after_gc)
    lines: list[str] = []
    matching = 0
    for key in sorted(want.keys() | got.keys()):
        if key not in got:
            lines.append(f"- row {key!r}: missing")
            lines.extend(_cell_lines("-", want[key]))
        elif key not in want:
            lines.append(f"+ row {key!r}: not expected")
            lines.extend(_cell_lines("+", got[key]))
        else:
            differences = _row_differences(want[key], got[key])
            if differences:
                lines.append(f"  row {key!r}:")
                lines.extend(differences)
            else:
                matching += 1
    if lines:
        where = f"rows of table {table!r}" + (f" with prefix {prefix!r}" if prefix else "")
        raise AssertionError(
            f"{where} differ from the expected ones ({matching} as expected; "
            f"- expected, + stored):\n" + "\n".join(lines))


def _row_differences(want: dict[str, Versions | bytes],
                     got: dict[str, Versions]) -> list[str]:
    lines = []
    for column in sorted(want.keys() | got.keys()):
        expected, stored = want.get(column), got.get(column)
        if stored is None:
            lines.append(f"    - {column} = {_show(expected)}")
        elif expected is None:
            lines.append(f"    + {column} = {_show(stored)}")
        elif isinstance(expected, bytes):
            if stored[0][1] != expected:
                lines.append(f"      {column} (newest version):")
                lines.append(f"        - {expected!r}")
                lines.append(f"        + {stored[0][1]!r}")
        elif stored != expected:
            lines.append(f"      {column}:")
            lines.append(f"        - {_show(expected)}")
            lines.append(f"        + {_show(stored)}")
    return lines


def _cell_lines(sign: str, columns: Mapping[str, Versions | bytes]) -> list[str]:
    return [f"    {sign} {column} = {_show(cell)}" for column, cell in columns.items()]


def _show(cell: Versions | bytes | None) -> str:
    if isinstance(cell, list):
        return "[" + ", ".join(f"@{ts}: {value!r}" for ts, value in cell) + "]"
    return repr(cell)


def _expected_cell(cell: ExpectedCell) -> Versions | bytes:
    if isinstance(cell, (bytes, str)):
        return _bytes(cell)
    return [(to_micros(ts) if isinstance(ts, datetime) else ts, _bytes(value))
            for ts, value in cell]


def _column(family: str, qualifier: bytes) -> str:
    return f"{family}:{qualifier.decode('utf-8', errors='backslashreplace')}"


def _bytes(value: bytes | str) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value
