"""The Bigtable backend's two data RPCs, sent as raw protobuf on the data client's channel.

``MutateRows``, ``ReadRows`` and ``SampleRowKeys`` go straight to the gRPC channel that
google-cloud-bigtable's data client built (so its credentials, endpoint,
channel refresh and warm-up all apply), with the metadata Cloud Bigtable
needs: the ``x-goog-request-params`` routing header (table name, app
profile), the client's ``x-goog-api-client`` header and the
``bigtable-features`` header. What the client's operation classes do around
those calls is done here too:

* MutateRows: entries that fail with a retryable status (or get none) are
  sent again with exponential back-off until the operation deadline (or the
  most attempts); every
  entry ends with its own error list, like ``bulk_mutate_rows`` reports.
  Retrying is safe because tsmodel writes explicit timestamps. A response
  that carries ``RateLimitInfo`` (Cloud Bigtable's flow control) is noted
  into the write's `RateLimitNote` (`tsmodel._observe.RATE_LIMITS`):
  the executor paces the writes that follow (`tsmodel.plan.pacing`).
* ReadRows: a stream that breaks with a retryable error is re-requested from
  the last row returned (or reported scanned), with the row limit reduced by
  the rows already returned; rows are never returned twice. The deadline
  counts time without progress, so a long read is never cut short.
* SampleRowKeys: a call that fails with a retryable error is made again
  whole (it changes nothing), with back-off, until the operation deadline.

The timeouts, deadlines and back-off come from the connection's
`Settings`, as one `RetryPolicy` per kind
of call. Each retry is logged at INFO on ``tsmodel.bigtable`` with its
cause and attempt number, and a call whose retries run out at WARNING.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

import attrs
import grpc
from google.api_core import exceptions as core_exceptions
from google.api_core.retry import exponential_sleep_generator
from google.cloud.bigtable.data.exceptions import RetryExceptionGroup
from google.protobuf.message import DecodeError

from tsmodel._observe import (
    RATE_LIMITS,
    RETRIES,
    RETRY_LOG,
    RateLimit,
    RateLimitNote,
    RetryCount,
)
from tsmodel.backends import _bigtable_wire as wire
from tsmodel.backends._chunks import ReadProgress, merge_batches, merge_rows
from tsmodel.settings import DEFAULT_SETTINGS, Settings

__all__ = ["DataRpc", "AsyncDataRpc", "RetryPolicy", "Policies", "is_retryable",
           "MUTATE_RETRYABLE", "READ_RETRYABLE", "rate_limit"]

_MUTATE_ROWS = "/google.bigtable.v2.Bigtable/MutateRows"
_READ_ROWS = "/google.bigtable.v2.Bigtable/ReadRows"
_SAMPLE_ROW_KEYS = "/google.bigtable.v2.Bigtable/SampleRowKeys"
_CHECK_AND_MUTATE_ROW = "/google.bigtable.v2.Bigtable/CheckAndMutateRow"

_T = TypeVar("_T")

MUTATE_RETRYABLE: tuple[type[Exception], ...] = (
    core_exceptions.DeadlineExceeded, core_exceptions.ServiceUnavailable)
READ_RETRYABLE: tuple[type[Exception], ...] = (*MUTATE_RETRYABLE, core_exceptions.Aborted)
#: INTERNAL errors that are really a reset connection; retried as UNAVAILABLE.
_RESET_MESSAGES = ("rst_stream", "rst stream", "received unexpected eos on data frame from server")


class MissingEntryStatus(core_exceptions.Unknown):
    """The MutateRows stream ended without a status for this entry: it may be applied."""

    def __init__(self, message: str) -> None:
        super().__init__(message)  # type: ignore[no-untyped-call]


_from_grpc_status: Any = core_exceptions.from_grpc_status
_from_grpc_error: Any = core_exceptions.from_grpc_error
_sleep_generator: Any = exponential_sleep_generator


@attrs.frozen
class RetryPolicy:
    """How one kind of call is retried: timeouts, deadline, attempts and back-off.

    Attributes:
        attempt_timeout: seconds one call may take.
        operation_timeout: seconds the operation may go on retrying (a
            read's: without progress).
        attempts: the most calls (a read's: without progress); ``None``: no limit.
        backoff: the first wait, the longest wait and the growth of waits.
    """

    attempt_timeout: float
    operation_timeout: float
    attempts: int | None
    backoff: tuple[float, float, float]

    def delays(self) -> Iterator[float]:
        """The jittered exponential waits between attempts (google.api_core's)."""
        delays: Iterator[float] = _sleep_generator(*self.backoff)
        return delays


@attrs.frozen
class Policies:
    """The retry policies of a backend's two data calls."""

    read: RetryPolicy
    mutate: RetryPolicy

    @classmethod
    def of(cls, settings: Settings) -> Policies:
        """The policies the settings describe."""
        backoff = (settings.backoff_initial, settings.backoff_maximum,
                   settings.backoff_multiplier)
        return cls(RetryPolicy(settings.read_attempt_timeout, settings.read_operation_timeout,
                               settings.retry_attempts, backoff),
                   RetryPolicy(settings.mutate_attempt_timeout,
                               settings.mutate_operation_timeout,
                               settings.retry_attempts, backoff))


DEFAULT_POLICIES = Policies.of(DEFAULT_SETTINGS)


def is_retryable(error: BaseException, kinds: tuple[type[Exception], ...]) -> bool:
    """Whether ``error`` is worth another attempt (``kinds``, or a reset stream)."""
    if isinstance(error, (*kinds, MissingEntryStatus)):
        return True
    return isinstance(error, core_exceptions.InternalServerError) and any(
        text in str(error.message).lower() for text in _RESET_MESSAGES)


class _MutateAttempt:
    """One MutateRows call's bookkeeping: which entries reported, which to retry."""

    __slots__ = ("request", "timeout", "errors", "unreported", "retry", "cause", "note", "size")

    def __init__(self, request: Any, positions: list[int], timeout: float,
                 errors: dict[int, list[Exception]],
                 note: RateLimitNote | None = None) -> None:
        self.request = request
        #: Where the server's rate limit goes, if the executor paces writes.
        self.note = note
        self.timeout = timeout
        self.errors = errors
        self.unreported = dict(enumerate(positions))
        #: The entries of the request (numbered 0 .. size - 1 in it); the bytes of the
        #: response that reports them all applied are known to the deserializer.
        self.size = len(positions)
        wire.applied_response(self.size)
        self.retry: list[int] = []
        #: The first error of the attempt worth a retry: what a retry log names.
        self.cause: Exception | None = None

    def response(self, response: Any) -> None:
        """Record the entries' statuses of one ``MutateRowsResponse`` (and its rate limit).

        ``response`` as `wire.mutate_response()` gives it: the message, or the
        number ``n`` of a response that reports entries ``0 .. n - 1`` applied,
        in order (the common one, known by its bytes without parsing them)."""
        if type(response) is int:
            if response == len(self.unreported) == self.size:  # every entry at once
                if self.errors:  # an entry that failed before is applied now
                    for position in self.unreported.values():
                        self.errors.pop(position, None)
                self.unreported = {}
                return
            response = wire.MutateRowsResponse.FromString(wire.applied_response(response))
        if self.note is not None and response.HasField("rate_limit_info"):
            self.note.seen = rate_limit(response.rate_limit_info)
        errors, unreported = self.errors, self.unreported
        for result in response.entries:
            index = unreported.pop(result.index, None)
            if index is None:
                continue  # a status for an entry not sent, or twice: ignore
            status = result.status
            if status.code == 0:
                errors.pop(index, None)
                continue
            error = _from_grpc_status(status.code, status.message, details=list(status.details))
            errors.setdefault(index, []).append(error)
            if is_retryable(error, MUTATE_RETRYABLE):
                self.retry.append(index)
                self.cause = self.cause or error

    def broken(self, rpc_error: grpc.RpcError) -> None:
        """The call failed: every entry without a status gets its error."""
        error = _from_grpc_error(rpc_error)
        for index in self.unreported.values():
            self.errors.setdefault(index, []).append(error)
        if is_retryable(error, MUTATE_RETRYABLE) and self.unreported:
            self.retry.extend(self.unreported.values())
            self.cause = self.cause or error
        self.unreported = {}

    def ended(self) -> list[int]:
        """The stream ended: entries without a status may be applied; retry them."""
        for index in self.unreported.values():
            missing = MissingEntryStatus("MutateRows returned no status for the entry")
            self.errors.setdefault(index, []).append(missing)
            self.retry.append(index)
            self.cause = self.cause or missing
        self.unreported = {}
        return sorted(self.retry)


class _MutateOperation:
    """The retry policy of one MutateRows operation, without I/O.

    Its pump (`_Rpc._mutate_rows()`, for both drivers) sends
    `attempt()`'s request, feeds it the responses, then asks
    `delay()` whether and when to try again.
    """

    def __init__(self, request: Any, policy: RetryPolicy) -> None:
        self.request = request
        self.policy = policy
        self.errors: dict[int, list[Exception]] = {}
        self.pending = list(range(len(request.entries)))
        #: Entries that add (``AddToCell``): not idempotent, so never sent twice. One
        #: whose outcome is in doubt stays so (UNKNOWN), as the official client does.
        self.once: frozenset[int] = request.adds
        self.deadline = time.monotonic() + policy.operation_timeout
        self.delays = policy.delays()
        self.attempts = 0
        #: Where the executor counts this call's retries (see tsmodel._observe).
        self.retries = RETRIES.get()
        #: Where the server's rate limit goes (see tsmodel._observe).
        self.note = RATE_LIMITS.get()

    def attempt(self) -> _MutateAttempt:
        pending, request = self.pending, self.request
        sent = request if len(pending) == len(request.entries) else request.subset(pending)
        timeout = min(self.policy.attempt_timeout,
                      max(self.deadline - time.monotonic(), 0.001))
        self.attempts += 1
        return _MutateAttempt(sent, pending, timeout, self.errors, self.note)

    def delay(self, attempt: _MutateAttempt) -> float | None:
        """Seconds to wait before the next attempt, or ``None``: the operation is over."""
        retry = attempt.ended()
        if self.once:
            retry = [index for index in retry if index not in self.once]
        if not retry:
            return None
        delay: float = next(self.delays)
        limit = self.policy.attempts
        if time.monotonic() + delay >= self.deadline or (limit and self.attempts >= limit):
            _gave_up("MutateRows", self.request.table_name, self.attempts, attempt.cause,
                     f"{len(retry)} entries may not be applied")
            return None
        _retrying(self.retries, "MutateRows", self.request.table_name, self.attempts,
                  attempt.cause, delay,
                  f"{len(retry)} of {len(self.request.entries)} entries")
        self.pending = retry
        return delay

    def result(self) -> dict[int, Exception]:
        """The error of each entry not applied in the end (see `DataRpc.mutate_rows()`)."""
        return {index: found[0] if len(found) == 1 else RetryExceptionGroup(found)
                for index, found in sorted(self.errors.items())}


class _ReadOperation:
    """The resume policy of one ReadRows operation, without I/O."""

    def __init__(self, request: Any, policy: RetryPolicy) -> None:
        self.request: Any = request
        self.policy = policy
        self.table_name: str = request.table_name
        self.progress = ReadProgress(reverse=request.reversed)
        self.limit = request.rows_limit
        self.deadline = time.monotonic() + policy.operation_timeout
        self.delays = policy.delays()
        #: Attempts since the last progress.
        self.attempts = 0
        #: Where the executor counts this read's retries: taken when the read
        #: starts, since its rows are read later, in the caller's context.
        self.retries = RETRIES.get()
        self._before: tuple[int, bytes | None] = (0, None)

    def timeout(self) -> float:
        """The next attempt's timeout; marks where the read stands before it."""
        self._before = (self.progress.rows, self.progress.last_key)
        self.attempts += 1
        return min(self.policy.attempt_timeout, max(self.deadline - time.monotonic(), 0.001))

    def delay(self, rpc_error: grpc.RpcError) -> float | None:
        """Seconds to wait before resuming after ``rpc_error``; ``None``: no row is left.

        Raises:
            GoogleAPICallError: the error is not retryable, or the deadline
                (counted from the last progress) has passed, or the most
                attempts without progress were made.
        """
        error = _from_grpc_error(rpc_error)
        if not is_retryable(error, READ_RETRYABLE):
            raise error
        progress = self.progress
        if (progress.rows, progress.last_key) != self._before:  # progress: a fresh budget
            self.deadline = time.monotonic() + self.policy.operation_timeout
            self.delays = self.policy.delays()
            self.attempts = 1
        delay: float = next(self.delays)
        limit = self.policy.attempts
        if time.monotonic() + delay >= self.deadline or (limit and self.attempts >= limit):
            _gave_up("ReadRows", self.table_name, self.attempts, error,
                     f"after {progress.rows} rows")
            raise error
        self.request = wire.resume_request(self.request, progress, self.limit)
        if self.request is None:
            return None
        _retrying(self.retries, "ReadRows", self.table_name, self.attempts, error, delay,
                  f"resuming after {progress.rows} rows")
        return delay


def rate_limit(info: Any) -> RateLimit:
    """The `RateLimit` of a ``RateLimitInfo`` message (its period in seconds)."""
    period = info.period
    return RateLimit(period.seconds + period.nanos / 1e9, info.factor)


def _retrying(count: RetryCount | None, method: str, table_name: str, attempt: int,
              cause: BaseException | None, delay: float, what: str) -> None:
    """Count and log one retry (INFO on ``tsmodel.bigtable``)."""
    if count is not None:
        count.n += 1
    table = table_name.rsplit("/", 1)[-1]
    RETRY_LOG.info("%s of table %r: attempt %d failed (%s); retrying %s in %.3f s",
                   method, table, attempt, _describe(cause), what, delay,
                   extra={"table": table, "method": method, "attempt": attempt,
                          "cause": cause, "delay": delay})


def _gave_up(method: str, table_name: str, attempts: int, cause: BaseException | None,
             what: str) -> None:
    """Log a call whose retries ran out (WARNING on ``tsmodel.bigtable``)."""
    table = table_name.rsplit("/", 1)[-1]
    RETRY_LOG.warning("%s of table %r: giving up after %d attempts (last: %s); %s",
                      method, table, attempts, _describe(cause), what,
                      extra={"table": table, "method": method, "attempt": attempts,
                             "cause": cause})


def _describe(error: BaseException | None) -> str:
    return "no error" if error is None else f"{type(error).__name__}: {error}"


class _Rpc(abc.ABC):
    """What both drivers share: the channel, the common headers, and the pumps of
    the write calls, each written once as a coroutine over the driver's I/O.

    A driver supplies the I/O of its channel as awaitables: `_pause()` (the
    back-off between attempts), `_streamed()` (a response stream as an async
    iterator) and `_side_by_side()` (unary calls made at once). `AsyncDataRpc`
    awaits the pumps on its event loop; on a blocking channel none of these
    awaitables suspends, so `DataRpc` runs a pump to its end in one step
    (`_blocking()`).
    """

    def __init__(self, channel: Callable[[], Any],
                 metadata: Sequence[tuple[str, str]] = (),
                 policies: Policies = DEFAULT_POLICIES) -> None:
        self.channel = channel
        self.metadata = tuple(metadata)
        self.policies = policies

    def _call(self, method: str, response_type: Any) -> Any:
        """A multicallable of ``method`` on the channel as it is now.

        Made for each call, so that a channel the data client has just
        refreshed is used at once; making one costs under a microsecond.
        """
        return self.channel().unary_stream(
            method, request_serializer=_serialize,
            response_deserializer=None if response_type is None else response_type.FromString)

    def _unary(self, method: str, response_type: Any) -> Any:
        """`_call()` of a unary-unary method."""
        return self.channel().unary_unary(method, request_serializer=_serialize,
                                          response_deserializer=response_type.FromString)

    @abc.abstractmethod
    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` before the next attempt."""

    @abc.abstractmethod
    def _streamed(self, responses: Any) -> AsyncIterator[Any]:
        """The responses of a unary-stream call, as the pumps read them."""

    @abc.abstractmethod
    async def _side_by_side(self, call: Any, requests: list[Any], timeout: float,
                            headers: Sequence[tuple[str, str]]) -> list[Any]:
        """Make the unary ``call`` of each request at once; the response of each,
        or the exception it ended with, in order (as ``asyncio.gather`` with
        ``return_exceptions=True`` gives them)."""

    async def _mutate_rows(self, request: Any,
                           metadata: Sequence[tuple[str, str]]) -> dict[int, Exception]:
        """The pump of `DataRpc.mutate_rows()`: `_MutateOperation` decides, this sends."""
        operation = _MutateOperation(request, self.policies.mutate)
        headers = (*self.metadata, *metadata)
        while True:
            attempt = operation.attempt()
            mutate_rows = self._call(_MUTATE_ROWS, wire.MutateResponse)
            try:
                async for response in self._streamed(mutate_rows(
                        attempt.request, timeout=attempt.timeout, metadata=headers)):
                    attempt.response(response)
            except grpc.RpcError as rpc_error:
                attempt.broken(rpc_error)
            delay = operation.delay(attempt)
            if delay is None:
                return operation.result()
            await self._pause(delay)

    async def _check_and_mutate_rows(self, requests: Sequence[Any],
                                     metadata: Sequence[tuple[str, str]]
                                     ) -> dict[int, Exception]:
        """The pump of `DataRpc.check_and_mutate_rows()`: `_Conditional` decides."""
        attempts = _Conditional(self, requests)
        headers = (*self.metadata, *metadata)
        while attempts.pending:
            call = self._unary(_CHECK_AND_MUTATE_ROW, wire.CheckAndMutateRowResponse)
            pending = attempts.pending
            results = await self._side_by_side(call, [requests[i] for i in pending],
                                               attempts.timeout(), headers)
            answers: dict[int, Exception | None] = {}
            for i, result in zip(pending, results, strict=True):
                if isinstance(result, grpc.RpcError):
                    answers[i] = _from_grpc_error(result)
                elif isinstance(result, BaseException):
                    raise result
                else:
                    answers[i] = None
            delay = attempts.answered(answers)
            if delay is not None:
                await self._pause(delay)
        return attempts.failed


class _Conditional:
    """The attempts of `DataRpc.check_and_mutate_rows()`: what is pending, what failed,
    and how long to wait before the next attempt (the mutate policy's back-off)."""

    def __init__(self, rpc: _Rpc, requests: Sequence[Any]) -> None:
        self.policy = rpc.policies.mutate
        self.table_name = requests[0].table_name if requests else ""
        self.deadline = time.monotonic() + self.policy.operation_timeout
        self.delays = self.policy.delays()
        self.attempt = 0
        self.pending: list[int] = list(range(len(requests)))
        self.failed: dict[int, Exception] = {}

    def timeout(self) -> float:
        self.attempt += 1
        return min(self.policy.attempt_timeout, max(self.deadline - time.monotonic(), 0.001))

    def answered(self, answers: dict[int, Exception | None]) -> float | None:
        """Take one attempt's answers; the wait before retrying what is left, or ``None``."""
        retry = [i for i, error in answers.items()
                 if error is not None and is_retryable(error, MUTATE_RETRYABLE)]
        self.failed.update({i: error for i, error in answers.items()
                            if error is not None and i not in retry})
        self.pending = retry
        if not retry:
            return None
        cause = answers[retry[0]]
        delay: float = next(self.delays)
        if time.monotonic() + delay >= self.deadline or (
                self.policy.attempts is not None and self.attempt >= self.policy.attempts):
            _gave_up("CheckAndMutateRow", self.table_name, self.attempt, cause,
                     "the rows may or may not be written")
            self.failed.update({i: cast(Exception, answers[i]) for i in retry})
            self.pending = []
            return None
        _retrying(None, "CheckAndMutateRow", self.table_name, self.attempt, cause, delay,
                  f"{len(retry)} call(s)")
        return delay


class DataRpc(_Rpc):
    """Raw ReadRows and MutateRows on a (sync) gRPC channel.

    Args:
        channel: returns the channel to call (the data client's, which it
            may swap when it refreshes its connection).
        metadata: headers sent with every call (``x-goog-api-client``).
        policies: how reads and writes are retried.
        sleep: how to wait between attempts.
    """

    def __init__(self, channel: Callable[[], Any], metadata: Sequence[tuple[str, str]] = (),
                 policies: Policies = DEFAULT_POLICIES,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(channel, metadata, policies)
        self.sleep = sleep

    def mutate_rows(self, request: Any,
                    metadata: Sequence[tuple[str, str]]) -> dict[int, Exception]:
        """Send a ``MutateRowsRequest``, retrying what may be retried.

        Returns:
            The error of each entry (by its index in ``request``) that was
            not applied in the end: the last error, or a
            `RetryExceptionGroup` of every attempt's. Entries not
            listed were applied.
        """
        return _blocking(self._mutate_rows(request, metadata))

    def check_and_mutate_rows(self, requests: Sequence[Any],
                              metadata: Sequence[tuple[str, str]]) -> dict[int, Exception]:
        """Send ``CheckAndMutateRowRequest`` s side by side (gRPC futures).

        tsmodel's conditional entries are idempotent (a timestamp predicate,
        explicit cell timestamps): a call that fails with a retryable status
        is made again, with back-off, under the mutate policy.

        Returns:
            The error of each request (by its index) not applied in the end
            (or perhaps not); requests not listed were applied.
        """
        return _blocking(self._check_and_mutate_rows(requests, metadata))

    async def _pause(self, seconds: float) -> None:
        self.sleep(seconds)

    def _streamed(self, responses: Any) -> AsyncIterator[Any]:
        return _Blocking(responses)

    async def _side_by_side(self, call: Any, requests: list[Any], timeout: float,
                            headers: Sequence[tuple[str, str]]) -> list[Any]:
        futures = [call.future(request, timeout=timeout, metadata=headers)
                   for request in requests]
        return [future.exception() or future.result() for future in futures]

    def sample_row_keys(self, request: Any,
                        metadata: Sequence[tuple[str, str]]) -> list[tuple[bytes, int]]:
        """Send a ``SampleRowKeysRequest``; its ``(row_key, offset_bytes)`` pairs, in order.

        A retryable failure makes the call again whole, with back-off, under
        the read policy (its attempt timeout, deadline and most attempts).

        Raises:
            GoogleAPICallError: a non-retryable error, or a retryable one
                once the policy gives up.
        """
        policy, headers = self.policies.read, (*self.metadata, *metadata)
        deadline, delays, attempt = time.monotonic() + policy.operation_timeout, policy.delays(), 0
        while True:
            attempt += 1
            sample = self._call(_SAMPLE_ROW_KEYS, wire.SampleRowKeysResponse)
            timeout = min(policy.attempt_timeout, max(deadline - time.monotonic(), 0.001))
            try:
                return [(response.row_key, response.offset_bytes)
                        for response in sample(request, timeout=timeout, metadata=headers)]
            except grpc.RpcError as rpc_error:
                error = _from_grpc_error(rpc_error)
                if not is_retryable(error, READ_RETRYABLE):
                    raise error from rpc_error
                delay: float = next(delays)
                if time.monotonic() + delay >= deadline or (
                        policy.attempts is not None and attempt >= policy.attempts):
                    _gave_up("SampleRowKeys", request.table_name, attempt, error,
                             "the samples are not known")
                    raise error from rpc_error
            _retrying(None, "SampleRowKeys", request.table_name, attempt, error, delay,
                      "the whole call")
            self.sleep(delay)

    def read_rows(self, request: Any, metadata: Sequence[tuple[str, str]],
                  batches: bool = False) -> Iterator[Any]:
        """Stream the rows of a ``ReadRowsRequest``, resuming broken streams.

        With ``batches``, the rows come in columns, as `CellBatch` es
        (`merge_batches()`), resumed after the last row of the last batch as
        rows are.

        The request is sent before this returns; its rows are read as the
        iterator is. Reads started one after the other thus stream side by
        side, their responses held by gRPC within each stream's flow-control
        window until they are read. A read never iterated is cancelled when
        its iterator is collected.

        Raises:
            GoogleAPICallError: a non-retryable error, or a retryable one
                after the deadline (counted from the last progress); a
                request that cannot be sent at all, at once.
            InvalidChunk: the server broke the chunk protocol.
        """
        operation = _ReadOperation(request, self.policies.read)
        headers = (*self.metadata, *metadata)
        try:
            call = self._start_read(operation, headers)
        except grpc.RpcError as rpc_error:  # not sent (it could not be serialized)
            raise _from_grpc_error(rpc_error) from rpc_error
        return self._read_rows(operation, headers, call,
                               merge_batches if batches else merge_rows)

    def _start_read(self, operation: _ReadOperation, headers: Sequence[tuple[str, str]]) -> Any:
        read_rows = self._call(_READ_ROWS, None)  # bytes: parsed a group at a time (_views)
        return read_rows(operation.request, timeout=operation.timeout(), metadata=headers)

    def _read_rows(self, operation: _ReadOperation, headers: Sequence[tuple[str, str]],
                   call: Any, merge: Callable[..., Iterator[Any]]) -> Iterator[Any]:
        while True:
            try:
                yield from merge(_views(call), operation.progress)
                return
            except grpc.RpcError as rpc_error:
                broken = rpc_error
            finally:
                call.cancel()  # a no-op after the end; frees the stream after a break
            delay = operation.delay(broken)
            if delay is None:
                return
            self.sleep(delay)
            call = self._start_read(operation, headers)


class AsyncDataRpc(_Rpc):
    """Raw MutateRows on a ``grpc.aio`` channel: `DataRpc`'s writes on an event loop.

    The same pumps (`_Rpc`) drive both, over this driver's I/O. Reads are not
    here: the async backend reads through `DataRpc` in a worker thread
    (`tsmodel.backends.bigtable_async.AsyncBigtableBackend.read_rows()`).
    """

    async def mutate_rows(self, request: Any,
                          metadata: Sequence[tuple[str, str]]) -> dict[int, Exception]:
        """See `DataRpc.mutate_rows()`."""
        return await self._mutate_rows(request, metadata)

    async def check_and_mutate_rows(self, requests: Sequence[Any],
                                    metadata: Sequence[tuple[str, str]]
                                    ) -> dict[int, Exception]:
        """See `DataRpc.check_and_mutate_rows()`: the calls as tasks."""
        return await self._check_and_mutate_rows(requests, metadata)

    async def _pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def _streamed(self, responses: Any) -> AsyncIterator[Any]:
        async for response in responses:
            if response is None:  # did not parse: grpc.aio yields None (see `_unparsed()`)
                responses.cancel()
                raise _unparsed()
            yield response

    async def _side_by_side(self, call: Any, requests: list[Any], timeout: float,
                            headers: Sequence[tuple[str, str]]) -> list[Any]:
        results = await asyncio.gather(*(call(request, timeout=timeout, metadata=headers)
                                         for request in requests), return_exceptions=True)
        return [_unparsed() if result is None else result for result in results]


#: A stream's responses are parsed together (`_views()`) up to this many bytes,
#: or this many responses (the emulator sends a row a response).
VIEW_GROUP_BYTES = 1 << 16
VIEW_GROUP_RESPONSES = 256


def _views(messages: Iterable[bytes], group_bytes: int = VIEW_GROUP_BYTES,
           group_responses: int = VIEW_GROUP_RESPONSES) -> Iterator[Any]:
    """The ReadRows responses of a stream, sent as bytes, as the chunk merger reads
    them, parsed a group at a time (`_parsed()`): one parse of a group of
    responses, not one call for each response from gRPC, and their chunks
    in one list (measured: about 3.8 us a row less, the emulator sending a
    row a response). A group is what has come when it reaches
    ``group_bytes`` or its number of responses, or the stream ends: the
    first group one response, each next one twice the last, up to
    ``group_responses``, so that the first rows of a read come as soon as
    they are sent.

    A broken stream gives the responses that came before the break, then
    the error; a response that does not parse ends the stream as gRPC
    ends it when it parses each response itself: the responses before it,
    then ``INTERNAL`` ("Exception deserializing response!").
    """
    messages = iter(messages)
    header = wire.views_header
    items = 2  # a header and a response each
    while True:
        group: list[bytes] = []
        size = 0
        ended = True
        try:
            for message in messages:
                group += (header(len(message)), message)
                size += len(message)
                if size >= group_bytes or len(group) >= items:
                    ended = False
                    break
        except Exception:
            yield from _parsed(group)  # what came before the break
            raise
        yield from _parsed(group)
        if ended:
            return
        items = min(2 * items, 2 * group_responses)


def _parsed(group: list[bytes]) -> Iterator[Any]:
    """The responses of a `_views()` group (each behind its header), as the merger
    reads them: joined into one (`wire.ReadRowsJoined`: the chunks of all in
    order) once each response's fields are seen to end within it
    (`wire.ReadRowsFramed`), so that no response's bytes are read as
    another's; where one reports a scanned row key, each response on its own
    (`wire.ReadRowsViews`), as the key's place among the rows matters; where a
    parse fails, one by one up to the response that does not parse, then
    its error."""
    if len(group) <= 2:  # none, or one response: as it is, not copied
        return _each_parsed(group)
    try:
        wire.ReadRowsFramed.FromString(b"".join(group))
        joined = wire.ReadRowsJoined.FromString(b"".join(group[1::2]))
        if not joined.last_scanned_row_key:
            return iter((joined,))
        return iter(wire.ReadRowsViews.FromString(b"".join(group)).responses)
    except DecodeError:
        return _each_parsed(group)


def _each_parsed(group: list[bytes]) -> Iterator[Any]:
    for message in group[1::2]:
        try:
            response = wire.ReadRowsView.FromString(message)
        except DecodeError:
            raise _unparsed() from None
        yield response


def _unparsed() -> grpc.RpcError:
    """The error of a response that does not parse, as a blocking channel raises it.

    A blocking channel ends such a call with ``INTERNAL`` ("Exception
    deserializing response!"); ``grpc.aio`` logs the parse error and hands out
    ``None`` as the response, which would read as a call that succeeded.
    """
    return grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, grpc.aio.Metadata(),
                                grpc.aio.Metadata(), "Exception deserializing response!")


class _Blocking:
    """A blocking channel's response stream as an async iterator that never suspends."""

    __slots__ = ("_responses",)

    def __init__(self, responses: Iterable[Any]) -> None:
        self._responses = iter(responses)

    def __aiter__(self) -> _Blocking:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self._responses)
        except StopIteration:
            raise StopAsyncIteration from None


def _blocking(pump: Coroutine[Any, Any, _T]) -> _T:
    """Run a pump of `_Rpc` to its end on a blocking channel.

    Its awaits (`DataRpc._pause()`, `_Blocking`, `DataRpc._side_by_side()`)
    never suspend, so one step runs it whole.

    Raises:
        RuntimeError: the pump awaited something that suspends (a bug).
    """
    try:
        pump.send(None)
    except StopIteration as done:
        return cast(_T, done.value)
    pump.close()
    raise RuntimeError("a pump on a blocking channel suspended")


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data
