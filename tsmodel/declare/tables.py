"""The tables a model needs, with their column families and GC rules.

Derived from the model's spec alone, so every layer above can read them: the
schema plan (`tsmodel.plan.schema`, which ``Connection.create_tables``
applies), the retention guard, sizing advice and the snapshot job.
"""

from __future__ import annotations

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec
from tsmodel.ground.base import GcRule, TableSpec

__all__ = ["table_specs", "event_table_specs"]


def table_specs(spec: ModelSpec) -> list[TableSpec]:
    """The tables a model needs, with families and GC rules.

    The main table keeps ``spec.max_versions`` versions per column: one for a
    row per event or a column per offset, enough for a full bucket for the
    new-cells and new-columns layouts. A declared ``retention`` adds a max-age
    rule (union: a cell goes when either rule says so). The current-value
    table keeps one version per column. Alternate-key tables get the main
    table's rules; snapshot tables are created by the snapshot job. A
    rollup table keeps one version per column, and its own ``retention``.

    Args:
        spec: the model's spec (`tsmodel.spec_of()`).

    Returns:
        The main table, the alternate-key tables, the current-value table,
        if any, then the rollup tables; families sorted by name.

    Raises:
        ArgumentTypeError: ``spec`` is not a `ModelSpec`.
    """
    if not isinstance(spec, ModelSpec):
        raise errors.ArgumentTypeError(
            f"table_specs(spec) takes a model's ModelSpec (ts.spec_of(Model)), got "
            f"{type(spec).__name__} {spec!r:.80}")
    tables = event_table_specs(spec)
    for rollup in spec.rollups:
        for table in table_specs(rollup.spec):
            if rollup.mode == "increment":  # its family holds int64 sums
                table = TableSpec(table.name, table.families, table.family_names())
            tables.append(table)
    return tables


def event_table_specs(spec: ModelSpec) -> list[TableSpec]:
    """The tables that hold the model's events, with families and GC rules: the
    main table, the alternate-key tables and the current-value table (not the
    rollup tables, whose rows are aggregates of their own retention)."""
    main_rule = GcRule(max_versions=spec.max_versions, max_age=spec.retention)
    tables = [TableSpec(t.table, tuple((f, main_rule) for f in spec.families))
              for t in (spec, *spec.alternates)]
    if spec.current_table is not None:
        one_version = GcRule(max_versions=1)
        tables.append(TableSpec(spec.current_table,
                                tuple((f, one_version) for f in spec.families)))
    return tables
