"""MutateRows responses as the backend takes them: the same statuses, however sent.

The deserializer (`wire.mutate_response()`) knows the response of a request
applied whole by its bytes (`wire.applied_response()`) and parses any other;
`_MutateAttempt.response()` records either. The oracle here
is plain Python over the statuses each response was built from with
protobuf's own message: which entries failed, with which code, and which
are left unreported (to retry).
"""

from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError

from tsmodel.backends import _bigtable_wire as wire
from tsmodel.backends._bigtable_rpc import _MutateAttempt

Response = wire.MutateRowsResponse


def response_of(statuses: list[tuple[int, int]]) -> bytes:
    """A response holding ``(index, code)`` per entry, serialized by protobuf."""
    response = Response()
    for index, code in statuses:
        entry = response.entries.add()
        entry.index = index
        entry.status.SetInParent()
        if code:
            entry.status.code = code
            entry.status.message = f"code {code}"
    data: bytes = response.SerializeToString()
    return data


def attempt_after(responses: list[bytes], positions: list[int],
                  errors: dict[int, list[Exception]] | None = None) -> _MutateAttempt:
    attempt = _MutateAttempt(None, positions, 1.0, {} if errors is None else errors)
    for data in responses:
        attempt.response(wire.mutate_response(data))
    return attempt


@pytest.mark.parametrize("n", [1, 2, 127, 128, 1000])
def test_a_request_applied_whole_is_known_by_its_bytes(n: int) -> None:
    data = response_of([(i, 0) for i in range(n)])
    assert data == wire.applied_response(n)
    assert wire.mutate_response(data) == n  # not parsed
    positions = [10 + 3 * i for i in range(n)]
    earlier: dict[int, list[Exception]] = {positions[-1]: [RuntimeError("before")], 7: []}
    attempt = attempt_after([data], positions, earlier)
    assert attempt.unreported == {} and attempt.retry == []
    # An entry that failed in an earlier attempt and is applied now has no error left.
    assert earlier == {7: []}


def test_the_bytes_of_another_request_size_are_parsed() -> None:
    """Applied entries 0..4 answer a request of 5 fully, of 6 partly: the sixth
    entry is unreported (retried when the stream ends)."""
    data = wire.applied_response(5)
    assert attempt_after([data], list(range(5))).unreported == {}
    attempt = attempt_after([data], list(range(100, 106)))
    assert attempt.unreported == {5: 105}
    assert attempt.ended() == [105]


@pytest.mark.parametrize("seed", range(20))
def test_any_response_gives_the_statuses_it_holds(seed: int) -> None:
    """Statuses in any order, split over messages, some failed (retryable or not),
    some missing: each entry's outcome is the one its status says."""
    rng = random.Random(seed)
    n = rng.randrange(1, 40)
    positions = rng.sample(range(1000), n)
    codes = [rng.choice([0, 0, 0, 3, 5, 14]) for _ in range(n)]  # OK, INVALID_ARGUMENT, ...
    reported = [i for i in range(n) if rng.random() < 0.9]
    rng.shuffle(reported)
    cut = rng.randrange(len(reported) + 1)
    responses = [response_of([(i, codes[i]) for i in part])
                 for part in (reported[:cut], reported[cut:]) if part]
    attempt = attempt_after(responses, positions)
    failed = {positions[i]: codes[i] for i in reported if codes[i]}
    assert {index: found[0].grpc_status_code.value[0]  # type: ignore[attr-defined]
            for index, found in attempt.errors.items()} == failed
    assert attempt.unreported == {i: positions[i] for i in range(n) if i not in reported}
    retryable = {positions[i] for i in reported if codes[i] == 14}  # UNAVAILABLE
    assert set(attempt.retry) == retryable


def test_a_corrupt_response_raises_in_the_deserializer() -> None:
    """gRPC fails the call (a retryable INTERNAL error) when its deserializer raises."""
    with pytest.raises(DecodeError):
        wire.mutate_response(b"\n\xff\xff\xff\xff\x0f")
