"""Connection.create_tables takes the schema path (plan, then apply) on every backend.

Two models may share a table and a family, but a family has one GC rule: a
max age one model declares would collect the other's cells. create_tables
refuses such models with the error a schema plan gives, before it creates
anything.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend, GcRule, TableSpec

DAY = timedelta(days=1)


def make_model(table: str, name: str, *, retention: timedelta | None = None) -> type:
    """A model class called ``name``: error messages name models by their class."""
    body = {
        "__annotations__": {"hostname": str, "time": datetime, "cpu": float, "disk": int},
        "hostname": ts.key(), "time": ts.timestamp(unit="ms"),
        "cpu": ts.value("CPU"), "disk": ts.value("IO", family="IO"),
    }
    cls: type = ts.model(table=table, family="METRIC", retention=retention)(
        type(name, (), body))
    return cls


def test_models_that_disagree_on_a_family_are_refused(backend: Backend,
                                                      table_name: str) -> None:
    kept = make_model(table_name, "Kept")
    daily = make_model(table_name, "Daily", retention=DAY)
    with pytest.raises(ts.ConfigurationError) as caught:
        ts.Connection(backend).create_tables(kept, daily)
    message = str(caught.value)
    for part in ("Kept", "Daily", f"table {table_name!r}", "family 'IO'",
                 "max_versions=1 OR max_age=1d", "max_versions=1;"):
        assert part in message, message
    assert table_name not in backend.list_tables()  # refused before anything is made


def test_create_tables_is_plan_then_apply(backend: Backend, table_name: str) -> None:
    model = make_model(table_name, "Metric", retention=30 * DAY)
    backend.create_table(TableSpec(table_name, (("METRIC", GcRule(max_versions=5)),
                                                ("LEGACY", GcRule()))))
    tables = ts.Connection(backend).create_tables(model, model)
    assert tables == ts.table_specs(ts.spec_of(model))  # merged by name, once each
    assert not ts.Connection(backend).plan_schema(model).has_changes  # the rule changed, IO added
    assert backend.describe_table(table_name).family_names() == ("IO", "LEGACY", "METRIC")
