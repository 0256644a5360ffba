"""The state machine: saves, deletes, queries, repairs and snapshots against the reference.

:func:`machine_for` builds a Hypothesis ``RuleBasedStateMachine`` for one
shape and one or two backends (*sides*). Every example declares the shape's
model afresh (tables of its own), and every step runs on each side:

* saves: new batches (shuffled, of any batch size), replays of saved
  events, corrections (same identity, new values), late and
  same-millisecond events (the shape's time universe makes them common);
* queries of every kind: ``range`` with key-field prefixes, scans,
  ``limit``/``[:n]``, ``newest_first``, ``only``, ``count``, ``first``,
  ``exists``; ``latest`` (and as of a time, ``latest_many`` too); ``current``;
  snapshot reads;
* deletes (docs/deleting.md): ``delete_all`` of saved events, named with
  their stored values or others, in batches of any size; ``range(...)
  .delete()`` behind its scan guard; ``update`` of one event's value fields
  (``DoesNotExist`` for an event reads do not return);
* repairs (on clean tables: they must find nothing to fix) and snapshot
  builds;
* raw table checks: the row keys of every table, the cells of
  row-per-event rows and of each current-value row.

Each answer is compared with :class:`~tests.oracle.reference.Reference`,
never with what another call of tsmodel returns; with two sides
(differential mode) the two backends' answers must also be equal.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

import tsmodel as ts
from tests import strategies as tst
from tests.oracle.ops import CurrentQuery, RangeQuery, Refine, aware
from tests.oracle.reference import Answer, Ev, Reference, Refused, iso
from tests.oracle.shapes import Shape, us_of
from tsmodel.backends.base import Backend, ReadFilter, ReadRequest

__all__ = ["Side", "machine_for", "oracle_settings"]

UTC = timezone.utc
#: The last millisecond a rollup query can name (datetime's end).
_LAST_US = 253402300799999000



def oracle_settings(examples: int, steps: int) -> settings:
    """Settings of one run: the budget comes from the test tier (tests/budget.py)."""
    return settings(max_examples=examples, stateful_step_count=steps,
                    deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


@dataclass
class Side:
    """One backend the machine runs on."""

    name: str
    backend: Backend

    def conn(self, batch_size: int = 1000) -> ts.Connection:
        return ts.Connection(self.backend, batch_size=batch_size)


_ERRORS: dict[str, type[Exception]] = {
    "ScanRefusedError": ts.ScanRefusedError,
    "QueryError": ts.QueryError,
    "DoesNotExist": ts.DoesNotExist,
}
_EXPECTED_ERRORS = (ts.QueryError, ts.DoesNotExist)


@dataclass(frozen=True)
class Raised:
    """A query that raised one of the errors a query may raise by design."""

    kind: str

    @classmethod
    def of(cls, exc: BaseException) -> Raised:
        for kind in ("ScanRefusedError", "DoesNotExist", "QueryError"):
            if isinstance(exc, _ERRORS[kind]):
                return cls(kind)
        raise exc


def machine_for(shape: Shape, sides: Sequence[Side]) -> type[RuleBasedStateMachine]:
    """A state machine running ``shape`` on ``sides`` (two: differential mode)."""

    class OracleMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model = shape.make_model(uuid.uuid4().hex[:10].upper())
            self.spec = ts.spec_of(self.model)
            self.ref = Reference(shape)
            self.snapshot_tables: dict[int, str] = {}
            for side in sides:
                side.conn().create_tables(self.model)

        def teardown(self) -> None:
            for side in sides:
                side.conn().drop_tables(self.model)
                for table in self.snapshot_tables.values():
                    side.backend.delete_table(table)

        # -- saves ------------------------------------------------------------------

        @rule(batch=tst.oracle_batches(shape), batch_size=st.sampled_from([1000, 3, 1]))
        def save(self, batch: list[Ev], batch_size: int) -> None:
            self._save(batch, batch_size)

        @precondition(lambda self: bool(self.ref.events))
        @rule(data=st.data())
        def replay(self, data: st.DataObject) -> None:
            """Save again events saved before (a retry, a backfill), in any order."""
            pool = sorted(self.ref.saved(), key=repr)
            again = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6,
                                       unique_by=lambda e: e.identity).flatmap(st.permutations),
                              label="replayed")
            self._save(again, 1000)

        @precondition(lambda self: bool(self.ref.events))
        @rule(data=st.data())
        def correct(self, data: st.DataObject) -> None:
            """Save a saved identity with other values (a correction)."""
            pool = sorted(self.ref.saved(), key=repr)
            old = data.draw(st.sampled_from(pool), label="corrected")
            new = data.draw(tst.oracle_correction(shape, old), label="correction")
            self._save([new], 1000)

        @precondition(lambda self: bool(self.ref.events))
        @rule(data=st.data(), batch_size=st.sampled_from([1000, 2, 1]))
        def delete(self, data: st.DataObject, batch_size: int) -> None:
            """Delete saved events (docs/deleting.md), some with other values than stored."""
            pool = sorted(self.ref.saved(), key=repr)
            doomed = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5,
                                        unique_by=lambda e: e.identity), label="deleted")
            named = [data.draw(st.one_of(st.just(e), tst.oracle_correction(shape, e)),
                               label="named as") for e in doomed]
            entities = [self._instance(e) for e in named]
            for side in sides:
                result = side.conn(batch_size).delete_all(entities, raise_on_failure=False)
                assert [r.status for r in result.results] == [ts.WriteStatus.WRITTEN] * len(
                    named), f"{side.name}: delete_all -> {result.summary()}: {result.results}"
            self.ref.delete(doomed, batch_size)

        @rule(q=tst.oracle_range_queries(shape), allow_scan=st.booleans())
        def delete_range(self, q: RangeQuery, allow_scan: bool) -> None:
            """``range(...).delete()``: what the range reads, behind the scan guard."""
            try:
                want: Answer | Refused = self.ref.range(q.start, q.end, dict(q.fields),
                                                        allow_scan=q.allow_scan)
            except Refused as refused:
                want = refused
            named = {n for n, _ in q.fields}
            if isinstance(want, Answer) and not allow_scan and not set(shape.key_fields) <= named:
                want = Refused("ScanRefusedError")

            def run(conn: ts.Connection) -> Any:
                qs = self.model.range(aware(q.start, q.zone), aware(q.end, -q.zone),
                                      allow_scan=q.allow_scan, **dict(q.fields)).using(conn)
                result = qs.delete(allow_scan=allow_scan, raise_on_failure=False)
                assert result.ok, result.summary()
                return [self._event(r.entity) for r in result.results]

            self._compare(f"{q!r}.delete(allow_scan={allow_scan})", want, Refine(), run)
            if isinstance(want, Answer):
                self.ref.delete(list(want.events))

        @precondition(lambda self: bool(self.ref.events))
        @rule(data=st.data())
        def update(self, data: st.DataObject) -> None:
            """``db.update(Model, **key, time=..., **changes)`` of a saved event."""
            pool = sorted(self.ref.saved(), key=repr)
            old = data.draw(st.sampled_from(pool), label="updated")
            drawn = data.draw(tst.oracle_correction(shape, old), label="to")
            changes = {k: v for k, v in drawn.values if old.get(k) != v} or dict(drawn.values)
            new = replace(old, values=tuple((k, changes.get(k, v)) for k, v in old.values))
            visible = old.identity in {e.identity for e in self.ref.visible()}
            key = {**dict(old.keys), "time": aware(old.t, drawn.zone)}
            for side in sides:
                try:
                    got = side.conn().update(self.model, **key, **changes)
                except ts.DoesNotExist:
                    assert not visible, f"{side.name}: update({key}): DoesNotExist"
                    continue
                assert visible, f"{side.name}: update({key}) of an event reads do not return"
                assert self._event(got).strict() == new.strict(), (
                    f"{side.name}: update({key}, {changes}) -> {got!r}, expected {new!r}")
            if visible:
                self.ref.save([new], 1000)

        def _save(self, batch: list[Ev], batch_size: int) -> None:
            entities = [self._instance(e) for e in batch]
            for side in sides:
                result = side.conn(batch_size).save_all(entities, raise_on_failure=False)
                statuses = [r.status for r in result.results]
                assert statuses == [ts.WriteStatus.WRITTEN] * len(batch), (
                    f"{side.name}: save_all -> {result.summary()}: {result.results}")
            self.ref.save(batch, batch_size)

        def _instance(self, e: Ev) -> Any:
            return self.model(**{**e.fields(), "time": aware(e.t, e.zone)})

        # -- queries ----------------------------------------------------------------

        @rule(q=tst.oracle_range_queries(shape))
        def query_range(self, q: RangeQuery) -> None:
            try:
                want: Answer | Refused = self.ref.range(
                    q.start, q.end, dict(q.fields), allow_scan=q.allow_scan,
                    newest_first=q.refine.newest_first)
            except Refused as refused:
                want = refused

            def run(conn: ts.Connection) -> Any:
                qs = self.model.range(aware(q.start, q.zone), aware(q.end, -q.zone),
                                      allow_scan=q.allow_scan, **dict(q.fields))
                return self._run(qs.using(conn), q.refine)

            self._compare(repr(q), want, q.refine, run)

        @precondition(lambda self: shape.current)
        @rule(q=tst.oracle_current_queries(shape))
        def query_current(self, q: CurrentQuery) -> None:
            try:
                want: Answer | Refused = self.ref.current(dict(q.fields), allow_scan=q.allow_scan)
            except Refused as refused:
                want = refused

            def run(conn: ts.Connection) -> Any:
                qs = self.model.current(allow_scan=q.allow_scan, **dict(q.fields))
                return self._run(qs.using(conn), q.refine)

            self._compare(repr(q), want, q.refine, run)

        @rule(key=tst.oracle_entities(shape))
        def query_latest(self, key: dict[str, Any]) -> None:
            try:
                want: Answer | Refused = Answer((self.ref.latest(key),))
            except Refused as refused:
                want = refused

            def run(conn: ts.Connection) -> Any:
                return [self._event(self.model.using(conn).latest(**key))]

            self._compare(f"latest({key})", want, Refine(), run)

        @rule(key=tst.oracle_entities(shape), as_of=tst.oracle_instants(shape),
              zone=st.sampled_from([0, 330, -480]))
        def query_latest_as_of(self, key: dict[str, Any], as_of: int, zone: int) -> None:
            try:
                want: Answer | Refused = Answer((self.ref.latest_as_of(key, as_of),))
            except Refused as refused:
                want = refused

            def run(conn: ts.Connection) -> Any:
                when = aware(as_of, zone)
                return [self._event(self.model.using(conn).latest(as_of=when, **key))]

            self._compare(f"latest(as_of={iso(as_of)}, {key})", want, Refine(), run)

        @rule(keys=st.lists(tst.oracle_entities(shape), min_size=1, max_size=3),
              as_of=tst.oracle_instants(shape))
        def query_latest_many_as_of(self, keys: list[dict[str, Any]], as_of: int) -> None:
            """``latest_many(keys, as_of=t)``: each entity's ``latest(as_of=t)``."""
            names = shape.key_fields
            want: dict[tuple[Any, ...], Ev] = {}
            for key in keys:
                try:
                    want[tuple(key[n] for n in names)] = self.ref.latest_as_of(key, as_of)
                except Refused:
                    pass
            for side in sides:
                found = self.model.using(side.conn()).latest_many(keys, as_of=aware(as_of, 0))
                got = {k: self._event(v) for k, v in found.found.items()}
                assert {k: e.strict() for k, e in got.items()} == {
                    k: e.strict() for k, e in want.items()}, (
                    f"{side.name}: latest_many({keys}, as_of={iso(as_of)}): {got!r}\n"
                    f"  expected {want!r}")

        def _run(self, qs: Any, refine: Refine) -> Any:
            if refine.newest_first:
                qs = qs.newest_first()
            if refine.only is not None:
                qs = qs.only(*refine.only)
            if refine.limit is not None:
                qs = qs[:refine.limit] if refine.run == "slice" else qs.limit(refine.limit)
            if refine.run == "count":
                return qs.count()
            if refine.run == "exists":
                return qs.exists()
            if refine.run == "first":
                first = qs.first()
                return [] if first is None else [self._event(first)]
            return [self._event(item) for item in qs]

        def _compare(self, what: str, want: Answer | Refused, refine: Refine,
                     run: Callable[[ts.Connection], Any]) -> None:
            answers = []
            for side in sides:
                try:
                    got = run(side.conn())
                except _EXPECTED_ERRORS as exc:
                    got = Raised.of(exc)
                answers.append(got)
                problem = self._problem(want, refine, got)
                assert problem is None, (
                    f"{side.name}: {what}: {problem}\n  expected: {want!r}\n  got:      {got!r}")
            if len(answers) == 2:
                a, b = answers
                same = ([e.strict() for e in a] == [e.strict() for e in b]
                        if isinstance(a, list) and isinstance(b, list) else a == b)
                assert same, (f"{what}: the backends differ\n  {sides[0].name}: {a!r}\n"
                              f"  {sides[1].name}: {b!r}")

        def _problem(self, want: Answer | Refused, refine: Refine, got: Any) -> str | None:
            if isinstance(want, Refused):
                if isinstance(got, Raised) and got.kind == want.kind:
                    return None
                return f"should raise {want.kind}"
            if isinstance(got, Raised):
                return f"raised {got.kind}"
            if refine.only is not None:
                want = _only(want, refine.only)
            limit = refine.limit
            if refine.run == "count":
                return want.count_problem(got, limit)
            if refine.run == "exists":
                return want.count_problem(int(got), 1 if limit is None else min(limit, 1))
            if refine.run == "first":
                return want.problem(got, 1 if limit is None else min(limit, 1))
            return want.problem(got, limit)

        def _event(self, item: Any) -> Ev:
            """A returned instance as an event, checking what the reference cannot see."""
            assert type(item) is self.model, f"got a {type(item).__name__}"
            when = item.time
            assert isinstance(when, datetime) and when.tzinfo is UTC, (
                f"results come back in UTC (docs/queries.md), got {when!r}")
            keys = tuple((n, getattr(item, n)) for n in shape.key_fields)
            values = tuple((v.name, getattr(item, v.name)) for v in shape.values)
            return Ev(keys, us_of(when), values)

        # -- snapshots and repairs --------------------------------------------------

        @precondition(lambda self: shape.snapshot)
        @rule(period=tst.oracle_periods(shape), restart=st.booleans())
        def build_snapshot(self, period: int, restart: bool) -> None:
            written, complete = self.ref.build_snapshot(period, restart)
            day = period - period % 86_400_000_000
            for side in sides:
                report = ts.build_snapshot(self.model, aware(period, 0), connection=side.conn(),
                                           batch_size=3, progress=False, restart=restart)
                self.snapshot_tables[day] = report.table
                assert (report.events_written, report.already_complete) == (written, complete), (
                    f"{side.name}: snapshot of {aware(day, 0):%Y-%m-%d} (restart={restart}): "
                    f"{report}; expected {written} events written, complete={complete}")

        @precondition(lambda self: bool(self.ref.snapshots))
        @rule(data=st.data(), fields=tst.oracle_key_prefixes(shape))
        def read_snapshot(self, data: st.DataObject, fields: dict[str, Any]) -> None:
            day = data.draw(st.sampled_from(sorted(self.ref.snapshots)), label="period")
            want = self.ref.snapshot(day, fields)

            def run(conn: ts.Connection) -> Any:
                qs = self.model.snapshot(aware(day, 0), **fields).using(conn)
                return [self._event(item) for item in qs]

            self._compare(f"snapshot({aware(day, 0):%Y-%m-%d}, {fields})", want, Refine(), run)

        @precondition(lambda self: shape.companions)
        @rule(span=tst.oracle_repair_spans(shape), fields=tst.oracle_key_prefixes(shape))
        def repair(self, span: tuple[int, int], fields: dict[str, Any]) -> None:
            """On tables no failure touched, a repair replays and finds nothing to fix."""
            start, end = span
            want = self.ref.repair_events(start, end, fields)
            for side in sides:
                report = ts.repair(self.model, aware(start, 0), aware(end, 0),
                                   connection=side.conn(), batch_size=3, **fields)
                what = f"{side.name}: repair [{iso(start)}, {iso(end)}) {fields}: {report}"
                assert report.ok, what
                problem = want.count_problem(report.events)
                assert problem is None, f"{what}: events {problem}"
                assert (report.alternate_events_deleted, report.current_rows_fixed) == (0, 0), (
                    f"{what}: a clean run's companions need no fix")

        # -- rollups ----------------------------------------------------------------

        @precondition(lambda self: bool(shape.rollups))
        @rule()
        def check_rollups(self) -> None:
            """Every rollup row, against the reference's buckets of the stored events."""
            for every in shape.rollups:
                want = self.ref.rollup(every)
                for side in sides:
                    qs = self.model.rollup(timedelta(microseconds=every)).using(side.conn())
                    rows = qs.range(aware(0, 0), aware(_LAST_US, 0), allow_scan=True)
                    got = {(tuple(getattr(r, n) for n in shape.key_fields), us_of(r.time)):
                           self._rollup_row(r) for r in rows}
                    assert got == want, f"rollup {every} us: {_diff(side, 'rollup', got, want)}"

        def _rollup_row(self, r: Any) -> dict[str, Any]:
            row: dict[str, Any] = {"count": r.count}
            for name in self.ref.rollup_fields():
                row[name] = tuple(getattr(r, f"{name}_{agg}")
                                  for agg in ("count", "sum", "min", "max", "last"))
            return row

        @precondition(lambda self: bool(shape.rollups))
        @rule(q=tst.oracle_range_queries(shape), data=st.data())
        def resample(self, q: RangeQuery, data: st.DataObject) -> None:
            """``range(...).resample(step)``, from the rollup or the raw events."""
            size = data.draw(st.sampled_from(shape.rollups), label="rollup size")
            every = data.draw(st.sampled_from([size, 2 * size, size + 1000]), label="step")
            lo, hi = q.start, q.end
            if data.draw(st.booleans(), label="aligned"):
                lo, hi = lo - lo % size, hi - hi % size
            if lo > hi:
                return
            try:
                answer = self.ref.range(lo, hi, dict(q.fields), allow_scan=q.allow_scan)
            except Refused as refused:
                want: Any = Raised(refused.kind)
            else:
                want = self.ref.buckets(answer.events, every)
            for side in sides:
                try:
                    qs = self.model.range(aware(lo, 0), aware(hi, 0), allow_scan=q.allow_scan,
                                          **dict(q.fields)).using(side.conn())
                    windows = qs.resample(timedelta(microseconds=every))
                    got: Any = {}
                    for w in windows:
                        row: dict[str, Any] = {"count": w.count}
                        for name in self.ref.rollup_fields():
                            f = w.fields[name]
                            row[name] = (f.count, f.sum, f.min, f.max, f.last)
                        got[(tuple(w.key[n] for n in shape.key_fields), us_of(w.start))] = row
                except _EXPECTED_ERRORS as exc:
                    got = Raised.of(exc)
                assert got == want, (f"{side.name}: resample({every} us) of "
                                     f"[{iso(lo)}, {iso(hi)}) {dict(q.fields)}: {got!r}\n"
                                     f"  expected {want!r}")

        # -- raw tables -------------------------------------------------------------

        @rule()
        def check_tables(self) -> None:
            spec = self.spec
            for side in sides:
                keys = _keys(side.backend, spec.table)
                assert keys == self.ref.table_keys(0), _diff(side, spec.table, keys,
                                                             self.ref.table_keys(0))
                if shape.layout == "rows" and not shape.serialized:
                    rows = _newest_cells(side.backend, spec.table)
                    assert rows == self.ref.main_rows(), _diff(side, spec.table, rows,
                                                               self.ref.main_rows())
                for i, alt in enumerate(spec.alternates, start=1):
                    keys = _keys(side.backend, alt.table)
                    assert keys == self.ref.table_keys(i), _diff(side, alt.table, keys,
                                                                 self.ref.table_keys(i))
                if spec.current_table is not None:
                    self._check_current(side, spec.current_table)
                for day, table in self.snapshot_tables.items():
                    keys = _keys(side.backend, table)
                    assert keys == self.ref.snapshot_keys(day), _diff(
                        side, table, keys, self.ref.snapshot_keys(day))

        def _check_current(self, side: Side, table: str) -> None:
            keys = _keys(side.backend, table)
            assert keys == self.ref.current_keys(), _diff(side, table, keys,
                                                          self.ref.current_keys())
            if shape.serialized:
                return  # a serialized current row: the docs do not say its cells
            request = ReadRequest(table, filter=ReadFilter(cells_per_column=1))
            for row in side.backend.read_rows(request):
                got = {c.qualifier: (c.timestamp, c.value) for c in row.cells}
                problem = self.ref.current_row_problem(row.key, got)
                assert problem is None, f"{side.name}: table {table}: {problem}"

    OracleMachine.__name__ = OracleMachine.__qualname__ = (
        f"Oracle_{shape.name}_{'_'.join(s.name for s in sides)}")
    return OracleMachine


def _only(want: Answer, only: tuple[str, ...]) -> Answer:
    """docs/queries.md: with only(...), "the other value fields come back None"."""
    def blank(e: Ev) -> Ev:
        return replace(e, values=tuple((k, v if k in only else None) for k, v in e.values))

    return Answer(tuple(blank(e) for e in want.events))


def _keys(backend: Backend, table: str) -> set[bytes]:
    return {row.key for row in backend.read_rows(ReadRequest(table))}


def _newest_cells(backend: Backend, table: str) -> dict[bytes, set[tuple[str, bytes, int, bytes]]]:
    """Each row's newest cell per column: what Bigtable holds for a reader, GC or not."""
    request = ReadRequest(table, filter=ReadFilter(cells_per_column=1))
    return {row.key: {(c.family, c.qualifier, c.timestamp, c.value) for c in row.cells}
            for row in backend.read_rows(request)}


def _diff(side: Side, table: str, got: Any, want: Any) -> str:
    if isinstance(got, dict):
        extra = {k: v for k, v in got.items() if want.get(k) != v}
        missing = {k: v for k, v in want.items() if got.get(k) != v}
    else:
        extra, missing = got - want, want - got
    return f"{side.name}: table {table}: unexpected {extra!r}; expected but missing {missing!r}"
