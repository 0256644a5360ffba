"""The blocking backend under asyncio (ThreadedBackend): reads that are cancelled mid-hop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from tsmodel.backends.base import Cell, Features, ReadRequest, Row, ThreadBacked, thread_backed
from tsmodel.backends.threaded import ThreadedBackend

ROW = Row(b"k", (Cell("f", b"q", 1000, b"v"),))


class GatedBackend:
    """A backend whose read blocks (in the hop's thread) until the test opens the gate."""

    features = Features()

    def __init__(self) -> None:
        self.entered, self.gate, self.closed = threading.Event(), threading.Event(), False

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        try:
            self.entered.set()
            self.gate.wait()
            yield ROW
        finally:
            self.closed = True


async def test_a_read_cancelled_during_a_hop_is_closed_after_the_hop() -> None:
    """Cancelled while its thread runs the backend's generator, the read waits for the
    hop and then closes the generator (closing it mid-run raised ValueError)."""
    backend = GatedBackend()
    threaded = ThreadedBackend(backend)

    async def consume() -> list[Row]:
        return [row async for row in threaded.read_rows(ReadRequest("t"))]

    task = asyncio.ensure_future(consume())
    await asyncio.to_thread(backend.entered.wait)
    task.cancel()
    await asyncio.sleep(0)  # the cancellation reaches the read, mid-hop
    backend.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert backend.closed, "the backend's generator is closed: its finally blocks ran"


class Forwarding:
    """A wrapper that forwards what it does not define to the backend under it."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_only_a_class_with_blocking_is_thread_backed() -> None:
    """Async queries take a ThreadBacked backend's blocking reads in worker threads,
    bypassing its read_rows: a wrapper that only forwards ``blocking`` (and may read
    in its own way) must not count as one."""
    threaded = ThreadedBackend(GatedBackend())
    assert isinstance(threaded, ThreadBacked)
    assert thread_backed(threaded) is threaded
    assert thread_backed(Forwarding(threaded)) is None
    assert thread_backed(GatedBackend()) is None
