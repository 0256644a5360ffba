"""The conformance suite of the backend protocol.

Every backend runs these tests through the ``backend`` fixture (see
``conftest.py``). They use only the protocol of :mod:`tsmodel.backends.base`
and read ``backend.features`` for optional capabilities, so a new backend
opts in by adding itself to the fixture.

The expected results follow Cloud Bigtable: unsigned byte order of row keys,
cells ordered by family name, qualifier bytes and newest timestamp first,
``[start, end)`` bounds, per-row atomic mutations. Garbage collection is only
asserted after ``collect_garbage()`` where the backend has it (the embedded
store); elsewhere the tests rely only on what Bigtable guarantees before GC
has run.
"""

from __future__ import annotations

import collections
import itertools
import random
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tsmodel.backends.base import (
    Backend,
    Cell,
    DeleteCells,
    DeleteFamily,
    DeleteRow,
    Features,
    GcRule,
    MutationOutcome,
    MutationStatus,
    Reachable,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowRange,
    RowSet,
    SetCell,
    TableSpec,
)
from tsmodel.errors import BackendError, TableNotFoundError

# --------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------

#: 2015-03-16T19:53:32.045Z in microseconds: a whole number of milliseconds.
T0 = 1_426_535_612_045_000
MS = 1_000
#: 2100-01-01T00:00:00Z in microseconds.
FAR_FUTURE = 4_102_444_800_000_000

APPLIED = MutationStatus.APPLIED
FAILED = MutationStatus.FAILED

ALL_ROWS = RowSet()
NO_FILTER = ReadFilter()
NO_GC = GcRule()

PROPERTY = settings(max_examples=25, deadline=None, database=None)

Dumped = list[tuple[bytes, list[Cell]]]


def ts(n: int) -> int:
    """``n`` milliseconds after :data:`T0`, in microseconds."""
    return T0 + n * MS


def cell(family: str, qualifier: bytes, n: int, value: bytes) -> Cell:
    """A cell at timestamp ``ts(n)``."""
    return Cell(family, qualifier, ts(n), value)


def set_cell(c: Cell) -> SetCell:
    return SetCell(c.family, c.qualifier, c.timestamp, c.value)


def unique_name(prefix: str = "p_") -> str:
    return prefix + uuid.uuid4().hex[:12]


def create(backend: Backend, name: str, *families: str, gc: GcRule = NO_GC) -> str:
    """Create table ``name`` with ``families``, all with GC rule ``gc``."""
    backend.create_table(TableSpec(name, tuple((f, gc) for f in families)))
    return name


def apply(backend: Backend, table: str, *entries: RowMutation) -> list[MutationStatus]:
    """Run one ``mutate_rows`` call; the status of each entry."""
    outcomes = backend.mutate_rows(table, list(entries))
    assert all(isinstance(o, MutationOutcome) for o in outcomes)
    return [o.status for o in outcomes]


def write(backend: Backend, table: str, rows: Mapping[bytes, Sequence[Cell]]) -> None:
    """Write ``rows`` (key -> cells) in one call and check every entry applied."""
    entries = [RowMutation(k, tuple(set_cell(c) for c in cells)) for k, cells in rows.items()]
    assert apply(backend, table, *entries) == [APPLIED] * len(entries)


def read(
    backend: Backend,
    table: str,
    rows: RowSet = ALL_ROWS,
    *,
    limit: int | None = None,
    reverse: bool = False,
    **filter_fields: object,
) -> Dumped:
    """Read and return ``[(row key, [cells])]``; keyword arguments build the filter."""
    request = ReadRequest(table, rows, ReadFilter(**filter_fields), limit, reverse)  # type: ignore[arg-type]
    return [(row.key, list(row.cells)) for row in backend.read_rows(request)]


def read_keys(
    backend: Backend, table: str, rows: RowSet = ALL_ROWS, **kwargs: object
) -> list[bytes]:
    return [key for key, _ in read(backend, table, rows, **kwargs)]  # type: ignore[arg-type]


def cell_order(c: Cell) -> tuple[str, bytes, int]:
    """Bigtable's order of cells within a row."""
    return (c.family, c.qualifier, -c.timestamp)


def expected_read(
    data: Mapping[bytes, Sequence[Cell]],
    f: ReadFilter = NO_FILTER,
    limit: int | None = None,
    reverse: bool = False,
) -> Dumped:
    """What a read of ``data`` must return: the protocol's contract as a model."""
    out: Dumped = []
    for key in sorted(data, reverse=reverse):
        cells = [c for c in sorted(data[key], key=cell_order) if passes(f, c)]
        if f.cells_per_column is not None:
            cells = newest_per_column(cells, f.cells_per_column)
        if f.strip_values:
            cells = [c._replace(value=b"") for c in cells]
        if cells:
            out.append((key, cells))
    return out[:limit] if limit else out


def passes(f: ReadFilter, c: Cell) -> bool:
    return (
        (f.families is None or c.family in f.families)
        and (f.columns is None or (c.family, c.qualifier) in f.columns)
        and (f.qualifier_start is None or c.qualifier >= f.qualifier_start)
        and (f.qualifier_end is None or c.qualifier < f.qualifier_end)
        and (f.timestamp_start is None or c.timestamp >= f.timestamp_start)
        and (f.timestamp_end is None or c.timestamp < f.timestamp_end)
        and (f.timestamps is None or c.timestamp in f.timestamps)
    )


def newest_per_column(cells: Sequence[Cell], n: int) -> list[Cell]:
    """The first ``n`` cells of each column; ``cells`` are in Bigtable order."""
    seen: collections.Counter[tuple[str, bytes]] = collections.Counter()
    kept = []
    for c in cells:
        seen[c.family, c.qualifier] += 1
        if seen[c.family, c.qualifier] <= n:
            kept.append(c)
    return kept


def gc_canonical(rule: GcRule) -> object:
    """A GC rule in a form where equivalent spellings compare equal.

    A leaf with both limits equals the combination of two leaves; the order of
    the rules of a union or intersection does not matter.
    """
    parts: list[object] = []
    if rule.max_versions is not None:
        parts.append(("max_versions", rule.max_versions))
    if rule.max_age is not None:
        parts.append(("max_age", rule.max_age))
    parts.extend(gc_canonical(r) for r in rule.rules)
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return (rule.mode, frozenset(parts))


def now_us() -> int:
    """The current time in microseconds, a whole number of milliseconds."""
    return int(time.time() * 1000) * MS


def require_reverse(backend: Backend) -> None:
    if not backend.features.reverse_scan:
        pytest.skip("backend has no reverse scans (features.reverse_scan is false)")


def collect_garbage(backend: Backend, table: str) -> None:
    """Run garbage collection now, on a backend that can (the embedded store)."""
    collect = getattr(backend, "collect_garbage", None)
    if collect is None:
        pytest.skip("GC runs when the backend gets to it; it cannot be started here")
    collect(table)


@pytest.fixture
def table(backend: Backend, table_name: str) -> Iterator[str]:
    """A fresh table with families ``cf`` and ``cf2`` (no GC), deleted afterwards."""
    create(backend, table_name, "cf", "cf2")
    yield table_name
    backend.delete_table(table_name)


# --------------------------------------------------------------------------
# The backend object
# --------------------------------------------------------------------------


def test_backend_satisfies_protocol(backend: Backend) -> None:
    assert isinstance(backend, Backend)
    assert isinstance(backend.features, Features)


def test_a_live_backend_is_reachable(backend: Backend) -> None:
    assert isinstance(backend, Reachable)
    backend.check_reachable(5.0)  # returns: the backend answers


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def test_create_table_twice_keeps_data(backend: Backend, table: str) -> None:
    write(backend, table, {b"r": [cell("cf", b"q", 1, b"v")]})
    create(backend, table, "cf", "cf2")
    assert read(backend, table) == [(b"r", [cell("cf", b"q", 1, b"v")])]
    assert dict(backend.describe_table(table).families).keys() == {"cf", "cf2"}


def test_create_table_adds_family_and_leaves_others(backend: Backend, table: str) -> None:
    write(backend, table, {b"r": [cell("cf", b"q", 1, b"v")]})
    entry = RowMutation(b"r", (set_cell(cell("cf3", b"q", 1, b"new")),))
    assert apply(backend, table, entry) == [FAILED]

    create(backend, table, "cf3")  # cf and cf2 are not in the spec: left alone

    assert dict(backend.describe_table(table).families).keys() == {"cf", "cf2", "cf3"}
    assert apply(backend, table, entry) == [APPLIED]
    assert read(backend, table) == [
        (b"r", [cell("cf", b"q", 1, b"v"), cell("cf3", b"q", 1, b"new")])
    ]


def test_create_table_sets_gc_rule_of_existing_family(backend: Backend, table_name: str) -> None:
    create(backend, table_name, "cf", "cf2", gc=GcRule(max_versions=1))
    create(backend, table_name, "cf", gc=GcRule(max_versions=3))
    families = dict(backend.describe_table(table_name).families)
    assert gc_canonical(families["cf"]) == gc_canonical(GcRule(max_versions=3))
    assert gc_canonical(families["cf2"]) == gc_canonical(GcRule(max_versions=1))


GC_RULES = {
    "none": GcRule(),
    "max_versions_1": GcRule(max_versions=1),
    "max_versions_5": GcRule(max_versions=5),
    "max_age_7d": GcRule(max_age=timedelta(days=7)),
    "max_age_1h30s": GcRule(max_age=timedelta(hours=1, seconds=30)),
    "leaf_both_union": GcRule(max_versions=2, max_age=timedelta(days=1)),
    "leaf_both_intersection": GcRule(
        max_versions=2, max_age=timedelta(days=1), mode="intersection"
    ),
    "union": GcRule(
        rules=(GcRule(max_versions=3), GcRule(max_age=timedelta(days=30))), mode="union"
    ),
    "intersection": GcRule(
        rules=(GcRule(max_age=timedelta(days=30)), GcRule(max_versions=3)), mode="intersection"
    ),
    "union_of_intersection": GcRule(
        rules=(
            GcRule(max_versions=10),
            GcRule(
                rules=(GcRule(max_age=timedelta(days=30)), GcRule(max_versions=2)),
                mode="intersection",
            ),
        ),
        mode="union",
    ),
    "intersection_of_union": GcRule(
        rules=(
            GcRule(rules=(GcRule(max_versions=1), GcRule(max_age=timedelta(hours=6)))),
            GcRule(max_age=timedelta(days=2)),
        ),
        mode="intersection",
    ),
}


@pytest.mark.parametrize("rule", GC_RULES.values(), ids=GC_RULES.keys())
def test_describe_table_round_trips_gc_rules(
    backend: Backend, table_name: str, rule: GcRule
) -> None:
    backend.create_table(TableSpec(table_name, (("data", rule), ("plain", GcRule()))))
    spec = backend.describe_table(table_name)
    assert isinstance(spec, TableSpec)
    assert spec.name == table_name
    families = dict(spec.families)
    assert families.keys() == {"data", "plain"}
    assert gc_canonical(families["data"]) == gc_canonical(rule)
    assert families["plain"].is_empty()


def test_list_tables_is_sorted_and_contains_table(backend: Backend, table: str) -> None:
    other = create(backend, unique_name("a_"), "cf")
    try:
        tables = backend.list_tables()
        assert table in tables and other in tables
        assert tables == sorted(tables)
    finally:
        backend.delete_table(other)
    assert other not in backend.list_tables()


def test_delete_table_then_table_not_found(backend: Backend, table_name: str) -> None:
    create(backend, table_name, "cf")
    write(backend, table_name, {b"r": [cell("cf", b"q", 1, b"v")]})
    backend.delete_table(table_name)

    assert table_name not in backend.list_tables()
    with pytest.raises(TableNotFoundError):
        list(backend.read_rows(ReadRequest(table_name)))
    with pytest.raises(TableNotFoundError):
        backend.describe_table(table_name)
    with pytest.raises(TableNotFoundError):
        backend.mutate_rows(table_name, [RowMutation(b"r", (DeleteRow(),))])


def test_delete_family_of_a_table(backend: Backend, table_name: str) -> None:
    create(backend, table_name, "cf", "old")
    write(backend, table_name, {b"r": [cell("cf", b"q", 1, b"v"), cell("old", b"q", 1, b"x")],
                                b"s": [cell("old", b"q", 2, b"only old")]})
    backend.delete_family(table_name, "old")
    backend.delete_family(table_name, "never-there")  # no error
    assert backend.describe_table(table_name).family_names() == ("cf",)
    assert read(backend, table_name) == [(b"r", [cell("cf", b"q", 1, b"v")])]
    create(backend, table_name, "cf", "old")  # a family added again starts empty
    assert read(backend, table_name) == [(b"r", [cell("cf", b"q", 1, b"v")])]
    with pytest.raises(TableNotFoundError):
        backend.delete_family(unique_name(), "cf")


def test_delete_missing_table_is_no_error(backend: Backend, table_name: str) -> None:
    backend.delete_table(table_name)
    backend.delete_table(table_name)
    assert table_name not in backend.list_tables()


def test_recreated_table_starts_empty(backend: Backend, table_name: str) -> None:
    create(backend, table_name, "cf", "old")
    write(backend, table_name, {b"r": [cell("cf", b"q", 1, b"v")]})
    backend.delete_table(table_name)
    create(backend, table_name, "cf")
    assert read(backend, table_name) == []
    assert dict(backend.describe_table(table_name).families).keys() == {"cf"}
    backend.delete_table(table_name)


def test_missing_table_errors(backend: Backend, table_name: str) -> None:
    with pytest.raises(TableNotFoundError) as info:
        backend.describe_table(table_name)
    assert isinstance(info.value, BackendError)
    with pytest.raises(TableNotFoundError):
        list(backend.read_rows(ReadRequest(table_name, RowSet(keys=(b"r",)))))


def test_sample_row_keys_cut_the_table_in_key_order(
        backend: Backend, table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tsmodel.backends import embedded

    monkeypatch.setattr(embedded, "SAMPLE_BYTES", 2_000)  # a few samples on the embedded store
    assert backend.sample_row_keys(table) in ([], [(b"", 0)])  # empty: nothing to cut
    keys = [b"row%05d" % i for i in range(0, 3000, 3)]
    write(backend, table, {k: [cell("cf", b"q", 1, b"v" * 100)] for k in keys})
    samples = backend.sample_row_keys(table)
    sampled = [s.key for s in samples if s.key]
    # Strictly ascending keys, mostly the table's own (the emulator also samples
    # the empty row its family check leaves, which reads never return); only the
    # last may be b"" (the end), and the offsets never decrease.
    assert set(sampled) & set(keys)
    assert all(k in keys or k > keys[-1] for k in sampled)
    assert sampled == sorted(set(sampled))
    assert all(s.key for s in samples[:-1])
    assert [s.offset for s in samples] == sorted(s.offset for s in samples)
    assert samples[-1].offset > 0
    if isinstance(backend, embedded.EmbeddedBackend):  # ~2,000 bytes apart: about 16 rows
        assert sampled[0] == keys[0] and len(samples) > 20


def test_sample_row_keys_of_a_missing_table(backend: Backend, table_name: str) -> None:
    with pytest.raises(TableNotFoundError):
        backend.sample_row_keys(table_name)


# --------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------


def test_set_cell_round_trip(backend: Backend, table: str) -> None:
    write(backend, table, {b"r": [cell("cf", b"q", 1, b"value")]})
    [row] = backend.read_rows(ReadRequest(table))
    assert isinstance(row, Row)
    assert row.key == b"r"
    assert isinstance(row.cells, tuple)
    assert row.cells == (Cell("cf", b"q", T0 + MS, b"value"),)


def test_same_address_overwrites_value(backend: Backend, table: str) -> None:
    write(backend, table, {b"r": [cell("cf", b"q", 1, b"first")]})
    write(backend, table, {b"r": [cell("cf", b"q", 1, b"second")]})
    assert read(backend, table) == [(b"r", [cell("cf", b"q", 1, b"second")])]

    # Within one entry, mutations apply in order: the last write wins.
    write(backend, table, {b"r": [cell("cf", b"q", 1, b"x"), cell("cf", b"q", 1, b"third")]})
    assert read(backend, table) == [(b"r", [cell("cf", b"q", 1, b"third")])]


def test_multiple_versions_newest_first(backend: Backend, table: str) -> None:
    write(backend, table, {b"r": [cell("cf", b"q", 2, b"b"), cell("cf", b"q", 1, b"a")]})
    write(backend, table, {b"r": [cell("cf", b"q", 3, b"c")]})
    assert read(backend, table) == [
        (b"r", [cell("cf", b"q", 3, b"c"), cell("cf", b"q", 2, b"b"), cell("cf", b"q", 1, b"a")])
    ]


def test_mutate_rows_empty_call(backend: Backend, table: str) -> None:
    assert backend.mutate_rows(table, []) == []


def test_failed_entry_is_not_applied_and_others_are(backend: Backend, table: str) -> None:
    good = cell("cf", b"q", 1, b"ok")
    statuses = apply(
        backend,
        table,
        RowMutation(b"a", (set_cell(good),)),
        RowMutation(b"b", (set_cell(good), SetCell("nope", b"q", ts(1), b"bad"))),
        RowMutation(b"c", (set_cell(good),)),
    )
    assert statuses == [APPLIED, FAILED, APPLIED]
    assert read(backend, table) == [(b"a", [good]), (b"c", [good])]


def test_an_entry_unless_newer_applies_only_to_a_row_without_a_newer_cell(
        backend: Backend, table: str) -> None:
    """``RowMutation.unless_newer``: checked and applied atomically, per entry, beside
    unconditional entries; a row holding a cell at or after the time is left as it is
    (APPLIED); an invalid entry fails alone."""
    write(backend, table, {b"new": [cell("cf", b"a", 5, b"5")],
                           b"old": [cell("cf", b"a", 1, b"1")]})
    late = (set_cell(cell("cf2", b"b", 3, b"late")), DeleteCells("cf", b"a", ts(0), ts(4)))
    statuses = apply(
        backend, table,
        RowMutation(b"new", late, unless_newer=ts(4)),  # a cell at 5: left as it is
        RowMutation(b"old", late, unless_newer=ts(4)),  # nothing at or after 4: applied
        RowMutation(b"none", late, unless_newer=ts(4)),  # no row: applied
        RowMutation(b"edge", (set_cell(cell("cf", b"a", 4, b"4")),)),
        RowMutation(b"bad", (SetCell("nope", b"q", ts(1), b"x"),), unless_newer=ts(4)),
    )
    assert statuses == [APPLIED, APPLIED, APPLIED, APPLIED, FAILED]
    assert read(backend, table) == [
        (b"edge", [cell("cf", b"a", 4, b"4")]),
        (b"new", [cell("cf", b"a", 5, b"5")]),
        (b"none", [cell("cf2", b"b", 3, b"late")]),
        (b"old", [cell("cf2", b"b", 3, b"late")]),
    ]
    # A cell exactly at the time counts as newer; one just before does not.
    assert apply(backend, table,
                 RowMutation(b"edge", (set_cell(cell("cf2", b"b", 3, b"x")),), unless_newer=ts(4)),
                 RowMutation(b"edge", (set_cell(cell("cf2", b"c", 3, b"y")),), unless_newer=ts(5)),
                 ) == [APPLIED, APPLIED]
    assert read(backend, table)[0] == (b"edge", [cell("cf", b"a", 4, b"4"),
                                                 cell("cf2", b"c", 3, b"y")])


def test_failed_entry_leaves_existing_row_untouched(backend: Backend, table: str) -> None:
    old = cell("cf", b"q", 1, b"old")
    write(backend, table, {b"r": [old]})
    bad = RowMutation(
        b"r",
        (DeleteRow(), set_cell(cell("cf", b"q", 2, b"new")), SetCell("nope", b"q", ts(2), b"x")),
    )
    assert apply(backend, table, bad) == [FAILED]
    assert read(backend, table) == [(b"r", [old])]


def test_entry_without_mutations_fails_alone(backend: Backend, table: str) -> None:
    # Cloud Bigtable refuses an entry with no mutation (INVALID_ARGUMENT, "No
    # mutations provided"): it is FAILED on every backend, the others apply.
    good = cell("cf", b"q", 1, b"ok")
    entries = [RowMutation(b"a", (set_cell(good),)), RowMutation(b"empty", ()),
               RowMutation(b"c", (set_cell(good),))]
    outcomes = backend.mutate_rows(table, entries)
    assert [o.status for o in outcomes] == [APPLIED, FAILED, APPLIED]
    assert "b'empty'" in str(outcomes[1].error) and "mutation" in str(outcomes[1].error)
    assert apply(backend, table, RowMutation(b"empty", ())) == [FAILED]  # alone in a call
    # A mutation that selects nothing is still a mutation: applied, changing nothing.
    nothing = DeleteCells("cf", b"q", ts(5), ts(5))
    assert apply(backend, table, RowMutation(b"a", (nothing,))) == [APPLIED]
    assert read(backend, table) == [(b"a", [good]), (b"c", [good])]


def test_mutate_rows_missing_table(backend: Backend, table_name: str) -> None:
    entry = RowMutation(b"r", (set_cell(cell("cf", b"q", 1, b"v")),))
    with pytest.raises(TableNotFoundError):
        backend.mutate_rows(table_name, [entry])
    assert table_name not in backend.list_tables()


DELETE_RANGES = {
    "all_versions": (None, None, [4, 3, 2, 1], []),
    "closed_open": (2, 4, [4, 3, 2, 1], [4, 1]),
    "from_start": (2, None, [4, 3, 2, 1], [1]),
    "until_end": (None, 3, [4, 3, 2, 1], [4, 3]),
    "nothing_in_range": (5, 9, [4, 3, 2, 1], [4, 3, 2, 1]),
}


@pytest.mark.parametrize(
    "start, end, versions, left", DELETE_RANGES.values(), ids=DELETE_RANGES.keys()
)
def test_delete_cells_timestamp_range(
    backend: Backend,
    table: str,
    start: int | None,
    end: int | None,
    versions: list[int],
    left: list[int],
) -> None:
    untouched = [cell("cf", b"other", 2, b"o"), cell("cf2", b"q", 2, b"f")]
    write(backend, table, {b"r": [cell("cf", b"q", n, b"v%d" % n) for n in versions] + untouched})
    delete = DeleteCells(
        "cf", b"q", None if start is None else ts(start), None if end is None else ts(end)
    )
    assert apply(backend, table, RowMutation(b"r", (delete,))) == [APPLIED]
    expected = [cell("cf", b"q", n, b"v%d" % n) for n in left]
    assert read(backend, table) == [(b"r", sorted(expected + untouched, key=cell_order))]


def test_delete_cells_of_only_column_removes_row(backend: Backend, table: str) -> None:
    write(backend, table, {b"a": [cell("cf", b"q", 1, b"v")], b"b": [cell("cf", b"q", 1, b"v")]})
    assert apply(backend, table, RowMutation(b"a", (DeleteCells("cf", b"q"),))) == [APPLIED]
    assert read_keys(backend, table) == [b"b"]


def test_delete_family(backend: Backend, table: str) -> None:
    keep = cell("cf2", b"q", 1, b"keep")
    write(
        backend,
        table,
        {
            b"r": [cell("cf", b"a", 1, b"x"), cell("cf", b"b", 2, b"y"), keep],
            b"s": [cell("cf", b"a", 1, b"other row")],
        },
    )
    statuses = apply(
        backend,
        table,
        RowMutation(b"r", (DeleteFamily("cf"),)),
        RowMutation(b"t", (DeleteFamily("cf"),)),  # a missing row: nothing to do
    )
    assert statuses == [APPLIED, APPLIED]
    assert read(backend, table) == [(b"r", [keep]), (b"s", [cell("cf", b"a", 1, b"other row")])]


def test_delete_row(backend: Backend, table: str) -> None:
    write(
        backend,
        table,
        {
            b"r": [cell("cf", b"a", 1, b"x"), cell("cf2", b"b", 2, b"y")],
            b"r\x00": [cell("cf", b"a", 1, b"z")],
        },
    )
    statuses = apply(
        backend, table, RowMutation(b"r", (DeleteRow(),)), RowMutation(b"missing", (DeleteRow(),))
    )
    assert statuses == [APPLIED, APPLIED]
    assert read(backend, table) == [(b"r\x00", [cell("cf", b"a", 1, b"z")])]


def test_mutations_apply_in_order_within_entry(backend: Backend, table: str) -> None:
    write(backend, table, {b"a": [cell("cf", b"old", 1, b"x")], b"b": [cell("cf", b"q", 1, b"x")]})
    statuses = apply(
        backend,
        table,
        RowMutation(b"a", (DeleteRow(), set_cell(cell("cf", b"new", 2, b"y")))),
        RowMutation(b"b", (set_cell(cell("cf", b"q", 3, b"y")), DeleteFamily("cf"))),
        RowMutation(
            b"c",
            (
                set_cell(cell("cf", b"q", 1, b"1")),
                DeleteCells("cf", b"q"),
                set_cell(cell("cf", b"q", 2, b"2")),
            ),
        ),
    )
    assert statuses == [APPLIED] * 3
    assert read(backend, table) == [
        (b"a", [cell("cf", b"new", 2, b"y")]),
        (b"c", [cell("cf", b"q", 2, b"2")]),
    ]


def test_empty_value_is_a_cell(backend: Backend, table: str) -> None:
    write(backend, table, {b"e": [cell("cf", b"q", 1, b"")], b"f": [cell("cf2", b"q", 1, b"v")]})
    assert read(backend, table) == [
        (b"e", [cell("cf", b"q", 1, b"")]),
        (b"f", [cell("cf2", b"q", 1, b"v")]),
    ]
    assert read(backend, table, RowSet(keys=(b"e",)), cells_per_column=1) == [
        (b"e", [cell("cf", b"q", 1, b"")])
    ]


def test_empty_qualifier(backend: Backend, table: str) -> None:
    write(backend, table, {b"r": [cell("cf", b"a", 1, b"a"), cell("cf", b"", 1, b"empty")]})
    assert read(backend, table) == [
        (b"r", [cell("cf", b"", 1, b"empty"), cell("cf", b"a", 1, b"a")])
    ]


def test_timestamp_not_whole_ms_fails_entry(backend: Backend, table: str) -> None:
    statuses = apply(
        backend,
        table,
        RowMutation(
            b"a", (set_cell(cell("cf", b"q", 1, b"ok")), SetCell("cf", b"r", T0 + 1, b"x"))
        ),
        RowMutation(b"b", (set_cell(cell("cf", b"q", 1, b"ok")),)),
    )
    assert statuses == [FAILED, APPLIED]
    assert read(backend, table) == [(b"b", [cell("cf", b"q", 1, b"ok")])]


def test_longest_row_key(backend: Backend, table: str) -> None:
    key = bytes(range(256)) * 16  # 4 KiB, Bigtable's limit
    write(backend, table, {key: [cell("cf", b"q", 1, b"v")], key[:-1]: [cell("cf", b"q", 1, b"w")]})
    assert read_keys(backend, table) == [key[:-1], key]
    assert read(backend, table, RowSet(keys=(key,))) == [(key, [cell("cf", b"q", 1, b"v")])]


def test_large_values_round_trip(backend: Backend, table: str) -> None:
    rng = random.Random(7)
    big1 = rng.randbytes(1 << 20)
    big2 = rng.randbytes(1_000_003)
    write(backend, table, {b"a": [cell("cf", b"q", 1, big1)], b"b": [cell("cf", b"q", 1, big2)]})
    rows = read(backend, table)
    assert [k for k, _ in rows] == [b"a", b"b"]
    assert rows[0][1][0].value == big1
    assert rows[1][1][0].value == big2


# --------------------------------------------------------------------------
# Reads: which rows
# --------------------------------------------------------------------------

ODD_KEYS = [
    b"\x00",
    b"\x00\x00",
    b"\x01",
    b"A",
    b"a",
    b"a\x00",
    b"a\x00\x00",
    b"a\x01",
    b"a\x7f",
    b"a\x80",
    b"a\xff",
    b"ab",
    b"abc",
    b"b",
    b"\x7f",
    b"\x80",
    b"\xc3\xa9",
    b"\xe2\x82\xac",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
    b"\xff\xff\xff",
]


@pytest.fixture
def odd_keys_table(backend: Backend, table: str) -> str:
    """``table`` with one row per key of ``ODD_KEYS``, written in shuffled order."""
    keys = ODD_KEYS[:]
    random.Random(3).shuffle(keys)
    write(backend, table, {k: [cell("cf", b"k", 1, k)] for k in keys})
    return table


def test_keys_in_unsigned_byte_order(backend: Backend, odd_keys_table: str) -> None:
    rows = read(backend, odd_keys_table)
    assert [k for k, _ in rows] == sorted(ODD_KEYS)
    assert all(cells == [cell("cf", b"k", 1, k)] for k, cells in rows)


def test_row_set_exact_keys(backend: Backend, odd_keys_table: str) -> None:
    wanted = (b"\xff", b"a", b"missing", b"\x00", b"a", b"\xc3\xa9")
    assert read_keys(backend, odd_keys_table, RowSet(keys=wanted)) == [
        b"\x00",
        b"a",
        b"\xc3\xa9",
        b"\xff",
    ]
    assert read_keys(backend, odd_keys_table, RowSet(keys=(b"missing",))) == []
    assert read_keys(backend, odd_keys_table, RowSet(keys=(b"a\x00\x00\x00",))) == []


def test_row_set_ranges(backend: Backend, odd_keys_table: str) -> None:
    def keys_in(*ranges: RowRange) -> list[bytes]:
        return read_keys(backend, odd_keys_table, RowSet(ranges=ranges))

    assert keys_in(RowRange(b"a", b"ab")) == [b"a", b"a\x00", b"a\x00\x00", b"a\x01"]
    assert keys_in(RowRange(None, b"\x01")) == [b"\x00", b"\x00\x00"]
    assert keys_in(RowRange(b"\xe2\x82\xac", None)) == [
        b"\xe2\x82\xac",
        b"\xff",
        b"\xff\x00",
        b"\xff\xff",
        b"\xff\xff\xff",
    ]
    assert keys_in(RowRange(None, None)) == sorted(ODD_KEYS)
    assert keys_in(RowRange(b"abd", b"b")) == [b"a\x7f", b"a\x80", b"a\xff"]
    assert keys_in(RowRange(b"abd", b"a\x7f")) == []
    assert keys_in(RowRange(b"\x00\x00", b"\x00\x01"), RowRange(b"\xff\xff", None)) == [
        b"\x00\x00",
        b"\xff\xff",
        b"\xff\xff\xff",
    ]


def test_row_set_overlaps_give_no_duplicates(backend: Backend, odd_keys_table: str) -> None:
    rows = RowSet(
        keys=(b"a\x01", b"b", b"\x00"),
        ranges=(RowRange(b"a", b"a\x80"), RowRange(b"a\x01", b"ab"), RowRange(b"ab", b"b")),
    )
    assert read_keys(backend, odd_keys_table, rows) == [
        b"\x00",
        b"a",
        b"a\x00",
        b"a\x00\x00",
        b"a\x01",
        b"ab",
        b"abc",
        b"a\x7f",
        b"a\x80",
        b"a\xff",
        b"b",
    ]


def test_empty_ranges_select_no_rows(backend: Backend, odd_keys_table: str) -> None:
    # A row set of empty ranges is not the whole table: it selects nothing.
    for empty in (RowRange(b"a", b"a"), RowRange(b"b", b"a")):
        assert empty.is_empty()
        assert read_keys(backend, odd_keys_table, RowSet(ranges=(empty,))) == []
    rows = RowSet(keys=(b"b",), ranges=(RowRange(b"b", b"a"),))
    assert read_keys(backend, odd_keys_table, rows) == [b"b"]


def test_row_range_prefix(backend: Backend, odd_keys_table: str) -> None:
    def keys_with(prefix: bytes) -> list[bytes]:
        return read_keys(backend, odd_keys_table, RowSet(ranges=(RowRange.prefix(prefix),)))

    assert keys_with(b"a") == [
        b"a",
        b"a\x00",
        b"a\x00\x00",
        b"a\x01",
        b"ab",
        b"abc",
        b"a\x7f",
        b"a\x80",
        b"a\xff",
    ]
    assert keys_with(b"a\x00") == [b"a\x00", b"a\x00\x00"]
    assert keys_with(b"a\xff") == [b"a\xff"]
    assert keys_with(b"\xff") == [b"\xff", b"\xff\x00", b"\xff\xff", b"\xff\xff\xff"]
    assert keys_with(b"\xff\xff") == [b"\xff\xff", b"\xff\xff\xff"]
    assert keys_with(b"\xc3") == [b"\xc3\xa9"]
    assert keys_with(b"zz") == []
    assert keys_with(b"") == sorted(ODD_KEYS)


def test_limit(backend: Backend, odd_keys_table: str) -> None:
    ordered = sorted(ODD_KEYS)
    assert read_keys(backend, odd_keys_table, limit=3) == ordered[:3]
    assert read_keys(backend, odd_keys_table, limit=0) == ordered
    assert read_keys(backend, odd_keys_table, limit=None) == ordered
    assert read_keys(backend, odd_keys_table, limit=1000) == ordered
    prefix = RowSet(ranges=(RowRange.prefix(b"a"),))
    assert read_keys(backend, odd_keys_table, prefix, limit=2) == [b"a", b"a\x00"]
    keys = RowSet(keys=(b"\xff", b"b", b"A"))
    assert read_keys(backend, odd_keys_table, keys, limit=2) == [b"A", b"b"]


@st.composite
def _row_keys(draw: st.DrawFn) -> bytes:
    """Short keys over a few edge bytes, so prefixes and near-misses are common."""
    alphabet = st.sampled_from([0x00, 0x01, 0x61, 0x62, 0x7F, 0x80, 0xC3, 0xFE, 0xFF])
    return bytes(draw(st.lists(alphabet, min_size=1, max_size=4)))


@st.composite
def _row_ranges(draw: st.DrawFn) -> RowRange:
    if draw(st.booleans()):
        return RowRange.prefix(draw(_row_keys()))
    start, end = draw(st.none() | _row_keys()), draw(st.none() | _row_keys())
    if start is not None and end is not None:
        start, end = sorted((start, end))
        if start == end:
            end = None
    return RowRange(start, end)


def test_row_set_property(backend: Backend) -> None:
    """Random keys written, a random row set read: exactly the keys inside, in order."""
    reverse_ok = backend.features.reverse_scan

    @PROPERTY
    @given(
        written=st.sets(_row_keys(), max_size=20),
        keys=st.lists(_row_keys(), max_size=3),
        ranges=st.lists(_row_ranges(), max_size=3),
        limit=st.none() | st.integers(0, 5),
        reverse=st.booleans(),
    )
    def check(written, keys, ranges, limit, reverse) -> None:  # type: ignore[no-untyped-def]
        reverse = reverse and reverse_ok
        rows = RowSet(tuple(keys), tuple(ranges))
        name = create(backend, unique_name(), "cf")
        try:
            if written:
                write(backend, name, {k: [cell("cf", b"q", 1, k)] for k in written})
            expected = sorted((k for k in written if rows.contains(k)), reverse=reverse)
            got = read(backend, name, rows, limit=limit, reverse=reverse)
            assert [k for k, _ in got] == (expected[:limit] if limit else expected)
            assert all(cells == [cell("cf", b"q", 1, k)] for k, cells in got)
        finally:
            backend.delete_table(name)

    check()


# --------------------------------------------------------------------------
# Reads: cells within rows, filters
# --------------------------------------------------------------------------


def test_cell_order_within_row(backend: Backend, table_name: str) -> None:
    # Families are created out of name order: output must still be in name order.
    create(backend, table_name, "zz", "aa", "mm")
    expected = [
        cell("aa", b"B", 2, b"1"),
        cell("aa", b"a", 3, b"2"),
        cell("aa", b"a", 1, b"3"),
        cell("aa", b"a\x00", 1, b"4"),
        cell("aa", b"b", 1, b"5"),
        cell("aa", b"\x80", 1, b"6"),
        cell("aa", b"\xff", 2, b"7"),
        cell("mm", b"x", 2, b"8"),
        cell("mm", b"x", 1, b"9"),
        cell("zz", b"\x00", 1, b"10"),
    ]
    shuffled = expected[:]
    random.Random(5).shuffle(shuffled)
    write(backend, table_name, {b"r": shuffled[:5]})
    write(backend, table_name, {b"r": shuffled[5:]})
    assert read(backend, table_name) == [(b"r", expected)]
    backend.delete_table(table_name)


#: The data set of the filter tests, one (family, qualifier, ts index, value) per cell.
FILTER_DATA = {
    b"r1": [
        cell("cf", b"a", 1, b"a1"),
        cell("cf", b"a", 2, b"a2"),
        cell("cf", b"a", 3, b"a3"),
        cell("cf", b"b", 2, b"b2"),
        cell("cf2", b"a", 4, b"x4"),
        cell("cf2", b"ab", 1, b""),
    ],
    b"r2": [cell("cf", b"a\x00", 4, b"n4"), cell("cf", b"b", 3, b"b3")],
    b"r3": [cell("cf2", b"b", 2, b"y2"), cell("cf2", b"b", 5, b"y5")],
}


@pytest.fixture
def filter_table(backend: Backend, table: str) -> str:
    write(backend, table, FILTER_DATA)
    return table


def test_read_whole_filter_table(backend: Backend, filter_table: str) -> None:
    assert read(backend, filter_table) == expected_read(FILTER_DATA)
    assert read(backend, filter_table)[0] == (
        b"r1",
        [
            cell("cf", b"a", 3, b"a3"),
            cell("cf", b"a", 2, b"a2"),
            cell("cf", b"a", 1, b"a1"),
            cell("cf", b"b", 2, b"b2"),
            cell("cf2", b"a", 4, b"x4"),
            cell("cf2", b"ab", 1, b""),
        ],
    )


def test_filter_families(backend: Backend, filter_table: str) -> None:
    assert read(backend, filter_table, families=("cf2",)) == [
        (b"r1", [cell("cf2", b"a", 4, b"x4"), cell("cf2", b"ab", 1, b"")]),
        (b"r3", [cell("cf2", b"b", 5, b"y5"), cell("cf2", b"b", 2, b"y2")]),
    ]
    assert read(backend, filter_table, families=("cf", "cf2")) == expected_read(FILTER_DATA)


def test_filter_selecting_nothing(backend: Backend, filter_table: str) -> None:
    assert read(backend, filter_table, families=("nope",)) == []
    assert read(backend, filter_table, families=()) == []
    assert read(backend, filter_table, columns=()) == []
    assert read(backend, filter_table, columns=(("nope", b"a"), ("cf", b"zz"))) == []


def test_filter_family_names_are_literal(backend: Backend, table_name: str) -> None:
    names = ["max", "m.x", "m_x", "m-x"]  # "." and "-" are not patterns
    create(backend, table_name, *names)
    write(backend, table_name, {b"r": [cell(name, b"q", 1, name.encode()) for name in names]})
    assert read(backend, table_name) == [
        (b"r", [cell(name, b"q", 1, name.encode()) for name in sorted(names)])
    ]
    for name in names:
        assert read(backend, table_name, families=(name,)) == [
            (b"r", [cell(name, b"q", 1, name.encode())])
        ]
    assert read(backend, table_name, columns=(("m.x", b"q"),)) == [
        (b"r", [cell("m.x", b"q", 1, b"m.x")])
    ]
    backend.delete_table(table_name)


def test_filter_columns(backend: Backend, filter_table: str) -> None:
    # cf2:b is not selected although cf:b is: columns are (family, qualifier) pairs.
    assert read(backend, filter_table, columns=(("cf", b"b"), ("cf2", b"a"))) == [
        (b"r1", [cell("cf", b"b", 2, b"b2"), cell("cf2", b"a", 4, b"x4")]),
        (b"r2", [cell("cf", b"b", 3, b"b3")]),
    ]


def test_filter_qualifier_range(backend: Backend, filter_table: str) -> None:
    # start inclusive (a\x00 kept, a dropped), end exclusive (b dropped), every family.
    assert read(backend, filter_table, qualifier_start=b"a\x00", qualifier_end=b"b") == [
        (b"r1", [cell("cf2", b"ab", 1, b"")]),
        (b"r2", [cell("cf", b"a\x00", 4, b"n4")]),
    ]
    assert read(backend, filter_table, qualifier_start=b"b") == [
        (b"r1", [cell("cf", b"b", 2, b"b2")]),
        (b"r2", [cell("cf", b"b", 3, b"b3")]),
        (b"r3", [cell("cf2", b"b", 5, b"y5"), cell("cf2", b"b", 2, b"y2")]),
    ]
    assert read(backend, filter_table, qualifier_end=b"a\x00") == [
        (
            b"r1",
            [
                cell("cf", b"a", 3, b"a3"),
                cell("cf", b"a", 2, b"a2"),
                cell("cf", b"a", 1, b"a1"),
                cell("cf2", b"a", 4, b"x4"),
            ],
        ),
    ]


def test_filter_timestamp_range_boundaries(backend: Backend, filter_table: str) -> None:
    assert read(backend, filter_table, timestamp_start=ts(2), timestamp_end=ts(4)) == [
        (
            b"r1",
            [cell("cf", b"a", 3, b"a3"), cell("cf", b"a", 2, b"a2"), cell("cf", b"b", 2, b"b2")],
        ),
        (b"r2", [cell("cf", b"b", 3, b"b3")]),
        (b"r3", [cell("cf2", b"b", 2, b"y2")]),
    ]
    assert read(backend, filter_table, timestamp_start=ts(4)) == [
        (b"r1", [cell("cf2", b"a", 4, b"x4")]),
        (b"r2", [cell("cf", b"a\x00", 4, b"n4")]),
        (b"r3", [cell("cf2", b"b", 5, b"y5")]),
    ]
    assert read(backend, filter_table, timestamp_end=ts(2)) == [
        (b"r1", [cell("cf", b"a", 1, b"a1"), cell("cf2", b"ab", 1, b"")]),
    ]
    # One millisecond wide: exactly the cells at that timestamp.
    assert read(backend, filter_table, timestamp_start=ts(5), timestamp_end=ts(5) + MS) == [
        (b"r3", [cell("cf2", b"b", 5, b"y5")]),
    ]


def test_filter_given_timestamps(backend: Backend, filter_table: str) -> None:
    # Runs of consecutive milliseconds and lone ones; a time no cell can have
    # (not a whole ms) keeps nothing; with a range and per-column limits after.
    for f in (ReadFilter(timestamps=[ts(1), ts(3)]), ReadFilter(timestamps=[ts(2)]),
              ReadFilter(timestamps=[ts(1), ts(2), ts(3), ts(5)]),
              ReadFilter(timestamps=[ts(4) + 1, ts(9)]), ReadFilter(timestamps=[]),
              ReadFilter(families=("cf",), timestamps=[ts(1), ts(2), ts(4)],
                         cells_per_column=1),
              ReadFilter(timestamp_start=ts(2), timestamps=[ts(1), ts(2), ts(5)]),
              ReadFilter(timestamps=[ts(2), ts(3)], strip_values=True)):
        assert read(backend, filter_table, **attrs.asdict(f, recurse=False)) == \
            expected_read(FILTER_DATA, f), f
    # Many (a shuffled save's prior read): one filter of 500 lone times.
    many = [ts(1), ts(3), ts(5)] + [ts(10 + 2 * i) for i in range(497)]
    for f in (ReadFilter(timestamps=many), ReadFilter(timestamps=many, strip_values=True),
              ReadFilter(qualifier_start=b"b", timestamps=many),
              ReadFilter(timestamp_end=ts(4), timestamps=many)):
        fields = attrs.asdict(f, recurse=False)
        assert read(backend, filter_table, **fields) == expected_read(FILTER_DATA, f), f
        assert read(backend, filter_table, limit=1, **fields) == \
            expected_read(FILTER_DATA, f, limit=1), f


def test_given_timestamps_after_versions_kept(backend: Backend, table_name: str) -> None:
    # The version limit counts every version first, then the given times filter.
    create(backend, table_name, "cf", "cf2")
    write(backend, table_name, {b"r": [cell("cf", b"q", n, b"%d" % n) for n in (1, 2, 3, 4)]
                                + [cell("cf2", b"q", 1, b"x")]})
    assert read(backend, table_name, versions_kept=2, timestamps=[ts(1), ts(3)]) == [
        (b"r", [cell("cf", b"q", 3, b"3"), cell("cf2", b"q", 1, b"x")])]
    assert read(backend, table_name, versions_kept=3, families=("cf",),
                timestamps=[ts(2), ts(4)]) == [
        (b"r", [cell("cf", b"q", 4, b"4"), cell("cf", b"q", 2, b"2")])]
    backend.delete_table(table_name)


def test_filter_cells_per_column(backend: Backend, filter_table: str) -> None:
    assert read(backend, filter_table, cells_per_column=1) == [
        (
            b"r1",
            [
                cell("cf", b"a", 3, b"a3"),
                cell("cf", b"b", 2, b"b2"),
                cell("cf2", b"a", 4, b"x4"),
                cell("cf2", b"ab", 1, b""),
            ],
        ),
        (b"r2", [cell("cf", b"a\x00", 4, b"n4"), cell("cf", b"b", 3, b"b3")]),
        (b"r3", [cell("cf2", b"b", 5, b"y5")]),
    ]
    assert read(backend, filter_table, RowSet(keys=(b"r1",)), cells_per_column=2) == [
        (
            b"r1",
            [
                cell("cf", b"a", 3, b"a3"),
                cell("cf", b"a", 2, b"a2"),
                cell("cf", b"b", 2, b"b2"),
                cell("cf2", b"a", 4, b"x4"),
                cell("cf2", b"ab", 1, b""),
            ],
        ),
    ]


def test_filter_strip_values(backend: Backend, filter_table: str) -> None:
    stripped = [
        (key, [c._replace(value=b"") for c in cells])
        for key, cells in expected_read(FILTER_DATA)
    ]
    assert read(backend, filter_table, strip_values=True) == stripped


def test_filters_combined(backend: Backend, filter_table: str) -> None:
    # The timestamp range applies before the version limit: newest *within* the range.
    assert read(
        backend,
        filter_table,
        families=("cf",),
        timestamp_start=ts(1),
        timestamp_end=ts(3),
        cells_per_column=1,
        strip_values=True,
    ) == [(b"r1", [cell("cf", b"a", 2, b""), cell("cf", b"b", 2, b"")])]
    assert read(
        backend,
        filter_table,
        families=("cf2",),
        columns=(("cf", b"a"), ("cf2", b"b"), ("cf2", b"ab")),
        qualifier_start=b"ab",
        cells_per_column=1,
    ) == [
        (b"r1", [cell("cf2", b"ab", 1, b"")]),
        (b"r3", [cell("cf2", b"b", 5, b"y5")]),
    ]
    assert read(
        backend,
        filter_table,
        RowSet(ranges=(RowRange(b"r2", None),)),
        qualifier_end=b"b",
        timestamp_end=ts(5),
    ) == [(b"r2", [cell("cf", b"a\x00", 4, b"n4")])]


def test_filtered_out_rows_do_not_count_toward_limit(backend: Backend, filter_table: str) -> None:
    assert read(backend, filter_table, limit=1, timestamp_start=ts(5)) == [
        (b"r3", [cell("cf2", b"b", 5, b"y5")]),
    ]
    assert read_keys(backend, filter_table, limit=1, columns=(("cf", b"a\x00"),)) == [b"r2"]
    assert read_keys(backend, filter_table, limit=2, families=("cf2",)) == [b"r1", b"r3"]
    assert read_keys(backend, filter_table, families=("cf",), timestamp_start=ts(9)) == []


_QUALIFIERS = st.sampled_from([b"\x00", b"a", b"a\x00", b"ab", b"b", b"c"])
_COLUMNS = st.tuples(st.sampled_from(["cf", "cf2"]), st.sampled_from([b"a", b"a\x00", b"ab", b"b"]))


@st.composite
def _bounds(draw: st.DrawFn, values: st.SearchStrategy) -> tuple:  # type: ignore[type-arg]
    """A ``(start, end)`` pair, each maybe ``None``, with ``start < end`` when both are set."""
    start, end = draw(st.none() | values), draw(st.none() | values)
    if start is not None and end is not None:
        start, end = sorted((start, end))
        if start == end:
            end = None
    return start, end


@st.composite
def _read_filters(draw: st.DrawFn) -> ReadFilter:
    qualifier_start, qualifier_end = draw(_bounds(_QUALIFIERS))
    timestamp_start, timestamp_end = draw(_bounds(st.integers(0, 6).map(ts)))
    families = draw(st.none() | st.lists(st.sampled_from(["cf", "cf2"]), min_size=1, unique=True))
    columns = draw(st.none() | st.lists(_COLUMNS, min_size=1, max_size=3, unique=True))
    return ReadFilter(
        families=None if families is None else tuple(families),
        columns=None if columns is None else tuple(columns),
        qualifier_start=qualifier_start,
        qualifier_end=qualifier_end,
        timestamp_start=timestamp_start,
        timestamp_end=timestamp_end,
        cells_per_column=draw(st.none() | st.integers(1, 3)),
        strip_values=draw(st.booleans()),
    )


def test_read_filter_property(backend: Backend, filter_table: str) -> None:
    """Random combinations of filters, row limit and direction against the model."""
    reverse_ok = backend.features.reverse_scan

    @PROPERTY
    @given(f=_read_filters(), limit=st.none() | st.integers(1, 3), reverse=st.booleans())
    def check(f: ReadFilter, limit: int | None, reverse: bool) -> None:
        reverse = reverse and reverse_ok
        request = ReadRequest(filter_table, RowSet(), f, limit, reverse)
        got = [(row.key, list(row.cells)) for row in backend.read_rows(request)]
        assert got == expected_read(FILTER_DATA, f, limit, reverse)
        batches = list(backend.read_batches(request))  # type: ignore[attr-defined]
        assert all(len(b) for b in batches)
        assert [(row.key, list(row.cells)) for b in batches for row in b.rows()] == got

    check()


def test_read_batches_are_the_rows_in_columns(backend: Backend, table: str) -> None:
    """Rows of several responses (Bigtable) or batches (embedded) come in order, whole."""
    data = {b"r%04d" % i: [cell("cf", b"q%d" % (i % 3), i % 5, b"v" * (i % 7)),
                           cell("cf2", b"z", 1, b"%d" % i)] for i in range(700)}
    write(backend, table, data)
    request = ReadRequest(table, RowSet(), ReadFilter())
    batches = list(backend.read_batches(request))  # type: ignore[attr-defined]
    assert len(batches) > 1 and all(len(b) for b in batches)
    got = [(row.key, list(row.cells)) for b in batches for row in b.rows()]
    assert got == expected_read(data)
    assert [(row.key, list(row.cells)) for row in backend.read_rows(request)] == got


def test_cells_per_column_newest_whatever_write_order(backend: Backend, table: str) -> None:
    @PROPERTY
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        offsets = data.draw(st.lists(st.integers(0, 100_000), min_size=1, max_size=8, unique=True))
        order = data.draw(st.permutations(offsets))
        split = data.draw(st.integers(0, len(order)))
        key = uuid.uuid4().bytes
        for chunk in (order[:split], order[split:]):
            if chunk:
                write(backend, table, {key: [cell("cf", b"q", n, b"%d" % n) for n in chunk]})
        newest = sorted(offsets, reverse=True)
        expected = [cell("cf", b"q", n, b"%d" % n) for n in newest]
        rows = RowSet(keys=(key,))
        assert read(backend, table, rows, cells_per_column=1) == [(key, expected[:1])]
        assert read(backend, table, rows, cells_per_column=2) == [(key, expected[:2])]
        assert read(backend, table, rows) == [(key, expected)]

    check()


def test_far_future_timestamp_wins(backend: Backend, table: str) -> None:
    write(backend, table, {b"r": [Cell("cf", b"q", FAR_FUTURE, b"future")]})
    write(backend, table, {b"r": [cell("cf", b"q", 1, b"old")]})
    write(backend, table, {b"r": [Cell("cf", b"q", now_us(), b"now")]})
    assert read(backend, table, cells_per_column=1) == [
        (b"r", [Cell("cf", b"q", FAR_FUTURE, b"future")])
    ]


# --------------------------------------------------------------------------
# Reverse scans
# --------------------------------------------------------------------------


def test_reverse_scan(backend: Backend, table: str) -> None:
    require_reverse(backend)
    keys = [b"a", b"b", b"b\x00", b"c", b"d", b"e", b"f\xff", b"g"]
    write(backend, table, {k: [cell("cf", b"q", 1, k)] for k in keys})
    assert read_keys(backend, table, reverse=True) == keys[::-1]
    assert read(backend, table, RowSet(keys=(b"c",)), reverse=True) == [
        (b"c", [cell("cf", b"q", 1, b"c")])
    ]
    rows = RowSet(keys=(b"a", b"g"), ranges=(RowRange(b"b", b"e"), RowRange(b"c", b"d")))
    assert read_keys(backend, table, rows, reverse=True) == [b"g", b"d", b"c", b"b\x00", b"b", b"a"]
    assert read_keys(backend, table, RowSet(ranges=(RowRange.prefix(b"b"),)), reverse=True) == [
        b"b\x00",
        b"b",
    ]


def test_reverse_scan_with_limit(backend: Backend, table: str) -> None:
    require_reverse(backend)
    keys = [b"k%02d" % i for i in range(10)]
    write(
        backend,
        table,
        {k: [cell("cf" if i % 3 else "cf2", b"q", 1, k)] for i, k in enumerate(keys)},
    )
    assert read_keys(backend, table, limit=3, reverse=True) == [b"k09", b"k08", b"k07"]
    rows = RowSet(ranges=(RowRange(b"k02", b"k07"),))
    assert read_keys(backend, table, rows, limit=2, reverse=True) == [b"k06", b"k05"]
    # Rows filtered out (cf2 only: k00, k03, k06, k09) do not count toward the limit.
    assert read_keys(backend, table, limit=3, reverse=True, families=("cf",)) == [
        b"k08",
        b"k07",
        b"k05",
    ]


# --------------------------------------------------------------------------
# Streaming
# --------------------------------------------------------------------------

STREAM_ROWS = 2_000


@pytest.fixture
def big_table(backend: Backend, table: str) -> str:
    write(
        backend,
        table,
        {b"row%06d" % i: [cell("cf", b"q", 1, b"%d" % i)] for i in range(STREAM_ROWS)},
    )
    return table


def test_read_rows_returns_a_lazy_iterator(backend: Backend, big_table: str) -> None:
    rows = backend.read_rows(ReadRequest(big_table))
    assert isinstance(rows, Iterator)
    assert not isinstance(rows, (list, tuple))
    first = list(itertools.islice(rows, 3))
    assert [r.key for r in first] == [b"row000000", b"row000001", b"row000002"]
    assert sum(1 for _ in rows) == STREAM_ROWS - 3


def test_abandoned_iterator_does_not_block_backend(backend: Backend, big_table: str) -> None:
    rows = backend.read_rows(ReadRequest(big_table))
    assert next(rows).key == b"row000000"

    # With that iterator still open, the backend keeps working.
    write(backend, big_table, {b"zzz": [cell("cf", b"q", 1, b"new")]})
    assert read(backend, big_table, RowSet(keys=(b"zzz", b"row000005"))) == [
        (b"row000005", [cell("cf", b"q", 1, b"5")]),
        (b"zzz", [cell("cf", b"q", 1, b"new")]),
    ]
    assert next(rows).key == b"row000001"
    del rows
    assert read_keys(backend, big_table, limit=2) == [b"row000000", b"row000001"]
    assert (
        len(read_keys(backend, big_table, RowSet(ranges=(RowRange.prefix(b"row"),)))) == STREAM_ROWS
    )


def test_many_exact_keys(backend: Backend, big_table: str) -> None:
    wanted = [b"row%06d" % i for i in range(0, STREAM_ROWS + 400, 2)]  # some are missing
    random.Random(11).shuffle(wanted)
    expected = sorted(k for k in wanted if k < b"row%06d" % STREAM_ROWS)
    assert read_keys(backend, big_table, RowSet(keys=tuple(wanted))) == expected
    if backend.features.reverse_scan:
        rows = RowSet(keys=tuple(wanted))
        assert read_keys(backend, big_table, rows, reverse=True) == expected[::-1]


#: Wide rows (hundreds of cells) between narrow ones.
WIDE_DATA = {
    b"a": [cell("cf", b"q", 1, b"a")],
    b"b": [cell("cf", b"q%03d" % i, n, b"%d" % i) for i in range(300) for n in (1, 2)],
    b"c": [cell("cf2", b"q", 1, b"c")],
    b"d": [cell("cf", b"q", n, b"%d" % n) for n in range(400)],
    b"e": [cell("cf", b"q", 1, b"e")],
}


def test_wide_rows(backend: Backend, table: str) -> None:
    write(backend, table, WIDE_DATA)
    directions = [False, True] if backend.features.reverse_scan else [False]
    for reverse, limit in itertools.product(directions, [None, 1, 2, 3]):
        for f in (NO_FILTER, ReadFilter(cells_per_column=1), ReadFilter(families=("cf",))):
            request = ReadRequest(table, ALL_ROWS, f, limit, reverse)
            got = [(row.key, list(row.cells)) for row in backend.read_rows(request)]
            assert got == expected_read(WIDE_DATA, f, limit, reverse), (f, limit, reverse)


# --------------------------------------------------------------------------
# Garbage collection
# --------------------------------------------------------------------------


def test_gc_max_versions_newest_always_visible(backend: Backend, table_name: str) -> None:
    create(backend, table_name, "cf", gc=GcRule(max_versions=2))
    for n in (2, 5, 1, 4, 3):
        write(backend, table_name, {b"r": [cell("cf", b"q", n, b"%d" % n)]})
    assert read(backend, table_name, cells_per_column=1) == [(b"r", [cell("cf", b"q", 5, b"5")])]
    assert read(backend, table_name, versions_kept=2) == [
        (b"r", [cell("cf", b"q", 5, b"5"), cell("cf", b"q", 4, b"4")])
    ]
    if hasattr(backend, "collect_garbage"):
        # Before GC runs, every version is there, as on Bigtable.
        assert [c.timestamp for c in read(backend, table_name)[0][1]] == [ts(n) for n in
                                                                           (5, 4, 3, 2, 1)]
        backend.collect_garbage(table_name)
        assert read(backend, table_name) == [
            (b"r", [cell("cf", b"q", 5, b"5"), cell("cf", b"q", 4, b"4")])
        ]
        # GC ranks versions before the filters run: old versions stay collected.
        assert read(backend, table_name, timestamp_end=ts(5)) == [
            (b"r", [cell("cf", b"q", 4, b"4")])
        ]
        assert read(backend, table_name, timestamp_end=ts(4)) == []
    backend.delete_table(table_name)


def test_gc_max_age_counts_from_cell_timestamp(backend: Backend, table_name: str) -> None:
    create(backend, table_name, "cf", gc=GcRule(max_age=timedelta(days=1)))
    recent = now_us()
    write(
        backend,
        table_name,
        {
            b"r": [Cell("cf", b"q", recent, b"new"), cell("cf", b"q", 1, b"2015")],
            b"old": [cell("cf", b"q", 1, b"2015")],
        },
    )
    collect_garbage(backend, table_name)
    assert read(backend, table_name) == [(b"r", [Cell("cf", b"q", recent, b"new")])]
    backend.delete_table(table_name)


_DAY, _TEN_DAYS = timedelta(days=1), timedelta(days=10)
#: GC rule -> which of the cells written 0, 1, 48 and 480 hours ago survive.
GC_COMBINATIONS = {
    "versions_or_age": (GcRule(rules=(GcRule(max_versions=1), GcRule(max_age=_DAY))), [0]),
    "versions_and_age": (
        GcRule(rules=(GcRule(max_versions=1), GcRule(max_age=_DAY)), mode="intersection"),
        [0, 1],
    ),
    "leaf_versions_and_age": (GcRule(max_versions=1, max_age=_DAY, mode="intersection"), [0, 1]),
    "leaf_versions_or_age": (GcRule(max_versions=3, max_age=_DAY), [0, 1]),
    "age_or_age": (GcRule(rules=(GcRule(max_age=_TEN_DAYS), GcRule(max_age=_DAY))), [0, 1]),
    "age_and_age": (
        GcRule(rules=(GcRule(max_age=_TEN_DAYS), GcRule(max_age=_DAY)), mode="intersection"),
        [0, 1, 48],
    ),
    "nested": (
        GcRule(
            rules=(
                GcRule(max_versions=3),
                GcRule(rules=(GcRule(max_versions=1), GcRule(max_age=_DAY)), mode="intersection"),
            )
        ),
        [0, 1],
    ),
}


@pytest.mark.parametrize("rule, kept_hours", GC_COMBINATIONS.values(), ids=GC_COMBINATIONS.keys())
def test_gc_union_and_intersection(
    backend: Backend, table_name: str, rule: GcRule, kept_hours: list[int]
) -> None:
    create(backend, table_name, "cf", gc=rule)
    recent = now_us()
    hour = 3_600_000_000
    hours = [0, 1, 48, 480]
    write(
        backend, table_name, {b"r": [Cell("cf", b"q", recent - h * hour, b"%d" % h) for h in hours]}
    )
    collect_garbage(backend, table_name)
    assert read(backend, table_name) == [
        (b"r", [Cell("cf", b"q", recent - h * hour, b"%d" % h) for h in kept_hours])
    ]
    backend.delete_table(table_name)
