"""Declarations for tables tsmodel did not create (issue 11, column-level items).

What each declaration accepts, what it refuses when the class is defined,
and the read plans it compiles to; the rows themselves are checked on both
backends in ``tests/backends/test_adopting_columns.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import tsmodel as ts

UTC = timezone.utc
T0 = datetime.fromtimestamp(1426535612.045, UTC)


def refused(*words: str) -> pytest.RaisesContext[ts.DeclarationError]:
    return pytest.raises(ts.DeclarationError, match="(?s)" + ".*".join(words))


# -- 8: cell timestamps that are not event times ---------------------------------------


def test_event_time_cells_false_drops_the_cell_timestamp_filter() -> None:
    @ts.model(table="METRIC", family="METRIC", event_time_cells=False)
    class Metric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()

    plan = Metric.range(T0, T0 + timedelta(minutes=1), hostname="h").explain()
    (request,) = plan.requests
    assert (request.filter.timestamp_start, request.filter.timestamp_end) == (None, None)
    assert request.rows.ranges[0].start == b"h#1426535612045"
    assert any("time" in check for check in plan.client_filters)
    scan = Metric.range(T0, T0 + timedelta(minutes=1), allow_scan=True).limit(3).explain()
    assert scan.requests[0].limit is None  # the client checks times: no row limit on the server


def test_event_time_cells_false_keeps_the_max_age_filter() -> None:
    @ts.model(table="METRIC", family="METRIC", event_time_cells=False,
              retention=timedelta(days=3650 * 3))
    class Metric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()

    request = Metric.range(T0, T0 + timedelta(minutes=1), hostname="h").explain().requests[0]
    assert request.filter.timestamp_start is not None and request.filter.timestamp_end is None


@pytest.mark.parametrize("layout", [ts.cells(), ts.columns()], ids=["cells", "columns"])
def test_event_time_cells_false_refused_where_cells_hold_the_time(layout: ts.Layout) -> None:
    with refused("event_time_cells=False", "reads each event's time from its cell timestamp"):
        @ts.model(table="T", family="f", layout=layout, max_versions=10,
                  event_time_cells=False)
        class Balloon:
            balloon: str = ts.key()
            time: datetime = ts.timestamp(bucket="day")
            pressure: int = ts.value(codec=ts.Text(int))


def test_event_time_cells_false_refuses_a_current_table() -> None:
    with refused("current='CUR'", "Drop current="):
        @ts.model(table="T", family="f", current="CUR", event_time_cells=False)
        class Metric:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            cpu: float = ts.value()


def test_event_time_cells_must_be_a_bool() -> None:
    with refused("event_time_cells='no'", "True or False"):
        @ts.model(table="T", family="f", event_time_cells="no")  # type: ignore[arg-type]
        class Metric:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            cpu: float = ts.value()
