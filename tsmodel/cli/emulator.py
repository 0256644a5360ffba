"""``tsmodel emulator``: run the Cloud Bigtable emulator until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from tsmodel.backends.emulator import Emulator
from tsmodel.cli._common import JSON, CliError, Command, arg

__all__ = ["COMMAND"]

_Handler = Callable[[int, FrameType | None], Any]


def _run(args: argparse.Namespace) -> int:
    emu = Emulator(host=args.host, port=args.port, stop_with_parent=True)
    stop = threading.Event()
    # Ctrl-C too is a request to stop, not a KeyboardInterrupt: one raised at a
    # random point could land inside subprocess's bookkeeping (a lock left held:
    # stopping the emulator would hang) or inside the stopping itself.
    previous = _on_signals(lambda signum, frame: stop.set())
    try:
        _start(emu)
        _announce(emu.host_port, args)
        _serve(emu, stop)
    finally:
        emu.stop()
        _restore_signals(previous)
    print("tsmodel: emulator stopped", file=sys.stderr)
    return 0


def _start(emu: Emulator) -> None:
    try:
        emu.start()
        emu.collect_garbage_continuously()  # as Bigtable may collect: at any moment
    except RuntimeError as exc:  # a busy port, or an emulator that would not start
        raise CliError(str(exc)) from None


def _serve(emu: Emulator, stop: threading.Event) -> None:
    """Wait for ``stop``; fail if the emulator exits first."""
    while not stop.wait(0.2):
        if not emu.running:
            raise CliError(f"the emulator exited on its own; its output: {emu.output()}")


def _on_signals(handler: _Handler) -> dict[int, Any]:
    wanted = [signal.SIGINT, signal.SIGTERM] + (
        [signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    return {sig: signal.signal(sig, handler) for sig in wanted}


def _restore_signals(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
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
