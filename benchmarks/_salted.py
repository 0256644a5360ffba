"""(h) A salted range read (8 salts) against one unsalted range of the same rows.

Both models key one series of events by time: ``SALTED#<salt>#TS`` with
``ts.salt(8, on="time")`` and ``PLAIN#TS`` without a salt, the same values,
the same events. Each read is ``Model.range(start, end)`` over the same
``--salted-rows`` events: one row range unsalted; eight row ranges (one per
salt value, merged by time) and the guard read of foreign salts, salted. The
ratio is the salted read's time over the unsalted one's, run by run: 1.00x
means salting costs nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from _common import Result, median, timed

import tsmodel as ts

SALTS = 8
START = datetime(2015, 3, 16, 19, 0, tzinfo=timezone.utc)
STEP = timedelta(milliseconds=100)


def salted_models() -> tuple[Any, Any]:
    """The salted model and its unsalted twin, on tables no other run uses."""
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"SALTED_{suffix}", family="METRIC")
    class Salted:
        kind = ts.constant("SALTED")
        salt = ts.salt(SALTS, on="time")
        time: datetime = ts.timestamp(unit="ms")
        hostname: str = ts.value("HOSTNAME")
        cpu1_usr: float = ts.value("CPU/CPU1_USR")
        blk_read: int = ts.value("IO/BLK_READ")
        blk_wrtn: int = ts.value("IO/BLK_WRTN")

    # A benchmark table, written once: the hotspot a time-led key makes does not matter.
    @ts.model(table=f"PLAIN_{suffix}", family="METRIC", allow_hotspot=True)
    class Plain:
        kind = ts.constant("PLAIN")
        time: datetime = ts.timestamp(unit="ms")
        hostname: str = ts.value("HOSTNAME")
        cpu1_usr: float = ts.value("CPU/CPU1_USR")
        blk_read: int = ts.value("IO/BLK_READ")
        blk_wrtn: int = ts.value("IO/BLK_WRTN")

    return Salted, Plain


class SaltedSuite:
    """Salted against unsalted range reads on one connection.

    Args:
        url: the emulator's URL (through the delay proxy, or not).
        events: events written to each table.
        rows: events per range read (each run reads all the events, a range
            at a time).
        runs: runs per figure.
    """

    def __init__(self, url: str, events: int, rows: int, runs: int,
                 log: Callable[[str], None]) -> None:
        self.events, self.rows, self.runs, self.log = events, rows, runs, log
        self.salted, self.plain = salted_models()
        self.conn = ts.connect(url, default=False)
        self.conn.create_tables(self.salted, self.plain)
        for model in (self.salted, self.plain):
            result = self.conn.save_all(
                model(time=START + i * STEP, hostname=f"server{i % 10}.aaa.bbb.com",
                      cpu1_usr=i / 100, blk_read=3 * i, blk_wrtn=5 * i)
                for i in range(events))
            assert result.ok, result.summary()
        self.ranges = [(START + i * STEP, START + min(i + rows, events) * STEP)
                       for i in range(0, events, rows)]

    def close(self) -> None:
        self.conn.drop_tables(self.salted, self.plain)
        self.conn.close()

    def run(self) -> Result:
        assert len(self.salted.range(*self.ranges[0]).using(self.conn).explain()
                   .requests) == SALTS
        salted, plain, ratios = [], [], []
        for run in range(self.runs):
            pair = [(self.salted, salted), (self.plain, plain)]
            if run % 2:
                pair.reverse()  # alternate, so drift does not favour one side
            for model, rates in pair:
                rates.append(self.events / self._read(model))
            ratios.append(plain[-1] / salted[-1])
            self.log(f"  (h) run {run + 1}: {SALTS} salts {salted[-1]:,.0f} rows/s, "
                     f"unsalted {plain[-1]:,.0f} rows/s ({ratios[-1]:.2f}x the time)")
        ratio = median(ratios)
        result = Result("h", f"range-read {self.rows:,} rows: {SALTS} salts / one range",
                        "rows/s", median(salted), median(plain), ratio, "<= 1.5x",
                        ratio <= 1.5, self.runs)
        result.notes.append(
            f"{len(self.ranges)} reads of {self.rows:,} rows each; the ratio is the salted "
            "read's time over the unsalted one's (median of the runs' ratios)")
        return result

    def _read(self, model: Any) -> float:
        def read() -> int:
            return sum(len(list(model.range(start, end).using(self.conn)))
                       for start, end in self.ranges)

        seconds, count = timed(read)
        assert count == self.events, count
        return seconds
