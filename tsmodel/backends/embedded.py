"""The embedded backend: Cloud Bigtable's data model on SQLite.

Each Bigtable table is one SQLite table ``tsm_cells_<id>`` (``WITHOUT ROWID``)
keyed by ``(row_key, family, qualifier, ts DESC)``: a scan of the primary key
yields cells in Bigtable's order, and a reverse scan is the same index read
backwards. Table names, families and GC rules live in ``tsm_tables`` and
``tsm_families``, so a file database reopens with its tables.

Reads page through the primary key in chunks (keyset pagination on the row
key) and hold the lock only while a chunk is fetched: a half-consumed read
never blocks writes, and each row is read atomically. GC rules do not apply
to reads: as on Cloud Bigtable before its garbage collection runs, a read
returns every cell written until `EmbeddedBackend.collect_garbage()`
deletes what the rules collect (it also runs by itself as tables are
written). So the store answers exactly as Bigtable does before GC.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from itertools import chain, groupby, islice
from operator import itemgetter
from typing import Any, TypeAlias

import attrs

from tsmodel.backends import _embedded_read as _read
from tsmodel.errors import BackendError, ReadInterruptedError, TableNotFoundError
from tsmodel.ground import gc
from tsmodel.ground.base import (
    AddToCell,
    CellBatch,
    DeclaredRows,
    DeleteCells,
    DeleteFamily,
    DeleteRow,
    Features,
    GcRule,
    KeySample,
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    Row,
    RowMutation,
    SetCell,
    TableSpec,
    batches_of,
)

__all__ = ["EmbeddedBackend"]

_MAX_ROW_KEY = 4096
_GC_MIN_WRITES = 100_000  # cells written to a table with GC rules between collections
#: About how many bytes of cells lie between two keys ``sample_row_keys`` returns.
SAMPLE_BYTES = 4 * 1024 * 1024
#: The size of a cell besides its qualifier and value, as ``sample_row_keys`` counts it
#: (family, timestamp), and of a row besides its key and cells.
_CELL_OVERHEAD = 12
#: SQLite errors of a read that may pass (another process holds the database).
_TRANSIENT = ("database is locked", "database table is locked", "database is busy")
_APPLIED = MutationOutcome(MutationStatus.APPLIED)
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

#: A delete statement with its parameters, or a run of cells to insert.
_Step: TypeAlias = "tuple[str, tuple[Any, ...]] | list[_read.Raw] | _Conditional"


@attrs.frozen
class _Conditional:
    """The steps of an entry applied only if its row holds no cell at or after ``since``."""

    key: bytes
    since: int
    steps: list[_Step]


# -- GC rules -------------------------------------------------------------------


#: The key of a family's settings (stored beside its GC rule) that makes it an
#: aggregate family: ``"sum"`` (int64 sums, the one aggregate the emulator has).
_AGGREGATE = "aggregate"


def _rule_to_json(rule: GcRule) -> dict[str, Any]:
    age = None if rule.max_age is None else rule.max_age // gc.MICROSECOND
    rules = [_rule_to_json(sub) for sub in rule.rules]
    return {"versions": rule.max_versions, "age_us": age, "rules": rules, "mode": rule.mode}


def _rule_from_json(data: dict[str, Any]) -> GcRule:
    age = None if data["age_us"] is None else timedelta(microseconds=data["age_us"])
    rules = tuple(_rule_from_json(sub) for sub in data["rules"])
    return GcRule(max_versions=data["versions"], max_age=age, rules=rules, mode=data["mode"])


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
        self.features = Features(reverse_scan=True, immediate_gc=False, persistent=persistent)
        self._lock = threading.RLock()
        self._tables: dict[str, _read.Table] = {}
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
        self._tables = {table.name: table for table in _read_tables(con)}
        self._meta_version = version

    @contextmanager
    def _changing_meta(self, name: str) -> Iterator[sqlite3.Connection]:
        """A transaction that changes table ``name``'s metadata; call with the lock held.

        The change is counted (``user_version``), and the metadata kept in memory
        follows it: only ``name`` is read again when no other connection changed
        any metadata since this one last read it, so a change costs the same
        however many tables the store holds; otherwise everything is read again
        at the next call.
        """
        con = self._db()
        try:
            with _transaction(con):
                yield con
                (version,) = con.execute("PRAGMA user_version").fetchone()
                con.execute(f"PRAGMA user_version = {int(version) + 1}")
                if version == self._meta_version:
                    tables = {key: t for key, t in self._tables.items() if key != name}
                    tables.update((t.name, t) for t in _read_tables(con, name))
                    self._tables, self._meta_version = tables, version + 1
                else:
                    self._meta_version = -1
        except BaseException:
            self._meta_version = -1  # rolled back: read everything again
            raise

    def _table(self, name: str) -> _read.Table:
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
        get its GC rules (which apply to existing cells when garbage is next
        collected); other families are left alone. A family is created an
        aggregate (int64 sum) family when ``spec.aggregates`` names it; an
        existing family keeps its kind, as on Bigtable.

        Raises:
            BackendError: a table or family name is empty, or SQLite failed.
        """
        if not spec.name or not all(spec.family_names()):
            raise BackendError(f"table and family names must not be empty: {spec!r}")
        with self._lock, _wrapped(f"create table {spec.name!r}"):
            con = self._db()
            self._sync_meta()
            known = self._tables.get(spec.name)
            def settings(family: str, rule: GcRule) -> str:
                data = _rule_to_json(rule)
                if (family in known.aggregates if known is not None and family in known.families
                        else family in spec.aggregates):
                    data[_AGGREGATE] = "sum"
                return json.dumps(data)

            with self._changing_meta(spec.name):
                con.execute("INSERT OR IGNORE INTO tsm_tables (name) VALUES (?)", (spec.name,))
                select = "SELECT id FROM tsm_tables WHERE name = ?"
                (table_id,) = con.execute(select, (spec.name,)).fetchone()
                con.execute(_CELLS_DDL.format(f"tsm_cells_{table_id}"))
                rules = [(table_id, n, settings(n, r)) for n, r in spec.families]
                con.executemany(
                    "INSERT INTO tsm_families (table_id, name, gc_rule) VALUES (?, ?, ?)"
                    " ON CONFLICT (table_id, name) DO UPDATE SET gc_rule = excluded.gc_rule",
                    rules,
                )
            self._sync_meta()

    def delete_table(self, name: str) -> None:
        """Delete a table and its data. A missing table is not an error."""
        with self._lock, _wrapped(f"delete table {name!r}"):
            con = self._db()
            self._sync_meta()
            table = self._tables.get(name)
            if table is None:
                return
            with self._changing_meta(name):
                con.execute(f"DROP TABLE IF EXISTS {table.sql_name}")
                con.execute("DELETE FROM tsm_families WHERE table_id = ?", (table.id,))
                con.execute("DELETE FROM tsm_tables WHERE id = ?", (table.id,))
            self._gc_due.pop(table.id, None)
            self._sync_meta()

    def delete_family(self, table: str, family: str) -> None:
        """Delete one family of a table and its cells. A missing family is not an error.

        Raises:
            TableNotFoundError: the table does not exist.
        """
        with self._lock, _wrapped(f"delete family {family!r} of table {table!r}"):
            con = self._db()
            meta = self._table(table)
            if family not in meta.families:
                return
            with self._changing_meta(table):
                con.execute(f"DELETE FROM {meta.sql_name} WHERE family = ?", (family,))
                con.execute("DELETE FROM tsm_families WHERE table_id = ? AND name = ?",
                            (meta.id, family))
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
        if isinstance(entries, DeclaredRows):  # its rows, each made once
            entries = list(entries)
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
        self, meta: _read.Table, steps: list[_Step], entries: list[tuple[int, RowMutation]],
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

    def _gc_after_writes(self, meta: _read.Table, cells: int) -> None:
        """Collect garbage once twice as many cells were written as the table holds.

        A collection visits every cell of the families with GC rules, so its
        cost per cell written since the last one stays a fraction of a write;
        the garbage it leaves meanwhile is never read (reads apply the rules).
        """
        written, threshold = self._gc_due.get(meta.id, (0, _GC_MIN_WRITES))
        self._gc_due[meta.id] = (written + cells, threshold)
        if written + cells >= threshold:
            try:
                self._collect(meta)
            except sqlite3.Error:  # best effort: the cells stay until the next collection
                self._gc_due[meta.id] = (0, threshold)

    # -- garbage collection

    def collect_garbage(self, table: str | None = None) -> int:
        """Delete physically, now, the cells that the GC rules collect.

        Until then reads return them, as Cloud Bigtable does before its
        garbage collection runs (tsmodel's queries read with the version
        limit and the max age as filters, so their answers do not change).
        It also runs by itself after every 100,000 or so cells written to a
        table with GC rules.

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

    def _collect(self, meta: _read.Table) -> int:
        con, now, deleted = self._db(), _read.now_us(), 0
        with _transaction(con):
            for family, rule in meta.families.items():
                if not rule.is_empty():
                    deleted += _collect_family(con, meta, family, rule, now)
        (remaining,) = con.execute(f"SELECT count(*) FROM {meta.sql_name}").fetchone()
        self._gc_due[meta.id] = (0, max(_GC_MIN_WRITES, 2 * remaining))
        return deleted

    # -- reads

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        """Stream the rows of ``request`` in key order (descending if reversed).

        GC applies first, then the filters in
        `ReadFilter`'s order; rows with no cell
        left are skipped. Rows are fetched in chunks, never all held in
        memory; writes may run between chunks, and each row is read atomically.

        Raises:
            TableNotFoundError: the table does not exist (raised by this call;
                during iteration, if the table is deleted meanwhile).
            BackendError: the request is invalid, or SQLite failed.
        """
        with self._lock, _wrapped(f"read table {request.table!r}"):
            plan = _read.Plan(self._table(request.table), request)
        return self._stream(plan, _read.segments(request.rows))

    def read_batches(self, request: ReadRequest) -> Iterator[CellBatch]:
        """`read_rows()` in columns: the same rows, in `CellBatch` es of 256 rows.

        Raises:
            TableNotFoundError, BackendError: as `read_rows()`.
        """
        return batches_of(self.read_rows(request))

    def _stream(self, plan: _read.Plan, segments: list[_read.Segment]) -> Iterator[Row]:
        scans = (self._scan(plan, segment)
                 for segment in (reversed(segments) if plan.reverse else segments))
        rows = chain.from_iterable(scans)
        return rows if plan.limit is None else islice(rows, plan.limit)

    def _scan(self, plan: _read.Plan, segment: _read.Segment) -> Iterator[Row]:
        """Page through one segment by row key, one chunk of cells at a time.

        A chunk that ends inside a row is cut before that row, which the next
        chunk starts with; a row bigger than a chunk is fetched on its own.
        """
        after: tuple[str, bytes] | None = None
        size = _read.FIRST_CHUNK if plan.limit is None else min(_read.FIRST_CHUNK, 4 * plan.limit)
        while True:
            where, params = _read.segment_where(segment, after, plan.reverse)
            chunk = self._fetch(plan, where, params, size)
            if len(chunk) < size:
                yield from _read.rows_of_chunk(plan, chunk)
                return
            last, cut = chunk[-1][0], len(chunk) - 1
            while cut > 0 and chunk[cut - 1][0] == last:
                cut -= 1
            size = _read.next_chunk_size(chunk, size)
            if cut == 0:  # one row fills the chunk: read it whole
                del chunk
                chunk = self._fetch(plan, "row_key = ?", (last,), None)
                after = ("<" if plan.reverse else ">", last)
            else:
                del chunk[cut:]
                after = ("<=" if plan.reverse else ">=", last)
            yield from _read.rows_of_chunk(plan, chunk)
            del chunk  # before the next fetch: at most one chunk is alive

    def _fetch(
        self, plan: _read.Plan, where: str, bounds: tuple[bytes, ...], size: int | None
    ) -> list[_read.Raw]:
        sql = (
            f"SELECT {plan.select} FROM {plan.table.sql_name} WHERE {where}{plan.where}"
            f" ORDER BY {_read.ORDER[plan.reverse]}" + ("" if size is None else f" LIMIT {size}")
        )
        with self._lock, _wrapped(f"read table {plan.table.name!r}"):
            try:
                return self._db().execute(sql, bounds + plan.params).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    raise TableNotFoundError(f"table {plan.table.name!r} was deleted") from exc
                if any(word in str(exc) for word in _TRANSIENT):  # another process writes
                    raise ReadInterruptedError(
                        f"read table {plan.table.name!r} broke off: {exc}") from exc
                raise

    def sample_row_keys(self, table: str) -> list[KeySample]:
        """Row keys about `SAMPLE_BYTES` of cells apart, then ``b""`` (the end).

        The first row's key comes first (offset 0); each next sample is the
        first row that starts past another ``SAMPLE_BYTES`` of cells
        (counting row keys, qualifiers, values and a few bytes per cell), as
        Cloud Bigtable's ``SampleRowKeys`` cuts a table into runs of about
        equal size. One pass over the table's primary key, in SQLite.

        Raises:
            TableNotFoundError: the table does not exist.
            BackendError: SQLite failed.
        """
        step = max(1, int(SAMPLE_BYTES))
        with self._lock, _wrapped(f"sample the row keys of table {table!r}"):
            meta = self._table(table)
            sized = (f"SELECT row_key, sum(length(row_key) + length(qualifier) + length(value)"
                     f" + {_CELL_OVERHEAD}) AS size FROM {meta.sql_name} GROUP BY row_key")
            before = ("SELECT row_key, sum(size) OVER (ORDER BY row_key) - size AS offset,"
                      f" sum(size) OVER () AS total FROM ({sized})")
            runs = ("SELECT row_key, offset, total, offset / ? AS run,"
                    " lag(offset / ?, 1, -1) OVER (ORDER BY row_key) AS previous"
                    f" FROM ({before})")
            found = self._db().execute(
                f"SELECT row_key, offset, total FROM ({runs}) WHERE run != previous"
                " ORDER BY row_key", (step, step)).fetchall()
        if not found:
            return []
        samples = [KeySample(bytes(key), int(offset)) for key, offset, _ in found]
        samples.append(KeySample(b"", int(found[0][2])))
        return samples

    def check_reachable(self, timeout: float) -> None:
        """Return at once: the store lives in this process.

        See `Reachable`.

        Raises:
            BackendError: the backend is closed.
        """
        self._db()

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
    con.create_function("tsm_add_int64", 2, _add_int64, deterministic=True)
    return con


def _add_int64(old: bytes, added: bytes) -> bytes:
    """The sum of two 8-byte big-endian int64 cells, wrapping around at 2**63."""
    total = int.from_bytes(old, "big", signed=True) + int.from_bytes(added, "big", signed=True)
    return (total & _INT64_MASK).to_bytes(8, "big")


_INT64_MASK = (1 << 64) - 1


def _read_tables(con: sqlite3.Connection, name: str | None = None) -> Iterator[_read.Table]:
    """The metadata of every table, or of table ``name`` only (none if it does not exist)."""
    where, args = ("WHERE t.name = ?", (name,)) if name is not None else ("", ())
    families: dict[int, dict[str, GcRule]] = {}
    aggregates: dict[int, set[str]] = {}
    tables: dict[int, str] = {}
    for table_id, table, family, rule in con.execute(
            "SELECT t.id, t.name, f.name, f.gc_rule FROM tsm_tables AS t"
            f" LEFT JOIN tsm_families AS f ON f.table_id = t.id {where}", args):
        tables[table_id] = table
        if family is None:
            continue
        data = json.loads(rule)
        families.setdefault(table_id, {})[family] = _rule_from_json(data)
        if data.get(_AGGREGATE) == "sum":
            aggregates.setdefault(table_id, set()).add(family)
    for table_id, table in tables.items():
        yield _read.Table(table_id, table, families.get(table_id, {}),
                          frozenset(aggregates.get(table_id, ())))


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
    """Turn `sqlite3.Error` into `BackendError`, keeping the cause."""
    try:
        yield
    except sqlite3.Error as exc:
        raise BackendError(f"{what} failed: {exc}") from exc


# -- Writes --------------------------------------------------------------------


def _compile_entry(meta: _read.Table, entry: RowMutation, steps: list[_Step]) -> None:
    """Append the SQL steps of one entry to ``steps``, which ends with a run.

    Raises:
        BackendError: the entry is invalid; ``steps`` is then left unchanged.
    """
    key = entry.key
    if not isinstance(key, bytes) or not key or len(key) > _MAX_ROW_KEY:
        raise BackendError(f"row key must be 1 to {_MAX_ROW_KEY} bytes, got {key!r:.80}")
    if not entry.mutations:
        raise BackendError(f"row {key!r:.80}: an entry needs at least one mutation")
    since = entry.unless_newer
    if since is not None:
        if not isinstance(since, int) or not 0 <= since < _read.NO_LIMIT or since % 1000:
            raise BackendError(f"row {key!r:.80}: unless_newer={since!r} is not a timestamp "
                               "of whole milliseconds")
        own: list[_Step] = [[]]
        _append_mutations(meta, key, entry.mutations, own)
        steps.extend((_Conditional(key, since, own), []))
        return
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
    meta: _read.Table, key: bytes, mutations: Sequence[object], steps: list[_Step]
) -> None:
    families, run = meta.families, steps[-1]
    assert isinstance(run, list)
    for mutation in mutations:
        if type(mutation) is SetCell or isinstance(mutation, SetCell):
            family, qualifier, ts, value = (
                mutation.family, mutation.qualifier, mutation.timestamp, mutation.value
            )
            if (
                family not in families or not isinstance(ts, int) or not 0 <= ts < _read.NO_LIMIT
                or ts % 1000
                or not isinstance(qualifier, bytes) or not isinstance(value, bytes)
            ):
                _reject(meta, key, mutation)
            if family not in meta.aggregates:
                run.append((key, family, qualifier, ts, value))
                continue
            # As the emulator does: an 8-byte value set into a sum family is added.
            if len(value) != 8:
                raise BackendError(
                    f"table {meta.name!r}, row {key!r:.80}: family {family!r} is an aggregate "
                    f"(int64 sum) family: its values are 8 bytes, got {len(value)}")
            steps.append((meta.add_sql, (key, family, qualifier, ts, value)))
            run = []
            steps.append(run)
        elif type(mutation) is AddToCell:
            steps.append(_add_step(meta, key, mutation))
            run = []
            steps.append(run)
        else:
            steps.append(_delete_step(meta, key, mutation))
            run = []
            steps.append(run)


def _reject(meta: _read.Table, key: bytes, mutation: object) -> None:
    family = getattr(mutation, "family", None)
    where = f"table {meta.name!r}, row {key!r:.80}"
    if family is not None and family not in meta.families:
        known = ", ".join(sorted(meta.families)) or "none"
        raise BackendError(f"{where}: no column family {family!r} (families: {known})")
    ts = getattr(mutation, "timestamp", 0)
    if not isinstance(ts, int) or not 0 <= ts < _read.NO_LIMIT or ts % 1000:
        raise BackendError(
            f"{where}: timestamp {ts!r} must be an int of microseconds in whole"
            " milliseconds (a multiple of 1000), from 0 to 2**63 - 1"
        )
    raise BackendError(f"{where}: invalid mutation {mutation!r:.200}")


def _add_step(meta: _read.Table, key: bytes, mutation: AddToCell) -> tuple[str, tuple[Any, ...]]:
    """The upsert of one `AddToCell`, refused as Bigtable refuses it."""
    family, qualifier, ts, value = mutation
    if (family not in meta.families or not isinstance(ts, int)
            or not 0 <= ts < _read.NO_LIMIT or ts % 1000 or not isinstance(qualifier, bytes)):
        _reject(meta, key, mutation)
    if family not in meta.aggregates:
        raise BackendError(
            f"table {meta.name!r}, row {key!r:.80}: AddToCell into family {family!r}, which is "
            "not an aggregate family (Bigtable: illegal attempt to use AddToCell on "
            "non-aggregate cell)")
    if type(value) is not int or not -(1 << 63) <= value < 1 << 63:
        raise BackendError(f"table {meta.name!r}, row {key!r:.80}: AddToCell adds an int64, "
                           f"got {value!r:.80}")
    return meta.add_sql, (key, family, qualifier, ts, value.to_bytes(8, "big", signed=True))


def _delete_step(meta: _read.Table, key: bytes, mutation: object) -> tuple[str, tuple[Any, ...]]:
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
        sql, params = sql + " AND ts >= ?", (*params, _read.clamp(mutation.timestamp_start))
    if mutation.timestamp_end is not None:
        sql, params = sql + " AND ts < ?", (*params, _read.clamp(mutation.timestamp_end))
    return sql, params


def _execute_steps(con: sqlite3.Connection, meta: _read.Table, steps: list[_Step]) -> None:
    """Run the steps in order, each run of inserts as one ``executemany``."""
    pending: list[_read.Raw] = []
    for step in steps:
        if isinstance(step, list):
            pending.extend(step)
            continue
        if pending:
            con.executemany(meta.insert_sql, pending)
            pending = []
        if isinstance(step, _Conditional):
            newer = con.execute(f"SELECT 1 FROM {meta.sql_name} WHERE row_key = ? AND ts >= ? "
                                "LIMIT 1", (step.key, step.since)).fetchone()
            if newer is None:
                _execute_steps(con, meta, step.steps)
            continue
        con.execute(*step)
    if pending:
        con.executemany(meta.insert_sql, pending)


def _collect_family(
    con: sqlite3.Connection, meta: _read.Table, family: str, rule: GcRule, now: int
) -> int:
    """Delete the cells of ``family`` that ``rule`` collects; return how many."""
    table = meta.sql_name
    if not gc.uses(rule, "max_versions"):
        cutoff = gc.age_cutoff(rule, now)
        if cutoff is None:
            return 0
        delete = f"DELETE FROM {table} WHERE +family = ? AND ts < ?"
        return con.execute(delete, (family, cutoff)).rowcount
    if not gc.uses(rule, "max_age"):  # versions only: SQLite counts the newer versions
        cap = gc.max_versions_of(rule)
        if cap is None:
            return 0
        newer = (f"SELECT {{}} FROM {table} AS newer WHERE newer.row_key = {table}.row_key"
                 f" AND newer.family = {table}.family AND newer.qualifier = {table}.qualifier"
                 f" AND newer.ts > {table}.ts")
        test = f"EXISTS ({newer.format(1)})" if cap == 1 else f"({newer.format('count(*)')}) >= ?"
        delete = f"DELETE FROM {table} WHERE +family = ? AND {test}"
        return con.execute(delete, (family,) if cap == 1 else (family, cap)).rowcount
    collected = gc.collects(rule, now)
    select = (f"SELECT row_key, qualifier, ts FROM {table} WHERE +family = ?"
              f" ORDER BY {_read.ORDER[0]}")
    doomed = [
        (key, family, qualifier, ts)
        for _, column in groupby(con.execute(select, (family,)), key=itemgetter(0, 1))
        for rank, (key, qualifier, ts) in enumerate(column)
        if collected(rank, ts)
    ]
    delete = f"DELETE FROM {table} WHERE row_key = ? AND family = ? AND qualifier = ? AND ts = ?"
    con.executemany(delete, doomed)
    return len(doomed)


