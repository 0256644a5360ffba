"""The Beam jobs on the DirectRunner, against the embedded store (a file) and the emulator.

Each job runs on one store and its single-process counterpart (the oracle:
``ts.build_snapshot``, ``ts.repair``, a plain ``save_all``) on a second store
seeded the same; the tables they write are compared cell for cell, raw rows
read straight from the backends. The embedded store samples a key every
couple of kilobytes here, so that reads are cut into many parts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

beam = pytest.importorskip("apache_beam")

from apache_beam.testing.util import assert_that, equal_to  # noqa: E402

import tsmodel as ts  # noqa: E402
from tests.backends.conftest import emulator  # noqa: E402, F401
from tests.budget import BUDGET  # noqa: E402
from tsmodel.backends import embedded  # noqa: E402
from tsmodel.backends.base import DeleteRow, ReadRequest, RowMutation, SetCell  # noqa: E402
from tsmodel.jobs import beam as tsbeam  # noqa: E402
from tsmodel.jobs.beam import io as beam_io  # noqa: E402
from tsmodel.plan.events import encode_event  # noqa: E402
from tsmodel.plan.rollups import rollup_row  # noqa: E402
from tsmodel.testing import table_rows  # noqa: E402

UTC = timezone.utc
DAY = datetime(2017, 7, 26, tzinfo=UTC)
#: The DirectRunner's: one worker in memory, several processes in the deep tier.
OPTIONS = list(BUDGET.beam_options)
#: For a test whose workers must run in this process, in either tier: one that
#: changes the job's code or sampling here, the command's one-line output (worker
#: processes log on their own standard error) or a model file the command imports
#: under a name of its own.
IN_MEMORY = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def _workers_import_this_module() -> Iterator[None]:
    """Worker processes (the deep tier) unpickle the models of this module by its name."""
    previous = os.environ.get("PYTHONPATH")
    here = [str(ROOT), str(Path(__file__).parent)]
    os.environ["PYTHONPATH"] = os.pathsep.join([*here, *filter(None, [previous])])
    try:
        yield
    finally:
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous


@ts.model(table="B_READING", family="R", current="B_CURRENT_READING",
          snapshot=ts.snapshot("B_READING_{period:%Y%m%d}"),
          alternates=[ts.alternate("B_READING_BY_SITE", "site", "time", "meter")])
class Reading:
    salt = ts.salt(4, on="meter")
    meter: str = ts.key()
    site: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    kwh: float = ts.value("KWH")


@ts.model(table="B_READING_V2", family="R", layout=ts.offsets(timedelta(minutes=20)))
class ReadingV2:
    """Reading in a new key layout: 8 salts, the site first, an hour's events per row."""

    salt = ts.salt(8, on="site")
    site: str = ts.key()
    meter: str = ts.key()
    time: datetime = ts.timestamp(bucket="hour")
    kwh: float = ts.value("KWH")


def readings() -> list[Reading]:
    """3 days of 12 meters on 3 sites, every 40 minutes: 1,296 events."""
    return [Reading(meter=f"m{m:02d}", site=f"s{m % 3}", time=DAY - timedelta(days=1)
                    + timedelta(minutes=40 * i), kwh=m + i / 8)
            for m in range(12) for i in range(108)]


@pytest.fixture(params=["embedded", "emulator"])
def stores(request: pytest.FixtureRequest, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """Two empty stores of one kind: the Beam job's and the single-process oracle's."""
    monkeypatch.setattr(embedded, "SAMPLE_BYTES", 2_000)
    if request.param == "embedded":
        yield f"sqlite:///{tmp_path / 'beam.db'}", f"sqlite:///{tmp_path / 'oracle.db'}"
        return
    emu = request.getfixturevalue("emulator")
    run = uuid.uuid4().hex[:8]
    yield (f"bigtable-emulator://{emu.host_port}/tsmodel-test/beam-{run}",
           f"bigtable-emulator://{emu.host_port}/tsmodel-test/oracle-{run}")


def seed(*urls: str) -> None:
    for url in urls:
        with ts.connect(url, default=False) as conn:
            conn.create_tables(Reading)
            conn.save_all(readings())


def raw(url: str, table: str) -> list[tuple[bytes, list[tuple[Any, ...]]]]:
    """Every row of a table as stored: its key and every cell."""
    with ts.connect(url, default=False) as conn:
        return [(row.key, sorted(row.cells)) for row in conn.backend.read_rows(ReadRequest(table))]


def assert_stored_alike(job: str, oracle: str, table: str) -> None:
    """The job's store holds ``table`` as the oracle's does, once GC has run in both
    (the emulator collects at any moment: cells past a version limit may be
    there in one and gone in the other)."""
    with ts.connect(job, default=False) as a, ts.connect(oracle, default=False) as b:
        assert table_rows(a, table, after_gc=True) == table_rows(b, table, after_gc=True), table


def test_snapshot_interrupted_then_rerun_equals_the_single_process_job(
        stores: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    job, oracle = stores
    seed(job, oracle)
    calls = 0
    write = beam_io.SnapshotRows.write

    def interrupted(self: Any, conn: Any, entities: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("worker lost")
        return write(self, conn, entities)

    monkeypatch.setattr(beam_io.SnapshotRows, "write", interrupted)
    with pytest.raises(Exception, match="worker lost"):
        tsbeam.snapshot(job, Reading, DAY, options=IN_MEMORY, batch_size=50)
    monkeypatch.setattr(beam_io.SnapshotRows, "write", write)
    half = raw(job, "B_READING_20170726")
    report = tsbeam.snapshot(job, Reading, DAY, options=IN_MEMORY, batch_size=50)

    with ts.connect(oracle, default=False) as conn:
        single = ts.build_snapshot(Reading, DAY, connection=conn, progress=False)
    expected = raw(oracle, "B_READING_20170726")
    in_day = [r for r in readings() if DAY <= r.time < DAY + timedelta(days=1)]
    assert single.events_written == len(in_day) == 12 * 36
    assert 0 < len(half) < len(expected)  # the first run stopped part way
    assert raw(job, "B_READING_20170726") == expected
    assert report.ok and report.counters["events_read"] == len(in_day)
    assert report.counters["events_written"] == len(in_day)
    if job.startswith("sqlite"):
        assert report.counters["parts"] > 8  # 4 salt ranges, cut at many sampled keys


def damage(url: str) -> None:
    """The same damage in a store: lost alternate-key rows, an alternate-key event and a
    current value the main table lacks."""
    spec = Reading.__tsmodel__
    ghost = encode_event(spec, Reading(meter="m01", site="s1", time=DAY + timedelta(days=9),
                                       kwh=-1.0))
    stray = encode_event(spec, Reading(meter="m02", site="s2",
                                       time=DAY + timedelta(minutes=7), kwh=-2.0))
    lost = [encode_event(spec, r).alternates[0] for r in readings()[::17]]
    with ts.connect(url, default=False) as conn:
        b = conn.backend
        assert all(o.ok for o in b.mutate_rows(
            "B_READING_BY_SITE", [RowMutation(row.key, (DeleteRow(),))
                                  for row in lost]))
        assert all(o.ok for o in b.mutate_rows("B_READING_BY_SITE", [
            RowMutation(stray.alternates[0].key, stray.alternates[0].mutations)]))
        assert all(o.ok for o in b.mutate_rows("B_CURRENT_READING", [
            RowMutation(ghost.current_key, ghost.current_mutations)]))  # type: ignore[arg-type]


def test_repair_equals_the_single_process_repair(stores: tuple[str, str]) -> None:
    job, oracle = stores
    seed(job, oracle)
    damage(job)
    damage(oracle)
    start, end = DAY - timedelta(days=2), DAY + timedelta(days=30)
    report = tsbeam.repair(job, Reading, start, end, options=OPTIONS, batch_size=64)
    with ts.connect(oracle, default=False) as conn:
        single = ts.repair(Reading, start, end, connection=conn, progress=False)
    for table in ("B_READING_BY_SITE", "B_CURRENT_READING", "B_READING"):
        assert_stored_alike(job, oracle, table)
    assert single.ok and single.alternate_events_deleted == 1 and single.current_rows_fixed == 1
    assert report.ok
    assert report.counters["events_replayed"] == single.events == len(readings())
    assert report.counters["alternate_events_deleted"] == 1
    assert report.counters["current_rows_fixed"] == 1


def lose_and_haunt_current_rows(url: str) -> None:
    """Five current-value rows lost, three behind their newest event, two holding an
    event the main table lacks (newer than any)."""
    spec = Reading.__tsmodel__
    with ts.connect(url, default=False) as conn:
        mutations = []
        for m in range(10):
            at = DAY + timedelta(days=9) if m >= 8 else DAY - timedelta(days=1)
            ev = encode_event(spec, Reading(meter=f"m{m:02d}", site=f"s{m % 3}", time=at,
                                            kwh=-1.0))
            assert ev.current_key is not None
            mutations.append(RowMutation(ev.current_key, (DeleteRow(),) if m < 5 else (
                DeleteRow(), *ev.current_mutations)))
        assert all(o.ok for o in conn.backend.mutate_rows("B_CURRENT_READING", mutations))


def counted_from_tables(url: str, start: datetime, end: datetime) -> dict[str, int]:
    """What a repair of [start, end) has to do, counted from the raw tables: events
    in the range, entities, alternate-key events the main table lacks, current rows
    not holding their entity's newest event of the range (missing, behind, or an
    event the main table lacks)."""
    lo, hi = int(start.timestamp() * 1e6), int(end.timestamp() * 1e6)
    main: dict[tuple[bytes, bytes], set[int]] = {}
    for key, cells in raw(url, "B_READING"):
        _, meter, site, _ = key.split(b"#")
        t = cells[0][2]  # a row per event: its cells carry the event time
        if lo <= t < hi:
            main.setdefault((meter, site), set()).add(t)
    alternates = raw(url, "B_READING_BY_SITE")
    lacking = sum(1 for key, cells in alternates
                  if cells[0][2] not in main.get(tuple(key.split(b"#")[2::-2]), set()))
    current = {tuple(key.split(b"#")): max(c[2] for c in cells)
               for key, cells in raw(url, "B_CURRENT_READING")}
    stale = sum(1 for entity, times in main.items()
                if current.get(entity, -1) < max(times)
                or (current[entity] not in times and lo <= current[entity] < hi))
    stale += sum(1 for entity, t in current.items() if entity not in main and lo <= t < hi)
    events = sum(len(times) for times in main.values())
    return {"events_read": events, "events_replayed": events, "events_written": len(main),
            "alternate_events_deleted": lacking, "current_rows_fixed": stale,
            "dead_letters": 0, "failed": 0}


def test_repair_counters_are_what_the_tables_needed(stores: tuple[str, str]) -> None:
    """Issue 26, item 7: every documented counter, each as counted from the tables
    before the repair (restored current rows included); ts.repair reports the same."""
    job, oracle = stores
    seed(job, oracle)
    for url in stores:
        damage(url)
        lose_and_haunt_current_rows(url)
    start, end = DAY - timedelta(days=2), DAY + timedelta(days=30)
    want = counted_from_tables(job, start, end)
    assert want["current_rows_fixed"] == 5 + 3 + 2 and want["alternate_events_deleted"] == 1
    report = tsbeam.repair(job, Reading, start, end, options=OPTIONS, batch_size=64)
    assert {name: report.counters[name] for name in want} == want, report
    with ts.connect(oracle, default=False) as conn:
        single = ts.repair(Reading, start, end, connection=conn, progress=False)
    assert (single.events, single.alternate_events_deleted, single.current_rows_fixed,
            single.failed) == (want["events_replayed"], want["alternate_events_deleted"],
                               want["current_rows_fixed"], 0)
    for table in ("B_READING_BY_SITE", "B_CURRENT_READING"):
        assert_stored_alike(job, oracle, table)
    # Clean now: a second run finds nothing to fix, and says so with zeros.
    again = tsbeam.repair(job, Reading, start, end, options=OPTIONS, batch_size=64)
    assert again.counters["current_rows_fixed"] == again.counters["dead_letters"] == 0
    assert again.counters["alternate_events_deleted"] == 0


def test_every_job_reports_its_documented_counters(tmp_path: Path) -> None:
    """Issue 26, item 7: present, 0 when nothing happened (no KeyError)."""
    url = f"sqlite:///{tmp_path / 'counters.db'}"
    seed(url)
    in_day = len([r for r in readings() if DAY <= r.time < DAY + timedelta(days=1)])
    snapshot = tsbeam.snapshot(url, Reading, DAY, options=OPTIONS)
    assert (snapshot.counters["events_read"], snapshot.counters["events_written"],
            snapshot.counters["dead_letters"]) == (in_day, in_day, 0)
    backfill = tsbeam.backfill(url, Reading, options=OPTIONS)
    assert backfill.counters["dead_letters"] == 0
    assert backfill.counters["events_read"] == len(readings())
    migrate = tsbeam.migrate(url, Reading, ReadingV2, options=OPTIONS, spot_checks=0)
    assert (migrate.counters["events_read"], migrate.counters["events_written"],
            migrate.counters["dead_letters"]) == (len(readings()),) * 2 + (0,)
    with ts.connect(url, default=False) as conn:
        conn.create_tables(Metric)
        conn.save_all(metrics())
    start, end = DAY, DAY + timedelta(hours=2)
    rollups = tsbeam.rebuild_rollups(url, Metric, start, end, options=OPTIONS)
    # Read over the range widened to whole days (the daily rollup); writes no event.
    widened = [m for m in metrics() if DAY <= m.time < DAY + timedelta(days=1)]
    assert (rollups.counters["events_read"], rollups.counters["events_written"],
            rollups.counters["dead_letters"], rollups.counters["failed"]) == (
        len(widened), 0, 0, 0)
    hours = {(m.host, m.time.replace(minute=0)) for m in metrics() if start <= m.time < end}
    assert rollups.counters["rollup_rows_written"] == len(hours) + 4  # and a day per host
    assert rollups.counters["rollup_rows_deleted"] == 0


def test_backfill_of_new_companions_equals_a_repair(stores: tuple[str, str]) -> None:
    job, oracle = stores
    seed(job, oracle)
    for url in (job, oracle):  # companions declared after the data was written
        with ts.connect(url, default=False) as conn:
            conn.backend.delete_table("B_READING_BY_SITE")
            conn.backend.delete_table("B_CURRENT_READING")
    report = tsbeam.backfill(job, Reading, options=OPTIONS, batch_size=100)
    with ts.connect(oracle, default=False) as conn:
        conn.create_tables(Reading)
        ts.repair(Reading, DAY - timedelta(days=30), DAY + timedelta(days=30),
                  connection=conn, progress=False)
    for table in ("B_READING_BY_SITE", "B_CURRENT_READING"):
        assert_stored_alike(job, oracle, table)
    assert len(raw(job, "B_CURRENT_READING")) == 12
    assert report.ok and report.counters["events_read"] == len(readings())


def test_migration_to_a_new_key_layout_is_verified(stores: tuple[str, str]) -> None:
    job, oracle = stores
    seed(job)
    report = tsbeam.migrate(job, Reading, ReadingV2, options=OPTIONS, spot_checks=25)
    with ts.connect(oracle, default=False) as conn:
        conn.create_tables(ReadingV2)
        conn.save_all(ReadingV2(meter=r.meter, site=r.site, time=r.time, kwh=r.kwh)
                      for r in readings())
    assert_stored_alike(job, oracle, "B_READING_V2")
    assert report.ok
    assert report.verification == tsbeam.Verification(len(readings()), len(readings()), 25, 0)
    # A target that lost an event fails the verification; copying again mends it.
    hour = {"start": DAY, "end": DAY + timedelta(hours=1)}  # 24 events: all spot-checked
    with ts.connect(job, default=False) as conn:
        conn.delete(ReadingV2(meter="m03", site="s0", time=DAY, kwh=0.0))
    lost = tsbeam.migrate(job, Reading, ReadingV2, options=OPTIONS, copy=False, **hour)
    assert not lost.ok and lost.verification == tsbeam.Verification(24, 23, 24, 1)
    again = tsbeam.migrate(job, Reading, ReadingV2, options=OPTIONS, **hour)
    assert again.ok and again.verification == tsbeam.Verification(24, 24, 24, 0)
    assert_stored_alike(job, oracle, "B_READING_V2")


@ts.model(table="B_METRIC", family="M",
          rollups=[ts.rollup("B_METRIC_1H", "1h"), ts.rollup("B_METRIC_1D", "1d")])
class Metric:
    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value("C")
    reqs: int = ts.value("R")


def metrics() -> list[Metric]:
    """2 days of 4 hosts, every 25 minutes: 460 events."""
    return [Metric(host=f"h{h}", time=DAY - timedelta(days=1) + timedelta(minutes=25 * i),
                   cpu=(h + 1) * 0.1 * (i % 7), reqs=h * 1000 + i)
            for h in range(4) for i in range(115)]


def damage_rollups(url: str) -> None:
    """Rollup rows lost, one wrong, strays in and out of the range, and an hour of
    events deleted from the main table behind its rollup rows' back."""
    spec = Metric.__tsmodel__
    hourly, daily = spec.rollups
    gone = [m for m in metrics() if m.host == "h1" and DAY + timedelta(hours=5) <= m.time
            < DAY + timedelta(hours=6)]
    assert len(gone) == 2

    def row(rollup: Any, host: str, when: datetime, *events: Metric) -> RowMutation:
        us = int(when.timestamp() * 1_000_000)
        return rollup_row(rollup, (rollup.table, (("host", host),), rollup.start(us)),
                          {int(e.time.timestamp() * 1_000_000): e for e in events})

    wrong = Metric(host="h2", time=DAY, cpu=99.0, reqs=-5)
    with ts.connect(url, default=False) as conn:
        conn.create_tables(Metric)
        conn.save_all(metrics())
        b = conn.backend
        lost = [row(hourly, f"h{h}", DAY + timedelta(hours=k)) for h in range(4)
                for k in range(0, 24, 7)]
        assert all(r.mutations == (DeleteRow(),) for r in lost)
        assert all(o.ok for o in b.mutate_rows(hourly.table, [
            *lost, row(hourly, "zz", DAY + timedelta(hours=3), wrong),  # a stray in the range
            row(hourly, "h0", DAY + timedelta(days=5), wrong)]))  # one beyond it: kept
        assert all(o.ok for o in b.mutate_rows(daily.table, [row(daily, "h2", DAY, wrong)]))
        assert all(o.ok for o in b.mutate_rows("B_METRIC", [
            RowMutation(encode_event(spec, m).main.key, (DeleteRow(),)) for m in gone]))


def test_rollup_rebuild_equals_the_single_process_repair(stores: tuple[str, str]) -> None:
    job, oracle = stores
    for url in stores:
        damage_rollups(url)
    # Not on bucket boundaries: the first hour and day hold events before the start.
    start, end = DAY - timedelta(hours=23, minutes=30), DAY + timedelta(days=1)
    report = tsbeam.rebuild_rollups(job, Metric, start, end, options=OPTIONS, batch_size=40)
    with ts.connect(oracle, default=False) as conn:
        single = ts.repair(Metric, start, end, connection=conn, progress=False)
    assert single.ok and report.ok
    for table in ("B_METRIC_1H", "B_METRIC_1D", "B_METRIC"):
        assert_stored_alike(job, oracle, table)
    # An independent count: one hourly row per (host, hour) holding an event, plus the
    # stray beyond the range; the stray in the range and the emptied hour are gone.
    held = {(m.host, m.time.replace(minute=0)) for m in metrics()
            if not (m.host == "h1" and DAY + timedelta(hours=5) <= m.time
                    < DAY + timedelta(hours=6))}
    assert len(raw(job, "B_METRIC_1H")) == len(held) + 1
    assert report.counters["rollup_rows_written"] == single.rollup_rows_written
    assert report.counters["rollup_rows_deleted"] == 2  # the stray and the emptied hour


@ts.model(table="B_KEPT", family="M", rollups=[ts.rollup("B_KEPT_1H", "1h",
                                                         retention=timedelta(days=2))])
class Kept:
    """Events kept forever, hourly rollup rows two days."""

    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    reqs: int = ts.value("R")


def test_rollup_rebuild_writes_no_row_past_the_rollups_retention(
        stores: tuple[str, str]) -> None:
    """Issue 26, item 2: as ts.repair, no rollup row of a bucket older than the rollup's
    retention (garbage collection would delete it at once, and no read returns it)."""
    job, oracle = stores
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    events = [Kept(host=f"h{h}", time=hour - timedelta(minutes=50 * i), reqs=i)
              for h in range(2) for i in range(1, 4 * 24 * 60 // 50)]
    for url in stores:
        with ts.connect(url, default=False) as conn:
            conn.create_tables(Kept)
            assert conn.save_all(events).ok  # the model keeps them all
            conn.backend.delete_table("B_KEPT_1H")  # the rollup, lost
            conn.create_tables(Kept)
    start, end = hour - timedelta(days=5), hour + timedelta(hours=1)
    first = datetime.now(UTC)
    report = tsbeam.rebuild_rollups(job, Kept, start, end, options=OPTIONS)
    with ts.connect(oracle, default=False) as conn:
        single = ts.repair(Kept, start, end, connection=conn, progress=False)
    last = datetime.now(UTC)
    horizon = int((last - timedelta(days=2)).timestamp() * 1e6)
    starts = sorted(cells[0][2] for _, cells in raw(job, "B_KEPT_1H"))
    assert starts and starts[0] >= horizon - 3_600_000_000
    assert_stored_alike(job, oracle, "B_KEPT_1H")

    def kept_at(now: datetime) -> int:
        """Rows of the hours the retention keeps at ``now``: a bucket start at or
        after its horizon (ms; as the rollup's ``kept_from``), a row per host."""
        since = now - timedelta(days=2)
        return len({(e.host, e.time.replace(minute=0)) for e in events
                    if e.time.replace(minute=0) >= since})

    # The job and the repair each count from their own clock, in [first, last]: an
    # hour's start may pass the horizon in between (equal when none does).
    most, least = kept_at(first), kept_at(last)
    assert report.ok and least <= report.counters["rollup_rows_written"] <= most
    assert least <= single.rollup_rows_written <= most
    if least == most:
        assert report.counters["rollup_rows_written"] == single.rollup_rows_written == most
    assert report.counters["events_read"] == len(events)


def test_sink_sends_what_cannot_be_written_to_dead_letters(tmp_path: Path) -> None:
    url, empty = f"sqlite:///{tmp_path / 'sink.db'}", f"sqlite:///{tmp_path / 'empty.db'}"
    with ts.connect(url, default=False) as conn:
        conn.create_tables(Reading)
    good = readings()[:30]
    bad = Reading(meter="m#1", site="s0", time=DAY, kwh=1.0)  # '#' is the key separator
    with beam.Pipeline(options=tsbeam.pipeline_options(OPTIONS)) as p:
        entities = p | beam.Create([*good[:10], bad, *good[10:]])
        out = entities | "Sink" >> tsbeam.WriteModel(url, batch_size=8, retries=1, backoff=0.0)
        letters = out.dead_letters | "Invalid" >> beam.Map(
            lambda d: (d.entity, d.status, d.attempts))
        assert_that(letters, equal_to([(bad, "invalid", 0)]), label="invalid")
        # No table there: every write fails, is retried, then comes out.
        nowhere = entities | "No tables" >> tsbeam.WriteModel(empty, batch_size=8, retries=2,
                                                              backoff=0.0)
        failed = nowhere.dead_letters | "Failed" >> beam.Map(lambda d: (d.status, d.attempts))
        assert_that(failed, equal_to([("failed", 3)] * 30 + [("invalid", 0)]), label="failed")
    with ts.connect(url, default=False) as conn:
        stored = list(Reading.range(DAY - timedelta(days=2), DAY + timedelta(days=2),
                                    allow_scan=True).using(conn))
    assert sorted(stored, key=lambda r: (r.meter, r.time)) == sorted(
        good, key=lambda r: (r.meter, r.time))


def test_a_job_refuses_an_in_memory_store() -> None:
    with pytest.raises(ts.ConfigurationError, match="every worker can open"):
        tsbeam.snapshot("memory://", Reading, DAY)


def test_job_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tsmodel.cli import main

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    seed(url)
    status = main(["job", "snapshot", "tests/extras/test_beam.py:Reading", "--period",
                   "2017-07-26T12:00", "--url", url, "--json", "--",
                   *IN_MEMORY])
    out = capsys.readouterr().out
    assert status == 0, out
    assert '"events_written": 432' in out
    assert len(raw(url, "B_READING_20170726")) == 12 * 36


def tsmodel_job(*args: str, options: list[str] = OPTIONS,
                temp: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``tsmodel job ...`` in a process of its own: what a user's terminal shows
    (``temp``: its temporary directory, ``$TMPDIR``)."""
    env = {k: v for k, v in os.environ.items() if k != "TSMODEL_DEBUG"}
    if temp is not None:
        env["TMPDIR"] = str(temp)
    return subprocess.run([sys.executable, "-m", "tsmodel", "job", *args, "--", *options],
                          capture_output=True, text=True, timeout=300, env=env)


def test_the_job_command_leaves_nothing_in_the_temporary_directory(tmp_path: Path) -> None:
    """The DirectRunner makes a ``beam-temp*`` folder for each pipeline whenever its
    first choice, the Prism runner, cannot start (no binary, no network), and never
    removes it: the command runs its jobs in a temporary directory of its own."""
    url = f"sqlite:///{tmp_path / 'temp.db'}"
    seed(url)
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = tsmodel_job("snapshot", f"{HERE}:Reading", "--period", "2017-07-26",
                       "--url", url, temp=temp)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in temp.iterdir()) == [], list(temp.rglob("*"))


def tables_of(url: str) -> list[str]:
    with ts.connect(url, default=False) as conn:
        return sorted(conn.backend.list_tables())


HERE = "tests/extras/test_beam.py"
SPAN = ("--start", "2017-07-26", "--end", "2017-07-27")


@pytest.mark.parametrize(("job", "table"), [
    (("snapshot", f"{HERE}:Reading", "--period", "2017-07-26"), "B_READING"),
    (("repair", f"{HERE}:Reading", *SPAN), "B_READING"),
    (("backfill", f"{HERE}:Reading"), "B_READING"),
    (("migrate", f"{HERE}:Reading", f"{HERE}:ReadingV2"), "B_READING"),
    (("rollups", f"{HERE}:Metric", *SPAN), "B_METRIC"),
], ids=lambda v: v[0] if isinstance(v, tuple) else v)
def test_a_job_on_a_store_without_the_main_table_fails_and_creates_nothing(
        tmp_path: Path, job: tuple[str, ...], table: str) -> None:
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"  # the wrong file: no tables at all
    done = tsmodel_job(*job, "--url", url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tsmodel: error: ") and f"{table!r}" in last and url in last, last
    assert tables_of(url) == []


def test_a_migration_verified_only_needs_the_target(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    seed(url)
    with pytest.raises(ts.TableNotFoundError, match=f"'B_READING_V2' does not exist at {url}"):
        tsbeam.migrate(url, Reading, ReadingV2, copy=False, options=OPTIONS)
    assert "B_READING_V2" not in tables_of(url)


def test_a_backfill_creates_only_the_tables_it_fills(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    seed(url)
    with ts.connect(url, default=False) as conn:
        conn.backend.delete_table("B_READING_BY_SITE")
        conn.backend.delete_table("B_CURRENT_READING")
    report = tsbeam.backfill(url, Reading, tables=["B_CURRENT_READING"], options=OPTIONS)
    assert report.ok
    assert tables_of(url) == ["B_CURRENT_READING", "B_READING"]
    assert len(raw(url, "B_CURRENT_READING")) == 12  # a row per meter


def test_a_job_failing_in_a_worker_prints_one_line(tmp_path: Path) -> None:
    """Beam logs a worker's exception with its traceback; the command shows one line."""
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    seed(url)
    key = encode_event(Reading.__tsmodel__, readings()[0]).main.key
    with ts.connect(url, default=False) as conn:  # a float cell of 3 bytes: undecodable
        (outcome,) = conn.backend.mutate_rows("B_READING", [RowMutation(key, (
            SetCell("R", b"KWH", 1_501_027_200_000_000, b"bad"),))])
        assert outcome.ok
    done = tsmodel_job("snapshot", f"{HERE}:Reading", "--period", "2017-07-26", "--url", url,
                       options=IN_MEMORY)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("tsmodel: error: "), done.stderr


def test_the_jobs_page_examples_run() -> None:
    """docs/jobs.md's ``python beam`` blocks (the core's docs test skips them without Beam)."""
    from tests.unit.test_docs import ROOT, test_python_blocks_run

    test_python_blocks_run(ROOT / "docs" / "jobs.md")
