"""(e) peak memory of a streaming read on the embedded store, one child process per figure.

``python _memory.py build PATH ROWS`` writes ROWS server-metric events into a
SQLite file; ``python _memory.py stream PATH ROWS`` streams the first ROWS of
them through ``Model.range(...)`` (a QuerySet, into model instances) and
prints, as JSON, the resident memory before the read and its peak during the
read (Linux ``VmHWM``, reset first); ``hold`` does the same with ``list(...)``,
which keeps every instance, for contrast.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _data  # noqa: E402

import tsmodel as ts  # noqa: E402
from tsmodel.backends.base import RowMutation, SetCell  # noqa: E402
from tsmodel.backends.embedded import EmbeddedBackend  # noqa: E402

HOSTS = 10


def _status(field: str) -> int:
    """A field of /proc/self/status, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def build(path: str, rows: int) -> None:
    model = _data.server_metric_model()
    backend = EmbeddedBackend(path)
    conn = ts.Connection(backend)
    conn.create_tables(model)
    per_host = rows // HOSTS
    table = model.__tsmodel__.table
    for host in _data.hosts(HOSTS):
        batch = []
        for step in range(per_host):
            ms = _data.epoch_ms(_data.START + step * _data.INTERVAL)
            key = f"{host}#{ms:013d}".encode()
            values = (step / per_host, step / per_host / 10, step * 100, step * 200)
            batch.append(RowMutation(key, tuple(
                SetCell(_data.FAMILY, q, ms * 1000, pack(v))
                for (_, q, pack), v in zip(_data.COLUMNS, values, strict=True))))
            if len(batch) == 20_000:
                assert all(o.ok for o in backend.mutate_rows(table, batch))
                batch = []
        if batch:
            assert all(o.ok for o in backend.mutate_rows(table, batch))
    conn.close()


def read(path: str, rows: int, hold: bool) -> dict[str, float]:
    model = _data.server_metric_model()
    conn = ts.Connection(EmbeddedBackend(path))
    end = _data.START + (rows // HOSTS) * _data.INTERVAL
    queries = [model.range(_data.START, end, hostname=h).using(conn) for h in _data.hosts(HOSTS)]
    _reset_peak()
    before = _status("VmRSS")
    start = time.perf_counter()
    if hold:
        held = [list(q) for q in queries]
        count = sum(map(len, held))
    else:
        count = sum(1 for q in queries for _ in q)
    seconds = time.perf_counter() - start
    peak = _status("VmHWM")
    conn.close()
    assert count == rows // HOSTS * HOSTS, count
    return {"rows": count, "seconds": seconds, "before": before, "peak": peak}


if __name__ == "__main__":
    mode, db, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "build":
        build(db, n)
    else:
        print(json.dumps(read(db, n, hold=mode == "hold")))
