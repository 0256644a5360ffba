"""Behaviour of the Cloud Bigtable backend that the conformance suite does not pin.

Everything runs against the real emulator started by the ``emulator`` fixture;
nothing in ``google.cloud`` is patched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from google.api_core import exceptions as core_exceptions
from google.cloud.bigtable.data.exceptions import RetryExceptionGroup

from tsmodel.backends import bigtable as bigtable_module
from tsmodel.backends import open_backend
from tsmodel.backends.base import (
    Cell,
    DeleteCells,
    GcRule,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    RowMutation,
    RowSet,
    SetCell,
    TableSpec,
)
from tsmodel.backends.bigtable import BigtableBackend, gc_rule_from_proto, gc_rule_to_proto
from tsmodel.errors import BackendError, QueryError, TableNotFoundError

pytestmark = pytest.mark.emulator

T0 = 1_426_535_612_045_000
MS = 1_000
APPLIED, FAILED, UNKNOWN = MutationStatus.APPLIED, MutationStatus.FAILED, MutationStatus.UNKNOWN


@pytest.fixture(scope="module")
def bt(emulator: Any) -> Iterator[BigtableBackend]:
    backend = BigtableBackend("tsmodel-specific", "inst", emulator_host=emulator.host_port)
    yield backend
    backend.close()


@pytest.fixture
def table(bt: BigtableBackend, table_name: str) -> Iterator[str]:
    bt.create_table(TableSpec(table_name, (("cf", GcRule()), ("cf2", GcRule()))))
    yield table_name
    bt.delete_table(table_name)


def put(family: str, qualifier: bytes, n: int, value: bytes) -> SetCell:
    return SetCell(family, qualifier, T0 + n * MS, value)


def rows(bt: BigtableBackend, table: str, **filter_fields: Any) -> list[tuple[bytes, list[Cell]]]:
    request = ReadRequest(table, RowSet(), ReadFilter(**filter_fields))
    return [(row.key, list(row.cells)) for row in bt.read_rows(request)]


# -- opening -----------------------------------------------------------------


def test_open_emulator_url(emulator: Any, table_name: str) -> None:
    backend = open_backend(f"bigtable-emulator://{emulator.host_port}/url-project/url-instance")
    try:
        assert isinstance(backend, BigtableBackend)
        assert (backend.project, backend.instance) == ("url-project", "url-instance")
        assert backend.emulator_host == emulator.host_port
        assert not backend.features.reverse_scan and not backend.features.immediate_gc
        backend.create_table(TableSpec(table_name, (("cf", GcRule()),)))
        assert table_name in backend.list_tables()
        outcomes = backend.mutate_rows(table_name, [RowMutation(b"r", (put("cf", b"q", 1, b"v"),))])
        assert [o.status for o in outcomes] == [APPLIED]
        assert [r.key for r in backend.read_rows(ReadRequest(table_name))] == [b"r"]
    finally:
        backend.close()
        backend.close()  # idempotent


def test_open_bigtable_url_uses_emulator_env(
    emulator: Any, monkeypatch: pytest.MonkeyPatch, bt: BigtableBackend, table: str
) -> None:
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", emulator.host_port)
    backend = open_backend(f"bigtable://{bt.project}/{bt.instance}")
    try:
        assert isinstance(backend, BigtableBackend)
        assert backend.emulator_host == emulator.host_port
        assert table in backend.list_tables()  # the same emulator instance as ``bt``
    finally:
        backend.close()


def test_instances_are_separate(emulator: Any, bt: BigtableBackend, table: str) -> None:
    other = BigtableBackend("tsmodel-specific", "other-inst", emulator_host=emulator.host_port)
    try:
        assert table not in other.list_tables()
    finally:
        other.close()


def test_client_does_not_leak_emulator_env(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    backend = BigtableBackend("p", "i", emulator_host=emulator.host_port)
    backend.close()
    assert "BIGTABLE_EMULATOR_HOST" not in os.environ


def test_closed_backend_raises(emulator: Any) -> None:
    backend = BigtableBackend("p", "i", emulator_host=emulator.host_port)
    backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.list_tables()
    with pytest.raises(BackendError, match="closed"):
        backend.mutate_rows("t", [])


# -- tables and GC rules --------------------------------------------------------

EXACT_GC_RULES = [
    GcRule(),
    GcRule(max_versions=1),
    GcRule(max_age=timedelta(days=7, seconds=1, microseconds=500_000)),
    GcRule(max_versions=2, max_age=timedelta(days=1)),
    GcRule(max_versions=2, max_age=timedelta(days=1), mode="intersection"),
    GcRule(rules=(
        GcRule(max_versions=10),
        GcRule(max_versions=2, max_age=timedelta(days=30), mode="intersection"),
    )),
    GcRule(rules=(GcRule(max_age=timedelta(hours=6)), GcRule(max_versions=1)),
           mode="intersection"),
]


@pytest.mark.parametrize("rule", EXACT_GC_RULES, ids=repr)
def test_gc_rule_round_trips_exactly_through_describe(
    bt: BigtableBackend, table_name: str, rule: GcRule
) -> None:
    bt.create_table(TableSpec(table_name, (("data", rule),)))
    try:
        assert bt.describe_table(table_name) == TableSpec(table_name, (("data", rule),))
    finally:
        bt.delete_table(table_name)


def test_gc_rule_protos() -> None:
    assert gc_rule_to_proto(GcRule(max_versions=3)).max_num_versions == 3
    both = gc_rule_to_proto(GcRule(max_versions=3, max_age=timedelta(hours=1)))
    assert [r.max_num_versions for r in both.union.rules] == [3, 0]
    assert both.union.rules[1].max_age == timedelta(hours=1)
    inter = gc_rule_to_proto(GcRule(rules=(GcRule(max_versions=1),), mode="intersection"))
    assert len(inter.intersection.rules) == 1
    assert gc_rule_from_proto(gc_rule_to_proto(GcRule())) == GcRule()


def test_create_table_updates_only_changed_families(bt: BigtableBackend, table_name: str) -> None:
    bt.create_table(TableSpec(table_name, (("a", GcRule(max_versions=1)), ("b", GcRule()))))
    try:
        bt.create_table(TableSpec(table_name, (("a", GcRule(max_versions=1)),
                                               ("c", GcRule(max_age=timedelta(hours=2))))))
        assert bt.describe_table(table_name).families == (
            ("a", GcRule(max_versions=1)),
            ("b", GcRule()),
            ("c", GcRule(max_age=timedelta(hours=2))),
        )
    finally:
        bt.delete_table(table_name)


def test_describe_missing_table_keeps_cause(bt: BigtableBackend, table_name: str) -> None:
    with pytest.raises(TableNotFoundError) as info:
        bt.describe_table(table_name)
    assert isinstance(info.value.__cause__, core_exceptions.NotFound)


# -- mutations -----------------------------------------------------------------


def test_bad_family_fails_while_other_entries_apply(bt: BigtableBackend, table: str) -> None:
    outcomes = bt.mutate_rows(table, [
        RowMutation(b"a", (put("cf", b"q", 1, b"ok"),)),
        RowMutation(b"b", (put("cf", b"q", 1, b"ok"), put("nope", b"q", 1, b"bad"))),
        RowMutation(b"c", (put("cf2", b"q", 1, b"ok"),)),
    ])
    assert [o.status for o in outcomes] == [APPLIED, FAILED, APPLIED]
    assert outcomes[0].error is None
    assert isinstance(outcomes[1].error, BaseException) and "nope" in str(outcomes[1].error)
    assert [key for key, _ in rows(bt, table)] == [b"a", b"c"]


def test_sub_millisecond_timestamp_fails(bt: BigtableBackend, table: str) -> None:
    outcomes = bt.mutate_rows(table, [
        RowMutation(b"a", (SetCell("cf", b"q", T0 + 1, b"x"),)),
        RowMutation(b"b", (put("cf", b"q", 1, b"ok"),)),
    ])
    assert [o.status for o in outcomes] == [FAILED, APPLIED]
    assert "millisecond" in str(outcomes[0].error)


def test_client_refusal_is_failed(bt: BigtableBackend, table: str) -> None:
    # The client refuses negative timestamps (other than -1) before sending.
    outcomes = bt.mutate_rows(table, [
        RowMutation(b"a", (SetCell("cf", b"q", -2000, b"x"),)),
        RowMutation(b"b", (put("cf", b"q", 1, b"ok"),)),
    ])
    assert [o.status for o in outcomes] == [FAILED, APPLIED]


def test_entries_without_effect_are_applied(bt: BigtableBackend, table: str) -> None:
    bt.mutate_rows(table, [RowMutation(b"r", (put("cf", b"q", 5, b"v"),))])
    outcomes = bt.mutate_rows(table, [
        RowMutation(b"empty", ()),
        RowMutation(b"r", (DeleteCells("cf", b"q", T0 + 9 * MS, T0 + 2 * MS),)),
        RowMutation(b"r", (DeleteCells("cf", b"q", None, 0),)),
    ])
    assert [o.status for o in outcomes] == [APPLIED] * 3
    assert rows(bt, table) == [(b"r", [Cell("cf", b"q", T0 + 5 * MS, b"v")])]


def test_missing_table_raises_before_anything(bt: BigtableBackend, table_name: str) -> None:
    with pytest.raises(TableNotFoundError) as info:
        bt.mutate_rows(table_name, [RowMutation(b"r", (put("cf", b"q", 1, b"v"),))])
    assert info.value.__cause__ is not None
    with pytest.raises(TableNotFoundError):
        list(bt.read_rows(ReadRequest(table_name, filter=ReadFilter(qualifier_start=b"a"))))


def test_large_input_is_split_into_requests(
    bt: BigtableBackend, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bigtable_module, "MAX_MUTATIONS_PER_REQUEST", 7)
    monkeypatch.setattr(bigtable_module, "MAX_BYTES_PER_REQUEST", 2_000)
    entries = [
        RowMutation(b"k%03d" % i, tuple(put("cf", b"q%d" % j, 1, b"x" * (i % 300))
                                        for j in range(1 + i % 3)))
        for i in range(60)
    ]
    chunks = list(bigtable_module._chunks(entries, list(range(len(entries)))))
    assert len(chunks) > 10
    assert [i for chunk in chunks for i in chunk] == list(range(60))
    assert all(sum(len(entries[i].mutations) for i in chunk) <= 7 for chunk in chunks)
    entries.insert(30, RowMutation(b"bad", (put("nope", b"q", 1, b"x"),)))
    outcomes = bt.mutate_rows(table, entries)
    assert [o.status for o in outcomes] == [APPLIED] * 30 + [FAILED] + [APPLIED] * 30
    assert len(rows(bt, table)) == 60


def test_one_huge_entry_is_sent_alone(bt: BigtableBackend, table: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bigtable_module, "MAX_BYTES_PER_REQUEST", 100)
    outcomes = bt.mutate_rows(table, [RowMutation(b"big", (put("cf", b"q", 1, b"x" * 500),))])
    assert [o.status for o in outcomes] == [APPLIED]


def test_value_over_grpc_default_receive_limit(bt: BigtableBackend, table: str) -> None:
    big = bytes(range(256)) * (5 * 4096 + 3)  # just over 5 MiB
    assert [o.status for o in bt.mutate_rows(table, [
        RowMutation(b"big", (put("cf", b"q", 1, big),))])] == [APPLIED]
    [(key, [stored])] = rows(bt, table)
    assert key == b"big" and stored.value == big


# -- failure classification --------------------------------------------------------


def entry_status(exc_type: type[core_exceptions.GoogleAPICallError]) -> Exception:
    """An error as the client builds it from one entry's status (no RPC response)."""
    return exc_type("from the entry status")


def call_error(exc_type: type[core_exceptions.GoogleAPICallError]) -> Exception:
    """An error as the client builds it when the whole call fails."""
    return exc_type("the call failed", response=object())


@pytest.mark.parametrize("error, status", [
    (entry_status(core_exceptions.InvalidArgument), FAILED),
    (entry_status(core_exceptions.NotFound), FAILED),
    (entry_status(core_exceptions.FailedPrecondition), FAILED),
    (call_error(core_exceptions.PermissionDenied), FAILED),
    (call_error(core_exceptions.Unauthenticated), FAILED),
    (entry_status(core_exceptions.OutOfRange), FAILED),
    (entry_status(core_exceptions.AlreadyExists), FAILED),
    (ValueError("refused by the client"), FAILED),
    (call_error(core_exceptions.DeadlineExceeded), UNKNOWN),
    (call_error(core_exceptions.ServiceUnavailable), UNKNOWN),
    (entry_status(core_exceptions.Aborted), UNKNOWN),
    (entry_status(core_exceptions.Unknown), UNKNOWN),
    (call_error(core_exceptions.InternalServerError), UNKNOWN),
    (call_error(core_exceptions.Cancelled), UNKNOWN),
    (RuntimeError("unrecognized"), UNKNOWN),
    (RetryExceptionGroup([entry_status(core_exceptions.DeadlineExceeded),
                          entry_status(core_exceptions.InvalidArgument)]), UNKNOWN),
    (RetryExceptionGroup([entry_status(core_exceptions.ServiceUnavailable)]), UNKNOWN),
    (RetryExceptionGroup([entry_status(core_exceptions.InvalidArgument),
                          entry_status(core_exceptions.NotFound)]), FAILED),
], ids=lambda v: type(v).__name__)
def test_classification(bt: BigtableBackend, error: BaseException, status: MutationStatus) -> None:
    assert bt._classify(error) is status


def test_emulator_entry_internal_is_failed(bt: BigtableBackend) -> None:
    # The emulator reports every rejected entry as INTERNAL; Cloud Bigtable
    # uses INTERNAL for server faults, after which the outcome is unknown.
    assert bt._classify(entry_status(core_exceptions.InternalServerError)) is FAILED
    production = object.__new__(BigtableBackend)
    production.emulator_host = None
    assert production._classify(entry_status(core_exceptions.InternalServerError)) is UNKNOWN


# -- reads -------------------------------------------------------------------------


def test_reverse_read_is_refused(bt: BigtableBackend, table: str) -> None:
    with pytest.raises(QueryError, match="reverse"):
        bt.read_rows(ReadRequest(table, reverse=True))


def test_family_names_are_matched_literally(bt: BigtableBackend, table_name: str) -> None:
    families = ("a.b", "aXb", "a-b", "a_b", "ab")
    bt.create_table(TableSpec(table_name, tuple((f, GcRule()) for f in families)))
    try:
        bt.mutate_rows(table_name, [
            RowMutation(b"r", tuple(put(f, b"q", 1, f.encode()) for f in families))])
        for family in families:
            [(_, cells)] = rows(bt, table_name, families=(family,))
            assert [c.family for c in cells] == [family]
        [(_, cells)] = rows(bt, table_name, families=("a.b", "a_b"))
        assert [c.family for c in cells] == ["a.b", "a_b"]
    finally:
        bt.delete_table(table_name)


def test_binary_qualifiers_are_matched_exactly(bt: BigtableBackend, table: str) -> None:
    qualifiers = [b".", b"\x00", b"\xff", b"\xc3\xa9", b"(", b"a|b", b"\\", b"*", b"\n"]
    bt.mutate_rows(table, [RowMutation(b"r", tuple(put("cf", q, 1, q) for q in qualifiers))])
    for qualifier in qualifiers:
        [(_, cells)] = rows(bt, table, columns=(("cf", qualifier),))
        assert [c.qualifier for c in cells] == [qualifier]


def test_timestamp_bounds_between_milliseconds(bt: BigtableBackend, table: str) -> None:
    bt.mutate_rows(table, [RowMutation(b"r", (put("cf", b"q", 1, b"1"), put("cf", b"q", 2, b"2")))])
    at_1, at_2 = T0 + MS, T0 + 2 * MS
    assert [c.value for _, cs in rows(bt, table, timestamp_start=at_1 + 1) for c in cs] == [b"2"]
    assert [c.value for _, cs in rows(bt, table, timestamp_end=at_2 - 1) for c in cs] == [b"1"]
    assert rows(bt, table, timestamp_start=at_2 + 1, timestamp_end=at_2 + 999) == []
    far = 2**62  # beyond what a datetime holds: no upper bound in practice
    assert len(rows(bt, table, timestamp_end=far)[0][1]) == 2
    assert rows(bt, table, timestamp_start=far) == []


def test_empty_selections_read_nothing(bt: BigtableBackend, table: str) -> None:
    bt.mutate_rows(table, [RowMutation(b"r", (put("cf", b"q", 1, b"v"),))])
    assert rows(bt, table, families=()) == []
    assert rows(bt, table, columns=()) == []
    assert rows(bt, table, qualifier_start=b"b", qualifier_end=b"a") == []
    request = ReadRequest(table, RowSet(keys=(b"",)))
    assert list(bt.read_rows(request)) == []
