"""Finding and supervising ``cbtemulator``, without the real emulator.

The lookup order is steered through the environment and tmp_path; process
supervision runs tiny stand-in scripts, so nothing here needs the Cloud SDK.
"""

from __future__ import annotations

import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tsmodel.backends import emulator as emulator_module
from tsmodel.backends.emulator import ENV_BINARY, Emulator, find_emulator
from tsmodel.errors import EmulatorNotFoundError, TsModelError

needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="stand-in scripts are sh")


def make_executable(path: Path, script: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def no_emulator_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No env variable, an empty PATH and an SDK root without the emulator."""
    monkeypatch.delenv(ENV_BINARY, raising=False)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    sdk = tmp_path / "sdk"
    monkeypatch.setattr(emulator_module, "_gcloud_sdk_root", lambda: None)
    monkeypatch.setattr(emulator_module, "_COMMON_SDK_ROOTS", (sdk,))
    return sdk


# -- find_emulator -------------------------------------------------------------


def test_env_variable_pointing_nowhere_raises(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "no" / "cbtemulator"
    monkeypatch.setenv(ENV_BINARY, str(missing))
    with pytest.raises(EmulatorNotFoundError) as info:
        find_emulator()
    message = str(info.value)
    assert ENV_BINARY in message and str(missing) in message
    assert "google-cloud-cli-bigtable-emulator" in message
    assert "gcloud components install bigtable" in message


def test_env_variable_wins_over_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    chosen = make_executable(tmp_path / "mine" / "cbtemulator")
    on_path = make_executable(tmp_path / "bin" / "cbtemulator")
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setenv(ENV_BINARY, str(chosen))
    assert find_emulator() == str(chosen)


@needs_posix
def test_env_variable_pointing_to_non_executable_raises(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plain = tmp_path / "cbtemulator"
    plain.write_text("not a program")
    monkeypatch.setenv(ENV_BINARY, str(plain))
    with pytest.raises(EmulatorNotFoundError, match="not an executable"):
        find_emulator()


def test_found_on_path(no_emulator_anywhere: Path, monkeypatch: pytest.MonkeyPatch,
                       tmp_path: Path) -> None:
    binary = make_executable(tmp_path / "bin" / "cbtemulator")
    monkeypatch.setenv("PATH", str(binary.parent))
    assert Path(find_emulator()) == binary


def test_found_under_common_sdk_root(no_emulator_anywhere: Path) -> None:
    sdk_binary = no_emulator_anywhere / "platform" / "bigtable-emulator" / "cbtemulator"
    binary = make_executable(sdk_binary)
    assert find_emulator() == str(binary)


def test_found_under_sdk_root_reported_by_gcloud(
    no_emulator_anywhere: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reported = tmp_path / "gcloud-sdk"
    binary = make_executable(reported / "platform" / "bigtable-emulator" / "cbtemulator")
    monkeypatch.setattr(emulator_module, "_gcloud_sdk_root", lambda: str(reported))
    assert find_emulator() == str(binary)


def test_nothing_found_says_how_to_install(no_emulator_anywhere: Path) -> None:
    with pytest.raises(EmulatorNotFoundError) as info:
        find_emulator()
    assert isinstance(info.value, TsModelError)
    assert isinstance(info.value, FileNotFoundError)
    message = str(info.value)
    assert "apt-get install google-cloud-cli-bigtable-emulator" in message
    assert "gcloud components install bigtable" in message
    assert ENV_BINARY in message


def test_sdk_root_without_gcloud(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert emulator_module._gcloud_sdk_root() is None


# -- Emulator ----------------------------------------------------------------


def test_host_port_needs_a_port() -> None:
    emu = Emulator("/nonexistent/cbtemulator")
    with pytest.raises(RuntimeError, match="start"):
        _ = emu.host_port
    assert "stopped" in repr(emu)


def test_env_and_host_port_with_explicit_port() -> None:
    emu = Emulator("/nonexistent/cbtemulator", host="127.0.0.1", port=8086)
    assert emu.host_port == "127.0.0.1:8086"
    assert emu.env() == {"BIGTABLE_EMULATOR_HOST": "127.0.0.1:8086"}
    assert not emu.running


def test_stop_before_start_is_harmless() -> None:
    emu = Emulator("/nonexistent/cbtemulator")
    emu.stop()
    emu.stop()


def test_start_without_any_emulator_raises(no_emulator_anywhere: Path) -> None:
    with pytest.raises(EmulatorNotFoundError):
        Emulator().start()


@needs_posix
def test_start_reports_output_of_a_dying_process(tmp_path: Path) -> None:
    binary = make_executable(
        tmp_path / "cbtemulator", "#!/bin/sh\necho \"bad flag: $*\"\nexit 3\n"
    )
    emu = Emulator(str(binary))
    with pytest.raises(RuntimeError) as info:
        emu.start(timeout=10)
    message = str(info.value)
    assert "status 3" in message
    assert "bad flag: -host 127.0.0.1 -port" in message
    assert not emu.running


@needs_posix
def test_start_times_out_when_port_never_opens(tmp_path: Path) -> None:
    binary = make_executable(tmp_path / "cbtemulator", "#!/bin/sh\necho waiting\nexec sleep 30\n")
    emu = Emulator(str(binary))
    with pytest.raises(RuntimeError, match="did not listen") as info:
        emu.start(timeout=0.5)
    assert "waiting" in str(info.value)
    assert not emu.running  # the stuck process was stopped


@needs_posix
def test_stop_kills_a_process_that_ignores_terminate(tmp_path: Path) -> None:
    # Listens with Python (so start() succeeds) and ignores SIGTERM.
    script = (
        f"#!{sys.executable}\n"
        "import signal, socket, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "s = socket.socket(); s.bind((sys.argv[2], int(sys.argv[4]))); s.listen()\n"
        "time.sleep(60)\n"
    )
    binary = make_executable(tmp_path / "cbtemulator", script)
    emu = Emulator(str(binary))
    emu.start(timeout=20)
    assert emu.running
    process = emu._process
    assert process is not None
    emu.stop(grace=0.5)
    assert process.returncode is not None and process.returncode != 0
    assert not emu.running
    emu.stop()



# -- a busy port -----------------------------------------------------------------------


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another program listens on (and accepts connections)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@needs_posix
def test_start_refuses_a_busy_port_without_starting(tmp_path: Path, busy_port: int) -> None:
    marker = tmp_path / "started"
    binary = make_executable(tmp_path / "cbtemulator",
                             f"#!/bin/sh\ntouch {marker}\nexec sleep 30\n")
    emu = Emulator(str(binary), port=busy_port)
    with pytest.raises(RuntimeError) as info:
        emu.start(timeout=10)
    message = str(info.value)
    assert f"cannot start the emulator on 127.0.0.1:{busy_port}: the port is in use" in message
    assert "pick another port" in message
    assert not marker.exists()  # nothing was started
    assert not emu.running


@needs_posix
def test_start_is_not_fooled_by_another_server_on_the_port(
    tmp_path: Path, busy_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The port is taken between the check and the start: the other server answers
    # at once, while the emulator fails to listen and exits a moment later.
    monkeypatch.setattr(emulator_module, "_port_in_use", lambda host, port: False)
    binary = make_executable(
        tmp_path / "cbtemulator",
        "#!/bin/sh\nsleep 0.1\necho \"failed to start emulator: bind: address already in use\"\n"
        "exit 1\n",
    )
    emu = Emulator(str(binary), port=busy_port)
    with pytest.raises(RuntimeError) as info:
        emu.start(timeout=10)
    message = str(info.value)
    assert "exited with status 1" in message
    assert "another program may hold it" in message
    assert "address already in use" in message
    assert not emu.running


def test_port_in_use() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert emulator_module._port_in_use("127.0.0.1", port)  # bound
        sock.listen()
        assert emulator_module._port_in_use("127.0.0.1", port)  # listening
    assert not emulator_module._port_in_use("127.0.0.1", port)
