"""Aggregate column families (int64 sums) and `AddToCell`, on every backend.

The expectation is an independent model: a cell of a sum family holds the
sum of what was added to it at its (row, qualifier, timestamp), as 8 bytes
big-endian two's complement, wrapping around at 2**63 (measured on the
emulator). The emulator's answers that the embedded store matches were
measured with cbtemulator (Cloud SDK 528): an AddToCell into a plain family
is refused; an 8-byte SetCell into a sum family adds its value.
"""

from __future__ import annotations

import random
import struct

import pytest

from tsmodel.backends.base import (
    AddToCell,
    Backend,
    DeleteRow,
    GcRule,
    ReadRequest,
    RowMutation,
    SetCell,
    TableSpec,
)

MS = 1_000
HOUR = 3_600_000_000


def _make(backend: Backend, name: str) -> None:
    backend.create_table(TableSpec(name, (("a", GcRule()), ("p", GcRule())), aggregates=("a",)))


def _cells(backend: Backend, name: str) -> dict[tuple[bytes, str, bytes, int], int]:
    out = {}
    for row in backend.read_rows(ReadRequest(name)):
        for cell in row.cells:
            value = struct.unpack(">q", cell.value)[0] if cell.family == "a" else cell.value
            out[(row.key, cell.family, cell.qualifier, cell.timestamp)] = value
    return out


def _wrap(n: int) -> int:
    return (n + 2**63) % 2**64 - 2**63


def test_describe_table_names_the_aggregate_families(backend: Backend, table_name: str) -> None:
    _make(backend, table_name)
    spec = backend.describe_table(table_name)
    assert spec.aggregates == ("a",)
    assert spec.family_names() == ("a", "p")
    # Creating again keeps the family's kind (a value type cannot change).
    backend.create_table(TableSpec(table_name, (("a", GcRule()), ("p", GcRule()))))
    assert backend.describe_table(table_name).aggregates == ("a",)


def test_add_to_cell_sums_per_row_column_and_timestamp(backend: Backend,
                                                       table_name: str) -> None:
    _make(backend, table_name)
    rng = random.Random(7)
    expected: dict[tuple[bytes, str, bytes, int], int] = {}
    for _ in range(4):  # four calls, several entries and mutations each
        entries = []
        for row in (b"r1", b"r2", b"r3"):
            mutations = []
            for _ in range(rng.randrange(1, 5)):
                qualifier = rng.choice((b"count", b"sum"))
                ts = rng.choice((0, HOUR, 2 * HOUR))
                value = rng.randrange(-10**12, 10**12)
                mutations.append(AddToCell("a", qualifier, ts, value))
                slot = (row, "a", qualifier, ts)
                expected[slot] = _wrap(expected.get(slot, 0) + value)
            entries.append(RowMutation(row, tuple(mutations)))
        assert all(o.ok for o in backend.mutate_rows(table_name, entries))
    assert _cells(backend, table_name) == expected
    # Cells come newest first within a column, as any cells.
    row = next(iter(backend.read_rows(ReadRequest(table_name))))
    stamps = [c.timestamp for c in row.cells if c.qualifier == row.cells[0].qualifier]
    assert stamps == sorted(stamps, reverse=True)


def test_sums_wrap_around_at_int64(backend: Backend, table_name: str) -> None:
    _make(backend, table_name)
    top = 2**63 - 1
    outcomes = backend.mutate_rows(table_name, [
        RowMutation(b"r", (AddToCell("a", b"c", 0, top), AddToCell("a", b"c", 0, 1)))])
    assert all(o.ok for o in outcomes)
    assert _cells(backend, table_name) == {(b"r", "a", b"c", 0): -(2**63)}


def test_delete_row_then_add_starts_again(backend: Backend, table_name: str) -> None:
    _make(backend, table_name)
    first = backend.mutate_rows(table_name, [RowMutation(b"r", (AddToCell("a", b"c", HOUR, 5),
                                                                SetCell("p", b"x", HOUR, b"v")))])
    again = backend.mutate_rows(table_name, [
        RowMutation(b"r", (DeleteRow(), AddToCell("a", b"c", HOUR, 3)))])
    assert all(o.ok for o in first + again)
    assert _cells(backend, table_name) == {(b"r", "a", b"c", HOUR): 3}


def test_add_to_cell_into_a_plain_family_is_refused(backend: Backend, table_name: str) -> None:
    _make(backend, table_name)
    outcomes = backend.mutate_rows(table_name, [
        RowMutation(b"bad", (AddToCell("p", b"c", 0, 1),)),
        RowMutation(b"good", (AddToCell("a", b"c", 0, 2),))])
    assert not outcomes[0].ok and outcomes[0].error is not None
    assert outcomes[1].ok
    assert _cells(backend, table_name) == {(b"good", "a", b"c", 0): 2}


def test_an_eight_byte_set_cell_into_a_sum_family_adds(backend: Backend,
                                                       table_name: str) -> None:
    _make(backend, table_name)
    for mutation in (AddToCell("a", b"c", 0, 2), SetCell("a", b"c", 0, struct.pack(">q", 40))):
        assert backend.mutate_rows(table_name, [RowMutation(b"r", (mutation,))])[0].ok
    assert _cells(backend, table_name) == {(b"r", "a", b"c", 0): 42}


@pytest.mark.parametrize("ts", [-1, 1])
def test_add_to_cell_timestamps_are_whole_non_negative_milliseconds(
        backend: Backend, table_name: str, ts: int) -> None:
    _make(backend, table_name)
    outcome = backend.mutate_rows(table_name, [RowMutation(b"r", (AddToCell("a", b"c", ts, 1),))])
    assert not outcome[0].ok
    assert _cells(backend, table_name) == {}
