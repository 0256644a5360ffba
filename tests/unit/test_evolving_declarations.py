"""Declarations that evolve: value defaults read from old events, the unknown-column policy.

What ``@ts.model`` derives from a value field's default (which fields a stored
event must have a cell for), and how it checks ``unknown_columns=``.
"""

from __future__ import annotations

from datetime import datetime

import pytest

import tsmodel as ts


def metric(**values: object) -> type:
    ns: dict[str, object] = {"host": ts.key(), "time": ts.timestamp(), **values}
    hints: dict[str, object] = {"host": str, "time": datetime}
    hints.update({name: (int | None if name.startswith("opt") else int) for name in values})
    ns["__annotations__"] = hints
    return ts.model(table="T", family="F")(type("Metric", (), ns))


def test_which_values_a_stored_event_must_have() -> None:
    model = metric(plain=ts.value(), given=ts.value(default=3),
                   made=ts.value(factory=lambda: 4), none=ts.value(default=None),
                   opt_given=ts.value(default=5))
    spec = ts.spec_of(model)
    # Required without a default: strict. A default (or factory) stands in for a
    # missing cell. A None default is no value of an int; an Optional field reads
    # None from a missing cell, whatever its default.
    assert {v.name: (v.stored, v.has_default) for v in spec.values} == {
        "plain": (True, False), "given": (False, True), "made": (False, True),
        "none": (True, False), "opt_given": (False, False)}
    assert model(host="a", time=datetime(2024, 1, 1).astimezone(), plain=1, none=2).made == 4


def test_default_and_factory_together_are_refused() -> None:
    with pytest.raises(ts.DeclarationError, match="default= or factory=, not both"):
        ts.value(default=1, factory=int)


@pytest.mark.parametrize("policy", ["ignore", "error"])
def test_unknown_columns_policy_is_kept(policy: str) -> None:
    model = ts.model(table="T", family="F", unknown_columns=policy)(type("Metric", (), {
        "host": ts.key(), "time": ts.timestamp(), "cpu": ts.value(),
        "__annotations__": {"host": str, "time": datetime, "cpu": float}}))
    assert ts.spec_of(model).unknown_columns == policy


def test_unknown_columns_default_is_ignore() -> None:
    assert ts.spec_of(metric(cpu=ts.value())).unknown_columns == "ignore"


@pytest.mark.parametrize("bad", ["refuse", "IGNORE", "", None, True, 1])
def test_unknown_columns_other_values_are_refused(bad: object) -> None:
    with pytest.raises(ts.DeclarationError) as info:
        ts.model(table="T", family="F", unknown_columns=bad)(type("Metric", (), {
            "host": ts.key(), "time": ts.timestamp(), "cpu": ts.value(),
            "__annotations__": {"host": str, "time": datetime, "cpu": float}}))
    message = str(info.value)
    assert "Metric" in message and "unknown_columns=" in message
    assert "'ignore'" in message and "'error'" in message
