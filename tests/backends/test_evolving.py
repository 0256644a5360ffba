"""Schema evolution on every backend: rows stored by an older declaration of a model.

Each test writes events with an "old" declaration, then reads the same
tables with a "new" one that adds value fields. The oracle is the old
events with the new fields' declared defaults; a field added without a
default (a required value no stored event has) must still be refused,
naming the model, the table, the row and the column.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend, DeleteCells, ReadRequest, RowMutation, SetCell

UTC = timezone.utc
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
START, END = T0 - timedelta(days=1), T0 + timedelta(days=2)
#: (layout, serialization, bucket) of each variant read with an old and a new declaration.
VARIANTS = {
    "rows": (ts.rows, None, None),
    "rows-protobuf": (ts.rows, ts.Protobuf, None),
    "cells": (ts.cells, None, "day"),
    "cells-protobuf": (ts.cells, ts.Protobuf, "day"),
    "offsets-protobuf": (lambda: ts.offsets(timedelta(minutes=15)), ts.Protobuf, "day"),
}


def unique(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def conn(backend: Backend) -> ts.Connection:
    return ts.Connection(backend)


def declare(variant: str, table: str, *, new: bool, required: bool = False) -> Any:
    """The model of ``variant`` on ``table``: the old declaration, or the new one with
    two fields added (``region`` with a default, ``tags`` with a factory), or, with
    ``required``, one added without a default."""
    layout, serialization, bucket = VARIANTS[variant]
    options: dict[str, Any] = dict(table=table, family="m", layout=layout(),
                                   serialization=serialization() if serialization else None)
    if layout is ts.cells:
        options["max_versions"] = 200
    stamp = ts.timestamp(bucket=bucket) if bucket else ts.timestamp()

    if required:
        @ts.model(**options)
        class Required:
            host: str = ts.key()
            time: datetime = stamp
            cpu: float = ts.value()
            zone: str = ts.value()

        return Required
    if not new:
        @ts.model(**options)
        class Metric:
            host: str = ts.key()
            time: datetime = stamp
            cpu: float = ts.value()

        return Metric

    @ts.model(**options)
    class Metric:  # type: ignore[no-redef]
        host: str = ts.key()
        time: datetime = stamp
        cpu: float = ts.value()
        region: str = ts.value(default="eu1")
        note: str = ts.value(factory=lambda: "n/a")
        spare: int | None = ts.value(default=7)

    return Metric


def old_events(model: Any) -> list[Any]:
    return [model(host=h, time=T0 + timedelta(minutes=15 * i), cpu=float(i))
            for h in ("a", "b") for i in range(3)]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_new_fields_read_their_defaults_from_old_events(conn: ts.Connection,
                                                         variant: str) -> None:
    table = unique("EVOLVE")
    old = declare(variant, table, new=False)
    conn.create_tables(old)
    stored = old_events(old)
    assert conn.save_all(stored).ok
    new = declare(variant, table, new=True)
    # An Optional field reads None from an event without its cell, whatever its
    # default: None is stored as no cell, so the two cannot be told apart.
    expected = [new(host=e.host, time=e.time, cpu=e.cpu, region="eu1", note="n/a", spare=None)
                for e in stored]
    got = [e for h in ("a", "b") for e in new.range(START, END, host=h).using(conn)]
    assert got == expected
    # A read of only some fields gives the defaults of those read.
    only = list(new.range(START, END, host="a").only("region").using(conn))
    assert [(e.time, e.region) for e in only] == [(e.time, "eu1") for e in expected[:3]]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_old_and_new_events_side_by_side(conn: ts.Connection, variant: str) -> None:
    table = unique("EVOLVE")
    old = declare(variant, table, new=False)
    conn.create_tables(old)
    assert conn.save_all(old_events(old)).ok
    new = declare(variant, table, new=True)
    later = new(host="a", time=T0 + timedelta(hours=1), cpu=9.0, region="us2", note="x",
                spare=3)
    conn.save(later)
    got = list(new.range(START, END, host="a").using(conn))
    assert got[-1] == later
    assert [e.region for e in got] == ["eu1", "eu1", "eu1", "us2"]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_field_added_without_a_default_is_refused(conn: ts.Connection,
                                                    variant: str) -> None:
    table = unique("EVOLVE")
    old = declare(variant, table, new=False)
    conn.create_tables(old)
    assert conn.save_all(old_events(old)).ok
    required = declare(variant, table, new=False, required=True)
    if variant == "cells":
        # A bucket row's event without a required value's cell cannot be told from
        # one past the version limit (its cells of other columns kept): left out,
        # never returned half-filled. Hence: declare a default.
        assert list(required.range(START, END, host="a").using(conn)) == []
        return
    with pytest.raises(ts.CellDecodingError) as info:
        list(required.range(START, END, host="a").using(conn))
    message = str(info.value)
    assert "Required" in message and repr(table) in message and "row key b'a#" in message
    assert "'zone'" in message and "required value" in message


#: where() conditions on the new fields, the test of an event each stands for, and
#: whether an event without the field's cell may meet it (its default does; a
#: factory's default is not known in advance).
CONDITIONS: list[tuple[dict[str, Any], Any, bool]] = [
    ({"region": "eu1"}, lambda e: e.region == "eu1", True),
    ({"region": "us2"}, lambda e: e.region == "us2", False),
    ({"region__gte": "eu1"}, lambda e: e.region >= "eu1", True),
    ({"region__gt": "eu1"}, lambda e: e.region > "eu1", False),
    ({"region__lt": "f"}, lambda e: e.region < "f", True),
    ({"region__range": ("a", "eu1")}, lambda e: "a" <= e.region <= "eu1", True),
    ({"region": "eu1", "cpu__gte": 1.0}, lambda e: e.region == "eu1" and e.cpu >= 1.0, True),
    ({"region__gt": "eu1", "cpu__lt": 9.5}, lambda e: e.region > "eu1" and e.cpu < 9.5,
     False),
    ({"note": "n/a"}, lambda e: e.note == "n/a", True),
    ({"note__gt": "n/a"}, lambda e: e.note > "n/a", True),
]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_where_matches_old_events_by_their_default(conn: ts.Connection, variant: str) -> None:
    """docs/evolving.md: an event stored before a field existed reads its default,
    and where() selects it by that value too, in every layout; count() agrees."""
    table = unique("EVOLVE")
    old = declare(variant, table, new=False)
    conn.create_tables(old)
    stored = old_events(old)
    assert conn.save_all(stored).ok
    new = declare(variant, table, new=True)
    later = [new(host=h, time=T0 + timedelta(hours=1, minutes=15 * i), cpu=10.0 - i, region=r,
                 note=n, spare=None)
             for h in ("a", "b") for i, (r, n) in enumerate(
                 [("eu1", "x"), ("us2", "n/a"), ("ap3", "zz"), ("eu1", "n/a")])]
    assert conn.save_all(later).ok
    # The oracle: every event with the defaults of the fields it was stored without.
    events = sorted([new(host=e.host, time=e.time, cpu=e.cpu, region="eu1", note="n/a",
                         spare=None) for e in stored] + later, key=lambda e: (e.host, e.time))
    serialized = VARIANTS[variant][1] is not None
    for kwargs, test, by_default in CONDITIONS:
        want = [e for e in events if test(e)]
        got = [e for h in ("a", "b") for e in new.range(START, END, host=h).using(conn)
               .where(allow_client=True, **kwargs)]
        assert got == want, kwargs
        for h in ("a", "b"):
            qs = new.range(START, END, host=h).using(conn).where(allow_client=True, **kwargs)
            assert qs.count() == len([e for e in want if e.host == h]), kwargs
            plan = str(qs.explain())
            if not serialized:  # else every condition is checked on the client anyway
                assert ("default" in plan) == by_default, plan
                if not by_default:  # the server applies it: no allow_client needed
                    strict = new.range(START, END, host=h).using(conn).where(**kwargs)
                    assert list(strict) == [e for e in want if e.host == h]
                else:
                    with pytest.raises(ts.QueryError, match="default.*allow_client=True"):
                        new.range(START, END, host=h).where(**kwargs)
            # only(): the condition's field is decoded all the same, with its default.
            assert [e.time for e in qs.only("cpu")] == [e.time for e in want if e.host == h]


def test_where_on_old_current_rows_matches_the_default(conn: ts.Connection) -> None:
    table, current, alternate = unique("EVOLVE"), unique("CUR"), unique("BY_REGION")
    old, new = companion_models(table, current, alternate)
    conn.create_tables(old)
    assert conn.save_all([old(host="a", time=T0, cpu=1.0), old(host="b", time=T0, cpu=2.0)]).ok
    conn.create_tables(new)
    conn.save(new(host="c", time=T0, cpu=3.0, region="us2"))
    qs = new.current(allow_scan=True).using(conn)
    assert [e.host for e in qs.where(region="eu1", allow_client=True)] == ["a", "b"]
    assert qs.where(region="eu1", allow_client=True).count() == 2
    assert [e.host for e in qs.where(region="us2")] == ["c"]


def test_all_optional_events_stored_as_markers_read_defaults(conn: ts.Connection) -> None:
    """Events of a model whose values were all optional, stored as the empty marker
    cell (every value None), read with a new field's default."""
    for layout, bucket in ((ts.rows, None), (ts.cells, "day")):
        table = unique("SPARSE")
        extra: dict[str, Any] = {"max_versions": 10} if bucket else {}
        stamp = ts.timestamp(bucket=bucket) if bucket else ts.timestamp()

        @ts.model(table=table, family="m", layout=layout(), **extra)
        class Old:
            host: str = ts.key()
            time: datetime = stamp
            cpu: float | None = ts.value(default=None)

        @ts.model(table=table, family="m", layout=layout(), **extra)
        class New:
            host: str = ts.key()
            time: datetime = stamp
            cpu: float | None = ts.value(default=None)
            region: str = ts.value(default="eu1")

        conn.create_tables(Old)
        assert conn.save_all([Old(host="a", time=T0), Old(host="a", time=T0 + timedelta(
            minutes=1), cpu=2.0)]).ok
        got = list(New.range(START, END, host="a").using(conn))
        assert got == [New(host="a", time=T0, cpu=None, region="eu1"),
                       New(host="a", time=T0 + timedelta(minutes=1), cpu=2.0, region="eu1")]


def companion_models(table: str, current: str, alternate: str) -> tuple[Any, Any]:
    @ts.model(table=table, family="m", current=current)
    class Old:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()

    @ts.model(table=table, family="m", current=current,
              alternates=[ts.alternate(alternate, "region", "host", "time")])
    class New:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()
        region: str = ts.value(default="eu1")

    return Old, New


def test_repair_rebuilds_companions_of_old_events(conn: ts.Connection) -> None:
    """A new alternate-key table keyed by a field added with a default: the repair
    job reads the old events with their default and writes every companion row."""
    table, current, alternate = unique("EVOLVE"), unique("CUR"), unique("BY_REGION")
    old, new = companion_models(table, current, alternate)
    conn.create_tables(old)
    stored = old_events(old)
    assert conn.save_all(stored).ok
    conn.create_tables(new)
    report = ts.repair(new, START, END, connection=conn)
    assert report.failed == 0
    expected = [new(host=e.host, time=e.time, cpu=e.cpu, region="eu1") for e in stored]
    by_region = list(new.range(START, END, region="eu1", host="a").using(conn))
    assert by_region == expected[:3]
    assert [new.current(host=h).using(conn).first() for h in ("a", "b")] == \
        [expected[2], expected[5]]
    # The current-value row now holds the default as a cell of its own.
    row = next(iter(conn.backend.read_rows(ReadRequest(current))))
    assert (b"region", b"eu1") in {(c.qualifier, c.value) for c in row.cells}


def test_old_current_row_reads_the_default(conn: ts.Connection) -> None:
    """A current-value row written before the field existed has no cell for it: the
    default, not None (which there would mean "deleted by a newer event")."""
    table, current, alternate = unique("EVOLVE"), unique("CUR"), unique("BY_REGION")
    old, new = companion_models(table, current, alternate)
    conn.create_tables(old)
    conn.save(old(host="a", time=T0, cpu=1.0))
    assert new.current(host="a").using(conn).first() == new(host="a", time=T0, cpu=1.0,
                                                        region="eu1")


def test_a_damaged_row_without_the_required_value_is_still_refused(
        conn: ts.Connection) -> None:
    """A new field's default never hides a row without an older required value."""
    table = unique("EVOLVE")
    new = declare("rows", table, new=True)
    conn.create_tables(new)
    key = ts.row_key(new(host="a", time=T0, cpu=1.0))
    conn.backend.mutate_rows(table, [RowMutation(key, (
        SetCell("m", b"region", int(T0.timestamp()) * 1_000_000, b"eu2"),))])
    with pytest.raises(ts.CellDecodingError, match="'cpu', a required value"):
        list(new.range(START, END, host="a").using(conn))


def retired_models(table: str, layout: Any, policy: str) -> tuple[Any, Any]:
    """A model with a field ``legacy``, and its next declaration without it."""
    bucket = "day" if layout is not ts.rows else None
    extra: dict[str, Any] = {"max_versions": 10} if layout is ts.cells else {}

    @ts.model(table=table, family="m", layout=layout(), **extra)
    class Old:
        host: str = ts.key(column="HOST")
        time: datetime = ts.timestamp(bucket=bucket) if bucket else ts.timestamp()
        cpu: float = ts.value()
        legacy: str = ts.value()

    @ts.model(table=table, family="m", layout=layout(), unknown_columns=policy, **extra)
    class New:
        host: str = ts.key(column="HOST")
        time: datetime = ts.timestamp(bucket=bucket) if bucket else ts.timestamp()
        cpu: float = ts.value()

    return Old, New


@pytest.mark.parametrize("layout", [ts.rows, ts.cells])
def test_a_retired_field_is_ignored_by_default(conn: ts.Connection, layout: Any) -> None:
    table = unique("RETIRED")
    old, new = retired_models(table, layout, "ignore")
    conn.create_tables(old)
    conn.save(old(host="a", time=T0, cpu=1.0, legacy="x"))
    assert list(new.range(START, END, host="a").using(conn)) == [
        new(host="a", time=T0, cpu=1.0)]


@pytest.mark.parametrize("layout", [ts.rows, ts.cells])
def test_a_retired_field_is_refused_by_policy(conn: ts.Connection, layout: Any) -> None:
    table = unique("RETIRED")
    old, new = retired_models(table, layout, "error")
    conn.create_tables(old)
    # The model's own rows (value columns, the key column) read under the policy.
    conn.save(new(host="b", time=T0, cpu=2.0))
    assert list(new.range(START, END, host="b").using(conn)) == [
        new(host="b", time=T0, cpu=2.0)]
    conn.save(old(host="a", time=T0, cpu=1.0, legacy="x"))
    with pytest.raises(ts.CellDecodingError) as info:
        list(new.range(START, END, host="a").using(conn))
    message = str(info.value)
    assert message.startswith("New: ") and repr(table) in message
    assert "row key b'a#" in message and "column m:legacy" in message
    assert "unknown_columns='error'" in message
    # Deleting the retired column's cells makes the rows readable again.
    key = next(iter(conn.backend.read_rows(ReadRequest(table)))).key
    conn.backend.mutate_rows(table, [RowMutation(key, (DeleteCells("m", b"legacy"),))])
    assert list(new.range(START, END, host="a").using(conn)) == [
        new(host="a", time=T0, cpu=1.0)]


def test_offsets_refuse_a_foreign_column_by_policy(conn: ts.Connection) -> None:
    """Offset columns and a key column are the model's; any other qualifier is not."""
    table = unique("METER")

    @ts.model(table=table, family="m", layout=ts.offsets(timedelta(minutes=15)),
              unknown_columns="error")
    class Meter:
        meter: int = ts.key(width=6, column="ID")
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value()

    conn.create_tables(Meter)
    event = Meter(meter=1, time=T0, kwh=0.5)
    conn.save(event)
    assert list(Meter.range(START, END, meter=1).using(conn)) == [event]
    key = ts.row_key(event)
    conn.backend.mutate_rows(table, [RowMutation(key, (
        SetCell("m", b"NOTE", int(T0.timestamp()) * 1_000_000, b"hello"),))])
    with pytest.raises(ts.CellDecodingError, match="column m:NOTE: no field"):
        list(Meter.range(START, END, meter=1).using(conn))


def test_snapshot_of_old_events_holds_the_default(conn: ts.Connection) -> None:
    """A snapshot built by a new declaration from events stored by the old one: the
    snapshot rows hold the default as a cell, and read back equal to the oracle."""
    table = unique("EVOLVE")
    pattern = f"{table}_{{period:%Y%m%d}}"

    @ts.model(table=table, family="m")
    class Old:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()

    @ts.model(table=table, family="m", snapshot=ts.snapshot(pattern))
    class New:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()
        region: str = ts.value(default="eu1")

    conn.create_tables(Old)
    stored = old_events(Old)
    conn.save_all(stored)
    conn.create_tables(New)
    report = ts.build_snapshot(New, T0, connection=conn, progress=False)
    assert report.events_written == len(stored)
    expected = sorted((New(host=e.host, time=e.time, cpu=e.cpu, region="eu1") for e in stored),
                      key=lambda e: (e.host, e.time))
    assert list(New.snapshot(T0).using(conn)) == expected
    cells = {(c.qualifier, c.value) for row in conn.backend.read_rows(ReadRequest(report.table))
             for c in row.cells}
    assert (b"region", b"eu1") in cells


class CountingConnection(ts.Connection):
    """A connection that records the columns of every cell the backend sends."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.columns: list[tuple[str, bytes]] = []

    def read(self, request: ReadRequest) -> Any:
        for row in super().read(request):
            self.columns.extend((c.family, c.qualifier) for c in row.cells)
            yield row


def test_bucket_reads_do_not_fetch_a_retired_field(backend: Backend) -> None:
    """Bucket rows of ts.cells() keep a version per event in each column: a retired
    field's cells are left out by the read's column filter, never sent."""
    conn = CountingConnection(backend)
    old, new = retired_models(unique("RETIRED"), ts.cells, "ignore")
    conn.create_tables(old)
    conn.save_all([old(host="a", time=T0 + timedelta(minutes=i), cpu=float(i), legacy="x" * 100)
                   for i in range(5)])
    got = list(new.range(START, END, host="a").using(conn))
    assert got == [new(host="a", time=T0 + timedelta(minutes=i), cpu=float(i)) for i in range(5)]
    assert ("m", b"legacy") not in conn.columns and ("m", b"cpu") in conn.columns
    assert "columns=m:HOST,m:cpu" in str(new.range(START, END, host="a").explain())


def test_rows_of_unknown_columns_only_are_still_refused(conn: ts.Connection) -> None:
    """A row per event holding none of the model's columns is no event of the model:
    refused, under the default policy too, never left out unseen."""
    table = unique("RETIRED")
    old, new = retired_models(table, ts.rows, "ignore")
    conn.create_tables(old)
    key = ts.row_key(new(host="a", time=T0, cpu=1.0))
    conn.backend.mutate_rows(table, [RowMutation(key, (
        SetCell("m", b"legacy", int(T0.timestamp()) * 1_000_000, b"x"),))])
    with pytest.raises(ts.CellDecodingError, match="'cpu', a required value"):
        list(new.range(START, END, host="a").using(conn))
