"""Decoding read rows into records, instances and Arrow, against another checkout.

    python benchmarks/decode.py --baseline /path/to/main   # this checkout vs main
    python benchmarks/decode.py                             # this checkout alone

The one decoding of rows (`TableCodec.records`: the row key's segments, the
layout's reader, the value codecs) is what every reader pays per event. This
script times it, on rows read once from the embedded store (in memory) and
replayed (``_columnar.Replay``), so that nothing but the decoding is timed:

* ``records``: ``sum(1 for _ in qs._stream(sink="records"))``, the records alone;
* ``instances``: ``list(qs)``, the model's instances of those records;
* ``arrow``: ``qs.to_arrow()`` (when pyarrow is importable);
* ``columns``: the columnar decoding alone, the replayed rows straight into
  one Arrow record batch (``ArrowColumns.rows_batch``, where the checkout
  has it), without the query's merge.
* ``batch``: the same from the rows in columns, as the chunk merger hands
  them (``merge_batches``: a ``CellBatch``, built before the clock starts),
  into one record batch (``ArrowColumns.cells_batch``, where the checkout
  has it and the query reads batches): no ``Row`` object in between.
* ``merge rows`` / ``merge batches`` (with the Bigtable extra's protobuf):
  the chunk merger alone, the same rows as ReadRows responses (parsed into
  the merger's view before the clock starts) merged into rows, or into
  batches, as the Bigtable backend reads them.

Under the table, each checkout's ``columns`` and ``arrow`` per instance.

Three models: ``ServerMetric`` (a row per event, key ``HOSTNAME#13-digit ms``),
the same metrics in hourly bucket rows (``layout=ts.cells()``, 720
events per row), and one of them in hourly buckets of a column per event
(``layout=ts.columns()``, the value in the qualifier). Each checkout runs in
a subprocess of its own, with ``PYTHONPATH`` set to it (its ``tsmodel`` is
imported, this directory's helpers); the figures are events per CPU second, the median of ``--runs``
runs; the ratio is this checkout's median over the baseline's. The test
suite runs it once at a tiny size (tests/extras/test_benchmark_scripts.py),
to see that it still runs, not to time anything.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any

HERE = Path(__file__).resolve().parent
#: What is timed, in the order printed.
MEASURES = ("records", "instances", "arrow", "columns", "batch", "row instances",
            "batch instances", "merge rows", "merge batches")


def _cpu(fn: Callable[[], Any]) -> float:
    """CPU seconds ``fn()`` took (after a full garbage collection)."""
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def _hourly_model() -> Any:
    import tsmodel as ts

    @ts.model(table="METRIC_HOURLY", family="METRIC", layout=ts.cells(),
              max_rate=1 / 5)
    class HourlyMetric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        cpu1_usr: float = ts.value("CPU/CPU1_USR")
        cpu1_nice: float = ts.value("CPU/CPU1_NICE")
        blk_read: int = ts.value("IO/BLK_READ")
        blk_wrtn: int = ts.value("IO/BLK_WRTN")

    return HourlyMetric


def _columns_model() -> Any:
    import tsmodel as ts

    @ts.model(table="METRIC_COLUMNS", family="METRIC", layout=ts.columns(),
              max_rate=1 / 5)
    class ColumnMetric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        blk_read: int = ts.value()

    return ColumnMetric


def measure(events: int, runs: int) -> dict[str, dict[str, float]]:
    """Events per CPU second of each measure on each model (the median of ``runs``)."""
    sys.path.insert(0, str(HERE))
    import _data
    from _columnar import Replay

    import tsmodel as ts

    try:
        import pyarrow  # noqa: F401
        arrow = True
    except ImportError:
        arrow = False
    rows_model = _data.server_metric_model()
    generated = _data.generate(events)
    hourly = _hourly_model()
    hourly_events = [hourly(**{f: getattr(e, f) for f in (
        "hostname", "time", "cpu1_usr", "cpu1_nice", "blk_read", "blk_wrtn")})
        for e in generated]
    columned = _columns_model()
    columned_events = [columned(hostname=e.hostname, time=e.time, blk_read=e.blk_read)
                       for e in generated]
    out: dict[str, dict[str, float]] = {}
    for name, model, data in (("rows", rows_model, generated),
                              ("cells (hourly buckets)", hourly, hourly_events),
                              ("columns (hourly buckets)", columned, columned_events)):
        store = ts.connect("memory://")
        store.create_tables(model)
        assert store.save_all(data).ok
        conn = ts.Connection(Replay(store.backend))
        qs = model.range(_data.START, _data.end_time(events), allow_scan=True).using(conn)
        assert len(list(qs)) == events  # the rows read once, then replayed
        # Records are read from rows (instances may be read in batches): both replayed.
        assert sum(1 for _ in qs._stream(sink="records")) == events
        timed: dict[str, Callable[[], Any]] = {
            "records": lambda qs=qs: sum(1 for _ in qs._stream(sink="records")),
            "instances": lambda qs=qs: list(qs),
        }
        if arrow:
            timed["arrow"] = qs.to_arrow
            from tsmodel.io.arrow import ArrowColumns

            columns = ArrowColumns(model)
            if hasattr(columns, "rows_batch"):
                codec = model.__tsmodel__.codec
                rows = [r for replayed in conn.backend.rows.values() for r in replayed]
                timed["columns"] = lambda c=columns, k=codec, r=rows: c.rows_batch(k, r, None)
                from tsmodel.ground.base import CellBatch

                if hasattr(columns, "takes_batches") and columns.takes_batches(codec):
                    batch = CellBatch.of(rows)
                    timed["batch"] = lambda c=columns, k=codec, b=batch: c.cells_batch(k, b, None)
                batched = getattr(codec, "batch_instances", lambda: None)()
                if batched is not None:
                    timed["row instances"] = lambda k=codec, r=rows, m=model: [
                        e for row in r for e in k.decode(m, row)]
                    whole = CellBatch.of(rows)
                    timed["batch instances"] = lambda f=batched, b=whole, m=model: f(m, b)
            timed.update(_merges(rows))
        for fn in timed.values():
            fn()  # warm: imports, caches
        figures: dict[str, list[float]] = {m: [] for m in timed}
        for _ in range(runs):
            for m, fn in timed.items():
                figures[m].append(events / _cpu(fn))
        out[name] = {m: median(v) for m, v in figures.items()}
        store.close()
    return out


def _merges(rows: list[Any]) -> dict[str, Callable[[], Any]]:
    """The chunk merger's measures of ``rows`` as ReadRows responses (none without
    protobuf or the merger)."""
    try:
        from google.cloud.bigtable_v2.types import ReadRowsResponse

        from tsmodel.backends import _chunks
        from tsmodel.backends._bigtable_wire import ReadRowsView
    except ImportError:
        return {}
    raw, chunk = ReadRowsResponse.pb(), ReadRowsResponse.CellChunk.pb()
    responses = []
    for at in range(0, len(rows), 256):  # a response of 256 rows
        chunks = []
        for row in rows[at:at + 256]:
            family = None
            for i, c in enumerate(row.cells):
                one = chunk(timestamp_micros=c.timestamp, value=c.value,
                            commit_row=i == len(row.cells) - 1)
                if i == 0:
                    one.row_key = row.key
                if c.family != family:
                    one.family_name.value = family = c.family
                one.qualifier.value = c.qualifier
                chunks.append(one)
        responses.append(ReadRowsView.FromString(raw(chunks=chunks).SerializeToString()))

    def drain(merge: Callable[..., Any]) -> Callable[[], Any]:
        return lambda: sum(1 for _ in merge(responses, _chunks.ReadProgress()))

    out = {"merge rows": drain(_chunks.merge_rows)}
    if hasattr(_chunks, "merge_batches"):
        out["merge batches"] = drain(_chunks.merge_batches)
    return out


def _run(checkout: Path, events: int, runs: int) -> dict[str, dict[str, float]]:
    """`measure()` in a subprocess importing ``checkout``'s tsmodel."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", "--events", str(events),
         "--runs", str(runs)], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the run of {checkout} failed:\n{done.stderr}")
    figures: dict[str, dict[str, float]] = json.loads(done.stdout.splitlines()[-1])
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout to compare with (main)")
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.events, args.runs)))
        return 0
    ours = _run(HERE.parent, args.events, args.runs)
    theirs = _run(args.baseline, args.events, args.runs) if args.baseline else None
    print(f"{args.events:,} events, events per CPU second, median of {args.runs} runs")
    header = f"{'model':<24} {'measure':<15} {'this':>12}"
    print(header + (f" {'baseline':>12} {'new/old':>8}" if theirs else ""))
    for name, figures in ours.items():
        for m in MEASURES:
            if m not in figures:
                continue
            line = f"{name:<24} {m:<15} {figures[m]:>12,.0f}"
            if theirs is not None and m in theirs.get(name, {}):
                old = theirs[name][m]
                line += f" {old:>12,.0f} {figures[m] / old:>7.2f}x"
            print(line)
    for label, figures in (("this", ours), ("baseline", theirs or {})):
        for name, f in figures.items():
            shares = ", ".join(f"{m} {f[m] / f['instances']:.2f}x"
                               for m in ("arrow", "columns", "batch") if m in f)
            if shares:
                print(f"{label}, {name}: per instance: {shares}")
            for form, merge, decode in (("rows", "merge rows", "columns"),
                                        ("batches", "merge batches", "batch"),
                                        ("rows, instances", "merge rows", "row instances"),
                                        ("batches, instances", "merge batches",
                                         "batch instances")):
                if merge in f and decode in f:
                    us = 1e6 / f[merge] + 1e6 / f[decode]
                    print(f"{label}, {name}: merged into {form} and decoded: {us:.2f} us/event")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
