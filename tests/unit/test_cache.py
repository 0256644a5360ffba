"""The read cache: what it keeps, when it lets go, and that it never serves a stale write.

The wrapped backend is the embedded store in memory, behind a spy that counts
the reads reaching it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tsmodel.backends.base import (
    Backend,
    Cell,
    GcRule,
    MutationOutcome,
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
from tsmodel.errors import TableNotFoundError
from tsmodel.run.cache import MISSING, CachingBackend, single_row_key

MS = 1_000


class Spy:
    """A backend that counts the reads reaching the embedded store, and can act mid-read."""

    def __init__(self) -> None:
        self.inner = EmbeddedBackend()
        self.features = self.inner.features
        self.reads: list[ReadRequest] = []
        self.during_read: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        return self.inner.mutate_rows(table, entries)

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        self.reads.append(request)
        rows = list(self.inner.read_rows(request))
        if self.during_read is not None:
            hook, self.during_read = self.during_read, None
            hook()
        return iter(rows)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def spy() -> Spy:
    return Spy()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(spy: Spy, clock: Clock) -> Iterator[CachingBackend]:
    backend = CachingBackend(spy, maxsize=100, ttl=10.0, timer=clock)  # type: ignore[arg-type]
    for name in ("t", "u"):
        backend.create_table(TableSpec(name, (("cf", GcRule()),)))
    yield backend
    backend.close()


def put(backend: Backend, key: bytes, value: bytes, table: str = "t") -> None:
    [outcome] = backend.mutate_rows(table, [RowMutation(key, (SetCell("cf", b"q", MS, value),))])
    assert outcome.ok


def get(backend: Backend, key: bytes, table: str = "t", **filter_fields: Any) -> bytes | None:
    request = ReadRequest(table, RowSet(keys=(key,)), ReadFilter(**filter_fields))
    rows = list(backend.read_rows(request))
    return rows[0].cells[0].value if rows else None


def test_is_a_backend(cache: CachingBackend, spy: Spy) -> None:
    assert isinstance(cache, Backend)
    assert cache.features is spy.features
    assert cache.list_tables() == ["t", "u"]
    assert cache.describe_table("t").family_names() == ("cf",)


def test_single_row_reads_are_served_from_the_cache(cache: CachingBackend, spy: Spy) -> None:
    put(cache, b"a", b"1")
    assert [get(cache, b"a") for _ in range(5)] == [b"1"] * 5
    assert len(spy.reads) == 1
    assert (cache.stats.hits, cache.stats.misses) == (4, 1)


def test_missing_rows_are_cached_too(cache: CachingBackend, spy: Spy) -> None:
    assert get(cache, b"nope") is None and get(cache, b"nope") is None
    assert len(spy.reads) == 1
    put(cache, b"nope", b"now")
    assert get(cache, b"nope") == b"now"


def test_what_counts_as_one_row() -> None:
    assert single_row_key(RowSet(keys=(b"k",))) == b"k"
    assert single_row_key(RowSet(ranges=(RowRange(b"k", b"k\x00"),))) == b"k"
    assert single_row_key(RowSet(ranges=(RowRange(b"k", b"l"),))) is None
    assert single_row_key(RowSet(ranges=(RowRange.prefix(b"k"),))) is None
    assert single_row_key(RowSet(keys=(b"a", b"b"))) is None
    assert single_row_key(RowSet(keys=(b"a",), ranges=(RowRange(b"a", b"a\x00"),))) is None
    assert single_row_key(RowSet()) is None
    assert single_row_key(RowSet(keys=(b"",))) is None


def test_other_reads_pass_through(cache: CachingBackend, spy: Spy) -> None:
    put(cache, b"a", b"1")
    put(cache, b"b", b"2")
    for _ in range(2):
        assert len(list(cache.read_rows(ReadRequest("t")))) == 2
        assert len(list(cache.read_rows(ReadRequest("t", RowSet(keys=(b"a", b"b")))))) == 2
        assert len(list(cache.read_rows(ReadRequest(
            "t", RowSet(ranges=(RowRange(b"a", b"a\x00"),)))))) == 1  # cached after the first
    assert len(spy.reads) == 5
    assert len(cache) == 1


def test_each_filter_is_its_own_entry(cache: CachingBackend, spy: Spy) -> None:
    put(cache, b"a", b"1")
    assert get(cache, b"a") == b"1"
    assert get(cache, b"a", strip_values=True) == b""
    assert get(cache, b"a", strip_values=True) == b""
    assert len(spy.reads) == 2


def test_own_writes_drop_the_rows_they_write(cache: CachingBackend, spy: Spy) -> None:
    put(cache, b"a", b"1")
    put(cache, b"b", b"1")
    assert get(cache, b"a") == get(cache, b"b") == b"1"
    put(cache, b"a", b"2")
    assert get(cache, b"a") == b"2"  # read again
    assert get(cache, b"b") == b"1"  # still cached
    assert len(spy.reads) == 3
    put(cache, b"a", b"2", table="u")  # another table: row "a" of "t" stays
    assert get(cache, b"a") == b"2"
    assert len(spy.reads) == 3


def test_failed_writes_drop_their_rows_too(cache: CachingBackend, spy: Spy) -> None:
    put(cache, b"a", b"1")
    assert get(cache, b"a") == b"1"
    bad = RowMutation(b"a", (SetCell("nope", b"q", MS, b"x"),))
    assert not cache.mutate_rows("t", [bad])[0].ok
    assert get(cache, b"a") == b"1"
    assert len(spy.reads) == 2


def test_entries_expire_after_the_ttl(cache: CachingBackend, spy: Spy, clock: Clock) -> None:
    put(cache, b"a", b"1")
    assert get(cache, b"a") == b"1"
    spy.inner.mutate_rows("t", [RowMutation(b"a", (SetCell("cf", b"q", MS, b"2"),))])  # elsewhere
    clock.now = 9.9
    assert get(cache, b"a") == b"1"
    clock.now = 10.1
    assert get(cache, b"a") == b"2"
    assert len(spy.reads) == 2


def test_size_is_bounded(spy: Spy) -> None:
    cache = CachingBackend(spy, maxsize=10, ttl=60.0)  # type: ignore[arg-type]
    cache.create_table(TableSpec("t", (("cf", GcRule()),)))
    for i in range(50):
        get(cache, b"k%d" % i)
        assert len(cache) <= 10
    assert len(cache._by_slot) <= 2 * 10 + 1


def test_only_the_tables_asked_for(spy: Spy) -> None:
    cache = CachingBackend(spy, tables=["t"])  # type: ignore[arg-type]
    for name in ("t", "u"):
        cache.create_table(TableSpec(name, (("cf", GcRule()),)))
    assert cache.caches("t") and not cache.caches("u")
    get(cache, b"a", table="u")
    get(cache, b"a", table="u")
    assert len(spy.reads) == 2
    cache.cache_tables(["u"])
    get(cache, b"a", table="u")
    get(cache, b"a", table="u")
    assert len(spy.reads) == 3


def test_table_changes_drop_the_table(cache: CachingBackend, spy: Spy) -> None:
    put(cache, b"a", b"1")
    assert get(cache, b"a") == b"1"
    cache.delete_table("t")
    with pytest.raises(TableNotFoundError):
        get(cache, b"a")
    cache.create_table(TableSpec("t", (("cf", GcRule()),)))
    assert get(cache, b"a") is None


def test_errors_surface_when_iterated(cache: CachingBackend) -> None:
    rows = cache.read_rows(ReadRequest("missing", RowSet(keys=(b"a",))))
    with pytest.raises(TableNotFoundError):
        list(rows)


def test_a_read_overlapping_a_write_is_not_kept(cache: CachingBackend, spy: Spy) -> None:
    put(cache, b"a", b"old")
    spy.during_read = lambda: put(cache, b"a", b"new")  # lands after the read, before it returns
    assert get(cache, b"a") == b"old"  # what the read saw
    assert get(cache, b"a") == b"new"  # not served from the cache
    assert len(spy.reads) == 2


def test_many_invalidations_during_a_read(spy: Spy) -> None:
    cache = CachingBackend(spy, maxsize=5, ttl=60.0)  # type: ignore[arg-type]
    cache.create_table(TableSpec("t", (("cf", GcRule()),)))
    put(cache, b"a", b"old")

    def storm() -> None:  # more rows written than marks kept: the floor rises
        for i in range(20):
            put(cache, b"x%d" % i, b"x")
        put(cache, b"a", b"new")

    spy.during_read = storm
    assert get(cache, b"a") == b"old"
    assert get(cache, b"a") == b"new"


def test_remembered_values_hang_on_their_row(cache: CachingBackend) -> None:
    ticket = cache.ticket()
    cache.remember(("latest", "a"), "t", b"a", "instance A", ticket)
    cache.remember(("latest", "b"), "t", b"b", "instance B", ticket)
    assert cache.recall(("latest", "a")) == "instance A"
    put(cache, b"a", b"1")
    assert cache.recall(("latest", "a")) is MISSING
    assert cache.recall(("latest", "b")) == "instance B"
    assert cache.recall(("never", "stored")) is MISSING


def test_remember_after_a_write_since_the_ticket_keeps_nothing(cache: CachingBackend) -> None:
    ticket = cache.ticket()
    put(cache, b"a", b"1")  # the value about to be remembered may predate this
    cache.remember(("latest", "a"), "t", b"a", "stale", ticket)
    assert cache.recall(("latest", "a")) is MISSING
    cache.remember(("latest", "a"), "t", b"a", "fresh", cache.ticket())
    assert cache.recall(("latest", "a")) == "fresh"


def test_clear_and_close(cache: CachingBackend, spy: Spy) -> None:
    put(cache, b"a", b"1")
    get(cache, b"a")
    cache.clear()
    assert len(cache) == 0
    get(cache, b"a")
    assert len(spy.reads) == 2
    cache.close()
    cache.close()


def test_invalid_settings() -> None:
    with pytest.raises(ValueError, match="maxsize"):
        CachingBackend(EmbeddedBackend(), maxsize=0)
    with pytest.raises(ValueError, match="ttl"):
        CachingBackend(EmbeddedBackend(), ttl=0)


def test_threads_never_read_a_value_older_than_their_own_write(spy: Spy) -> None:
    cache = CachingBackend(spy, maxsize=1_000, ttl=60.0)  # type: ignore[arg-type]
    cache.create_table(TableSpec("t", (("cf", GcRule()),)))
    errors: list[str] = []

    def work(n: int) -> None:
        key = b"k%d" % (n % 4)  # threads share rows
        for i in range(200):
            value = b"%d-%d" % (n, i)
            cache.mutate_rows("t", [RowMutation(key, (
                SetCell("cf", b"q%d" % n, MS, value),))])
            rows = list(cache.read_rows(ReadRequest("t", RowSet(keys=(key,)))))
            mine = [c.value for c in rows[0].cells if c.qualifier == b"q%d" % n]
            if mine != [value]:
                errors.append(f"thread {n} wrote {value!r}, read {mine!r}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_cached_rows_are_the_rows_read(cache: CachingBackend) -> None:
    put(cache, b"a", b"1")
    request = ReadRequest("t", RowSet(keys=(b"a",)))
    first, second = list(cache.read_rows(request)), list(cache.read_rows(request))
    assert first == second == [Row(b"a", (Cell("cf", b"q", MS, b"1"),))]


def test_a_caching_backend_passes_the_readiness_check_on() -> None:
    from tsmodel.backends.base import Reachable
    from tsmodel.errors import BackendError

    inner = EmbeddedBackend()
    cached = CachingBackend(inner)
    assert isinstance(cached, Reachable)
    cached.check_reachable(0.1)  # the embedded store answers at once
    cached.close()
    with pytest.raises(BackendError):
        cached.check_reachable(0.1)
