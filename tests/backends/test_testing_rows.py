"""``tsmodel.testing.assert_rows`` and ``table_rows`` on every backend.

Uses the plugin's ``tsmodel_connection`` (a fresh store per test). The
expected rows and failure messages are written out by hand.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

import tsmodel as ts
from tsmodel.backends.base import GcRule, RowMutation, SetCell, TableSpec
from tsmodel.testing import assert_rows, table_rows

T1, T2 = 1_000_000, 2_000_000  # microseconds: 1 s and 2 s after the epoch


@pytest.fixture
def conn(tsmodel_connection: ts.Connection) -> ts.Connection:
    backend = tsmodel_connection.backend
    backend.create_table(TableSpec("T", (("F", GcRule()), ("G", GcRule()))))
    outcomes = backend.mutate_rows("T", [
        RowMutation(b"a", (SetCell("F", b"x", T1, b"1"), SetCell("F", b"x", T2, b"2"),
                           SetCell("G", b"y", T1, b"y"))),
        RowMutation(b"b", (SetCell("F", b"x", T1, b"b"),)),
        RowMutation(b"c\xff", (SetCell("F", b"\xff", T1, b"z"),)),
    ])
    assert all(outcome.ok for outcome in outcomes)
    return tsmodel_connection


def test_table_rows_are_the_stored_cells(conn: ts.Connection) -> None:
    assert table_rows(conn, "T") == {
        b"a": {"F:x": [(T2, b"2"), (T1, b"1")], "G:y": [(T1, b"y")]},
        b"b": {"F:x": [(T1, b"b")]},
        b"c\xff": {"F:\\xff": [(T1, b"z")]},
    }
    assert table_rows(conn.backend, "T", prefix="c") == {b"c\xff": {"F:\\xff": [(T1, b"z")]}}


def test_the_expected_rows_pass(conn: ts.Connection) -> None:
    assert_rows(conn, "T", {
        "a": {"F:x": "2",  # the newest version only
              "G:y": [(datetime.fromtimestamp(1, timezone.utc), b"y")]},
        b"b": {"F:x": [(T1, "b")]},
        b"c\xff": {"F:\\xff": b"z"},
    })
    assert_rows(conn.backend, "T", {"a": {"F:x": [(T2, b"2"), (T1, b"1")], "G:y": "y"}},
                prefix=b"a")


def test_a_difference_is_shown_cell_by_cell(conn: ts.Connection) -> None:
    with pytest.raises(AssertionError) as failure:
        assert_rows(conn, "T", {
            "a": {"F:x": "1"},
            "c\xff": {"F:\\xff": "z"},  # the str's UTF-8 bytes: another row key
            b"c\xff": {"F:\\xff": [(T2, b"z")]},
        })
    assert str(failure.value) == "\n".join([
        "rows of table 'T' differ from the expected ones (0 as expected; "
        "- expected, + stored):",
        "  row b'a':",
        "      F:x (newest version):",
        "        - b'1'",
        "        + b'2'",
        "    + G:y = [@1000000: b'y']",
        "+ row b'b': not expected",
        "    + F:x = [@1000000: b'b']",
        "- row b'c\\xc3\\xbf': missing",
        "    - F:\\xff = b'z'",
        "  row b'c\\xff':",
        "      F:\\xff:",
        "        - [@2000000: b'z']",
        "        + [@1000000: b'z']",
    ])


def test_a_missing_cell_is_shown_within_the_prefix(conn: ts.Connection) -> None:
    with pytest.raises(AssertionError) as failure:
        assert_rows(conn, "T", {"b": {"F:x": "b", "F:w": "w"}}, prefix="b")
    assert str(failure.value) == "\n".join([
        "rows of table 'T' with prefix 'b' differ from the expected ones (0 as expected; "
        "- expected, + stored):",
        "  row b'b':",
        "    - F:w = b'w'",
    ])


def test_after_gc_leaves_out_what_the_rules_collect(tsmodel_connection: ts.Connection) -> None:
    """Two stores written alike may differ until GC runs, which it may do at any
    moment: ``after_gc=True`` reads them as they are once it has run."""
    backend = tsmodel_connection.backend
    two = GcRule(max_versions=2)
    young = GcRule(max_age=timedelta(days=1))
    backend.create_table(TableSpec("GC", (("K", two), ("Y", young), ("N", GcRule()))))
    now = int(time.time()) * 1_000_000
    outcomes = backend.mutate_rows("GC", [
        RowMutation(b"a", (SetCell("K", b"x", T1, b"1"), SetCell("K", b"x", T2, b"2"),
                           SetCell("K", b"x", T2 + 1000, b"3"), SetCell("K", b"y", T1, b"y"),
                           SetCell("N", b"n", T1, b"n1"), SetCell("N", b"n", T2, b"n2"))),
        RowMutation(b"b", (SetCell("Y", b"old", T1, b"o"), SetCell("Y", b"new", now, b"w"))),
        RowMutation(b"c", (SetCell("Y", b"old", T1, b"gone"),)),  # every cell collected
    ])
    assert all(outcome.ok for outcome in outcomes)
    # Written out by hand from the rules: K keeps each column's two newest,
    # Y the cells of the last day, N everything; a row with no cell left is gone.
    assert table_rows(backend, "GC", after_gc=True) == {
        b"a": {"K:x": [(T2 + 1000, b"3"), (T2, b"2")], "K:y": [(T1, b"y")],
               "N:n": [(T2, b"n2"), (T1, b"n1")]},
        b"b": {"Y:new": [(now, b"w")]},
    }
    assert_rows(backend, "GC", {"b": {"Y:new": "w"}}, prefix="b", after_gc=True)
    if hasattr(backend, "collect_garbage"):  # GC runs when asked: not run yet
        with pytest.raises(AssertionError, match="Y:old"):
            assert_rows(backend, "GC", {"b": {"Y:new": "w"}}, prefix="b")
