"""pandas times finer than a microsecond, which no Python datetime can hold.

Bigtable stores times in microseconds and tsmodel refuses a time it cannot
store rather than truncate it (docs/row-keys.md). A ``pd.Timestamp`` is a
``datetime`` with nanoseconds besides: an event at 1.5 µs is refused, as one
finer than the key's unit is; a query bound at 1.5 µs selects exactly the
events a bound in nanoseconds selects among events stored in whole
microseconds (the oracle: comparisons of the nanosecond integers).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest

pd = pytest.importorskip("pandas")

import tsmodel as ts  # noqa: E402
from tests.backends import conftest as _backends  # noqa: E402
from tsmodel.backends.base import Backend  # noqa: E402

backend, emulator = _backends.backend, _backends.emulator

BASE = pd.Timestamp("2024-01-01 12:00:00", tz="UTC")


def _model() -> Any:
    name = "NS_" + uuid.uuid4().hex[:10].upper()

    @ts.model(table=name, family="F", current=name + "_NOW")
    class Reading:
        sensor: str = ts.key()
        time: datetime = ts.timestamp(unit="us")
        value: float = ts.value("V")

    return Reading


@pytest.fixture
def stored(backend: Backend) -> tuple[Any, ts.Connection]:
    """A model with events at 0, 1, 2 and 3 µs after ``BASE``."""
    model = _model()
    conn = ts.Connection(backend)
    conn.create_tables(model)
    conn.save_all([model(sensor="s", time=BASE + pd.Timedelta(microseconds=i), value=float(i))
                   for i in range(4)])
    return model, conn


def _values(conn: ts.Connection, model: Any) -> list[float]:
    return [e.value for e in model.using(conn).range(BASE - pd.Timedelta("1s"),
                                                     BASE + pd.Timedelta("1s"), sensor="s")]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_an_event_finer_than_a_microsecond_is_refused(stored: tuple[Any, ts.Connection],
                                                      zone: str) -> None:
    model, conn = stored
    fine = (BASE + pd.Timedelta(nanoseconds=1_500)).tz_convert(zone)
    with pytest.raises(ts.ValidationError) as caught:
        conn.save_all([model(sensor="s", time=fine, value=9.0)])
    assert caught.value.field == "time"
    assert "microsecond" in str(caught.value)
    assert _values(conn, model) == [0.0, 1.0, 2.0, 3.0]  # nothing written


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_a_frame_row_finer_than_a_microsecond_is_refused(stored: tuple[Any, ts.Connection],
                                                         zone: str) -> None:
    model, conn = stored
    times = [BASE + pd.Timedelta(microseconds=5), BASE + pd.Timedelta(nanoseconds=6_500)]
    frame = pd.DataFrame({"sensor": ["s", "s"], "time": pd.Series(times).dt.tz_convert(zone),
                          "value": [5.0, 6.0]})
    with pytest.raises(ts.ValidationError) as caught:
        conn.save_frame(model, frame, progress=False)
    assert caught.value.field == "time"
    assert getattr(caught.value, "row", None) == 1
    assert _values(conn, model) == [0.0, 1.0, 2.0, 3.0]  # validated first: nothing written


@pytest.mark.parametrize("start_ns, end_ns", [(1_500, 2_500), (500, 3_000), (1_000, 2_001),
                                              (999, 1_001), (1_200, 1_800)])
def test_query_bounds_in_nanoseconds_select_as_nanoseconds_do(
        stored: tuple[Any, ts.Connection], start_ns: int, end_ns: int) -> None:
    model, conn = stored
    expected = [float(i) for i in range(4) if start_ns <= i * 1_000 < end_ns]
    got = [e.value for e in model.using(conn).range(BASE + pd.Timedelta(nanoseconds=start_ns),
                                                    BASE + pd.Timedelta(nanoseconds=end_ns),
                                                    sensor="s")]
    assert got == expected


@pytest.mark.parametrize("as_of_ns", [999, 1_000, 1_500, 2_999, 3_001])
def test_latest_as_of_a_time_in_nanoseconds(stored: tuple[Any, ts.Connection],
                                            as_of_ns: int) -> None:
    model, conn = stored
    expected = max(i for i in range(4) if i * 1_000 <= as_of_ns)
    got = model.using(conn).latest(sensor="s", as_of=BASE + pd.Timedelta(nanoseconds=as_of_ns))
    assert got.value == float(expected)
