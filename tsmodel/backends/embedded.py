"""The embedded backend: Cloud Bigtable's data model on SQLite.

Each Bigtable table is one SQLite table ``tsm_cells_<id>`` (``WITHOUT ROWID``)
keyed by ``(row_key, family, qualifier, ts DESC)``: a scan of the primary key
yields cells in Bigtable's order, and a reverse scan is the same index read
backwards. Table names, families and GC rules live in ``tsm_tables`` and
``tsm_families``, so a file database reopens with its tables.

Reads page through the primary key in chunks (keyset pagination on the row
key) and hold the lock only while a chunk is fetched: a half-consumed read
never blocks writes, and each row is read atomically. GC rules are evaluated
at read time against the current clock, so reads never see a cell that GC
would collect; such cells are also deleted physically as tables are written
and by :meth:`EmbeddedBackend.collect_garbage`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from itertools import groupby
from operator import itemgetter
from typing import Any

import attrs

from tsmodel.backends.base import (
    Cell,
    DeleteCells,
    DeleteFamily,
    DeleteRow,
    Features,
    GcRule,
    MutationOutcome,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowSet,
    SetCell,
    TableSpec,
)
from tsmodel.errors import BackendError, TableNotFoundError

__all__ = ["EmbeddedBackend"]

_MAX_ROW_KEY = 4096
_FIRST_CHUNK = 16  # cells; chunks grow 4x up to _MAX_CHUNK cells or ~_CHUNK_BYTES
_MAX_CHUNK = 4096
_CHUNK_BYTES = 2_000_000
_KEYS_PER_QUERY = 500
_NO_LIMIT = 1 << 63
_GC_MIN_WRITES = 100_000  # cells written to a table with GC rules between collections
_MICROSECOND = timedelta(microseconds=1)
_APPLIED = MutationOutcome(MutationStatus.APPLIED)
_SELECT = ("row_key, family, qualifier, ts, value", "row_key, family, qualifier, ts, x''")
_ORDER = ("row_key, family, qualifier, ts DESC", "row_key DESC, family DESC, qualifier DESC, ts")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tsm_tables (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL UNIQUE)",
    "CREATE TABLE IF NOT EXISTS tsm_families (table_id INTEGER NOT NULL, name TEXT NOT NULL,"
    " gc_rule TEXT NOT NULL, PRIMARY KEY (table_id, name)) WITHOUT ROWID",
)
_CELLS_DDL = (
    "CREATE TABLE IF NOT EXISTS {} (row_key BLOB NOT NULL, family TEXT NOT NULL,"
    " qualifier BLOB NOT NULL, ts INTEGER NOT NULL, value BLOB NOT NULL,"
    " PRIMARY KEY (row_key, family, qualifier, ts DESC)) WITHOUT ROWID"
)
# SQL notes: "+family" keeps SQLite from treating a family test as an index
# constraint, which would make it sort instead of following the primary key.

#: A cell as stored: (row_key, family, qualifier, ts, value).
_Raw = tuple[bytes, str, bytes, int, bytes]
#: A delete statement with its parameters, or a run of cells to insert.
_Step = tuple[str, tuple[Any, ...]] | list[_Raw]
#: A row-key condition (SQL) with its parameters.
_Segment = tuple[str, tuple[bytes, ...]]
#: GC test: (rank of the cell in its column, 0 = newest; cell timestamp) -> collected.
_GcTest = Callable[[int, int], bool]


# -- GC rules -------------------------------------------------------------------


def _rule_to_json(rule: GcRule) -> dict[str, Any]:
    age = None if rule.max_age is None else rule.max_age // _MICROSECOND
    rules = [_rule_to_json(sub) for sub in rule.rules]
    return {"versions": rule.max_versions, "age_us": age, "rules": rules, "mode": rule.mode}


def _rule_from_json(data: dict[str, Any]) -> GcRule:
    age = None if data["age_us"] is None else timedelta(microseconds=data["age_us"])
    rules = tuple(_rule_from_json(sub) for sub in data["rules"])
    return GcRule(max_versions=data["versions"], max_age=age, rules=rules, mode=data["mode"])


def _uses(rule: GcRule, attribute: str) -> bool:
    return getattr(rule, attribute) is not None or any(_uses(sub, attribute) for sub in rule.rules)


def _fold(
    rule: GcRule, leaf: Callable[[GcRule], int | None], union: Callable[[list[int]], int],
    intersection: Callable[[list[int]], int],
) -> int | None:
    """Reduce a rule with one kind of condition (ages or versions) to one threshold.

    ``None`` means that the rule collects nothing.
    """
    parts = [_fold(sub, leaf, union, intersection) for sub in rule.rules]
    own = leaf(rule)
    if own is not None:
        parts.append(own)
    known = [p for p in parts if p is not None]
    if rule.mode == "union":
        return union(known) if known else None
    return None if not parts or len(known) < len(parts) else intersection(known)


def _age_cutoff(rule: GcRule, now: int) -> int | None:
    """For a rule without ``max_versions``: cells with ``ts < cutoff`` are collected."""

    def leaf(r: GcRule) -> int | None:
        return None if r.max_age is None else now - r.max_age // _MICROSECOND

    return _fold(rule, leaf, max, min)


def _version_cap(rule: GcRule) -> int | None:
    """For a rule without ``max_age``: cells of rank ``>= cap`` are collected."""
    return _fold(rule, lambda r: r.max_versions, min, max)


def _gc_test(rule: GcRule, now: int) -> _GcTest:
    """Compile a rule into ``collected(rank, ts)``."""
    tests = [_gc_test(sub, now) for sub in rule.rules]
    versions = rule.max_versions
    if versions is not None:
        tests.append(lambda rank, ts: rank >= versions)
    if rule.max_age is not None:
        cutoff = now - rule.max_age // _MICROSECOND
        tests.append(lambda rank, ts: ts < cutoff)
    if len(tests) == 1:
        return tests[0]
    if not tests:
        return lambda rank, ts: False
    combine = any if rule.mode == "union" else all
    return lambda rank, ts: combine(test(rank, ts) for test in tests)


def _now_us() -> int:
    return time.time_ns() // 1000


def _clamp(ts: int | None) -> int | None:
    """A timestamp bound brought into SQLite's integer range (cells lie within it)."""
    return None if ts is None else min(max(ts, -1), _NO_LIMIT - 1)


class _Table:
    """An immutable snapshot of one table's metadata."""

    __slots__ = ("id", "name", "families", "sql_name", "insert_sql")

    def __init__(self, table_id: int, name: str, families: dict[str, GcRule]) -> None:
        self.id, self.name, self.families = table_id, name, families
        self.sql_name = f"tsm_cells_{table_id}"
        self.insert_sql = f"INSERT OR REPLACE INTO {self.sql_name} VALUES (?, ?, ?, ?, ?)"

    def has_gc(self) -> bool:
        return any(not rule.is_empty() for rule in self.families.values())

    def spec(self) -> TableSpec:
        return TableSpec(self.name, tuple(sorted(self.families.items(), key=itemgetter(0))))


# -- Read planning -------------------------------------------------------------


def _segments(rows: RowSet) -> list[_Segment]:
    """Disjoint row-key conditions in ascending key order that cover ``rows``.

    Keys and ranges are merged (so no row is read twice); runs of single keys
    become ``IN`` lists.
    """
    if rows.is_whole_table():
        return [("1", ())]
    spans: list[tuple[bytes, bytes | None]] = [(k, k + b"\0") for k in rows.keys]
    spans += [(r.start or b"", r.end) for r in rows.ranges if not r.is_empty()]
    merged: list[tuple[bytes, bytes | None]] = []
    for start, end in sorted(spans, key=itemgetter(0)):
        last = merged[-1] if merged else None
        if last is not None and (last[1] is None or start <= last[1]):
            merged[-1] = (last[0], None if last[1] is None or end is None else max(last[1], end))
        else:
            merged.append((start, end))
    out: list[_Segment] = []
    batch: list[bytes] = []
    for start, end in merged:
        single = end == start + b"\0"
        if batch and (not single or len(batch) == _KEYS_PER_QUERY):
            out.append((f"row_key IN ({', '.join('?' * len(batch))})", tuple(batch)))
            batch = []
        if single:
            batch.append(start)
        else:
            out.append(("row_key >= ?", (start,)) if end is None else
                       ("row_key >= ? AND row_key < ?", (start, end)))
    if batch:
        out.append((f"row_key IN ({', '.join('?' * len(batch))})", tuple(batch)))
    return out


class _Plan:
    """A read request compiled against one table snapshot.

    SQL applies the cell filters, age-only GC rules and, for the families
    without ``max_versions`` in their rule, the timestamp range.
    :meth:`process` applies the rest in Python: GC rules with
    ``max_versions`` (they need every version of a column), then the
    timestamp range for those families, then the cells-per-column limit.
    """

    def __init__(self, table: _Table, request: ReadRequest) -> None:
        flt = request.filter
        if request.limit is not None and request.limit < 0:
            raise BackendError(f"read limit must be >= 0, got {request.limit}")
        self.table, self.reverse, self.limit = table, request.reverse, request.limit or None
        self.ts_start, self.ts_end = _clamp(flt.timestamp_start), _clamp(flt.timestamp_end)
        self.cells_per_column = flt.cells_per_column
        #: family -> (rank cap, further test) for GC rules with max_versions
        self.gc: dict[str, tuple[int, _GcTest | None]] = {}
        where: list[str] = []
        params: list[Any] = []
        self._add_gc(flt, where, params)
        _add_cell_filters(flt, where, params)
        self._add_time_filter(where, params)
        self.where = "".join(f" AND {w}" for w in where)
        self.params = tuple(params)
        self.select = _SELECT[flt.strip_values]
        self.processed = bool(self.gc) or flt.cells_per_column is not None

    def _add_gc(self, flt: ReadFilter, where: list[str], params: list[Any]) -> None:
        now = _now_us()
        for family, rule in self.table.families.items():
            if rule.is_empty() or (flt.families is not None and family not in flt.families):
                continue
            if not _uses(rule, "max_versions"):
                if (cutoff := _age_cutoff(rule, now)) is not None:
                    where.append("NOT (+family = ? AND ts < ?)")
                    params.extend((family, cutoff))
            elif not _uses(rule, "max_age"):
                cap = _version_cap(rule)
                self.gc[family] = (_NO_LIMIT if cap is None else cap, None)
            else:
                self.gc[family] = (_NO_LIMIT, _gc_test(rule, now))

    def _add_time_filter(self, where: list[str], params: list[Any]) -> None:
        candidates = (("ts >= ?", self.ts_start), ("ts < ?", self.ts_end))
        bounds = [(sql, value) for sql, value in candidates if value is not None]
        if not bounds:
            return
        test = " AND ".join(sql for sql, _ in bounds)
        if self.gc:  # the families with versions-based GC are filtered in process()
            where.append(f"(+family IN ({', '.join('?' * len(self.gc))}) OR ({test}))")
            params.extend(self.gc)
        else:
            where.append(test)
        params.extend(value for _, value in bounds)

    def process(self, cells: list[_Raw]) -> list[_Raw]:
        """Filter cells (sorted in Bigtable's order) as the class says."""
        out: list[_Raw] = []
        gc, limit = self.gc, self.cells_per_column or _NO_LIMIT
        start = -1 if self.ts_start is None else self.ts_start
        end = _NO_LIMIT if self.ts_end is None else self.ts_end
        column: tuple[bytes, str, bytes | None] = (b"", "", None)
        rank = kept = 0
        cap, test, collects = _NO_LIMIT, None, False
        for cell in cells:
            key, family, qualifier, ts, _ = cell
            if qualifier != column[2] or family != column[1] or key != column[0]:
                column, rank, kept = (key, family, qualifier), 0, 0
                collects = family in gc
                cap, test = gc.get(family, (_NO_LIMIT, None))
            else:
                rank += 1
            if collects and (
                rank >= cap or (test is not None and test(rank, ts)) or not start <= ts < end
            ):
                continue
            if kept < limit:
                kept += 1
                out.append(cell)
        return out


def _add_cell_filters(flt: ReadFilter, where: list[str], params: list[Any]) -> None:
    if flt.families is not None:
        where.append(f"+family IN ({', '.join('?' * len(flt.families))})")
        params.extend(flt.families)
    if flt.columns is not None:
        values = ", ".join("(?, ?)" for _ in flt.columns)
        where.append(f"(+family, qualifier) IN (VALUES {values})" if values else "0")
        params.extend(part for column in flt.columns for part in column)
    if flt.qualifier_start is not None:
        where.append("qualifier >= ?")
        params.append(flt.qualifier_start)
    if flt.qualifier_end is not None:
        where.append("qualifier < ?")
        params.append(flt.qualifier_end)


# -- The backend ---------------------------------------------------------------


class EmbeddedBackend:
    """Cloud Bigtable's data model on SQLite, in memory or in a file.

    Args:
        path: a SQLite database file (``file:`` URIs are accepted), or
            ``":memory:"`` (the default) for a store that lives as long as
            the backend.

    Raises:
        BackendError: the database cannot be opened.

    One backend may be shared by threads: every SQLite call runs under a lock.
    Several backends (or processes) may open the same file.
    """

    def __init__(self, path: str = ":memory:") -> None:
        self.path = path
        persistent = path not in (":memory:", "") and "mode=memory" not in path
        self.features = Features(reverse_scan=True, immediate_gc=True, persistent=persistent)
        self._lock = threading.RLock()
        self._tables: dict[str, _Table] = {}
        self._meta_version = -1
        self._gc_due: dict[int, tuple[int, int]] = {}  # table id -> (written, threshold)
        self._con: sqlite3.Connection | None = None
        with self._lock, _wrapped(f"open the embedded store at {path!r}"):
            self._con = _connect(path, persistent)
            try:
                self._sync_meta()
            except sqlite3.Error:
                self._con.close()
                raise

    def __enter__(self) -> EmbeddedBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddedBackend({self.path!r})"

    def _db(self) -> sqlite3.Connection:
        if self._con is None:
            raise BackendError("the embedded backend is closed")
        return self._con

    def _sync_meta(self) -> None:
        """Reload the metadata if it changed (``user_version`` counts changes)."""
        con = self._db()
        (version,) = con.execute("PRAGMA user_version").fetchone()
        if version == self._meta_version:
            return
        families: dict[int, dict[str, GcRule]] = {}
        for table_id, name, rule in con.execute("SELECT table_id, name, gc_rule FROM tsm_families"):
            families.setdefault(table_id, {})[name] = _rule_from_json(json.loads(rule))
        self._tables = {
            name: _Table(table_id, name, families.get(table_id, {}))
            for table_id, name in con.execute("SELECT id, name FROM tsm_tables")
        }
        self._meta_version = version

    def _table(self, name: str) -> _Table:
        """The metadata of table ``name``; call with the lock held."""
        self._sync_meta()
        table = self._tables.get(name)
        if table is None:
            raise TableNotFoundError(f"table {name!r} does not exist in the embedded store")
        return table

    # -- tables

    def create_table(self, spec: TableSpec) -> None:
        """Create the table with its families, or add missing families to it.

        Idempotent: an existing table keeps its data; the families of ``spec``
        get its GC rules (applying at once to existing cells); other families
        are left alone.

        Raises:
            BackendError: a table or family name is empty, or SQLite failed.
        """
        if not spec.name or not all(spec.family_names()):
            raise BackendError(f"table and family names must not be empty: {spec!r}")
        with self._lock, _wrapped(f"create table {spec.name!r}"):
            con = self._db()
            with _transaction(con):
                con.execute("INSERT OR IGNORE INTO tsm_tables (name) VALUES (?)", (spec.name,))
                select = "SELECT id FROM tsm_tables WHERE name = ?"
                (table_id,) = con.execute(select, (spec.name,)).fetchone()
                con.execute(_CELLS_DDL.format(f"tsm_cells_{table_id}"))
                rules = [(table_id, n, json.dumps(_rule_to_json(r))) for n, r in spec.families]
                con.executemany(
                    "INSERT INTO tsm_families (table_id, name, gc_rule) VALUES (?, ?, ?)"
                    " ON CONFLICT (table_id, name) DO UPDATE SET gc_rule = excluded.gc_rule",
                    rules,
                )
                _bump_meta_version(con)
            self._sync_meta()

    def delete_table(self, name: str) -> None:
        """Delete a table and its data. A missing table is not an error."""
        with self._lock, _wrapped(f"delete table {name!r}"):
            con = self._db()
            self._sync_meta()
            table = self._tables.get(name)
            if table is None:
                return
            with _transaction(con):
                con.execute(f"DROP TABLE IF EXISTS {table.sql_name}")
                con.execute("DELETE FROM tsm_families WHERE table_id = ?", (table.id,))
                con.execute("DELETE FROM tsm_tables WHERE id = ?", (table.id,))
                _bump_meta_version(con)
            self._gc_due.pop(table.id, None)
            self._sync_meta()

    def list_tables(self) -> list[str]:
        """The names of all tables, sorted."""
        with self._lock, _wrapped("list tables"):
            self._sync_meta()
            return sorted(self._tables)

    def describe_table(self, name: str) -> TableSpec:
        """The table's families (sorted by name) and their GC rules.

        Raises:
            TableNotFoundError: the table does not exist.
        """
        with self._lock, _wrapped(f"describe table {name!r}"):
            return self._table(name).spec()

    # -- writes

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        """Apply each entry atomically to its row; entries are independent.

        An entry fails as a whole, and nothing of it is applied, when it names
        a family the table lacks, has a negative timestamp or one that is not
        a whole number of milliseconds, has an empty or oversized (> 4 KiB)
        row key, or has no mutations. The valid entries are written in one
        SQLite transaction.

        Returns:
            One outcome per entry, in order.

        Raises:
            TableNotFoundError: the table does not exist (nothing was applied).
            BackendError: the backend is closed.
        """
        with self._lock, _wrapped(f"write to table {table!r}"):
            meta = self._table(table)
            outcomes = [_APPLIED] * len(entries)
            steps: list[_Step] = [[]]
            valid: list[int] = []
            for index, entry in enumerate(entries):
                try:
                    _compile_entry(meta, entry, steps)
                except BackendError as exc:
                    outcomes[index] = MutationOutcome(MutationStatus.FAILED, exc)
                else:
                    valid.append(index)
            if valid:
                self._apply(meta, steps, [(i, entries[i]) for i in valid], outcomes)
            return outcomes

    def _apply(
        self, meta: _Table, steps: list[_Step], entries: list[tuple[int, RowMutation]],
        outcomes: list[MutationOutcome],
    ) -> None:
        """Write all steps in one transaction.

        If that fails because of the data (not of the database: locked, full,
        I/O), each entry is tried again in its own transaction to find those
        that fail.
        """
        con = self._db()
        try:
            with _transaction(con):
                _execute_steps(con, meta, steps)
        except sqlite3.Error as exc:
            for index, entry in entries:
                error = exc
                if not isinstance(exc, sqlite3.OperationalError):
                    entry_steps: list[_Step] = [[]]
                    _compile_entry(meta, entry, entry_steps)
                    try:
                        with _transaction(con):
                            _execute_steps(con, meta, entry_steps)
                        continue
                    except sqlite3.Error as entry_exc:
                        error = entry_exc
                failure = BackendError(f"write to table {meta.name!r} failed: {error}")
                failure.__cause__ = error
                outcomes[index] = MutationOutcome(MutationStatus.FAILED, failure)
        if meta.has_gc():
            self._gc_after_writes(meta, sum(len(s) for s in steps if isinstance(s, list)))

    def _gc_after_writes(self, meta: _Table, cells: int) -> None:
        """Collect garbage once about as many cells were written as the table holds."""
        written, threshold = self._gc_due.get(meta.id, (0, _GC_MIN_WRITES))
        self._gc_due[meta.id] = (written + cells, threshold)
        if written + cells >= threshold:
            try:
                self._collect(meta)
            except sqlite3.Error:  # best effort: reads leave out collected cells anyway
                self._gc_due[meta.id] = (0, threshold)

    # -- garbage collection

    def collect_garbage(self, table: str | None = None) -> int:
        """Delete physically, now, the cells that the GC rules collect.

        Reads never return such cells anyway; this reclaims their space. It
        also runs by itself as tables with GC rules are written.

        Args:
            table: one table, or ``None`` for every table.

        Returns:
            The number of cells deleted.

        Raises:
            TableNotFoundError: ``table`` does not exist.
        """
        with self._lock, _wrapped("collect garbage"):
            self._sync_meta()
            names = [table] if table is not None else sorted(self._tables)
            return sum(self._collect(self._table(name)) for name in names)

    def _collect(self, meta: _Table) -> int:
        con, now, deleted = self._db(), _now_us(), 0
        with _transaction(con):
            for family, rule in meta.families.items():
                if not rule.is_empty():
                    deleted += _collect_family(con, meta, family, rule, now)
        (remaining,) = con.execute(f"SELECT count(*) FROM {meta.sql_name}").fetchone()
        self._gc_due[meta.id] = (0, max(_GC_MIN_WRITES, remaining))
        return deleted

    # -- reads

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        """Stream the rows of ``request`` in key order (descending if reversed).

        GC applies first, then the filters in
        :class:`~tsmodel.backends.base.ReadFilter`'s order; rows with no cell
        left are skipped. Rows are fetched in chunks, never all held in
        memory; writes may run between chunks, and each row is read atomically.

        Raises:
            TableNotFoundError: the table does not exist (raised by this call;
                during iteration, if the table is deleted meanwhile).
            BackendError: the request is invalid, or SQLite failed.
        """
        with self._lock, _wrapped(f"read table {request.table!r}"):
            plan = _Plan(self._table(request.table), request)
        return self._stream(plan, _segments(request.rows))

    def _stream(self, plan: _Plan, segments: list[_Segment]) -> Iterator[Row]:
        remaining = plan.limit
        for segment in reversed(segments) if plan.reverse else segments:
            for row in self._scan(plan, segment):
                yield row
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return

    def _scan(self, plan: _Plan, segment: _Segment) -> Iterator[Row]:
        """Page through one segment by row key, one chunk of cells at a time.

        A chunk that ends inside a row is cut before that row, which the next
        chunk starts with; a row bigger than a chunk is fetched on its own.
        """
        condition, bounds = segment
        cursor: tuple[str, bytes] | None = None
        size = _FIRST_CHUNK if plan.limit is None else min(_FIRST_CHUNK, 4 * plan.limit)
        while True:
            where, params = (condition, bounds) if cursor is None else (
                f"{condition} AND {cursor[0]}", (*bounds, cursor[1])
            )
            chunk = self._fetch(plan, where, params, size)
            if len(chunk) < size:
                yield from _rows(plan, chunk)
                return
            last, cut = chunk[-1][0], len(chunk) - 1
            while cut > 0 and chunk[cut - 1][0] == last:
                cut -= 1
            size = _next_chunk_size(chunk, size)
            if cut == 0:  # one row fills the chunk: read it whole
                del chunk
                chunk = self._fetch(plan, "row_key = ?", (last,), None)
                cursor = ("row_key < ?" if plan.reverse else "row_key > ?", last)
            else:
                del chunk[cut:]
                cursor = ("row_key <= ?" if plan.reverse else "row_key >= ?", last)
            yield from _rows(plan, chunk)
            del chunk  # before the next fetch: at most one chunk is alive

    def _fetch(
        self, plan: _Plan, where: str, bounds: tuple[bytes, ...], size: int | None
    ) -> list[_Raw]:
        sql = (
            f"SELECT {plan.select} FROM {plan.table.sql_name} WHERE {where}{plan.where}"
            f" ORDER BY {_ORDER[plan.reverse]}" + ("" if size is None else f" LIMIT {size}")
        )
        with self._lock, _wrapped(f"read table {plan.table.name!r}"):
            try:
                return self._db().execute(sql, bounds + plan.params).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    raise TableNotFoundError(f"table {plan.table.name!r} was deleted") from exc
                raise

    def close(self) -> None:
        """Close the SQLite connection. Idempotent."""
        with self._lock, _wrapped("close the embedded store"):
            con, self._con = self._con, None
            if con is not None:
                con.close()


# -- SQLite helpers ------------------------------------------------------------


def _connect(path: str, persistent: bool) -> sqlite3.Connection:
    con = sqlite3.connect(
        path, timeout=30.0, isolation_level=None, check_same_thread=False,
        uri=path.startswith("file:"),
    )
    if persistent:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
    for ddl in _SCHEMA:
        con.execute(ddl)
    return con


def _bump_meta_version(con: sqlite3.Connection) -> None:
    (version,) = con.execute("PRAGMA user_version").fetchone()
    con.execute(f"PRAGMA user_version = {int(version) + 1}")


@contextmanager
def _transaction(con: sqlite3.Connection) -> Iterator[None]:
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.rollback()
        raise


@contextmanager
def _wrapped(what: str) -> Iterator[None]:
    """Turn :class:`sqlite3.Error` into :class:`BackendError`, keeping the cause."""
    try:
        yield
    except sqlite3.Error as exc:
        raise BackendError(f"{what} failed: {exc}") from exc


# -- Writes --------------------------------------------------------------------


def _compile_entry(meta: _Table, entry: RowMutation, steps: list[_Step]) -> None:
    """Append the SQL steps of one entry to ``steps``, which ends with a run.

    Raises:
        BackendError: the entry is invalid; ``steps`` is then left unchanged.
    """
    key = entry.key
    if not isinstance(key, bytes) or not key or len(key) > _MAX_ROW_KEY:
        raise BackendError(f"row key must be 1 to {_MAX_ROW_KEY} bytes, got {key!r:.80}")
    if not entry.mutations:
        raise BackendError(f"row {key!r:.80}: an entry needs at least one mutation")
    mark, run = len(steps), steps[-1]
    assert isinstance(run, list)
    run_mark = len(run)
    try:
        _append_mutations(meta, key, entry.mutations, steps)
    except BackendError:
        del steps[mark:]
        del run[run_mark:]
        raise


def _append_mutations(
    meta: _Table, key: bytes, mutations: Sequence[object], steps: list[_Step]
) -> None:
    families, run = meta.families, steps[-1]
    assert isinstance(run, list)
    for mutation in mutations:
        if type(mutation) is SetCell or isinstance(mutation, SetCell):
            family, qualifier, ts, value = (
                mutation.family, mutation.qualifier, mutation.timestamp, mutation.value
            )
            if (
                family not in families or not isinstance(ts, int) or not 0 <= ts < _NO_LIMIT
                or ts % 1000
                or not isinstance(qualifier, bytes) or not isinstance(value, bytes)
            ):
                _reject(meta, key, mutation)
            run.append((key, family, qualifier, ts, value))
        else:
            steps.append(_delete_step(meta, key, mutation))
            run = []
            steps.append(run)


def _reject(meta: _Table, key: bytes, mutation: object) -> None:
    family = getattr(mutation, "family", None)
    where = f"table {meta.name!r}, row {key!r:.80}"
    if family is not None and family not in meta.families:
        known = ", ".join(sorted(meta.families)) or "none"
        raise BackendError(f"{where}: no column family {family!r} (families: {known})")
    ts = getattr(mutation, "timestamp", 0)
    if not isinstance(ts, int) or not 0 <= ts < _NO_LIMIT or ts % 1000:
        raise BackendError(
            f"{where}: timestamp {ts!r} must be an int of microseconds in whole"
            " milliseconds (a multiple of 1000), from 0 to 2**63 - 1"
        )
    raise BackendError(f"{where}: invalid mutation {mutation!r:.200}")


def _delete_step(meta: _Table, key: bytes, mutation: object) -> tuple[str, tuple[Any, ...]]:
    table = meta.sql_name
    if isinstance(mutation, DeleteRow):
        return f"DELETE FROM {table} WHERE row_key = ?", (key,)
    if isinstance(mutation, DeleteFamily) and mutation.family in meta.families:
        return f"DELETE FROM {table} WHERE row_key = ? AND family = ?", (key, mutation.family)
    if not isinstance(mutation, DeleteCells) or mutation.family not in meta.families:
        _reject(meta, key, mutation)
    assert isinstance(mutation, DeleteCells)
    sql = f"DELETE FROM {table} WHERE row_key = ? AND family = ? AND qualifier = ?"
    params: tuple[Any, ...] = (key, mutation.family, mutation.qualifier)
    if mutation.timestamp_start is not None:
        sql, params = sql + " AND ts >= ?", (*params, _clamp(mutation.timestamp_start))
    if mutation.timestamp_end is not None:
        sql, params = sql + " AND ts < ?", (*params, _clamp(mutation.timestamp_end))
    return sql, params


def _execute_steps(con: sqlite3.Connection, meta: _Table, steps: list[_Step]) -> None:
    """Run the steps in order, each run of inserts as one ``executemany``."""
    pending: list[_Raw] = []
    for step in steps:
        if isinstance(step, list):
            pending.extend(step)
            continue
        if pending:
            con.executemany(meta.insert_sql, pending)
            pending = []
        con.execute(*step)
    if pending:
        con.executemany(meta.insert_sql, pending)


def _collect_family(
    con: sqlite3.Connection, meta: _Table, family: str, rule: GcRule, now: int
) -> int:
    """Delete the cells of ``family`` that ``rule`` collects; return how many."""
    table = meta.sql_name
    if not _uses(rule, "max_versions"):
        cutoff = _age_cutoff(rule, now)
        if cutoff is None:
            return 0
        delete = f"DELETE FROM {table} WHERE +family = ? AND ts < ?"
        return con.execute(delete, (family, cutoff)).rowcount
    collected = _gc_test(rule, now)
    select = f"SELECT row_key, qualifier, ts FROM {table} WHERE +family = ? ORDER BY {_ORDER[0]}"
    doomed = [
        (key, family, qualifier, ts)
        for _, column in groupby(con.execute(select, (family,)), key=itemgetter(0, 1))
        for rank, (key, qualifier, ts) in enumerate(column)
        if collected(rank, ts)
    ]
    delete = f"DELETE FROM {table} WHERE row_key = ? AND family = ? AND qualifier = ? AND ts = ?"
    con.executemany(delete, doomed)
    return len(doomed)


# -- Reads ---------------------------------------------------------------------


def _next_chunk_size(chunk: list[_Raw], size: int) -> int:
    sample = chunk[:: max(1, len(chunk) // 16)]
    per_cell = 64 + sum(len(c[0]) + len(c[2]) + len(c[4]) for c in sample) // len(sample)
    return max(_FIRST_CHUNK, min(4 * size, _MAX_CHUNK, _CHUNK_BYTES // per_cell))


def _rows(plan: _Plan, chunk: list[_Raw]) -> Iterator[Row]:
    """Turn a chunk of cells (whole rows, in scan order) into rows, one at a time."""
    if plan.processed:  # process() wants each row's cells in Bigtable's order
        chunk = plan.process(chunk[::-1])[::-1] if plan.reverse else plan.process(chunk)
    return _build_rows(chunk, plan.reverse)


def _build_rows_init(chunk: list[_Raw], reverse: bool) -> Iterator[Row]:
    """Group cells sorted by row key into rows, each row's cells reversed if asked."""
    for key, group in groupby(chunk, key=itemgetter(0)):
        cells = [Cell(family, qualifier, ts, value) for _, family, qualifier, ts, value in group]
        yield Row(key, tuple(reversed(cells) if reverse else cells))


def _build_rows_slots(chunk: list[_Raw], reverse: bool) -> Iterator[Row]:
    """Like :func:`_build_rows_init`, a third faster: fills Cell's slots directly."""
    new = object.__new__
    set_family, set_qualifier, set_timestamp, set_value = _CELL_SETTERS or ()
    key, cells = b"", list[Cell]()  # no row key is empty
    for row_key, family, qualifier, ts, value in chunk:
        if row_key != key:
            if cells:
                yield Row(key, tuple(reversed(cells) if reverse else cells))
            key, cells = row_key, []
        cell = new(Cell)
        set_family(cell, family)
        set_qualifier(cell, qualifier)
        set_timestamp(cell, ts)
        set_value(cell, value)
        cells.append(cell)
    if cells:
        yield Row(key, tuple(reversed(cells) if reverse else cells))


def _cell_setters() -> tuple[Callable[[Cell, Any], None], ...] | None:
    """The setters of Cell's slots, if filling them is all that ``Cell()`` does."""
    fields = attrs.fields(Cell)
    names = tuple(f.name for f in fields)
    if (
        names != ("family", "qualifier", "timestamp", "value")
        or any(f.validator is not None or f.converter is not None for f in fields)
        or hasattr(Cell, "__attrs_post_init__") or hasattr(Cell, "__attrs_pre_init__")
    ):
        return None
    setters = tuple(getattr(Cell.__dict__.get(name), "__set__", None) for name in names)
    return None if None in setters else setters  # type: ignore[return-value]


_CELL_SETTERS = _cell_setters()
_build_rows = _build_rows_init if _CELL_SETTERS is None else _build_rows_slots
