"""An app profile given to a connection or a command reaches every data request.

Batch work goes through a low-priority app profile so that it yields to
serving traffic (docs/jobs.md). The emulator ignores app profiles, so the
fault proxy (tests/faults/proxy.py) counts the profile each data request
carries, in the request's ``app_profile_id`` and in its routing header. The
embedded store ignores the profile too: there, the same commands must simply
work. What the commands did is checked against plain Python over the saved
events.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import tsmodel as ts
from tests.faults.proxy import FaultProxy
from tsmodel.backends import with_app_profile
from tsmodel.cli import main

UTC = timezone.utc
T0 = datetime(2024, 5, 1, tzinfo=UTC)
TARGET = "tests/backends/test_app_profiles.py:Meter"
PROFILE = "batch-low"


@ts.model(table="AP_METER", family="M", current="AP_METER_CURRENT")
class Meter:
    meter: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    kwh: float = ts.value("KWH")


def meters(n: int) -> list[Meter]:
    return [Meter(meter=f"m{i % 4}", time=T0 + timedelta(minutes=i), kwh=i / 2)
            for i in range(n)]


@pytest.fixture(params=["embedded", pytest.param("emulator", marks=pytest.mark.emulator)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """``(url, proxy)``: an empty store, through the counting proxy on the emulator."""
    if request.param == "embedded":
        yield f"sqlite:///{tmp_path / 'profiles.db'}", None
        return
    emulator = request.getfixturevalue("emulator")
    with FaultProxy(emulator.host_port) as proxy:
        yield f"bigtable-emulator://{proxy.host_port}/tsmodel-ap/ap{uuid.uuid4().hex[:10]}", \
            proxy


def profiles(proxy: FaultProxy | None) -> set[tuple[str, str, str]]:
    return set() if proxy is None else set(proxy.app_profiles)


def test_a_connection_sends_its_app_profile_with_every_data_request(
        store: tuple[str, Any]) -> None:
    url, proxy = store
    saved = meters(20)
    with ts.connect(url, default=False, app_profile=PROFILE) as db:
        db.create_tables(Meter)
        db.save_all(saved)
        got = [(m.meter, m.time, m.kwh) for m in
               Meter.using(db).range(T0, T0 + timedelta(days=1), meter="m1")]
        latest = Meter.using(db).latest(meter="m2")
    assert got == [(m.meter, m.time, m.kwh) for m in saved if m.meter == "m1"]
    newest = max((m for m in saved if m.meter == "m2"), key=lambda m: m.time)
    assert (latest.time, latest.kwh) == (newest.time, newest.kwh)
    if proxy is not None:
        assert profiles(proxy) == {("MutateRows", PROFILE, PROFILE),
                                   ("ReadRows", PROFILE, PROFILE)}


def test_the_repair_command_takes_an_app_profile(store: tuple[str, Any],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    url, proxy = store
    saved = meters(40)
    with ts.connect(url, default=False) as db:  # the application's own profile
        db.create_tables(Meter)
        db.save_all(saved)
    if proxy is not None:
        assert profiles(proxy) == {("MutateRows", "", "")}
        proxy.app_profiles.clear()
    status = main(["repair", TARGET, "--start", "2024-05-01", "--end", "2024-05-02",
                   "--url", url, "--app-profile", PROFILE, "--no-progress", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0
    assert report["events"] == len(saved)
    if proxy is not None:
        seen = profiles(proxy)
        assert {method for method, _, _ in seen} == {"ReadRows", "MutateRows"}
        assert all(given == routed == PROFILE for _, given, routed in seen)
    with ts.connect(url, default=False) as db:
        for meter in ("m0", "m1", "m2", "m3"):
            newest = max((m for m in saved if m.meter == meter), key=lambda m: m.time)
            latest = Meter.using(db).latest(meter=meter)
            assert (latest.time, latest.kwh) == (newest.time, newest.kwh)


def test_two_different_app_profiles_are_refused(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'two.db'}?app_profile=serving"
    status = main(["repair", TARGET, "--start", "2024-05-01", "--end", "2024-05-02",
                   "--url", url, "--app-profile", PROFILE, "--no-progress"])
    err = capsys.readouterr().err
    assert status == 1
    assert "'serving'" in err and f"'{PROFILE}'" in err and err.count("\n") == 1


@pytest.mark.parametrize(("url", "expected"), [
    ("bigtable://p/i", f"bigtable://p/i?app_profile={PROFILE}"),
    ("bigtable://p/i?retry_attempts=3", f"bigtable://p/i?retry_attempts=3&app_profile={PROFILE}"),
    (f"bigtable://p/i?app_profile={PROFILE}", f"bigtable://p/i?app_profile={PROFILE}"),
    ("sqlite:////data/x.db", f"sqlite:////data/x.db?app_profile={PROFILE}"),
    ("bigtable://p/i?", f"bigtable://p/i?app_profile={PROFILE}"),
])
def test_an_app_profile_joins_a_url(url: str, expected: str) -> None:
    assert with_app_profile(url, PROFILE) == expected
    assert with_app_profile(url, None) == url
    with ts.connect(with_app_profile("memory://", PROFILE), default=False) as db:
        assert db.settings == ts.Settings(app_profile=PROFILE)
