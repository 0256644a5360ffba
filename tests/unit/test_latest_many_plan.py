"""The plan of ``latest_many``: pure, checked against the write path and ``latest()``'s plan."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import pytest

import tsmodel as ts
from tsmodel.backends.base import Features, RowSet
from tsmodel.plan.reads import compile_latest_many, compile_query, latest_state

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
BIGTABLE = Features(reverse_scan=True, concurrent_calls=True)


def sensor(*, current: bool, reverse: bool = False) -> Any:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"S_{suffix}", family="m", current=f"C_{suffix}" if current else None)
    class Sensor:
        salt = ts.salt(4, on="sensor")
        site: str = ts.key()
        sensor: str = ts.key()
        if reverse:
            time: datetime = ts.timestamp(reverse=True)
        else:
            time: datetime = ts.timestamp(unit="ms")  # type: ignore[no-redef]
        reading: int = ts.value()

    return Sensor


def test_current_rows_are_the_rows_saves_write_chunked_sorted_and_once() -> None:
    Sensor = sensor(current=True)
    keys: list[Any] = [{"site": "a", "sensor": f"s{i}"} for i in range(5)]
    keys += [("a", "s3"), {"sensor": "s0", "site": "a"}]
    plan = compile_latest_many(Sensor.__tsmodel__, keys, BIGTABLE, keys_per_read=2)
    assert plan.current and plan.table == Sensor.__tsmodel__.current_table
    assert plan.keys == tuple(("a", f"s{i}") for i in range(5))
    written = [ts.current_row_key(Sensor(site="a", sensor=f"s{i}", time=T0, reading=1))
               for i in range(5)]
    assert list(plan.row_keys) == written
    assert [r.rows for r in plan.requests] == [RowSet(keys=tuple(sorted(written)[i:i + 2]))
                                               for i in (0, 2, 4)]
    assert plan.round_trips == 3
    assert all(r.filter.cells_per_column == 1 and r.limit is None for r in plan.requests)
    assert "5 entities" in str(plan) and "2 keys per read" in str(plan)
    assert "2 row keys" in str(plan)


def test_result_get_takes_exactly_the_key_fields() -> None:
    Sensor = sensor(current=True)
    plan = compile_latest_many(Sensor.__tsmodel__, [("a", "s1"), ("a", "s2")])
    event = Sensor(site="a", sensor="s1", time=T0, reading=1)
    result = plan.result(Sensor, rows=[])
    assert result.missing == [{"site": "a", "sensor": "s1"}, {"site": "a", "sensor": "s2"}]
    result.found[("a", "s1")] = event
    assert result.get(sensor="s1", site="a") is event
    assert result.get(site="a", sensor="s2") is None
    for bad in ({"site": "a"}, {"site": "a", "sensor": "s1", "x": 1}):
        with pytest.raises(ts.QueryError, match="site, sensor"):
            result.get(**bad)


@pytest.mark.parametrize("reverse", [False, True])
def test_without_current_table_each_entity_gets_latests_plan(reverse: bool) -> None:
    Sensor = sensor(current=False, reverse=reverse)
    spec = Sensor.__tsmodel__
    plan = compile_latest_many(spec, [("a", "s1"), ("b", "s2"), ("a", "s1")], BIGTABLE,
                               now_us=1)
    assert not plan.current and plan.keys == (("a", "s1"), ("b", "s2"))
    expected = [compile_query(spec, latest_state(spec, (("site", s), ("sensor", n))),
                              BIGTABLE, now_us=1) for s, n in plan.keys]
    assert list(plan.entities) == expected
    for entity in plan.entities:  # one salt (computed from the key), the newest row only
        (request,) = entity.requests
        assert request.limit == 1 and request.reverse is not reverse
    assert plan.round_trips == 2


def test_no_keys_no_reads() -> None:
    for current in (True, False):
        plan = compile_latest_many(sensor(current=current).__tsmodel__, [], BIGTABLE)
        assert plan.round_trips == 0 and plan.keys == ()
        assert plan.result(object).found == {}


def test_keys_per_read_must_be_positive() -> None:
    with pytest.raises(ValueError, match="keys_per_read"):
        compile_latest_many(sensor(current=True).__tsmodel__, [], keys_per_read=0)


def test_unhashable_value_is_a_key_type_error() -> None:
    with pytest.raises(ts.KeyTypeError) as info:
        compile_latest_many(sensor(current=True).__tsmodel__, [{"site": "a", "sensor": ["x"]}])
    assert (info.value.field, info.value.value) == ("sensor", ["x"])
    assert "Sensor.sensor" in str(info.value)
