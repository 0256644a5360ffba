"""The test tier (tests/budget.py): one knob, the older variables as overrides."""

from __future__ import annotations

import pytest

from tests import budget


def test_the_default_tier_is_the_ci_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TSMODEL_TEST_TIER", "TSMODEL_ORACLE_EXAMPLES", "TSMODEL_ORACLE_STEPS",
                 "TSMODEL_FAULT_ENTITIES", "TSMODEL_FAULT_SEED", "TSMODEL_FAULT_ROUNDS",
                 "FUZZ_N"):
        monkeypatch.delenv(name, raising=False)
    assert budget._tier() == "default"
    chosen = budget._budget("default")
    assert chosen.oracle_examples == {"embedded": 100, "emulator": 40}
    assert (chosen.oracle_steps, chosen.differential_examples) == (30, 40)
    assert (chosen.fault_entities, chosen.fault_rounds, chosen.fault_seed) == (3000, 3, 10)
    assert chosen.fuzz_examples == 100
    assert "--direct_running_mode=in_memory" in chosen.beam_options


def test_the_deep_tier_raises_every_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TSMODEL_TEST_TIER", " Deep ")
    assert budget._tier() == "deep"
    default, deep = budget._TIERS["default"], budget._budget("deep")
    assert all(deep.oracle_examples[k] > n for k, n in default.oracle_examples.items())
    assert deep.oracle_steps > default.oracle_steps
    assert deep.differential_examples > default.differential_examples
    assert deep.fault_entities == 100_000 and deep.fuzz_examples > default.fuzz_examples
    assert "--direct_running_mode=multi_processing" in deep.beam_options


def test_the_older_variables_override_one_budget_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TSMODEL_ORACLE_EXAMPLES", "7")
    monkeypatch.setenv("TSMODEL_ORACLE_STEPS", "0")  # 0: the tier's, as before the tiers
    monkeypatch.setenv("TSMODEL_FAULT_ENTITIES", "100000")
    monkeypatch.setenv("TSMODEL_FAULT_ROUNDS", "0")
    monkeypatch.setenv("FUZZ_N", "3000")
    chosen = budget._budget("default")
    assert chosen.oracle_examples == {"embedded": 7, "emulator": 7}
    assert chosen.differential_examples == 7 and chosen.oracle_steps == 30
    assert chosen.fault_entities == 100_000 and chosen.fault_rounds == 0
    assert chosen.fuzz_examples == 3000


@pytest.mark.parametrize(("name", "value", "message"), [
    ("TSMODEL_TEST_TIER", "soak", "TSMODEL_TEST_TIER='soak': choose one of default, deep"),
    ("FUZZ_N", "many", "FUZZ_N='many' is not a whole number"),
    ("TSMODEL_FAULT_ENTITIES", "0", "TSMODEL_FAULT_ENTITIES='0': give at least 1"),
])
def test_a_wrong_setting_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, name: str,
                                            value: str, message: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError) as raised:
        budget._budget(budget._tier())
    assert str(raised.value) == message
