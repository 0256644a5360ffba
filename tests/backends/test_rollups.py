"""Rollup tables on every backend, against an independent model of what they hold.

The oracle here is a few lines of plain Python over a dict of the events
that should be stored ((entity, time) -> values): per entity and bucket,
the count, the exact sum (``fractions.Fraction``, rounded once), the
minimum, the maximum and the value of the newest event. It never calls
tsmodel's aggregation. Each test saves, replays, corrects, deletes and
updates, then compares every rollup row (and resamples, from the rollup and
from the raw events) with it.
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any, Optional

import pytest

import tsmodel as ts
from tests.backends.conftest import asynchronous
from tests.backends.test_companions import FaultyBackend
from tsmodel.backends.base import Backend, MutationStatus, ReadRequest, RowMutation

UTC = timezone.utc
DAY0 = datetime(2024, 5, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)
HOUR_US = 3_600_000_000
#: Float values whose sums depend on the order they are added in (0.1 + 0.2 ...).
FLOATS = (0.1, 0.2, 0.3, 1e-3, 12.5, -3.75, 1e16, -1e16, 2.5e-7)


def _suffix() -> str:
    return uuid.uuid4().hex[:8].upper()


def metric_model() -> type:
    s = _suffix()

    @ts.model(table=f"RM_{s}", family="F", current=f"RM_CUR_{s}",
              rollups=[ts.rollup(f"RM_1H_{s}", "1h"), ts.rollup(f"RM_1D_{s}", "1d")])
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("C")
        n: Optional[int] = ts.value("N", default=None)  # noqa: UP045
        note: str = ts.value("T", default="")

    return Metric


def salted_model() -> type:
    """Salted on the time: the rollup key keeps the salt, hashed on the bucket start."""
    s = _suffix()

    @ts.model(table=f"RS_{s}", family="F",
              rollups=[ts.rollup(f"RS_15M_{s}", "15min", fields=["pct"])])
    class Battery:
        kind = ts.constant("BAT")
        salt = ts.salt(3, on="time")
        user: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        pct: int = ts.value("P")
        temp: float = ts.value("T")

    return Battery


# -- the oracle ---------------------------------------------------------------------------

Stored = dict[tuple[tuple[Any, ...], int], dict[str, Any]]


def us(dt: datetime) -> int:
    return (dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def exact_sum(values: Sequence[Any], ints: bool) -> Any:
    if ints:
        return sum(values)
    return float(sum((Fraction(v) for v in values), Fraction(0)))


def oracle_buckets(stored: Stored, every_us: int, fields: Sequence[str],
                   ints: set[str], lo: int | None = None,
                   hi: int | None = None) -> dict[tuple[tuple[Any, ...], int], dict[str, Any]]:
    """Per (entity, bucket start): count and per field count/sum/min/max/last."""
    groups: dict[tuple[tuple[Any, ...], int], list[tuple[int, dict[str, Any]]]] = {}
    for (entity, t), values in stored.items():
        if (lo is not None and t < lo) or (hi is not None and t >= hi):
            continue
        groups.setdefault((entity, t - t % every_us), []).append((t, values))
    out = {}
    for slot, items in groups.items():
        row: dict[str, Any] = {"count": len(items)}
        for f in fields:
            have = sorted((t, v[f]) for t, v in items if v[f] is not None)
            vals = [v for _, v in have]
            row[f"{f}_count"] = len(vals)
            row[f"{f}_sum"] = exact_sum(vals, f in ints) if vals else None
            row[f"{f}_min"] = min(vals) if vals else None
            row[f"{f}_max"] = max(vals) if vals else None
            row[f"{f}_last"] = vals[-1] if vals else None
        out[slot] = row
    return out


def rollup_rows(model: type, every: str, db: ts.Connection, keys: Sequence[str],
                fields: Sequence[str]) -> dict[tuple[tuple[Any, ...], int], dict[str, Any]]:
    """Every row of a rollup table, as the oracle writes them."""
    qs = model.rollup(every).using(db).range(datetime(1970, 1, 1, tzinfo=UTC),
                                             datetime(2100, 1, 1, tzinfo=UTC), allow_scan=True)
    out = {}
    for row in qs:
        got = {"count": row.count}
        for f in fields:
            for agg in ("count", "sum", "min", "max", "last"):
                got[f"{f}_{agg}"] = getattr(row, f"{f}_{agg}")
            assert row_mean(row, f) == (None if not got[f"{f}_count"]
                                        else got[f"{f}_sum"] / got[f"{f}_count"])
        out[(tuple(getattr(row, k) for k in keys), us(row.time))] = got
    return out


def row_mean(row: Any, f: str) -> Any:
    return getattr(row, f"{f}_mean")


def windows_as_rows(windows: Iterable[Any], keys: Sequence[str],
                    fields: Sequence[str]) -> dict[tuple[tuple[Any, ...], int], dict[str, Any]]:
    out = {}
    for w in windows:
        got = {"count": w.count}
        for f in fields:
            s = w.fields[f]
            got.update({f"{f}_count": s.count, f"{f}_sum": s.sum, f"{f}_min": s.min,
                        f"{f}_max": s.max, f"{f}_last": s.last})
            assert getattr(w, f"{f}_mean") == s.mean
        out[(tuple(w.key[k] for k in keys), us(w.start))] = got
    return out


def check(model: type, db: ts.Connection, stored: Stored, what: str) -> None:
    keys, fields, ints = ("host",), ("cpu", "n"), {"n"}
    for every, size in (("1h", HOUR_US), ("1d", 24 * HOUR_US)):
        want = oracle_buckets(stored, size, fields, ints)
        got = rollup_rows(model, every, db, keys, fields)
        assert got == want, f"{what}: rollup {every}: {_diff(got, want)}"


def _diff(got: dict[Any, Any], want: dict[Any, Any]) -> str:
    wrong = {k: (got.get(k), want.get(k)) for k in set(got) | set(want)
             if got.get(k) != want.get(k)}
    return f"{len(wrong)} slots differ (got, expected): {dict(list(wrong.items())[:3])}"


def metric_events(model: type, rng: random.Random, n: int) -> list[Any]:
    hosts = ("a", "ab", "b")
    out = []
    for _ in range(n):
        # Times on the bucket boundaries too: the first and last millisecond of an hour.
        hour = rng.randrange(0, 30)
        offset = rng.choice([0, 1, 59 * 60_000 + 59_999, 60 * 60_000 - 1,
                             rng.randrange(0, 3_600_000)])
        t = DAY0 + timedelta(hours=hour, milliseconds=offset)
        out.append(model(host=rng.choice(hosts), time=t, cpu=rng.choice(FLOATS),
                         n=rng.choice([None, 0, 7, -3, 2**62]), note="x"))
    return out


def remember(stored: Stored, events: Iterable[Any]) -> None:
    for e in events:
        stored[((e.host,), us(e.time))] = {"cpu": e.cpu, "n": e.n}


# -- tests ---------------------------------------------------------------------------------


def test_rollups_stay_exact_through_replays_corrections_and_deletes(backend: Backend) -> None:
    Metric = metric_model()
    rng = random.Random(14)
    db = ts.Connection(backend, batch_size=7)
    db.create_tables(Metric)
    stored: Stored = {}
    try:
        first = metric_events(Metric, rng, 80)
        shuffled = first[:]
        rng.shuffle(shuffled)  # out of order, several batches touching each bucket
        assert db.save_all(shuffled).ok
        remember(stored, shuffled)  # the last of one identity wins: input order
        check(Metric, db, stored, "after a shuffled save")

        replay = rng.sample(first, 40)
        assert db.save_all(replay).ok
        assert ts.Connection(backend, batch_size=1).save_all(replay[:5]).ok
        remember(stored, replay + replay[:5])
        check(Metric, db, stored, "after replays (counts must not grow)")

        corrected = [Metric(host=e.host, time=e.time, cpu=rng.choice(FLOATS), n=None)
                     for e in rng.sample(first, 15)]
        assert db.save_all(corrected).ok
        remember(stored, corrected)
        check(Metric, db, stored, "after corrections")

        unique = {(e.host, e.time): e for e in first}
        doomed = rng.sample(sorted(unique.values(), key=lambda e: (e.host, e.time)), 20)
        assert db.delete_all(doomed).ok
        for e in doomed:
            stored.pop(((e.host,), us(e.time)), None)
        check(Metric, db, stored, "after deletes")

        (entity, t), _ = sorted(stored.items())[0]
        db.update(Metric, host=entity[0], time=datetime(1970, 1, 1, tzinfo=UTC) +
                  timedelta(microseconds=t), cpu=99.5, n=5)
        stored[(entity, t)] = {"cpu": 99.5, "n": 5}
        check(Metric, db, stored, "after db.update")

        start, end = DAY0 + timedelta(hours=3), DAY0 + timedelta(hours=5, minutes=30)
        Metric.range(start, end, host="a").using(db).delete()
        for entity, t in list(stored):
            if entity == ("a",) and us(start) <= t < us(end):
                del stored[(entity, t)]
        check(Metric, db, stored, "after range(...).delete() (one bucket emptied)")
    finally:
        db.drop_tables(Metric)


def test_salted_rollups_and_resample_from_both_sources(backend: Backend) -> None:
    Battery = salted_model()
    rng = random.Random(8)
    db = ts.Connection(backend, batch_size=5)
    db.create_tables(Battery)
    try:
        events = [Battery(user=rng.choice(["jo", "sam"]),
                          time=DAY0 + timedelta(minutes=rng.randrange(0, 180)) +
                          rng.choice([0, 1, 999]) * MS,
                          pct=rng.randrange(-100, 100), temp=rng.choice(FLOATS))
                  for _ in range(60)]
        assert db.save_all(events + events[:10]).ok
        stored: Stored = {}
        for e in events + events[:10]:  # the last saved of one identity wins
            stored[((e.user,), us(e.time))] = {"pct": e.pct, "temp": e.temp}
        want = oracle_buckets(stored, 15 * 60_000_000, ["pct"], {"pct"})
        assert rollup_rows(Battery, "15min", db, ["user"], ["pct"]) == want

        start, end = DAY0, DAY0 + timedelta(hours=3)
        qs = Battery.range(start, end, user="jo").using(db)
        for every, fields, source in (("15min", ["pct"], "rollup"),  # its own size
                                      ("1h", ["pct"], "rollup"),     # merged buckets
                                      ("10min", ["pct"], "raw"),     # not a multiple
                                      ("1h", None, "raw")):          # temp is not rolled up
            resample = qs.resample(every, fields=fields)
            plan = resample.explain()
            assert plan.source == source, f"{every} {fields}: {plan}"
            names = fields or ["pct", "temp"]
            size = 60_000_000 * (15 if every == "15min" else 10 if every == "10min" else 60)
            jo = {k: v for k, v in stored.items() if k[0] == ("jo",)}
            expected = oracle_buckets(jo, size, names, {"pct"}, us(start), us(end))
            assert windows_as_rows(resample, ["user"], names) == expected, f"{every} {fields}"
        # Not aligned on the rollup's buckets: the raw events.
        shifted = Battery.range(start + timedelta(minutes=5), end, user="jo").using(db)
        assert shifted.resample("15min", fields=["pct"]).explain().source == "raw"
        jo = {k: v for k, v in stored.items() if k[0] == ("jo",)}
        expected = oracle_buckets(jo, 15 * 60_000_000, ["pct"], {"pct"},
                                  us(start + timedelta(minutes=5)), us(end))
        got = windows_as_rows(shifted.resample("15min", fields=["pct"]), ["user"], ["pct"])
        assert got == expected
    finally:
        db.drop_tables(Battery)


def test_resample_over_a_day_reads_at_most_24_rows_per_entity(backend: Backend) -> None:
    Metric = metric_model()
    db = ts.Connection(backend)
    db.create_tables(Metric)
    try:
        events = [Metric(host=h, time=DAY0 + timedelta(minutes=m), cpu=float(m % 7), n=m)
                  for h in ("a", "b") for m in range(0, 24 * 60, 3)]
        assert db.save_all(events).ok
        qs = Metric.range(DAY0, DAY0 + timedelta(days=1), host="a").using(db)
        plan = qs.resample("1h").explain(backend.features)
        assert plan.source == "rollup" and plan.rollup is not None
        rows = [r for request in plan.read.requests for r in backend.read_rows(request)]
        assert len(rows) == 24
        stored: Stored = {((e.host,), us(e.time)): {"cpu": e.cpu, "n": e.n}
                          for e in events if e.host == "a"}
        expected = oracle_buckets(stored, HOUR_US, ["cpu", "n"], {"n"})
        assert windows_as_rows(qs.resample("1h"), ["host"], ["cpu", "n"]) == expected
        raw = qs.resample("1h", fields=["cpu"]).explain()
        assert "rollup" in str(plan) and raw.source == "rollup"
    finally:
        db.drop_tables(Metric)


def test_resample_of_a_filtered_range_reads_the_matching_events(backend: Backend) -> None:
    """A rollup aggregates every event: a where() query is resampled from its events."""
    Metric = metric_model()
    db = ts.Connection(backend)
    db.create_tables(Metric)
    try:
        events = [Metric(host="a", time=DAY0 + timedelta(minutes=m), cpu=float(m % 7), n=m)
                  for m in range(0, 6 * 60, 5)]
        assert db.save_all(events).ok
        qs = Metric.range(DAY0, DAY0 + timedelta(hours=6), host="a").using(db) \
            .where(cpu__gte=3.0)
        plan = qs.resample("1h").explain()
        assert plan.source == "raw" and "where()" in plan.reason
        stored: Stored = {((e.host,), us(e.time)): {"cpu": e.cpu, "n": e.n}
                          for e in events if e.cpu >= 3.0}
        expected = oracle_buckets(stored, HOUR_US, ["cpu", "n"], {"n"})
        assert windows_as_rows(qs.resample("1h"), ["host"], ["cpu", "n"]) == expected
    finally:
        db.drop_tables(Metric)


def test_repair_rebuilds_rollup_rows(backend: Backend) -> None:
    """A rollup write that failed (the save is PARTIAL) and a stray row: repair fixes both."""
    Metric = metric_model()
    faulty = FaultyBackend(backend)
    db = ts.Connection(faulty, batch_size=10)
    db.create_tables(Metric)
    spec = ts.spec_of(Metric)
    hourly = spec.rollups[0]
    try:
        events = metric_events(Metric, random.Random(3), 30)
        faulty.fail[hourly.table] = MutationStatus.FAILED
        result = db.save_all(events, raise_on_failure=False)
        assert result.partial and not result.failed
        del faulty.fail[hourly.table]
        stray = hourly.model(host="zz", time=DAY0, count=3, cpu_count=0, n_count=0)
        encoded = ts.spec_of(hourly.model).codec.encode(stray)
        backend.mutate_rows(hourly.table, [RowMutation(encoded.key, encoded.mutations)])
        stored: Stored = {}
        remember(stored, events)
        report = ts.repair(Metric, DAY0, DAY0 + timedelta(days=2), connection=db)
        assert report.ok and report.rollup_rows_written > 0
        check(Metric, db, stored, "after repair")
    finally:
        db.drop_tables(Metric)


async def test_async_saves_and_resample(backend: Backend) -> None:
    Metric = metric_model()
    async with asynchronous(backend) as ab:
        db = ts.AsyncConnection(ab, batch_size=6)
        await db.create_tables(Metric)
        try:
            events = metric_events(Metric, random.Random(5), 40)
            assert (await db.save_all(events + events[:7])).ok
            assert (await db.delete_all(events[:4])).ok
            stored: Stored = {}
            remember(stored, events + events[:7])
            for e in events[:4]:
                stored.pop(((e.host,), us(e.time)), None)
            check(Metric, ts.Connection(backend), stored, "async saves")
            qs = db.range(Metric, DAY0, DAY0 + timedelta(days=2), host="b")
            resample = qs.resample("2h")
            assert resample.explain().source == "rollup"
            b = {k: v for k, v in stored.items() if k[0] == ("b",)}
            expected = oracle_buckets(b, 2 * HOUR_US, ["cpu", "n"], {"n"})
            got = windows_as_rows([w async for w in resample], ["host"], ["cpu", "n"])
            # Merged from 1h rows: a float sum of two rounded sums may differ in the last bit.
            assert got.keys() == expected.keys()
            for slot, row in got.items():
                for name, value in row.items():
                    want = expected[slot][name]
                    assert value == want or (isinstance(want, float) and
                                             math.isclose(value, want, rel_tol=1e-12,
                                                          abs_tol=1e-3)), (slot, name)
        finally:
            await db.drop_tables(Metric)


def test_rollup_rows_are_written_whole(backend: Backend) -> None:
    """A bucket row holds exactly its aggregates: no cell of an earlier version stays."""
    Metric = metric_model()
    db = ts.Connection(backend)
    db.create_tables(Metric)
    hourly = ts.spec_of(Metric).rollups[0]
    try:
        db.save(Metric(host="a", time=DAY0, cpu=1.0, n=4))
        db.save(Metric(host="a", time=DAY0, cpu=2.0, n=None))  # n's aggregates go
        rows = list(backend.read_rows(ReadRequest(hourly.table)))
        assert len(rows) == 1
        cells = {(c.qualifier, c.timestamp) for c in rows[0].cells}
        assert cells == {(q, us(DAY0)) for q in (b"count", b"cpu_count", b"cpu_sum",
                                                 b"cpu_min", b"cpu_max", b"cpu_last",
                                                 b"n_count")}
        sums = [c.value for c in rows[0].cells if c.qualifier == b"cpu_sum"]
        assert sums == [ts.Float64().encode(2.0)]
    finally:
        db.drop_tables(Metric)


def kept_model(model_retention: timedelta | None = None) -> type:
    """A model keeping its events (forever, or ``model_retention``) longer than its
    hourly rollup keeps its rows (two days)."""
    s = _suffix()

    @ts.model(table=f"RK_{s}", family="F", retention=model_retention,
              rollups=[ts.rollup(f"RK_1H_{s}", "1h", retention=timedelta(days=2))])
    class Kept:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("C")
        n: Optional[int] = ts.value("N", default=None)  # noqa: UP045

    return Kept


def kept_events(model: type, hour: datetime, days: int) -> list[Any]:
    """Events every 20 minutes of the last ``days`` days up to ``hour``, two hosts."""
    return [model(host=h, time=hour - timedelta(minutes=20 * i) + 7 * MS,
                  cpu=i % 7 + 0.25, n=None if i % 4 == 0 else i)  # exact float sums
            for h in ("a", "b") for i in range(1, days * 72)]


def test_resample_reads_raw_events_where_the_rollup_keeps_no_rows(backend: Backend) -> None:
    """Issue 26, item 1: a rollup of a shorter retention than the model's serves no
    range starting before its horizon (it holds none of those buckets): every
    window comes from the raw events, as range() returns them."""
    Kept = kept_model()
    db = ts.Connection(backend, batch_size=100)
    db.create_tables(Kept)
    try:
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        events = kept_events(Kept, hour, 5)
        assert db.save_all(events, accept_expired=True).ok
        stored: Stored = {((e.host,), us(e.time)): {"cpu": e.cpu, "n": e.n}
                          for e in events if e.host == "a"}
        spans = {"older than the rollup keeps": (hour - timedelta(days=5),
                                                 hour - timedelta(days=3)),
                 "straddling its horizon": (hour - timedelta(days=5), hour + timedelta(hours=1)),
                 "inside its retention": (hour - timedelta(days=1), hour + timedelta(hours=1))}
        for what, (start, end) in spans.items():
            qs = Kept.range(start, end, host="a").using(db)
            assert len(list(qs)) == sum(1 for _, t in stored if us(start) <= t < us(end))
            for every, size in (("1h", HOUR_US), ("1d", 24 * HOUR_US)):
                resample = qs.resample(every)
                source = "rollup" if what == "inside its retention" else "raw"
                assert resample.explain().source == source, f"{what}: {resample.explain()}"
                want = oracle_buckets(stored, size, ["cpu", "n"], {"n"}, us(start), us(end))
                got = windows_as_rows(resample, ["host"], ["cpu", "n"])
                assert got == want, f"{what}, every {every}: {_diff(got, want)}"
    finally:
        db.drop_tables(Kept)


def test_events_older_than_a_rollups_retention_are_saved_and_kept(backend: Backend) -> None:
    """Issue 26, item 2: the model keeps them, so a save takes them (no RetentionError,
    no accept_expired); the rollup rows they fall in are past the rollup's retention
    and are not written."""
    Kept = kept_model()
    db = ts.Connection(backend, batch_size=100)
    db.create_tables(Kept)
    hourly = ts.spec_of(Kept).rollups[0]
    try:
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        events = kept_events(Kept, hour, 4)
        assert db.save_all(events).ok
        everything = Kept.range(hour - timedelta(days=5), hour + timedelta(hours=1),
                                allow_scan=True).using(db)
        assert sorted((e.host, e.time) for e in everything) == sorted(
            (e.host, e.time) for e in events)
        horizon = us(datetime.now(UTC) - timedelta(days=2))
        stored: Stored = {((e.host,), us(e.time)): {"cpu": e.cpu, "n": e.n} for e in events}
        want = {slot: row for slot, row in oracle_buckets(stored, HOUR_US, ["cpu", "n"],
                                                          {"n"}).items()
                if slot[1] >= horizon + HOUR_US}
        got = rollup_rows(Kept, "1h", db, ["host"], ["cpu", "n"])
        assert {k: v for k, v in got.items() if k[1] >= horizon + HOUR_US} == want
        # No row of a bucket past the rollup's retention was written (read raw, no filter),
        # by the save nor by a repair over every event.
        report = ts.repair(Kept, hour - timedelta(days=5), hour + timedelta(hours=1),
                           connection=db)
        assert report.ok and report.events == len(events)
        starts = [ts.spec_of(hourly.model).codec.time_of(row)
                  for request in [ReadRequest(hourly.table)]
                  for raw in backend.read_rows(request)
                  for row in ts.spec_of(hourly.model).codec.decode(hourly.model, raw)]
        assert starts and min(starts) >= horizon - HOUR_US, (min(starts), horizon)
        later = us(datetime.now(UTC) - timedelta(days=2))  # an hour may start in between

        def kept(since: int) -> int:
            return len({(k, t - t % HOUR_US) for k, t in stored if t - t % HOUR_US >= since})

        assert kept(later) <= report.rollup_rows_written <= kept(horizon)
    finally:
        db.drop_tables(Kept)


def test_events_past_the_models_own_retention_are_refused_and_never_read(
        backend: Backend) -> None:
    """Issue 26, item 2: the refusal names the model's own table; with
    accept_expired=True they are written, and no read returns them (the docs)."""
    Kept = kept_model(model_retention=timedelta(days=3))
    db = ts.Connection(backend, batch_size=100)
    db.create_tables(Kept)
    spec = ts.spec_of(Kept)
    try:
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        events = kept_events(Kept, hour, 5)
        horizon = us(datetime.now(UTC) - timedelta(days=3))
        expired = [e for e in events if us(e.time) < horizon]
        with pytest.raises(ts.RetentionError, match="accept_expired") as caught:
            db.save_all(events)
        assert {p.table for p in caught.value.problems} == {spec.table}
        assert sorted(p.entity.time for p in caught.value.problems) == sorted(
            e.time for e in expired)
        assert f"of {spec.table}:F" in str(caught.value)
        assert db.save_all(events, accept_expired=True).ok
        start, end = hour - timedelta(days=6), hour + timedelta(hours=1)
        got = {(e.host, e.time) for e in Kept.range(start, end, allow_scan=True).using(db)}
        kept = {(e.host, e.time) for e in events if us(e.time) >= horizon + 60_000_000}
        assert kept <= got and not got & {(e.host, e.time) for e in expired}
        windows = Kept.range(start, end, host="a").using(db).resample("1h")
        assert all(us(w.start) >= horizon - HOUR_US for w in windows)
    finally:
        db.drop_tables(Kept)


# -- declarations and queries (no backend) -----------------------------------------------


def test_rollup_declaration_errors() -> None:
    def declare(**kw: Any) -> type:
        @ts.model(table="D", family="F", **kw)
        class D:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            x: float = ts.value()
            s: str = ts.value()

        return D

    with pytest.raises(ts.DeclarationError, match="bucket size"):
        declare(rollups=[ts.rollup("D_R", "1 fortnight")])
    with pytest.raises(ts.DeclarationError, match="whole number of milliseconds"):
        declare(rollups=[ts.rollup("D_R", timedelta(microseconds=10))])
    with pytest.raises(ts.DeclarationError, match="does not hold numbers"):
        declare(rollups=[ts.rollup("D_R", "1h", fields=["s"])])
    with pytest.raises(ts.DeclarationError, match="no value field"):
        declare(rollups=[ts.rollup("D_R", "1h", fields=["nope"])])
    with pytest.raises(ts.DeclarationError, match="same name"):
        declare(rollups=[ts.rollup("D", "1h")])
    with pytest.raises(ts.DeclarationError, match="same bucket size"):
        declare(rollups=[ts.rollup("D_A", "1h"), ts.rollup("D_B", "60min")])
    with pytest.raises(ts.DeclarationError, match="rollups must be"):
        declare(rollups="D_R")
    D = declare(rollups=[ts.rollup("D_R", "1h")])
    assert ts.spec_of(D).rollups[0].fields == ("x",)
    with pytest.raises(ts.QueryError, match="no rollup of '1d'"):
        D.rollup("1d")
    qs = D.range(DAY0, DAY0 + timedelta(days=1), host="h")
    with pytest.raises(ts.QueryError, match="not an int or float"):
        qs.resample("1h", fields=["s"])
    with pytest.raises(ts.QueryError, match="drop limit"):
        qs.limit(3).resample("1h")
    with pytest.raises(ts.QueryError, match="bucket size"):
        qs.resample("often")
