"""A save's batch carried as its events' checked tuples (`PlainRows`, `DeclaredRows`).

Checking events and writing their checked tuples must plan exactly what laying
every event out plans: the same rows in each table, for the same entities,
and the same statuses from the same outcomes. The reference is the planner
fed with the generated encoder's events (`encode_all()`), each laid out whole.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tsmodel.backends.base import DeclaredRows, MutationOutcome, MutationStatus
from tsmodel.plan.events import check_all, encode_all
from tsmodel.plan.results import TableWrite
from tsmodel.plan.writes import WritePlan


@ts.model(table="PB_METRIC", family="m", current="PB_CURRENT")
class Metric:
    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value()
    reads: int = ts.value()


@ts.model(table="PB_PLAIN", family="m")
class Plain:
    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value()


START = datetime(2015, 3, 16, tzinfo=timezone.utc)

events = st.lists(st.tuples(st.sampled_from([Metric, Plain]), st.sampled_from("abc"),
                            st.integers(0, 4), st.floats(0, 1), st.integers(0, 9)),
                  max_size=12)


def _made(drawn: list[tuple[Any, ...]]) -> list[Any]:
    out = []
    for cls, host, step, cpu, reads in drawn:
        time = START + timedelta(seconds=step)
        out.append(Metric(host=host, time=time, cpu=cpu, reads=reads) if cls is Metric
                   else Plain(host=host, time=time, cpu=cpu))
    return out


def _seen(write: TableWrite) -> tuple[Any, ...]:
    """A write as its outcomes are recorded: each row with the entities it stands for."""
    members = write.members if write.grouped else tuple((i,) for i in write.members)
    return (write.table, list(write.rows), members, write.role)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=events, size=st.integers(1, 5), data=st.data())
def test_checked_tuples_plan_what_laid_out_events_plan(drawn: list[tuple[Any, ...]],
                                                       size: int, data: Any) -> None:
    entities = _made(drawn)
    carried, laid_out = WritePlan(check_all(entities)), WritePlan(encode_all(entities))
    plain_batches = 0
    for start in range(0, len(entities), size):
        batch = range(start, min(start + size, len(entities)))
        carried.lay_out(batch)
        plain_batches += carried.plain(batch) is not None
        main, expected = carried.main_writes(batch), laid_out.main_writes(batch)
        assert [_seen(w) for w in main] == [_seen(w) for w in expected]
        for write, other in zip(main, expected, strict=True):
            outcomes = [MutationOutcome(s) for s in data.draw(st.lists(
                st.sampled_from(MutationStatus), min_size=len(write.rows),
                max_size=len(write.rows)))]
            carried.record(write, outcomes)
            laid_out.record(other, outcomes)
        companions = carried.companion_writes(batch)
        expected = laid_out.companion_writes(batch)
        assert [_seen(w) for w in companions] == [_seen(w) for w in expected]
        for write, other in zip(companions, expected, strict=True):
            outcomes = [MutationOutcome(s) for s in data.draw(st.lists(
                st.sampled_from(MutationStatus), min_size=len(write.rows),
                max_size=len(write.rows)))]
            carried.record(write, outcomes)
            laid_out.record(other, outcomes)
        assert not carried.rollup_refresh(batch)
        carried.let_go(batch)
        laid_out.let_go(batch)
    result, reference = carried.result(), laid_out.result()
    assert [r.status for r in result.results] == [r.status for r in reference.results]
    assert [r.tables for r in result.results] == [r.tables for r in reference.results]


def test_a_batch_of_one_model_without_repeats_goes_as_its_checked_tuples() -> None:
    entities = [Metric(host=h, time=START, cpu=0.5, reads=1) for h in "abc"]
    plan = WritePlan(check_all(entities))
    batch = range(3)
    plan.lay_out(batch)
    assert plan.plain(batch) is not None
    (main,) = plan.main_writes(batch)
    assert isinstance(main.rows, DeclaredRows)
    assert all(type(ev) is tuple for ev in plan.events)  # nothing laid out


def test_a_repeated_event_or_mixed_models_are_laid_out() -> None:
    again = [Metric(host="a", time=START, cpu=c, reads=1) for c in (0.1, 0.2)]
    mixed = [Metric(host="a", time=START, cpu=0.1, reads=1),
             Plain(host="a", time=START, cpu=0.1)]
    for entities in (again, mixed):
        plan = WritePlan(check_all(entities))
        plan.lay_out(range(2))
        assert plan.plain(range(2)) is None
        assert not any(isinstance(w.rows, DeclaredRows) for w in plan.main_writes(range(2)))


@ts.model(table="PB_MIXED", family="m", current="PB_MIXED_NOW")
class Mixed:
    """Values of a fixed width (float, int, bool) beside ones that vary (str, bytes)."""

    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value()
    note: str = ts.value()
    up: bool = ts.value()
    blob: bytes = ts.value()
    reads: int = ts.value()


@settings(max_examples=100, deadline=None)
@given(drawn=st.lists(st.tuples(st.text(alphabet="abcé", min_size=1, max_size=9),
                                st.integers(0, 9), st.text(max_size=20), st.booleans(),
                                st.binary(max_size=20), st.integers(-2**63, 2**63 - 1)),
                      min_size=1, max_size=12))
def test_a_batch_of_checked_tuples_counts_the_bytes_its_events_count(
        drawn: list[tuple[Any, ...]]) -> None:
    """What a save holds in flight is counted alike from checked tuples (fixed widths
    counted without looking) and from the same events laid out whole."""
    from tsmodel.plan.schedule import _plain_size, _size

    entities = [Mixed(host=host, time=START + timedelta(seconds=step), cpu=step / 3,
                      note=note, up=up, blob=blob, reads=reads)
                for host, step, note, up, blob, reads in drawn]
    checked = check_all(entities)
    (plain,) = checked.plain.values()
    assert _plain_size(plain, checked.events) == sum(map(_size, encode_all(entities)))
    assert plain.declared.widths == (8, None, 1, None, 8)


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(st.sampled_from(["c", "a", "b", "d"]), st.integers(0, 9)),
                      min_size=1, max_size=20, unique=True))
def test_a_plain_batch_current_rows_are_those_its_events_laid_out_make(
        pairs: list[tuple[str, int]]) -> None:
    """One batch of one model's events, hosts interleaved in any order and each
    host's times in any order: the current-value rows (the newest event per host),
    their order (hosts as they first come) and the entities each stands for are
    those of the same events laid out whole."""
    entities = [Metric(host=host, time=START + timedelta(seconds=step), cpu=step / 4,
                       reads=step) for host, step in pairs]
    carried, laid_out = WritePlan(check_all(entities)), WritePlan(encode_all(entities))
    batch = range(len(entities))
    carried.lay_out(batch)
    assert carried.plain(batch) is not None
    carried.main_writes(batch)
    laid_out.main_writes(batch)
    assert [_seen(w) for w in carried.companion_writes(batch)] == \
        [_seen(w) for w in laid_out.companion_writes(batch)]
