"""Whether something listens on a loopback port, and waiting until nothing does."""

from __future__ import annotations

import socket
import subprocess
import time
from typing import Any


def listening(host_port: str) -> bool:
    """Whether ``"HOST:PORT"`` accepts a TCP connection now."""
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def wait_until_closed(host_port: str, what: str, timeout: float = 20) -> None:
    """Wait until nothing listens on ``host_port``; fail saying ``what`` if it stays open."""
    deadline = time.monotonic() + timeout
    while listening(host_port):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def assert_closes_when_killed(proc: subprocess.Popen[Any], host_port: str, what: str) -> None:
    """SIGKILL ``proc`` (no chance to clean up) and wait until ``host_port`` closes."""
    assert listening(host_port), f"nothing listens on {host_port} before the kill"
    proc.kill()
    proc.wait(timeout=30)
    wait_until_closed(host_port, what)
