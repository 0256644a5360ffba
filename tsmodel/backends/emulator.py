"""Find and run the Cloud Bigtable emulator (``cbtemulator``).

The emulator is the Google Cloud CLI's ``bigtable`` component: an in-memory
server that speaks the real Bigtable gRPC API. Tests and the ``tsmodel
emulator`` command start it on a free loopback port with `Emulator`:

    with Emulator() as emu:
        db = tsmodel.connect(f"bigtable-emulator://{emu.host_port}/project/instance")
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, NoReturn

from tsmodel.errors import EmulatorNotFoundError

__all__ = ["Emulator", "find_emulator", "ENV_BINARY"]

#: Environment variable naming the ``cbtemulator`` binary to use.
ENV_BINARY = "TSMODEL_CBTEMULATOR"

_BINARY_NAME = "cbtemulator"
_SDK_SUBPATH = Path("platform", "bigtable-emulator", _BINARY_NAME)
_COMMON_SDK_ROOTS = (
    Path("/usr/lib/google-cloud-sdk"),
    Path("/usr/share/google-cloud-sdk"),
    Path("~/google-cloud-sdk"),
)
_INSTALL_HINT = (
    "Install the Cloud Bigtable emulator: on Debian/Ubuntu `apt-get install "
    "google-cloud-cli-bigtable-emulator`, elsewhere `gcloud components install "
    f"bigtable`; or set {ENV_BINARY} to the path of the `{_BINARY_NAME}` binary."
)


def find_emulator() -> str:
    """The path of the ``cbtemulator`` binary.

    Looks at the ``TSMODEL_CBTEMULATOR`` environment variable, then ``PATH``,
    then ``platform/bigtable-emulator/`` under the Google Cloud SDK root (as
    printed by ``gcloud info``, or a common install location).

    Returns:
        The path of an executable ``cbtemulator``.

    Raises:
        EmulatorNotFoundError: no emulator was found; the message says how to
            install it.
    """
    configured = os.environ.get(ENV_BINARY)
    if configured:
        if _is_executable(Path(configured)):
            return configured
        raise EmulatorNotFoundError(
            f"{ENV_BINARY}={configured!r} is not an executable file. {_INSTALL_HINT}"
        )
    on_path = shutil.which(_BINARY_NAME)
    if on_path:
        return on_path
    for root in _sdk_roots():
        candidate = root.expanduser() / _SDK_SUBPATH
        if _is_executable(candidate):
            return str(candidate)
    raise EmulatorNotFoundError(
        f"cannot find `{_BINARY_NAME}` (looked at ${ENV_BINARY}, PATH and the Google "
        f"Cloud SDK's {_SDK_SUBPATH.parent}/). {_INSTALL_HINT}"
    )


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _sdk_roots() -> list[Path]:
    """SDK roots to search: the one ``gcloud`` reports first, then common ones."""
    roots = []
    reported = _gcloud_sdk_root()
    if reported:
        roots.append(Path(reported))
    roots.extend(_COMMON_SDK_ROOTS)
    return roots


def _gcloud_sdk_root() -> str | None:
    """The SDK root ``gcloud info`` prints, or ``None`` without a working gcloud."""
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        return None
    try:
        done = subprocess.run(
            [gcloud, "info", "--format=value(installation.sdk_root)"],
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    root = done.stdout.strip()
    return root if done.returncode == 0 and root else None


def _stop_with(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send SIGTERM to the child when the
    thread that forked it ends (Linux's ``PR_SET_PDEATHSIG``); ``None`` elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    pr_set_pdeathsig = 1

    def in_child() -> None:
        prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the call: no signal will come
            os._exit(1)

    return in_child


def _free_port(host: str) -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _port_in_use(host: str, port: int) -> bool:
    """Whether another program holds ``host:port`` (bound, or accepting connections).

    Other reasons a bind fails (an address that is not local...) are left to
    the emulator to report.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                       socket.SOCK_STREAM) as sock:
        if sys.platform != "win32":  # as the emulator does: TIME_WAIT is no obstacle
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return _accepts_connections(host, port)  # e.g. a server on the wildcard address


#: Seconds the started process must stay alive once its port answers: an
#: emulator that cannot listen exits within milliseconds, while the answer may
#: come from another program that took the port in the meantime.
_SETTLE = 0.25


class Emulator:
    """A ``cbtemulator`` process on a loopback port.

    Args:
        binary: path of ``cbtemulator``; found with `find_emulator()` when
            ``None`` (at `start()`).
        host: the address to listen on.
        port: the port to listen on; a free port is picked when ``None``.

        stop_with_parent: on Linux, have the kernel stop the emulator when
            the thread that started it ends, the process killed with it (by
            SIGKILL too, which leaves no chance to call `stop()`). Only for a
            thread that lives as long as the emulator should, such as a
            program's main thread; ``tsmodel emulator`` sets it. Ignored on
            other systems.

    The emulator keeps everything in memory: stopping it loses all data.
    """

    def __init__(self, binary: str | None = None, host: str = "127.0.0.1",
                 port: int | None = None, *, stop_with_parent: bool = False) -> None:
        self.binary = binary
        self.host = host
        self.port = port
        self.stop_with_parent = stop_with_parent
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None

    @property
    def host_port(self) -> str:
        """``"HOST:PORT"``, as ``BIGTABLE_EMULATOR_HOST`` expects it.

        Raises:
            RuntimeError: no port is known yet (not started, no port given).
        """
        if self.port is None:
            raise RuntimeError("the emulator has no port yet: call start() first")
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the emulator process is alive."""
        return self._process is not None and self._process.poll() is None

    def env(self) -> dict[str, str]:
        """The environment variables that point Bigtable clients at this emulator."""
        return {"BIGTABLE_EMULATOR_HOST": self.host_port}

    def start(self, timeout: float = 30.0) -> None:
        """Start the emulator and wait until it accepts connections.

        A given port is checked first: when another program listens on it,
        the emulator is not started. Once the port answers, the process must
        still be alive a moment later, so that another program answering in
        its place is not taken for it.

        Args:
            timeout: seconds to wait for the port to open.

        Raises:
            EmulatorNotFoundError: no binary was given and none is installed.
            RuntimeError: already running, the port is in use, the process
                exited, or the port did not open in time; the message holds
                the emulator's output.
        """
        if self.running:
            raise RuntimeError(f"the emulator is already running on {self.host_port}")
        binary = self.binary or find_emulator()
        self.binary = binary
        if self.port is None:
            self.port = _free_port(self.host)
        elif _port_in_use(self.host, self.port):
            raise RuntimeError(
                f"cannot start the emulator on {self.host_port}: the port is in use by "
                "another program; pick another port, or leave it out for a free one")
        self._output = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [binary, "-host", self.host, "-port", str(self.port)],
            stdin=subprocess.DEVNULL, stdout=self._output, stderr=subprocess.STDOUT,
            preexec_fn=_stop_with(os.getpid()) if self.stop_with_parent else None,
        )
        self._wait_until_ready(timeout)

    def _wait_until_ready(self, timeout: float) -> None:
        assert self._process is not None and self.port is not None
        deadline = time.monotonic() + timeout
        answered: float | None = None  # when the port first answered
        while True:
            code = self._process.poll()
            now = time.monotonic()
            if code is not None:
                self._fail(f"exited with status {code} before listening on {self.host_port}"
                           + (" (something answered on the port: another program may hold it)"
                              if answered is not None else ""))
            if answered is not None and now - answered >= _SETTLE:
                return
            if not _accepts_connections(self.host, self.port):
                answered = None
            elif answered is None:
                answered = now
            if answered is None and now > deadline:
                self._fail(f"did not listen on {self.host_port} within {timeout:g} s")
            time.sleep(0.05)

    def _fail(self, what: str) -> NoReturn:
        output = self.output()
        self.stop()
        raise RuntimeError(f"{self.binary} {what}; its output:\n{output}")

    def output(self) -> str:
        """What the emulator has printed so far (stdout and stderr)."""
        if self._output is None or self._output.closed:
            return ""
        self._output.flush()
        self._output.seek(0)
        return self._output.read().decode("utf-8", errors="replace")

    def collect_garbage_continuously(self) -> None:
        """Start the emulator's garbage collection now: every second or so, on every table.

        Cloud Bigtable collects the cells a GC rule collects when it gets to
        it, at any moment. ``cbtemulator`` starts collecting only once some
        call has changed a column family's GC rule; until then such cells stay,
        and a test could pass alone and fail after another that changed a
        rule. This changes the rule of a family of an instance of its own
        (``tsmodel-gc``), which starts the collection for the whole emulator.
        The pytest plugin's emulator and ``tsmodel emulator`` call it.

        Raises:
            RuntimeError: the emulator is not running.
        """
        if not self.running:
            raise RuntimeError("the emulator is not running: call start() first")
        from tsmodel.backends.bigtable import BigtableBackend
        from tsmodel.ground.base import GcRule, TableSpec

        with BigtableBackend(project="tsmodel-gc", instance="tsmodel-gc",
                             emulator_host=self.host_port) as backend:
            backend.create_table(TableSpec("gc", (("f", GcRule()),)))
            backend.create_table(TableSpec("gc", (("f", GcRule(max_versions=1)),)))

    def stop(self, grace: float = 5.0) -> None:
        """Stop the emulator: terminate, then kill after ``grace`` seconds.

        Idempotent; does nothing when the emulator is not running.
        """
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._output is not None:
            self._output.close()
            self._output = None

    def __enter__(self) -> Emulator:
        if not self.running:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"{self.host}:{self.port}" if self.port is not None else self.host
        state = "running" if self.running else "stopped"
        return f"<Emulator {where} {state}>"
