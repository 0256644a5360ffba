"""The benchmarks' delay proxy (benchmarks/_delay.py): bytes through, delayed, stopped.

No timed assertions beyond a loose lower bound on the delay.
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _delay import DelayProxy  # noqa: E402

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
