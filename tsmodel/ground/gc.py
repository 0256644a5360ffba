"""What a column family's garbage-collection (GC) rule deletes, in one place.

A `GcRule` is a leaf (``max_versions`` and/or
``max_age``, combined with its ``mode``) or a union or intersection of
nested rules. Every reading of a rule goes through this module:

* what it surely deletes, whatever else holds: `max_age_of()`,
  `max_versions_of()` and, at a given time, `age_cutoff()` (the
  embedded store's reads and collections, the retention guard, sizing
  advice);
* which cells it collects, one by one: `collects()` (the embedded store);
* whether two spellings mean the same rule, and whether a new rule deletes
  more than an old one: `rules_equal()`, `tightens()` (schema plans);
* how to say it: `describe()`, `to_dict()`, `format_duration()`.

A max age counts from the *cell timestamp*, not from the time of the write.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

from tsmodel.ground.base import GcRule

__all__ = [
    "MICROSECOND",
    "GcTest",
    "uses",
    "max_age_of",
    "max_versions_of",
    "age_cutoff",
    "collects",
    "rules_equal",
    "tightens",
    "describe",
    "to_dict",
    "format_duration",
]

MICROSECOND = timedelta(microseconds=1)

#: A compiled rule: (rank of the cell in its column, 0 = newest; cell
#: timestamp in microseconds) -> whether the rule collects the cell.
GcTest = Callable[[int, int], bool]


# -- what a rule surely deletes ----------------------------------------------------------


def uses(rule: GcRule, attribute: Literal["max_versions", "max_age"]) -> bool:
    """Whether ``rule`` or a rule nested in it sets ``attribute``."""
    return getattr(rule, attribute) is not None or any(uses(sub, attribute) for sub in rule.rules)


def _fold(rule: GcRule, leaf: Callable[[GcRule], int | None],
          union: Callable[[list[int]], int], intersection: Callable[[list[int]], int],
          ) -> int | None:
    """Reduce a rule to the one threshold of one kind of condition that surely applies.

    ``leaf`` reads a rule's own condition of that kind. A condition of the
    other kind makes an intersection uncertain, and so does a part that
    collects nothing: ``None``.
    """
    parts = [_fold(sub, leaf, union, intersection) for sub in rule.rules]
    own = leaf(rule)
    conditions = (rule.max_versions is not None) + (rule.max_age is not None)
    parts += [own] if own is not None else []
    parts += [None] * (conditions - (own is not None))
    known = [p for p in parts if p is not None]
    if rule.mode == "union":
        return union(known) if known else None
    return None if not parts or len(known) < len(parts) else intersection(known)


def _age_us(rule: GcRule) -> int | None:
    return None if rule.max_age is None else rule.max_age // MICROSECOND


def _max_age_us(rule: GcRule) -> int | None:
    return _fold(rule, _age_us, min, max)


def max_age_of(rule: GcRule) -> timedelta | None:
    """The age past which the rule surely deletes a cell, whatever its version count.

    Args:
        rule: a family's GC rule.

    Returns:
        The shortest max age of a union, the longest of an intersection of
        max ages; ``None`` when age alone never deletes a cell (no max age,
        or an intersection with a version limit).
    """
    found = _max_age_us(rule)
    return None if found is None else timedelta(microseconds=found)


def max_versions_of(rule: GcRule) -> int | None:
    """The number of versions per column past which the rule surely deletes cells.

    Args:
        rule: a family's GC rule.

    Returns:
        The smallest version limit of a union, the largest of an
        intersection of limits; ``None`` when the count alone never deletes.
    """
    return _fold(rule, lambda r: r.max_versions, min, max)


def age_cutoff(rule: GcRule, now: int) -> int | None:
    """The cell timestamp before which the rule surely collects a cell at time ``now``.

    Args:
        rule: a family's GC rule.
        now: the time of the collection, in microseconds since the epoch.

    Returns:
        Cells with a timestamp ``< cutoff`` (microseconds) are collected;
        ``None`` when age alone collects nothing (see `max_age_of()`).
    """
    found = _max_age_us(rule)
    return None if found is None else now - found


def collects(rule: GcRule, now: int) -> GcTest:
    """Compile a rule into ``collected(rank, ts)`` for a collection at time ``now`` (µs)."""
    tests = [collects(sub, now) for sub in rule.rules]
    versions = rule.max_versions
    if versions is not None:
        tests.append(lambda rank, ts: rank >= versions)
    if rule.max_age is not None:
        cutoff = now - rule.max_age // MICROSECOND
        tests.append(lambda rank, ts: ts < cutoff)
    if len(tests) == 1:
        return tests[0]
    if not tests:
        return lambda rank, ts: False
    combine = any if rule.mode == "union" else all
    return lambda rank, ts: combine(test(rank, ts) for test in tests)


# -- comparing rules ----------------------------------------------------------------------


_PART_ORDER = {"max_versions": 0, "max_age": 1}


def _canonical(rule: GcRule) -> tuple[Any, ...]:
    """A form of ``rule`` equal for every spelling of the same rule.

    A leaf with two limits is a two-part combination; nested combinations of
    the same mode flatten; order does not matter; one part stands alone.
    """
    parts: list[tuple[Any, ...]] = []
    if rule.max_versions is not None:
        parts.append(("max_versions", rule.max_versions))
    if rule.max_age is not None:
        parts.append(("max_age", rule.max_age // MICROSECOND))
    for sub in rule.rules:
        part = _canonical(sub)
        if part == ("none",):
            if rule.mode == "intersection":
                return ("none",)  # a part that collects nothing: so does the whole
            continue
        parts.extend(part[1] if part[0] == rule.mode else [part])
    unique = sorted(set(parts), key=lambda p: (_PART_ORDER.get(p[0], 2), repr(p)))
    if not unique:
        return ("none",)
    return unique[0] if len(unique) == 1 else (rule.mode, tuple(unique))


def rules_equal(a: GcRule, b: GcRule) -> bool:
    """Whether two GC rules collect the same cells, however they are spelled.

    ``GcRule(max_versions=1, max_age=d)`` equals the union of the two leaves;
    order and nesting of one mode do not matter.
    """
    return _canonical(a) == _canonical(b)


def tightens(old: GcRule, new: GcRule) -> bool:
    """Whether ``new`` may delete cells that ``old`` keeps (a shorter age or fewer versions)."""
    def shorter(a: Any, b: Any) -> bool:
        return b is not None and (a is None or b < a)

    return shorter(max_age_of(old), max_age_of(new)) or \
        shorter(max_versions_of(old), max_versions_of(new))


# -- saying what a rule does --------------------------------------------------------------


def describe(rule: GcRule) -> str:
    """A GC rule in words: ``max_versions=1``, ``max_versions=1 OR max_age=30d``...

    Args:
        rule: the rule.

    Returns:
        One line; ``none (keep every cell)`` for the empty rule.
    """
    text = _describe(_canonical(rule))
    return "none (keep every cell)" if text == "none" else text


def _describe(part: tuple[Any, ...], nested: bool = False) -> str:
    kind = part[0]
    if kind == "none":
        return "none"
    if kind == "max_versions":
        return f"max_versions={part[1]}"
    if kind == "max_age":
        return f"max_age={format_duration(timedelta(microseconds=part[1]))}"
    joiner = " OR " if kind == "union" else " AND "
    text = joiner.join(_describe(p, nested=True) for p in part[1])
    return f"({text})" if nested else text


def to_dict(rule: GcRule) -> dict[str, Any]:
    """A JSON-ready form of a GC rule (max ages in seconds), with its description."""
    out: dict[str, Any] = {"text": describe(rule)}
    if rule.max_versions is not None:
        out["max_versions"] = rule.max_versions
    if rule.max_age is not None:
        out["max_age_seconds"] = rule.max_age.total_seconds()
    if rule.rules:
        out["rules"] = [to_dict(sub) for sub in rule.rules]
    if rule.rules or (rule.max_versions is not None and rule.max_age is not None):
        out["mode"] = rule.mode
    return out


def format_duration(age: timedelta) -> str:
    """``30d``, ``12h``, ``90s``, ``1500ms``: the largest unit that divides the age."""
    us = age // MICROSECOND
    for unit, suffix in ((86_400_000_000, "d"), (3_600_000_000, "h"), (60_000_000, "m"),
                         (1_000_000, "s"), (1_000, "ms")):
        if us % unit == 0:
            return f"{us // unit}{suffix}"
    return f"{us}us"
