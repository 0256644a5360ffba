"""The pace of writes under the server's rate limits (`WritePacer`), on a fake clock.

Expected rates and waits are worked out here by hand from the rules of
tsmodel/plan/pacing.py's docstring (the first limit is the measured rate
times the clamped factor; changes at most once per period; a wait is the
rows already let go divided by the rate), never read back from the pacer.
"""

from __future__ import annotations

import math

import pytest

from tsmodel._observe import RateLimit
from tsmodel.plan.pacing import MIN_RATE, WritePacer


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def steady(pacer: WritePacer, clock: Clock, rows: int, every: float, count: int) -> None:
    """``count`` unpaced writes of ``rows`` rows, one each ``every`` seconds."""
    for _ in range(count):
        assert pacer.wait(rows) == 0.0
        clock.now += every


def test_writes_are_not_paced_until_the_server_asks() -> None:
    clock = Clock()
    pacer = WritePacer(clock)
    steady(pacer, clock, 500, 0.01, 50)
    assert pacer.observe(None) is None
    assert pacer.rate is None
    assert pacer.wait(10_000) == 0.0
    assert list(pacer.changes) == []


def test_a_factor_of_one_or_more_leaves_an_unpaced_writer_alone() -> None:
    clock = Clock()
    pacer = WritePacer(clock)
    steady(pacer, clock, 100, 0.1, 10)
    assert pacer.observe(RateLimit(1.0, 1.0)) is None
    assert pacer.observe(RateLimit(1.0, 1.2)) is None
    assert pacer.rate is None


def test_the_first_limit_is_the_measured_rate_times_the_clamped_factor() -> None:
    clock = Clock(0.0)
    pacer = WritePacer(clock)
    steady(pacer, clock, 100, 0.1, 10)  # writes at 0.0 .. 0.9: 1000 rows by t=1.0
    change = pacer.observe(RateLimit(period=1.0, factor=0.5))  # 0.5 is clamped to 0.7
    assert change is not None
    assert change.measured == pytest.approx(1000 / 1.0)
    assert change.factor == pytest.approx(0.7)
    assert pacer.rate == pytest.approx(700.0)
    assert change.rate == pacer.rate and change.before is None
    assert list(pacer.changes) == [change]


def test_writes_are_spaced_by_their_rows_over_the_rate() -> None:
    clock = Clock(0.0)
    pacer = WritePacer(clock)
    steady(pacer, clock, 100, 0.1, 10)
    pacer.observe(RateLimit(1.0, 0.7))
    # Four writes asked at the same instant: each waits for the rows before it.
    waits = [pacer.wait(rows) for rows in (70, 140, 35, 70)]
    rate = 700.0
    assert waits == pytest.approx([0.0, 70 / rate, 210 / rate, 245 / rate])
    # Asked later than its turn, a write goes at once.
    clock.now += 10
    assert pacer.wait(70) == 0.0
    assert pacer.wait(70) == pytest.approx(70 / rate)


def test_the_rate_changes_at_most_once_per_period() -> None:
    clock = Clock(0.0)
    pacer = WritePacer(clock)
    steady(pacer, clock, 100, 0.1, 10)
    pacer.observe(RateLimit(2.0, 0.8))
    assert pacer.rate == pytest.approx(800.0)
    clock.now += 1.0
    assert pacer.observe(RateLimit(2.0, 0.8)) is None  # within the period: ignored
    assert pacer.observe(None) is None  # nor is the limit lifted within it
    assert pacer.rate == pytest.approx(800.0)
    clock.now += 1.0
    change = pacer.observe(RateLimit(0.5, 0.9))
    assert change is not None and change.before == pytest.approx(800.0)
    assert pacer.rate == pytest.approx(720.0)
    clock.now += 0.4
    assert pacer.observe(RateLimit(0.5, 0.9)) is None  # the new period: 0.5 s
    clock.now += 0.1
    assert pacer.observe(RateLimit(0.5, 0.9)) is not None
    assert pacer.rate == pytest.approx(648.0)


def test_factors_are_clamped_and_the_rate_has_a_floor() -> None:
    clock = Clock(0.0)
    pacer = WritePacer(clock)
    steady(pacer, clock, 10, 0.1, 10)  # 100 rows/s
    rates = []
    for _ in range(30):
        pacer.observe(RateLimit(0.0, 0.01))  # clamped to 0.7 each time
        rates.append(pacer.rate)
        clock.now += 0.001
    expected = [max(MIN_RATE, 100 * 0.7 ** (k + 1)) for k in range(30)]
    assert rates == pytest.approx(expected)
    assert rates[-1] == MIN_RATE


def test_a_higher_rate_only_when_writes_were_held_back() -> None:
    clock = Clock(0.0)
    pacer = WritePacer(clock)
    steady(pacer, clock, 100, 0.1, 10)
    pacer.observe(RateLimit(0.5, 0.7))  # 700 rows/s
    clock.now += 10.0
    assert pacer.wait(7) == 0.0  # far below the rate: no write waits
    assert pacer.observe(RateLimit(0.5, 2.0)) is None
    assert pacer.rate == pytest.approx(700.0)
    clock.now += 1.0
    pacer.wait(700)
    assert pacer.wait(700) > 0  # held back
    change = pacer.observe(RateLimit(0.5, 2.0))  # clamped to 1.3
    assert change is not None and change.factor == pytest.approx(1.3)
    assert pacer.rate == pytest.approx(910.0)


def test_the_limit_is_lifted_when_the_server_stops_asking() -> None:
    clock = Clock(0.0)
    pacer = WritePacer(clock)
    steady(pacer, clock, 100, 0.1, 10)
    pacer.observe(RateLimit(1.0, 0.7))
    pacer.wait(700)
    clock.now += 0.5
    assert pacer.observe(None) is None  # within the period
    clock.now += 0.5
    change = pacer.observe(None)
    assert change is not None and change.rate is None and change.before == pytest.approx(700)
    assert pacer.rate is None
    assert pacer.wait(1_000_000) == 0.0
    # Asked again: measured afresh (the writes of the last two seconds).
    clock.now += 0.5
    again = pacer.observe(RateLimit(1.0, 0.7))
    assert again is not None and again.measured is not None and again.before is None


def test_answers_that_are_no_numbers_are_taken_safely() -> None:
    clock = Clock(0.0)
    pacer = WritePacer(clock)
    steady(pacer, clock, 100, 0.1, 10)
    assert pacer.observe(RateLimit(1.0, math.nan)) is None  # a factor of 1: nothing to do
    change = pacer.observe(RateLimit(math.nan, 0.7))
    assert change is not None and change.period == 0.0
    change = pacer.observe(RateLimit(1e12, 0.7))
    assert change is not None and change.period == 300.0


def test_a_factor_of_one_holds_the_pace_for_a_period() -> None:
    clock = Clock(0.0)
    pacer = WritePacer(clock)
    steady(pacer, clock, 100, 0.1, 10)
    pacer.observe(RateLimit(1.0, 0.7))
    clock.now += 1.0
    assert pacer.observe(RateLimit(1.0, 1.0)) is None  # no change to report
    assert pacer.rate == pytest.approx(700.0)
    clock.now += 0.5
    assert pacer.observe(None) is None  # held: not lifted within the new period
    clock.now += 0.5
    assert pacer.observe(None) is not None and pacer.rate is None
