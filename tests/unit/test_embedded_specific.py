"""What is specific to the embedded store.

The cross-backend behaviour is in ``tests/backends/test_protocol.py``. These
tests cover what only the SQLite store has: file persistence, immediate GC,
the physical collection of garbage, thread use, lazy chunked streaming and
the shape of the SQL it runs.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tsmodel.backends import _embedded_read as embedded_read
from tsmodel.backends import embedded
from tsmodel.backends.base import (
    Backend,
    Cell,
    DeleteCells,
    DeleteFamily,
    DeleteRow,
    GcRule,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowRange,
    RowSet,
    SetCell,
    TableSpec,
)
from tsmodel.backends.embedded import EmbeddedBackend
from tsmodel.errors import BackendError, TableNotFoundError

DAY = timedelta(days=1)
MS = 1_000


def now_ms() -> int:
    """The current time in microseconds, rounded down to a millisecond."""
    return time.time_ns() // 1_000_000 * MS


@pytest.fixture
def backend() -> Iterator[EmbeddedBackend]:
    b = EmbeddedBackend()
    try:
        yield b
    finally:
        b.close()


def make_table(backend: EmbeddedBackend, name: str = "t", **rules: GcRule) -> str:
    families = tuple(sorted({"cf": GcRule(), **rules}.items()))
    backend.create_table(TableSpec(name, families))
    return name


def put(backend: EmbeddedBackend, table: str, key: bytes, *cells: Cell) -> None:
    mutations = tuple(SetCell(c.family, c.qualifier, c.timestamp, c.value) for c in cells)
    outcomes = backend.mutate_rows(table, [RowMutation(key, mutations)])
    assert [o.status for o in outcomes] == [MutationStatus.APPLIED], outcomes


def read(backend: EmbeddedBackend, table: str, **kwargs: object) -> list[Row]:
    return list(backend.read_rows(ReadRequest(table, **kwargs)))  # type: ignore[arg-type]


def keys(rows: list[Row]) -> list[bytes]:
    return [r.key for r in rows]


def fill(backend: EmbeddedBackend, table: str, count: int, value: bytes = b"v") -> None:
    entries = [
        RowMutation(b"row%07d" % i, (SetCell("cf", b"q", MS, value),)) for i in range(count)
    ]
    assert all(o.ok for o in backend.mutate_rows(table, entries))


# -- basics -------------------------------------------------------------------


def test_is_a_backend_with_its_features(backend: EmbeddedBackend, tmp_path: Path) -> None:
    assert isinstance(backend, Backend)
    assert backend.features.reverse_scan and not backend.features.immediate_gc
    assert not backend.features.persistent
    with EmbeddedBackend(str(tmp_path / "x.db")) as on_file:
        assert on_file.features.persistent


def test_close_is_idempotent_and_later_calls_fail(tmp_path: Path) -> None:
    b = EmbeddedBackend()
    b.close()
    b.close()
    with pytest.raises(BackendError, match="closed"):
        b.list_tables()


def test_reachable_while_open(tmp_path: Path) -> None:
    b = EmbeddedBackend(str(tmp_path / "x.db"))
    b.check_reachable(0.001)  # in this process: nothing to wait for
    b.close()
    with pytest.raises(BackendError, match="closed"):
        b.check_reachable(1.0)


def test_unopenable_path_is_a_backend_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError) as info:
        EmbeddedBackend(str(tmp_path))  # a directory
    assert isinstance(info.value.__cause__, sqlite3.Error)


@pytest.mark.parametrize("name", ['we"ird', "with space", "x'); DROP TABLE tsm_tables; --", "ü"])
def test_any_table_name(backend: EmbeddedBackend, name: str) -> None:
    make_table(backend, name)
    put(backend, name, b"r", Cell("cf", b"q", MS, b"v"))
    assert backend.list_tables() == [name]
    assert keys(read(backend, name)) == [b"r"]
    backend.delete_table(name)
    assert backend.list_tables() == []


def test_invalid_entries_fail_alone(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    entries = [
        RowMutation(b"", (SetCell("cf", b"q", MS, b"v"),)),
        RowMutation(b"k" * 4097, (SetCell("cf", b"q", MS, b"v"),)),
        RowMutation(b"a", ()),
        RowMutation(b"b", (SetCell("cf", b"q", MS, b"v"), DeleteFamily("nope"))),
        RowMutation(b"c", (SetCell("cf", b"q", -MS, b"v"),)),
        RowMutation(
            b"d", (SetCell("cf", b"q", MS, b"v"), DeleteRow(), SetCell("cf", b"p", 0, b""))
        ),
    ]
    statuses = [o.status for o in backend.mutate_rows(table, entries)]
    assert statuses == [MutationStatus.FAILED] * 5 + [MutationStatus.APPLIED]
    assert read(backend, table) == [Row(b"d", (Cell("cf", b"p", 0, b""),))]


def test_read_of_a_table_deleted_mid_stream(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    fill(backend, table, 5_000)
    rows = backend.read_rows(ReadRequest(table))
    next(rows)
    backend.delete_table(table)
    with pytest.raises(TableNotFoundError):
        list(rows)


def test_negative_limit_is_an_error(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    with pytest.raises(BackendError, match="limit"):
        read(backend, table, limit=-1)


# -- persistence --------------------------------------------------------------


def test_file_database_reopens_with_tables_rules_and_cells(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    rule = GcRule(
        rules=(GcRule(max_versions=3), GcRule(max_age=DAY * 400_000)), mode="intersection"
    )
    with EmbeddedBackend(path) as first:
        make_table(first, "events", gc=rule)
        put(first, "events", b"r1", Cell("cf", b"q", 2 * MS, b"two"), Cell("gc", b"x", MS, b"1"))
        spec = first.describe_table("events")
    with EmbeddedBackend(path) as second:
        assert second.list_tables() == ["events"]
        assert second.describe_table("events") == spec
        assert spec.families == (("cf", GcRule()), ("gc", rule))
        assert read(second, "events") == [
            Row(b"r1", (Cell("cf", b"q", 2 * MS, b"two"), Cell("gc", b"x", MS, b"1")))
        ]


def test_two_backends_on_one_file_see_each_others_tables(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    with EmbeddedBackend(path) as a, EmbeddedBackend(path) as b:
        make_table(a, "t")
        put(b, "t", b"r", Cell("cf", b"q", MS, b"v"))
        assert keys(read(a, "t")) == [b"r"]
        a.create_table(TableSpec("t", (("extra", GcRule(max_versions=1)),)))
        assert b.describe_table("t").family_names() == ("cf", "extra")
        b.delete_table("t")
        with pytest.raises(TableNotFoundError):
            a.describe_table("t")


def _calls(work: Callable[[], object]) -> int:
    """How many Python and C functions ``work`` calls (deterministic, unlike time)."""
    calls = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


def test_a_table_is_created_and_dropped_at_a_cost_independent_of_the_others(
        backend: EmbeddedBackend) -> None:
    """Creating or dropping one table must not reread every table's families.

    (SQLite's own work for a DDL statement grows with its catalogue, a little;
    tsmodel's must not: the oracle harness, which creates and drops tables per
    example in a store holding the suite's other tables, ran 2.4 times slower.)
    """
    def cycle() -> None:
        for i in range(5):
            make_table(backend, f"cycle{i}", cf=GcRule(max_versions=1))
            backend.delete_table(f"cycle{i}")

    few = _calls(cycle)
    for i in range(400):
        make_table(backend, f"other{i}", cf=GcRule(max_versions=1))
    many = _calls(cycle)
    assert many < few * 1.2, (few, many)
    assert len(backend.list_tables()) == 400


def test_a_table_another_backend_adds_between_two_changes_is_seen(tmp_path: Path) -> None:
    """The metadata kept in memory is updated in place only when no one else changed it."""
    path = str(tmp_path / "shared.db")
    with EmbeddedBackend(path) as a, EmbeddedBackend(path) as b:
        make_table(a, "one")
        make_table(b, "two")
        a.delete_table("one")
        assert a.list_tables() == ["two"]
        make_table(a, "three", cf=GcRule(max_versions=2))
        assert b.describe_table("three").families == (("cf", GcRule(max_versions=2)),)
        a.delete_family("three", "cf")
        assert b.describe_table("three").families == ()
        assert a.list_tables() == b.list_tables() == ["three", "two"]


# -- garbage collection -------------------------------------------------------


def test_max_age_collects_old_cell_timestamps(backend: EmbeddedBackend) -> None:
    table = make_table(backend, aged=GcRule(max_age=DAY))
    now = now_ms()
    old, fresh = now - 2 * DAY // timedelta(microseconds=1), now
    put(backend, table, b"backfill", Cell("aged", b"q", old, b"old"))
    put(backend, table, b"mixed", Cell("aged", b"q", old, b"o"), Cell("aged", b"q", fresh, b"new"))
    put(backend, table, b"plain", Cell("cf", b"q", old, b"kept"))
    # As on Bigtable before its GC runs, reads return every cell.
    assert keys(read(backend, table)) == [b"backfill", b"mixed", b"plain"]
    assert len(read(backend, table)[1].cells) == 2
    assert backend.collect_garbage(table) == 2
    assert read(backend, table) == [
        Row(b"mixed", (Cell("aged", b"q", fresh, b"new"),)),
        Row(b"plain", (Cell("cf", b"q", old, b"kept"),)),
    ]
    assert backend.collect_garbage() == 0


def test_versions_kept_counts_before_the_timestamp_filter(backend: EmbeddedBackend) -> None:
    table = make_table(backend, one=GcRule(max_versions=1))
    put(backend, table, b"r", Cell("one", b"q", MS, b"old"))
    put(backend, table, b"r", Cell("one", b"q", 2 * MS, b"new"))
    assert read(backend, table, filter=ReadFilter(timestamp_end=2 * MS)) == [
        Row(b"r", (Cell("one", b"q", MS, b"old"),))]  # not collected yet
    assert read(backend, table, filter=ReadFilter(timestamp_end=2 * MS, versions_kept=1)) == []
    assert read(backend, table, filter=ReadFilter(timestamp_start=2 * MS)) == [
        Row(b"r", (Cell("one", b"q", 2 * MS, b"new"),))
    ]
    assert backend.collect_garbage(table) == 1
    assert read(backend, table, filter=ReadFilter(timestamp_end=2 * MS)) == []


def test_intersection_keeps_recent_extra_versions(backend: EmbeddedBackend) -> None:
    rule = GcRule(max_versions=1, max_age=DAY, mode="intersection")
    table = make_table(backend, both=rule)
    now = now_ms()
    day = DAY // timedelta(microseconds=1)
    versions = [now, now - MS, now - 2 * day, now - 3 * day]
    put(backend, table, b"r", *(Cell("both", b"q", t, b"%d" % t) for t in versions))
    assert len(read(backend, table)[0].cells) == 4
    assert backend.collect_garbage(table) == 2
    cells = read(backend, table)[0].cells
    assert [c.timestamp for c in cells] == [now, now - MS]
    assert read(backend, table, reverse=True, filter=ReadFilter(cells_per_column=1)) == [
        Row(b"r", (Cell("both", b"q", now, b"%d" % now),))
    ]


def test_nested_union_rule(backend: EmbeddedBackend) -> None:
    inner = GcRule(max_versions=2, max_age=DAY, mode="intersection")
    table = make_table(backend, nested=GcRule(rules=(GcRule(max_versions=3), inner)))
    now = now_ms()
    day = DAY // timedelta(microseconds=1)
    stamps = [now, now - 2 * day, now - 3 * MS, now - 4 * MS, now - 5 * MS]
    put(backend, table, b"r", *(Cell("nested", b"q", t, b"") for t in stamps))
    # rank order: now, now-3ms, now-4ms, now-5ms, now-2d; max 3 versions and
    # (rank >= 2 and older than a day) collects now-5ms and now-2d.
    assert backend.collect_garbage(table) == 2
    assert [c.timestamp for c in read(backend, table)[0].cells] == [now, now - 3 * MS, now - 4 * MS]


def test_garbage_is_deleted_physically_as_tables_are_written(
    backend: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "_GC_MIN_WRITES", 50)
    table = make_table(backend, one=GcRule(max_versions=1))
    for t in range(1, 201):
        put(backend, table, b"r", Cell("one", b"q", t * MS, b"%d" % t))
    assert read(backend, table) == [Row(b"r", (Cell("one", b"q", 200 * MS, b"200"),))]
    assert backend.collect_garbage(table) < 50


def test_tightened_rule_applies_to_existing_cells(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    put(backend, table, b"r", *(Cell("cf", b"q", t * MS, b"") for t in range(1, 6)))
    assert len(read(backend, table)[0].cells) == 5
    backend.create_table(TableSpec(table, (("cf", GcRule(max_versions=2)),)))
    assert len(read(backend, table)[0].cells) == 5  # until GC runs
    assert backend.collect_garbage(table) == 3
    assert [c.timestamp for c in read(backend, table)[0].cells] == [5 * MS, 4 * MS]


# -- row sets, chunks and streaming ---------------------------------------------


def test_row_bigger_than_a_chunk_is_returned_whole(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    wide = [Cell("cf", b"q%05d" % i, MS, b"") for i in range(embedded_read.MAX_CHUNK * 2 + 7)]
    put(backend, table, b"a", Cell("cf", b"q", MS, b""))
    put(backend, table, b"b", *wide)
    put(backend, table, b"c", Cell("cf", b"q", MS, b""))
    for reverse in (False, True):
        rows = read(backend, table, reverse=reverse)
        assert keys(rows) == ([b"a", b"b", b"c"][:: -1 if reverse else 1])
        assert rows[1].cells == tuple(wide)


def test_many_keys_mixed_with_ranges(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    fill(backend, table, 3_000)
    wanted = [b"row%07d" % i for i in range(0, 3_000, 2)]
    ranges = (RowRange(b"row0001000", b"row0001100"), RowRange(b"row0001050", b"row0001200"))
    rows = RowSet(keys=tuple(wanted + wanted[:10]), ranges=ranges)
    expected = sorted(set(wanted) | {b"row%07d" % i for i in range(1000, 1200)})
    assert keys(read(backend, table, rows=rows)) == expected
    assert keys(read(backend, table, rows=rows, reverse=True)) == expected[::-1]
    assert keys(read(backend, table, rows=rows, limit=1_200)) == expected[:1_200]


def test_writes_while_a_read_is_half_consumed(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    fill(backend, table, 20_000)
    rows = backend.read_rows(ReadRequest(table))
    first = list(itertools.islice(rows, 10_000))
    put(backend, table, b"row0000001", Cell("cf", b"late", MS, b"behind the cursor"))
    put(backend, table, b"row9999999", Cell("cf", b"q", MS, b"ahead of the cursor"))
    done = threading.Event()

    def write_more() -> None:
        fill(backend, table, 100)
        done.set()

    writer = threading.Thread(target=write_more)
    writer.start()
    writer.join(timeout=10)
    assert done.is_set()
    rest = list(rows)
    got = keys(first + rest)
    assert got == sorted(set(got))
    assert got[-1] == b"row9999999" and len(got) == 20_001


def test_streaming_memory_stays_flat(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    fill(backend, table, 20_000, value=b"x" * 1_000)  # ~20 MB of values
    tracemalloc.start()
    try:
        count = sum(1 for _ in backend.read_rows(ReadRequest(table)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000
    assert peak < 8_000_000


def test_threads_share_one_backend(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(50):
                put(backend, table, b"t%d-%03d" % (n, i), Cell("cf", b"q", MS, b"%d" % i))
                read(backend, table, rows=RowSet(ranges=(RowRange.prefix(b"t%d-" % n),)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(read(backend, table)) == 400


# -- the SQL it runs --------------------------------------------------------------


def test_scans_follow_the_primary_key_without_sorting(backend: EmbeddedBackend) -> None:
    table = make_table(backend, one=GcRule(max_versions=1), aged=GcRule(max_age=DAY))
    fill(backend, table, 10)
    statements: list[str] = []
    con = backend._con
    assert con is not None
    con.set_trace_callback(statements.append)
    filters = [
        ReadFilter(),
        ReadFilter(families=("cf",)),
        ReadFilter(columns=(("cf", b"q"),), timestamp_start=MS, cells_per_column=1),
        ReadFilter(qualifier_start=b"a", qualifier_end=b"z", strip_values=True),
    ]
    for flt, reverse in itertools.product(filters, (False, True)):
        rows = RowSet(keys=(b"row0000001",), ranges=(RowRange(b"row0000003", b"row0000005"),))
        read(backend, table, filter=flt, reverse=reverse, rows=rows)
        read(backend, table, filter=flt, reverse=reverse)
    con.set_trace_callback(None)
    selects = [s for s in statements if s.startswith("SELECT") and "tsm_cells_" in s]
    assert selects
    for sql in selects:
        plan = " ".join(str(row[-1]) for row in con.execute("EXPLAIN QUERY PLAN " + sql))
        assert "TEMP B-TREE" not in plan, (sql, plan)


def test_entry_that_sqlite_rejects_fails_alone(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    assert backend._con is not None
    backend._con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000)
    entries = [
        RowMutation(key, (SetCell("cf", b"q", MS, value),))
        for key, value in ((b"a", b"small"), (b"b", b"x" * 5_000), (b"c", b"small"))
    ]
    outcomes = backend.mutate_rows(table, entries)
    assert [o.status for o in outcomes] == [
        MutationStatus.APPLIED, MutationStatus.FAILED, MutationStatus.APPLIED
    ]
    assert isinstance(outcomes[1].error, BackendError)
    assert isinstance(outcomes[1].error.__cause__, sqlite3.Error)
    assert keys(read(backend, table)) == [b"a", b"c"]


def test_timestamps_beyond_sqlite_integers(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    put(backend, table, b"r", Cell("cf", b"q", MS, b"v"))
    huge = 1 << 70
    outcome = backend.mutate_rows(table, [RowMutation(b"r", (SetCell("cf", b"q", huge, b""),))])
    assert outcome[0].status is MutationStatus.FAILED
    assert keys(read(backend, table, filter=ReadFilter(timestamp_start=-huge, timestamp_end=huge)))
    assert read(backend, table, filter=ReadFilter(timestamp_start=huge)) == []
    deletion = RowMutation(b"r", (DeleteCells("cf", b"q", -huge, huge),))
    assert backend.mutate_rows(table, [deletion])[0].ok
    assert read(backend, table) == []


def test_read_of_a_deleted_table_never_reads_its_successor(backend: EmbeddedBackend) -> None:
    table = make_table(backend)
    fill(backend, table, 5_000)
    rows = backend.read_rows(ReadRequest(table))
    next(rows)
    backend.delete_table(table)
    make_table(backend)
    fill(backend, table, 5_000, value=b"new")
    with pytest.raises(TableNotFoundError):
        list(rows)


# -- the read fast paths: one-family tables, version checks, keyset paging ---------


def expected_rows(data: dict[bytes, list[Cell]], flt: ReadFilter,
                  reverse: bool, limit: int | None) -> list[Row]:
    """The protocol's answer, spelled out: versions kept, then the filters, newest first
    (the tables' GC rules do not apply: nothing was collected)."""
    out = []
    for key in sorted(data, reverse=reverse):
        by_column: dict[tuple[str, bytes], list[Cell]] = {}
        for c in sorted(data[key], key=lambda c: (c.family, c.qualifier, -c.timestamp)):
            by_column.setdefault((c.family, c.qualifier), []).append(c)
        cells = []
        for _, column in sorted(by_column.items()):
            kept = column[:flt.versions_kept or len(column)]
            kept = [c for c in kept if (flt.timestamp_start is None or
                                        c.timestamp >= flt.timestamp_start)
                    and (flt.timestamp_end is None or c.timestamp < flt.timestamp_end)]
            cells += kept[:flt.cells_per_column or len(kept)]
        if cells:
            out.append(Row(key, tuple(cells)))
    return out[:limit] if limit else out


@pytest.mark.parametrize("families", [("cf",), ("cf", "cg")], ids=["one-family", "two-families"])
def test_paged_reads_match_the_protocol(
    backend: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch, families: tuple[str, ...]
) -> None:
    monkeypatch.setattr(embedded_read, "FIRST_CHUNK", 3)
    monkeypatch.setattr(embedded_read, "MAX_CHUNK", 7)
    rng = random.Random(6)
    versions = {"cf": 1, "cg": 2}
    backend.create_table(TableSpec("t", tuple(
        (f, GcRule(max_versions=versions[f])) for f in families)))
    data: dict[bytes, list[Cell]] = {}
    for i in range(60):
        key = b"k%03d" % i
        cells = {(f, b"q%d" % rng.randrange(3), MS * rng.randrange(1, 6)): b"%d" % i
                 for f in families for _ in range(rng.randrange(1, 5))}
        if i % 7 == 0:  # a row bigger than a chunk
            cells.update({(families[0], b"w%02d" % j, MS): b"w" for j in range(12)})
        data[key] = [Cell(f, q, t, v) for (f, q, t), v in cells.items()]
        put(backend, "t", key, *data[key])
    filters = [ReadFilter(), ReadFilter(cells_per_column=1),
               ReadFilter(timestamp_start=2 * MS, timestamp_end=5 * MS),
               ReadFilter(timestamp_end=3 * MS, cells_per_column=1),
               ReadFilter(versions_kept=1), ReadFilter(versions_kept=2, timestamp_end=4 * MS),
               ReadFilter(versions_kept=2, timestamp_start=2 * MS, cells_per_column=1)]
    for flt, reverse, limit in itertools.product(filters, (False, True), (None, 9)):
        for rows in (RowSet(), RowSet(ranges=(RowRange(b"k010", b"k045"),)),
                     RowSet(keys=(b"k003", b"k021", b"k050"),
                            ranges=(RowRange(b"k030", b"k040"),))):
            wanted = {k: v for k, v in data.items() if rows.contains(k)}
            got = read(backend, "t", rows=rows, filter=flt, reverse=reverse, limit=limit)
            assert got == expected_rows(wanted, flt, reverse, limit), (flt, reverse)


def test_one_family_tables_do_not_fetch_the_family(backend: EmbeddedBackend) -> None:
    backend.create_table(TableSpec("one", (("cf", GcRule()),)))
    backend.create_table(TableSpec("two", (("cf", GcRule()), ("cg", GcRule()))))
    for table in ("one", "two"):
        put(backend, table, b"r", Cell("cf", b"q", MS, b"v"))
    statements: list[str] = []
    con = backend._con
    assert con is not None
    con.set_trace_callback(statements.append)
    expected = [Row(b"r", (Cell("cf", b"q", MS, b"v"),))]
    assert read(backend, "one") == read(backend, "two") == expected
    con.set_trace_callback(None)
    one, two = [s for s in statements if s.startswith("SELECT") and "tsm_cells_" in s]
    assert one.startswith("SELECT row_key, qualifier, ts, value FROM")
    assert two.startswith("SELECT row_key, family, qualifier, ts, value FROM")


def test_keyset_pages_seek_to_the_cursor(
    backend: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded_read, "MAX_CHUNK", 64)
    table = make_table(backend)
    fill(backend, table, 1_000)
    statements: list[str] = []
    con = backend._con
    assert con is not None
    con.set_trace_callback(statements.append)
    rows = RowSet(ranges=(RowRange(b"row0000100", b"row0000900"),))
    forward = read(backend, table, rows=rows)
    backward = read(backend, table, rows=rows, reverse=True)
    con.set_trace_callback(None)
    assert keys(forward) == [b"row%07d" % i for i in range(100, 900)] == keys(backward)[::-1]
    pages = [s for s in statements if s.startswith("SELECT") and "LIMIT" in s]
    assert len(pages) > 20
    for sql in pages:  # one lower and at most one upper bound: SQLite seeks to the cursor
        where = sql.split(" WHERE ", 1)[1].split(" ORDER BY ", 1)[0]
        assert where.count("row_key >") <= 1 and where.count("row_key <") <= 1, sql


def test_versions_in_a_chunk_take_the_general_path(backend: EmbeddedBackend) -> None:
    table = make_table(backend, one=GcRule(max_versions=1))
    put(backend, table, b"a", Cell("one", b"q", MS, b"a1"))
    put(backend, table, b"b", Cell("one", b"q", MS, b"b1"), Cell("one", b"q", 3 * MS, b"b3"))
    put(backend, table, b"c", Cell("one", b"q", 2 * MS, b"c2"))
    kept = ReadFilter(versions_kept=1)
    assert read(backend, table, filter=kept) == [
        Row(b"a", (Cell("one", b"q", MS, b"a1"),)),
        Row(b"b", (Cell("one", b"q", 3 * MS, b"b3"),)),
        Row(b"c", (Cell("one", b"q", 2 * MS, b"c2"),)),
    ]
    kept_before_3 = ReadFilter(versions_kept=1, timestamp_end=3 * MS)
    assert keys(read(backend, table, filter=kept_before_3)) == [b"a", b"c"]


@pytest.mark.parametrize("rule, kept", [
    (GcRule(max_versions=1), 1),
    (GcRule(max_versions=2), 2),
    (GcRule(rules=(GcRule(max_versions=3), GcRule(max_versions=2))), 2),
    (GcRule(rules=(GcRule(max_versions=3), GcRule(max_versions=2)), mode="intersection"), 3),
])
def test_version_rules_are_collected_physically(
    backend: EmbeddedBackend, rule: GcRule, kept: int
) -> None:
    table = make_table(backend, v=rule)
    for key in (b"a", b"b"):
        put(backend, table, key, *(Cell("v", q, t * MS, b"%d" % t)
                                   for q in (b"q", b"r") for t in range(1, 6)),
            Cell("cf", b"q", MS, b"kept"), Cell("cf", b"q", 2 * MS, b"kept"))
    v_only = ReadFilter(families=("v",))
    before = read(backend, table, filter=ReadFilter(families=("v",), versions_kept=kept))
    assert backend.collect_garbage(table) == 2 * 2 * (5 - kept)
    assert read(backend, table, filter=v_only) == before
    con = backend._con
    assert con is not None
    stored = con.execute("SELECT row_key, family, qualifier, ts FROM tsm_cells_1"
                         " ORDER BY row_key, family, qualifier, ts DESC").fetchall()
    assert stored == [(key, family, q, t * MS) for key in (b"a", b"b")
                      for family, q, times in (("cf", b"q", (2, 1)), ("v", b"q", None),
                                               ("v", b"r", None))
                      for t in (times or range(5, 5 - kept, -1))]
