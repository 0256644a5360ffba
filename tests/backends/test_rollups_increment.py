"""Increment rollups (``ts.rollup(..., mode="increment")``) on every backend.

The oracle is plain Python over the list of events *sent* (a replayed event
is in it twice) or the dict of events *stored*: per entity and hour, the
count and the int sum. Saves add to the rollup rows on the server, so a
replay counts again (documented); deletes and `ts.repair` recompute a row
from the main table, which makes it exact again.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend

UTC = timezone.utc
DAY0 = datetime(2024, 5, 1, tzinfo=UTC)
HOUR_US = 3_600_000_000


def _us(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def counter_model(*rollups: Any) -> type:
    s = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"RI_{s}", family="F",
              rollups=list(rollups) or [ts.rollup(f"RI_1H_{s}", "1h", mode="increment")])
    class Requests:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        n: Optional[int] = ts.value("N", default=None)  # noqa: UP045
        bytes_out: int = ts.value("B", default=0)
        cpu: float = ts.value("C", default=0.0)

    return Requests


#: (host, bucket start in µs) -> (count, n_count, n_sum, bytes_out_sum)
Expected = dict[tuple[str, int], tuple[int, int, int | None, int]]


def oracle(events: Iterable[Any]) -> Expected:
    """Each event of ``events`` counted once, in its hour."""
    out: dict[tuple[str, int], list[Any]] = {}
    for e in events:
        t = _us(e.time)
        slot = out.setdefault((e.host, t - t % HOUR_US), [0, 0, 0, 0])
        slot[0] += 1
        if e.n is not None:
            slot[1] += 1
            slot[2] += e.n
        slot[3] += e.bytes_out
    return {k: (c, nc, ns if nc else None, b) for k, (c, nc, ns, b) in out.items()}


def rows(model: type, db: ts.Connection) -> Expected:
    got = {}
    for row in model.rollup("1h").using(db).range(DAY0, DAY0 + timedelta(days=2),
                                                  allow_scan=True):
        got[(row.host, _us(row.time))] = (row.count, row.n_count, row.n_sum, row.bytes_out_sum)
    return got


def events(model: type, rng: random.Random, n: int) -> list[Any]:
    return [model(host=rng.choice(("a", "b")),
                  time=DAY0 + timedelta(hours=rng.randrange(0, 6),
                                        milliseconds=rng.choice([0, rng.randrange(3_600_000)])),
                  n=rng.choice([None, 0, 5, -7, 2**40]), bytes_out=rng.randrange(0, 10**6))
            for _ in range(n)]


def test_saves_add_replays_count_again_deletes_and_repair_recompute(backend: Backend) -> None:
    Requests = counter_model()
    rng = random.Random(21)
    db = ts.Connection(backend, batch_size=6)
    db.create_tables(Requests)
    try:
        first = {(e.host, e.time): e for e in events(Requests, rng, 60)}  # unique events
        sent = list(first.values())
        assert db.save_all(sent).ok
        assert rows(Requests, db) == oracle(sent)

        replay = rng.sample(sent, 10)
        assert db.save_all(replay).ok  # a replay adds again: count and sums grow
        assert rows(Requests, db) == oracle(sent + replay)

        doomed = rng.sample(sent, 8)
        assert db.delete_all(doomed).ok  # a delete recomputes its buckets: exact again
        left = [e for e in sent if e not in doomed]
        touched = {(e.host, _us(e.time) - _us(e.time) % HOUR_US) for e in doomed}
        want = oracle(sent + replay)
        for slot, value in oracle(left).items():
            if slot in touched:
                want[slot] = value
        for slot in touched - set(oracle(left)):
            del want[slot]
        assert rows(Requests, db) == want

        report = ts.repair(Requests, DAY0, DAY0 + timedelta(days=1), connection=db)
        assert report.ok and report.rollup_rows_written > 0
        assert rows(Requests, db) == oracle(left)
    finally:
        db.drop_tables(Requests)


def test_resample_reads_the_increment_rollup(backend: Backend) -> None:
    Requests = counter_model()
    db = ts.Connection(backend)
    db.create_tables(Requests)
    try:
        saved = events(Requests, random.Random(5), 40)
        saved = list({(e.host, e.time): e for e in saved}.values())
        assert db.save_all(saved).ok
        qs = Requests.range(DAY0, DAY0 + timedelta(hours=6), host="a").using(db)
        resample = qs.resample("2h", fields=["n", "bytes_out"])
        assert resample.explain().source == "rollup"
        want: dict[int, tuple[int, int | None, float | None]] = {}
        for e in saved:
            if e.host == "a":
                t = _us(e.time) - _us(e.time) % (2 * HOUR_US)
                c, s, k = want.get(t, (0, 0, 0))
                want[t] = (c + 1, s + (e.n or 0), k + (e.n is not None))
        got = {_us(w.start): (w.count, w.n_sum, w.n_mean, w.n_min) for w in resample}
        assert got == {t: (c, s if k else None, s / k if k else None, None)
                       for t, (c, s, k) in want.items()}
    finally:
        db.drop_tables(Requests)


def test_a_model_may_keep_both_kinds_of_rollup(backend: Backend) -> None:
    s = uuid.uuid4().hex[:6].upper()
    Requests = counter_model(ts.rollup(f"RB_1H_{s}", "1h", mode="increment"),
                             ts.rollup(f"RB_1D_{s}", "1d"))
    db = ts.Connection(backend, batch_size=4)
    db.create_tables(Requests)
    try:
        saved = list({(e.host, e.time): e for e in events(Requests, random.Random(9), 25)}
                     .values())
        assert db.save_all(saved).ok
        assert rows(Requests, db) == oracle(saved)
        daily = {(r.host, r.count, r.n_min) for r in Requests.rollup("1d").using(db)
                 .range(DAY0, DAY0 + timedelta(days=1), allow_scan=True)}
        want = set()
        for host in ("a", "b"):
            mine = [e for e in saved if e.host == host]
            ns = [e.n for e in mine if e.n is not None]
            if mine:
                want.add((host, len(mine), min(ns) if ns else None))
        assert daily == want
        # A whole-day resample prefers the exact (recomputed) rollup.
        plan = Requests.range(DAY0, DAY0 + timedelta(days=1), host="a").using(db) \
            .resample("1d", fields=["n"]).explain()
        assert f"RB_1D_{s}" in plan.reason
    finally:
        db.drop_tables(Requests)


def test_increment_rollup_declarations_are_checked() -> None:
    s = uuid.uuid4().hex[:6].upper()
    with pytest.raises(ts.DeclarationError, match=r"Requests.*RX_.*'cpu'.*float"):
        counter_model(ts.rollup(f"RX_{s}", "1h", fields=["cpu"], mode="increment"))
    with pytest.raises(ts.DeclarationError, match=r"mode='sum'.*recompute.*increment"):
        counter_model(ts.rollup(f"RX_{s}", "1h", mode="sum"))
    # By default an increment rollup takes the int fields only.
    spec = ts.spec_of(counter_model(ts.rollup(f"RX_{s}", "1h", mode="increment")))
    assert spec.rollups[0].fields == ("n", "bytes_out")
    tables = {t.name: t for t in ts.table_specs(spec)}
    assert tables[f"RX_{s}"].aggregates == ("F",)
    assert tables[spec.table].aggregates == ()
