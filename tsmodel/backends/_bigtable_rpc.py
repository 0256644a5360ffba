"""The Bigtable backend's two data RPCs, sent as raw protobuf on the data client's channel.

``MutateRows`` and ``ReadRows`` go straight to the gRPC channel that
google-cloud-bigtable's data client built (so its credentials, endpoint,
channel refresh and warm-up all apply), with the metadata Cloud Bigtable
needs: the ``x-goog-request-params`` routing header (table name, app
profile), the client's ``x-goog-api-client`` header and the
``bigtable-features`` header. What the client's operation classes do around
those calls is done here too:

* MutateRows: entries that fail with a retryable status (or get none) are
  sent again with exponential back-off until the operation deadline; every
  entry ends with its own error list, like ``bulk_mutate_rows`` reports.
  Retrying is safe because tsmodel writes explicit timestamps.
* ReadRows: a stream that breaks with a retryable error is re-requested from
  the last row returned (or reported scanned), with the row limit reduced by
  the rows already returned; rows are never returned twice. The deadline
  counts time without progress, so a long read is never cut short.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import grpc
from google.api_core import exceptions as core_exceptions
from google.api_core.retry import exponential_sleep_generator
from google.cloud.bigtable.data.exceptions import RetryExceptionGroup

from tsmodel.backends import _bigtable_wire as wire
from tsmodel.backends._chunks import ReadProgress, merge_rows
from tsmodel.backends.base import Row

__all__ = ["DataRpc", "is_retryable", "MUTATE_RETRYABLE", "READ_RETRYABLE"]

_MUTATE_ROWS = "/google.bigtable.v2.Bigtable/MutateRows"
_READ_ROWS = "/google.bigtable.v2.Bigtable/ReadRows"

#: The data client's defaults.
READ_ATTEMPT_TIMEOUT = 20.0
MUTATE_ATTEMPT_TIMEOUT = 60.0
OPERATION_TIMEOUT = 600.0
BACKOFF_INITIAL, BACKOFF_MAXIMUM, BACKOFF_MULTIPLIER = 0.01, 60.0, 2.0

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


def is_retryable(error: BaseException, kinds: tuple[type[Exception], ...]) -> bool:
    """Whether ``error`` is worth another attempt (``kinds``, or a reset stream)."""
    if isinstance(error, (*kinds, MissingEntryStatus)):
        return True
    return isinstance(error, core_exceptions.InternalServerError) and any(
        text in str(error.message).lower() for text in _RESET_MESSAGES)


class DataRpc:
    """Raw ReadRows and MutateRows on a channel.

    Args:
        channel: returns the channel to call (the data client's, which it
            may swap when it refreshes its connection).
        metadata: headers sent with every call (``x-goog-api-client``).
        sleep: how to wait between attempts.
    """

    def __init__(self, channel: Callable[[], Any], metadata: Sequence[tuple[str, str]] = (),
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.channel = channel
        self.metadata = tuple(metadata)
        self.sleep = sleep

    def _call(self, method: str, response_type: Any) -> Any:
        """A multicallable of ``method`` on the channel as it is now.

        Made for each call, so that a channel the data client has just
        refreshed is used at once; making one costs under a microsecond.
        """
        return self.channel().unary_stream(method, request_serializer=_serialize,
                                           response_deserializer=response_type.FromString)

    # -- MutateRows --------------------------------------------------------------

    def mutate_rows(self, request: Any,
                    metadata: Sequence[tuple[str, str]]) -> dict[int, Exception]:
        """Send a ``MutateRowsRequest``, retrying what may be retried.

        Returns:
            The error of each entry (by its index in ``request``) that was
            not applied in the end: the last error, or a
            :class:`RetryExceptionGroup` of every attempt's. Entries not
            listed were applied.
        """
        errors: dict[int, list[Exception]] = {}
        pending = list(range(len(request.entries)))
        deadline = time.monotonic() + OPERATION_TIMEOUT
        delays = _delays()
        while True:
            attempt = request if len(pending) == len(request.entries) else _subset(request, pending)
            timeout = min(MUTATE_ATTEMPT_TIMEOUT, max(deadline - time.monotonic(), 0.001))
            retry = self._mutate_attempt(attempt, pending, errors, timeout, metadata)
            if not retry:
                break
            delay = next(delays)
            if time.monotonic() + delay >= deadline:
                break
            self.sleep(delay)
            pending = retry
        return {index: found[0] if len(found) == 1 else RetryExceptionGroup(found)
                for index, found in sorted(errors.items())}

    def _mutate_attempt(self, request: Any, positions: list[int],
                        errors: dict[int, list[Exception]], timeout: float,
                        metadata: Sequence[tuple[str, str]]) -> list[int]:
        """One MutateRows call; record errors; return the positions to try again."""
        unreported = dict(enumerate(positions))
        retry: list[int] = []
        mutate_rows = self._call(_MUTATE_ROWS, wire.MutateRowsResponse)
        try:
            for response in mutate_rows(request, timeout=timeout,
                                        metadata=(*self.metadata, *metadata)):
                for result in response.entries:
                    index = unreported.pop(result.index, None)
                    if index is None:
                        continue  # a status for an entry not sent, or twice: ignore
                    status = result.status
                    if status.code == 0:
                        errors.pop(index, None)
                        continue
                    error = _from_grpc_status(
                        status.code, status.message, details=list(status.details))
                    errors.setdefault(index, []).append(error)
                    if is_retryable(error, MUTATE_RETRYABLE):
                        retry.append(index)
        except grpc.RpcError as rpc_error:
            error = _from_grpc_error(rpc_error)
            for index in unreported.values():
                errors.setdefault(index, []).append(error)
            if is_retryable(error, MUTATE_RETRYABLE):
                retry.extend(unreported.values())
            return sorted(retry)
        for index in unreported.values():
            errors.setdefault(index, []).append(
                MissingEntryStatus("MutateRows returned no status for the entry"))
            retry.append(index)
        return sorted(retry)

    # -- ReadRows ------------------------------------------------------------------

    def read_rows(self, request: Any, metadata: Sequence[tuple[str, str]]) -> Iterator[Row]:
        """Stream the rows of a ``ReadRowsRequest``, resuming broken streams.

        Raises:
            GoogleAPICallError: a non-retryable error, or a retryable one
                after the deadline (counted from the last progress).
            InvalidChunk: the server broke the chunk protocol.
        """
        progress = ReadProgress(reverse=request.reversed)
        limit = request.rows_limit
        headers = (*self.metadata, *metadata)
        deadline = time.monotonic() + OPERATION_TIMEOUT
        delays = _delays()
        while True:
            read_rows = self._call(_READ_ROWS, wire.ReadRowsResponse)
            timeout = min(READ_ATTEMPT_TIMEOUT, max(deadline - time.monotonic(), 0.001))
            call = read_rows(request, timeout=timeout, metadata=headers)
            before = (progress.rows, progress.last_key)
            try:
                yield from merge_rows(call, progress)
                return
            except grpc.RpcError as rpc_error:
                error = _from_grpc_error(rpc_error)
            finally:
                call.cancel()  # a no-op after the end; frees the stream after a break
            if not is_retryable(error, READ_RETRYABLE):
                raise error
            if (progress.rows, progress.last_key) != before:  # progress: a fresh budget
                deadline = time.monotonic() + OPERATION_TIMEOUT
                delays = _delays()
            delay = next(delays)
            if time.monotonic() + delay >= deadline:
                raise error
            request = wire.resume_request(request, progress, limit)
            if request is None:
                return
            self.sleep(delay)


def _delays() -> Iterator[float]:
    delays: Iterator[float] = _sleep_generator(BACKOFF_INITIAL, BACKOFF_MAXIMUM, BACKOFF_MULTIPLIER)
    return delays


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


def _subset(request: Any, positions: list[int]) -> Any:
    """A copy of ``request`` with only the entries at ``positions``."""
    out = wire.MutateRowsRequest(table_name=request.table_name,
                                 app_profile_id=request.app_profile_id)
    out.entries.extend(request.entries[i] for i in positions)
    return out
