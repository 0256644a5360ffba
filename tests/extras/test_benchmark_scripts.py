"""The benchmark scripts still run against the code they measure.

They call tsmodel's API from outside the package, so a change of that API
breaks them with nothing else failing (``qs._records()`` went with the
query runners' split and broke (i) and ``benchmarks/decode.py`` unseen).
Each figure runs here once at a tiny size, on an emulator of its own: the
figures themselves are not checked (the machine is shared and noisy), only
that each script finishes and prints the rows its letter stands for.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tsmodel.backends.emulator import Emulator

pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

#: The rows each letter of ``run.py --only`` prints (the table's first column).
ROWS = {
    "a": ("a", "a0", "a1", "a2"),
    "b": ("b", "b0", "b1", "b2"),
    "c": ("c1", "c2"),
    "d": ("d1", "d2", "d3", "d4"),
    "e": ("e",),
    "f": ("f1", "f2", "f3"),
    "g": ("g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8"),
    "h": ("h",),
    "i": ("i1", "i2", "i3"),
    "p": ("p1t", "p2t", "p3t", "p1s", "p2s", "p3s"),
}

TINY = ["--quick", "--runs", "3", "--events", "600", "--lookups", "20", "--saves", "3",
        "--stream-rows", "3000", "--frame-rows", "500,1000", "--salted-rows", "100"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(BENCHMARKS))
    return subprocess.run([sys.executable, *args], cwd=BENCHMARKS, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("letter", sorted(ROWS))
def test_each_figure_of_run_py_runs(letter: str, tsmodel_emulator: Emulator) -> None:
    rtt = ["--rtt", "2"] if letter in "fgh" else []  # a and b: their limit rows too
    # An emulator of its own, as run.py starts one: the figures expect fresh tables
    # (another letter's rows in the session's emulator change what (i) reads).
    with Emulator(tsmodel_emulator.binary) as own:
        done = _run("run.py", *TINY, "--only", letter, "--emulator", own.host_port, *rtt)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    # through the proxy a row is labelled with its round-trip time (``a@2ms``)
    printed |= {label.split("@")[0] for label in printed}
    missing = [row for row in ROWS[letter] if row not in printed]
    assert not missing, f"rows {missing} not printed:\n{done.stdout[-3000:]}"


def test_decode_py_runs() -> None:
    done = _run("decode.py", "--events", "500", "--runs", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    for measure in ("records", "instances", "arrow", "columns"):
        assert measure in done.stdout, done.stdout
