"""The ``tsmodel`` command against the Cloud Bigtable emulator.

``schema plan/apply`` run against the session's emulator (each test on an
instance of its own), as ``python -m tsmodel`` would, in the test's process
(tests/inprocess.py); ``tsmodel emulator`` runs in a process of its own,
starts its own emulator and must stop it on SIGTERM and on Ctrl-C (SIGINT).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.inprocess import Done, run_tsmodel
from tests.ports import assert_closes_when_killed, listening
from tsmodel.backends.base import GcRule, ReadRequest, RowMutation, SetCell, TableSpec
from tsmodel.backends.bigtable import BigtableBackend

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "server_metrics.py")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("TSMODEL_URL", "BIGTABLE_EMULATOR_HOST")}


def tsmodel(*args: str) -> Done:
    return run_tsmodel(*args, cwd=ROOT, env=_env())


@pytest.fixture
def instance(emulator: Any) -> tuple[str, str]:
    """``(url, instance)`` of an empty instance on the session's emulator."""
    name = "cli" + uuid.uuid4().hex[:10]
    return f"bigtable-emulator://{emulator.host_port}/tsmodel-cli/{name}", name


def _backend(emulator: Any, name: str) -> BigtableBackend:
    return BigtableBackend(project="tsmodel-cli", instance=name,
                           emulator_host=emulator.host_port)


def test_schema_plan_apply_on_the_emulator(emulator: Any, instance: tuple[str, str]) -> None:
    url, name = instance
    pending = tsmodel("schema", "plan", EXAMPLE, "--url", url, "--check")
    assert pending.returncode == 3, pending.stderr
    assert "create table  METRIC" in pending.stdout
    applied = tsmodel("schema", "apply", EXAMPLE, "--url", url, "--json")
    assert applied.returncode == 0, applied.stderr
    assert "discarded" not in applied.stderr  # the emulator's tables outlive the command
    assert [c["table"] for c in json.loads(applied.stdout)["applied"]] == [
        "METRIC", "CURRENT_METRIC"]
    done = tsmodel("schema", "plan", EXAMPLE, "--url", url, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("No changes")
    backend = _backend(emulator, name)
    try:
        assert backend.list_tables() == ["CURRENT_METRIC", "METRIC"]
    finally:
        backend.close()


def test_schema_changes_rules_and_drops_on_the_emulator(emulator: Any,
                                                        instance: tuple[str, str]) -> None:
    url, name = instance
    backend = _backend(emulator, name)
    try:
        backend.create_table(TableSpec("METRIC", (("METRIC", GcRule(max_versions=4)),)))
        backend.create_table(TableSpec("SCRATCH", (("S", GcRule()),)))
        plan = tsmodel("schema", "plan", EXAMPLE, "--url", url)
        assert "change gc rule  METRIC          METRIC  max_versions=4 -> max_versions=1" \
            in plan.stdout, plan.stdout
        assert "left alone: SCRATCH (--drop-table NAME deletes one" in plan.stdout
        assert tsmodel("schema", "apply", EXAMPLE, "--url", url, "--drop").returncode == 0
        assert backend.list_tables() == ["CURRENT_METRIC", "METRIC", "SCRATCH"]
        dropped = tsmodel("schema", "apply", EXAMPLE, "--url", url, "--drop-table", "SCRATCH")
        assert dropped.returncode == 0, dropped.stderr
        assert backend.list_tables() == ["CURRENT_METRIC", "METRIC"]
        assert dict(backend.describe_table("METRIC").families) == {
            "METRIC": GcRule(max_versions=1)}
    finally:
        backend.close()


def _one_line_error(done: Done) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tsmodel: error: ")
    return line


def test_an_unreachable_emulator_is_one_line_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    started = time.monotonic()
    line = _one_line_error(tsmodel("schema", "plan", EXAMPLE, "--url",
                                   f"bigtable-emulator://127.0.0.1:{port}/p/i"))
    assert f"cannot reach the Bigtable emulator at 127.0.0.1:{port}" in line, line
    assert ": nothing listens there (" in line, line
    assert line.endswith("); 'tsmodel emulator' starts one"), line
    assert time.monotonic() - started < 30  # not the client's minute of retries


def test_an_emulator_that_does_not_answer_times_out() -> None:
    with socket.socket() as sock:  # accepts connections, never speaks gRPC
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        started = time.monotonic()
        for action in ("plan", "apply"):
            line = _one_line_error(tsmodel("schema", action, EXAMPLE, "--url",
                                           f"bigtable-emulator://127.0.0.1:{port}/p/i",
                                           "--connect-timeout", "0.5"))
            assert f"the Bigtable emulator at 127.0.0.1:{port} does not answer" in line, line
            assert "within 0.5 s" in line
            assert "a slow one needs a longer --connect-timeout (now 0.5 s)" in line
        assert time.monotonic() - started < 30


# -- tsmodel emulator --------------------------------------------------------------------


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tsmodel", "emulator", *args], cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _first_line(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()),  # type: ignore[union-attr]
                              daemon=True)
    reader.start()
    reader.join(timeout)
    if not lines:
        proc.kill()
        pytest.fail(f"tsmodel emulator printed nothing in {timeout} s")
    return lines[0].strip()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_the_emulator_command_serves_until_stopped(emulator: Any, stop: signal.Signals) -> None:
    proc = _start()
    try:
        line = _first_line(proc)
        assert line.startswith("export BIGTABLE_EMULATOR_HOST=127.0.0.1:"), line
        host_port = line.split("=", 1)[1]
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == (
            f"export TSMODEL_URL=bigtable-emulator://{host_port}/local/local")
        backend = BigtableBackend(project="p", instance="i", emulator_host=host_port)
        try:
            backend.create_table(TableSpec("T", (("F", GcRule(max_versions=1)),)))
            assert backend.list_tables() == ["T"]
            # It collects garbage from the start, as Bigtable may at any moment.
            backend.mutate_rows("T", [RowMutation(b"r", (SetCell("F", b"q", 1_000, b"old"),
                                                         SetCell("F", b"q", 2_000, b"new")))])
            deadline = time.monotonic() + 20  # the emulator collects every 0.5-1.5 s
            while [c.value for row in backend.read_rows(ReadRequest("T"))
                   for c in row.cells] != [b"new"]:
                assert time.monotonic() < deadline, "the version past the limit stayed"
                time.sleep(0.1)
        finally:
            backend.close()
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == 0
        assert not listening(host_port), "the emulator still listens after the command ended"
        assert "emulator stopped" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_pressed_again_and_again_still_stops_cleanly(emulator: Any) -> None:
    # Ctrl-C is a request to stop, however often and whenever it comes until the
    # command says it stopped: not an exception that may land inside the stopping
    # itself (or inside subprocess's bookkeeping, leaving a lock held: a hang).
    proc = _start()
    errors: list[str] = []
    try:
        host_port = _first_line(proc).split("=", 1)[1]
        assert proc.stderr is not None
        reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
        reader.start()
        deadline = time.monotonic() + 30
        while not any("emulator stopped" in line for line in errors) and proc.poll() is None:
            assert time.monotonic() < deadline, "the command did not stop"
            proc.send_signal(signal.SIGINT)
            time.sleep(0.0005)
        assert proc.wait(timeout=30) == 0, "".join(errors)
        reader.join(10)
        assert "Traceback" not in "".join(errors), "".join(errors)
        assert not listening(host_port), "the emulator still listens after the command ended"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


_AFTERWARDS = """
import os, signal, sys, time
from tsmodel.cli import main
status = main(["emulator"])
os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C pressed once more, as the command ends
time.sleep(0.5)
print("still here", file=sys.stderr)
sys.exit(status)
"""


def test_ctrl_c_after_the_command_stopped_is_not_an_interrupt(emulator: Any) -> None:
    # Pressed twice, Ctrl-C's second press may come after the emulator stopped but
    # before the process has exited: it must not raise KeyboardInterrupt in whatever
    # runs then (atexit callbacks, a coverage save) and turn a clean stop into a failure.
    proc = subprocess.Popen([sys.executable, "-c", _AFTERWARDS], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _first_line(proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "still here" in err and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_emulator_command_takes_a_port_and_prints_json(emulator: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = _start("--port", str(port), "--json", "--project", "p", "--instance", "i")
    try:
        info = json.loads(_first_line(proc))
        assert info == {"BIGTABLE_EMULATOR_HOST": f"127.0.0.1:{port}",
                        "TSMODEL_URL": f"bigtable-emulator://127.0.0.1:{port}/p/i",
                        "host": "127.0.0.1", "port": port}
        assert listening(f"127.0.0.1:{port}")
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="the emulator stops with its parent on Linux only")
def test_the_emulator_stops_when_the_command_is_killed(emulator: Any) -> None:
    # SIGKILL leaves the command no chance to stop its child: the kernel must.
    proc = _start()
    try:
        host_port = _first_line(proc).split("=", 1)[1]
        assert_closes_when_killed(proc, host_port, "the emulator outlived the killed command")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_emulator_command_reports_a_busy_port(emulator: Any) -> None:
    host, _, port = emulator.host_port.rpartition(":")
    line = _one_line_error(tsmodel("emulator", "--port", port))
    assert f"cannot start the emulator on 127.0.0.1:{port}: the port is in use" in line, line
