"""The oracle harness on each backend: every shape, saves and queries against the reference.

One stateful Hypothesis test per shape (tests/oracle/shapes.py) and backend
(the embedded store and the Cloud Bigtable emulator, tests/backends/conftest.py).
Its steps save (batches, replays, corrections, late and same-millisecond
events), delete (events, ranges) and update, query (range, latest,
current, snapshots, with every refinement), repair, build snapshots and
read raw tables; every answer is compared with the pure-Python reference
(tests/oracle/reference.py).

The budget is the test tier's (tests/budget.py): the default tier's for CI;
for a long local run choose the deep tier, or set the examples and steps::

    TSMODEL_TEST_TIER=deep .venv/bin/python -m pytest tests/backends/test_oracle.py
    TSMODEL_ORACLE_EXAMPLES=500 TSMODEL_ORACLE_STEPS=50 \\
        .venv/bin/python -m pytest -p no:cacheprovider tests/backends/test_oracle.py

Open bugs are stepped around by named exclusions (tests/oracle/exclusions.py);
``TSMODEL_ORACLE_INCLUDE=all`` (or a comma-separated list of their names)
lifts them.
"""

from __future__ import annotations

from datetime import datetime, timezone

import attrs
import pytest
from hypothesis.stateful import run_state_machine_as_test

import tsmodel as ts
from tests.budget import BUDGET
from tests.oracle.machine import Side, machine_for, oracle_settings
from tests.oracle.reference import Ev, Reference
from tests.oracle.shapes import SALTED_TIME, SHAPES, Shape, us_of
from tsmodel.backends.base import Backend


@pytest.mark.unmeasured
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_oracle(backend: Backend, shape: Shape, request: pytest.FixtureRequest) -> None:
    kind = request.node.callspec.params["backend"]
    machine = machine_for(shape, [Side(kind, backend)])
    examples = BUDGET.oracle_more.get((kind, shape.name), BUDGET.oracle_examples[kind])
    budget = oracle_settings(examples, BUDGET.oracle_steps)
    run_state_machine_as_test(machine, settings=budget)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_shape_declares_the_fields_it_describes(shape: Shape) -> None:
    model = shape.make_model("CHECK")
    spec = ts.spec_of(model)
    names = [a.name for a in attrs.fields(model)]
    assert names == [*shape.key_fields, "time", *(v.name for v in shape.values)]
    assert spec.key_fields == shape.key_fields
    assert bool(spec.current_table) == shape.current
    assert len(spec.alternates) == len(shape.alternates)


def test_reference_keys_are_the_guides() -> None:
    """The reference's key encoder gives the keys docs/row-keys.md prints."""
    ref = Reference(SALTED_TIME)
    base = datetime(2015, 3, 1, 12, 45, 1, tzinfo=timezone.utc)
    keys = [ref.key_of(SALTED_TIME.key, Ev((), us_of(base) + i * 1000, ()))
            for i in range(1, 6)]
    assert keys == [b"BAT#0#20150301124501001", b"BAT#2#20150301124501002",
                    b"BAT#0#20150301124501003", b"BAT#1#20150301124501004",
                    b"BAT#2#20150301124501005"]
