"""The benchmark data: events of the server-metrics example, and the same cells by hand.

The model is imported from ``examples/server_metrics.py`` unchanged. The
baselines do not use tsmodel: :func:`plain_rows` spells out the row keys and
cell values the way a hand-written program would, and the benchmark checks
once that both write the very same cells.
"""

from __future__ import annotations

import importlib.util
import random
import struct
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2015, 3, 16, 19, 0, tzinfo=timezone.utc)
INTERVAL = timedelta(seconds=5)
FAMILY = "METRIC"
#: (field, qualifier, packer) in the order of the model's declaration.
COLUMNS = (
    ("cpu1_usr", b"CPU/CPU1_USR", struct.Struct(">d").pack),
    ("cpu1_nice", b"CPU/CPU1_NICE", struct.Struct(">d").pack),
    ("blk_read", b"IO/BLK_READ", struct.Struct(">q").pack),
    ("blk_wrtn", b"IO/BLK_WRTN", struct.Struct(">q").pack),
)

PlainRow = tuple[bytes, list[tuple[str, bytes, int, bytes]]]


def server_metric_model() -> Any:
    """The ``ServerMetric`` class of ``examples/server_metrics.py``."""
    module = sys.modules.get("server_metrics")
    if module is None:
        spec = importlib.util.spec_from_file_location(
            "server_metrics", ROOT / "examples" / "server_metrics.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["server_metrics"] = module
        spec.loader.exec_module(module)
    return module.ServerMetric


def hosts(count: int) -> list[str]:
    return [f"server{i}.aaa.bbb.com" for i in range(1, count + 1)]


def generate(events: int, host_count: int = 10, seed: int = 2015,
             host_names: list[str] | None = None) -> list[Any]:
    """``events`` metrics, spread evenly over ``host_count`` hosts, every 5 seconds.

    ``host_names`` replaces the hosts ``server1.aaa.bbb.com`` and so on.
    """
    model = server_metric_model()
    rng = random.Random(seed)
    names = hosts(host_count) if host_names is None else host_names
    per_host = -(-events // len(names))
    out: list[Any] = []
    for host in names:
        read = wrtn = 0
        for step in range(per_host):
            if len(out) == events:
                break
            read += rng.randrange(0, 5000)
            wrtn += rng.randrange(0, 8000)
            out.append(model(hostname=host, time=START + step * INTERVAL,
                             cpu1_usr=round(rng.random(), 2),
                             cpu1_nice=round(rng.random() / 10, 2),
                             blk_read=read, blk_wrtn=wrtn))
    return out


def end_time(events: int, host_count: int = 10) -> datetime:
    """An instant after every event's time."""
    return START + (-(-events // host_count) + 1) * INTERVAL


def epoch_ms(dt: datetime) -> int:
    return (dt - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)


def plain_rows(events: list[Any]) -> list[PlainRow]:
    """The main-table rows of ``events``, spelled out by hand: ``HOST#EPOCHMS13``."""
    out = []
    for e in events:
        ms = epoch_ms(e.time)
        key = f"{e.hostname}#{ms:013d}".encode()
        out.append((key, [(FAMILY, q, ms * 1000, pack(getattr(e, name)))
                          for name, q, pack in COLUMNS]))
    return out


def plain_current_rows(events: list[Any]) -> list[PlainRow]:
    """The current-value rows (key ``HOST``) of the newest event of each host."""
    newest: dict[str, Any] = {}
    for e in events:
        if e.hostname not in newest or e.time >= newest[e.hostname].time:
            newest[e.hostname] = e
    return [(host.encode(), cells) for host, e in newest.items()
            for _, cells in plain_rows([e])]


def row_range(host: str, start: datetime, end: datetime) -> tuple[bytes, bytes]:
    """The row keys of ``host`` from ``start`` (inclusive) to ``end`` (exclusive)."""
    return (f"{host}#{epoch_ms(start):013d}".encode(), f"{host}#{epoch_ms(end):013d}".encode())
