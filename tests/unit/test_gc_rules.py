"""What a GC rule means (tsmodel.ground.gc), without I/O.

One module reads GcRule for everyone: the embedded store's reads and
collections, schema plans (comparison by meaning), the retention guard and
sizing advice. The embedded store's behaviour under each rule is tested on
every backend in tests/backends/test_protocol.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tsmodel.backends import gc
from tsmodel.backends.base import GcRule

DAY = timedelta(days=1)
ONE = GcRule(max_versions=1)
MONTH = GcRule(max_versions=1, max_age=30 * DAY)
NOW = 1_717_200_000_000_000  # µs


# -- comparison by meaning --------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), [
    (GcRule(max_versions=1, max_age=DAY),
     GcRule(rules=(GcRule(max_age=DAY), GcRule(max_versions=1)))),
    (GcRule(rules=(GcRule(max_versions=2),)), GcRule(max_versions=2)),
    (GcRule(rules=(GcRule(max_versions=1), GcRule(rules=(GcRule(max_age=DAY),
                                                        GcRule(max_versions=3))))),
     GcRule(rules=(GcRule(max_versions=1), GcRule(max_age=DAY), GcRule(max_versions=3)))),
    (GcRule(), GcRule(rules=(GcRule(),))),
    (GcRule(max_versions=1, max_age=DAY, mode="intersection"),
     GcRule(rules=(GcRule(max_age=DAY), GcRule(max_versions=1)), mode="intersection")),
])
def test_rules_equal_whatever_the_spelling(a: GcRule, b: GcRule) -> None:
    assert gc.rules_equal(a, b) and gc.rules_equal(b, a)


@pytest.mark.parametrize(("a", "b"), [
    (GcRule(max_versions=1), GcRule(max_versions=2)),
    (GcRule(max_versions=1, max_age=DAY), GcRule(max_versions=1, max_age=DAY,
                                                 mode="intersection")),
    (GcRule(max_age=DAY), GcRule(max_age=2 * DAY)),
    (GcRule(), GcRule(max_versions=1)),
])
def test_different_rules_differ(a: GcRule, b: GcRule) -> None:
    assert not gc.rules_equal(a, b)


@pytest.mark.parametrize(("old", "new", "tighter"), [
    (GcRule(max_versions=5), ONE, True),
    (ONE, GcRule(max_versions=5), False),
    (ONE, MONTH, True),                       # an age limit where there was none
    (MONTH, ONE, False),
    (GcRule(max_age=7 * DAY), GcRule(max_age=DAY), True),
    (GcRule(), GcRule(max_versions=1, max_age=DAY, mode="intersection"), False),  # not surely
])
def test_tightens(old: GcRule, new: GcRule, tighter: bool) -> None:
    assert gc.tightens(old, new) is tighter


# -- what a rule surely deletes ---------------------------------------------------------


@pytest.mark.parametrize(("rule", "age", "versions"), [
    (GcRule(), None, None),
    (GcRule(max_versions=2), None, 2),
    (GcRule(max_age=DAY), DAY, None),
    (GcRule(max_versions=2, max_age=DAY), DAY, 2),                      # union: either
    (GcRule(max_versions=2, max_age=DAY, mode="intersection"), None, None),  # both needed
    (GcRule(rules=(GcRule(max_age=DAY), GcRule(max_age=7 * DAY))), DAY, None),
    (GcRule(rules=(GcRule(max_age=DAY), GcRule(max_age=7 * DAY)), mode="intersection"),
     7 * DAY, None),
    (GcRule(max_versions=2, rules=(GcRule(max_age=DAY),), mode="intersection"), None, None),
    (GcRule(rules=(GcRule(), GcRule(max_age=DAY)), mode="intersection"), None, None),
    (GcRule(rules=(GcRule(max_versions=3), GcRule(max_versions=2)), mode="intersection"),
     None, 3),
])
def test_what_a_rule_surely_deletes(rule: GcRule, age: timedelta | None,
                                    versions: int | None) -> None:
    assert gc.max_age_of(rule) == age
    assert gc.max_versions_of(rule) == versions
    cutoff = gc.age_cutoff(rule, NOW)
    assert cutoff == (None if age is None else NOW - age // gc.MICROSECOND)


@pytest.mark.parametrize("rule", [
    GcRule(),
    ONE,
    MONTH,
    GcRule(max_versions=2, max_age=DAY, mode="intersection"),
    GcRule(rules=(GcRule(max_age=DAY), GcRule(max_age=7 * DAY)), mode="intersection"),
    GcRule(rules=(GcRule(max_versions=5),
                  GcRule(max_versions=1, max_age=DAY, mode="intersection"))),
])
def test_what_surely_goes_is_collected(rule: GcRule) -> None:
    """Every cell past the surely-deleted limits is collected, whatever else holds."""
    collected = gc.collects(rule, NOW)
    cutoff, cap = gc.age_cutoff(rule, NOW), gc.max_versions_of(rule)
    for rank in range(8):
        for ts in (NOW - 30 * DAY // gc.MICROSECOND - 1, NOW - DAY // gc.MICROSECOND - 1,
                   NOW - 1, NOW):
            if (cutoff is not None and ts < cutoff) or (cap is not None and rank >= cap):
                assert collected(rank, ts), (rank, ts)


def test_collects_cell_by_cell() -> None:
    both = gc.collects(GcRule(max_versions=1, max_age=DAY, mode="intersection"), NOW)
    old = NOW - DAY // gc.MICROSECOND - 1
    assert both(1, old) and not both(0, old) and not both(1, NOW)
    either = gc.collects(GcRule(max_versions=1, max_age=DAY), NOW)
    assert either(0, old) and either(1, NOW) and not either(0, NOW)
    assert not gc.collects(GcRule(), NOW)(100, 0)


def test_uses() -> None:
    nested = GcRule(rules=(GcRule(max_versions=1), GcRule(rules=(GcRule(max_age=DAY),))))
    assert gc.uses(nested, "max_age") and gc.uses(nested, "max_versions")
    assert not gc.uses(ONE, "max_age") and not gc.uses(GcRule(), "max_versions")


# -- saying what a rule does ------------------------------------------------------------


@pytest.mark.parametrize(("rule", "text"), [
    (GcRule(), "none (keep every cell)"),
    (GcRule(max_versions=1), "max_versions=1"),
    (GcRule(max_age=timedelta(days=30)), "max_age=30d"),
    (GcRule(max_age=timedelta(hours=36)), "max_age=36h"),
    (GcRule(max_age=timedelta(milliseconds=1500)), "max_age=1500ms"),
    (GcRule(max_age=DAY, max_versions=3), "max_versions=3 OR max_age=1d"),
    (GcRule(rules=(GcRule(max_versions=5),
                   GcRule(max_versions=1, max_age=DAY, mode="intersection"))),
     "max_versions=5 OR (max_versions=1 AND max_age=1d)"),
])
def test_describe(rule: GcRule, text: str) -> None:
    assert gc.describe(rule) == text


def test_to_dict() -> None:
    assert gc.to_dict(MONTH) == {
        "text": "max_versions=1 OR max_age=30d", "max_versions": 1,
        "max_age_seconds": 2592000.0, "mode": "union"}
    assert gc.to_dict(ONE) == {"text": "max_versions=1", "max_versions": 1}


@pytest.mark.parametrize(("age", "text"), [
    (30 * DAY, "30d"), (timedelta(hours=12), "12h"), (timedelta(minutes=90), "90m"),
    (timedelta(seconds=90), "90s"), (timedelta(milliseconds=1500), "1500ms"),
    (timedelta(microseconds=7), "7us"),
])
def test_format_duration(age: timedelta, text: str) -> None:
    assert gc.format_duration(age) == text
