"""The check of a save rendered column-wise (`render_column_check`), held to the per-event check.

``save_frame()`` checks a frame's rows before the first write without making
their instances: the per-event check of `check_all()` rendered over columns.
On every oracle shape, for any events and for events with a bad value put
in: where the per-event check passes, the column-wise one gives the same
checked tuples (or leaves the rows to the per-event check: a time not in
``datetime.timezone.utc``); where the per-event check refuses a row, the
column-wise one passes none (the frame then checks the chunk per event,
whose error is the one raised).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests.oracle.ops import aware
from tests.oracle.shapes import SHAPES, Shape
from tests.strategies import oracle_events
from tsmodel.layouts._source import rendered
from tsmodel.layouts.render_write import NotColumnWise
from tsmodel.plan.events import check_all, column_checker

_MODELS: dict[str, type] = {}

#: Values no field of a shape takes, or takes only in part (put in one row).
_BAD = st.sampled_from([None, "text", b"bytes", 1.5, float("nan"), float("inf"), 2**70, -1,
                        True, "", "a#b", " " * 40, datetime(2015, 1, 1), object()])


def _model(shape: Shape) -> type:
    return _MODELS.get(shape.name) or _MODELS.setdefault(shape.name, shape.make_model("CC"))


def _both(model: type, entities: list[Any]) -> None:
    spec = ts.spec_of(model)
    found = column_checker(spec)
    if found is None:  # encoded whole: no column-wise check, the frame checks per event
        assert spec.alternates or spec.corrections_read_first or spec.rollups or \
            spec.codec.event_parts(spec.current_codec, tuple) is None
        return
    names, check = found
    columns = [[getattr(e, n) for e in entities] for n in names]
    try:
        expected: list[Any] | None = check_all(entities).events
    except ts.ValidationError:
        expected = None
    try:
        got: list[Any] | None = check(*columns)
    except NotColumnWise:
        assert any(type(getattr(e, spec.timestamp_field)) is not datetime
                   or getattr(e, spec.timestamp_field).tzinfo is not timezone.utc
                   for e in entities)
        return
    except Exception:  # noqa: BLE001 (refused: the frame checks the rows per event)
        got = None
    if expected is None:
        assert got is None, "a row the per-event check refuses passed the column-wise check"
    else:
        assert got == expected


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_shape_checks_columns_as_it_checks_events(shape: Shape, data: Any) -> None:
    model = _model(shape)
    events = data.draw(st.lists(oracle_events(shape), min_size=1, max_size=6))
    _both(model, [model(**{**e.fields(), "time": aware(e.t, e.zone)}) for e in events])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), bad=_BAD)
def test_every_shape_refuses_a_bad_row_as_the_event_check_does(shape: Shape, data: Any,
                                                                bad: Any) -> None:
    model = _model(shape)
    events = data.draw(st.lists(oracle_events(shape), min_size=1, max_size=4))
    entities = [model(**{**e.fields(), "time": aware(e.t, e.zone)}) for e in events]
    at = data.draw(st.integers(0, len(entities) - 1))
    field = data.draw(st.sampled_from([a.name for a in attrs.fields(model)]))
    entities[at] = attrs.evolve(entities[at], **{field: bad})
    _both(model, entities)


@ts.model(table="CC_METRIC", family="m", current="CC_CURRENT")
class Metric:
    """The row-per-event shape with a current-value row that frames mostly save."""

    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value()
    reads: int = ts.value()
    note: str | None = ts.value(default=None)


_ANY = st.one_of(st.none(), st.text(max_size=3), st.floats(), st.integers(-2**65, 2**65),
                 st.booleans(), st.binary(max_size=2))
_TIMES = st.datetimes(min_value=datetime(1960, 1, 1), max_value=datetime(2300, 1, 1),
                      timezones=st.sampled_from([timezone.utc, None]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.sampled_from(["a", "b#c", ""]), _ANY), _TIMES,
                          st.one_of(st.floats(), _ANY), st.one_of(st.integers(), _ANY),
                          st.one_of(st.none(), st.text(max_size=4), _ANY)),
                min_size=1, max_size=6))
def test_a_model_with_a_current_row_checks_columns_as_it_checks_events(
        rows: list[tuple[Any, ...]]) -> None:
    """Any values, good or bad, built without attrs' checks (as a frame's columns are)."""
    entities = []
    for host, time, cpu, reads, note in rows:
        e = object.__new__(Metric)
        for name, value in zip(("host", "time", "cpu", "reads", "note"),
                               (host, time, cpu, reads, note), strict=True):
            object.__setattr__(e, name, value)
        entities.append(e)
    _both(Metric, entities)


def test_the_shapes_checked_column_wise() -> None:
    """The shapes whose events `check_all()` checks apart (the others are encoded
    whole, and a frame of them checked per event): the tests above are not empty."""
    checked = {s.name for s in SHAPES if column_checker(ts.spec_of(_model(s))) is not None}
    assert checked == {"reversed", "format_far", "reversed_adopted"}
    assert column_checker(ts.spec_of(Metric)) is not None


def test_the_column_check_is_there_to_read() -> None:
    names, check = column_checker(ts.spec_of(Metric))  # type: ignore[misc]
    source = rendered(check)
    assert source is not None and "zip(*columns, strict=True)" in source
    assert all(f"c_{n}" in source for n in names)
