"""The oracle harness in differential mode: the same steps on both backends at once.

Every step of tests/oracle/machine.py runs on the embedded store and on the
Cloud Bigtable emulator; each answer is compared with the reference, and the
two backends' answers with each other (exactly: order, values, errors), so a
difference shows even where the reference allows a choice (the events a
version limit may drop). Under ``CI=true`` a missing emulator fails the run
(tests/backends/conftest.py). The budget is the test tier's (tests/budget.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis.stateful import run_state_machine_as_test

from tests.budget import BUDGET
from tests.oracle.machine import Side, machine_for, oracle_settings
from tests.oracle.shapes import SHAPES, Shape
from tsmodel.backends.bigtable import BigtableBackend
from tsmodel.backends.embedded import EmbeddedBackend


@pytest.fixture(scope="module")
def sides(emulator: object) -> Iterator[list[Side]]:
    embedded = EmbeddedBackend()
    bigtable = BigtableBackend(project="tsmodel-oracle", instance="differential",
                               emulator_host=emulator.host_port)  # type: ignore[attr-defined]
    try:
        yield [Side("embedded", embedded), Side("emulator", bigtable)]
    finally:
        embedded.close()
        bigtable.close()


@pytest.mark.unmeasured
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_oracle_differential(sides: list[Side], shape: Shape) -> None:
    machine = machine_for(shape, sides)
    budget = oracle_settings(BUDGET.differential_examples, BUDGET.oracle_steps)
    run_state_machine_as_test(machine, settings=budget)
