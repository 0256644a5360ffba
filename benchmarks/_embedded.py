"""(d) the embedded store against plain sqlite3 on the same cells.

The baseline is what a program using sqlite3 directly would do with the same
cells, in the layout that suits them best: one table keyed by
``(row_key, family, qualifier, ts DESC)``, ``WITHOUT ROWID``, ``executemany``
in a transaction per batch, and a ``SELECT`` per host range in key order.
The embedded store runs the same SQL underneath, plus Bigtable's semantics:
validation, versions, GC rules, rows as :class:`~tsmodel.backends.base.Row`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import _data
from _common import Result, ratio_result, timed

import tsmodel as ts
from tsmodel.backends.base import ReadRequest, RowRange, RowSet
from tsmodel.backends.embedded import EmbeddedBackend
from tsmodel.plan.events import encode_event

BATCH = 1000
_DDL = ("CREATE TABLE cells (row_key BLOB NOT NULL, family TEXT NOT NULL, qualifier BLOB NOT NULL,"
        " ts INTEGER NOT NULL, value BLOB NOT NULL,"
        " PRIMARY KEY (row_key, family, qualifier, ts DESC)) WITHOUT ROWID")
_SELECT = ("SELECT row_key, family, qualifier, ts, value FROM cells"
           " WHERE row_key >= ? AND row_key < ? ORDER BY row_key, family, qualifier, ts DESC")


class EmbeddedSuite:
    def __init__(self, events: int, runs: int, log: Callable[[str], None]) -> None:
        self.runs, self.log = runs, log
        self.model = _data.server_metric_model()
        self.events = _data.generate(events)
        self.hosts = sorted({e.hostname for e in self.events})
        self.end = _data.end_time(events)
        spec = self.model.__tsmodel__
        self.table = spec.table
        self.entries = [encode_event(spec, e).row_mutation() for e in self.events]
        self.cells = [(key, *cell) for key, cells in _data.plain_rows(self.events)
                      for cell in cells]
        self.cell_count = len(self.cells)
        self.ranges = [_data.row_range(h, _data.START, self.end) for h in self.hosts]

    # -- the store ---------------------------------------------------------------------

    def _store(self) -> tuple[ts.Connection, EmbeddedBackend]:
        backend = EmbeddedBackend()
        conn = ts.Connection(backend)
        conn.create_tables(self.model)
        return conn, backend

    def _store_write(self, backend: EmbeddedBackend) -> float:
        def write() -> None:
            for start in range(0, len(self.entries), BATCH):
                outcomes = backend.mutate_rows(self.table, self.entries[start:start + BATCH])
                assert all(o.ok for o in outcomes)

        return timed(write)[0]

    def _store_read(self, backend: EmbeddedBackend) -> float:
        def read() -> int:
            cells = 0
            for start, end in self.ranges:
                request = ReadRequest(self.table, RowSet(ranges=(RowRange(start, end),)))
                for row in backend.read_rows(request):
                    cells += len(row.cells)
            return cells

        seconds, cells = timed(read)
        assert cells == self.cell_count, cells
        return seconds

    # -- plain sqlite3 -----------------------------------------------------------------

    def _plain(self) -> sqlite3.Connection:
        con = sqlite3.connect(":memory:", isolation_level=None)
        con.execute(_DDL)
        return con

    def _plain_write(self, con: sqlite3.Connection) -> float:
        rows_per_batch = BATCH * len(_data.COLUMNS)

        def write() -> None:
            for start in range(0, len(self.cells), rows_per_batch):
                con.execute("BEGIN IMMEDIATE")
                con.executemany("INSERT OR REPLACE INTO cells VALUES (?, ?, ?, ?, ?)",
                                self.cells[start:start + rows_per_batch])
                con.execute("COMMIT")

        return timed(write)[0]

    def _plain_read(self, con: sqlite3.Connection) -> float:
        def read() -> int:
            cells = 0
            for start, end in self.ranges:
                for _ in con.execute(_SELECT, (start, end)):
                    cells += 1
            return cells

        seconds, cells = timed(read)
        assert cells == self.cell_count, cells
        return seconds

    # -- the measurements ----------------------------------------------------------------

    def run(self) -> list[Result]:
        w_ours, w_plain, r_ours, r_plain = [], [], [], []
        m_write, m_read = [], []
        for run in range(self.runs):
            conn, backend = self._store()
            con = self._plain()
            try:
                writes, reads = self._pair(run, backend, con)
            finally:
                con.close()
                conn.close()
            w_ours.append(self.cell_count / writes["ours"])
            w_plain.append(self.cell_count / writes["plain"])
            r_ours.append(self.cell_count / reads["ours"])
            r_plain.append(self.cell_count / reads["plain"])
            m_write.append(self._model_write())
            m_read.append(self._model_read())
            self.log(f"  (d) run {run + 1}: write {w_ours[-1]:,.0f} vs {w_plain[-1]:,.0f} cells/s,"
                     f" read {r_ours[-1]:,.0f} vs {r_plain[-1]:,.0f} cells/s;"
                     f" model: save {m_write[-1]:,.0f} events/s, range {m_read[-1]:,.0f}/s")
        n = f"{self.cell_count:,}"
        write = ratio_result("d1", f"embedded mutate_rows of {n} cells vs executemany",
                             "cells/s", w_ours, w_plain, 0.7, target=">= 0.7x")
        read = ratio_result("d2", f"embedded read_rows of {n} cells vs SELECT", "cells/s",
                            r_ours, r_plain, 0.7, target=">= 0.7x")
        model_write = ratio_result("d3", "embedded save_all (events) vs executemany (rows)",
                                   "rows/s", m_write, [p / len(_data.COLUMNS) for p in w_plain],
                                   0.0, target="(info)")
        model_read = ratio_result("d4", "embedded range read into instances vs SELECT (rows)",
                                  "rows/s", m_read, [p / len(_data.COLUMNS) for p in r_plain],
                                  0.0, target="(info)")
        model_write.met = model_read.met = None
        return [write, read, model_write, model_read]

    def _pair(self, run: int, backend: EmbeddedBackend,
              con: sqlite3.Connection) -> tuple[dict[str, float], dict[str, float]]:
        """Write then read on both sides; which side goes first alternates by run."""
        order = ["ours", "plain"][:: -1 if run % 2 else 1]
        write: dict[str, Callable[[], float]] = {
            "ours": lambda: self._store_write(backend), "plain": lambda: self._plain_write(con)}
        read: dict[str, Callable[[], float]] = {
            "ours": lambda: self._store_read(backend), "plain": lambda: self._plain_read(con)}
        writes = {side: write[side]() for side in order}
        reads = {side: read[side]() for side in order}
        return writes, reads

    def _model_write(self) -> float:
        conn, _ = self._store()
        try:
            seconds, outcome = timed(lambda: conn.save_all(self.events))
            assert outcome.ok
            self._model_conn = conn
            return len(self.events) / seconds
        except BaseException:
            conn.close()
            raise

    def _model_read(self) -> float:
        conn = self._model_conn
        try:
            def read() -> int:
                return sum(1 for host in self.hosts
                           for _ in self.model.range(_data.START, self.end, hostname=host)
                           .using(conn))

            seconds, count = timed(read)
            assert count == len(self.events), count
            return float(count / seconds)
        finally:
            conn.close()
