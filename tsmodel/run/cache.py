"""A read cache for latest-value lookups, invalidated by the connection's own writes.

`CachingBackend` wraps any `Backend`.
It keeps, in a `cachetools.TTLCache` (bounded size, bounded age), the
results of exact single-row reads (a row set naming one row key, as
``Model.latest()`` reads the current-value table), and any value derived from
one row that the caller registers with `CachingBackend.remember()` (such
as the model instance decoded from it). Every ``mutate_rows`` through the
wrapper drops the entries of the rows it wrote, once the write has returned;
``delete_table`` and ``create_table`` drop the table's entries.

What the cache cannot see, writes by other processes or other connections,
shows after at most ``ttl`` seconds. A read that was in flight while its row
was written is not cached, so a stale value is never stored after an
invalidation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

import attrs
from cachetools import TTLCache

from tsmodel import errors
from tsmodel.ground.base import (
    Backend,
    CellBatch,
    KeySample,
    MutationOutcome,
    Reachable,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    RowSet,
    TableSpec,
    batches_of,
    own_batch_reader,
)

__all__ = ["CachingBackend", "CacheStats", "MISSING", "single_row_key"]

#: What `CachingBackend.recall()` returns for a token it does not hold.
MISSING: Any = object()

_Slot = tuple[str, bytes]  # (table, row key)


@attrs.define
class CacheStats:
    """Counters of a `CachingBackend` (reads and recalls)."""

    hits: int = 0
    misses: int = 0
    invalidations: int = 0


class CachingBackend:
    """A backend that caches exact single-row reads of some tables.

    Args:
        backend: the backend to wrap; it is closed with the wrapper.
        maxsize: the most cached entries (reads and remembered values).
        ttl: seconds an entry lives; bounds how stale a row written by
            someone else can be.
        tables: the tables whose single-row reads are cached; ``None`` for
            every table. More can be added with `cache_tables()`.
        timer: the clock of the TTL (seconds), for tests.

    Thread-safe: one lock guards the cache; reads of the wrapped backend run
    outside it.
    """

    def __init__(self, backend: Backend, *, maxsize: int = 10_000, ttl: float = 30.0,
                 tables: Iterable[str] | None = None,
                 timer: Callable[[], float] = time.monotonic) -> None:
        if maxsize < 1:
            raise errors.ConfigurationError(f"cache maxsize must be at least 1, got {maxsize}")
        if ttl <= 0:
            raise errors.ConfigurationError(f"cache ttl must be positive, got {ttl}")
        self.backend = backend
        self.features = backend.features
        self.maxsize, self.ttl = maxsize, ttl
        self.stats = CacheStats()
        self._tables: set[str] | None = None if tables is None else set(tables)
        self._entries: TTLCache[Hashable, tuple[_Slot, Any]] = TTLCache(maxsize, ttl, timer)
        #: Which entries hang on each row; pruned when it outgrows the cache.
        self._by_slot: dict[_Slot, set[Hashable]] = {}
        #: Invalidation counter, and the count at each row's last invalidation.
        self._epoch = 0
        self._marks: dict[_Slot, int] = {}
        #: Reads that began before this count are not stored (marks were dropped).
        self._floor = 0
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"<CachingBackend {self.backend!r} maxsize={self.maxsize} ttl={self.ttl}>"

    # -- what is cached -------------------------------------------------------------

    def cache_tables(self, names: Iterable[str]) -> None:
        """Cache the single-row reads of these tables too."""
        with self._lock:
            if self._tables is not None:
                self._tables.update(names)

    def caches(self, table: str) -> bool:
        """Whether single-row reads of ``table`` are cached."""
        return self._tables is None or table in self._tables

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    # -- remembered values ------------------------------------------------------------

    def ticket(self) -> int:
        """Take before reading a row whose derived value will be `remember()`-ed."""
        with self._lock:
            return self._epoch

    def recall(self, token: Hashable) -> Any:
        """The value remembered under ``token``, or `MISSING`."""
        with self._lock:
            try:
                found = self._entries[token]  # cheaper than TTLCache.get
            except KeyError:
                self.stats.misses += 1
                return MISSING
            self.stats.hits += 1
            return found[1]

    def remember(self, token: Hashable, table: str, key: bytes, value: Any,
                 ticket: int) -> None:
        """Keep ``value``, derived from row ``key`` of ``table``, under ``token``.

        It is dropped with the row's other entries when the row is written.
        Nothing is kept when ``table`` is not cached or the row was written
        since ``ticket`` was taken (the value may be older than the write).
        """
        with self._lock:
            self._store(token, (table, key), value, ticket)

    # -- invalidation -------------------------------------------------------------------

    def memoize(self, token: Hashable,
                compute: Callable[[], tuple[ReadRequest, Any]]) -> Any:
        """The value under ``token``; else ``compute()``'s, kept when its request reads one row.

        ``compute`` returns the read request it ran and the value derived from
        it; it runs only on a miss, so a hit costs one lookup. The value is
        tied to the request's row: a write of it through this backend drops it.
        An unhashable token is not cached.
        """
        try:
            found = self.recall(token)
        except TypeError:
            return compute()[1]
        if found is MISSING:
            ticket = self.ticket()
            request, found = compute()
            key = single_row_key(request.rows)
            if key is not None:
                self.remember(token, request.table, key, found, ticket)
        return found

    def invalidate(self, table: str, keys: Iterable[bytes] | None = None) -> None:
        """Drop the entries of rows ``keys`` of ``table`` (``None``: the whole table)."""
        with self._lock:
            self._epoch += 1
            self.stats.invalidations += 1
            if keys is None:
                self._floor = self._epoch  # in-flight reads of any row may be stale
                self._marks.clear()
                slots = [slot for slot in self._by_slot if slot[0] == table]
            else:
                slots = [(table, key) for key in keys]
                for slot in slots:
                    self._marks[slot] = self._epoch
                if len(self._marks) > self.maxsize:
                    self._floor, self._marks = self._epoch, {}
            for slot in slots:
                for entry in self._by_slot.pop(slot, ()):
                    self._entries.pop(entry, None)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._epoch += 1
            self._floor = self._epoch
            self._marks.clear()
            self._entries.clear()
            self._by_slot.clear()

    def _store(self, entry: Hashable, slot: _Slot, value: Any, ticket: int) -> None:
        """Store unless the row was written since ``ticket``; call with the lock held."""
        if not self.caches(slot[0]) or ticket < self._floor \
                or self._marks.get(slot, -1) > ticket:
            return
        self._entries[entry] = (slot, value)
        self._by_slot.setdefault(slot, set()).add(entry)
        if len(self._by_slot) > 2 * self.maxsize:  # drop what eviction left behind
            live: dict[_Slot, set[Hashable]] = {}
            for cached, (cached_slot, _) in self._entries.items():
                live.setdefault(cached_slot, set()).add(cached)
            self._by_slot = live

    # -- the Backend protocol -------------------------------------------------------------

    def create_table(self, spec: TableSpec) -> None:
        """Create or update the table (see the wrapped backend); drops its entries."""
        try:
            self.backend.create_table(spec)
        finally:
            self.invalidate(spec.name)

    def delete_table(self, name: str) -> None:
        """Delete the table (see the wrapped backend); drops its entries."""
        try:
            self.backend.delete_table(name)
        finally:
            self.invalidate(name)

    def delete_family(self, table: str, family: str) -> None:
        """Delete one family (see the wrapped backend); drops the table's entries."""
        try:
            self.backend.delete_family(table, family)
        finally:
            self.invalidate(table)

    def list_tables(self) -> list[str]:
        return self.backend.list_tables()

    def describe_table(self, name: str) -> TableSpec:
        return self.backend.describe_table(name)

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        """Write through the wrapped backend, then drop the entries of every row written.

        The rows are dropped whatever the outcome (failed and unknown writes
        included), after the write returns: a read that overlapped it is not
        cached.
        """
        try:
            return self.backend.mutate_rows(table, entries)
        finally:
            if self.caches(table):
                self.invalidate(table, [entry.key for entry in entries])

    def sample_row_keys(self, table: str) -> list[KeySample]:
        """The wrapped backend's samples (never cached)."""
        return self.backend.sample_row_keys(table)

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        """Read through the cache when ``request`` names exactly one row of a cached table."""
        key = single_row_key(request.rows)
        if key is None or not self.caches(request.table):
            return self.backend.read_rows(request)
        return self._cached_read(request.table, key, request.filter, request)

    def read_batches(self, request: ReadRequest) -> Iterator[CellBatch]:
        """`read_rows()` in `CellBatch` es: the wrapped backend's own batches for a
        read the cache does not serve, else the rows put in batches."""
        read = own_batch_reader(self.backend)
        if read is None or (single_row_key(request.rows) is not None
                            and self.caches(request.table)):
            return batches_of(self.read_rows(request))
        return read(request)

    def _cached_read(self, table: str, key: bytes, row_filter: ReadFilter,
                     request: ReadRequest) -> Iterator[Row]:
        entry = ("read", table, key, row_filter)
        with self._lock:
            try:
                found = self._entries[entry]
            except KeyError:
                found = None
                self.stats.misses += 1
                ticket = self._epoch
            else:
                self.stats.hits += 1
        if found is not None:
            row: Row | None = found[1]
        else:
            row = next(iter(self.backend.read_rows(request)), None)
            with self._lock:
                self._store(entry, (table, key), row, ticket)
        if row is not None:
            yield row

    def check_reachable(self, timeout: float) -> None:
        """The wrapped backend's readiness check (`Reachable`),
        or nothing when it has none."""
        if isinstance(self.backend, Reachable):
            self.backend.check_reachable(timeout)

    def close(self) -> None:
        """Close the wrapped backend and drop every entry. Idempotent."""
        self.clear()
        self.backend.close()

    def __enter__(self) -> CachingBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def single_row_key(rows: RowSet) -> bytes | None:
    """The one row key ``rows`` can select, or ``None`` when it may select another.

    An exact key, or a range ``[key, key + b"\\0")``, which holds that key only.
    """
    if len(rows.keys) + len(rows.ranges) != 1:
        return None
    if rows.keys:
        return rows.keys[0] or None
    only = rows.ranges[0]
    start = only.start
    if start and only.end == start + b"\x00":
        return start
    return None
