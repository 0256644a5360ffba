"""(i) Columnar results: Arrow and pandas exports, and count() without values.

* (i1) ``to_arrow()`` of the ServerMetric events against ``list(qs)`` (model
  instances) **from the same rows**: a replaying backend hands both the rows
  read once from the emulator, so only what becomes of them differs (the one
  decoding of rows, then Arrow columns or instances). Nothing waits on I/O
  there: each side's CPU time is measured (steady on a loaded machine).
* (i2) ``to_pandas()`` end to end on the emulator against the official
  client's ``read_rows`` and a hand-written pandas conversion (struct unpack
  of the cells into column lists, then ``pandas.DataFrame``), the same ranges.
* (i3) the value bytes ``count()`` receives on the emulator's channel,
  counted by a proxy that parses the ReadRows responses
  (tests/faults/proxy.py); the baseline column is what iterating receives.

Needs pyarrow and pandas (``pip install 'tsmodel-bigtable[pandas]'``).
"""

from __future__ import annotations

import gc
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import _data
from _common import Result, median, ratio_result, timed

import tsmodel as ts
from tsmodel.backends.base import ReadRequest, Row


def _cpu(fn: Callable[[], Any]) -> float:
    """CPU seconds ``fn()`` took (after a full garbage collection)."""
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


#: The emulator instance of (i)'s tables: its own, so that the rows the other
#: figures wrote to the same table names are not read as (i)'s.
INSTANCE = "columnar"


class Replay:
    """A backend that reads each request once from ``inner`` and replays its rows after."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.features = inner, inner.features
        self.rows: dict[ReadRequest, list[Row]] = {}
        self.batches: dict[ReadRequest, list[Any]] = {}

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        if request not in self.rows:
            self.rows[request] = list(self.inner.read_rows(request))
        return iter(self.rows[request])

    def read_batches(self, request: ReadRequest) -> Iterator[Any]:
        """The rows of ``request`` in column batches, read once, then replayed."""
        if request not in self.batches:
            self.batches[request] = list(self.inner.read_batches(request))
        return iter(self.batches[request])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ColumnarSuite:
    """(i) on one emulator: writes the events once, then measures."""

    def __init__(self, host_port: str, events: int, runs: int,
                 log: Callable[[str], None]) -> None:
        self.host_port, self.runs, self.log = host_port, runs, log
        self.model = _data.server_metric_model()
        self.events = _data.generate(events)
        self.hosts = sorted({e.hostname for e in self.events})
        self.end = _data.end_time(events)
        self.conn = ts.connect(f"bigtable-emulator://{host_port}/bench/{INSTANCE}",
                               default=False)
        self.conn.drop_tables(self.model)  # the other figures' rows are not (i)'s
        self.conn.create_tables(self.model)
        assert self.conn.save_all(self.events).ok

    def close(self) -> None:
        self.conn.drop_tables(self.model)
        self.conn.close()

    def _query(self, conn: ts.Connection) -> Any:
        return self.model.range(_data.START, self.end, allow_scan=True).using(conn)

    def run(self) -> list[Result]:
        return [self.arrow_vs_instances(), self.pandas_vs_client(), self.count_bytes()]

    # -- (i1) -------------------------------------------------------------------------

    def arrow_vs_instances(self) -> Result:
        replay = Replay(self.conn.backend)
        conn = ts.Connection(replay)
        qs = self._query(conn)
        n = len(self.events)
        assert qs.to_arrow().num_rows == n and len(list(qs)) == n  # rows read, checked
        ours, theirs, split = [], [], []
        for run in range(self.runs):
            arrow = _cpu(qs.to_arrow)
            instances = _cpu(lambda: list(qs))
            records = _cpu(lambda: sum(1 for _ in qs._stream(sink="records")))
            ours.append(n / arrow)
            theirs.append(n / instances)
            split.append(records / arrow)
            self.log(f"  (i1) run {run + 1}: to_arrow {ours[-1]:,.0f} events/s, instances "
                     f"{theirs[-1]:,.0f} events/s ({ours[-1] / theirs[-1]:.2f}x); decoding "
                     f"rows into records is {split[-1]:.0%} of to_arrow")
        result = ratio_result("i1", f"to_arrow() of {n:,} events vs instances, same rows",
                              "events/s", ours, theirs, 3.0, target=">= 3x")
        result.notes.append(
            f"the one decoding of rows into records (row keys, cells) is {median(split):.0%} "
            "of to_arrow()'s time and is shared by both sides: building Arrow columns from "
            "the records replaces building instances (attrs __init__, datetimes)")
        return result

    # -- (i2) -------------------------------------------------------------------------

    def pandas_vs_client(self) -> Result:
        import pandas as pd
        from _bigtable import _official_client

        client = _official_client(self.host_port)
        spec = ts.spec_of(self.model)
        n = len(self.events)
        unpack_d, unpack_q = struct.Struct(">d").unpack, struct.Struct(">q").unpack
        columns = {b"CPU/CPU1_USR": ("cpu1_usr", unpack_d), b"CPU/CPU1_NICE": ("cpu1_nice",
                                                                                 unpack_d),
                   b"IO/BLK_READ": ("blk_read", unpack_q), b"IO/BLK_WRTN": ("blk_wrtn",
                                                                             unpack_q)}

        def official() -> Any:
            from google.cloud.bigtable.data import ReadRowsQuery, RowRange
            from google.cloud.bigtable.data.row_filters import CellsColumnLimitFilter

            data: dict[str, list[Any]] = {"hostname": [], "time": [],
                                          **{name: [] for name, _ in columns.values()}}
            with client.get_table(INSTANCE, spec.table) as table:
                for host in self.hosts:
                    start, end = _data.row_range(host, _data.START, self.end)
                    query = ReadRowsQuery(row_ranges=RowRange(start_key=start, end_key=end),
                                          row_filter=CellsColumnLimitFilter(1))
                    for row in table.read_rows(query):
                        host_part, _, ms = row.row_key.rpartition(b"#")
                        data["hostname"].append(host_part.decode())
                        data["time"].append(int(ms))
                        for cell in row.cells:
                            name, unpack = columns[cell.qualifier]
                            data[name].append(unpack(cell.value)[0])
            frame = pd.DataFrame(data)
            frame["time"] = pd.to_datetime(frame["time"], unit="ms", utc=True)
            frame["hostname"] = frame["hostname"].astype("category")
            return frame

        def ours() -> Any:
            return pd.concat([self.model.range(_data.START, self.end, hostname=host)
                              .using(self.conn).to_pandas() for host in self.hosts],
                             ignore_index=True)

        a, b = ours(), official()
        assert len(a) == len(b) == n
        assert (a["blk_read"].astype("int64") == b["blk_read"]).all()
        mine, theirs = [], []
        try:
            for run in range(self.runs):
                seconds, _ = timed(ours)
                mine.append(n / seconds)
                seconds, _ = timed(official)
                theirs.append(n / seconds)
                self.log(f"  (i2) run {run + 1}: to_pandas {mine[-1]:,.0f} events/s, "
                         f"read_rows + pandas {theirs[-1]:,.0f} events/s")
        finally:
            client.close()
        result = ratio_result("i2", "to_pandas() vs official read_rows + hand-made "
                              "DataFrame", "events/s", mine, theirs, 1.0, target=">= 1x")
        result.notes.append("both read one range per host (10) from the emulator")
        return result

    # -- (i3) -------------------------------------------------------------------------

    def count_bytes(self) -> Result:
        from tests.faults.proxy import FaultProxy
        from tsmodel.backends.bigtable import BigtableBackend

        n = len(self.events)
        with FaultProxy(self.host_port) as proxy:
            conn = ts.Connection(BigtableBackend("bench", INSTANCE,
                                                 emulator_host=proxy.host_port))
            try:
                qs = self._query(conn)
                proxy.read.clear()
                assert qs.count() == n
                counted = dict(proxy.read)
                proxy.read.clear()
                assert len(list(qs)) == n
                iterated = dict(proxy.read)
            finally:
                conn.close()
        self.log(f"  (i3) count(): {counted}; iterating: {iterated}")
        result = Result("i3", f"count() of {n:,} events: value bytes received", "B",
                        counted["values"], iterated["values"], None, "0 B",
                        counted["values"] == 0, 1)
        result.notes.append(
            f"on the emulator's channel: count() received {counted['bytes']:,} bytes in all "
            f"({counted['rows']:,} rows), iterating {iterated['bytes']:,} bytes (baseline "
            "column: the value bytes iterating receives)")
        return result
