"""The benchmarks' delay proxy (benchmarks/_delay.py): bytes through, delayed, stopped,
and the HTTP/2 requests it carries counted.

No timed assertions beyond a loose lower bound on the delay.
"""

from __future__ import annotations

import random
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _delay import PREFACE, DelayProxy, Http2Requests, delay_process  # noqa: E402

DELAY = 0.05


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while chunk := self.request.recv(65536):
            self.request.sendall(chunk)


@pytest.fixture
def echo() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed early"
        data += chunk
    return bytes(data)


def test_bytes_in_equal_bytes_out_after_the_delay(echo: str) -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB, many chunks, order matters
    with DelayProxy(echo, DELAY) as proxy:
        host, port = proxy.host_port.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            start = time.perf_counter()
            sock.sendall(b"ping")
            assert _recv_exactly(sock, 4) == b"ping"
            round_trip = time.perf_counter() - start
            sender = threading.Thread(target=sock.sendall, args=(payload,))
            sender.start()
            assert _recv_exactly(sock, len(payload)) == payload
            sender.join()
    assert round_trip >= 0.5 * 2 * DELAY  # there and back: two delays


def test_it_stops(echo: str) -> None:
    proxy = DelayProxy(echo, 0.0).start()
    host, port = proxy.host_port.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)  # left open
    thread = proxy._thread
    proxy.close()
    assert thread is not None and not thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=1).close()
    sock.close()


def test_a_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError):
        DelayProxy("127.0.0.1:1", -1)


# -- counting requests ---------------------------------------------------------------

def _frame(kind: int, stream: int, payload: bytes = b"", flags: int = 0) -> bytes:
    """One HTTP/2 frame (RFC 9113, section 4.1), built by hand."""
    return (len(payload).to_bytes(3, "big") + bytes([kind, flags])
            + stream.to_bytes(4, "big") + payload)


DATA, HEADERS, SETTINGS, PING, WINDOW_UPDATE, CONTINUATION = 0x0, 0x1, 0x4, 0x6, 0x8, 0x9
#: A payload that holds what looks like a HEADERS frame on a new stream: skipped.
_DECOY = _frame(HEADERS, 99, b"x" * 10) * 3

#: Three requests: streams 1, 3 and 5; the rest are other frames.
CLIENT_BYTES = b"".join([
    PREFACE,
    _frame(SETTINGS, 0, b"\x00\x04\x00\x40\x00\x00"),
    _frame(WINDOW_UPDATE, 0, (1 << 20).to_bytes(4, "big")),
    _frame(HEADERS, 1, b"h" * 40, flags=0x4),
    _frame(DATA, 1, _DECOY + b"d" * 20_000, flags=0x1),
    _frame(HEADERS, 3, b"h" * 30),
    _frame(CONTINUATION, 3, b"c" * 10, flags=0x4),
    _frame(DATA, 3, b"", flags=0x1),
    _frame(PING, 0, b"p" * 8),
    _frame(HEADERS, 3, b"t" * 5, flags=0x5),  # trailers on an open stream: not a request
    _frame(WINDOW_UPDATE, 1, (1000).to_bytes(4, "big")),
    _frame(HEADERS, 5, b"h" * 40, flags=0x5),
])


def _fed(chunks: list[bytes]) -> Http2Requests:
    counter = Http2Requests()
    for chunk in chunks:
        counter.feed(chunk)
    return counter


def test_requests_are_the_streams_opened_whatever_the_chunks() -> None:
    data = CLIENT_BYTES
    whole = _fed([data])
    assert (whole.http2, whole.requests) == (True, 3)
    assert _fed([data[i:i + 1] for i in range(len(data))]).requests == 3
    rng = random.Random(12)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(data)), 8))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert _fed([*chunks, b""]).requests == 3


def test_a_request_counts_as_soon_as_its_headers_arrive() -> None:
    counter = _fed([PREFACE, _frame(HEADERS, 1, b"h" * 40)[:9]])
    assert counter.requests == 1


def test_bytes_that_are_not_http2_count_nothing() -> None:
    counter = _fed([b"GET / HTTP/1.1\r\n\r\n", _frame(HEADERS, 1, b"h")])
    assert (counter.http2, counter.requests) == (False, 0)
    assert _fed([PREFACE[:10], b"X" + PREFACE[11:], _frame(HEADERS, 1)]).requests == 0


def test_the_proxy_counts_what_clients_send(echo: str) -> None:
    with DelayProxy(echo, 0.0) as proxy:
        host, port = proxy.host_port.rsplit(":", 1)
        for _ in range(2):  # two connections
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(CLIENT_BYTES)
                assert _recv_exactly(sock, len(CLIENT_BYTES)) == CLIENT_BYTES
        assert proxy.requests == 6  # client bytes only: the echo counts nothing


def test_the_proxy_process_reports_its_count(echo: str) -> None:
    with delay_process(echo, 0.0) as proxy:
        assert proxy.requests() == 0
        host, port = proxy.host_port.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(CLIENT_BYTES)
            assert _recv_exactly(sock, len(CLIENT_BYTES)) == CLIENT_BYTES
        assert proxy.requests() == 3
