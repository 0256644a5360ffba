"""Errors of the table codec: where a bad cell is, whichever codec refused it."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import tsmodel as ts
from tsmodel.backends.base import Cell, Row

T0_US = 1_426_535_612_045_000


class Celsius:
    """An application's codec that refuses bytes its own way (a bare ValueError)."""

    python_type = float
    name = "celsius"

    def encode(self, value: float) -> bytes:
        return f"{value:.1f}C".encode()

    def decode(self, data: bytes) -> float:
        if not data.endswith(b"C"):
            raise ValueError(f"not a temperature: {data!r}")
        return float(data[:-1])


@ts.model(table="WEATHER_C", family="w")
class Weather:
    station: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    temp: float = ts.value(codec=Celsius())


def test_a_custom_codec_refusal_names_model_table_row_and_column() -> None:
    row = Row(b"ny#1426535612045", (Cell("w", b"temp", T0_US, b"hot"),))
    with pytest.raises(ts.CellDecodingError) as info:
        ts.spec_of(Weather).codec.decode(Weather, row)
    err = info.value
    assert (err.model, err.field, err.table, err.row_key, err.column) == (
        "Weather", "temp", "WEATHER_C", b"ny#1426535612045", "w:temp")
    assert "not a temperature" in str(err) and isinstance(err.__cause__, ValueError)


def test_a_custom_codec_round_trips() -> None:
    event = Weather(station="ny", time=datetime.fromtimestamp(T0_US / 1e6, timezone.utc),
                    temp=21.5)
    row = ts.spec_of(Weather).codec.encode(event)
    cells = tuple(Cell(m.family, m.qualifier, m.timestamp, m.value) for m in row.mutations)
    assert ts.spec_of(Weather).codec.decode(Weather, Row(row.key, cells)) == [event]
