"""The guard against writing events that garbage collection deletes at once.

A max-age GC rule counts from the *cell timestamp*, and tsmodel writes the
event time there: a backfilled event older than the max age is deleted by the
next garbage collection, at once. `retention_problems()` finds the events
of a save that would be lost, and `retention_message()` says so in one
error message:

    problems = tsmodel.plan.retention.retention_problems(events)
    if problems:
        raise ValueError(tsmodel.plan.retention.retention_message(problems))

`retention_horizons()` lists the families of a model's event tables where
age alone surely deletes a cell; what a GC rule surely deletes is decided
in `tsmodel.ground.gc`. A rollup's ``retention`` is no reason to refuse an
event: the model keeps the event, and the rollup keeps no row of a bucket
older than its retention (`tsmodel.plan.rollups`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from tsmodel.declare.spec import ModelSpec, instance_spec
from tsmodel.declare.tables import event_table_specs
from tsmodel.encoding.timestamps import from_micros, to_micros
from tsmodel.ground.gc import MICROSECOND, format_duration, max_age_of

__all__ = [
    "retention_horizons",
    "RetentionProblem",
    "retention_problems",
    "retention_message",
]


def retention_horizons(spec: ModelSpec) -> tuple[tuple[str, str, timedelta], ...]:
    """``(table, family, max age)`` of every family holding the model's events (its
    main, alternate-key and current-value tables) whose GC rule has a max age.

    Args:
        spec: the model's spec (`tsmodel.spec_of()`).

    Returns:
        Only the families where age alone surely deletes a cell (see
        `tsmodel.ground.gc.max_age_of()`), shortest age first; not the
        rollup tables'.
    """
    found = [(t.name, family, age) for t in event_table_specs(spec) for family, rule in t.families
             if (age := max_age_of(rule)) is not None]
    return tuple(sorted(found, key=lambda item: item[2]))


@attrs.frozen
class RetentionProblem:
    """An event older than the max age of a family it is written to.

    Garbage collection deletes its cells at once, because tsmodel writes the
    event time as the cell timestamp.

    Attributes:
        entity: the model instance.
        model: the model name.
        table: the table whose family would delete it.
        family: that family.
        max_age: the family's max age.
        event_time: the event's cell timestamp (UTC).
        age: how old the event is at the time of the check.
    """

    entity: Any
    model: str
    table: str
    family: str
    max_age: timedelta
    event_time: datetime
    age: timedelta

    def __str__(self) -> str:
        return (f"{self.model} event at {self.event_time.isoformat()} is {_age(self.age)} old, "
                f"past the max age {format_duration(self.max_age)} of {self.table}:{self.family}")


def _age(age: timedelta) -> str:
    days = age // timedelta(days=1)
    if days >= 2:
        return f"{days} days"
    return format_duration(timedelta(seconds=int(age.total_seconds())))


def retention_problems(entities: Iterable[Any], *,
                       now: datetime | None = None) -> list[RetentionProblem]:
    """The events that garbage collection would delete as soon as they are written.

    A max-age GC rule counts from the cell timestamp, and tsmodel sets it to
    the event time (whole milliseconds): an event older than a family's max
    age is deleted at the next garbage collection (at once on the embedded
    store, within about a second on the emulator). Call it before a save and
    refuse, or warn, unless the caller accepts the loss.

    Args:
        entities: model instances, of one or several models, already valid
            (their timestamps are timezone-aware datetimes).
        now: the time to measure ages at (default: the current time).

    Returns:
        One problem per expired entity (the family with the shortest max
        age), in input order; empty when no family has a max age or no event
        is too old.

    Raises:
        TypeError: an entity is not a model instance.
        ValueError: an entity's timestamp is naive.
    """
    now_us = to_micros(now if now is not None else datetime.now(timezone.utc))
    # By class: one look-up per entity, where spec_of() would check the class every time.
    horizons: dict[type, tuple[ModelSpec, tuple[tuple[str, str, timedelta], ...]]] = {}
    problems = []
    for entity in entities:
        found = horizons.get(type(entity))
        if found is None:
            spec = instance_spec(entity)
            found = horizons[type(entity)] = (spec, retention_horizons(spec))
        spec, limits = found
        if limits:
            problem = _expired(spec, entity, limits, now_us)
            if problem is not None:
                problems.append(problem)
    return problems


def _expired(spec: ModelSpec, entity: Any, limits: tuple[tuple[str, str, timedelta], ...],
             now_us: int) -> RetentionProblem | None:
    cell_us = to_micros(getattr(entity, spec.timestamp_field)) // 1_000 * 1_000
    for table, family, age in limits:  # shortest first
        if cell_us < now_us - age // MICROSECOND:
            return RetentionProblem(entity, spec.name, table, family, age,
                                    from_micros(cell_us), timedelta(microseconds=now_us - cell_us))
    return None


def retention_message(problems: list[RetentionProblem],
                      fix: str = "pass accept_expired=True to save them anyway") -> str:
    """One error message for the problems `retention_problems()` found.

    Args:
        problems: at least one problem.
        fix: how the caller accepts the loss, said at the end.

    Returns:
        The count, the first problem, why it happens and the fix.
    """
    n = len(problems)
    first = problems[0]
    return (f"{_plural_events(n)} older than the max age of {'its' if n == 1 else 'their'} "
            f"column family and would be deleted by garbage collection as soon as written "
            f"(cell timestamps are event times); first: {first}. Raise the model's retention, "
            f"or {fix}")


def _plural_events(n: int) -> str:
    return "1 event is" if n == 1 else f"{n} events are"
