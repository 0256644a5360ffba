"""Sizing a model for an event rate: how its rows fill up and how its writes spread.

`advise()` estimates, for an event rate per entity, the events, rows and
cells per bucket (per day without a bucket), the largest row, the versions a
row needs against what its GC rule keeps, and the hotspot risk of the row
key's leading segment:

    advice = tsmodel.plan.advice.advise(ServerMetric, rate=0.2, entities=8)
    print(advice.hotspot_risk, advice.notes)
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import attrs

from tsmodel import errors
from tsmodel.declare import sizing
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.declare.tables import table_specs
from tsmodel.encoding.keys import ConstantSegment, IntSegment, SaltSegment, Segment, StrSegment
from tsmodel.ground.base import GcRule
from tsmodel.ground.gc import format_duration, max_age_of, max_versions_of

__all__ = ["Advice", "advise"]

#: About how many rows per second one Bigtable node writes: Google's figure
#: for 1 KB rows is up to 14,000 on SSD and 10,000 on HDD ("Performance for
#: typical workloads", `PERFORMANCE_SOURCE`); the lower one is used.
NODE_WRITES_PER_SECOND = 10_000
#: Writes per second on one key range rated a high hotspot risk (a tenth of a
#: node's writes, on a range that cannot be split); a tenth of it is medium.
HOT_RANGE_WRITES = 1_000
#: Where `NODE_WRITES_PER_SECOND` comes from.
PERFORMANCE_SOURCE = "https://cloud.google.com/bigtable/docs/performance"
_DAY_US = 86_400_000_000


@attrs.frozen
class Advice:
    """How a model's rows fill up at an event rate, and how writes spread.

    Attributes:
        model: the model name.
        rate: events per second of one entity.
        entities: entities writing at that rate, if known.
        layout: the layout name (``rows``, ``cells``, ``columns``, ``offsets``).
        bucket: the bucket name, or ``None`` for a row per event.
        period: what the per-bucket figures cover (``"week"``; ``"day"`` with
            no bucket, as a reference period).
        events_per_period: events of one entity in one period.
        rows_per_period: rows one entity writes per period.
        cells_per_row: cells of one row when the period is full.
        row_bytes: the estimated largest row (`tsmodel.declare.sizing`).
        versions_needed: versions per column a full row needs.
        versions_kept: versions per column the GC rule keeps (``None``: no limit).
        max_age: the max age of the main family's GC rule, if any.
        leading: the segment that spreads writes (the first one not constant).
        leading_values: how many distinct values of it carry writes, if known.
        writes_per_second: events written per second by all entities (needs
            ``entities``).
        hotspot_risk: ``"low"``, ``"medium"``, ``"high"`` or ``"unknown"``.
        notes: explanations and problems, one sentence each.
    """

    model: str
    rate: float
    entities: int | None
    layout: str
    bucket: str | None
    period: str
    events_per_period: float
    rows_per_period: float
    cells_per_row: float
    row_bytes: int
    versions_needed: int
    versions_kept: int | None
    max_age: timedelta | None
    leading: str
    leading_values: int | None
    writes_per_second: float | None
    hotspot_risk: str
    notes: tuple[str, ...]

    def rows(self) -> list[tuple[str, str]]:
        """``(measure, value)`` lines for a terminal table."""
        return [
            (f"events per entity per {self.period}", _number(self.events_per_period)),
            (f"rows per entity per {self.period}", _number(self.rows_per_period)),
            ("cells per row", _number(self.cells_per_row)),
            ("estimated row size", _bytes(self.row_bytes)),
            ("versions needed per column", _number(self.versions_needed)),
            ("versions kept by GC", "no limit" if self.versions_kept is None
             else _number(self.versions_kept)),
            ("max age kept by GC", "none" if self.max_age is None
             else format_duration(self.max_age)),
            ("leading key segment", self.leading),
            ("distinct leading values", "unknown" if self.leading_values is None
             else _number(self.leading_values)),
            ("writes per second", "unknown" if self.writes_per_second is None
             else _number(self.writes_per_second)),
            ("hotspot risk", self.hotspot_risk),
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (max age in seconds)."""
        out = attrs.asdict(self, recurse=False)
        out["max_age_seconds"] = None if self.max_age is None else self.max_age.total_seconds()
        del out["max_age"]
        out["notes"] = list(self.notes)
        return out


def _number(x: float) -> str:
    if x == int(x):
        return f"{int(x):,}"
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:,.2f}".rstrip("0").rstrip(".")


def _bytes(n: int) -> str:
    for unit, size in (("MB", 1024 * 1024), ("KB", 1024)):
        if n >= size:
            return f"~{n / size:,.1f} {unit}"
    return f"~{n} B"


def advise(model: Any, rate: float | None = None, entities: int | None = None) -> Advice:
    """Size a model's rows for an event rate and rate the hotspot risk of its key.

    Args:
        model: a model class.
        rate: events per second of one entity; the model's ``max_rate`` when
            ``None``.
        entities: how many entities write at that rate (distinct row keys
            without the time); needed to rate the hotspot risk of a key that
            leads with a field.

    Returns:
        The `Advice`.

    Raises:
        TypeError: ``model`` is not a model.
        ConfigurationError: no rate, a rate that is not positive, or fewer
            than one entity.
    """
    spec = spec_of(model)
    rate = _check_rate(spec, rate, entities)
    sized = attrs.evolve(spec, max_rate=rate)
    layout = spec.layout
    bucket = spec.bucket
    period_us = bucket.max_us if bucket is not None else _DAY_US
    events = rate * period_us / 1_000_000
    cells = layout.events_per_row(spec, events) * layout.cells_per_event(spec)
    rule = _main_rule(spec)
    needed = math.ceil(events) if layout.read_versions is None else 1
    leading, distinct, lead_note = _leading(spec, entities)
    total = rate * entities if entities is not None else None
    risk, risk_note = _hotspot(distinct, total)
    advice = Advice(
        model=spec.name, rate=rate, entities=entities, layout=layout.name,
        bucket=None if bucket is None else bucket.name,
        period="day" if bucket is None else bucket.name, events_per_period=events,
        rows_per_period=events if bucket is None else 1, cells_per_row=cells,
        row_bytes=_row_bytes(sized), versions_needed=needed,
        versions_kept=max_versions_of(rule), max_age=max_age_of(rule), leading=leading,
        leading_values=distinct, writes_per_second=total, hotspot_risk=risk, notes=())
    notes = [lead_note, risk_note, *_size_notes(advice, spec)]
    return attrs.evolve(advice, notes=tuple(n for n in notes if n))


def _check_rate(spec: ModelSpec, rate: float | None, entities: int | None) -> float:
    if rate is None:
        rate = spec.max_rate
    if rate is None:
        raise errors.ConfigurationError(
            f"{spec.name}: no event rate: give one (events per second of one entity), or "
            "declare max_rate= on the model")
    if not rate > 0 or math.isinf(rate):
        raise errors.ConfigurationError(f"{spec.name}: the event rate must be positive, "
                                        f"got {rate}")
    if entities is not None and entities < 1:
        raise errors.ConfigurationError(f"{spec.name}: entities must be at least 1, "
                                        f"got {entities}")
    return float(rate)


def _row_bytes(spec: ModelSpec) -> int:
    return sizing.row_bytes(spec) or 0


def _main_rule(spec: ModelSpec) -> GcRule:
    for table in table_specs(spec):
        if table.name == spec.table:
            return dict(table.families).get(spec.family, GcRule())
    return GcRule()


def _leading(spec: ModelSpec, entities: int | None) -> tuple[str, int | None, str]:
    """What spreads the writes, how many distinct values of it carry them, and why."""
    segments = [s for s in spec.key.segments if not isinstance(s, ConstantSegment)]
    if isinstance(segments[0], SaltSegment):
        return _salt_spread(spec, segments[0], entities)
    if segments[0].field == spec.timestamp_field:
        return (_name(segments[0]), 1, "the key leads with the time: every write goes to the "
                "end of the table, one key range (declared with allow_hotspot)")
    prefix = [s for s in segments if s.field in spec.key_fields]
    name = ", ".join(_name(s) for s in prefix)
    why = (f"each entity (distinct {name}) appends at the end of its own key range, and "
           "Bigtable splits and moves ranges between nodes")
    if entities is None:
        return name, None, why + "; give the number of entities (--entities N) to rate the risk"
    capacity = math.prod(10 ** s.width if isinstance(s, IntSegment) else 0 for s in prefix)
    return name, min(entities, capacity) if capacity else entities, why


def _salt_spread(spec: ModelSpec, seg: SaltSegment,
                 entities: int | None) -> tuple[str, int | None, str]:
    name = f"salt ({seg.buckets} values)"
    if spec.timestamp_field in seg.on:
        return (name, seg.buckets, f"the key leads with a salt of {seg.buckets} values hashed "
                "on the time, so every entity's writes spread over all of them")
    if entities is None:
        return (name, None, "the salt is not hashed on the time: each entity keeps one salt, "
                "so writes spread over at most as many values as there are entities; give "
                "the number of entities (--entities N)")
    spread = min(seg.buckets, entities)
    return (name, spread, f"the salt is not hashed on the time: {_number(entities)} entities "
            f"use at most {spread} of its {seg.buckets} values")


def _name(seg: Segment) -> str:
    return seg.field or seg.describe()


def _hotspot(distinct: int | None, total: float | None) -> tuple[str, str]:
    """The risk from the rows per second each key range gets, a single range being unsplittable."""
    if distinct is None or total is None:
        return "unknown", ""
    per_range = total / distinct
    level = "high" if per_range >= HOT_RANGE_WRITES else \
        "medium" if per_range >= HOT_RANGE_WRITES / 10 else "low"
    ranges = f"{_number(distinct)} key range{'' if distinct == 1 else 's'}"
    return level, (
        f"{_number(total)} writes/s over {ranges} is {_number(per_range)} writes/s per range; "
        f"tsmodel rates {HOT_RANGE_WRITES:,}/s on one range a high risk and "
        f"{HOT_RANGE_WRITES // 10:,}/s a medium one: a tenth and a hundredth of what a node "
        f"writes, about {NODE_WRITES_PER_SECOND:,} rows/s of 1 KB (up to 14,000 on SSD, "
        f"10,000 on HDD: \"Performance for typical workloads\", {PERFORMANCE_SOURCE}), "
        "since the writes to the end of one range go to the one node serving it "
        "(Bigtable's schema design guide for time series, \"avoid hotspotting\")")


def _size_notes(advice: Advice, spec: ModelSpec) -> list[str]:
    notes = []
    if advice.versions_kept is not None and advice.versions_kept < advice.versions_needed:
        notes.append(f"the GC rule keeps {advice.versions_kept:,} versions per column but a "
                     f"full {advice.period} needs {advice.versions_needed:,}: events would be "
                     "lost; raise max_versions or use a smaller bucket")
    variable = [f"{s.field}: {s.max_width} bytes" for s in spec.key.segments
                if isinstance(s, StrSegment) and s.width is None]
    if variable:
        notes.append("the row size counts variable-width key segments at their longest "
                     f"({', '.join(variable)})")
    if advice.row_bytes > sizing.MAX_ROW_BYTES:
        notes.append("rows pass the ~100 MB Bigtable advises: use a smaller bucket")
    if advice.max_age is not None:
        notes.append(f"cells older than {format_duration(advice.max_age)} are deleted, counted "
                     "from the event time: backfills older than that are lost at once")
    declared = spec.max_rate
    if declared is not None and advice.rate > declared:
        notes.append(f"the rate is over the model's declared max_rate={declared:g}/s, which "
                     "its bucket and versions were sized for")
    return notes
