"""Schema plans applied on every backend: the embedded store and the emulator.

Tables get unique names (the session's backends are shared); plans that
delete run on a backend of their own (a fresh embedded store, or a fresh
emulator instance), so that they can check the backend's whole table list.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend, GcRule, TableSpec
from tsmodel.backends.embedded import EmbeddedBackend
from tsmodel.plan import schema

DAY = timedelta(days=1)
ONE = GcRule(max_versions=1)


def make_model(table: str, *, retention: timedelta | None = None) -> type:
    @ts.model(table=table, family="METRIC", current=f"{table}_CURRENT", retention=retention)
    class Metric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU")
        disk: int = ts.value("IO", family="IO")

    return Metric


@pytest.fixture
def isolated(backend: Backend) -> Iterator[Backend]:
    """A backend of the same kind holding nothing else."""
    if isinstance(backend, EmbeddedBackend):
        fresh: Backend = EmbeddedBackend()
    else:
        from tsmodel.backends.bigtable import BigtableBackend

        assert isinstance(backend, BigtableBackend)
        fresh = BigtableBackend(project="tsmodel-schema", instance="i" + uuid.uuid4().hex[:10],
                                emulator_host=backend.emulator_host)
    try:
        yield fresh
    finally:
        for name in fresh.list_tables():
            fresh.delete_table(name)
        fresh.close()


def test_plan_apply_plan(backend: Backend, table_name: str) -> None:
    model = make_model(table_name)
    plan = ts.Connection(backend).plan_schema(model)
    created = [(c.action, c.table) for c in plan.changes]
    assert created == [(schema.Action.CREATE_TABLE, table_name),
                       (schema.Action.CREATE_TABLE, f"{table_name}_CURRENT")]
    assert ts.Connection(backend).apply_schema(plan) == plan.changes
    assert backend.describe_table(table_name) == TableSpec(
        table_name, (("IO", ONE), ("METRIC", ONE)))
    again = ts.Connection(backend).plan_schema(model)
    assert not again.has_changes, str(again)


def test_retention_round_trips_without_a_phantom_change(backend: Backend,
                                                        table_name: str) -> None:
    model = make_model(table_name, retention=30 * DAY)
    plan = ts.Connection(backend).plan_schema(model)
    assert any("deletes cells older than 30d" in w for w in plan.warnings)
    ts.Connection(backend).apply_schema(plan)
    described = dict(backend.describe_table(table_name).families)["METRIC"]
    assert schema.gc_rules_equal(described, GcRule(max_versions=1, max_age=30 * DAY))
    assert not ts.Connection(backend).plan_schema(model).has_changes


@pytest.mark.parametrize("rule", [
    GcRule(max_versions=3),
    GcRule(max_age=timedelta(hours=6)),
    GcRule(max_versions=2, max_age=DAY),
    GcRule(max_versions=2, max_age=DAY, mode="intersection"),
    GcRule(rules=(GcRule(max_age=7 * DAY),
                  GcRule(rules=(GcRule(max_versions=1), GcRule(max_age=DAY)),
                         mode="intersection"))),
    GcRule(),
], ids=schema.describe_gc_rule)
def test_gc_rules_read_back_equal(backend: Backend, table_name: str, rule: GcRule) -> None:
    backend.create_table(TableSpec(table_name, (("F", rule),)))
    (family, back), = backend.describe_table(table_name).families
    assert family == "F" and schema.gc_rules_equal(back, rule), back


def test_missing_family_and_changed_rule(backend: Backend, table_name: str) -> None:
    model = make_model(table_name)
    backend.create_table(TableSpec(table_name, (("METRIC", GcRule(max_versions=5)),
                                                ("LEGACY", GcRule()))))
    backend.create_table(TableSpec(f"{table_name}_CURRENT", (("METRIC", ONE), ("IO", ONE))))
    plan = ts.Connection(backend).plan_schema(model)
    assert [(c.action.value, c.family) for c in plan.changes] == [
        ("add family", "IO"), ("change gc rule", "METRIC")]
    assert any("LEGACY" in n for n in plan.notes)
    ts.Connection(backend).apply_schema(plan)
    assert dict(backend.describe_table(table_name).families) == {
        "IO": ONE, "METRIC": ONE, "LEGACY": GcRule()}
    assert not ts.Connection(backend).plan_schema(model).has_changes


def test_data_survives_apply(backend: Backend, table_name: str) -> None:
    model = make_model(table_name)
    conn = ts.Connection(backend)
    backend.create_table(TableSpec(table_name, (("METRIC", GcRule(max_versions=5)),)))
    backend.create_table(TableSpec(f"{table_name}_CURRENT", (("METRIC", ONE),)))
    conn.apply_schema(conn.plan_schema(model))
    t = datetime.fromisoformat("2015-03-16T19:53:32.045+00:00")
    conn.save(model(hostname="h1", time=t, cpu=0.5, disk=7))
    conn.apply_schema(conn.plan_schema(model))  # nothing to do, nothing lost
    assert [m.disk for m in conn.range(model, t, t + DAY, hostname="h1")] == [7]


def test_drop_deletes_only_the_tables_named(isolated: Backend) -> None:
    model = make_model("M")
    for name in ("OTHER", "M_20170726", "TSMODEL_JOBS"):
        isolated.create_table(TableSpec(name, (("X", GcRule()),)))
    ts.Connection(isolated).apply_schema(ts.Connection(isolated).plan_schema(model))
    assert isolated.list_tables() == ["M", "M_20170726", "M_CURRENT", "OTHER", "TSMODEL_JOBS"]
    kept = ts.Connection(isolated).plan_schema(model, drop=True)
    assert not kept.has_changes  # drop=True never deletes a table
    assert "left alone: M_20170726, OTHER, TSMODEL_JOBS" in kept.notes[0]
    plan = ts.Connection(isolated).plan_schema(model, drop=True, drop_tables=["OTHER"])
    assert [(c.action.value, c.table) for c in plan.changes] == [("delete table", "OTHER")]
    ts.Connection(isolated).apply_schema(plan)
    assert isolated.list_tables() == ["M", "M_20170726", "M_CURRENT", "TSMODEL_JOBS"]
    assert not ts.Connection(isolated).plan_schema(model, drop=True).has_changes
    with pytest.raises(ts.ConfigurationError, match="no such table"):
        ts.Connection(isolated).plan_schema(model, drop_tables=["OTHER"])
    with pytest.raises(ts.ConfigurationError, match="the models declare it"):
        ts.Connection(isolated).plan_schema(model, drop_tables=["M_CURRENT"])
    assert isolated.list_tables() == ["M", "M_20170726", "M_CURRENT", "TSMODEL_JOBS"]


def test_dropping_a_family(isolated: Backend) -> None:
    model = make_model("M")
    isolated.create_table(TableSpec("M", (("METRIC", ONE), ("IO", ONE), ("LEGACY", ONE))))
    plan = ts.Connection(isolated).plan_schema(model, drop=True)
    assert ("delete family", "LEGACY") in [(c.action.value, c.family) for c in plan.changes]
    ts.Connection(isolated).apply_schema(plan)
    assert isolated.describe_table("M").family_names() == ("IO", "METRIC")
