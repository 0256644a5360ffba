"""Behaviour of the Cloud Bigtable backend that the conformance suite does not pin.

Everything runs against the real emulator started by the ``emulator`` fixture;
nothing in ``google.cloud`` is patched.
"""

from __future__ import annotations

import base64
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import grpc
import pytest
from google.api_core import exceptions as core_exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud.bigtable.data.exceptions import RetryExceptionGroup
from google.cloud.bigtable_v2.types import bigtable as bigtable_types
from google.cloud.bigtable_v2.types import feature_flags

import tsmodel as ts
from tsmodel.backends import _bigtable_rpc as rpc_module
from tsmodel.backends import _bigtable_wire as wire
from tsmodel.backends import bigtable as bigtable_module
from tsmodel.backends import open_backend
from tsmodel.backends.base import (
    AddToCell,
    Cell,
    DeleteCells,
    DeleteFamily,
    DeleteRow,
    GcRule,
    MutationStatus,
    ReadFilter,
    ReadRequest,
    RowMutation,
    RowRange,
    RowSet,
    SetCell,
    TableSpec,
)
from tsmodel.backends.bigtable import BigtableBackend, gc_rule_from_proto, gc_rule_to_proto
from tsmodel.backends.emulator import Emulator
from tsmodel.errors import BackendError, BackendUnreachableError, TableNotFoundError

MutateRowsRequest: Any = bigtable_types.MutateRowsRequest.pb()

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
        assert backend.features.reverse_scan and not backend.features.immediate_gc
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


# -- readiness ------------------------------------------------------------------


def _unused_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"  # nothing listens once closed


def _unreachable(address: str, timeout: float) -> tuple[BackendUnreachableError, float]:
    """The error of ``check_reachable`` on an emulator at ``address``, and the seconds it took."""
    with BigtableBackend("p", "i", emulator_host=address) as backend:
        started = time.monotonic()
        with pytest.raises(BackendUnreachableError) as info:
            backend.check_reachable(timeout)
        return info.value, time.monotonic() - started


def test_nothing_listening_is_told_at_once() -> None:
    address = _unused_address()
    error, seconds = _unreachable(address, 10.0)
    assert seconds < 2  # not the timeout, nor the client's minute of retries
    assert (error.address, error.listening, error.timeout) == (address, False, 10.0)
    assert str(error).startswith(f"cannot reach the Bigtable emulator at {address}: nothing "
                                 "listens there ("), error
    assert isinstance(error, ConnectionError) and isinstance(error.__cause__, OSError)


def test_a_server_that_does_not_answer_times_out() -> None:
    with socket.socket() as server:  # accepts connections, never speaks gRPC
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        error, seconds = _unreachable(address, 0.5)
    assert 0.4 < seconds < 5
    assert (error.address, error.listening, error.timeout) == (address, True, 0.5)
    assert str(error) == (f"the Bigtable emulator at {address} does not answer (no gRPC "
                          "reply within 0.5 s)")
    assert isinstance(error.__cause__, core_exceptions.DeadlineExceeded)


def test_the_running_emulator_answers_and_a_stopped_one_listens_no_more(emulator: Any) -> None:
    with Emulator(emulator.binary) as emu, \
            BigtableBackend("p", "i", emulator_host=emu.host_port) as backend:
        backend.check_reachable(10.0)
        emu.stop()
        with pytest.raises(BackendUnreachableError, match="nothing listens") as info:
            backend.check_reachable(10.0)
    assert info.value.address == emu.host_port and not info.value.listening


def test_reachability_on_cloud_bigtable_is_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    anonymous = ts.Settings(credentials=AnonymousCredentials())
    with BigtableBackend("p", "i", settings=anonymous) as backend:
        started = time.monotonic()
        backend.check_reachable(0.001)  # no request: the client's retries are production's
        assert time.monotonic() - started < 0.5


def test_closed_backend_is_not_reachable(emulator: Any) -> None:
    backend = BigtableBackend("p", "i", emulator_host=emulator.host_port)
    backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.check_reachable(1.0)


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


def test_the_session_emulator_collects_garbage_from_the_start(
        bt: BigtableBackend, table_name: str) -> None:
    """The plugin's emulator collects as Bigtable may, at any moment, even when no
    test changed a GC rule before (the emulator alone would wait for one: a test
    could then pass alone and fail after another, as a CI run showed)."""
    bt.create_table(TableSpec(table_name, (("cf", GcRule(max_versions=1)),)))
    try:
        bt.mutate_rows(table_name, [RowMutation(b"r", (put("cf", b"q", 1, b"old"),
                                                       put("cf", b"q", 2, b"new")))])
        deadline = time.monotonic() + 20  # the emulator's loop runs every 0.5-1.5 s
        while [c.value for _, cells in rows(bt, table_name) for c in cells] != [b"new"]:
            assert time.monotonic() < deadline, "the version past the limit was never collected"
            time.sleep(0.1)
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


def test_deletion_bounds_between_milliseconds_apply_whole(bt: BigtableBackend,
                                                          table: str) -> None:
    # The emulator refuses time-range bounds that are not whole milliseconds,
    # after applying the mutations before them. Cells hold whole milliseconds:
    # rounding the bounds up changes no cell's fate, as the embedded store does.
    bt.mutate_rows(table, [RowMutation(b"r", (put("cf", b"q2", 1, b"1"),
                                              put("cf", b"q2", 3, b"3")))])
    outcomes = bt.mutate_rows(table, [
        RowMutation(b"r", (put("cf", b"q", 0, b"new"),
                           DeleteCells("cf", b"q2", T0 + 1, T0 + 2001))),
        RowMutation(b"r", (DeleteCells("cf", b"q2", T0 + 3001, T0 + 3002),)),  # holds no ms
    ])
    assert [o.status for o in outcomes] == [APPLIED, APPLIED]
    assert rows(bt, table) == [(b"r", [Cell("cf", b"q", T0, b"new"),
                                       Cell("cf", b"q2", T0 + 3 * MS, b"3")])]
    [(request, _)] = list(wire.entry_requests(
        "t", None, [RowMutation(b"r", (DeleteCells("cf", b"q", T0 - 999, 2**63 - 1),))], [0],
        100, 10_000, pytest.fail))
    sent = MutateRowsRequest.FromString(request.SerializeToString())
    span = sent.entries[0].mutations[0].delete_from_column.time_range
    assert (span.start_timestamp_micros, span.end_timestamp_micros) == (T0, 0)  # 0: no end


def test_entries_without_effect_are_applied(bt: BigtableBackend, table: str) -> None:
    bt.mutate_rows(table, [RowMutation(b"r", (put("cf", b"q", 5, b"v"),))])
    outcomes = bt.mutate_rows(table, [
        RowMutation(b"empty", ()),  # no mutation: refused, as Cloud Bigtable does
        RowMutation(b"r", (DeleteCells("cf", b"q", T0 + 9 * MS, T0 + 2 * MS),)),
        RowMutation(b"r", (DeleteCells("cf", b"q", None, 0),)),
    ])
    assert [o.status for o in outcomes] == [FAILED, APPLIED, APPLIED]
    assert isinstance(outcomes[0].error, ValueError)
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
    requests = list(wire.entry_requests("t", None, entries, range(len(entries)), 7, 2_000,
                                        pytest.fail))
    assert len(requests) > 10
    assert [i for _, positions in requests for i in positions] == list(range(60))
    for request, positions in requests:
        sent = MutateRowsRequest.FromString(request.SerializeToString())
        assert [e.row_key for e in sent.entries] == [entries[i].key for i in positions]
        assert sum(len(e.mutations) for e in sent.entries) <= 7
        assert len(positions) == 1 or sent.ByteSize() <= 2_000
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


def test_entry_internal_is_unknown_on_every_connection(bt: BigtableBackend) -> None:
    # INTERNAL is a server fault after which the entry may be applied, on the
    # emulator as on Cloud Bigtable: the emulator classifies like production.
    assert bt.emulator_host is not None
    production = object.__new__(BigtableBackend)
    production.emulator_host = None
    for backend in (bt, production):
        assert backend._classify(entry_status(core_exceptions.InternalServerError)) is UNKNOWN


# -- the data path makes no admin call ----------------------------------------------


class NoAdmin:
    """Stands in for a backend's admin client: records and refuses every use."""

    def __init__(self) -> None:
        self.used: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.used.append(name)
        raise AssertionError(f"the data path used the admin client ({name})")


@pytest.fixture
def data_only(emulator: Any) -> Iterator[BigtableBackend]:
    """A backend on ``bt``'s instance whose admin client refuses every call."""
    backend = BigtableBackend("tsmodel-specific", "inst", emulator_host=emulator.host_port)
    admin, backend._admin = backend._admin, NoAdmin()
    yield backend
    backend._admin = admin
    backend.close()


def test_writes_make_no_admin_call(data_only: BigtableBackend, table: str) -> None:
    outcomes = data_only.mutate_rows(table, [
        RowMutation(b"a", (put("cf", b"q", 1, b"ok"), put("cf2", b"q", 1, b"ok"))),
        RowMutation(b"b", (put("cf", b"q", 1, b"ok"), put("nope", b"q", 1, b"bad"))),
        RowMutation(b"c", (put("cf", b"q", 1, b"ok"), DeleteFamily("gone"))),
        RowMutation(b"d", (put("cf", b"q", 1, b"ok"), SetCell("cf", b"q", T0 + 1, b"sub-ms"))),
    ])
    assert [o.status for o in outcomes] == [APPLIED, FAILED, FAILED, FAILED]
    assert "nope" in str(outcomes[1].error) and "gone" in str(outcomes[2].error)
    assert [key for key, _ in rows(data_only, table)] == [b"a"]  # nothing of b, c, d
    with pytest.raises(TableNotFoundError) as info:
        data_only.mutate_rows(table + "_missing", [RowMutation(b"r", (put("cf", b"q", 1, b"v"),))])
    assert isinstance(info.value.__cause__, core_exceptions.NotFound)
    assert isinstance(data_only._admin, NoAdmin) and data_only._admin.used == []


def test_reads_make_no_admin_call(data_only: BigtableBackend, table: str) -> None:
    data_only.mutate_rows(table, [
        RowMutation(b"r1", (put("cf", b"a", 1, b"1"),)),
        RowMutation(b"r2", (put("cf", b"a", 1, b"2"), put("cf", b"b", 1, b"3"),
                            put("cf2", b"b", 1, b"4"), put("cf2", b"c", 1, b"5"))),
        RowMutation(b"r3", (put("cf2", b"b", 1, b"6"),)),
    ])
    # A qualifier range without families: Bigtable scopes column ranges by family.
    assert [(key, [c.value for c in cells]) for key, cells in rows(
        data_only, table, qualifier_start=b"b", qualifier_end=b"c")] == [
        (b"r2", [b"3", b"4"]), (b"r3", [b"6"])]
    ranged = ReadRequest(table, filter=ReadFilter(qualifier_start=b"b"), limit=1)
    assert [row.key for row in data_only.read_rows(ranged)] == [b"r2"]
    for empty in (ReadFilter(families=()), ReadFilter(qualifier_start=b"b")):
        with pytest.raises(TableNotFoundError) as info:
            list(data_only.read_rows(ReadRequest(table + "_missing", filter=empty)))
        assert isinstance(info.value.__cause__, core_exceptions.NotFound)
    assert isinstance(data_only._admin, NoAdmin) and data_only._admin.used == []


# -- reads -------------------------------------------------------------------------


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


# -- the raw data path: headers, retries, resumed reads -----------------------------------


UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
INTERNAL = grpc.StatusCode.INTERNAL


class Injected(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """An RPC failure as gRPC raises it, made up by a test."""

    def __init__(self, code: grpc.StatusCode, details: str = "injected by the test") -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def initial_metadata(self) -> tuple[()]:
        return ()

    def trailing_metadata(self) -> tuple[()]:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


class Fault:
    """What goes wrong with one call: an error after some messages, and/or edited messages."""

    def __init__(self, after: int = 0, code: grpc.StatusCode | None = UNAVAILABLE,
                 edit: Callable[[Any], Any] | None = None) -> None:
        self.after, self.code, self.edit = after, code, edit


class FaultyStream:
    def __init__(self, call: Any, fault: Fault | None) -> None:
        self.call, self.fault, self.sent, self.cancelled = call, fault, 0, False

    def __iter__(self) -> FaultyStream:
        return self

    def __next__(self) -> Any:
        fault = self.fault
        if fault is not None and fault.code is not None and self.sent >= fault.after:
            self.call.cancel()
            raise Injected(fault.code)
        message = next(self.call)
        self.sent += 1
        if fault is None or not fault.edit:
            return message
        if type(message) is int:  # every entry applied, known by its bytes: as the message
            message = wire.MutateRowsResponse.FromString(wire.applied_response(message))
        return fault.edit(message)

    def cancel(self) -> bool:
        self.cancelled = True
        return bool(self.call.cancel())


def as_message(request: Any) -> Any:
    """A copy of ``request`` as a protobuf message (a ``MutateRows`` one from its wire bytes)."""
    if isinstance(request, wire.MutateRequest):
        return MutateRowsRequest.FromString(request.SerializeToString())
    copy = type(request)()
    copy.CopyFrom(request)
    return copy


def is_family_check(request: Any) -> bool:
    """Whether ``request`` is the emulator's family check before a write (never faulted)."""
    return isinstance(request, wire.MutateRequest) and all(
        e.row_key.startswith(wire.CHECK_ROW_PREFIX) for e in as_message(request).entries)


class FaultyChannel:
    """The emulator channel, with scripted faults on the calls of one method.

    The family checks that precede the first writes to a table on the
    emulator pass through unrecorded: the faults are for the data calls.
    """

    def __init__(self, real: Any, method: str, *faults: Fault | None) -> None:
        self.real, self.method, self.faults = real, method, list(faults)
        self.requests: list[Any] = []
        self.metadata: list[dict[str, str]] = []
        self.streams: list[FaultyStream] = []

    def unary_stream(self, method: str, **kwargs: Any) -> Any:
        real = self.real.unary_stream(method, **kwargs)

        def call(request: Any, **call_kwargs: Any) -> Any:
            if is_family_check(request):
                return real(request, **call_kwargs)
            self.metadata.append(dict(call_kwargs.get("metadata", ())))
            if not method.endswith(self.method):
                return real(request, **call_kwargs)
            self.requests.append(as_message(request))
            fault = self.faults.pop(0) if self.faults else None
            stream = FaultyStream(real(request, **call_kwargs), fault)
            self.streams.append(stream)
            return stream

        return call


@pytest.fixture
def inject(bt: BigtableBackend) -> Iterator[Callable[..., FaultyChannel]]:
    """Install a FaultyChannel on ``bt``'s data calls (no back-off sleeps)."""
    original_channel, original_sleep = bt._rpc.channel, bt._rpc.sleep

    def install(method: str, *faults: Fault | None) -> FaultyChannel:
        faulty = FaultyChannel(original_channel(), method, *faults)
        bt._rpc.channel = lambda: faulty
        return faulty

    bt._rpc.sleep = lambda seconds: None
    yield install
    bt._rpc.channel, bt._rpc.sleep = original_channel, original_sleep


def short_deadlines(seconds: float) -> rpc_module.Policies:
    """Retry policies whose operations give up after ``seconds``."""
    return rpc_module.Policies.of(ts.Settings(read_operation_timeout=seconds,
                                              mutate_operation_timeout=seconds))


def fill(bt: BigtableBackend, table: str, n: int = 20) -> list[bytes]:
    keys = [b"k%02d" % i for i in range(n)]
    outcomes = bt.mutate_rows(table, [RowMutation(k, (put("cf", b"q", 1, k),)) for k in keys])
    assert all(o.ok for o in outcomes)
    return keys


def read_keys(bt: BigtableBackend, table: str, rows: RowSet | None = None,
              limit: int | None = None, reverse: bool = False) -> list[bytes]:
    request = ReadRequest(table, rows or RowSet(), ReadFilter(), limit, reverse)
    return [row.key for row in bt.read_rows(request)]


def test_data_calls_carry_routing_and_client_headers(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    faulty = inject("ReadRows")
    fill(bt, table, 3)
    read_keys(bt, table)
    read_keys(bt, table, reverse=True)
    write_headers, read_headers, reverse_headers = faulty.metadata
    table_name = f"projects/{bt.project}/instances/{bt.instance}/tables/{table}"
    routing = f"table_name={table_name}&app_profile_id="
    for headers in (write_headers, read_headers, reverse_headers):
        assert headers["x-goog-request-params"] == routing
        assert "gapic/" in headers["x-goog-api-client"]
    assert "bigtable-features" not in write_headers
    assert read_headers["bigtable-features"] == reverse_headers["bigtable-features"]
    flags = feature_flags.FeatureFlags.pb().FromString(
        base64.urlsafe_b64decode(reverse_headers["bigtable-features"]))
    assert flags.reverse_scans and flags.last_scanned_row_responses


def test_app_profile_goes_in_requests_and_routing_header(
    emulator: Any, table_name: str
) -> None:
    backend = BigtableBackend("tsmodel-specific", "inst", emulator_host=emulator.host_port,
                              settings=ts.Settings(app_profile="batch-profile"))
    try:
        faulty = FaultyChannel(backend._rpc.channel(), "ReadRows")
        backend._rpc.channel = lambda: faulty
        backend.create_table(TableSpec(table_name, (("cf", GcRule()),)))
        [outcome] = backend.mutate_rows(
            table_name, [RowMutation(b"r", (put("cf", b"q", 1, b"v"),))])
        assert outcome.ok
        assert [r.key for r in backend.read_rows(ReadRequest(table_name))] == [b"r"]
        assert faulty.requests[0].app_profile_id == "batch-profile"
        assert all(h["x-goog-request-params"].endswith("&app_profile_id=batch-profile")
                   for h in faulty.metadata)
    finally:
        backend.delete_table(table_name)
        backend.close()


def test_production_data_calls_use_the_clients_authenticated_channel(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    anonymous = ts.Settings(credentials=AnonymousCredentials())
    backend = BigtableBackend("p", "i", settings=anonymous)  # no I/O yet
    try:
        assert backend.emulator_host is None and backend.features.persistent
        assert backend._rpc.channel() is backend._data.transport.grpc_channel
        assert backend._data.api_endpoint == "bigtable.googleapis.com"
    finally:
        backend.close()


def test_reversed_scans(bt: BigtableBackend, table: str) -> None:
    keys = fill(bt, table, 12)
    assert read_keys(bt, table, reverse=True) == keys[::-1]
    assert read_keys(bt, table, limit=3, reverse=True) == keys[:-4:-1]
    assert read_keys(bt, table, RowSet(ranges=(RowRange(b"k03", b"k07"),)), reverse=True) == \
        [b"k06", b"k05", b"k04", b"k03"]


def test_read_resumes_after_broken_streams(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    keys = fill(bt, table)
    faulty = inject("ReadRows", Fault(5), Fault(3, grpc.StatusCode.DEADLINE_EXCEEDED),
                    Fault(0, grpc.StatusCode.ABORTED), None)
    assert read_keys(bt, table) == keys
    assert len(faulty.requests) == 4
    assert faulty.requests[1].rows.row_ranges[0].start_key_open == keys[4]
    assert faulty.requests[2].rows.row_ranges[0].start_key_open == keys[7]
    assert faulty.requests[3].rows.row_ranges[0].start_key_open == keys[7]


def test_resumed_read_keeps_the_limit_and_the_row_set(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    fill(bt, table)
    rows = RowSet(keys=(b"k01", b"k03", b"k05"), ranges=(RowRange(b"k10", b"k15"),))
    faulty = inject("ReadRows", Fault(2), Fault(2), None)
    assert read_keys(bt, table, rows, limit=6) == [b"k01", b"k03", b"k05", b"k10", b"k11", b"k12"]
    second, third = faulty.requests[1], faulty.requests[2]
    assert list(second.rows.row_keys) == [b"k05"] and second.rows_limit == 4
    assert third.rows.row_ranges[0].start_key_open == b"k10" and third.rows_limit == 2
    assert not third.rows.row_keys


def test_resumed_reverse_read(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    keys = fill(bt, table)
    faulty = inject("ReadRows", Fault(4), None)
    assert read_keys(bt, table, limit=10, reverse=True) == keys[:-11:-1]
    assert faulty.requests[1].reversed and faulty.requests[1].rows_limit == 6
    assert faulty.requests[1].rows.row_ranges[0].end_key_open == keys[-4]


def test_read_stream_ending_the_limit_is_not_resent(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    fill(bt, table)
    faulty = inject("ReadRows", Fault(3))
    assert len(read_keys(bt, table, limit=3)) == 3
    assert len(faulty.requests) == 1


def test_non_retryable_read_error_is_raised_after_the_rows_before_it(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    keys = fill(bt, table)
    inject("ReadRows", Fault(2, grpc.StatusCode.PERMISSION_DENIED))
    got = []
    with pytest.raises(BackendError) as info:
        for row in bt.read_rows(ReadRequest(table)):
            got.append(row.key)
    assert got == keys[:2]
    assert isinstance(info.value.__cause__, core_exceptions.PermissionDenied)


def test_read_gives_up_after_the_deadline_without_progress(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(bt, table)
    monkeypatch.setattr(bt._rpc, "policies", short_deadlines(0.2))
    bt._rpc.sleep = lambda seconds: time.sleep(0.05)
    faulty = inject("ReadRows", *[Fault(0)] * 100)
    bt._rpc.sleep = lambda seconds: time.sleep(0.05)
    with pytest.raises(BackendError) as info:
        read_keys(bt, table)
    assert isinstance(info.value.__cause__, core_exceptions.ServiceUnavailable)
    assert 1 < len(faulty.requests) < 20


def test_abandoned_read_cancels_its_stream(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    fill(bt, table)
    faulty = inject("ReadRows", None)
    rows_iter = bt.read_rows(ReadRequest(table))
    next(rows_iter)
    rows_iter.close()  # type: ignore[attr-defined]
    assert faulty.streams[0].cancelled


def test_writes_are_retried_when_the_call_breaks(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    faulty = inject("MutateRows", Fault(0), None)
    outcomes = bt.mutate_rows(table, [RowMutation(b"a", (put("cf", b"q", 1, b"1"),)),
                                      RowMutation(b"b", (put("cf", b"q", 1, b"2"),))])
    assert [o.status for o in outcomes] == [APPLIED, APPLIED]
    assert len(faulty.requests) == 2 and len(faulty.requests[1].entries) == 2
    assert [key for key, _ in rows(bt, table)] == [b"a", b"b"]


def without_entry(index: int) -> Callable[[Any], Any]:
    def edit(response: Any) -> Any:
        kept = [e for e in response.entries if e.index != index]
        del response.entries[:]
        response.entries.extend(kept)
        return response
    return edit


def with_status(index: int, code: grpc.StatusCode) -> Callable[[Any], Any]:
    def edit(response: Any) -> Any:
        for e in response.entries:
            if e.index == index:
                e.status.code = code.value[0]
                e.status.message = "injected"
        return response
    return edit


def test_entries_without_status_or_with_transient_status_are_retried_alone(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    entries = [RowMutation(b"k%d" % i, (put("cf", b"q", 1, b"%d" % i),)) for i in range(4)]
    def edit(response: Any) -> Any:
        return with_status(0, UNAVAILABLE)(without_entry(2)(response))

    faulty = inject("MutateRows", Fault(code=None, edit=edit), None)
    outcomes = bt.mutate_rows(table, entries)
    assert [o.status for o in outcomes] == [APPLIED] * 4
    assert [[e.row_key for e in r.entries] for r in faulty.requests] == [
        [b"k0", b"k1", b"k2", b"k3"], [b"k0", b"k2"]]


def test_additions_are_never_sent_twice(
    bt: BigtableBackend, table_name: str, inject: Callable[..., FaultyChannel]
) -> None:
    """An AddToCell entry whose outcome is in doubt is UNKNOWN, not retried: a
    retry would add twice (the official client retries only idempotent entries)."""
    bt.create_table(TableSpec(table_name, (("a", GcRule()), ("cf", GcRule())),
                              aggregates=("a",)))
    entries = [RowMutation(b"k0", (put("cf", b"q", 1, b"x"),)),
               RowMutation(b"k1", (AddToCell("a", b"n", T0, 5),)),
               RowMutation(b"k2", (AddToCell("a", b"n", T0, 7),)),
               RowMutation(b"k3", (put("cf", b"q", 1, b"y"),))]

    def edit(response: Any) -> Any:  # the emulator applied all four
        return with_status(0, UNAVAILABLE)(with_status(1, UNAVAILABLE)(
            without_entry(2)(response)))

    faulty = inject("MutateRows", Fault(code=None, edit=edit), None)
    outcomes = bt.mutate_rows(table_name, entries)
    assert [o.status for o in outcomes] == [APPLIED, UNKNOWN, UNKNOWN, APPLIED]
    assert [[e.row_key for e in r.entries] for r in faulty.requests] == [
        [b"k0", b"k1", b"k2", b"k3"], [b"k0"]]
    # Added once each, as sent once: 8-byte big-endian sums.
    sums = {key: [c.value for c in cells if c.family == "a"] for key, cells in rows(bt, table_name)}
    assert sums[b"k1"] == [(5).to_bytes(8, "big")] and sums[b"k2"] == [(7).to_bytes(8, "big")]

    # A call that breaks after it was sent: the additions may have been applied.
    inject("MutateRows", Fault(0, UNAVAILABLE), None)
    again = bt.mutate_rows(table_name, [RowMutation(b"k1", (AddToCell("a", b"n", T0, 1),))])
    assert [o.status for o in again] == [UNKNOWN]
    bt.delete_table(table_name)


def test_entry_status_retried_until_it_succeeds(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    entries = [RowMutation(b"k%d" % i, (put("cf", b"q", 1, b"%d" % i),)) for i in range(3)]
    faulty = inject("MutateRows", Fault(code=None, edit=with_status(2, UNAVAILABLE)),
                    Fault(code=None, edit=with_status(0, grpc.StatusCode.DEADLINE_EXCEEDED)),
                    None)
    outcomes = bt.mutate_rows(table, entries)
    assert [o.status for o in outcomes] == [APPLIED] * 3
    assert [[e.row_key for e in r.entries] for r in faulty.requests] == [
        [b"k0", b"k1", b"k2"], [b"k2"], [b"k2"]]


def test_writes_that_keep_failing_are_unknown_with_every_error(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bt._rpc, "policies", short_deadlines(0.2))
    faulty = inject("MutateRows", *[Fault(0)] * 100)
    bt._rpc.sleep = lambda seconds: time.sleep(0.05)
    outcomes = bt.mutate_rows(table, [RowMutation(b"a", (put("cf", b"q", 1, b"1"),))])
    assert [o.status for o in outcomes] == [UNKNOWN]
    assert len(faulty.requests) > 1
    assert isinstance(outcomes[0].error, RetryExceptionGroup)
    assert all(isinstance(e, core_exceptions.ServiceUnavailable)
               for e in outcomes[0].error.exceptions)


def test_permanent_call_error_fails_every_entry(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    faulty = inject("MutateRows", Fault(0, grpc.StatusCode.PERMISSION_DENIED))
    outcomes = bt.mutate_rows(table, [RowMutation(b"a", (put("cf", b"q", 1, b"1"),)),
                                      RowMutation(b"b", (put("cf", b"q", 1, b"2"),))])
    assert [o.status for o in outcomes] == [FAILED, FAILED]
    assert isinstance(outcomes[0].error, core_exceptions.PermissionDenied)
    assert len(faulty.requests) == 1


def test_entry_internal_status_is_unknown(
    bt: BigtableBackend, table: str, inject: Callable[..., FaultyChannel]
) -> None:
    # INTERNAL in an entry's status is a server fault after which the entry
    # may be applied, on the emulator as on Cloud Bigtable: here it was.
    entries = [RowMutation(b"k%d" % i, (put("cf", b"q", 1, b"%d" % i),)) for i in range(3)]
    faulty = inject("MutateRows", Fault(code=None, edit=with_status(1, INTERNAL)))
    outcomes = bt.mutate_rows(table, entries)
    assert [o.status for o in outcomes] == [APPLIED, UNKNOWN, APPLIED]
    assert isinstance(outcomes[1].error, core_exceptions.InternalServerError)
    assert len(faulty.requests) == 1  # not retried, like the client's default
    assert [key for key, _ in rows(bt, table)] == [b"k0", b"k1", b"k2"]


def test_save_all_reports_an_entry_internal_status_as_unknown(
    bt: BigtableBackend, inject: Callable[..., FaultyChannel]
) -> None:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"READING_{suffix}", family="R", current=f"CURRENT_READING_{suffix}")
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        celsius: float = ts.value("C")

    conn = ts.Connection(bt)
    specs = conn.create_tables(Reading)
    start = datetime(2015, 3, 16, tzinfo=timezone.utc)
    readings = [Reading(sensor=f"s{i}", time=start, celsius=20.0 + i) for i in range(3)]
    # The main-table write of s1 gets INTERNAL (after the server applied it).
    inject("MutateRows", Fault(code=None, edit=with_status(1, INTERNAL)), None)
    try:
        result = conn.save_all(readings, raise_on_failure=False)
        statuses = [r.status for r in result.results]
        assert statuses == [ts.WriteStatus.WRITTEN, ts.WriteStatus.UNKNOWN,
                            ts.WriteStatus.WRITTEN]
        assert not result.failed
        # UNKNOWN is not FAILED: the entity's current-value row was written too.
        assert Reading.using(conn).latest(sensor="s1").celsius == 21.0
    finally:
        for spec in specs:
            bt.delete_table(spec.name)


def test_bad_row_keys_and_negative_timestamps_fail_alone(bt: BigtableBackend, table: str) -> None:
    outcomes = bt.mutate_rows(table, [
        RowMutation(b"", (put("cf", b"q", 1, b"x"),)),
        RowMutation(b"x" * 4097, (put("cf", b"q", 1, b"x"),)),
        RowMutation(b"neg", (SetCell("cf", b"q", -1, b"x"),)),
        RowMutation(b"typo", (SetCell("cf", "not bytes", T0, b"x"),)),  # type: ignore[arg-type]
        RowMutation(b"ok", (put("cf", b"q", 1, b"v"),)),
    ])
    assert [o.status for o in outcomes] == [FAILED] * 4 + [APPLIED]
    assert [key for key, _ in rows(bt, table)] == [b"ok"]


def test_mutation_protobuf_matches_the_neutral_mutations() -> None:
    entry = RowMutation(b"r", (
        SetCell("cf", b"q", T0, b"v"),
        DeleteCells("cf", b"q", T0, T0 + MS),
        DeleteCells("cf", b"q2", None, None),
        DeleteCells("cf", b"q3", T0, T0),  # empty: left out
        DeleteRow(),
    ))
    [(request, positions)] = list(wire.entry_requests(
        "projects/p/instances/i/tables/t", "prof", [entry], [0], 100, 10_000, pytest.fail))
    assert positions == [0]
    request = MutateRowsRequest.FromString(request.SerializeToString())
    assert (request.table_name, request.app_profile_id) == ("projects/p/instances/i/tables/t",
                                                            "prof")
    [pb] = request.entries
    kinds = [m.WhichOneof("mutation") for m in pb.mutations]
    assert kinds == ["set_cell", "delete_from_column", "delete_from_column", "delete_from_row"]
    cell = pb.mutations[0].set_cell
    assert (cell.family_name, cell.column_qualifier, cell.timestamp_micros, cell.value) == (
        "cf", b"q", T0, b"v")
    span = pb.mutations[1].delete_from_column.time_range
    assert (span.start_timestamp_micros, span.end_timestamp_micros) == (T0, T0 + MS)
    assert not pb.mutations[2].delete_from_column.HasField("time_range") or (
        pb.mutations[2].delete_from_column.time_range.end_timestamp_micros == 0)


def test_reversed_scans_need_the_feature_header(bt: BigtableBackend, table: str) -> None:
    fill(bt, table, 3)
    target = bt._target(table)
    request = wire.read_request(target.name, None, ReadRequest(table, reverse=True))
    assert [row.key for row in bt._rpc.read_rows(request, target.read_metadata)] == [
        b"k02", b"k01", b"k00"]
    request = wire.read_request(target.name, None, ReadRequest(table, reverse=True))
    with pytest.raises(core_exceptions.MethodNotImplemented, match="reverse"):
        list(bt._rpc.read_rows(request, target.metadata))
