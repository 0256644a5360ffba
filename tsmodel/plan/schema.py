"""Schema as code: compare the tables the models need with a backend, then apply.

`tsmodel.table_specs()` derives every table a model needs, with its column
families and garbage-collection (GC) rules. `plan_steps()` compares them with
what a backend holds and lists the changes: tables to create, families to
add, GC rules to change. `apply_steps()` carries a plan out. Nothing is deleted
unless asked for: the families of the models' tables that the models do not
declare with ``drop=True``; a table only when it is named in
``drop_tables``. Other tables of the backend are left alone:

    plan = db.plan_schema(ServerMetric)
    print(plan)                 # an aligned table; plan.to_json() for machines
    db.apply_schema(plan)

Both are steps (`plan_steps()`, `apply_steps()`) that the drivers of
`tsmodel.run.drive` carry out; ``Connection.create_tables`` and
``tsmodel schema apply`` are this plan and apply. A family has one GC rule:
models that share a family but want different rules are refused
(`ConfigurationError`).
GC rules are compared and described by `tsmodel.ground.gc`;
`gc_rules_equal()`, `describe_gc_rule()` and `gc_rule_to_dict()`
are its functions under the names plans use.

A max-age GC rule counts from the *cell timestamp*, and tsmodel writes the
event time there: a backfilled event older than the max age is deleted by the
next garbage collection, at once. `plan_steps()` warns about every family with
such a rule; `tsmodel.plan.retention` finds the events of a save that would
be lost, and `tsmodel.plan.advice` sizes a model for an event rate.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Generator, Iterable
from typing import Any, TypeVar

import attrs

from tsmodel import errors
from tsmodel.declare.spec import spec_of
from tsmodel.declare.tables import table_specs
from tsmodel.ground import gc
from tsmodel.ground.base import GcRule, TableSpec
from tsmodel.ground.gc import describe as describe_gc_rule
from tsmodel.ground.gc import rules_equal as gc_rules_equal
from tsmodel.ground.gc import to_dict as gc_rule_to_dict
from tsmodel.plan.calls import (
    BackendCall,
    CreateTable,
    DeleteFamily,
    DeleteTable,
    DescribeTable,
    ListTables,
)

_R = TypeVar("_R")

__all__ = [
    "plan_steps",
    "apply_steps",
    "drop_steps",
    "Action",
    "Change",
    "SchemaPlan",
    "desired_tables",
    "describe_gc_rule",
    "gc_rule_to_dict",
    "gc_rules_equal",
    "format_table",
]


# -- desired tables --------------------------------------------------------------------


def desired_tables(*models: Any) -> list[TableSpec]:
    """Every table the models need, merged by name, in first-seen order.

    Args:
        *models: model classes (or instances).

    Returns:
        One `TableSpec` per table, families sorted by name.

    Raises:
        TypeError: an argument is not a model.
        ConfigurationError: two models want different GC rules for one family,
            or one wants it an aggregate family and the other not.
    """
    tables: dict[str, dict[str, GcRule]] = {}
    owner: dict[tuple[str, str], str] = {}
    aggregates: dict[tuple[str, str], bool] = {}
    for m in models:
        spec = spec_of(m)
        for table in table_specs(spec):
            families = tables.setdefault(table.name, {})
            for family, rule in table.families:
                _merge_family(families, owner, spec.name, table.name, family, rule)
                summed = family in table.aggregates
                if aggregates.setdefault((table.name, family), summed) != summed:
                    raise errors.ConfigurationError(
                        f"{owner[(table.name, family)]} and {spec.name} disagree on family "
                        f"{family!r} of table {table.name!r}: one wants an aggregate family "
                        "(a rollup with mode='increment'), the other plain cells; give one "
                        "of them a table of its own")
    return [TableSpec(name, tuple(sorted(fams.items())),
                      tuple(sorted(f for f in fams if aggregates[(name, f)])))
            for name, fams in tables.items()]


def _merge_family(families: dict[str, GcRule], owner: dict[tuple[str, str], str],
                  model: str, table: str, family: str, rule: GcRule) -> None:
    known = families.get(family)
    if known is not None and not gc.rules_equal(known, rule):
        first = owner[(table, family)]
        raise errors.ConfigurationError(
            f"{first} and {model} want different GC rules for family {family!r} of table "
            f"{table!r}: {first} wants {gc.describe(known)}; {model} wants "
            f"{gc.describe(rule)}. A family has one GC rule, so one model's rule would "
            "delete the other's cells: declare the same retention and max_versions on both, "
            "or give one of them a table or family of its own"
        )
    families.setdefault(family, rule)
    owner.setdefault((table, family), model)


# -- plans -----------------------------------------------------------------------------


class Action(enum.Enum):
    """What one `Change` does, in the order `apply_steps()` carries them out."""

    CREATE_TABLE = "create table"
    ADD_FAMILY = "add family"
    CHANGE_GC_RULE = "change gc rule"
    DELETE_FAMILY = "delete family"
    DELETE_TABLE = "delete table"


_ORDER = {a: i for i, a in enumerate(Action)}


@attrs.frozen
class Change:
    """One change of a `SchemaPlan`.

    Attributes:
        action: what to do.
        table: the table.
        family: the family (``None`` for table-level changes).
        rule: the GC rule to set (create, add, change), or ``None``.
        old_rule: the rule on the backend now (change, delete family), or ``None``.
        families: the families of a table to create, with their rules.
    """

    action: Action
    table: str
    family: str | None = None
    rule: GcRule | None = None
    old_rule: GcRule | None = None
    families: tuple[tuple[str, GcRule], ...] = ()
    #: The families created as aggregate (int64 sum) families (create, add).
    aggregates: tuple[str, ...] = ()

    @property
    def destructive(self) -> bool:
        """Whether the change deletes data (deletions, tighter GC rules)."""
        if self.action in (Action.DELETE_FAMILY, Action.DELETE_TABLE):
            return True
        return self.action is Action.CHANGE_GC_RULE and self.old_rule is not None and \
            self.rule is not None and gc.tightens(self.old_rule, self.rule)

    def rows(self) -> list[tuple[str, str, str, str]]:
        """``(action, table, family, GC rule)`` lines for a terminal table."""
        act = self.action.value
        if self.action is Action.CREATE_TABLE:
            return [(act, self.table, f, gc.describe(r)) for f, r in self.families] or \
                [(act, self.table, "-", "(no families)")]
        if self.action is Action.DELETE_TABLE:
            return [(act, self.table, "*", "(the table and all its data)")]
        if self.action is Action.CHANGE_GC_RULE:
            assert self.old_rule is not None and self.rule is not None
            text = f"{gc.describe(self.old_rule)} -> {gc.describe(self.rule)}"
            return [(act, self.table, self.family or "", text)]
        rule = self.rule if self.action is Action.ADD_FAMILY else self.old_rule
        shown = gc.describe(rule) if rule is not None else ""
        if self.action is Action.DELETE_FAMILY:
            shown = f"(all its cells; was {shown})"
        return [(act, self.table, self.family or "", shown)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        out: dict[str, Any] = {"action": self.action.value, "table": self.table}
        if self.family is not None:
            out["family"] = self.family
        if self.families:
            out["families"] = [{"family": f, "gc_rule": gc.to_dict(r)}
                               for f, r in self.families]
        if self.rule is not None:
            out["gc_rule"] = gc.to_dict(self.rule)
        if self.old_rule is not None:
            out["old_gc_rule"] = gc.to_dict(self.old_rule)
        out["destructive"] = self.destructive
        return out


@attrs.frozen
class SchemaPlan:
    """The changes that bring a backend to the tables some models need.

    ``str(plan)`` is an aligned table for a terminal; `to_json()` is for
    machines.

    Attributes:
        tables: the tables the models need (from `tsmodel.table_specs()`).
        changes: what `apply_steps()` will do, in order.
        warnings: retention and data-loss warnings.
        notes: what the plan leaves alone, and why.
        drop: whether undeclared families of the models' tables are deleted
            (``drop=True``).
        drop_tables: the tables the plan deletes, as named to `plan_steps()`.
    """

    tables: tuple[TableSpec, ...]
    changes: tuple[Change, ...]
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    drop: bool = False
    drop_tables: tuple[str, ...] = ()

    @property
    def has_changes(self) -> bool:
        """Whether applying the plan would change anything."""
        return bool(self.changes)

    def counts(self) -> dict[str, int]:
        """How many changes of each action, by the action's name."""
        return {a.value: sum(c.action is a for c in self.changes) for a in Action}

    def summary(self) -> str:
        """One line: what the plan does."""
        if not self.changes:
            tables = _count(len(self.tables), "table", "tables")
            return f"No changes: the backend has the {tables} the models need."
        done = [_count(n, *_NOUNS[Action(name)]) for name, n in self.counts().items() if n]
        return "Plan: " + ", ".join(done) + "."

    def __str__(self) -> str:
        lines: list[str] = []
        if self.changes:
            rows = [row for c in self.changes for row in c.rows()]
            lines += format_table(("ACTION", "TABLE", "FAMILY", "GC RULE"), rows).splitlines()
            lines.append("")
        lines.append(self.summary())
        lines += [f"warning: {w}" for w in self.warnings]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form of the plan."""
        return {
            "changes": [c.to_dict() for c in self.changes],
            "counts": self.counts(),
            "tables": [{"table": t.name, "families": [
                {"family": f, "gc_rule": gc.to_dict(r)} for f, r in t.families]}
                for t in self.tables],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "drop": self.drop,
            "drop_tables": list(self.drop_tables),
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The plan as JSON (see `to_dict()`)."""
        return json.dumps(self.to_dict(), indent=indent)


_NOUNS = {
    Action.CREATE_TABLE: ("table to create", "tables to create"),
    Action.ADD_FAMILY: ("family to add", "families to add"),
    Action.CHANGE_GC_RULE: ("GC rule to change", "GC rules to change"),
    Action.DELETE_FAMILY: ("family to delete", "families to delete"),
    Action.DELETE_TABLE: ("table to delete", "tables to delete"),
}


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def format_table(headers: tuple[str, ...] | None, rows: Iterable[tuple[str, ...]]) -> str:
    """Rows (under headers, if any) in columns two spaces apart, without trailing spaces."""
    data = ([tuple(headers)] if headers else []) + [tuple(r) for r in rows]
    if not data:
        return ""
    widths = [max(len(r[i]) for r in data) for i in range(len(data[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in data)


#: A step-wise planner: yields calls, receives their answers, returns its result.
Steps = Generator[BackendCall, Any, _R]


def plan_steps(*models: Any, drop: bool = False,
               drop_tables: Iterable[str] = ()) -> Steps[SchemaPlan]:
    """Compare the tables the models need with what the backend holds, as steps:
    the backend calls it needs (`tsmodel.plan.calls`), then the plan
    (``db.plan_schema(*models)`` runs them).

    Only the models' own tables are ever changed, unless a table is named in
    ``drop_tables``: the backend's other tables (other applications',
    tsmodel's ``TSMODEL_JOBS``, the snapshot job's per-period tables) are
    listed in the notes and left alone.

    Args:
        *models: model classes; their tables come from `tsmodel.table_specs()`.
        drop: also plan to delete the families of the models' tables that
            the models do not declare. Without it they are listed in the notes.
        drop_tables: tables to delete, by name: each must exist on the
            backend, and no model may declare it.

    Returns:
        The `SchemaPlan`; reading the backend changes nothing.

    Raises:
        TypeError: an argument is not a model.
        ConfigurationError: two models disagree on a family's GC rule, or a
            table of ``drop_tables`` is declared by the models or does not exist.
        BackendError: the backend could not be read.
    """
    wanted = desired_tables(*models)
    existing = set((yield ListTables()))
    dropped = _tables_to_drop(drop_tables, wanted, existing)
    changes: list[Change] = []
    notes: list[str] = []
    for table in wanted:
        if table.name not in existing:
            changes.append(Change(Action.CREATE_TABLE, table.name, families=table.families,
                                  aggregates=table.aggregates))
        else:
            actual = yield DescribeTable(table.name)
            changes += _family_changes(table, actual, drop, notes)
    changes += [Change(Action.DELETE_TABLE, name) for name in dropped]
    others = sorted(existing - {t.name for t in wanted} - set(dropped))
    if others:
        notes.append(_others_note(others))
    changes.sort(key=lambda c: _ORDER[c.action])
    warnings = _retention_warnings(wanted) + _loss_warnings(changes)
    return SchemaPlan(tuple(wanted), tuple(changes), tuple(warnings), tuple(notes), drop,
                      dropped)


def _tables_to_drop(names: Iterable[str], wanted: list[TableSpec],
                    existing: set[str]) -> tuple[str, ...]:
    """The tables of ``drop_tables``, checked: on the backend, and declared by no model."""
    if isinstance(names, str):
        raise errors.ArgumentTypeError(f"drop_tables takes table names, not a string: write "
                                       f"drop_tables=[{names!r}]")
    names = tuple(dict.fromkeys(names))
    declared = [n for n in names if n in {t.name for t in wanted}]
    if declared:
        raise errors.ConfigurationError(
            f"cannot drop table {declared[0]!r}: the models declare it; leave out the "
            "model that declares it to delete the table")
    missing = [n for n in names if n not in existing]
    if missing:
        raise errors.ConfigurationError(
            f"cannot drop table {missing[0]!r}: the backend has no such table "
            f"(tables: {_shown(sorted(existing)) or 'none'})")
    return names


def _shown(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def _others_note(others: list[str]) -> str:
    return (f"{_count(len(others), 'other table', 'other tables')} on the backend, not "
            f"declared by these models, left alone: {_shown(others)} (--drop-table NAME "
            "deletes one; drop_tables=[NAME] in Python)")


def _family_changes(wanted: TableSpec, actual: TableSpec, drop: bool,
                    notes: list[str]) -> list[Change]:
    have = dict(actual.families)
    out: list[Change] = []
    for family, rule in wanted.families:
        if family in have and (family in wanted.aggregates) != (family in actual.aggregates):
            kind = "an aggregate (int64 sum)" if family in actual.aggregates else "a plain"
            raise errors.ConfigurationError(
                f"family {family!r} of table {wanted.name!r} is {kind} family on the backend, "
                "and the models want the other kind; a family's kind cannot change: declare "
                "the rollup on a new table (or family), or delete the table first")
        if family not in have:
            out.append(Change(Action.ADD_FAMILY, wanted.name, family, rule,
                              aggregates=(family,) if family in wanted.aggregates else ()))
        elif not gc.rules_equal(have[family], rule):
            out.append(Change(Action.CHANGE_GC_RULE, wanted.name, family, rule, have[family]))
    extra = sorted(set(have) - set(wanted.family_names()))
    if drop:
        out += [Change(Action.DELETE_FAMILY, wanted.name, f, old_rule=have[f]) for f in extra]
    elif extra:
        notes.append(f"table {wanted.name!r} has families the models do not declare, left "
                     f"alone: {', '.join(extra)} (--drop deletes them; drop=True in Python)")
    return out


def _retention_warnings(tables: list[TableSpec]) -> list[str]:
    out = []
    for table in tables:
        for family, rule in table.families:
            age = gc.max_age_of(rule)
            if age is not None:
                text = gc.format_duration(age)
                out.append(
                    f"{table.name}:{family} deletes cells older than {text}, counted from the "
                    "cell timestamp, which tsmodel sets to the event time: events older than "
                    f"{text} (backfills) are deleted as soon as they are written")
    return out


def _loss_warnings(changes: list[Change]) -> list[str]:
    return [
        f"{c.table}:{c.family}: the new GC rule keeps fewer versions or a shorter age; "
        "garbage collection deletes the cells it no longer keeps (this cannot be undone)"
        for c in changes if c.action is Action.CHANGE_GC_RULE and c.destructive
    ]


def drop_steps(*models: Any) -> Steps[None]:
    """Delete every table of the models, with their data: a `DeleteTable` each
    (``db.drop_tables(*models)``)."""
    for model in models:
        for table in table_specs(spec_of(model)):
            yield DeleteTable(table.name)


def apply_steps(plan: SchemaPlan) -> Steps[tuple[Change, ...]]:
    """Carry out a plan as steps, one backend call per change, in order: create
    tables, add families, set GC rules, then delete (``db.apply_schema(plan)``
    runs them).

    Args:
        plan: from `plan_steps()`; deletions are in it only if it was made
            with ``drop=True`` (families) or ``drop_tables`` (tables).

    Returns:
        The changes made, in order.

    Raises:
        BackendError: the backend refused a change (the changes before it are
            made).
    """
    for change in plan.changes:
        yield _call_of(change)
    return plan.changes


def _call_of(change: Change) -> BackendCall:
    if change.action is Action.CREATE_TABLE:
        return CreateTable(TableSpec(change.table, change.families, change.aggregates))
    if change.action in (Action.ADD_FAMILY, Action.CHANGE_GC_RULE):
        assert change.family is not None and change.rule is not None
        # create_table adds missing families and sets the rules of those named.
        return CreateTable(TableSpec(
            change.table, ((change.family, change.rule),), change.aggregates))
    if change.action is Action.DELETE_FAMILY:
        assert change.family is not None
        return DeleteFamily(change.table, change.family)
    return DeleteTable(change.table)
