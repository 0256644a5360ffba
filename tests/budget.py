"""How much searching the suite does: the test tier, read here and nowhere else.

``TSMODEL_TEST_TIER`` chooses it:

* ``default`` (unset): the README command and CI. The budgets below are the
  ones that still catch the bugs the harnesses found (docs/contributing.md).
* ``deep``: a soak run (``nox -s deep``): the oracle and differential
  machines at high example counts, the fault harness at 100,000 entities,
  the error fuzzing at scale, the Beam jobs on several worker processes.

The older variables still override one budget each, in either tier:
``TSMODEL_ORACLE_EXAMPLES`` and ``TSMODEL_ORACLE_STEPS`` (the oracle machine,
on one backend and in differential mode), ``TSMODEL_FAULT_ENTITIES``,
``TSMODEL_FAULT_SEED`` and ``TSMODEL_FAULT_ROUNDS`` (the fault harness),
``FUZZ_N`` (the error fuzzing, tests/unit/test_error_fuzz.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["TIER", "TIERS", "Budget", "BUDGET"]

#: The tiers ``TSMODEL_TEST_TIER`` may name.
TIERS = ("default", "deep")


@dataclass(frozen=True)
class Budget:
    """Every budget that a tier sets."""

    #: Examples per shape of the oracle machine, by backend kind (test_oracle.py).
    oracle_examples: dict[str, int]
    #: More examples for some (backend kind, shape) of the oracle machine: where the
    #: revert check of docs/contributing.md found the kind's count too few to catch
    #: a landed fix's bug. Dropped when TSMODEL_ORACLE_EXAMPLES is given.
    oracle_more: dict[tuple[str, str], int]
    #: Steps per example of the oracle machine, on one backend and in differential mode.
    oracle_steps: int
    #: Examples per shape in differential mode (test_oracle_differential.py).
    differential_examples: int
    #: Entities saved through the fault-injecting proxy (test_faults.py).
    fault_entities: int
    #: Rounds of faulted queries (test_faults.py).
    fault_rounds: int
    #: The seed of the fault proxy and of the harness's draws (test_faults.py).
    fault_seed: int
    #: Examples of each error-fuzzing property (tests/unit/test_error_fuzz.py).
    fuzz_examples: int
    #: DirectRunner options of the Beam jobs (tests/extras/test_beam.py).
    beam_options: tuple[str, ...] = field(default=())


_TIERS = {
    "default": Budget(
        oracle_examples={"embedded": 100, "emulator": 40}, oracle_steps=30,
        # 053ba94 (a rewritten current row keeps no cell newer than its event)
        # was found at 400 examples of `columns` on the embedded store, not 100.
        oracle_more={("embedded", "columns"): 400},
        differential_examples=40,
        fault_entities=3000, fault_rounds=3, fault_seed=10,
        fuzz_examples=100,
        beam_options=("--direct_num_workers=1", "--direct_running_mode=in_memory"),
    ),
    "deep": Budget(
        oracle_examples={"embedded": 500, "emulator": 200}, oracle_steps=50,
        oracle_more={("embedded", "columns"): 1000},
        differential_examples=200,
        fault_entities=100_000, fault_rounds=10, fault_seed=10,
        fuzz_examples=3000,
        beam_options=("--direct_num_workers=2", "--direct_running_mode=multi_processing"),
    ),
}


def _tier() -> str:
    tier = os.environ.get("TSMODEL_TEST_TIER", "").strip().lower() or "default"
    if tier not in _TIERS:
        raise RuntimeError(f"TSMODEL_TEST_TIER={tier!r}: choose one of {', '.join(TIERS)}")
    return tier


def _override(name: str, value: int, *, minimum: int = 1) -> int:
    """``value``, or the number ``name`` gives (``TSMODEL_ORACLE_*=0``: the tier's, as before)."""
    raw = os.environ.get(name, "").strip()
    if not raw or (raw == "0" and name.startswith("TSMODEL_ORACLE_")):
        return value
    try:
        number = int(raw)
    except ValueError:
        raise RuntimeError(f"{name}={raw!r} is not a whole number") from None
    if number < minimum:
        raise RuntimeError(f"{name}={raw!r}: give at least {minimum}")
    return number


def _budget(tier: str) -> Budget:
    base = _TIERS[tier]
    oracle = {kind: _override("TSMODEL_ORACLE_EXAMPLES", n)
              for kind, n in base.oracle_examples.items()}
    given = bool(os.environ.get("TSMODEL_ORACLE_EXAMPLES", "").strip("0 "))
    return Budget(
        oracle_examples=oracle,
        oracle_more={} if given else base.oracle_more,
        oracle_steps=_override("TSMODEL_ORACLE_STEPS", base.oracle_steps),
        differential_examples=_override("TSMODEL_ORACLE_EXAMPLES", base.differential_examples),
        fault_entities=_override("TSMODEL_FAULT_ENTITIES", base.fault_entities),
        fault_rounds=_override("TSMODEL_FAULT_ROUNDS", base.fault_rounds, minimum=0),
        fault_seed=_override("TSMODEL_FAULT_SEED", base.fault_seed, minimum=0),
        fuzz_examples=_override("FUZZ_N", base.fuzz_examples),
        beam_options=base.beam_options,
    )


#: The tier of this run.
TIER = _tier()
#: Its budgets, after the overrides.
BUDGET = _budget(TIER)
