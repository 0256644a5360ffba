"""Operations: what tsmodel logs, on both backends, and settings that reach the Bigtable calls.

Logging is checked with pytest's ``caplog`` against what the test itself did
(the tables it wrote, the entities it saved, the faults the proxy injected),
never against what the code reported elsewhere.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as core_exceptions

import tsmodel as ts
from tests.faults.proxy import FaultProxy, Faults
from tsmodel.backends.base import Backend

UTC = timezone.utc
T0 = datetime(2024, 5, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def declare(current: bool = True) -> Any:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"ops_{suffix}", family="F",
              current=f"ops_cur_{suffix}" if current else None)
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        value: float = ts.value("V")

    return Reading


def readings(model: Any, n: int) -> list[Any]:
    return [model(sensor=f"s{i % 3}", time=T0 + timedelta(seconds=i), value=float(i))
            for i in range(n)]


@pytest.fixture
def conn(backend: Backend) -> Iterator[ts.Connection]:
    """A connection on which every call counts as slow (threshold 0 s)."""
    yield ts.Connection(backend, batch_size=4, settings=ts.Settings(slow_call_threshold=0.0))


def records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger]


def test_each_slow_call_is_a_warning_naming_its_table(
    conn: ts.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    model = declare()
    conn.create_tables(model)
    spec = ts.spec_of(model)
    events = readings(model, 10)  # 3 batches of 4, 4, 2; main and current tables
    with caplog.at_level(logging.WARNING, logger="tsmodel"):
        conn.save_all(events)
        found = list(model.using(conn).range(T0, T0 + timedelta(hours=1), sensor="s1"))
    assert len(found) == 3  # s1: the 2nd, 5th and 8th
    slow = records(caplog, "tsmodel.calls")
    assert all(r.levelno == logging.WARNING for r in slow)
    writes = Counter(r.table for r in slow if r.getMessage().startswith("slow call: write"))
    # Each batch writes the main table, then (its entities' newest) the current table.
    assert writes == {spec.table: 3, spec.current_table: 3}
    reads = [r for r in slow if r.getMessage().startswith("slow call: read")]
    assert [r.table for r in reads if r.operation == "read"] == [spec.table]
    assert all("over the 0.000 s threshold" in r.getMessage() for r in slow)


def test_no_slow_call_under_the_threshold(backend: Backend,
                                          caplog: pytest.LogCaptureFixture) -> None:
    conn = ts.Connection(backend, settings=ts.Settings(slow_call_threshold=3600.0))
    model = declare()
    conn.create_tables(model)
    with caplog.at_level(logging.DEBUG, logger="tsmodel"):
        conn.save_all(readings(model, 5))
    assert records(caplog, "tsmodel.calls") == []
    assert len(records(caplog, "tsmodel.writes")) == 1  # the summary: something was logged


def test_saves_and_deletes_are_summed_up_at_debug(
    conn: ts.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    model = declare()
    conn.create_tables(model)
    spec = ts.spec_of(model)
    events = readings(model, 10)
    with caplog.at_level(logging.DEBUG, logger="tsmodel.writes"):
        conn.save_all(events)
        conn.delete_all(events[:3])
    save, delete = records(caplog, "tsmodel.writes")
    assert save.levelno == logging.DEBUG and save.operation == "save"
    assert save.outcomes == {"written": 10}
    assert save.tables == [spec.table, spec.current_table]
    assert save.getMessage().startswith(
        f"save of 10 entities to {spec.table!r}, {spec.current_table!r}: "
        "10 written, 0 failed, 0 unknown, 0 partial; ")
    # 10 events of one float each: 10 main rows and cells (the main table
    # has a row per event), and the 3 sensors' newest rows in the current table
    # per batch: batches of 4, 4, 2 hold 3, 3 and 2 sensors.
    assert ", 18 rows, 18 cells, " in save.getMessage()
    assert delete.operation == "delete" and delete.outcomes == {"written": 3}


def test_refused_scans_are_logged_at_debug(conn: ts.Connection,
                                           caplog: pytest.LogCaptureFixture) -> None:
    model = declare()
    with caplog.at_level(logging.DEBUG, logger="tsmodel.queries"), \
            pytest.raises(ts.ScanRefusedError) as info:
        list(model.using(conn).range(T0, T0 + timedelta(hours=1)))
    [record] = records(caplog, "tsmodel.queries")
    assert record.levelno == logging.DEBUG
    assert record.getMessage() == f"scan refused: {info.value}"


def test_job_progress_is_logged(conn: ts.Connection, caplog: pytest.LogCaptureFixture) -> None:
    model = declare()
    conn.create_tables(model)
    conn.save_all(readings(model, 9))
    with caplog.at_level(logging.INFO, logger="tsmodel.jobs"):
        report = ts.repair(model, T0, T0 + timedelta(hours=1), connection=conn, batch_size=4)
    assert report.ok
    progress = [r for r in records(caplog, "tsmodel.jobs") if "replayed" in r.getMessage()]
    assert [r.events for r in progress] == [4, 8, 9]  # batches of 4, then the rest
    assert records(caplog, "tsmodel.jobs")[-1].getMessage().endswith(f"done: {report}")


def test_nothing_is_printed_by_default(tmp_path: Path) -> None:
    """A fresh interpreter: warnings are emitted (slow calls) but no handler prints them."""
    script = textwrap.dedent("""
        import logging
        from datetime import datetime, timezone
        import tsmodel as ts

        seen = []
        class Spy(logging.Handler):
            def emit(self, record):
                seen.append(record)

        @ts.model(table="T", family="F")
        class M:
            k: str = ts.key()
            time: datetime = ts.timestamp(unit="ms")
            v: int = ts.value("V")

        db = ts.connect("memory://", slow_call_threshold=0.0)
        db.create_tables(M)
        logging.getLogger("tsmodel.calls").addHandler(Spy())  # proof records are made
        db.save(M(k="a", time=datetime(2024, 1, 1, tzinfo=timezone.utc), v=1))
        assert seen and seen[0].levelno == logging.WARNING, seen
        assert not logging.getLogger().handlers  # no basicConfig
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""


# -- Bigtable only: retries through a fault-injecting proxy ---------------------------


@pytest.fixture
def proxy(emulator: Any) -> Iterator[FaultProxy]:
    with FaultProxy(emulator.host_port, seed=5) as p:
        yield p


@pytest.mark.emulator
def test_retries_are_logged_with_cause_and_attempt(
    proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    model = declare()
    url = f"bigtable-emulator://{proxy.host_port}/ops/inst?backoff_initial=0.001"
    with ts.connect(url, default=False, batch_size=5, backoff_maximum=0.005) as db:
        db.create_tables(model)
        db.save_all(readings(model, 3))  # the emulator's family checks, unfaulted
        proxy.faults = Faults(write_before=0.4, read_before=0.4)
        with caplog.at_level(logging.INFO, logger="tsmodel"):
            db.save_all(readings(model, 60))
            for sensor in ("s0", "s1", "s2"):
                list(model.using(db).range(T0, T0 + timedelta(hours=1), sensor=sensor))
        proxy.faults = Faults()
    injected = proxy.injected
    retries = records(caplog, "tsmodel.bigtable")
    assert retries and all(r.levelno == logging.INFO for r in retries)  # none gave up
    by_method = Counter(r.method for r in retries)
    assert by_method == {
        "MutateRows": sum(n for k, n in injected.items() if k.startswith("write.before.")),
        "ReadRows": injected["read.before.UNAVAILABLE"]}
    spec = ts.spec_of(model)
    assert {r.table for r in retries} <= {spec.table, spec.current_table}
    for record in retries:
        assert isinstance(record.cause, (core_exceptions.ServiceUnavailable,
                                         core_exceptions.DeadlineExceeded))
        assert f"attempt {record.attempt} failed ({type(record.cause).__name__}: " \
            in record.getMessage()
    assert max(r.attempt for r in retries) >= 2 or len(retries) >= 2


@pytest.mark.emulator
def test_retry_attempts_bound_a_write_and_giving_up_is_a_warning(
    proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    model = declare(current=False)
    url = f"bigtable-emulator://{proxy.host_port}/ops/inst?retry_attempts=3"
    with ts.connect(url, default=False, backoff_initial=0.001, backoff_maximum=0.002) as db:
        db.create_tables(model)
        db.save_all(readings(model, 1))  # the family checks, unfaulted
        proxy.faults = Faults(write_before=1.0)
        before = proxy.calls["MutateRows"]
        with caplog.at_level(logging.INFO, logger="tsmodel.bigtable"):
            result = db.save_all(readings(model, 1), raise_on_failure=False)
        proxy.faults = Faults()
    assert [r.status for r in result.results] == [ts.WriteStatus.UNKNOWN]
    assert proxy.calls["MutateRows"] - before == 3  # the main write only: its 3 attempts
    *retried, gave_up = records(caplog, "tsmodel.bigtable")
    assert [r.attempt for r in retried] == [1, 2]
    assert gave_up.levelno == logging.WARNING and gave_up.attempt == 3
    assert gave_up.getMessage().startswith(
        f"MutateRows of table {ts.spec_of(model).table!r}: giving up after 3 attempts")


@pytest.mark.emulator
async def test_async_retries_are_logged_too(
    proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    model = declare()
    url = f"bigtable-emulator://{proxy.host_port}/ops/inst"
    async with ts.connect_async(url, batch_size=2, backoff_initial=0.001,
                                backoff_maximum=0.002) as db:
        await db.create_tables(model)
        await db.save_all(readings(model, 1))
        proxy.faults = Faults(write_before=0.5)
        with caplog.at_level(logging.INFO, logger="tsmodel.bigtable"):
            await db.save_all(readings(model, 20))
        proxy.faults = Faults()
    injected = sum(n for k, n in proxy.injected.items() if k.startswith("write.before."))
    assert injected and len(records(caplog, "tsmodel.bigtable")) == injected


@pytest.mark.emulator
def test_credentials_and_client_options_reach_both_clients(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.auth.credentials import AnonymousCredentials

    from tsmodel.backends.bigtable import BigtableBackend

    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    creds = AnonymousCredentials()
    settings = ts.Settings(credentials=creds, client_options={"api_endpoint": "bt.test:443"})
    with BigtableBackend("p", "i", settings=settings) as backend:  # no I/O yet
        assert backend._data.api_endpoint == "bt.test:443"
        assert backend._admin.client.api_endpoint == "bt.test:443"
        assert backend._data.transport._credentials is creds
        assert backend._admin.client.transport._credentials is creds
