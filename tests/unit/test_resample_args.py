"""``resample()`` and ``ts.rollup()`` arguments, planned without I/O: a field name
given as one string, and bucket sizes the parser does not take."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import tsmodel as ts
from tsmodel.plan.rollups import compile_resample

UTC = timezone.utc
DAY = (datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 1, 2, tzinfo=UTC))


@ts.model(table="RESAMPLE_ARGS", family="F",
          rollups=[ts.rollup("RESAMPLE_ARGS_1H", "1h", fields=["cpu"])])
class Load:
    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value("CPU")
    n: int = ts.value("N")


def test_a_string_is_one_field_name() -> None:
    qs = Load.range(*DAY, host="h")
    assert qs.resample("1h", fields="cpu").explain().fields == ("cpu",)
    assert qs.resample("1h", fields="cpu").explain().source == "rollup"
    assert qs.resample("1h", fields=["cpu", "n"]).explain().fields == ("cpu", "n")
    # ts.rollup(fields=...) takes one name the same way.
    @ts.model(table="RESAMPLE_ONE", family="F",
              rollups=[ts.rollup("RESAMPLE_ONE_1H", "1h", fields="cpu")])
    class One:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU")
        n: int = ts.value("N")

    assert ts.spec_of(One).rollups[0].fields == ("cpu",)
    with pytest.raises(ts.QueryError, match=r"names 'cpux': not an int or float"):
        qs.resample("1h", fields="cpux")


@pytest.mark.parametrize("every", ["1w", "2w", "1mo", "1month", "3months", "1y", "1wk",
                                   "1week", "1M"])
def test_calendar_units_are_refused_with_the_units_that_work(every: str) -> None:
    qs = Load.range(*DAY, host="h")
    with pytest.raises(ts.QueryError) as info:
        qs.resample(every)
    message = str(info.value)
    for unit in ("ms", "s", "min", "h", "d", "timedelta"):
        assert unit in message
    assert "weeks" in message and "months" in message and "'7d'" in message


@pytest.mark.parametrize("every", ["often", "1 hour", "h", "-1h", "1.5h"])
def test_other_sizes_name_the_units(every: str) -> None:
    with pytest.raises(ts.QueryError, match=r"ms, s, min, h or d"):
        Load.range(*DAY, host="h").resample(every)
    with pytest.raises(ts.DeclarationError, match=r"ms, s, min, h or d"):
        @ts.model(table="RESAMPLE_BAD", family="F", rollups=[ts.rollup("X_R", every)])
        class Bad:
            host: str = ts.key()
            time: datetime = ts.timestamp(unit="ms")
            cpu: float = ts.value("CPU")


def test_a_timedelta_of_a_week_works() -> None:
    plan = Load.range(*DAY, host="h").resample(timedelta(days=7)).explain()
    assert plan.every == 7 * 86_400_000_000


@pytest.mark.parametrize(("raw_days", "rollup_days", "start_days_ago", "source"), [
    (None, 2, 3, "raw"),     # the model keeps its events forever, the rollup two days
    (None, 2, 1, "rollup"),  # a range inside the rollup's retention
    (30, 2, 3, "raw"),       # the model keeps them longer than the rollup
    (1, 30, 10, "rollup"),   # the rollup outlives the raw events: it holds more
    (2, 2, 3, "rollup"),     # the same retention: the rollup holds what the events do
    (None, None, 900, "rollup"),
])
def test_a_rollup_serves_only_what_its_retention_keeps(
        raw_days: int | None, rollup_days: int | None, start_days_ago: int, source: str) -> None:
    """Issue 26, item 1: the source chosen against retention, planned at a given time."""
    def days(n: int | None) -> timedelta | None:
        return None if n is None else timedelta(days=n)

    @ts.model(table="RESAMPLE_KEPT", family="F", retention=days(raw_days),
              rollups=[ts.rollup("RESAMPLE_KEPT_1H", "1h", retention=days(rollup_days))])
    class Kept:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU")

    now = datetime(2024, 6, 1, 12, 30, tzinfo=UTC)
    start = datetime(2024, 6, 1, tzinfo=UTC) - timedelta(days=start_days_ago)
    qs = Kept.range(start, start + timedelta(days=1), host="h")
    now_us = (now - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    plan = compile_resample(ts.spec_of(Kept), qs._state, 3_600_000_000, None, None, now_us)
    assert plan.source == source, plan
    if source == "raw" and rollup_days is not None:
        assert "retention" in plan.reason
