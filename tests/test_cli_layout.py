"""``tsmodel layout``: the rows sample events make, drawn as row keys × columns.

The oracle is the guide: its weather balloons' row keys, qualifiers and
values (time-series-patterns), and the energy meters' quarter-hour columns
(time-series-schema-guide), written out here by hand from the sample
events, never taken from what tsmodel returns.
"""

from __future__ import annotations

import importlib.util
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli import fails, ok
from tsmodel.cli._grid import render
from tsmodel.cli._targets import one_model
from tsmodel.cli.layout import SampleCell, TableSample, sample_events, sample_tables

ROOT = Path(__file__).resolve().parents[1]
UTC = timezone.utc
T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)
REPORTS = [(94558, 9.6, 61, 612), (94122, 9.7, 62, 611), (95992, 9.5, 58, 602)]


def _model(target: str) -> Any:
    return one_model(str(ROOT / "examples" / target))


def _us(when: datetime) -> int:
    return int(when.timestamp()) * 1_000_000


def _balloons(model: Any) -> list[Any]:
    return [model(location="us-west2", balloon=3698, time=T0 + timedelta(minutes=i),
                  pressure=p, temperature=t, humidity=h, altitude=a)
            for i, (p, t, h, a) in enumerate(REPORTS)]


def _cells(table: TableSample) -> dict[tuple[bytes, str], list[tuple[int, str]]]:
    return {(key, column): [(c.timestamp, c.text) for c in cells]
            for key, columns in table.rows for column, cells in columns.items()}


def test_a_row_per_event_has_a_column_per_field() -> None:
    model = _model("weather_balloons.py:BalloonRow")
    (main,) = sample_tables(model, _balloons(model))
    assert (main.table, main.role) == ("BALLOON_ROWS", "main")
    assert main.columns == ("measurements:altitude", "measurements:humidity",
                            "measurements:pressure", "measurements:temp")
    expected = {}
    for i, (p, t, h, a) in enumerate(REPORTS):
        key = f"us-west2#3698#2021-03-05-120{i}".encode()
        at = _us(T0 + timedelta(minutes=i))
        for column, value in (("altitude", a), ("humidity", h), ("pressure", p), ("temp", t)):
            expected[(key, f"measurements:{column}")] = [(at, str(value))]
    assert _cells(main) == expected


def test_a_bucket_row_of_new_cells_stacks_versions_newest_first() -> None:
    model = _model("weather_balloons.py:BalloonWeek")
    (main,) = sample_tables(model, _balloons(model))
    assert [key for key, _ in main.rows] == [b"us-west2#3698#2021-W09"]
    got = _cells(main)
    newest_first = list(reversed(range(len(REPORTS))))
    assert got[(b"us-west2#3698#2021-W09", "measurements:pressure")] == [
        (_us(T0 + timedelta(minutes=i)), str(REPORTS[i][0])) for i in newest_first]


def test_new_columns_hold_the_reading_in_the_qualifier() -> None:
    model = _model("weather_balloons.py:BalloonMetric")
    events = [model(location="us-west2", balloon=3698, metric="pressure",
                    time=T0 + timedelta(minutes=i), value=r[0]) for i, r in enumerate(REPORTS)]
    (main,) = sample_tables(model, events)
    key = b"us-west2#3698#pressure#2021-W09"
    assert _cells(main) == {(key, f"m:{r[0]}"): [(_us(T0 + timedelta(minutes=i)), '""')]
                            for i, r in enumerate(REPORTS)}


def test_a_serialized_cell_shows_its_fields() -> None:
    model = _model("weather_balloons.py:BalloonBlob")
    (main,) = sample_tables(model, _balloons(model))
    assert main.columns == ("measurements:measurements_blob",)
    first = _cells(main)[(b"us-west2#3698#2021-03-05-1200", "measurements:measurements_blob")]
    assert first == [(_us(T0), "{pressure: 94558, temperature: 9.6, humidity: 61, altitude: 612}")]


def test_offsets_current_value_and_snapshot_tables() -> None:
    model = _model("energy_meters.py:MeterReading")
    day = datetime(2017, 7, 26, tzinfo=UTC)
    kwh = [12.34, 11.9, 13.05]
    events = [model(meter=987654, time=day + timedelta(minutes=15 * i), kwh=k)
              for i, k in enumerate(kwh)]
    tables = sample_tables(model, events)
    assert [(t.table, t.role) for t in tables] == [
        ("SENSOR", "main"), ("CURRENT_SENSOR", "current-value"), ("SENSOR_20170726", "snapshot")]
    main, current, snapshot = tables
    offsets = {(b"0000987654#20170726", f"METER:00{m:02d}"): [(_us(day) + m * 60_000_000, str(k))]
               for m, k in zip((0, 15, 30), kwh, strict=True)}
    assert _cells(main) == offsets
    assert _cells(snapshot) == offsets
    assert _cells(current) == {(b"0000987654", "METER:kwh"): [(_us(day) + 30 * 60_000_000,
                                                                "13.05")]}


def test_alternate_key_tables_and_made_up_events() -> None:
    model = _model("game_scores.py:GameScore")
    events = sample_events(model, events=2, entities=2, fields={"game": "LoL"})
    # A day apart at midnight: the model's timestamp is a day (format %Y%m%d).
    assert [e.time for e in events] == [datetime(2021, 3, 5, tzinfo=UTC),
                                        datetime(2021, 3, 6, tzinfo=UTC)] * 2
    assert {e.game for e in events} == {"LoL"} and len({e.player for e in events}) == 2
    tables = sample_tables(model, events)
    assert [(t.table, t.role) for t in tables] == [
        ("GAME", "main"), ("GAME_BY_DAY", "alternate-key"), ("CURRENT_GAME", "current-value")]
    players = sorted({e.player for e in events})
    assert [k for k, _ in tables[1].rows] == [f"LoL#{d}#{p}".encode() for d in
                                              ("20210305", "20210306") for p in players]
    assert [k for k, _ in tables[2].rows] == [f"LoL#{p}".encode() for p in players]


# -- drawing ----------------------------------------------------------------------------


def _wide() -> TableSample:
    cells = {f"f:q{i}": (SampleCell(_us(T0), f"value-{i}" * 2),) for i in range(12)}
    return TableSample("T", "main", "a row per event", tuple(sorted(cells)),
                       ((b"k#1", cells), (b"k#2", cells)))


@pytest.mark.parametrize("width", [40, 80, 400])
def test_text_fits_the_width_with_the_row_keys_in_every_grid(width: int) -> None:
    text = render([_wide()], "text", width=width)
    grids = [line for line in text.splitlines() if line.startswith("| row key")]
    assert all(len(line) <= width for line in text.splitlines()[2:])
    assert sum(line.count("| f:q") for line in grids) == 12  # every column, once
    assert (len(grids) == 1) == (width == 400)  # 12 columns of ~26 fit in 400 only


def test_markdown_and_html_show_every_cell() -> None:
    table = _wide()
    md = render([table], "markdown")
    rows = [line for line in md.splitlines() if line.startswith("| k#")]
    assert len(rows) == 2 and all(line.count("value-") == 24 for line in rows)
    page = render([table], "html")
    assert page.count("<tr>") == 3 and page.count('<td class="key">') == 2
    assert page.count("<td>") == 24


def test_the_command_draws_a_module_model_by_model() -> None:
    out = ok("layout", "examples/weather_balloons.py", "--events", "2", "--width", "120")
    assert re.findall(r"^== (\w+) ==$", out, re.M) == [
        "BalloonRow", "BalloonBlob", "BalloonWeek", "BalloonMetric"]
    assert "location1#3698#2021-W09" in out


def test_the_command_refuses_no_events() -> None:
    err = fails("layout", "examples/server_metrics.py:ServerMetric", "--events", "0")
    assert "--events and --entities must be at least 1" in err


def test_the_pictures_of_the_patterns_page_are_up_to_date() -> None:
    spec = importlib.util.spec_from_file_location("draw_layouts", ROOT / "docs" / "draw_layouts.py")
    assert spec is not None and spec.loader is not None
    draw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(draw)
    text = draw.PAGE.read_text(encoding="utf-8")
    assert text.count("<!-- tsmodel layout: ") == len(draw.pictures(text)) == 5
    assert draw.redrawn(text) == text, "run: python docs/draw_layouts.py"


def test_each_picture_shows_the_table_and_columns_of_the_code_above_it() -> None:
    # Read independently of the drawing script: the model class and the table
    # the nearest python block above a picture declares, and its caption.
    text = (ROOT / "docs" / "patterns.md").read_text(encoding="utf-8")
    parts = text.split("<!-- tsmodel layout: ")[1:]
    before = text.split("<!-- tsmodel layout: ")[:-1]
    assert len(parts) == 5
    for above, picture in zip(before, parts, strict=True):
        code = above.rsplit("```python\n", 1)[1].split("```", 1)[0]
        table = re.search(r'table="(\w+)"', code)
        model = re.search(r"^class (\w+)", code, re.M)
        assert table and model, code
        assert picture.startswith(f"{model[1]}: "), picture[:80]
        drawn = picture.split("<!-- end tsmodel layout -->", 1)[0]
        assert f"<caption><strong>{table[1]} (main table)" in drawn
        one_column_per_field = not re.search(r"serialization=|ts\.offsets|ts\.columns", code)
        fields = re.findall(r"^    (\w+): \w+ = ts\.value\(\)", code, re.M)
        for field in fields if one_column_per_field else ():
            # a value column's qualifier is the field's name
            assert f"<br>{field}</th>" in drawn, (table[1], field)
