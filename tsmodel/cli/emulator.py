"""``tsmodel emulator``: run the Cloud Bigtable emulator until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from tsmodel.backends.emulator import Emulator
from tsmodel.cli._common import JSON, CliError, Command, arg

__all__ = ["COMMAND"]

_Handler = Callable[[int, FrameType | None], Any]


def _run(args: argparse.Namespace) -> int:
    emu = Emulator(host=args.host, port=args.port, stop_with_parent=True)
    stop = _StopRequest()
    # Ctrl-C too is a request to stop, not a KeyboardInterrupt: one raised at a
    # random point could land inside subprocess's bookkeeping (a lock left held:
    # stopping the emulator would hang) or inside the stopping itself.
    _on_signals(stop)
    try:
        _start(emu)
        _announce(emu.host_port, args)
        _serve(emu, stop)
    finally:
        emu.stop()
        # The command owns the process until it exits. A Ctrl-C pressed again as
        # it ends asks for a stop already made: ignored by the OS, not restored to
        # an interrupt that atexit callbacks (or the interpreter's own shutdown,
        # which puts back the default action of any Python handler) would meet.
        _on_signals(signal.SIG_IGN)
    print("tsmodel: emulator stopped", file=sys.stderr)
    return 0


def _start(emu: Emulator) -> None:
    try:
        emu.start()
        emu.collect_garbage_continuously()  # as Bigtable may collect: at any moment
    except RuntimeError as exc:  # a busy port, or an emulator that would not start
        raise CliError(str(exc)) from None


class _StopRequest:
    """A signal handler that records a request to stop, and the wait for one.

    The handler takes no lock: Python runs it in the main thread between two
    bytecodes, possibly inside the waiter's own critical section (a
    ``threading.Event`` would deadlock there, a second signal nesting on the first).
    """

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def wait(self, timeout: float) -> bool:
        """Whether a stop was requested, waiting up to ``timeout`` seconds for one."""
        deadline = time.monotonic() + timeout
        while not self.requested and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.requested


def _serve(emu: Emulator, stop: _StopRequest) -> None:
    """Wait for ``stop``; fail if the emulator exits first."""
    while not stop.wait(0.2):
        if not emu.running:
            raise CliError(f"the emulator exited on its own; its output: {emu.output()}")


def _on_signals(handler: _Handler | signal.Handlers) -> None:
    wanted = [signal.SIGINT, signal.SIGTERM] + (
        [signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    for sig in wanted:
        signal.signal(sig, handler)


def _announce(host_port: str, args: argparse.Namespace) -> None:
    url = f"bigtable-emulator://{host_port}/{args.project}/{args.instance}"
    if args.json:
        host, _, port = host_port.rpartition(":")
        print(json.dumps({"BIGTABLE_EMULATOR_HOST": host_port, "TSMODEL_URL": url,
                          "host": host, "port": int(port)}), flush=True)
    else:
        print(f"export BIGTABLE_EMULATOR_HOST={host_port}\nexport TSMODEL_URL={url}",
              flush=True)
    print(f"tsmodel: Cloud Bigtable emulator on {host_port} (in memory); Ctrl-C stops it",
          file=sys.stderr, flush=True)


COMMAND = Command(
    "emulator", "run the Cloud Bigtable emulator until Ctrl-C",
    "Start the Cloud Bigtable emulator (cbtemulator) on a free port, print the "
    "environment to point clients at it, and stop it on Ctrl-C or SIGTERM. "
    "Its data lives in memory and is lost when it stops.\n\nexample:\n"
    "  tsmodel emulator --port 8086",
    _run,
    (arg("--port", type=int, help="port to listen on (default: a free one)"),
     arg("--host", default="127.0.0.1", help="address to listen on"),
     arg("--project", default="local",
         help="project in the printed TSMODEL_URL (any name works)"),
     arg("--instance", default="local",
         help="instance in the printed TSMODEL_URL (any name works)"),
     JSON))
