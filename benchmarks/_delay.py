"""A network model for the benchmarks: a TCP proxy on loopback that delays every chunk.

``DelayProxy(target, delay)`` listens on ``127.0.0.1`` (a free port) and
forwards each connection to ``target`` (``"HOST:PORT"``). Every chunk read on
one side is written to the other ``delay`` seconds after it arrived, in order
per direction; chunks in flight do not wait for each other, so the link has a
latency but no bandwidth limit. A round trip through it takes ``2 * delay``.

It also counts the requests it carries: the HTTP/2 streams the clients open
(gRPC sends one call per stream), read from the frame headers of the
client-to-server bytes (:class:`Http2Requests`; the emulator speaks
plaintext HTTP/2). ``proxy.requests`` is the total so far.

It runs an asyncio loop in a daemon thread and stops with ``close()`` or at
the end of its ``with`` block. ``run.py`` uses ``delay_process()`` instead,
which runs the same proxy in a child process (so that forwarding does not
take the measured process's GIL) that stops when its parent closes its stdin
or exits, and answers each line ``requests`` on its stdin with the count::

    with delay_process("127.0.0.1:8086", 0.005) as proxy:
        ...  # connect to proxy.host_port: 10 ms RTT to the emulator
        proxy.requests()  # gRPC calls so far

    python benchmarks/_delay.py 127.0.0.1:8086 0.005   # prints HOST:PORT
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

CHUNK = 256 * 1024
#: What an HTTP/2 client sends first (RFC 9113, section 3.4).
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_FRAME_HEADER = 9
_HEADERS = 0x1


class Http2Requests:
    """Counts the requests in the client-to-server bytes of one HTTP/2 connection.

    Feed it the bytes as they come, in chunks of any size. A request is a
    HEADERS frame that opens a stream: client streams have odd, increasing
    ids, so a HEADERS frame on a stream id above every one seen opens one
    (a client's trailers, which gRPC does not send, would not count). Payloads
    are skipped, not copied. Bytes that do not start with the HTTP/2 preface
    (TLS, HTTP/1) are not counted: ``http2`` turns false and ``requests``
    stays 0.
    """

    def __init__(self) -> None:
        self.requests = 0
        #: False once the bytes turned out not to be plaintext HTTP/2.
        self.http2 = True
        self._preface = 0  # bytes of the preface seen so far
        self._skip = 0  # payload bytes of the current frame still to skip
        self._header = b""  # the part of a frame header seen so far
        self._stream = 0  # the highest stream id opened so far

    def feed(self, data: bytes) -> None:
        if not self.http2:
            return
        i, n = 0, len(data)
        if self._preface < len(PREFACE):
            take = min(len(PREFACE) - self._preface, n)
            if data[:take] != PREFACE[self._preface:self._preface + take]:
                self.http2 = False
                return
            self._preface += take
            i = take
        while i < n:
            if self._skip:
                step = min(self._skip, n - i)
                self._skip -= step
                i += step
                continue
            need = _FRAME_HEADER - len(self._header)
            self._header += data[i:i + need]
            i += need
            if len(self._header) < _FRAME_HEADER:
                return  # the rest of the header comes with the next chunk
            header, self._header = self._header, b""
            self._skip = int.from_bytes(header[:3], "big")
            stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
            if header[3] == _HEADERS and stream > self._stream:
                self._stream = stream
                self.requests += 1


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
        self._counters: list[Http2Requests] = []

    @property
    def host_port(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def requests(self) -> int:
        """HTTP/2 requests (gRPC calls) the clients sent through the proxy so far."""
        return sum(c.requests for c in list(self._counters))

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
        counter = Http2Requests()
        self._counters.append(counter)
        try:
            await asyncio.gather(self._pipe(client_r, server_w, counter.feed),
                                 self._pipe(server_r, client_w))
        finally:
            for writer in (client_w, server_w):
                writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    seen: Callable[[bytes], None] | None = None) -> None:
        """Copy one direction: a reader queues (due time, chunk), a writer sends when due.

        ``seen`` gets each chunk as it arrives (before its delay).
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            while True:
                try:
                    chunk = await reader.read(CHUNK)
                except OSError:
                    chunk = b""
                if seen is not None:
                    seen(chunk)
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


class ProxyProcess:
    """A ``DelayProxy`` running in a child process: its address and its request count."""

    def __init__(self, child: subprocess.Popen[str], host_port: str) -> None:
        self._child = child
        self.host_port = host_port

    def requests(self) -> int:
        """HTTP/2 requests (gRPC calls) the clients sent through the proxy so far."""
        assert self._child.stdin is not None and self._child.stdout is not None
        self._child.stdin.write("requests\n")
        self._child.stdin.flush()
        return int(self._child.stdout.readline())


@contextlib.contextmanager
def delay_process(target: str, delay: float) -> Iterator[ProxyProcess]:
    """A ``DelayProxy`` in a child process, as a :class:`ProxyProcess`.

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
        yield ProxyProcess(child, host_port)
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
        for line in sys.stdin:  # until the parent closes it or exits
            if line.strip() == "requests":
                print(proxy.requests, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
