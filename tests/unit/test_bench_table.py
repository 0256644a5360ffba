"""The benchmarks' report (benchmarks/_common.py, _bigtable.py): the table with a
group of columns per round-trip time, and latencies in round trips.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _bigtable import round_trips  # noqa: E402
from _common import Result, rtt_rows, table  # noqa: E402


def _result(key: str, rtt: float | None, ours: float, theirs: float, met: bool | None,
            what: str = "") -> Result:
    return Result(key, what or f"figure {key}", "rows/s", ours, theirs, ours / theirs,
                  ">= 5x", met, 3, rtt=rtt)


def test_a_row_per_figure_and_columns_per_rtt() -> None:
    results = [_result("b", 0.0, 300, 100, False), _result("a", 0.0, 600, 100, True),
               _result("b", 10.0, 200, 100, False), _result("f2", 10.0, 2.5, 2.5, None),
               _result("a", 10.0, 500, 100, True)]
    header, rows = rtt_rows(results)
    assert header == ["", "measurement", "target",
                      "0 ms tsmodel", "0 ms baseline", "0 ms ratio", "0 ms met",
                      "10 ms tsmodel", "10 ms baseline", "10 ms ratio", "10 ms met"]
    assert rows == [
        ["a", "figure a", ">= 5x", "600 rows/s", "100 rows/s", "6.00x", "yes",
         "500 rows/s", "100 rows/s", "5.00x", "yes"],
        ["b", "figure b", ">= 5x", "300 rows/s", "100 rows/s", "3.00x", "NO",
         "200 rows/s", "100 rows/s", "2.00x", "NO"],
        ["f2", "figure f2", ">= 5x", "", "", "", "", "2.5 rows/s", "2.5 rows/s", "1.00x", "-"],
    ]


def test_figures_without_the_proxy_go_in_the_0_ms_columns() -> None:
    results = [_result("a", 0.0, 600, 100, True), _result("a", 10.0, 500, 100, True),
               _result("c1", None, 584, 950, None)]
    header, rows = rtt_rows(results)
    assert len(header) == 3 + 2 * 4
    assert rows[1] == ["c1", "figure c1", ">= 5x", "584 rows/s", "950 rows/s", "0.61x", "-",
                       "", "", "", ""]


def test_without_0_ms_they_get_columns_of_their_own() -> None:
    results = [_result("a", 10.0, 500, 100, True), _result("e", None, 1, 1, True)]
    header, rows = rtt_rows(results)
    assert header[3:] == ["no proxy tsmodel", "no proxy baseline", "no proxy ratio",
                          "no proxy met", "10 ms tsmodel", "10 ms baseline", "10 ms ratio",
                          "10 ms met"]
    assert rows == [["a", "figure a", ">= 5x", "", "", "", "",
                     "500 rows/s", "100 rows/s", "5.00x", "yes"],
                    ["e", "figure e", ">= 5x", "1 rows/s", "1 rows/s", "1.00x", "yes",
                     "", "", "", ""]]


def test_the_markdown_table_has_the_rtt_columns() -> None:
    text = table([_result("a", 0.0, 600, 100, True), _result("a", 10.0, 500, 100, True)],
                 markdown=True)
    lines = text.splitlines()
    assert lines[0] == ("|  | measurement | target | 0 ms tsmodel | 0 ms baseline | 0 ms ratio"
                        " | 0 ms met | 10 ms tsmodel | 10 ms baseline | 10 ms ratio"
                        " | 10 ms met |")
    assert lines[2] == ("| a | figure a | >= 5x | 600 rows/s | 100 rows/s | 6.00x | yes"
                        " | 500 rows/s | 100 rows/s | 5.00x | yes |")


def test_without_rtt_the_table_is_one_row_per_result() -> None:
    text = table([_result("a", None, 600, 100, True)], markdown=True)
    assert text.splitlines() == ["|  | measurement | tsmodel | baseline | ratio | target | met |",
                                 "|---|---|---|---|---|---|---|",
                                 "| a | figure a | 600 rows/s | 100 rows/s | 6.00x | >= 5x | yes |"]


def test_a_result_label_names_its_rtt() -> None:
    assert _result("a", 10.0, 1, 1, None).label == "a@10ms"
    assert _result("a", 0.5, 1, 1, None).label == "a@0.5ms"
    assert _result("c1", None, 1, 1, None).label == "c1"


def test_round_trips() -> None:
    assert round_trips(10.8, 10.0) == pytest.approx(1.08)
    assert round_trips(45.0, 20.0) == pytest.approx(2.25)
    with pytest.raises(ValueError):
        round_trips(1.0, 0.0)
