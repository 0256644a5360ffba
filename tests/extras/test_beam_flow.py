"""Beam jobs yield to the server: the sink follows its rate limits, jobs take an app profile.

On the emulator, through the fault proxy (tests/faults/proxy.py), which adds
``RateLimitInfo`` to ``MutateRows`` responses (the emulator never sends it)
and counts the app profile of every data request (the emulator ignores
them). Each worker's connection paces its writes as the server asks
(tsmodel/plan/pacing.py): the sink must slow down and lose nothing. Figures
are compared with the rates the workers decided (their log lines), never
with a speed set in advance.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

beam = pytest.importorskip("apache_beam")

from apache_beam.testing.util import assert_that, equal_to  # noqa: E402

import tsmodel as ts  # noqa: E402
from tests.faults.proxy import FaultProxy  # noqa: E402
from tsmodel.jobs import beam as tsbeam  # noqa: E402
from tsmodel.plan.pacing import MIN_FACTOR  # noqa: E402

UTC = timezone.utc
T0 = datetime(2024, 5, 1, tzinfo=UTC)
OPTIONS = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]
HERE = "tests/extras/test_beam_flow.py"
PROFILE = "batch-low"
PERIOD, FACTOR, CUTTING = 0.2, 0.5, 0.5


@ts.model(table="BF_METER", family="M", current="BF_METER_CURRENT")
class Meter:
    meter: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    kwh: float = ts.value("KWH")


def meters(n: int) -> list[Meter]:
    return [Meter(meter=f"m{i % 4}", time=T0 + timedelta(seconds=i), kwh=i / 2)
            for i in range(n)]


@pytest.fixture
def proxied(tsmodel_emulator: Any) -> Iterator[tuple[FaultProxy, str, str]]:
    """The proxy, and the URLs of a fresh instance through it and straight to the emulator."""
    instance = f"bf{uuid.uuid4().hex[:10]}"
    host_port = tsmodel_emulator.host_port  # the pytest plugin's session emulator
    with FaultProxy(host_port) as proxy:
        yield (proxy, f"bigtable-emulator://{proxy.host_port}/tsmodel-bf/{instance}",
               f"bigtable-emulator://{host_port}/tsmodel-bf/{instance}")


def stored(url: str) -> list[tuple[str, datetime, float]]:
    with ts.connect(url, default=False) as db:
        return sorted((m.meter, m.time, m.kwh) for m in Meter.range(
            T0, T0 + timedelta(days=1), allow_scan=True).using(db))


@pytest.mark.emulator
def test_the_sink_slows_down_when_the_server_asks_and_loses_nothing(
        proxied: tuple[FaultProxy, str, str], caplog: pytest.LogCaptureFixture) -> None:
    proxy, url, direct = proxied
    with ts.connect(direct, default=False) as db:
        db.create_tables(Meter)
    began: list[float] = []

    def answer() -> tuple[float, float]:  # slow down for CUTTING s, then hold the pace
        now = time.monotonic()
        began[:] = began or [now]
        return (PERIOD, FACTOR) if now < began[0] + CUTTING else (PERIOD, 1.0)

    proxy.rate_limit = answer
    events = meters(1500)
    with caplog.at_level(logging.INFO, logger="tsmodel.writes"):
        with beam.Pipeline(options=tsbeam.pipeline_options(OPTIONS)) as p:
            out = p | beam.Create(events) | tsbeam.WriteModel(url, batch_size=50)
            assert_that(out.dead_letters, equal_to([]), label="no dead letters")
    assert stored(direct) == sorted((m.meter, m.time, m.kwh) for m in events)
    cuts = [r for r in caplog.records if r.name == "tsmodel.writes" and hasattr(r, "rate")]
    assert len(cuts) >= 2, [r.getMessage() for r in cuts]
    assert cuts[0].before is None and cuts[0].factor == pytest.approx(MIN_FACTOR)
    for earlier, later in zip(cuts, cuts[1:], strict=False):
        assert later.rate == pytest.approx(earlier.rate * MIN_FACTOR)
    # Once the first cut has reached the writes (a batch's two writes may be out
    # before it), the sink writes no faster than the fastest rate decided.
    writes = [w for w in proxy.writes if w.table == "BF_METER"][4:]
    span = writes[-1].time - writes[0].time
    achieved = sum(w.entries for w in writes[:-1]) / span
    assert achieved <= cuts[0].rate * 1.25
    print(f"\nsink: {achieved:.0f} rows/s to the main table; decided "
          + ", ".join(f"{r.rate:.0f}" for r in cuts) + " rows/s")


@pytest.mark.emulator
def test_a_job_sends_its_app_profile_with_every_data_request(
        proxied: tuple[FaultProxy, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    from tsmodel.cli import main

    proxy, url, direct = proxied
    saved = meters(200)
    with ts.connect(direct, default=False) as db:
        db.create_tables(Meter)
        db.save_all(saved)
    status = main(["job", "repair", f"{HERE}:Meter", "--start", "2024-05-01",
                   "--end", "2024-05-02", "--url", url, "--app-profile", PROFILE,
                   "--json", "--", *OPTIONS])
    out = capsys.readouterr().out
    assert status == 0, out
    assert json.loads(out)["ok"]
    seen = set(proxy.app_profiles)
    assert {method for method, _, _ in seen} == {"ReadRows", "MutateRows"}
    assert all(given == routed == PROFILE for _, given, routed in seen), seen
    with ts.connect(direct, default=False) as db:
        for meter in ("m0", "m1", "m2", "m3"):
            newest = max((m for m in saved if m.meter == meter), key=lambda m: m.time)
            latest = Meter.using(db).latest(meter=meter)
            assert (latest.time, latest.kwh) == (newest.time, newest.kwh)


def test_a_job_refuses_two_app_profiles() -> None:
    with pytest.raises(ts.ConfigurationError, match="'serving'.*'batch-low'"):
        tsbeam.snapshot("bigtable://p/i?app_profile=serving", Meter, T0, app_profile=PROFILE)


@pytest.mark.parametrize("url", ["memory://?app_profile=batch-low", "memory://",
                                 "sqlite:///:memory:?retry_attempts=3"])
def test_an_in_memory_store_is_refused_with_options_or_a_profile(url: str) -> None:
    with pytest.raises(ts.ConfigurationError, match="every worker can open"):
        tsbeam.snapshot(url, Meter, T0)
    with pytest.raises(ts.ConfigurationError, match="every worker can open"):
        tsbeam.snapshot(url.partition("?")[0], Meter, T0, app_profile=PROFILE)

