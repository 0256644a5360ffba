"""Progress of long saves and deletes: the ``progress=`` callback, and the bar.

The callback's counts are checked against what was asked (plain counting:
the entities given), on both backends, sync and async. The bar is checked
in a process of its own whose standard error is a pseudo-terminal: shown
there, never when standard error is a pipe or a file.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import textwrap
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tsmodel.backends.base import Backend

UTC = timezone.utc
T0 = datetime(2024, 1, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
BATCH = 7
N = 50  # 8 batches of 7, the last of 1


@pytest.fixture
def model(backend: Backend) -> Iterator[type]:
    name = "pg_" + uuid.uuid4().hex[:10]

    @ts.model(table=name, family="f", current=f"{name}_C")
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        value: float = ts.value()

    conn = ts.Connection(backend)
    conn.create_tables(Reading)
    yield Reading
    conn.drop_tables(Reading)


def readings(model: type, n: int = N) -> list[Any]:
    return [model(sensor=f"s{i % 3}", time=T0 + timedelta(seconds=i), value=i / 2)
            for i in range(n)]


def check_counts(calls: list[tuple[int, int | None]], total: int | None, n: int) -> None:
    """Monotonic counts, one call per batch, ending at n; the total as given."""
    dones = [done for done, _ in calls]
    assert dones == sorted(dones) and len(set(dones)) == len(dones), dones
    steps = [b - a for a, b in zip([0, *dones], dones, strict=False)]
    assert all(1 <= s <= BATCH for s in steps) and sum(steps) == n, steps
    assert dones[-1] == n
    assert {t for _, t in calls} == {total}


def test_a_save_reports_each_batch_with_the_total(backend: Backend, model: type) -> None:
    conn = ts.Connection(backend, batch_size=BATCH)
    calls: list[tuple[int, int | None]] = []
    result = conn.save_all(readings(model), progress=lambda done, total: calls.append(
        (done, total)))
    assert len(result) == N
    check_counts(calls, N, N)
    assert len(calls) == -(-N // BATCH)


def test_a_streamed_save_of_a_generator_has_no_total(backend: Backend, model: type) -> None:
    conn = ts.Connection(backend, batch_size=BATCH)
    calls: list[tuple[int, int | None]] = []
    conn.save_all((r for r in readings(model)), validate_first=False,
                  progress=lambda done, total: calls.append((done, total)))
    check_counts(calls, None, N)
    calls.clear()
    conn.save_all(readings(model), validate_first=False,  # a list has a length
                  progress=lambda done, total: calls.append((done, total)))
    check_counts(calls, N, N)


def test_a_delete_reports_each_batch(backend: Backend, model: type) -> None:
    conn = ts.Connection(backend, batch_size=BATCH)
    events = readings(model)
    conn.save_all(events)
    calls: list[tuple[int, int | None]] = []
    conn.delete_all(events[:30], progress=lambda done, total: calls.append((done, total)))
    check_counts(calls, 30, 30)
    assert len(list(model.range(T0, T0 + timedelta(hours=1), sensor="s0").using(conn))) == 7


async def test_async_saves_and_deletes_report_too(backend: Backend, model: type) -> None:
    async with asynchronous(backend) as ab:
        adb = ts.AsyncConnection(ab, batch_size=BATCH)
        calls: list[tuple[int, int | None]] = []
        await adb.save_all(readings(model), progress=lambda d, t: calls.append((d, t)))
        check_counts(calls, N, N)
        calls.clear()
        await adb.delete_all(readings(model)[:10], progress=lambda d, t: calls.append((d, t)))
        check_counts(calls, 10, 10)


def test_nothing_is_printed_when_stderr_is_no_terminal(
        backend: Backend, model: type, capfd: pytest.CaptureFixture[str]) -> None:
    conn = ts.Connection(backend, batch_size=BATCH)
    events = readings(model)
    conn.save_all(events)
    conn.save_all(events, progress=None)
    conn.delete_all(events)
    assert capfd.readouterr() == ("", "")


def test_a_bad_progress_argument_is_refused(backend: Backend, model: type) -> None:
    conn = ts.Connection(backend)
    with pytest.raises(TypeError, match=r"progress= takes True, False, None or a callable"):
        conn.save_all(readings(model), progress="yes")  # type: ignore[arg-type]


SCRIPT = '''
from datetime import datetime, timedelta, timezone
import sys
import tsmodel as ts
from tsmodel.run import progress

progress.BAR_DELAY = 0  # a quick save: no waiting for the bar
t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)

@ts.model(table="R", family="f")
class R:
    k: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    v: int = ts.value()

db = ts.connect(default=False, batch_size=100)
db.create_tables(R)
events = [R(k="a", time=t0 + timedelta(seconds=i), v=i) for i in range(1000)]
db.save_all(events, progress=None if sys.argv[1] == "default" else False)
db.delete_all(events[:500], progress=None if sys.argv[1] == "default" else False)
print("done", file=sys.stderr)
'''


def on_a_terminal(argument: str) -> str:
    """What the script writes to standard error when it is a pseudo-terminal."""
    leader, follower = pty.openpty()
    # A new pseudo-terminal is 0 columns wide; a real one is not.
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        done = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SCRIPT), argument],
                                stderr=follower, stdout=subprocess.DEVNULL, cwd=ROOT)
        os.close(follower)
        chunks = []
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed: the process ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert done.wait(timeout=60) == 0
    finally:
        os.close(leader)
    return b"".join(chunks).decode("utf-8", errors="replace")


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_a_terminal_shows_a_bar_with_the_total(backend: Backend) -> None:
    shown = on_a_terminal("default")
    assert "save: 100%" in shown and "1000/1000" in shown, shown
    assert "delete: 100%" in shown and "500/500" in shown, shown
    quiet = on_a_terminal("off")
    assert "%" not in quiet and quiet.strip() == "done", quiet
