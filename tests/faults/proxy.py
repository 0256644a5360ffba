"""A fault-injecting gRPC proxy in front of the Cloud Bigtable emulator.

:class:`FaultProxy` listens on a free loopback port and forwards every call
to the emulator as raw bytes: admin calls and the data calls tsmodel does
not make (``MutateRow``, ``ReadModifyWriteRow``, ``SampleRowKeys``,
``PingAndWarm``...) pass through untouched. ``MutateRows``, ``ReadRows``
and ``CheckAndMutateRow`` are parsed (with google-cloud-bigtable's generated
``google.bigtable.v2`` protobufs) only to inject the faults of
:class:`Faults`, drawn from a seeded random generator:

* **MutateRows**: fail the call before forwarding (nothing applied); forward
  it, then fail it or answer bytes that do not parse (all applied, the
  client sees an error); forward it and
  fail it after the first half of the statuses; or fault single entries:
  refuse some with a non-retryable status without forwarding them (truly
  not applied), report an error (``INTERNAL``, ``UNAVAILABLE``...) for others
  the emulator applied, or drop their status (applied, never reported).
* **ReadRows**: fail before forwarding; cut the stream after some responses
  with a retryable status or a reset stream; re-split the rows into
  single-chunk responses with values split in two (as Cloud Bigtable sends
  large rows), optionally cut inside a row; restart a row with
  ``reset_row``; report a key just past a row as scanned, then cut; end
  with a non-retryable error; end "successfully" inside a row (a broken
  server); answer bytes that do not parse.
* **CheckAndMutateRow**: fail the call before forwarding (``UNAVAILABLE``,
  ``DEADLINE_EXCEEDED``, ``INTERNAL``: nothing applied), or forward it and
  then fail it (the same statuses: the emulator applied it) or, with no
  status given (a subclass's fault), answer bytes that do not parse. Every
  call is logged (:attr:`FaultProxy.checks`).
* Any call may be delayed by a few milliseconds.
* **Flow control**: with :attr:`FaultProxy.rate_limit` set, every
  ``MutateRows`` response carries that ``RateLimitInfo`` (as Cloud Bigtable
  sends it to slow batch writers; the emulator never does).

Every ``MutateRows`` call is logged (:attr:`FaultProxy.writes`: when it
came, its table, entries and app profile), and the app profile of every
data call is counted (:attr:`FaultProxy.app_profiles`), from the request's
``app_profile_id`` and from its routing header.

The proxy keeps a ledger of what it sent to the emulator and of what the
emulator said it applied (row keys and cell timestamps of the entries), and
counts every fault it injected by kind (:attr:`FaultProxy.injected`).
It knows nothing of tsmodel.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import grpc
from google.cloud.bigtable_v2.types import bigtable as bigtable_types
from google.rpc import code_pb2

__all__ = ["CheckCall", "Faults", "FaultProxy", "NO_FAULTS", "READ_FATAL_KINDS", "WriteCall"]

MutateRowsRequest: Any = bigtable_types.MutateRowsRequest.pb()
MutateRowsResponse: Any = bigtable_types.MutateRowsResponse.pb()
CheckAndMutateRowRequest: Any = bigtable_types.CheckAndMutateRowRequest.pb()
CheckAndMutateRowResponse: Any = bigtable_types.CheckAndMutateRowResponse.pb()
ReadRowsRequest: Any = bigtable_types.ReadRowsRequest.pb()
ReadRowsResponse: Any = bigtable_types.ReadRowsResponse.pb()
CellChunk: Any = ReadRowsResponse.CellChunk

_SERVICE = "/google.bigtable.v2.Bigtable/"
_MUTATE_ROWS = _SERVICE + "MutateRows"
_READ_ROWS = _SERVICE + "ReadRows"
_CHECK_AND_MUTATE_ROW = _SERVICE + "CheckAndMutateRow"
_UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
#: Headers gRPC sets by itself: not forwarded.
_OWN_HEADERS = ("user-agent", "content-type", "te", "grpc-accept-encoding", "grpc-encoding")

S = grpc.StatusCode
#: Retryable call-level statuses after which nothing (before) or everything (after) applied.
_TRANSIENT = (S.UNAVAILABLE, S.DEADLINE_EXCEEDED)
#: Statuses of a failed CheckAndMutateRow call, before forwarding or after.
_CHECK_ERRORS = (S.UNAVAILABLE, S.DEADLINE_EXCEEDED, S.INTERNAL)
#: Statuses a server may report for an entry it applied (or may have).
_APPLIED_ENTRY_ERRORS = (code_pb2.INTERNAL, code_pb2.UNAVAILABLE, code_pb2.DEADLINE_EXCEEDED,
                         code_pb2.ABORTED)
#: Statuses a server reports for an entry it refused: certainly not applied.
_REFUSED_ENTRY_ERRORS = (code_pb2.INVALID_ARGUMENT, code_pb2.FAILED_PRECONDITION)
#: How a reset connection reads (gRPC's message, which clients retry as UNAVAILABLE).
_RST_STREAM = "Received RST_STREAM with error code 2"
#: A response that is no protobuf message (a length past its end).
_GARBAGE = b"\x0a\xff\xff\xff\xff\x0f"
#: Read faults after which the read must raise (the others must be absorbed).
READ_FATAL_KINDS = ("read.fatal", "read.truncated")


@dataclass(frozen=True)
class Faults:
    """How often each fault happens: probabilities per call (or per entry).

    A call gets at most one call-level fault, picked in the order below.
    """

    write_before: float = 0.0  # fail before forwarding (UNAVAILABLE / DEADLINE_EXCEEDED)
    write_after: float = 0.0  # forward, then fail (transient or INTERNAL) or answer garbage
    write_midway: float = 0.0  # forward, send half of the statuses, then fail
    write_entries: float = 0.0  # fault single entries of the call...
    entry_rate: float = 0.25  # ...this share of them
    entry_refuse: float = 0.3  # of a faulted entry: refused, not forwarded
    entry_drop: float = 0.2  # of a faulted entry: applied, no status (the rest: an error status)
    check_before: float = 0.0  # CheckAndMutateRow: fail before forwarding
    check_after: float = 0.0  # CheckAndMutateRow: forward, then fail (the emulator applied it)
    read_before: float = 0.0  # fail before forwarding (UNAVAILABLE)
    read_cut: float = 0.0  # cut after some responses (UNAVAILABLE / DEADLINE_EXCEEDED / ABORTED)
    read_rst: float = 0.0  # cut after some responses as a reset connection
    read_split: float = 0.0  # re-split into chunks, split values; cut inside a row half the time
    read_reset_row: float = 0.0  # send part of a row, reset it, send it whole
    read_fatal: float = 0.0  # a non-retryable error (or garbage) after some responses
    read_truncated: float = 0.0  # end with OK inside a row (re-split first)
    read_scanned: float = 0.0  # after a row, report a key just past it scanned, then cut
    delay: float = 0.0  # delay the call (any method)
    max_delay: float = 0.003  # seconds


NO_FAULTS = Faults()


@dataclass(frozen=True)
class WriteCall:
    """One ``MutateRows`` call as the proxy received it."""

    time: float  # time.monotonic() on arrival
    table: str
    entries: int
    app_profile_id: str
    #: The rate limit its responses carried: (period in seconds, factor), or None.
    rate_limit: tuple[float, float] | None


@dataclass(frozen=True)
class CheckCall:
    """One ``CheckAndMutateRow`` call as the proxy received it, and what became of it."""

    table: str
    key: bytes
    #: The cell timestamps its mutations (when the predicate matches nothing) write.
    timestamps: frozenset[int]
    #: "before", "after" (a fault injected then) or "none".
    fault: str
    #: The status the client got (``None``: OK).
    code: grpc.StatusCode | None
    #: Whether the predicate matched (mutations skipped); ``None`` if not forwarded.
    matched: bool | None


class _Abort(Exception):
    """End the call with this status (raised inside a handler)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class FaultProxy:
    """A gRPC proxy on a free loopback port that injects :class:`Faults`.

    Args:
        target: the emulator's ``HOST:PORT``.
        seed: seed of the fault draws.
        faults: what to inject, and how often.
        workers: calls served at once.

    Use it as a context manager, or :meth:`start` and :meth:`stop`.
    """

    def __init__(self, target: str, seed: int = 0, faults: Faults = NO_FAULTS, *,
                 workers: int = 8) -> None:
        self.target = target
        self.workers = workers
        self.faults = faults
        self.rng = random.Random(seed)
        #: Faults injected, by kind (``"write.before.UNAVAILABLE"``, ``"entry.refused..."``).
        self.injected: Counter[str] = Counter()
        #: Calls seen, by method name.
        self.calls: Counter[str] = Counter()
        #: What was sent to the emulator: (table, row key) -> cell timestamps written.
        #: A superset of what it applied (a call may time out after applying).
        self.forwarded: dict[tuple[str, bytes], set[int]] = defaultdict(set)
        #: What the emulator said it applied: (table, row key) -> cell timestamps.
        self.applied: dict[tuple[str, bytes], set[int]] = defaultdict(set)
        #: Entries refused without forwarding: (table, row key) -> cell timestamps.
        self.refused: dict[tuple[str, bytes], set[int]] = defaultdict(set)
        #: ReadRows as answered to the client: ``responses`` and ``bytes`` (the
        #: serialized messages), ``values`` (bytes of cell values in their chunks),
        #: ``rows`` (rows committed).
        self.read: Counter[str] = Counter()
        #: Set to (period in seconds, factor), or a function giving it (or None) for
        #: each call: every MutateRows response carries it.
        self.rate_limit: Any = None
        #: Every MutateRows call, in order of arrival.
        self.writes: list[WriteCall] = []
        #: Every CheckAndMutateRow call, in order of arrival.
        self.checks: list[CheckCall] = []
        #: Data calls by (method, app profile of the request, of the routing header).
        self.app_profiles: Counter[tuple[str, str, str]] = Counter()
        self._lock = threading.Lock()
        self._upstream = grpc.insecure_channel(target, options=_UNLIMITED)
        self._server: grpc.Server | None = None
        self.port: int | None = None

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.workers),
                             handlers=[_Handler(self)], options=_UNLIMITED)
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None
        self._upstream.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- draws ----------------------------------------------------------------------

    def _chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p

    def _pick(self, options: tuple[Any, ...]) -> Any:
        return options[self.rng.randrange(len(options))]

    def _count(self, kind: str) -> None:
        self.injected[kind] += 1

    def _maybe_delay(self) -> None:
        with self._lock:
            pause = self.rng.uniform(0, self.faults.max_delay) \
                if self._chance(self.faults.delay) else 0.0
            if pause:
                self._count("delay")
        if pause:
            time.sleep(pause)

    # -- pass-through ---------------------------------------------------------------

    def forward(self, method: str, requests: Iterator[bytes],
                context: grpc.ServicerContext) -> Iterator[bytes]:
        """Any call, untouched: every request message on, every response back."""
        with self._lock:
            self.calls[method.rsplit("/", 1)[-1]] += 1
        self._maybe_delay()
        call = self._upstream.stream_stream(method)
        try:
            yield from call(requests, timeout=context.time_remaining(),
                            metadata=_metadata(context))
        except grpc.RpcError as exc:
            context.abort(exc.code(), exc.details() or "")

    def _upstream_stream(self, method: str, request: bytes,
                         context: grpc.ServicerContext) -> list[bytes]:
        call = self._upstream.unary_stream(method)
        return list(call(request, timeout=context.time_remaining(),
                         metadata=_metadata(context)))

    # -- MutateRows -----------------------------------------------------------------

    def mutate_rows(self, request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        self._maybe_delay()
        arrived = time.monotonic()
        pb = MutateRowsRequest.FromString(request)
        table = pb.table_name.rsplit("/", 1)[-1]
        with self._lock:
            self.calls["MutateRows"] += 1
            limit = self.rate_limit() if callable(self.rate_limit) else self.rate_limit
            self.writes.append(WriteCall(arrived, table, len(pb.entries), pb.app_profile_id,
                                         limit))
            self._profile("MutateRows", pb.app_profile_id, context)
            kind, code = self._write_fault()
            plan = self._entry_plan(len(pb.entries)) if kind == "entries" else None
        if kind == "before":
            raise _Abort(code, "injected before forwarding: nothing was applied")
        if plan is None:
            self._sent(table, pb.entries)
            responses = self._upstream_stream(_MUTATE_ROWS, request, context)
            self._record(table, pb.entries, range(len(pb.entries)), responses)
            if kind == "after" and code is None:
                yield _GARBAGE
                return
            if kind == "after":
                raise _Abort(code, "injected after forwarding: every entry was applied")
            if kind == "midway":
                statuses = [e for r in responses for e in MutateRowsResponse.FromString(r).entries]
                half = MutateRowsResponse()
                half.entries.extend(statuses[:len(statuses) // 2])
                yield half.SerializeToString()
                raise _Abort(code, "injected after forwarding and half the statuses")
            yield from (_limited(r, limit) for r in responses)
            return
        yield from (_limited(r, limit) for r in self._faulty_entries(table, pb, plan, context))

    def _profile(self, method: str, request_profile: str,
                 context: grpc.ServicerContext) -> None:
        """Count a data call's app profile (held by the lock)."""
        header = dict(context.invocation_metadata()).get("x-goog-request-params", "")
        routed = next((unquote(v) for k, _, v in (p.partition("=") for p in
                                                   str(header).split("&"))
                       if k == "app_profile_id"), "")
        self.app_profiles[(method, request_profile, routed)] += 1

    def _write_fault(self) -> tuple[str, grpc.StatusCode | None]:
        f = self.faults
        if self._chance(f.write_before):
            code = self._pick(_TRANSIENT)
            self._count(f"write.before.{code.name}")
            return "before", code
        if self._chance(f.write_after):
            code = self._pick((*_TRANSIENT, S.INTERNAL, None))
            self._count(f"write.after.{code.name if code else 'garbage'}")
            return "after", code
        if self._chance(f.write_midway):
            code = self._pick((*_TRANSIENT, S.INTERNAL))
            self._count(f"write.midway.{code.name}")
            return "midway", code
        if self._chance(f.write_entries):
            return "entries", None
        return "none", None

    def _entry_plan(self, count: int) -> list[tuple[str, int]]:
        """Per entry: ("ok"|"refuse"|"error"|"drop", status code)."""
        f = self.faults
        plan = []
        for _ in range(count):
            if not self._chance(f.entry_rate):
                plan.append(("ok", 0))
                continue
            draw = self.rng.random()
            if draw < f.entry_refuse:
                code = self._pick(_REFUSED_ENTRY_ERRORS)
                plan.append(("refuse", code))
                self._count(f"entry.refused.{code_pb2.Code.Name(code)}")
            elif draw < f.entry_refuse + f.entry_drop:
                plan.append(("drop", 0))
                self._count("entry.applied.no_status")
            else:
                code = self._pick(_APPLIED_ENTRY_ERRORS)
                plan.append(("error", code))
                self._count(f"entry.applied.{code_pb2.Code.Name(code)}")
        return plan

    def _faulty_entries(self, table: str, pb: Any, plan: list[tuple[str, int]],
                        context: grpc.ServicerContext) -> Iterator[bytes]:
        sent = [i for i, (what, _) in enumerate(plan) if what != "refuse"]
        statuses: dict[int, Any] = {}
        if sent:
            subset = MutateRowsRequest(table_name=pb.table_name,
                                       app_profile_id=pb.app_profile_id)
            subset.entries.extend(pb.entries[i] for i in sent)
            self._sent(table, subset.entries)
            responses = self._upstream_stream(_MUTATE_ROWS, subset.SerializeToString(), context)
            self._record(table, pb.entries, sent, responses)
            for r in responses:
                for entry in MutateRowsResponse.FromString(r).entries:
                    statuses[sent[entry.index]] = entry.status
        out = MutateRowsResponse()
        for index, (what, code) in enumerate(plan):
            if what == "drop":
                continue
            entry = out.entries.add(index=index)
            if what == "refuse":
                with self._lock:
                    self.refused[(table, pb.entries[index].row_key)].update(
                        _timestamps(pb.entries[index]))
                entry.status.code, entry.status.message = code, "injected: entry refused"
            elif what == "error" and statuses[index].code == 0:
                entry.status.code, entry.status.message = code, "injected after applying"
            else:
                entry.status.CopyFrom(statuses[index])
        yield out.SerializeToString()

    def _sent(self, table: str, entries: Any) -> None:
        with self._lock:
            for entry in entries:
                self.forwarded[(table, entry.row_key)].update(_timestamps(entry))

    def _record(self, table: str, entries: Any, positions: Any, responses: list[bytes]) -> None:
        """Note the entries (``entries[positions[i]]``) the emulator accepted."""
        positions = list(positions)
        with self._lock:
            for r in responses:
                for status in MutateRowsResponse.FromString(r).entries:
                    if status.status.code == 0:
                        entry = entries[positions[status.index]]
                        self.applied[(table, entry.row_key)].update(_timestamps(entry))

    # -- CheckAndMutateRow -----------------------------------------------------------

    def check_and_mutate_row(self, request: bytes,
                             context: grpc.ServicerContext) -> Iterator[bytes]:
        self._maybe_delay()
        pb = CheckAndMutateRowRequest.FromString(request)
        table = pb.table_name.rsplit("/", 1)[-1]
        stamps = frozenset(m.set_cell.timestamp_micros for m in pb.false_mutations
                           if m.HasField("set_cell"))
        with self._lock:
            self.calls["CheckAndMutateRow"] += 1
            self._profile("CheckAndMutateRow", pb.app_profile_id, context)
            kind, code = self._check_fault()
        if kind == "before":
            with self._lock:
                self.checks.append(CheckCall(table, pb.row_key, stamps, kind, code, None))
            raise _Abort(code, "injected before forwarding: nothing was applied")
        with self._lock:
            self.forwarded[(table, pb.row_key)].update(stamps)
        call = self._upstream.unary_unary(_CHECK_AND_MUTATE_ROW)
        raw = call(request, timeout=context.time_remaining(), metadata=_metadata(context))
        matched = CheckAndMutateRowResponse.FromString(raw).predicate_matched
        with self._lock:
            if not matched:
                self.applied[(table, pb.row_key)].update(stamps)
            self.checks.append(CheckCall(table, pb.row_key, stamps, kind, code, matched))
        if kind == "after" and code is None:
            yield _GARBAGE  # applied; the answer does not parse
            return
        if kind == "after":
            raise _Abort(code, "injected after forwarding: the emulator applied it")
        yield raw

    def _check_fault(self) -> tuple[str, grpc.StatusCode | None]:
        """The fault of one CheckAndMutateRow call (held by the lock)."""
        for kind in ("before", "after"):
            if self._chance(getattr(self.faults, f"check_{kind}")):
                code = self._pick(_CHECK_ERRORS)
                self._count(f"check.{kind}.{code.name}")
                return kind, code
        return "none", None

    # -- ReadRows -------------------------------------------------------------------

    def read_rows(self, request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        self._maybe_delay()
        with self._lock:
            self.calls["ReadRows"] += 1
            self._profile("ReadRows", ReadRowsRequest.FromString(request).app_profile_id,
                          context)
            kind = self._read_fault()
        if kind == "before":
            raise _Abort(S.UNAVAILABLE, "injected before forwarding")
        responses = self._upstream_stream(_READ_ROWS, request, context)
        with self._lock:
            if kind == "scanned" and not ReadRowsRequest.FromString(request).reversed:
                plan = self._scanned_plan(responses)
            else:
                plan = self._read_plan(kind, responses)
        self._count_read(plan.messages)
        yield from plan.messages
        if plan.code is not None:
            raise _Abort(plan.code, plan.details)

    def _count_read(self, messages: list[bytes]) -> None:
        values = rows = 0
        for raw in messages:
            try:
                chunks = ReadRowsResponse.FromString(raw).chunks
            except Exception:  # noqa: BLE001 - injected garbage: no chunk
                continue
            values += sum(len(chunk.value) for chunk in chunks)
            rows += sum(1 for chunk in chunks if chunk.commit_row)
        with self._lock:
            self.read.update(responses=len(messages), values=values, rows=rows,
                             bytes=sum(map(len, messages)))

    def _read_fault(self) -> str:
        f = self.faults
        for kind in ("before", "cut", "rst", "split", "reset_row", "fatal", "truncated",
                     "scanned"):
            if self._chance(getattr(f, f"read_{kind}")):
                if kind == "before":
                    self._count("read.before.UNAVAILABLE")
                return kind
        return "none"

    def _scanned_plan(self, responses: list[bytes]) -> _ReadPlan:
        """After a row, a last-scanned-row response for the key just past it, then a cut.

        No row lies between a row and its key followed by a zero byte other
        than that key itself, the next row the server would send if it matched.
        """
        ends = [i + 1 for i, raw in enumerate(responses)
                if any(c.commit_row for c in ReadRowsResponse.FromString(raw).chunks)]
        if not ends:
            return _ReadPlan(responses)
        at = self._pick(tuple(ends))
        last = next(c.row_key for raw in reversed(responses[:at])
                    for c in reversed(ReadRowsResponse.FromString(raw).chunks) if c.row_key)
        scanned = last + b"\x00"
        if at < len(responses) and _first_key(responses[at]) == scanned:
            return _ReadPlan(responses)
        self._count("read.last_scanned_then_cut")
        marker = ReadRowsResponse(last_scanned_row_key=scanned).SerializeToString()
        return _ReadPlan([*responses[:at], marker], S.UNAVAILABLE,
                         "injected: cut after a last-scanned-row response")

    def _read_plan(self, kind: str, responses: list[bytes]) -> _ReadPlan:
        if kind == "none":
            return _ReadPlan(responses)
        if kind in ("cut", "rst", "fatal"):
            at = self.rng.randint(0, len(responses))
            if kind == "cut":
                code = self._pick((*_TRANSIENT, S.ABORTED))
                self._count(f"read.cut.{code.name}")
                return _ReadPlan(responses[:at], code, "injected: stream cut")
            if kind == "rst":
                self._count("read.rst_stream")
                return _ReadPlan(responses[:at], S.INTERNAL, _RST_STREAM)
            code = self._pick((S.INTERNAL, S.PERMISSION_DENIED, None))
            self._count(f"read.fatal.{code.name if code else 'garbage'}")
            if code is None:
                return _ReadPlan([*responses[:at], _GARBAGE])
            return _ReadPlan(responses[:at], code, "injected: non-retryable")
        pieces, inside = _split(responses)
        if kind == "reset_row":
            self._count("read.reset_row")
            return _ReadPlan(_with_reset(pieces, inside, self.rng))
        mid_row = [i for i, flag in enumerate(inside) if flag]
        if kind == "truncated":
            if not mid_row:
                return _ReadPlan(pieces)  # no row to end inside of
            self._count("read.truncated")
            return _ReadPlan(pieces[:self._pick(tuple(mid_row))])
        if mid_row and self.rng.random() < 0.5:
            self._count("read.split.cut_mid_row")
            return _ReadPlan(pieces[:self._pick(tuple(mid_row))], S.UNAVAILABLE,
                             "injected: stream cut inside a row")
        self._count("read.split")
        return _ReadPlan(pieces)


@dataclass
class _ReadPlan:
    messages: list[bytes]
    code: grpc.StatusCode | None = None
    details: str = ""


def _first_key(raw: bytes) -> bytes | None:
    chunks = ReadRowsResponse.FromString(raw).chunks
    return chunks[0].row_key if chunks else None


def _split(responses: list[bytes]) -> tuple[list[bytes], list[bool]]:
    """Every chunk in its own response, values of two bytes or more split in two.

    Returns the responses, and for each position ``i`` whether a row is open
    after the first ``i`` responses.
    """
    pieces: list[bytes] = []
    inside = [False]
    open_row = False
    for raw in responses:
        response = ReadRowsResponse.FromString(raw)
        if not response.chunks:
            pieces.append(raw)  # e.g. a last-scanned-row response
            inside.append(open_row)
            continue
        for chunk in response.chunks:
            for part in _split_chunk(chunk):
                pieces.append(ReadRowsResponse(chunks=[part]).SerializeToString())
                open_row = not (part.commit_row or part.reset_row)
                inside.append(open_row)
    return pieces, inside


def _split_chunk(chunk: Any) -> list[Any]:
    if chunk.value_size or len(chunk.value) < 2:
        return [chunk]
    half = len(chunk.value) // 2
    first = CellChunk()
    first.CopyFrom(chunk)
    first.value, first.value_size, first.commit_row = chunk.value[:half], len(chunk.value), False
    return [first, CellChunk(value=chunk.value[half:], commit_row=chunk.commit_row)]


def _with_reset(pieces: list[bytes], inside: list[bool], rng: random.Random) -> list[bytes]:
    """``pieces`` with one row sent in part, reset, then sent whole."""
    starts = [i for i in range(len(pieces)) if not inside[i]]
    if not pieces or not starts:
        return pieces
    start = rng.choice(starts)
    end = next((i for i in range(start + 1, len(inside)) if not inside[i]), len(pieces))
    half = max(1, (end - start) // 2)
    partial = [ReadRowsResponse.FromString(p) for p in pieces[start:start + half]]
    for p in partial:
        for chunk in p.chunks:
            chunk.commit_row = False
    if not any(p.chunks for p in partial):
        return pieces
    reset = ReadRowsResponse(chunks=[CellChunk(reset_row=True)]).SerializeToString()
    return [*pieces[:start], *(p.SerializeToString() for p in partial), reset, *pieces[start:]]


def _limited(raw: bytes, limit: tuple[float, float] | None) -> bytes:
    """A MutateRows response with ``limit`` as its RateLimitInfo (as it is without one)."""
    if limit is None:
        return raw
    response = MutateRowsResponse.FromString(raw)
    period, factor = limit
    response.rate_limit_info.period.FromNanoseconds(round(period * 1e9))
    response.rate_limit_info.factor = factor
    out: bytes = response.SerializeToString()
    return out


def _timestamps(entry: Any) -> set[int]:
    return {m.set_cell.timestamp_micros for m in entry.mutations if m.HasField("set_cell")}


def _metadata(context: grpc.ServicerContext) -> list[tuple[str, str | bytes]]:
    return [(k, v) for k, v in context.invocation_metadata()
            if not k.startswith(":") and k not in _OWN_HEADERS]


class _Handler(grpc.GenericRpcHandler):
    """Every method: MutateRows and ReadRows with faults, the rest forwarded as they are."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = details.method
        if method == _MUTATE_ROWS:
            return grpc.unary_stream_rpc_method_handler(self._guard(self.proxy.mutate_rows))
        if method == _READ_ROWS:
            return grpc.unary_stream_rpc_method_handler(self._guard(self.proxy.read_rows))
        if method == _CHECK_AND_MUTATE_ROW:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(self._guard(self.proxy.check_and_mutate_row)))
        proxy = self.proxy

        def forward(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
            return proxy.forward(method, requests, context)

        # Unary or streaming, every call is a stream of messages on the wire.
        return grpc.stream_stream_rpc_method_handler(forward)

    @staticmethod
    def _guard(handler: Any) -> Any:
        def run(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            try:
                yield from handler(request, context)
            except _Abort as abort:
                context.abort(abort.code, abort.details)
            except grpc.RpcError as exc:  # the emulator's own error
                context.abort(exc.code(), exc.details() or "")
        return run

    @staticmethod
    def _unary(handler: Any) -> Any:
        """A unary-unary handler of a guarded handler's one response."""
        def run(request: bytes, context: grpc.ServicerContext) -> bytes:
            for response in handler(request, context):
                return bytes(response)
            return b""
        return run
