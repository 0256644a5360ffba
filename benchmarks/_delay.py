"""A network model for the benchmarks: a TCP proxy on loopback that delays every chunk.

``DelayProxy(target, delay)`` listens on ``127.0.0.1`` (a free port) and
forwards each connection to ``target`` (``"HOST:PORT"``). Every chunk read on
one side is written to the other ``delay`` seconds after it arrived, in order
per direction; chunks in flight do not wait for each other, so the link has a
latency but no bandwidth limit. A round trip through it takes ``2 * delay``.

It runs an asyncio loop in a daemon thread and stops with ``close()`` or at
the end of its ``with`` block. ``run.py`` uses ``delay_process()`` instead,
which runs the same proxy in a child process (so that forwarding does not
take the measured process's GIL) that stops when its parent closes its stdin
or exits::

    with delay_process("127.0.0.1:8086", 0.005) as host_port:
        ...  # connect to host_port: 10 ms RTT to the emulator

    python benchmarks/_delay.py 127.0.0.1:8086 0.005   # prints HOST:PORT
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

CHUNK = 256 * 1024


class DelayProxy:
    """Forward a loopback port to ``target``, each chunk ``delay`` seconds late."""

    def __init__(self, target: str, delay: float, *, host: str = "127.0.0.1") -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, not {delay}")
        self.target_host, port = target.rsplit(":", 1)
        self.target_port = int(port)
        self.delay, self.host = delay, host
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    @property
    def host_port(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> DelayProxy:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self._serve(ready))
            except BaseException as exc:  # noqa: BLE001 - reported by start()
                failure.append(exc)
                ready.set()

        self._thread = threading.Thread(target=run, name="delay-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already ended
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- in the proxy's thread --------------------------------------------------------

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.ensure_future(self._connection(reader, writer))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        server = await asyncio.start_server(accept, self.host, 0)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _connection(self, client_r: asyncio.StreamReader,
                          client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(self.target_host,
                                                               self.target_port)
        except OSError:
            client_w.close()
            return
        for writer in (client_w, server_w):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await asyncio.gather(self._pipe(client_r, server_w), self._pipe(server_r, client_w))
        finally:
            for writer in (client_w, server_w):
                writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy one direction: a reader queues (due time, chunk), a writer sends when due."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            while True:
                try:
                    chunk = await reader.read(CHUNK)
                except OSError:
                    chunk = b""
                queue.put_nowait((loop.time() + self.delay, chunk))
                if not chunk:
                    return

        async def write() -> None:
            while True:
                due, chunk = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not chunk:
                    with contextlib.suppress(OSError):
                        if writer.can_write_eof():
                            writer.write_eof()
                    return
                writer.write(chunk)
                try:
                    await writer.drain()
                except OSError:
                    return

        reading = asyncio.ensure_future(read())
        try:
            await write()
        finally:
            reading.cancel()


@contextlib.contextmanager
def delay_process(target: str, delay: float) -> Iterator[str]:
    """A ``DelayProxy`` in a child process; yields its ``"HOST:PORT"``.

    The child stops when the block ends, or when this process exits (its
    stdin reaches end of file), whichever comes first.
    """
    child = subprocess.Popen([sys.executable, __file__, target, repr(delay)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        host_port = child.stdout.readline().strip()
        if not host_port:
            raise RuntimeError(f"the delay proxy did not start (exit code {child.wait()})")
        yield host_port
    finally:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _main(argv: list[str]) -> int:
    target, delay = argv[0], float(argv[1])
    with DelayProxy(target, delay) as proxy:
        print(proxy.host_port, flush=True)
        sys.stdin.read()  # until the parent closes it or exits
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
