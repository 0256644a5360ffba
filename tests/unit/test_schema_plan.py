"""Schema plans, the retention guard and sizing advice, without I/O.

tsmodel.plan.schema makes the plans as steps, Connection.plan_schema and
apply_schema carry them out (Connection.create_tables is both:
tests/backends/test_create_tables.py); tsmodel.plan.retention guards saves;
tsmodel.plan.advice sizes models. What GC rules mean is tested in
test_gc_rules.py.

Plans run against a small in-memory stand-in that implements the four table
primitives of the backend protocol; tests/backends/test_schema.py runs the
same on the real backends.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tsmodel.backends import gc
from tsmodel.backends.base import Features, GcRule, TableSpec
from tsmodel.errors import ConfigurationError, TableNotFoundError
from tsmodel.plan import retention, schema
from tsmodel.plan.advice import advise

UTC = timezone.utc
DAY = timedelta(days=1)


def plan_of(backend: Any, *models: Any, **options: Any) -> schema.SchemaPlan:
    """The schema plan of ``models`` on ``backend``, made by the blocking driver."""
    return ts.Connection(backend).plan_schema(*models, **options)


def apply_to(backend: Any, plan: schema.SchemaPlan) -> tuple[schema.Change, ...]:
    return ts.Connection(backend).apply_schema(plan)


class FakeBackend:
    """Tables and families in a dict; records every call that changes something."""

    features = Features()

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, GcRule]] = {}
        self.calls: list[tuple[str, Any]] = []

    def create_table(self, spec: TableSpec) -> None:
        self.calls.append(("create_table", spec))
        self.tables.setdefault(spec.name, {}).update(dict(spec.families))

    def delete_table(self, name: str) -> None:
        self.calls.append(("delete_table", name))
        self.tables.pop(name, None)

    def list_tables(self) -> list[str]:
        return sorted(self.tables)

    def describe_table(self, name: str) -> TableSpec:
        if name not in self.tables:
            raise TableNotFoundError(name)
        return TableSpec(name, tuple(sorted(self.tables[name].items())))

    def delete_family(self, table: str, family: str) -> None:
        self.calls.append(("delete_family", (table, family)))
        del self.tables[table][family]


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
class Metric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value("CPU")
    disk: int = ts.value("IO", family="IO")


@ts.model(table="KEPT", family="K", current="CURRENT_KEPT", retention=timedelta(days=30))
class Kept:
    name: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    n: int = ts.value("N")


ONE = GcRule(max_versions=1)


# -- desired tables --------------------------------------------------------------------


def test_desired_tables_come_from_table_specs() -> None:
    assert schema.desired_tables(Metric) == ts.table_specs(ts.spec_of(Metric))
    names = [t.name for t in schema.desired_tables(Metric, Kept, Metric)]
    assert names == ["METRIC", "CURRENT_METRIC", "KEPT", "CURRENT_KEPT"]


def test_models_sharing_a_table_merge_families() -> None:
    @ts.model(table="METRIC", family="EXTRA")
    class Other:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        x: int = ts.value("X")

    (main, _) = schema.desired_tables(Metric, Other)
    assert main.family_names() == ("EXTRA", "IO", "METRIC")


def test_models_disagreeing_on_a_gc_rule_are_refused() -> None:
    @ts.model(table="METRIC", family="METRIC", retention=timedelta(days=1))
    class Short:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        x: int = ts.value("X")

    with pytest.raises(ConfigurationError, match="Metric and Short want different GC rules "
                       "for family 'METRIC' of table 'METRIC': Metric wants max_versions=1; Short "
                       "wants max_versions=1 OR max_age=1d. A family has one GC rule"):
        schema.desired_tables(Metric, Short)


def test_gc_rules_are_read_by_backends_gc() -> None:
    """Plans compare and describe GC rules with tsmodel.ground.gc (test_gc_rules.py)."""
    assert schema.gc_rules_equal is gc.rules_equal
    assert schema.describe_gc_rule is gc.describe
    assert schema.gc_rule_to_dict is gc.to_dict


def test_only_models_are_planned() -> None:
    with pytest.raises(TypeError, match="not a tsmodel model"):
        plan_of(FakeBackend(), int)


# -- plans -------------------------------------------------------------------------------


def test_an_empty_backend_gets_every_table() -> None:
    backend = FakeBackend()
    plan = plan_of(backend, Metric)
    assert [(c.action, c.table) for c in plan.changes] == [
        (schema.Action.CREATE_TABLE, "METRIC"), (schema.Action.CREATE_TABLE, "CURRENT_METRIC")]
    assert plan.changes[0].families == (("IO", ONE), ("METRIC", ONE))
    assert plan.has_changes and not plan.warnings and not plan.notes
    assert backend.calls == []  # planning changes nothing


def test_apply_then_plan_finds_nothing_to_do() -> None:
    backend = FakeBackend()
    applied = apply_to(backend, plan_of(backend, Metric))
    assert len(applied) == 2
    again = plan_of(backend, Metric)
    assert not again.has_changes
    assert again.summary() == "No changes: the backend has the 2 tables the models need."
    assert str(again) == again.summary()
    assert apply_to(backend, again) == ()


def test_missing_families_are_added_and_rules_changed() -> None:
    backend = FakeBackend()
    backend.tables["METRIC"] = {"METRIC": GcRule(max_versions=5)}
    backend.tables["CURRENT_METRIC"] = {"METRIC": ONE, "IO": ONE}
    plan = plan_of(backend, Metric)
    assert [(c.action.value, c.table, c.family) for c in plan.changes] == [
        ("add family", "METRIC", "IO"), ("change gc rule", "METRIC", "METRIC")]
    change = plan.changes[1]
    assert change.old_rule == GcRule(max_versions=5) and change.rule == ONE
    assert change.destructive
    assert any("keeps fewer versions" in w for w in plan.warnings)
    apply_to(backend, plan)
    assert backend.tables["METRIC"] == {"METRIC": ONE, "IO": ONE}
    assert not plan_of(backend, Metric).has_changes


def test_a_looser_rule_is_not_destructive() -> None:
    backend = FakeBackend()
    backend.tables = {"METRIC": {"METRIC": ONE, "IO": ONE}, "CURRENT_METRIC": {}}
    backend.tables["KEPT"] = {"K": GcRule(max_versions=1, max_age=DAY)}
    backend.tables["CURRENT_KEPT"] = {"K": ONE}
    plan = plan_of(backend, Kept)
    (change,) = plan.changes
    assert change.action is schema.Action.CHANGE_GC_RULE and not change.destructive
    assert not any("keeps fewer" in w for w in plan.warnings)


def test_nothing_is_deleted_without_drop() -> None:
    backend = FakeBackend()
    apply_to(backend, plan_of(backend, Metric))
    backend.tables["METRIC"]["LEGACY"] = GcRule()
    backend.tables["OTHER"] = {"X": GcRule()}
    plan = plan_of(backend, Metric)
    assert not plan.has_changes
    assert plan.notes == (
        "table 'METRIC' has families the models do not declare, left alone: LEGACY "
        "(--drop deletes them; drop=True in Python)",
        "1 other table on the backend, not declared by these models, left alone: OTHER "
        "(--drop-table NAME deletes one; drop_tables=[NAME] in Python)",
    )
    apply_to(backend, plan)
    assert "LEGACY" in backend.tables["METRIC"] and "OTHER" in backend.tables


def _with_neighbours(backend: FakeBackend) -> None:
    """The models' tables, plus what a shared instance holds beside them."""
    apply_to(backend, plan_of(backend, Metric))
    backend.tables["METRIC"]["LEGACY"] = GcRule()
    for name in ("OTHER_APP", "TSMODEL_JOBS", "SENSOR_20170726", "SENSOR_20170727"):
        backend.tables[name] = {"X": GcRule()}


def test_drop_deletes_undeclared_families_never_other_tables() -> None:
    backend = FakeBackend()
    _with_neighbours(backend)
    plan = plan_of(backend, Metric, drop=True)
    assert [(c.action.value, c.table, c.family) for c in plan.changes] == [
        ("delete family", "METRIC", "LEGACY")]
    assert all(c.destructive for c in plan.changes) and plan.drop
    assert plan.drop_tables == ()
    assert plan.notes == (
        "4 other tables on the backend, not declared by these models, left alone: "
        "OTHER_APP, SENSOR_20170726, SENSOR_20170727, TSMODEL_JOBS (--drop-table NAME "
        "deletes one; drop_tables=[NAME] in Python)",)
    apply_to(backend, plan)
    assert backend.tables["METRIC"] == {"METRIC": ONE, "IO": ONE}
    assert sorted(backend.tables) == ["CURRENT_METRIC", "METRIC", "OTHER_APP",
                                      "SENSOR_20170726", "SENSOR_20170727", "TSMODEL_JOBS"]
    assert not any(name == "delete_table" for name, _ in backend.calls)


def test_drop_tables_deletes_only_the_tables_named() -> None:
    backend = FakeBackend()
    _with_neighbours(backend)
    plan = plan_of(backend, Metric, drop_tables=["SENSOR_20170726", "OTHER_APP",
                                                     "SENSOR_20170726"])
    assert [(c.action.value, c.table, c.family) for c in plan.changes] == [
        ("delete table", "SENSOR_20170726", None), ("delete table", "OTHER_APP", None)]
    assert all(c.destructive for c in plan.changes)
    assert plan.drop_tables == ("SENSOR_20170726", "OTHER_APP") and not plan.drop
    assert plan.notes[0].startswith("table 'METRIC' has families")  # no drop=True: kept
    assert "left alone: SENSOR_20170727, TSMODEL_JOBS (" in plan.notes[1]
    apply_to(backend, plan)
    assert sorted(backend.tables) == ["CURRENT_METRIC", "METRIC", "SENSOR_20170727",
                                      "TSMODEL_JOBS"]
    assert "LEGACY" in backend.tables["METRIC"]
    assert [c for c in backend.calls if c[0] == "delete_table"] == [
        ("delete_table", "SENSOR_20170726"), ("delete_table", "OTHER_APP")]


@pytest.mark.parametrize(("names", "message"), [
    (["OTHER_APP", "METRIC"], "cannot drop table 'METRIC': the models declare it"),
    (["CURRENT_METRIC"], "cannot drop table 'CURRENT_METRIC': the models declare it"),
    (["OTHER_APP", "NOPE"], "cannot drop table 'NOPE': the backend has no such table "
                            r"\(tables: CURRENT_METRIC, METRIC, OTHER_APP, SENSOR_20170726, "
                            r"SENSOR_20170727, \.\.\.\)"),
])
def test_drop_tables_refuses_declared_and_missing_tables(names: list[str],
                                                         message: str) -> None:
    backend = FakeBackend()
    _with_neighbours(backend)
    backend.calls.clear()
    with pytest.raises(ConfigurationError, match=message):
        plan_of(backend, Metric, drop=True, drop_tables=names)
    assert backend.calls == []


def test_drop_tables_wants_names_not_a_string() -> None:
    with pytest.raises(TypeError, match=r"drop_tables=\['OLD'\]"):
        plan_of(FakeBackend(), Metric, drop_tables="OLD")


def test_changes_are_applied_in_order() -> None:
    backend = FakeBackend()
    backend.tables = {"OTHER": {}, "METRIC": {"METRIC": GcRule(max_versions=3), "OLD": ONE}}
    apply_to(backend, plan_of(backend, Metric, drop=True, drop_tables=["OTHER"]))
    assert [name for name, _ in backend.calls] == [
        "create_table", "create_table", "create_table", "delete_family", "delete_table"]


def test_plan_text_is_aligned() -> None:
    backend = FakeBackend()
    backend.tables = {"METRIC": {"METRIC": GcRule(max_versions=3)}, "ZZ": {}}
    text = str(plan_of(backend, Metric, drop_tables=["ZZ"]))
    lines = text.splitlines()
    assert lines[:5] == [
        "ACTION          TABLE           FAMILY  GC RULE",
        "create table    CURRENT_METRIC  IO      max_versions=1",
        "create table    CURRENT_METRIC  METRIC  max_versions=1",
        "add family      METRIC          IO      max_versions=1",
        "change gc rule  METRIC          METRIC  max_versions=3 -> max_versions=1",
    ]
    assert lines[5] == "delete table    ZZ              *       (the table and all its data)"
    assert "Plan: 1 table to create, 1 family to add, 1 GC rule to change, 1 table to delete." \
        in lines
    assert all(line == line.rstrip() for line in lines)


def test_plan_json() -> None:
    plan = plan_of(FakeBackend(), Kept)
    data = json.loads(plan.to_json())
    assert data["counts"]["create table"] == 2 and data["drop"] is False
    assert data["drop_tables"] == []
    first = data["changes"][0]
    assert first == {"action": "create table", "table": "KEPT", "destructive": False,
                     "families": [{"family": "K", "gc_rule": {
                         "text": "max_versions=1 OR max_age=30d", "max_versions": 1,
                         "max_age_seconds": 2592000.0, "mode": "union"}}]}
    assert data["tables"][1]["table"] == "CURRENT_KEPT"
    assert data["warnings"] == list(plan.warnings)


def test_plan_warns_about_every_max_age_family() -> None:
    plan = plan_of(FakeBackend(), Kept, Metric)
    (warning,) = plan.warnings
    assert warning.startswith("KEPT:K deletes cells older than 30d, counted from the cell "
                              "timestamp, which tsmodel sets to the event time")
    assert "backfills" in warning


def test_format_table() -> None:
    assert schema.format_table(("A", "BB"), [("xxx", "y"), ("z", "")]) == \
        "A    BB\nxxx  y\nz"
    assert schema.format_table(None, [("a", "b")]) == "a  b"
    assert schema.format_table(None, []) == ""


# -- the retention guard -------------------------------------------------------------------

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def _kept(age: timedelta) -> Kept:
    return Kept(name="a", time=NOW - age, n=1)


def test_retention_horizons() -> None:
    assert retention.retention_horizons(ts.spec_of(Kept)) == (("KEPT", "K", 30 * DAY),)
    assert retention.retention_horizons(ts.spec_of(Metric)) == ()


def test_events_older_than_the_max_age_are_found() -> None:
    events = [_kept(DAY), _kept(45 * DAY), _kept(29 * DAY), _kept(400 * DAY)]
    problems = retention.retention_problems(events, now=NOW)
    assert [p.entity for p in problems] == [events[1], events[3]]
    first = problems[0]
    assert (first.model, first.table, first.family) == ("Kept", "KEPT", "K")
    assert first.max_age == 30 * DAY and first.age == 45 * DAY
    assert first.event_time == NOW - 45 * DAY
    assert str(first) == ("Kept event at 2024-04-17T00:00:00+00:00 is 45 days old, past the "
                          "max age 30d of KEPT:K")


def test_the_edge_of_the_max_age_follows_garbage_collection() -> None:
    # GC deletes a cell when its timestamp < now - max_age (in whole milliseconds).
    assert retention.retention_problems([_kept(30 * DAY)], now=NOW) == []
    edge = Kept(name="a", time=NOW - 30 * DAY - timedelta(microseconds=500), n=1)
    assert retention.retention_problems([edge], now=NOW)  # its cell is at the ms before


def test_models_without_max_age_have_no_retention_problem() -> None:
    old = Metric(hostname="h", time=datetime(2000, 1, 1, tzinfo=UTC), cpu=1.0, disk=1)
    assert retention.retention_problems([old, _kept(DAY)], now=NOW) == []


def test_retention_uses_the_current_time_by_default() -> None:
    assert retention.retention_problems([Kept(name="a", time=datetime.now(UTC) - DAY, n=1)]) == []
    assert retention.retention_problems([Kept(name="a", time=datetime(2001, 1, 1, tzinfo=UTC),
                                           n=1)])


def test_retention_message() -> None:
    problems = retention.retention_problems([_kept(45 * DAY), _kept(60 * DAY)], now=NOW)
    message = retention.retention_message(problems)
    assert message.startswith("2 events are older than the max age of their column family "
                              "and would be deleted by garbage collection as soon as written")
    assert "first: Kept event at 2024-04-17T00:00:00+00:00 is 45 days old" in message
    assert message.endswith("Raise the model's retention, or pass accept_expired=True to save "
                            "them anyway")
    one = retention.retention_message(problems[:1], fix="say yes")
    assert one.startswith("1 event is older than the max age of its column family")
    assert one.endswith("or say yes")


# -- advice -------------------------------------------------------------------------------


def test_advice_for_a_row_per_event() -> None:
    advice = advise(Metric, 0.2)
    assert (advice.period, advice.events_per_period, advice.rows_per_period) == \
        ("day", 17280, 17280)
    assert advice.cells_per_row == 2 and advice.versions_needed == 1
    assert advice.versions_kept == 1 and advice.max_age is None
    assert advice.leading == "hostname" and advice.leading_values is None
    assert advice.hotspot_risk == "unknown"
    assert "give the number of entities" in advice.notes[0]


def test_advice_rates_hotspots_by_rows_per_key_range() -> None:
    assert advise(Metric, 1, entities=100).hotspot_risk == "low"
    assert advise(Metric, 200, entities=1).hotspot_risk == "medium"
    busy = advise(Metric, 2000, entities=1)
    assert busy.hotspot_risk == "high" and busy.writes_per_second == 2000


def test_advice_for_a_time_first_key() -> None:
    @ts.model(table="LOG", family="L", allow_hotspot=True)
    class Log:
        time: datetime = ts.timestamp(unit="ms")
        line: str = ts.value("LINE")

    advice = advise(Log, 500, entities=1000)
    assert advice.leading_values == 1 and advice.hotspot_risk == "high"
    assert "leads with the time" in advice.notes[0]


def test_advice_for_salts() -> None:
    @ts.model(table="B", family="B")
    class Battery:
        kind = ts.constant("BATTERY")
        s = ts.salt(buckets=4, on=("time",))
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        v: int = ts.value("V")

    advice = advise(Battery, 1)
    assert advice.leading == "salt (4 values)" and advice.leading_values == 4
    assert advise(Battery, 1, entities=1).leading_values == 4


def test_advice_counts_integer_key_capacity() -> None:
    @ts.model(table="M", family="M")
    class Meter:
        meter: int = ts.key(width=2)
        time: datetime = ts.timestamp(unit="ms")
        v: int = ts.value("V")

    assert advise(Meter, 1, entities=5000).leading_values == 100


def test_advice_for_bucket_rows() -> None:
    @ts.model(table="METER", family="M", layout=ts.cells(), max_rate=1 / 60)
    class Meter:
        meter: int = ts.key(width=10)
        day: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value("KWH")

    fits = advise(Meter)  # the declared max_rate
    assert (fits.period, fits.bucket, fits.layout) == ("day", "day", "cells")
    assert fits.events_per_period == pytest.approx(1440)
    assert fits.rows_per_period == 1 and fits.cells_per_row == pytest.approx(1440)
    assert fits.versions_needed == 1440 and fits.versions_kept == 1440
    too_fast = advise(Meter, 1)
    assert too_fast.versions_needed == 86400
    assert any("events would be lost" in n for n in too_fast.notes)
    assert any("over the model's declared max_rate" in n for n in too_fast.notes)


def test_advice_rows_and_dict() -> None:
    advice = advise(Kept, 0.5, entities=3)
    rows = dict(advice.rows())
    assert rows["max age kept by GC"] == "30d" and rows["writes per second"] == "1.5"
    data = advice.to_dict()
    assert data["max_age_seconds"] == 2592000.0 and "max_age" not in data
    json.dumps(data)


@pytest.mark.parametrize(("rate", "entities", "message"), [
    (None, None, "no event rate"),
    (0, None, "must be positive"),
    (float("inf"), None, "must be positive"),
    (1, 0, "entities must be at least 1"),
])
def test_advice_refuses_bad_input(rate: float | None, entities: int | None,
                                  message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        advise(Metric, rate, entities)
