"""(a1, a2) ``save_frame`` of a large DataFrame on the emulator, one child process per size.

``python _frames.py HOST:PORT ROWS`` builds a pandas DataFrame of ROWS
server-metric events (10 hosts, one event every 5 s each, built with numpy:
no model instance exists before the save), saves it with
``Connection.save_frame`` into fresh ``METRIC`` and ``CURRENT_METRIC`` tables
and prints, as JSON, the save's time and the process's resident memory: before
the save (the frame built), at its peak during the save (Linux ``VmHWM``,
reset first), and after it with the result held (a ``FrameResult``: counts,
and the rows not written), then once the result is let go.

Then, once the memory is measured, the write limit of the frame's own cells:
the same rows spelled out by hand as (a0)'s, sent pre-serialized on a raw
channel (the emulator writes a row more slowly as a table grows, so (a0)'s
limit of 50,000 events in a fresh table is not a million rows' limit).

`frame_results()` runs it at each size and makes the rows of ``run.py``: the
frame's events per second as a share of the write limit of its cells (and of
(a0)'s, in a note), and the peak's growth over the frame's own memory at the
largest size against the smallest.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

HOSTS = 10
MIB = 1024 * 1024


def _status(field: str) -> int:
    """A field of /proc/self/status, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def frame(rows: int) -> Any:
    """``rows`` server-metric events as a pandas DataFrame, a column per field."""
    import _data
    import numpy as np
    import pandas as pd

    per_host = -(-rows // HOSTS)
    rng = np.random.default_rng(2015)
    step = np.tile(np.arange(per_host, dtype=np.int64), HOSTS)[:rows]
    start_ms = int(_data.START.timestamp() * 1000)
    return pd.DataFrame({
        "hostname": np.repeat(np.array(_data.hosts(HOSTS), dtype=object), per_host)[:rows],
        "time": pd.to_datetime(start_ms + step * 5000, unit="ms", utc=True),
        "cpu1_usr": rng.integers(0, 100, rows) / 100,
        "cpu1_nice": rng.integers(0, 10, rows) / 100,
        "blk_read": rng.integers(0, 5000, rows).cumsum(),
        "blk_wrtn": rng.integers(0, 8000, rows).cumsum(),
    })


def child(host_port: str, rows: int) -> dict[str, float]:
    import _data

    import tsmodel as ts

    model = _data.server_metric_model()
    data = frame(rows)
    conn = ts.connect(f"bigtable-emulator://{host_port}/bench/bench", default=False)
    conn.drop_tables(model)
    conn.create_tables(model)
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to the current RSS
    before = _status("VmRSS")
    start = time.perf_counter()
    result = conn.save_frame(model, data, progress=False)
    seconds = time.perf_counter() - start
    peak = _status("VmHWM")
    held = _status("VmRSS")
    assert result.ok and len(result) == rows
    del result
    gc.collect()
    freed = _status("VmRSS")
    limit = _limit_seconds(conn, host_port, model, data)
    conn.drop_tables(model)
    conn.close()
    return {"rows": rows, "seconds": seconds, "before": before, "peak": peak, "held": held,
            "freed": freed, "limit_seconds": limit}


def _limit_seconds(conn: Any, host_port: str, model: Any, data: Any) -> float:
    """The write limit of the frame's own cells (after the memory figures): its rows
    spelled out by hand as (a0)'s are, in the frame's order, sent pre-serialized
    on a raw channel (`_bigtable.limit_write()`). The emulator takes a row more
    slowly as a table grows: a limit of 50,000 events is not that of a million."""
    from collections import namedtuple

    from _bigtable import LIMIT_CURRENT, LIMIT_MAIN, limit_requests, limit_write, same_cells

    from tsmodel.backends.base import GcRule

    event = namedtuple("event", list(data.columns))  # type: ignore[misc]
    columns = [data[c].dt.to_pydatetime().tolist() if c == "time" else data[c].tolist()
               for c in data.columns]
    requests = limit_requests(list(map(event, *columns)))
    del columns
    families = tuple((f, GcRule(max_versions=1)) for f in model.__tsmodel__.families)
    seconds = limit_write(conn.backend, host_port, families, requests)
    # The first rows of the main tables: a million rows read back would take minutes.
    same_cells(conn.backend, model, (LIMIT_MAIN, 20_000), (LIMIT_CURRENT, None))
    for name in (LIMIT_MAIN, LIMIT_CURRENT):
        conn.backend.delete_table(name)
    return seconds


def measure(host_port: str, rows: int) -> dict[str, float]:
    """`child()` in a process of its own."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}
    done = subprocess.run([sys.executable, __file__, host_port, str(rows)], env=env,
                          capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def frame_results(host_port: str, limit: float, sizes: list[int],
                  log: Callable[[str], None]) -> list[Any]:
    """(a1) the largest frame's events/s against ``limit`` (a0's write limit, events/s);
    (a2) the peak memory of the save over the frame's own, largest size against smallest."""
    from _common import Result

    figures = []
    for rows in sizes:
        f = measure(host_port, rows)
        figures.append(f)
        log(f"  (a1) save_frame of {rows:,} rows: {rows / f['seconds']:,.0f} events/s, peak "
            f"{(f['peak'] - f['before']) / MIB:,.0f} MiB over the frame's")
    big, small = figures[-1], figures[0]
    rate = big["rows"] / big["seconds"]
    own = big["rows"] / big["limit_seconds"]
    a1 = Result("a1", f"save_frame of a {big['rows']:,}-row DataFrame / the write limit of "
                "its cells", "events/s", rate, own, rate / own, ">= 0.5", rate / own >= 0.5, 1)
    for f in figures:
        f_rate, f_limit = f["rows"] / f["seconds"], f["rows"] / f["limit_seconds"]
        a1.notes.append(f"{f['rows']:,} rows: {f_rate:,.0f} events/s, the write limit of the "
                        f"same cells {f_limit:,.0f} ({f_rate / f_limit:.2f}); against (a0)'s "
                        f"limit of {limit:,.0f} (fresh tables), {f_rate / limit:.2f}")
    growth = [(f["peak"] - f["before"]) / MIB for f in figures]
    a2 = Result("a2", f"save_frame: peak memory over the frame's, {big['rows']:,} rows / "
                f"{small['rows']:,} rows", "MiB", growth[-1], growth[0],
                growth[-1] / growth[0], "flat (<= 1.5x)", growth[-1] / growth[0] <= 1.5, 1)
    for f, g in zip(figures, growth, strict=True):
        a2.notes.append(f"{f['rows']:,} rows: {f['rows'] / f['seconds']:,.0f} events/s; peak "
                        f"{g:,.0f} MiB over the frame's; "
                        f"{(f['held'] - f['freed']) / MIB:,.0f} MiB given back to the system "
                        "once the result was let go")
    # The peak is the working memory (chunks, batches in flight) plus the result,
    # which keeps nothing per row written: a line through the sizes, flat when met.
    per_row = (growth[-1] - growth[0]) * MIB / (big["rows"] - small["rows"])
    a2.notes.append(f"the peak grows by {per_row:,.0f} bytes a row (the result keeps "
                    "nothing per row written); what does not grow with the rows: "
                    f"{growth[0] - per_row * small['rows'] / MIB:,.0f} MiB")
    return [a1, a2]


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], int(sys.argv[2]))))
