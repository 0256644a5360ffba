"""The Cloud Bigtable backend (production and the ``cbtemulator`` emulator).

Tables, column families and GC rules go through the table admin client
(``google.cloud.bigtable_admin_v2``). Data goes through google-cloud-bigtable's
data client's gRPC channel, so its credentials, endpoint, channel refresh
and warm-up apply, but the two data calls are made here with raw protobuf
(`_bigtable_wire`, `_bigtable_rpc`) and rows are merged from
the response chunks by `_chunks`: the client's proto-plus objects and
row merging cost several times the network on the emulator. The calls carry
the routing header Cloud Bigtable requires, and keep the client's guarantees:
per-entry outcomes and retries for writes, resumed streams for reads.

The data path (``mutate_rows``, ``read_rows``) makes data calls only, never
an admin call: a missing table is told by the data API's ``NOT_FOUND``.

Only this backend (this module and its private ``_bigtable_*`` modules)
imports ``google.cloud`` or ``grpc``: everything it returns or raises is a
neutral type from `tsmodel.ground.base` or a
`BackendError`. The few private names of the client
it needs are all in `_client_private`, which fails loudly (with a
`ConfigurationError`) when the installed client lacks one.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import warnings
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, TypeVar, cast

import attrs
import grpc
from google.api_core import exceptions as core_exceptions
from google.auth.credentials import AnonymousCredentials, Credentials
from google.cloud.bigtable.data.exceptions import FailedMutationEntryError, RetryExceptionGroup

from tsmodel.backends import _bigtable_wire as wire
from tsmodel.backends import _client_private as private
from tsmodel.backends._bigtable_admin import TableAdmin, gc_rule_from_proto, gc_rule_to_proto
from tsmodel.backends._bigtable_admin import call as _call
from tsmodel.backends._bigtable_admin import wrap as _wrap
from tsmodel.backends._bigtable_rpc import READ_RETRYABLE, DataRpc, Policies, is_retryable
from tsmodel.errors import (
    BackendError,
    BackendUnreachableError,
    ReadInterruptedError,
    TableNotFoundError,
)
from tsmodel.ground.base import (
    AddToCell,
    CellBatch,
    DeclaredCells,
    DeclaredRows,
    Features,
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
from tsmodel.settings import DEFAULT_SETTINGS, Settings

__all__ = ["BigtableBackend", "gc_rule_from_proto", "gc_rule_to_proto", "render_wire_writers"]

_T = TypeVar("_T")

#: The writers of a table's declared cells as ``MutateRows`` wire bytes (``tsmodel codec``).
render_wire_writers = wire.render_wire_writers

#: Bigtable's limit of mutations in one MutateRows request.
MAX_MUTATIONS_PER_REQUEST = 100_000
#: A conservative byte budget for one MutateRows request (the server takes 256 MiB).
MAX_BYTES_PER_REQUEST = 20 * 1024 * 1024

_EMULATOR_ENV = "BIGTABLE_EMULATOR_HOST"
_UNLIMITED = -1
#: The emulator channel is built by hand, without the production limits.
_EMULATOR_LIMITS = (
    ("grpc.max_receive_message_length", _UNLIMITED),
    ("grpc.max_send_message_length", _UNLIMITED),
)

#: Errors after which a mutation was certainly not applied.
_NOT_APPLIED_ERRORS: tuple[type[BaseException], ...] = (
    core_exceptions.InvalidArgument,
    core_exceptions.NotFound,
    core_exceptions.FailedPrecondition,
    core_exceptions.PermissionDenied,
    core_exceptions.Unauthenticated,
    core_exceptions.OutOfRange,
    core_exceptions.AlreadyExists,
    core_exceptions.ResourceExhausted,
    core_exceptions.MethodNotImplemented,
    ValueError,
    TypeError,
)

#: Serializes construction of data clients, which read BIGTABLE_EMULATOR_HOST.
_ENV_LOCK = threading.Lock()
#: google.auth's credentials (their constructors are untyped).
_AnonymousCredentials: Any = AnonymousCredentials


class _Target:
    """What the data calls of one table need: its full name and request headers."""

    __slots__ = ("name", "table", "metadata", "read_metadata")

    def __init__(self, name: str, table: Any, app_profile_id: str | None) -> None:
        self.name = name
        #: The data client's table: registers the instance for channel warm-up.
        self.table = table
        #: MutateRows: the routing header.
        self.metadata = (wire.routing_metadata(name, app_profile_id),)
        #: ReadRows: also the features the merger handles (reversed scans,
        #: last-scanned-row responses), as the other official clients send them.
        self.read_metadata = (*self.metadata, wire.FEATURES_METADATA)


class _BigtableBase:
    """What the sync and async backends share: clients, channel, retry policies, targets.

    A subclass names its data client class, the options of its gRPC channels,
    the channel factory of the emulator and its RPC driver; everything else
    about opening a backend is here, once. Its arguments and errors are those
    documented on `BigtableBackend`.
    """

    #: google-cloud-bigtable's data client class (sync or async).
    _data_client_class: Any
    #: The RPC driver (`DataRpc` or `AsyncDataRpc`).
    _rpc_class: Any
    #: ``grpc.insecure_channel`` or ``grpc.aio.insecure_channel``: the emulator's data channel.
    _insecure_channel: Any

    def __init__(self, project: str, instance: str, *, emulator_host: str | None = None,
                 settings: Settings = DEFAULT_SETTINGS) -> None:
        self.project = project
        self.instance = instance
        self.settings = settings
        self.emulator_host = emulator_host or os.environ.get(_EMULATOR_ENV) or None
        self.app_profile_id = settings.app_profile
        self.features = Features(reverse_scan=True, persistent=self.emulator_host is None,
                                 concurrent_calls=True)
        self._targets: dict[str, _Target] = {}
        #: Families known to exist, per table, for the emulator's checks
        #: (see _emulator_refusals).
        self._families: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()
        self._closed = False
        credentials, client_options = settings.credentials, settings.client_options
        if self.emulator_host is not None:
            credentials, client_options = _AnonymousCredentials(), None
        options = self._channel_options()
        self._data = _call(lambda: new_data_client(
            self._data_client_class, self.project, credentials, self.emulator_host,
            client_options, **self._client_arguments(options)), "connect")
        self._admin = TableAdmin(self._instance_path, credentials, self.emulator_host,
                                 client_options)
        client_info = (self._data.client_info.to_grpc_metadata(),)
        policies = Policies.of(settings)
        self._emulator_channel: Any = None
        if self.emulator_host is None:
            self._rpc = self._rpc_class(lambda: self._data.transport.grpc_channel, client_info,
                                        policies)
        else:
            # The client makes its emulator channel without options (and
            # with gRPC's 4 MiB receive limit): the data calls get their own.
            channel = type(self)._insecure_channel(self.emulator_host,
                                                   options=[*options, *_EMULATOR_LIMITS])
            self._emulator_channel = channel
            self._rpc = self._rpc_class(lambda: channel, client_info, policies)

    def _channel_options(self) -> tuple[tuple[str, Any], ...]:
        """gRPC options of the data channels (none by default)."""
        return ()

    def _client_arguments(self, options: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
        """Arguments of the data client beyond project, credentials and client options."""
        return {}

    def __repr__(self) -> str:
        where = f"emulator {self.emulator_host}" if self.emulator_host else "Cloud Bigtable"
        return f"<{type(self).__name__} {self.project}/{self.instance} on {where}>"

    # -- paths -------------------------------------------------------------

    @property
    def _instance_path(self) -> str:
        return f"projects/{self.project}/instances/{self.instance}"

    def _table_path(self, name: str) -> str:
        return f"{self._instance_path}/tables/{name}"

    def _target(self, name: str) -> _Target:
        """The data-call target of table ``name``, made once per name.

        The first time, the table is also registered with the data client,
        which then keeps its channel warm for the instance (in production).
        """
        self._check_open()
        target = self._targets.get(name)
        if target is None:
            with self._lock:
                target = self._targets.get(name)
                if target is None:
                    table = self._data.get_table(self.instance, name,
                                                 app_profile_id=self.app_profile_id)
                    target = _Target(self._table_path(name), table, self.app_profile_id)
                    self._targets[name] = target
        return target

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError(f"{self!r} is closed")


class BigtableBackend(_BigtableBase):
    """Cloud Bigtable, or its emulator, behind the `Backend` protocol.

    Args:
        project: the Google Cloud project id.
        instance: the Bigtable instance id.
        emulator_host: ``"HOST:PORT"`` of a ``cbtemulator``; ``None`` uses
            ``BIGTABLE_EMULATOR_HOST`` when it is set, else Cloud Bigtable.
        settings: timeouts, retries, credentials, client options and app
            profile (`Settings`); credentials and
            client options are ignored on the emulator.

    Raises:
        BackendError: the clients could not be created (e.g. no credentials).
    """

    features = Features(reverse_scan=True, immediate_gc=False, persistent=False,
                        concurrent_calls=True)
    _data_client_class = private.DataClient
    _rpc_class = DataRpc
    _insecure_channel = staticmethod(grpc.insecure_channel)

    def _channel_options(self) -> tuple[tuple[str, Any], ...]:
        # Hand each streamed message over on the calling thread: ~4x faster reads.
        return ((private.single_threaded_unary_stream(), 1),)

    def _client_arguments(self, options: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
        return {"channel_options": options}

    # -- tables ------------------------------------------------------------

    def create_table(self, spec: TableSpec) -> None:
        """Create the table with its families, or add missing families to it.

        Idempotent: an existing table keeps its data; families that exist get
        the GC rule of ``spec``; families not in ``spec`` are left alone.

        Raises:
            BackendError: the admin API refused.
        """
        self._check_open()
        try:
            self._admin.create_table(spec)
        finally:
            self._families.pop(spec.name, None)

    def delete_table(self, name: str) -> None:
        """Delete a table and its data. A missing table is not an error.

        Raises:
            BackendError: the admin API refused.
        """
        self._check_open()
        self._admin.delete_table(name)
        with self._lock:
            target = self._targets.pop(name, None)
            self._families.pop(name, None)
        if target is not None:
            target.table.close()

    def delete_family(self, table: str, family: str) -> None:
        """Delete one family of a table and its cells. A missing family is not an error.

        Raises:
            TableNotFoundError: the table does not exist.
            BackendError: the admin API refused.
        """
        self._check_open()
        try:
            self._admin.delete_family(table, family)
        finally:
            with self._lock:
                self._families.pop(table, None)

    def list_tables(self) -> list[str]:
        """The names of all tables of the instance, sorted.

        Raises:
            BackendError: the admin API refused.
        """
        self._check_open()
        return self._admin.list_tables()

    def describe_table(self, name: str) -> TableSpec:
        """The table's families (sorted by name) and their GC rules.

        Raises:
            TableNotFoundError: the table does not exist.
            BackendError: the admin API refused.
        """
        self._check_open()
        return self._admin.describe_table(name)

    # -- writes ------------------------------------------------------------

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        """Apply each entry atomically to its row; entries are independent.

        Entries go out as raw ``MutateRows`` requests of at most 100,000
        mutations and about 20 MiB. Entries that fail with a transient status
        (or get none) are sent again with back-off: every write carries
        explicit timestamps, so a retry cannot apply anything twice. An
        entry that adds (``AddToCell``) is never sent again: in doubt, it is
        ``UNKNOWN``. An entry
        with no mutation is refused, as Cloud Bigtable refuses it
        (``INVALID_ARGUMENT``); one whose mutations are all empty deletions
        is applied trivially.

        Returns:
            One outcome per entry, in order: ``APPLIED``; ``FAILED`` when the
            error proves the entry was not applied (bad request, unknown family,
            negative timestamp, empty or oversized row key, no mutation,
            permission...);
            ``UNKNOWN`` when it may have been (timeout, lost connection,
            internal error).

        Raises:
            TableNotFoundError: the table does not exist (nothing was applied).
            BackendError: the backend is closed.
        """
        steps = MutateDriven(self, table, entries)
        while steps.send is not None:
            steps.answer(steps.send(steps.request, steps.metadata))
        return steps.outcomes

    @staticmethod
    def _classify(error: BaseException) -> MutationStatus:
        """FAILED if ``error`` proves the entry was not applied, else UNKNOWN."""
        return classify(error)

    # -- reads -------------------------------------------------------------

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        """Stream the rows of ``request`` in key order (descending if reversed).

        Rows are merged from the response chunks as they arrive; cells come
        ordered by family, qualifier, then timestamp newest first. A stream
        that breaks with a transient error is resumed after the last row
        returned, so no row is lost or returned twice and the limit holds.
        The request is sent before this returns: reads started one after the
        other stream side by side (see ``Backend.read_rows``).

        Raises:
            TableNotFoundError: the table does not exist (when iterated).
            BackendError: the read failed.
        """
        target = self._target(request.table)
        pb, clip = read_steps(self, target, request)
        try:
            rows = self._rpc.read_rows(pb, target.read_metadata)  # sent now: see DataRpc
        except core_exceptions.GoogleAPIError as exc:
            raise read_error(exc, request) from exc
        return self._stream_rows(rows, clip, request)

    def read_batches(self, request: ReadRequest) -> Iterator[CellBatch]:
        """`read_rows()` in columns: the same rows, as `CellBatch` es of the chunk
        merger (`tsmodel.backends._chunks.merge_batches()`), of 256 rows or
        more but the last, for a columnar decoder to take without `Row`
        objects. A request with a part applied here (`read_rows()`'s clip)
        comes in batches of its rows, clipped.

        Raises:
            TableNotFoundError: the table does not exist (when iterated).
            BackendError: the read failed.
        """
        target = self._target(request.table)
        pb, clip = read_steps(self, target, request)
        if clip is not None:
            return batches_of(self.read_rows(request))
        try:
            batches = self._rpc.read_rows(pb, target.read_metadata, batches=True)
        except core_exceptions.GoogleAPIError as exc:
            raise read_error(exc, request) from exc
        return self._stream_batches(batches, request)

    def _stream_batches(self, batches: Iterator[CellBatch],
                        request: ReadRequest) -> Iterator[CellBatch]:
        try:
            yield from batches
        except core_exceptions.GoogleAPIError as exc:
            raise read_error(exc, request) from exc

    def _stream_rows(self, rows: Iterator[Row], clip: _Clip | None,
                     request: ReadRequest) -> Iterator[Row]:
        try:
            if clip is None:
                yield from rows  # delegated: no loop of this generator's per row
                return
            for row in rows:
                if (kept := clip.keep(row)) is not None:
                    yield kept
                    if clip.done:
                        return
        except core_exceptions.GoogleAPIError as exc:
            raise read_error(exc, request) from exc

    def sample_row_keys(self, table: str) -> list[KeySample]:
        """Cloud Bigtable's ``SampleRowKeys``: keys that cut the table into runs of about
        equal size, each with the bytes before it (``b""``: the end of the table).

        Sent as a raw data call (`._bigtable_rpc.DataRpc.sample_row_keys()`),
        retried whole on transient errors. The emulator samples about one
        row in a hundred, at random, and the last row.

        Raises:
            TableNotFoundError: the table does not exist.
            BackendError: the call failed.
        """
        target = self._target(table)
        request = wire.sample_request(target.name, self.app_profile_id)
        try:
            found = self._rpc.sample_row_keys(request, target.metadata)
        except core_exceptions.GoogleAPIError as exc:
            raise _wrap(exc, f"sample the row keys of table {table!r}", table=table) from exc
        return [KeySample(bytes(key), int(offset)) for key, offset in found]

    # -- readiness ---------------------------------------------------------

    def check_reachable(self, timeout: float) -> None:
        """Return when the emulator answers; raise at once when nothing listens there.

        On the emulator, ``HOST:PORT`` is tried with a plain socket, then asked
        for its tables once, without retries, within what is left of
        ``timeout``: otherwise a stopped emulator fails the first request only
        after the client's minute of retries. On Cloud Bigtable nothing is
        checked: gRPC may reach Google's endpoint through a proxy a socket
        would not use, and the client's retries are what production needs.

        Args:
            timeout: seconds to wait for the connection and the answer.

        Raises:
            BackendUnreachableError: nothing listens at the emulator's address
                (``listening`` false), or it did not answer within ``timeout``
                (``listening`` true); the message names ``HOST:PORT``.
            BackendError: the backend is closed.
        """
        self._check_open()
        if self.emulator_host is None:
            return
        deadline = time.monotonic() + timeout
        _check_listening(self.emulator_host, timeout)
        self._admin.check_answers(timeout, max(deadline - time.monotonic(), 0.001))

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Close the data client and the admin transport. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            targets, self._targets = list(self._targets.values()), {}
        for target in targets:
            target.table.close()
        self._data.close()
        self._admin.close()
        if self._emulator_channel is not None:
            self._emulator_channel.close()

    def __enter__(self) -> BigtableBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_APPLIED = MutationOutcome(MutationStatus.APPLIED)


# -- errors ----------------------------------------------------------------

# -- the data path, without I/O: both backends (sync and async) drive these ----------

#: What `mutate_steps()` hands its driver: a ``MutateRowsRequest`` to send;
#: what it gets back: the failures of its entries (``DataRpc.mutate_rows``).
MutateSteps = Generator[Any, "dict[int, Exception]", "list[MutationOutcome]"]
_Steps = Generator[Any, "dict[int, Exception]", _T]


class MutateDriven:
    """`mutate_steps()` as a driver sees it: the next call to make and its
    arguments, until the outcomes are known.

    The sync backend sends each ``request`` with ``send(request, metadata)``,
    the async one awaits it; each hands the answer to `answer()`, until
    ``send`` is ``None`` and ``outcomes`` holds one outcome per entry.

    Raises:
        TableNotFoundError: the table does not exist (nothing was applied).
    """

    def __init__(self, backend: Any, table: str, entries: Sequence[RowMutation]) -> None:
        target = backend._target(table)
        self._rpc, self.metadata = backend._rpc, target.metadata
        self._steps = mutate_steps(backend, target, table, entries)
        self.send: Callable[..., Any] | None = None
        self.request: Any = None
        self.outcomes: list[MutationOutcome] = []
        self._take(lambda: next(self._steps))

    def answer(self, failures: dict[int, Exception]) -> None:
        """Hand over the answer to ``request`` (its failures by entry)."""
        self._take(lambda: self._steps.send(failures))

    def _take(self, step: Callable[[], Any]) -> None:
        try:
            self.request = step()
        except StopIteration as done:
            self.send, self.outcomes = None, done.value
            return
        self.send = self._rpc.check_and_mutate_rows if isinstance(self.request, list) \
            else self._rpc.mutate_rows


def mutate_steps(backend: Any, target: _Target, table: str,
                 entries: Sequence[RowMutation]) -> MutateSteps:
    """The ``MutateRows`` requests of one ``mutate_rows``, and its outcomes.

    A generator: it yields each request (the emulator's family check first,
    when one is needed), receives that request's failures, and returns one
    outcome per entry. Entries with ``unless_newer`` come last, as one list
    of ``CheckAndMutateRow`` requests sent side by side.
    `MutateDriven` picks the call of each request; `BigtableBackend.mutate_rows()`
    makes them with blocking calls, the async backend with awaited ones: the
    batching, refusals, classification and choice of call are written once.

    Args:
        backend: the backend (its ``emulator_host``, ``app_profile_id`` and
            cache of known families).

    Raises:
        TableNotFoundError: the table does not exist (nothing was applied).
    """
    outcomes = [_APPLIED] * len(entries)

    def refuse(index: int, error: Exception) -> None:
        outcomes[index] = MutationOutcome(MutationStatus.FAILED, error)

    sendable: Sequence[int] = range(len(entries))
    if backend.emulator_host is not None:
        refused = yield from _emulator_refusals(backend, target, table, entries)
        if refused:
            for index, error in refused.items():
                refuse(index, error)
            sendable = [i for i in sendable if i not in refused]
    # A batch of declared rows holds no conditional entry: no row object is made.
    declared = isinstance(entries, DeclaredRows)
    plain = list(sendable) if declared else [i for i in sendable
                                             if entries[i].unless_newer is None]
    requests = wire.entry_requests(target.name, backend.app_profile_id, entries, plain,
                                   MAX_MUTATIONS_PER_REQUEST, MAX_BYTES_PER_REQUEST, refuse)
    number = -1
    for number, (request, positions) in enumerate(requests):
        failures = yield request
        if number == 0 and _table_missing(failures, len(positions)):
            raise TableNotFoundError(f"table {table!r} not found") from failures[0]
        for position, failure in failures.items():
            outcomes[positions[position]] = MutationOutcome(classify(failure), failure)
    conditional, positions = [], []
    for index in () if declared else sendable:
        if entries[index].unless_newer is not None:
            try:
                check = wire.conditional_request(target.name, backend.app_profile_id,
                                                 entries[index])
            except (TypeError, ValueError, OverflowError) as exc:
                refuse(index, exc)
                continue
            if check is not None:
                conditional.append(check)
                positions.append(index)
    if conditional:
        failures = yield conditional
        if number < 0 and _table_missing(failures, len(positions)):
            raise TableNotFoundError(f"table {table!r} not found") from failures[0]
        for position, failure in failures.items():
            outcomes[positions[position]] = MutationOutcome(classify(failure), failure)
    return outcomes


def _emulator_refusals(backend: Any, target: _Target, table: str,
                       entries: Sequence[RowMutation]) -> _Steps[dict[int, Exception]]:
    """Entries the emulator would apply in part, by index, with the reason.

    Unlike Cloud Bigtable, the emulator applies the mutations of an entry
    up to the first bad one (unknown family, timestamp not in whole
    milliseconds), breaking per-row atomicity. Such entries are refused
    here and never sent. Families are checked with data calls only
    (`_absent_families()`).

    Raises:
        TableNotFoundError: the table does not exist.
    """
    refused: dict[int, Exception] = {}
    families: set[str | None] = set()
    add = families.add
    declarations: set[DeclaredCells] = set()
    each: Sequence[RowMutation] = entries
    if isinstance(entries, DeclaredRows):  # one declaration: its families, whole ms
        families.update(family for family, _ in entries.declared.columns)
        each = ()
    for index, entry in enumerate(each):
        mutations = entry.mutations
        declared = entry.declared
        if declared is not None:  # its cells: one timestamp, the declared families
            stamp = mutations[0].timestamp  # type: ignore[union-attr]
            if stamp % 1000:
                refused[index] = BackendError(
                    f"timestamp {stamp} is not a whole number of milliseconds")
            elif declared not in declarations:
                declarations.add(declared)
                families.update(family for family, _ in declared.columns)
            continue
        bad = None
        for mutation in mutations:
            if (type(mutation) is SetCell or isinstance(mutation, AddToCell)) and \
                    mutation.timestamp % 1000:
                bad = mutation.timestamp
        if bad is not None:
            refused[index] = BackendError(f"timestamp {bad} is not a whole number of milliseconds")
            continue
        for mutation in mutations:  # no set per entry: one for the call
            add(mutation.family if type(mutation) is SetCell else
                getattr(mutation, "family", None))  # DeleteRow has none
    families.discard(None)
    absent = yield from _absent_families(backend, target, table,
                                         cast("set[str]", families))
    if absent:  # rare: only then is each entry's own families' worth working out
        for index, entry in enumerate(entries):
            if index not in refused:
                named: set[str] = {getattr(m, "family", "") for m in entry.mutations}
                missing = sorted(named & absent.keys())
                if missing:
                    refused[index] = absent[missing[0]]
    return refused


def _absent_families(backend: Any, target: _Target, table: str,
                     families: set[str]) -> _Steps[dict[str, Exception]]:
    """The families of ``families`` the table lacks (or that could not be checked), with why.

    Families not known to exist yet are checked with one ``MutateRows``
    call that changes nothing (`_bigtable_wire.family_check_request()`);
    those found are remembered in ``backend._families``. Only the
    emulator's own refusal (``INTERNAL``, "unknown family") says a family is
    missing; any other failure of a check (a transient ``INTERNAL`` or
    ``ABORTED``, a call that broke) is checked again, up to
    `FAMILY_CHECK_ATTEMPTS` times (the check changes nothing: it may be
    sent again), then reported as a check that could not be made.

    Raises:
        TableNotFoundError: the table does not exist.
    """
    known = backend._families.get(table, frozenset())
    pending = sorted(families - known)
    found: set[str] = set()
    absent: dict[str, Exception] = {}
    attempt = 0
    while pending:
        attempt += 1
        failures = yield wire.family_check_request(target.name, backend.app_profile_id, pending)
        if _table_missing(failures, len(pending)):
            raise TableNotFoundError(f"table {table!r} not found") from failures[0]
        again = []
        for position, family in enumerate(pending):
            error = failures.get(position)
            if error is None:
                found.add(family)
            elif _unknown_family(error):
                absent[family] = BackendError(
                    f"table {table!r} has no column family {family!r} ({error})")
                absent[family].__cause__ = error
            elif attempt < FAMILY_CHECK_ATTEMPTS:
                again.append(family)
            else:
                absent[family] = BackendError(
                    f"cannot check that table {table!r} has column family {family!r} "
                    f"({attempt} attempts; the last: {error}); the rows writing to it "
                    "were not sent")
                absent[family].__cause__ = error
        pending = again
    backend._families[table] = known.union(found)
    return absent


#: Attempts at checking a family whose check failed otherwise than by its absence.
FAMILY_CHECK_ATTEMPTS = 3


def _unknown_family(error: BaseException) -> bool:
    """Whether ``error`` is the emulator's refusal of a family the table lacks: an
    entry's ``INTERNAL`` status reading ``unknown family "NAME"``."""
    return (_is_entry_status(error, core_exceptions.InternalServerError)
            and str(getattr(error, "message", "")).startswith("unknown family"))


def read_error(exc: core_exceptions.GoogleAPIError, request: ReadRequest) -> BackendError:
    """The tsmodel error of a failed read: `ReadInterruptedError` when the
    stream broke with a retryable status whose resumes ran out (reading again
    from where it stopped may succeed), else the plain wrapped error."""
    if is_retryable(exc, READ_RETRYABLE):
        return ReadInterruptedError(
            f"read of table {request.table!r} broke off, its resumes spent: {exc}")
    return _wrap(exc, f"read table {request.table!r}", table=request.table)


def classify(error: BaseException) -> MutationStatus:
    """FAILED if ``error`` proves the entry was not applied, else UNKNOWN."""
    if isinstance(error, FailedMutationEntryError) and error.__cause__ is not None:
        return classify(error.__cause__)
    if isinstance(error, RetryExceptionGroup):
        statuses = {classify(sub) for sub in error.exceptions}
        return MutationStatus.FAILED if statuses == {MutationStatus.FAILED} \
            else MutationStatus.UNKNOWN
    if isinstance(error, _NOT_APPLIED_ERRORS):
        return MutationStatus.FAILED
    # Everything else (INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED,
    # UNKNOWN, CANCELLED...) may come after the server applied the entry,
    # on the emulator as on Cloud Bigtable. The emulator's own refusals
    # (unknown family, timestamp not in whole ms) come as INTERNAL too,
    # but tsmodel refuses those entries before sending them.
    return MutationStatus.UNKNOWN


def read_steps(backend: Any, target: _Target,
               request: ReadRequest) -> tuple[Any, _Clip | None]:
    """The ``ReadRowsRequest`` of ``request``, and the clip to apply to the rows it returns.

    A request that selects nothing still reads (nothing): a missing table is
    an error whatever the rows asked for.
    """
    sent, clip = _client_side(request)
    pb = wire.read_request(target.name, backend.app_profile_id, sent)
    if pb is None:  # nothing to read, but a missing table is still an error
        return wire.table_check_request(target.name, backend.app_profile_id), None
    return pb, clip


def _check_listening(address: str, timeout: float) -> None:
    """Raise when nothing accepts a TCP connection at ``address`` (``HOST:PORT``).

    An address of another form is left to the request that follows.
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return
    except OSError as exc:
        raise BackendUnreachableError(
            f"cannot reach the Bigtable emulator at {address}: nothing listens there "
            f"({exc.strerror or exc})", address=address, listening=False,
            timeout=timeout) from exc


def _is_entry_status(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``error`` is of ``kind`` and came from one entry's status, not the call."""
    return isinstance(error, kind) and getattr(error, "response", None) is None


def _table_missing(failures: dict[int, Exception], count: int) -> bool:
    """Whether every entry failed because the call found no table."""
    return count > 0 and len(failures) == count and all(
        isinstance(error, core_exceptions.NotFound)
        and getattr(error, "response", None) is not None
        for error in failures.values())


class _Clip:
    """Cell tests applied to rows as they come, with the request's row limit: a
    qualifier range, given cell timestamps (either ``None``: none)."""

    __slots__ = ("start", "end", "times", "limit", "count")

    def __init__(self, start: bytes | None, end: bytes | None, times: frozenset[int] | None,
                 limit: int | None) -> None:
        self.start, self.end, self.times, self.limit, self.count = start, end, times, limit, 0

    def keep(self, row: Row) -> Row | None:
        """The row with only the cells that pass, or ``None`` when none does."""
        start, end, times = self.start, self.end, self.times
        kept = tuple(cell for cell in row.cells if (start is None or cell.qualifier >= start)
                     and (end is None or cell.qualifier < end)
                     and (times is None or cell.timestamp in times))
        if not kept:
            return None
        self.count += 1
        return Row(row.key, kept)

    @property
    def done(self) -> bool:
        """Whether the row limit is reached."""
        return bool(self.limit) and self.count >= (self.limit or 0)


#: Given cell timestamps (`ReadFilter.timestamps`) in more runs of consecutive
#: milliseconds than this are kept here, of the cells of their span, not by the
#: server: the emulator applies an interleave of N timestamp ranges to a copy of
#: the row each (N times the work per cell; measured: a shuffled save into week
#: buckets at 0.05x the row per event layout's rate with 500 ranges a read, against
#: >0.6x kept here), and Cloud Bigtable refuses a filter over 20 KB.
_SERVER_TIME_RUNS = 16


def _client_side(request: ReadRequest) -> tuple[ReadRequest, _Clip | None]:
    """``request`` without the cell tests applied here, and those tests as a clip.

    Bigtable scopes a column range by family, and listing the table's
    families would take an admin call: a qualifier range without families is
    applied here instead, with the request's row limit (which the server
    would count before it). Given cell timestamps in many runs
    (`_SERVER_TIME_RUNS`) are too, the server sending the cells of their span,
    unless a later step counts cells (versions per column, cells per row, a
    row condition): every other step of the filter commutes with both tests.
    """
    flt = request.filter
    start, end = flt.qualifier_start, flt.qualifier_end
    if flt.families is not None or (start is None and end is None):
        start = end = None
    elif start is not None and end is not None and start >= end:
        return request, None  # selects nothing: the server is not asked for rows
    times = flt.timestamps
    runs = None if times is None or flt.cells_per_column is not None \
        or flt.cells_per_row is not None or flt.conditions else wire.timestamp_runs(times)
    if runs is None or len(runs) <= _SERVER_TIME_RUNS:
        times = None
    if start is None and end is None and times is None:
        return request, None
    changes: dict[str, Any] = {"qualifier_start": None, "qualifier_end": None} \
        if start is not None or end is not None else {}
    if times is not None and runs is not None:
        low, high = runs[0][0], runs[-1][1]
        changes.update(timestamps=None, timestamp_start=low if flt.timestamp_start is None
                       else max(low, flt.timestamp_start),
                       timestamp_end=high if flt.timestamp_end is None
                       else min(high, flt.timestamp_end))
    sent = attrs.evolve(request, limit=None, filter=attrs.evolve(flt, **changes))
    return sent, _Clip(start, end, times, request.limit)


def new_data_client(client_class: Any, project: str, credentials: Credentials | None,
                    emulator_host: str | None, client_options: Any = None,
                    **kwargs: Any) -> Any:
    """A data client (sync or async); the emulator host is only readable from the environment."""
    if client_options is not None:
        kwargs["client_options"] = client_options
    with _ENV_LOCK, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Connecting to Bigtable emulator", RuntimeWarning)
        previous = os.environ.get(_EMULATOR_ENV)
        _set_env(_EMULATOR_ENV, emulator_host)
        try:
            return client_class(project=project, credentials=credentials, **kwargs)
        finally:
            _set_env(_EMULATOR_ENV, previous)


def _set_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


