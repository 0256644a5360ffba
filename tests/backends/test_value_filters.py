"""Value filters (``where()``) on both backends, against the reference model.

Every shape of the oracle harness saves drawn batches; drawn conditions on
its value fields must give exactly the events of the reference's answer
whose value lies in the interval (tests/oracle/reference.py, filtered here
with Python's comparisons). Whether the server applies a condition follows
the documented rule, written out independently below; conditions it cannot
apply are refused unless ``allow_client=True``. The backend-level filter
(``ReadFilter.conditions``) is checked on raw cells against a hand-written
expectation, and a count with an exact server condition reads no value.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests import strategies as tst
from tests.backends.passthrough import PassThrough
from tests.oracle.ops import aware
from tests.oracle.reference import Reference
from tests.oracle.shapes import ROWS, SHAPES, Shape
from tsmodel.backends.base import (
    Backend,
    ReadFilter,
    ReadRequest,
    Row,
    RowMutation,
    SetCell,
    TableSpec,
    ValueCondition,
)
from tsmodel.encoding.ordering import Interval

UTC = timezone.utc
EXAMPLES = {"embedded": 8, "emulator": 3}
OPS = ("eq", "gt", "gte", "lt", "lte", "range")


def _server_applies(shape: Shape) -> bool:
    """docs/analysis.md: a value in a column of its own (not serialized, not in the
    qualifier), whose codec's bytes sort like its values (every shape's codec does)."""
    return not shape.serialized and shape.layout != "columns"


def _interval(op: str, a: Any, b: Any) -> Interval:
    return {"eq": Interval(a, True, a, True), "gt": Interval(a, False),
            "gte": Interval(a, True), "lt": Interval(None, True, a, False),
            "lte": Interval(None, True, a, True),
            "range": Interval(min(a, b), True, max(a, b), True)}[op]


@st.composite
def _conditions(draw: st.DrawFn, shape: Shape) -> tuple[str, str, Any, Any]:
    value = draw(st.sampled_from(shape.values))
    choices = [c for c in value.choices if c is not None]
    # ``field=None`` of an Optional field: the events without a value (no cell).
    ops = (*OPS, "none") if value.optional else OPS
    return (value.name, draw(st.sampled_from(ops)), draw(st.sampled_from(choices)),
            draw(st.sampled_from(choices)))


def _kwargs(name: str, op: str, a: Any, b: Any) -> dict[str, Any]:
    if op == "none":
        return {name: None}
    return {f"{name}__{op}" if op != "eq" else name: (min(a, b), max(a, b))
            if op == "range" else a}


def _holds(name: str, op: str, a: Any, b: Any, value: Any) -> bool:
    return value is None if op == "none" else _interval(op, a, b).contains(value)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_where_answers_as_the_reference(backend: Backend, shape: Shape,
                                        request: pytest.FixtureRequest) -> None:
    kind = request.node.callspec.params["backend"]

    @settings(max_examples=EXAMPLES[kind], deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        model = shape.make_model(uuid.uuid4().hex[:10].upper())
        conn = ts.Connection(backend)
        conn.create_tables(model)
        try:
            ref = Reference(shape)
            for batch in data.draw(st.lists(tst.oracle_batches(shape), min_size=1,
                                            max_size=3), label="batches"):
                assert conn.save_all([model(**{**e.fields(), "time": aware(e.t, e.zone)})
                                      for e in batch]).ok
                ref.save(batch)
            lo, hi = min(shape.times), max(shape.times) + 1
            qs = model.range(aware(lo, 0), aware(hi, 0), allow_scan=True).using(conn)
            conditions = data.draw(st.lists(_conditions(shape), min_size=1, max_size=2),
                                   label="conditions")
            allow_client = data.draw(st.booleans(), label="allow_client")
            kwargs = [_kwargs(*c) for c in conditions]
            # No server filter selects a missing cell: None is checked on the client.
            on_server = [c for c in conditions if c[1] != "none"] if \
                _server_applies(shape) else []
            mixed = {n for n, op, _, _ in conditions if op == "none"} & \
                {n for n, op, _, _ in conditions if op != "none"}
            if mixed:  # None and a value range of one field: no event meets both
                with pytest.raises(ts.QueryError, match="cannot both hold"):
                    for kw in kwargs:
                        qs = qs.where(allow_client=True, **kw)
                return
            if len(on_server) < len(conditions) and not allow_client:
                with pytest.raises(ts.QueryError, match="allow_client=True"):
                    for kw in kwargs:
                        qs = qs.where(**kw)
                return
            for kw in kwargs:
                qs = qs.where(allow_client=allow_client, **kw)
            want = [e for e in ref.range(lo, hi, {}, allow_scan=True).events
                    if all(_holds(*c, e.get(c[0])) for c in conditions)]
            got = list(qs)
            assert [_strict(shape, i) for i in got] == [e.strict() for e in want], (
                f"{conditions}\n  expected: {want}\n  got: {got}")
            assert qs.count() == len(want)
            plan = qs.explain()
            assert ("rows with a cell where" in str(plan)) == bool(on_server)
        finally:
            conn.drop_tables(model)

    run()


def _strict(shape: Shape, item: Any) -> Any:
    from tests.oracle.reference import Ev
    from tests.oracle.shapes import us_of

    return Ev(tuple((n, getattr(item, n)) for n in shape.key_fields), us_of(item.time),
              tuple((v.name, getattr(item, v.name)) for v in shape.values)).strict()


# -- the backend filter itself ------------------------------------------------------


@pytest.fixture
def raw_table(backend: Backend, table_name: str) -> Iterator[str]:
    backend.create_table(TableSpec(table_name, (("F", ts.GcRule()), ("G", ts.GcRule()))))
    cells = {
        b"r1": [("F", b"a", 2_000, b"\x05"), ("F", b"a", 1_000, b"\x09"), ("F", b"b", 1_000, b"z")],
        b"r2": [("F", b"a", 1_000, b"\x07"), ("G", b"a", 1_000, b"\x05")],
        b"r3": [("F", b"b", 1_000, b"\x05")],
    }
    backend.mutate_rows(table_name, [RowMutation(k, tuple(SetCell(*c) for c in v))
                                     for k, v in cells.items()])
    yield table_name
    backend.delete_table(table_name)


def _read(backend: Backend, table: str, flt: ReadFilter) -> dict[bytes, list[tuple[Any, ...]]]:
    return {r.key: [tuple(c) for c in r.cells]
            for r in backend.read_rows(ReadRequest(table, filter=flt))}


def _cond(qualifier: bytes | None, *ranges: tuple[Any, ...], family: str = "F") -> Any:
    return ValueCondition(family, qualifier, tuple(ranges))


def test_conditions_keep_whole_rows_with_a_matching_cell(backend: Backend,
                                                         raw_table: str) -> None:
    five = _cond(b"a", (b"\x05", True, b"\x05", True))
    # Every version of F:a is seen: r1's older 0x09 does not matter, its newer 0x05 does.
    assert _read(backend, raw_table, ReadFilter(conditions=(five,))) == {
        b"r1": [("F", b"a", 2_000, b"\x05"), ("F", b"a", 1_000, b"\x09"),
                ("F", b"b", 1_000, b"z")]}
    # Versions limited first: r1's newest F:a is 0x05.
    nine = _cond(b"a", (b"\x08", False, None, True))
    assert _read(backend, raw_table, ReadFilter(conditions=(nine,))) == {
        b"r1": [("F", b"a", 2_000, b"\x05"), ("F", b"a", 1_000, b"\x09"),
                ("F", b"b", 1_000, b"z")]}
    assert _read(backend, raw_table, ReadFilter(cells_per_column=1, conditions=(nine,))) == {}
    # Any column of a family; another family's cell does not count.
    anywhere = _cond(None, (b"\x05", True, b"\x05", True))
    assert set(_read(backend, raw_table, ReadFilter(conditions=(anywhere,)))) == {b"r1", b"r3"}
    g = _cond(b"a", (b"\x05", True, b"\x05", True), family="G")
    assert set(_read(backend, raw_table, ReadFilter(conditions=(g,)))) == {b"r2"}
    # Two conditions: both hold. No range: nothing.
    seven_or_five = _cond(b"a", (b"\x07", True, b"\x07", True), (b"\x05", True, b"\x05", True))
    both = _read(backend, raw_table, ReadFilter(conditions=(seven_or_five, g)))
    assert set(both) == {b"r2"}
    assert _read(backend, raw_table, ReadFilter(conditions=(_cond(b"a"),))) == {}


def test_conditions_see_the_values_strip_and_row_limits_remove(backend: Backend,
                                                               raw_table: str) -> None:
    five = _cond(b"a", (b"\x05", True, b"\x05", True))
    got = _read(backend, raw_table, ReadFilter(conditions=(five,), strip_values=True,
                                               cells_per_row=1))
    assert got == {b"r1": [("F", b"a", 2_000, b"")]}
    # The condition sees the cells the column filter leaves.
    only_b = ReadFilter(columns=(("F", b"b"),), conditions=(five,))
    assert _read(backend, raw_table, only_b) == {}


# -- counting with a server condition ---------------------------------------------


class _Values(PassThrough):
    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.values = 0

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        for row in self.inner.read_rows(request):
            self.values += sum(len(c.value) for c in row.cells)
            yield row


def test_count_with_an_exact_condition_reads_no_value(backend: Backend) -> None:
    model = ROWS.make_model(uuid.uuid4().hex[:10].upper())
    counter = _Values(backend)
    conn = ts.Connection(counter)
    conn.create_tables(model)
    try:
        t0 = datetime(2015, 3, 2, tzinfo=UTC)
        events = [model(site="a", host=1, time=t0 + timedelta(seconds=i), x=i - 10)
                  for i in range(40)]
        assert conn.save_all(events).ok
        qs = model.range(t0, t0 + timedelta(hours=1), site="a", host=1).using(conn) \
            .where(x__gte=-3, x__lt=12)
        assert not qs.explain().client_filters
        counter.values = 0
        assert qs.count() == sum(1 for e in events if -3 <= e.x < 12)
        assert counter.values == 0
        assert [e.x for e in qs] == list(range(-3, 12))
        assert [e.x for e in qs.newest_first().limit(2)] == [11, 10]
    finally:
        conn.drop_tables(model)


def test_refusals_name_the_field_and_the_fix() -> None:
    model = ROWS.make_model("REFUSALS")
    qs = model.range(datetime(2015, 3, 2, tzinfo=UTC), datetime(2015, 3, 3, tzinfo=UTC),
                     site="a")
    with pytest.raises(ts.QueryError, match="'site' is a key field"):
        qs.where(site="b")
    with pytest.raises(ts.QueryError, match="unknown operator 'between'"):
        qs.where(x__between=(1, 2))
    with pytest.raises(ts.FieldTypeError, match="expected int"):
        qs.where(x__gt="1")
    with pytest.raises(ts.ScanRefusedError):  # a value filter does not narrow the rows read
        model.range(datetime(2015, 3, 2, tzinfo=UTC),
                    datetime(2015, 3, 3, tzinfo=UTC)).where(x=1)


# -- key fields beyond the key prefix: a row key regex -------------------------------


def test_key_fields_after_a_gap_are_selected_by_a_row_key_regex(backend: Backend) -> None:
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"REGEX_{suffix}", family="F")
    class Probe:
        region: str = ts.key()
        name: str = ts.key()
        rack: int = ts.key(width=3)
        time: datetime = ts.timestamp(unit="ms")
        v: int = ts.value("V")

    counter = _Values(backend)
    conn = ts.Connection(counter)
    conn.create_tables(Probe)
    try:
        t0 = datetime(2020, 1, 1, tzinfo=UTC)
        # Names a regex would misread if not escaped: "." "+" "*" "(" "[" "\\" "é" "|".
        names = ["a.b", "axb", "a+b", "aab", "a*", "(x)", "[y]", "\\d", "é", "x|y", "é|"]
        events = [Probe(region=r, name=n, rack=k, time=t0 + timedelta(minutes=i), v=i)
                  for r in ("eu", "us") for n in names for k in (1, 12) for i in range(3)]
        assert conn.save_all(events).ok
        for name in names:
            for rack in (None, 12):
                fields: dict[str, Any] = {"name": name}
                if rack is not None:
                    fields["rack"] = rack
                qs = Probe.range(t0, t0 + timedelta(hours=1), allow_scan=True,
                                 **fields).using(conn)
                plan = qs.explain()
                assert plan.requests[0].filter.row_key_regex is not None
                assert "by row key regex on the server" in plan.reason
                assert not plan.client_filters
                want = sorted((e.region, e.name, e.rack, e.time) for e in events
                              if e.name == name and rack in (None, e.rack))
                got = [(e.region, e.name, e.rack, e.time) for e in qs]
                assert sorted(got) == want, (name, rack)
                counter.values = 0
                assert qs.count() == len(want) and counter.values == 0
        # Only the time and a field after it: no regex needed up to the gap, rack matched.
        qs = Probe.range(t0, t0 + timedelta(hours=1), allow_scan=True, rack=1).using(conn)
        assert sorted(e.rack for e in qs) == [1] * (len(events) // 2)
    finally:
        conn.drop_tables(Probe)


def test_a_fixed_width_string_before_the_field_keeps_the_client_check() -> None:
    @ts.model(table="REGEX_FIXED", family="F")
    class Fixed:
        site: str = ts.key(width=4)
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        v: int = ts.value("V")

    plan = Fixed.range(datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 1, 2, tzinfo=UTC),
                       allow_scan=True, host="h").explain()
    assert plan.requests[0].filter.row_key_regex is None
    assert plan.client_filters == ("host == 'h'",)


# -- None: the events without a value ------------------------------------------------


@pytest.mark.parametrize("layout", ["rows", "cells", "offsets"])
def test_none_selects_the_events_without_a_value(backend: Backend, layout: str) -> None:
    suffix = uuid.uuid4().hex[:8].upper()
    shape: dict[str, Any] = {
        "rows": dict(layout=ts.rows()),
        "cells": dict(layout=ts.cells(), max_versions=50),
        "offsets": dict(layout=ts.offsets(timedelta(seconds=1)),
                        serialization=ts.Protobuf())}[layout]
    stamp = ts.timestamp(unit="ms") if layout == "rows" else ts.timestamp(bucket="hour")

    @ts.model(table=f"NONE_{suffix}", family="MD", **shape)
    class Quote:
        k: str = ts.key()
        time: datetime = stamp
        bid: float = ts.value("BID")
        venue: Optional[str] = ts.value("VENUE", default=None)  # noqa: UP045

    conn = ts.Connection(backend)
    conn.create_tables(Quote)
    try:
        t0 = datetime(2020, 1, 1, tzinfo=UTC)
        events = [Quote(k="a", time=t0 + timedelta(seconds=i), bid=float(i - 5),
                        venue=None if i % 2 else "A") for i in range(10)]
        assert conn.save_all(events).ok
        qs = Quote.range(t0, t0 + timedelta(hours=1), k="a").using(conn)
        with pytest.raises(ts.QueryError, match=r"Quote.*venue is None.*allow_client=True"):
            qs.where(venue=None)
        nones = qs.where(venue=None, allow_client=True)
        want = [e for e in events if e.venue is None]
        assert list(nones) == want and len(want) == 5
        assert nones.count() == 5
        assert "venue is None" in str(nones.explain())
        assert [e.bid for e in nones.where(bid__lt=0.0)] == [-4.0, -2.0]
        assert list(qs.where(venue="A", allow_client=True)) == [e for e in events
                                                               if e.venue == "A"]
        for bad in ({"bid__gt": None}, {"bid__lt": None}, {"venue__lte": None},
                    {"bid__range": (None, 0.0)}):
            with pytest.raises(ts.ValidationError, match="None is no bound"):
                qs.where(**bad)
        with pytest.raises(ts.QueryError, match="never None"):
            qs.where(bid=None)
    finally:
        conn.drop_tables(Quote)


def test_a_client_checked_field_is_read_when_only_leaves_it_out(backend: Backend) -> None:
    """docs/analysis.md: fields named in where() are decoded even when only() leaves
    them out, where the client checks them (their column is read too)."""
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"ONLY_{suffix}", family="F")
    class Price:
        k: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU")
        px: float = ts.value("PX", codec=ts.Text(float))

    conn = ts.Connection(backend)
    conn.create_tables(Price)
    try:
        t0 = datetime(2024, 5, 1, tzinfo=UTC)
        assert conn.save_all([Price(k="a", time=t0 + timedelta(minutes=i), cpu=float(i),
                                    px=float(10 - i)) for i in range(6)]).ok
        qs = Price.range(t0, t0 + timedelta(hours=1), k="a").using(conn) \
            .where(px__lte=6.0, allow_client=True)
        assert [e.cpu for e in qs.only("cpu")] == [4.0, 5.0]
        assert qs.only("cpu").count() == 2
    finally:
        conn.drop_tables(Price)
