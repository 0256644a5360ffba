"""The backend protocol and the backend-neutral value objects it speaks.

Value objects here do no I/O. Backends convert them to their own wire format
(protobuf for Cloud Bigtable, SQL for the embedded store) at the edge.

Semantics follow Cloud Bigtable:

* Row keys are bytes, sorted by unsigned byte order.
* A cell is addressed by (row key, family, qualifier, timestamp). Timestamps
  are microseconds since the epoch, in whole milliseconds. Writing a cell at an
  existing address replaces its value.
* Within a row, cells come out ordered by family (name order), qualifier (byte
  order), then timestamp newest first.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from typing import Any, NamedTuple, Protocol, cast, overload, runtime_checkable

import attrs

__all__ = [
    "RowRange",
    "RowSet",
    "ReadFilter",
    "ValueCondition",
    "ReadRequest",
    "Cell",
    "Row",
    "CellBatch",
    "batch_reader",
    "batches_of",
    "own_batch_reader",
    "KeySample",
    "SetCell",
    "AddToCell",
    "DeleteCells",
    "DeclaredCells",
    "DeclaredColumns",
    "DeclaredRows",
    "DeleteFamily",
    "DeleteRow",
    "Mutation",
    "RowMutation",
    "MutationStatus",
    "MutationOutcome",
    "GcRule",
    "TableSpec",
    "Features",
    "Backend",
    "AsyncBackend",
    "Reachable",
    "ThreadBacked",
    "thread_backed",
]


@attrs.frozen
class RowRange:
    """Row keys ``start <= key < end``; ``None`` leaves a side unbounded."""

    start: bytes | None = None
    end: bytes | None = None

    @classmethod
    def prefix(cls, prefix: bytes) -> RowRange:
        """The range of every row key that starts with ``prefix``."""
        return cls(prefix or None, prefix_successor(prefix))

    def contains(self, key: bytes) -> bool:
        """Whether ``key`` lies in the range."""
        if self.start is not None and key < self.start:
            return False
        return self.end is None or key < self.end

    def is_empty(self) -> bool:
        """Whether no key can lie in the range."""
        return self.start is not None and self.end is not None and self.start >= self.end


def prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix``.

    Returns ``None`` when there is none (empty prefix or all ``0xff``).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


@attrs.frozen
class RowSet:
    """Rows to read: exact keys and ranges. Both empty means the whole table."""

    keys: tuple[bytes, ...] = ()
    ranges: tuple[RowRange, ...] = ()

    def is_whole_table(self) -> bool:
        return not self.keys and not self.ranges

    def contains(self, key: bytes) -> bool:
        if self.is_whole_table():
            return True
        return key in self.keys or any(r.contains(key) for r in self.ranges)


@attrs.frozen
class ValueCondition:
    """A row-level test: keep a row only when one of its cells in a column holds a
    value in one of ``ranges`` (compared as bytes, as Bigtable compares them).

    Attributes:
        family: the column family.
        qualifier: the column's qualifier; ``None``: any column of the family.
        ranges: ``(start, start_closed, end, end_closed)`` byte ranges; a
            ``None`` bound leaves that side open-ended. No range: no row passes.
        label: the condition in the query's words, for ``explain()``.
    """

    family: str
    qualifier: bytes | None
    ranges: tuple[tuple[bytes | None, bool, bytes | None, bool], ...]
    label: str = attrs.field(default="", eq=False)

    def matches(self, cells: Sequence[Cell]) -> bool:
        """Whether one of ``cells`` (a row's, filtered) passes."""
        for c in cells:
            if c.family != self.family or (self.qualifier is not None
                                           and c.qualifier != self.qualifier):
                continue
            v = c.value
            for start, start_closed, end, end_closed in self.ranges:
                if start is not None and not (start <= v if start_closed else start < v):
                    continue
                if end is not None and not (v <= end if end_closed else v < end):
                    continue
                return True
        return False


@attrs.frozen
class ReadFilter:
    """Server-side cell filters, applied in this order.

    Attributes:
        versions_kept: before every other filter, keep only the newest N
            versions of each column (``None``: all): the version limit of a
            GC rule, applied whether or not garbage collection ran yet.
        families: keep cells of these families only (``None``: all).
        columns: keep only these ``(family, qualifier)`` columns (``None``: all).
        qualifier_start: keep qualifiers ``>= qualifier_start`` (``None``: no bound).
        qualifier_end: keep qualifiers ``< qualifier_end`` (``None``: no bound).
        timestamp_start: keep cells with timestamp ``>=`` this, in microseconds.
        timestamp_end: keep cells with timestamp ``<`` this, in microseconds.
        timestamps: keep cells whose timestamp is one of these (microseconds,
            whole milliseconds as every cell's); ``None``: any. The embedded
            store tests them in SQL (keep it to a few thousand); the Bigtable
            backend sends a timestamp range per run of consecutive
            milliseconds, or, for many runs, their span, and keeps the given
            times of what comes back itself.
        cells_per_column: after the filters above, keep the newest N cells of
            each column (``None``: all versions).
        cells_per_row: after the filters above, keep the first N cells of each
            row, in the row's cell order (``None``: all).
        strip_values: return cells with empty values (keys and qualifiers only).
        row_key_regex: keep only rows whose whole key matches this RE2 regex
            (tsmodel writes a subset Python's ``re`` reads alike: literals, ``.``,
            ``[^...]``, ``{n}``, ``*``, ``^``, ``(?s)``).
        conditions: row-level tests on the cells the filters above leave
            (before ``cells_per_row`` and ``strip_values``): a row is returned
            only when every condition finds a cell; its cells are then those
            the other filters leave.

    A row none of whose cells pass is not returned at all.
    """

    families: tuple[str, ...] | None = None
    columns: tuple[tuple[str, bytes], ...] | None = None
    versions_kept: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1)),
        kw_only=True)
    qualifier_start: bytes | None = None
    qualifier_end: bytes | None = None
    timestamp_start: int | None = None
    timestamp_end: int | None = None
    cells_per_column: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    strip_values: bool = False
    cells_per_row: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1)),
        kw_only=True)
    conditions: tuple[ValueCondition, ...] = attrs.field(default=(), kw_only=True)
    row_key_regex: bytes | None = attrs.field(default=None, kw_only=True)
    timestamps: frozenset[int] | None = attrs.field(
        default=None, converter=attrs.converters.optional(frozenset), kw_only=True)


@attrs.frozen
class ReadRequest:
    """One read of one table.

    Attributes:
        table: table name.
        rows: which rows; an empty `RowSet` reads the whole table.
        filter: server-side cell filters.
        limit: at most this many rows (rows with at least one cell left
            after filtering); ``None`` or ``0`` for no limit.
        reverse: return rows in descending key order. Only allowed when the
            backend's ``features.reverse_scan`` is true.
    """

    table: str
    rows: RowSet = attrs.field(factory=RowSet)
    filter: ReadFilter = attrs.field(factory=ReadFilter)
    limit: int | None = None
    reverse: bool = False


class Cell(NamedTuple):
    """One timestamped cell version.

    A named tuple: reads build millions of them, and a tuple builds in about
    half the time of a frozen attrs instance. It is immutable and hashable
    and compares by value; ``cell._replace(value=b"")`` makes a changed copy.
    """

    family: str
    qualifier: bytes
    timestamp: int
    value: bytes


class Row(NamedTuple):
    """A row as read: its key and its cells (family, qualifier, newest first)."""

    key: bytes
    cells: tuple[Cell, ...]


class CellBatch:
    """Rows as read, in columns: what a columnar decoder takes without `Row` objects.

    Each list holds one entry per cell, in the order of the rows' cells
    (``families``, ``qualifiers``, ``timestamps``, ``values``); ``keys`` one
    per row, and ``ends`` where each row's cells end (row ``i``'s cells are
    ``ends[i - 1]:ends[i]``, from 0 for the first). A reader that merges
    cells into rows may fill a batch instead: `rows()` gives the same rows.
    Plain lists, no numpy: the core needs no extra.
    """

    __slots__ = ("keys", "ends", "families", "qualifiers", "timestamps", "values")

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.ends: list[int] = []
        self.families: list[str] = []
        self.qualifiers: list[bytes] = []
        self.timestamps: list[int] = []
        self.values: list[bytes] = []

    def __len__(self) -> int:
        """How many rows."""
        return len(self.keys)

    def rows(self) -> Iterator[Row]:
        """The batch's rows, in order."""
        f, q, t, v = self.families, self.qualifiers, self.timestamps, self.values
        start = 0
        for key, end in zip(self.keys, self.ends, strict=True):
            yield Row(key, tuple(map(Cell, f[start:end], q[start:end], t[start:end],
                                     v[start:end])))
            start = end

    def add_cells(self, key: bytes, cells: Sequence[Cell]) -> None:
        """Append the row of ``key`` and ``cells`` (the cells taken apart in one
        step, not one by one)."""
        self.keys.append(key)
        if cells:
            families, qualifiers, timestamps, values = zip(*cells, strict=True)
            self.families += families
            self.qualifiers += qualifiers
            self.timestamps += timestamps
            self.values += values
        self.ends.append(len(self.values))

    def extend(self, other: CellBatch) -> None:
        """Append the rows of ``other``."""
        at = len(self.values)
        self.keys += other.keys
        self.ends += [end + at for end in other.ends] if at else other.ends
        self.families += other.families
        self.qualifiers += other.qualifiers
        self.timestamps += other.timestamps
        self.values += other.values

    @classmethod
    def of(cls, rows: Iterable[Row]) -> CellBatch:
        """A batch of ``rows``."""
        batch = cls()
        for key, cells in rows:
            batch.add_cells(key, cells)
        return batch


def own_batch_reader(backend: Any) -> Callable[[ReadRequest], Iterator[CellBatch]] | None:
    """``backend``'s ``read_batches`` where its class declares one, at least as far down
    its classes as its ``read_rows`` (else ``None``). A wrapper that overrides
    ``read_rows`` alone (to count, log or break reads), or hands other
    attributes on to a backend it wraps (``__getattr__``), is read through its
    ``read_rows``, never around it by the wrapped backend's ``read_batches``."""
    cls: Any = type(backend)  # classes are hashable (typeshed's type[Any] is not, to mypy)
    if _declares_batches(cls):
        read: Callable[[ReadRequest], Iterator[CellBatch]] = backend.read_batches
        return read
    return None


@functools.lru_cache(maxsize=256)
def _declares_batches(cls: Any) -> bool:
    def where(name: str) -> int | None:
        return next((i for i, k in enumerate(cls.__mro__) if name in vars(k)), None)

    batches, rows = where("read_batches"), where("read_rows")
    return batches is not None and (rows is None or batches <= rows)


def batch_reader(backend: Any) -> Callable[[ReadRequest], Iterator[CellBatch]]:
    """``backend``'s own ``read_batches`` (`own_batch_reader()`), or its ``read_rows``
    put in batches (`batches_of()`)."""
    read = own_batch_reader(backend)
    if read is not None:
        return read
    read_rows: Callable[[ReadRequest], Iterable[Row]] = backend.read_rows

    def batches(request: ReadRequest) -> Iterator[CellBatch]:
        return batches_of(read_rows(request))

    return batches


def batches_of(rows: Iterable[Row], size: int = 256) -> Iterator[CellBatch]:
    """``rows`` in `CellBatch` es of ``size`` rows (the last may hold fewer): the
    batches of a reader that merges no chunks of its own."""
    batch = CellBatch()
    for key, cells in rows:
        batch.add_cells(key, cells)
        if len(batch.keys) >= size:
            yield batch
            batch = CellBatch()
    if batch.keys:
        yield batch


class KeySample(NamedTuple):
    """One sampled row key of a table (Cloud Bigtable's ``SampleRowKeys``).

    Sampled keys cut a table into runs of about equal size, for reads split
    among workers.

    Attributes:
        key: a row key; ``b""`` stands for the end of the table (the last
            sample, when present).
        offset: about how many bytes of the table sort before ``key``.
    """

    key: bytes
    offset: int


class SetCell(NamedTuple):
    """Write one cell. ``timestamp`` is microseconds, a whole number of ms.

    A named tuple, like `Cell`: a save builds one per value and keeps
    them until it returns, and tuples of plain values are objects the garbage
    collector stops walking (measured: 30% of encoding time with attrs objects).
    """

    family: str
    qualifier: bytes
    timestamp: int
    value: bytes


class AddToCell(NamedTuple):
    """Add ``value`` to one cell of an aggregate family (Bigtable's ``AddToCell``).

    The family must be an int64 sum family (`TableSpec.aggregates`): the cell
    at (family, qualifier, timestamp) then holds the sum of every value added
    to it, as 8 bytes big-endian two's complement, wrapping around at 2**63
    as the emulator does. Adding is not idempotent: a replayed mutation adds
    again. ``timestamp`` is microseconds, a whole number of ms.
    """

    family: str
    qualifier: bytes
    timestamp: int
    value: int


@attrs.frozen
class DeleteCells:
    """Delete the versions of one column with ``start <= timestamp < end``."""

    family: str
    qualifier: bytes
    timestamp_start: int | None = None
    timestamp_end: int | None = None


@attrs.frozen
class DeleteFamily:
    """Delete every cell of one family in the row."""

    family: str


@attrs.frozen
class DeleteRow:
    """Delete the whole row."""


Mutation = SetCell | AddToCell | DeleteCells | DeleteFamily | DeleteRow


class DeclaredCells:
    """The cells a table lays an event out in, as its declaration says: one
    `SetCell` per column of ``columns``, in that order, all at one timestamp.

    A table codec declares one where its layout writes exactly such cells for
    every event (`tsmodel.layouts.codec.TableCodec.declared_cells`): a row
    per event or a bucket of cell versions, every value required, no
    serialized blob, key column or version stamp. A backend may render, once
    per declaration, a writer of such cells in its own terms (the Bigtable
    backend: a ``MutateRows`` entry's wire bytes); ``renderings`` keeps them.

    Attributes:
        label: ``Model.table``, for the name of a rendering.
        columns: ``(family, qualifier)`` of each cell, in order.
        exact_times: the cells' timestamp is the event time in µs times 1000
            (current-value rows of ``unit="us"`` models), else the event time
            floored to the millisecond (`stamp()`).
        widths: per column, the length of every value of it where its codec
            has one (`tsmodel.encoding.codecs.fixed_width()`), else ``None``.
    """

    __slots__ = ("label", "columns", "exact_times", "widths", "renderings")

    def __init__(self, label: str, columns: tuple[tuple[str, bytes], ...],
                 exact_times: bool = False, widths: tuple[int | None, ...] | None = None
                 ) -> None:
        self.label = label
        self.columns = columns
        self.exact_times = exact_times
        self.widths = (None,) * len(columns) if widths is None else widths
        assert len(self.widths) == len(columns), (label, columns, widths)
        #: Renderings by the backend that made them (``"bigtable"``: its wire writer).
        self.renderings: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"DeclaredCells({self.label!r}, {self.columns!r})"

    def stamp(self, us: int) -> int:
        """The timestamp of an event's cells from its time in µs."""
        return us * 1000 if self.exact_times else us // 1000 * 1000

    def cells(self, us: int, values: Sequence[bytes]) -> tuple[SetCell, ...]:
        """The cells of an event at ``us`` with these values, in declared order."""
        ts = self.stamp(us)
        return tuple([SetCell(family, qualifier, ts, value)
                      for (family, qualifier), value in zip(self.columns, values, strict=True)])


class DeclaredColumns:
    """The rows of a `DeclaredRows` (of its main table) as columns: each row's key,
    event time in µs and encoded values, a column each, row ``i`` holding
    exactly what the checked tuple ``i`` holds. A frame's chunk checked
    column-wise comes with them (`tsmodel.io.frame_columns`: Arrow binary
    arrays, the times a numpy array); a backend may write the entries of a
    whole batch from them with a rendering of its own (the Bigtable backend:
    the ``MutateRows`` entries' wire bytes), or ignore them.

    Attributes:
        keys: the row keys.
        times: the event times in µs.
        values: per declared column, in order, its encoded values.
    """

    __slots__ = ("keys", "times", "values")

    def __init__(self, keys: Any, times: Any, values: Sequence[Any]) -> None:
        self.keys, self.times, self.values = keys, times, tuple(values)

    def __getitem__(self, rows: slice) -> DeclaredColumns:
        """The columns of the rows ``rows`` (a slice)."""
        return DeclaredColumns(self.keys[rows], self.times[rows],
                               [v[rows] for v in self.values])

    def __len__(self) -> int:
        return len(self.times)


class DeclaredRows(Sequence["RowMutation"]):
    """The rows of a batch of events laid out as one `DeclaredCells` declares,
    carried as the events' checked tuples: no object per row until one is asked for.

    Each tuple of ``checked`` is what the generated check of an event returned
    (`tsmodel.layouts.render_write.render_event_parts`): the main row key, the
    event time in µs, the encoded values of the declared cells in order, then
    the current-value row key if the model has one; the tuple's item
    ``key_at`` is the row key in this table (0: the main table). A plain tuple
    of bytes and ints, which the garbage collector does not track.

    As a sequence, item ``i`` is the `RowMutation` of row ``i`` (made when
    asked for), so that any backend writes it; a backend may write the whole
    batch from the tuples with its rendering of ``declared`` instead (the
    Bigtable backend: the ``MutateRows`` entries' wire bytes), from the
    tuples or from ``columns`` (`DeclaredColumns`) where they come with them.
    """

    __slots__ = ("declared", "checked", "key_at", "columns")

    def __init__(self, declared: DeclaredCells, checked: list[tuple[Any, ...]],
                 key_at: int = 0, columns: DeclaredColumns | None = None) -> None:
        self.declared = declared
        self.checked = checked
        self.key_at = key_at
        #: The same rows as columns (the main table's rows of a frame), or ``None``.
        self.columns = columns

    def __len__(self) -> int:
        return len(self.checked)

    @overload
    def __getitem__(self, index: int) -> RowMutation: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[RowMutation, ...]: ...

    def __getitem__(self, index: int | slice) -> RowMutation | tuple[RowMutation, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        return self.row(self.checked[index])

    def row(self, checked: tuple[Any, ...]) -> RowMutation:
        """The `RowMutation` of one checked tuple."""
        count = len(self.declared.columns)
        return RowMutation(checked[self.key_at],
                           self.declared.cells(checked[1], checked[2:2 + count]),
                           None, self.declared)

    def __iter__(self) -> Iterator[RowMutation]:
        return map(self.row, self.checked)

    def __repr__(self) -> str:
        return f"DeclaredRows({self.declared.label!r}, {len(self)} rows)"


@attrs.frozen
class RowMutation:
    """Mutations applied atomically to one row.

    Attributes:
        key: the row key.
        mutations: the mutations.
        unless_newer: apply the mutations only if the row holds no cell with
            a timestamp at or after this (µs, a whole number of ms), checked
            and applied atomically; a row holding one is left as it is (the
            entry is still ``APPLIED``: the row holds a newer event). Cloud
            Bigtable: a ``CheckAndMutateRow`` call of its own (a timestamp
            range predicate, the mutations when it matches nothing), not a
            ``MutateRows`` entry. ``None``: unconditional.
        declared: the declaration ``mutations`` were laid out by, where they
            are exactly its cells (`DeclaredCells`: the generated encoders set
            it), so that a backend may write them with its rendering of that
            declaration; ``None`` for any other mutations. Not compared.
    """

    key: bytes
    mutations: tuple[Mutation, ...]
    unless_newer: int | None = None
    declared: DeclaredCells | None = attrs.field(default=None, eq=False, repr=False)


class MutationStatus(enum.Enum):
    """What is known about one row mutation after a bulk write."""

    #: The mutation was applied.
    APPLIED = "applied"
    #: The mutation was certainly not applied (bad request, missing table...).
    FAILED = "failed"
    #: The outcome is unknown (timeout, lost connection). Retrying is safe
    #: because tsmodel writes explicit timestamps.
    UNKNOWN = "unknown"


@attrs.frozen
class MutationOutcome:
    """The outcome of one `RowMutation` in a bulk write."""

    status: MutationStatus
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.status is MutationStatus.APPLIED


@attrs.frozen
class GcRule:
    """A garbage-collection rule of a column family.

    Either a leaf (``max_versions`` and/or ``max_age``; when both are given
    they combine with ``mode``) or a combination of ``rules``.

    Attributes:
        max_versions: keep at most this many versions per column.
        max_age: delete cells whose *cell timestamp* is older than this.
        rules: nested rules combined with ``mode``.
        mode: ``"union"`` (delete when any rule says so) or
            ``"intersection"`` (delete when every rule says so).
    """

    max_versions: int | None = None
    max_age: timedelta | None = None
    rules: tuple[GcRule, ...] = ()
    mode: str = attrs.field(
        default="union", validator=attrs.validators.in_(("union", "intersection"))
    )

    def is_empty(self) -> bool:
        return self.max_versions is None and self.max_age is None and not self.rules


@attrs.frozen
class TableSpec:
    """A table and its column families with their GC rules.

    Attributes:
        name: the table.
        families: each family and its GC rule.
        aggregates: the families whose cells are int64 sums (aggregate
            column families: written with `AddToCell`, read as 8 bytes
            big-endian), sorted; the others hold plain values.
    """

    name: str
    families: tuple[tuple[str, GcRule], ...]
    aggregates: tuple[str, ...] = ()

    def family_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.families)


@attrs.frozen
class Features:
    """What a backend can do; code and tests read these flags."""

    #: Rows can be read in descending key order (``ReadRequest.reverse``).
    reverse_scan: bool = False
    #: Reads never return a cell a GC rule collects (garbage collection runs
    #: at once). No backend of tsmodel's does: like Cloud Bigtable before
    #: its GC runs, they return such cells until collection deletes them.
    immediate_gc: bool = False
    #: Data survives closing the connection.
    persistent: bool = False
    #: Calls made from several threads at once overlap (a network backend);
    #: when false (the embedded store serializes its calls), executors make
    #: them one after the other.
    concurrent_calls: bool = False


@runtime_checkable
class Backend(Protocol):
    """The primitives every storage backend provides.

    Everything else in tsmodel is built on these. A backend never raises a
    foreign exception: failures come out as `BackendError`
    (or a subclass) with the original exception as ``__cause__``.

    Both real backends are also `Reachable`: ``check_reachable(timeout)``
    tells at once whether the backend can serve requests. It is a protocol of
    its own so that wrappers and test doubles need not provide it.
    """

    features: Features

    def create_table(self, spec: TableSpec) -> None:
        """Create the table with its families, or add missing families to it.

        Idempotent: an existing table keeps its data; families that exist get
        the GC rule of ``spec``; families not in ``spec`` are left alone.
        """
        ...

    def delete_table(self, name: str) -> None:
        """Delete a table and its data. A missing table is not an error."""
        ...

    def delete_family(self, table: str, family: str) -> None:
        """Delete one column family of a table, with all its cells.

        A missing family is not an error.

        Raises:
            TableNotFoundError: the table does not exist.
        """
        ...

    def list_tables(self) -> list[str]:
        """The names of all tables, sorted."""
        ...

    def describe_table(self, name: str) -> TableSpec:
        """The table's families and GC rules.

        Raises:
            TableNotFoundError: the table does not exist.
        """
        ...

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        """Apply each entry atomically to its row; entries are independent.

        Returns one outcome per entry, in order. An entry with no mutation is
        ``FAILED`` (Cloud Bigtable refuses it). An entry with ``unless_newer``
        is checked and applied atomically (`RowMutation`). Never raises for the failure
        of single entries; raises `BackendError` only when the call
        could not be attempted at all (then nothing was applied), e.g. with
        `TableNotFoundError` for a missing table.
        """
        ...

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        """Stream the rows of ``request`` in key order (descending if reversed).

        Rows with no cell left after filtering are skipped. The iterator reads
        lazily: rows are not all held in memory. A backend that waits on the
        network should send the request before returning: a query starts
        every read it merges, then takes their rows in turn, so that reads
        started together stream side by side (Cloud Bigtable's do).

        Raises:
            TableNotFoundError: the table does not exist.
        """
        ...

    def sample_row_keys(self, table: str) -> list[KeySample]:
        """Row keys that cut the table into runs of about equal size, in key order.

        Each sample's ``offset`` is about the bytes of the table before its
        key; ``b""`` (last, when present) stands for the end of the table.
        The samples are a hint for splitting a scan among workers: they may
        change from call to call, and a table may hold rows before the first
        key. An empty table may give no sample.

        Raises:
            TableNotFoundError: the table does not exist.
        """
        ...

    def close(self) -> None:
        """Release connections and files. Idempotent."""
        ...


@runtime_checkable
class AsyncBackend(Protocol):
    """The `Backend` primitives for asyncio: the same contracts, awaited.

    Each coroutine has the contract of the `Backend` method of the
    same name; ``read_rows`` returns an asynchronous iterator that reads
    lazily. No call blocks the event loop: a backend whose work is
    blocking (the embedded store) runs it in a worker thread.
    """

    features: Features

    async def create_table(self, spec: TableSpec) -> None:
        """See `Backend.create_table()`."""
        ...

    async def delete_table(self, name: str) -> None:
        """See `Backend.delete_table()`."""
        ...

    async def delete_family(self, table: str, family: str) -> None:
        """See `Backend.delete_family()`."""
        ...

    async def list_tables(self) -> list[str]:
        """See `Backend.list_tables()`."""
        ...

    async def describe_table(self, name: str) -> TableSpec:
        """See `Backend.describe_table()`."""
        ...

    async def mutate_rows(self, table: str,
                          entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        """See `Backend.mutate_rows()`."""
        ...

    def read_rows(self, request: ReadRequest) -> AsyncIterator[Row]:
        """See `Backend.read_rows()`: rows come with ``async for``.

        Raises:
            TableNotFoundError: the table does not exist (when iterated).
        """
        ...

    async def close(self) -> None:
        """See `Backend.close()`."""
        ...


@runtime_checkable
class ThreadBacked(Protocol):
    """An `AsyncBackend` whose reads are a blocking `Backend`'s, run in worker threads.

    ``isinstance(backend, ThreadBacked)`` says whether a backend has one. The
    asyncio query runner then carries out each step of a read (the rows a
    merge asks for, and their decoding) in a worker thread on that backend's
    ``read_rows``, a hop per batch of instances, rather than awaiting the rows
    one by one (see `tsmodel.run.fanout`).
    """

    async def blocking(self) -> Backend:
        """The blocking backend whose ``read_rows`` this backend's reads run
        (opened on the first call); safe to call from worker threads."""
        ...


def thread_backed(backend: object) -> ThreadBacked | None:
    """``backend`` if its class is `ThreadBacked`, else ``None``.

    The class must define ``blocking``: a wrapper that forwards unknown
    attributes to a threaded backend (``__getattr__``) is not one, since its
    own ``read_rows`` may do more than the blocking backend's.
    """
    if not callable(getattr(type(backend), "blocking", None)):
        return None
    return cast(ThreadBacked, backend)


@runtime_checkable
class Reachable(Protocol):
    """A backend that can tell, before the first request, whether it answers.

    ``isinstance(backend, Reachable)`` says whether a backend has the check.
    """

    def check_reachable(self, timeout: float) -> None:
        """Return when the backend can serve requests; raise at once when it cannot.

        Call it before the first request when a failure should come quickly:
        a client that retries would report an unreachable server only after
        its deadline. Any answer of the server counts, an error included (the
        requests that follow report it). Backends with nothing to check (a
        local store) return at once.

        Args:
            timeout: seconds to wait for a connection and an answer.

        Raises:
            BackendUnreachableError: nothing listens at the backend's address
                (``listening`` is false), or it did not answer within
                ``timeout`` (``listening`` is true).
            BackendError: the backend is closed.
        """
        ...
