"""Answers exact at the edges (issue "Exact at the edges", items 3, 4 and 8).

Every test here failed before its fix; the item is in each docstring. They run
on the embedded store and on the Cloud Bigtable emulator (``conftest.py``) and
compare with expectations computed from the events saved (plain Python), never
with what the code returned before.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend, RowMutation, SetCell

UTC = timezone.utc
T0 = datetime(2015, 3, 16, tzinfo=UTC)


@pytest.fixture
def conn(backend: Backend) -> ts.Connection:
    return ts.Connection(backend)


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _ms(t: datetime) -> int:
    return round(t.timestamp() * 1000) * 1000


# -- 4: a current-value key holding the separator -----------------------------------------


@pytest.mark.parametrize("host", [b"h13#x", b"h13 x", b"h13\x00"])
def test_a_current_key_the_model_would_refuse_is_refused(conn: ts.Connection, backend: Backend,
                                                          host: bytes) -> None:
    """Item 4: ``h13#x`` in the current table came back as a host from ``current()``;
    the same key in the main table raises ``KeyDecodingError``."""

    @ts.model(table=_name("M"), family="M", current=_name("CUR"))
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value()

    conn.create_tables(Metric)
    conn.save(Metric(host="h12", time=T0, cpu=0.5))
    spec = Metric.__tsmodel__
    cell = SetCell("M", b"cpu", _ms(T0), ts.Float64().encode(0.7))
    backend.mutate_rows(spec.current_table, [RowMutation(host, (cell,))])
    backend.mutate_rows(spec.table, [RowMutation(host + b"#" + str(_ms(T0) // 1000).encode(),
                                                 (cell,))])
    with pytest.raises(ts.KeyDecodingError, match="h13"):
        list(Metric.range(T0, T0 + timedelta(seconds=1), allow_scan=True).using(conn))
    with pytest.raises(ts.KeyDecodingError, match="h13"):
        list(Metric.using(conn).current())
