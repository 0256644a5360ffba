"""``where()`` with ``None`` and on fields with a declared default, planned without I/O.

``field=None`` selects the events without a value of an ``Optional`` field
(no cell): a condition no server filter applies, so it is checked on the
client, with ``allow_client=True``. ``None`` is no bound of a range, and no
value of a field that is not ``Optional``. A condition the declared default
meets is one the server cannot apply either: events stored without the cell
read as the default, and a value filter never matches a missing cell.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

import pytest

import tsmodel as ts

UTC = timezone.utc
DAY = (datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 1, 2, tzinfo=UTC))


@ts.model(table="WHERE_NONE", family="F")
class Quote:
    k: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    bid: float = ts.value("BID")
    venue: Optional[str] = ts.value("VENUE", default=None)  # noqa: UP045
    region: str = ts.value("REGION", default="eu1")
    note: str = ts.value("NOTE", factory=lambda: "n/a")


def _qs() -> Any:
    return Quote.range(*DAY, k="a")


@pytest.mark.parametrize("op", ["gt", "gte", "lt", "lte"])
@pytest.mark.parametrize("field", ["bid", "venue", "region"])
def test_none_is_no_bound(op: str, field: str) -> None:
    with pytest.raises(ts.ValidationError, match="None is no bound") as info:
        _qs().where(**{f"{field}__{op}": None})
    assert (info.value.model, info.value.field, info.value.value) == ("Quote", field, None)


@pytest.mark.parametrize("pair", [(None, 0.0), (0.0, None), (None, None)])
def test_none_is_no_bound_of_a_range(pair: tuple[Any, Any]) -> None:
    with pytest.raises(ts.ValidationError, match="None is no bound.*bid__lte|bid__gte"):
        _qs().where(bid__range=pair)


@pytest.mark.parametrize("field", ["bid", "region", "note"])
def test_none_is_no_value_of_a_field_that_is_not_optional(field: str) -> None:
    with pytest.raises(ts.QueryError, match=rf"Quote.where\({field}=None\).*never None"):
        _qs().where(**{field: None})


def test_none_of_an_optional_field_is_checked_on_the_client() -> None:
    with pytest.raises(ts.QueryError, match=r"venue is None.*allow_client=True"):
        _qs().where(venue=None)
    plan = _qs().where(venue=None, allow_client=True).explain()
    assert plan.client_filters == ("venue is None",)
    assert all(not r.filter.conditions for r in plan.requests)
    assert "venue is None" in plan.reason and "no cell" in plan.reason
    assert plan.accept(Quote(k="a", time=DAY[0], bid=1.0, venue=None))
    assert not plan.accept(Quote(k="a", time=DAY[0], bid=1.0, venue="A"))
    # A value condition on an Optional field stays on the server: a missing cell is None.
    plan = _qs().where(venue="A").explain()
    assert [c.label for r in plan.requests for c in r.filter.conditions] == ["venue == 'A'"]


def test_none_and_a_value_of_one_field_cannot_both_hold() -> None:
    with pytest.raises(ts.QueryError, match="venue is None.*venue == 'A'"):
        _qs().where(venue=None, allow_client=True).where(venue="A")
    with pytest.raises(ts.QueryError, match="venue is None"):
        _qs().where(venue__gte="A", allow_client=True).where(venue=None)
    plan = _qs().where(venue=None, allow_client=True).where(venue=None).explain()
    assert plan.client_filters == ("venue is None",)


@pytest.mark.parametrize("op", ["in", "ne", "isnull", "not"])
def test_other_operators_are_unknown(op: str) -> None:
    with pytest.raises(ts.QueryError, match=f"unknown operator '{op}'"):
        _qs().where(**{f"venue__{op}": [None, "A"]})


@pytest.mark.parametrize("kwargs", [{"region": "eu1"}, {"region__gte": "eu1"},
                                    {"region__range": ("a", "z")}, {"note": "n/a"},
                                    {"note": "other"}])
def test_a_condition_the_default_may_meet_is_not_applied_by_the_server(
        kwargs: dict[str, Any]) -> None:
    name = next(iter(kwargs)).split("__")[0]
    with pytest.raises(ts.QueryError, match=rf"{name}.*default.*allow_client=True"):
        _qs().where(**kwargs)
    plan = _qs().where(allow_client=True, bid__gt=1.0, **kwargs).explain()
    # The server narrows by the other condition only; the client checks this one.
    assert [c.label for r in plan.requests for c in r.filter.conditions] == ["1.0 < bid"]
    assert len(plan.client_filters) == 1 and name in plan.client_filters[0]
    assert "default" in plan.reason
    assert _qs().where(allow_client=True, **kwargs).explain(count=True).client_filters


@pytest.mark.parametrize("kwargs", [{"region": "us2"}, {"region__lt": "eu1"},
                                    {"region__gt": "eu1"}, {"region__range": ("f", "z")}])
def test_a_condition_the_default_fails_stays_on_the_server(kwargs: dict[str, Any]) -> None:
    plan = _qs().where(**kwargs).explain()
    assert not plan.client_filters
    assert len([c for r in plan.requests for c in r.filter.conditions]) == 1


def test_the_record_check_reads_the_default_of_a_missing_cell() -> None:
    # The columnar exports check records, which leave a defaulted value without a
    # cell out (the default is filled in after).
    record = {"k": "a", "time": 0, "bid": 1.0, "venue": None, "note": "x"}
    assert _qs().where(region="eu1", allow_client=True).explain().accept_record(record)
    assert _qs().where(venue=None, allow_client=True).explain().accept_record(record)
    assert not _qs().where(note="n/a", allow_client=True).explain().accept_record(record)
    assert _qs().where(note="n/a", allow_client=True).explain().accept_record(
        {k: v for k, v in record.items() if k != "note"})
