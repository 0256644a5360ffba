"""Tables another program wrote in the reference's key layouts, read through tsmodel.

Issue 11, key-level items: the guide's salted ``BATTERY#1#...`` table under
its own hash (item 1), ``Long.MAX_VALUE - t`` reversed keys (item 2), the
patterns page's ``week1`` bucket labels (item 7), and decimal text with fixed
places (item 9). Each test either lets *another program* write the rows
exactly as the reference prints them and reads them with a tsmodel model, or
saves events with tsmodel and reads the raw rows as another program would,
comparing them with the reference's bytes.

The other program is the official ``google-cloud-bigtable`` data client on
the emulator, and the backend protocol's raw mutations and reads on the
embedded store (which has no other client). Tables are created as another
program would, with families and no GC rule: tsmodel never saw them before.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

import tsmodel as ts
from tests.reference_layouts import (
    BALLOON_T0,
    BATTERY_T0,
    GUIDE_BATTERY_CELLS,
    GUIDE_BATTERY_ROWS,
    GUIDE_METER_CELLS,
    GUIDE_QUOTE_CELLS,
    GUIDE_WEEK_CELLS,
    GUIDE_WEEK_COLUMNS,
    JAVA_METRIC_KEY,
    METER_DAY,
    METRIC_MS,
    QUOTE_T,
    WEEK1,
    Cell,
    at_ms,
    battery_time,
    fixed_quote,
    guide_battery,
    java_metric,
    java_metric_cells,
    meter_day,
    week_cells,
    week_columns,
)
from tsmodel.backends.base import Backend, GcRule, ReadRequest, RowMutation, SetCell, TableSpec
from tsmodel.encoding.timestamps import from_micros, to_micros


class OtherProgram:
    """Writes and reads a table without tsmodel: the official client, or raw protocol calls."""

    def __init__(self, backend: Backend, client: Any = None) -> None:
        self.backend = backend
        self.client = client

    def create(self, table: str, *families: str) -> None:
        self.backend.create_table(TableSpec(table, tuple((f, GcRule()) for f in families)))

    def write(self, table: str, cells: list[Cell]) -> None:
        rows: dict[bytes, list[Cell]] = defaultdict(list)
        for cell in cells:
            rows[cell[0]].append(cell)
        if self.client is None:
            outcomes = self.backend.mutate_rows(table, [
                RowMutation(key, tuple(SetCell(f, q, to_micros(t), v) for _, f, q, t, v in row))
                for key, row in rows.items()])
            assert all(o.ok for o in outcomes)
            return
        from google.cloud.bigtable.data import RowMutationEntry
        from google.cloud.bigtable.data import SetCell as ClientSetCell

        with self.client.get_table(self.backend.instance, table) as handle:  # type: ignore[attr-defined]
            handle.bulk_mutate_rows([
                RowMutationEntry(key, [ClientSetCell(f, q, v, to_micros(t))
                                       for _, f, q, t, v in row])
                for key, row in rows.items()])

    def read(self, table: str) -> set[Cell]:
        """Every cell of every row, all versions."""
        if self.client is None:
            return {(row.key, c.family, c.qualifier, from_micros(c.timestamp), c.value)
                    for row in self.backend.read_rows(ReadRequest(table))
                    for c in row.cells}
        from google.cloud.bigtable.data import ReadRowsQuery

        with self.client.get_table(self.backend.instance, table) as handle:  # type: ignore[attr-defined]
            return {(row.row_key, c.family, c.qualifier, from_micros(c.timestamp_micros), c.value)
                    for row in handle.read_rows(ReadRowsQuery()) for c in row.cells}


@pytest.fixture
def other(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[OtherProgram]:
    host = getattr(backend, "emulator_host", None)
    if host is None:
        yield OtherProgram(backend)
        return
    import warnings

    from google.auth.credentials import AnonymousCredentials
    from google.cloud.bigtable.data import BigtableDataClient

    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", host)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "Connecting to Bigtable emulator"
        client = BigtableDataClient(project=backend.project,  # type: ignore[attr-defined]
                                    credentials=AnonymousCredentials())
    try:
        yield OtherProgram(backend, client)
    finally:
        client.close()


@pytest.fixture
def conn(backend: Backend) -> ts.Connection:
    return ts.Connection(backend)


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# -- item 1: the guide's salted table under its own salt function -----------------------------


def test_the_guides_salted_table_reads_every_event(other: OtherProgram,
                                                   conn: ts.Connection) -> None:
    """Item 1: a CRC-32 model read 3 of the guide's 5 battery events; its own salt
    function reads all 5, in time order."""
    battery = guide_battery(_name("BATTERY"))
    other.create(battery.__tsmodel__.table, "METRIC")
    other.write(battery.__tsmodel__.table, GUIDE_BATTERY_CELLS)
    got = list(battery.range(BATTERY_T0, BATTERY_T0 + timedelta(seconds=1)).using(conn))
    expected = sorted((battery_time(key), user.decode(), int(pct))
                      for key, user, pct in GUIDE_BATTERY_ROWS)
    assert [(e.time, e.user, e.percentage) for e in got] == expected
    newest = battery.range(BATTERY_T0, BATTERY_T0 + timedelta(seconds=1)).using(conn)
    assert [e.percentage for e in newest.newest_first().limit(2)] == [38, 43]


@pytest.mark.parametrize("key, why", [
    (b"BATTERY#0#20150301124501006", "under a salt value the model does not have"),
    (b"BATTERY#7#20150301124501006", "under a salt value the model does not have"),
    (b"BATTERY#12#20150301124501006", "under a salt value the model does not have"),
    (b"BATTERY#01#20150301124501006", "under a salt value the model does not have"),
    (b"BATTERY#x#20150301124501006", "under a salt value the model does not have"),
    (b"BATTERY#2#20150301124501003", "not canonical"),
])
def test_a_row_the_salt_function_would_not_write_refuses_the_read(
        other: OtherProgram, conn: ts.Connection, key: bytes, why: str) -> None:
    battery = guide_battery(_name("BATTERY"))
    other.create(battery.__tsmodel__.table, "METRIC")
    other.write(battery.__tsmodel__.table, GUIDE_BATTERY_CELLS + [
        (key, "METRIC", b"PERCENTAGE", battery_time(key), b"50")])
    with pytest.raises(ts.KeyDecodingError, match=why):
        list(battery.range(BATTERY_T0, BATTERY_T0 + timedelta(seconds=1)).using(conn))


def test_tsmodel_writes_the_guides_salted_rows(other: OtherProgram, conn: ts.Connection) -> None:
    battery = guide_battery(_name("BATTERY"))
    other.create(battery.__tsmodel__.table, "METRIC")
    conn.save_all([battery(time=battery_time(key), user=user.decode(), percentage=int(pct))
                   for key, user, pct in GUIDE_BATTERY_ROWS])
    assert other.read(battery.__tsmodel__.table) == set(GUIDE_BATTERY_CELLS)


# -- item 2: Long.MAX_VALUE - t ----------------------------------------------------------------


def test_java_reversed_keys_read_newest_first(other: OtherProgram, conn: ts.Connection) -> None:
    """Item 2: keys of Long.MAX_VALUE - t could not be declared."""
    metric = java_metric(_name("METRIC"))
    other.create(metric.__tsmodel__.table, "METRIC")
    times = [METRIC_MS + 5_000 * i for i in range(4)]
    other.write(metric.__tsmodel__.table,
                java_metric_cells(b"server1.aaa.bbb.com", times)
                + java_metric_cells(b"server2.aaa.bbb.com", times))
    span = (at_ms(times[1]), at_ms(times[3]))
    got = list(metric.range(*span, hostname="server1.aaa.bbb.com").using(conn))
    assert [(e.time, e.cpu1_usr) for e in got] == [(at_ms(times[2]), 0.04), (at_ms(times[1]), 0.03)]
    latest = metric.using(conn).latest(hostname="server1.aaa.bbb.com")
    assert (latest.time, latest.cpu1_usr) == (at_ms(times[3]), 0.05)


def test_tsmodel_writes_java_reversed_keys(other: OtherProgram, conn: ts.Connection) -> None:
    metric = java_metric(_name("METRIC"))
    other.create(metric.__tsmodel__.table, "METRIC")
    conn.save(metric(hostname="server1.aaa.bbb.com", time=at_ms(METRIC_MS), cpu1_usr=0.02))
    assert other.read(metric.__tsmodel__.table) == {
        (JAVA_METRIC_KEY, "METRIC", b"CPU/CPU1_USR", at_ms(METRIC_MS), b"0.02")}
    assert set(java_metric_cells(b"server1.aaa.bbb.com", [METRIC_MS])) == other.read(
        metric.__tsmodel__.table)


# -- item 7: week1 bucket labels ---------------------------------------------------------------


def _later_weeks(key: bytes, qualifiers: tuple[bytes, ...]) -> list[Cell]:
    """Cells of weeks 9 and 10 (week10 sorts before week9, and before week2)."""
    base = key[:-len(b"week1")]
    return [(base + b"week%d" % n, "measurements", q, WEEK1 + timedelta(weeks=n - 1, hours=1),
             b"%d" % n) for n in (9, 10) for q in qualifiers]


def test_week1_cells_of_another_program_read_in_time_order(other: OtherProgram,
                                                           conn: ts.Connection) -> None:
    """Item 7: week1 labels were refused; with the opt-in, each week of a range is read."""
    model = week_cells(_name("BALLOON"))
    table = model.__tsmodel__.table
    other.create(table, "measurements")
    other.write(table, GUIDE_WEEK_CELLS + _later_weeks(b"asia-south2#3698#week1",
                                                      (b"pressure", b"temp")))
    query = model.range(BALLOON_T0, WEEK1 + timedelta(weeks=10), location="asia-south2",
                        balloon=3698).using(conn)
    got = [(e.time, e.pressure, e.temp) for e in query]
    assert got == [(BALLOON_T0, 94558, 9.5), (BALLOON_T0 + timedelta(minutes=1), 94122, 9.4),
                   (BALLOON_T0 + timedelta(minutes=2), 95992, 9.2),
                   (WEEK1 + timedelta(weeks=8, hours=1), 9, 9.0),
                   (WEEK1 + timedelta(weeks=9, hours=1), 10, 10.0)]
    assert [e.pressure for e in query.newest_first().limit(2)] == [10, 9]
    assert model.using(conn).latest(location="asia-south2", balloon=3698).pressure == 10
    only_week9 = model.range(WEEK1 + timedelta(weeks=8), WEEK1 + timedelta(weeks=9),
                             location="asia-south2", balloon=3698).using(conn)
    assert [e.pressure for e in only_week9] == [9]


def test_tsmodel_writes_the_week1_cells(other: OtherProgram, conn: ts.Connection) -> None:
    model = week_cells(_name("BALLOON"))
    other.create(model.__tsmodel__.table, "measurements")
    conn.save_all([model(location="asia-south2", balloon=3698, time=BALLOON_T0 + i * timedelta(
        minutes=1), pressure=p, temp=t) for i, (p, t) in enumerate(
        ((94558, 9.5), (94122, 9.4), (95992, 9.2)))])
    assert other.read(model.__tsmodel__.table) == set(GUIDE_WEEK_CELLS)


def test_week1_columns_of_another_program_read_in_time_order(other: OtherProgram,
                                                             conn: ts.Connection) -> None:
    model = week_columns(_name("BALLOON"))
    table = model.__tsmodel__.table
    other.create(table, "measurements")
    later = [(k, f, v, t, b"") for k, f, _q, t, v in _later_weeks(
        b"us-west2#3698#pressure#week1", (b"pressure",))]
    other.write(table, GUIDE_WEEK_COLUMNS + later)
    query = model.range(WEEK1, WEEK1 + timedelta(weeks=10), location="us-west2", balloon=3698,
                        metric="pressure").using(conn)
    assert [e.value for e in query] == [94558, 94122, 95992, 9, 10]
    by_prefix = model.range(WEEK1, WEEK1 + timedelta(weeks=10), location="us-west2",
                            balloon=3698).using(conn)
    assert [e.value for e in by_prefix] == [94558, 94122, 95992, 9, 10]


def test_tsmodel_writes_the_week1_columns(other: OtherProgram, conn: ts.Connection) -> None:
    model = week_columns(_name("BALLOON"))
    other.create(model.__tsmodel__.table, "measurements")
    conn.save_all([model(location="us-west2", balloon=3698, metric="pressure",
                         time=BALLOON_T0 + i * timedelta(minutes=1), value=v)
                   for i, v in enumerate((94558, 94122, 95992))])
    assert other.read(model.__tsmodel__.table) == set(GUIDE_WEEK_COLUMNS)


# -- item 9: decimal text with fixed places ----------------------------------------------------


def test_the_guides_quote_reads_with_its_places(other: OtherProgram,
                                                conn: ts.Connection) -> None:
    """Item 9: ts.Text(float) wrote 600.6 where the guide shows 600.60."""
    quote = fixed_quote(_name("QUOTE"))
    other.create(quote.__tsmodel__.table, "MD")
    other.write(quote.__tsmodel__.table, GUIDE_QUOTE_CELLS)
    (got,) = quote.range(QUOTE_T, QUOTE_T + timedelta(milliseconds=1), exchange="NASDAQ",
                         symbol="ZXZZT").using(conn)
    assert (got.bid, got.ask, got.bid_size, got.ask_size) == (600.55, Decimal("600.60"), 500,
                                                              1500)
    assert str(got.ask) == "600.60"


def test_tsmodel_writes_the_guides_quote_cells(other: OtherProgram,
                                               conn: ts.Connection) -> None:
    quote = fixed_quote(_name("QUOTE"))
    other.create(quote.__tsmodel__.table, "MD")
    conn.save(quote(exchange="NASDAQ", symbol="ZXZZT", time=QUOTE_T, bid=600.55,
                    ask=Decimal("600.6"), bid_size=500, ask_size=1500))
    owned = {b"BID", b"ASK", b"BIDSIZE", b"ASKSIZE"}
    assert other.read(quote.__tsmodel__.table) == {c for c in GUIDE_QUOTE_CELLS if c[2] in owned}


def test_the_guides_meter_row_reads_with_its_places(other: OtherProgram,
                                                    conn: ts.Connection) -> None:
    meter = meter_day(_name("SENSOR"))
    other.create(meter.__tsmodel__.table, "METER")
    other.write(meter.__tsmodel__.table, GUIDE_METER_CELLS)
    got = meter.range(METER_DAY, METER_DAY + timedelta(days=1), meter=987654).using(conn)
    assert [(e.time.strftime("%H%M"), e.kwh) for e in got] == [
        ("0000", 12.34), ("0015", 13.45), ("2330", 27.89), ("2345", 28.9)]


def test_tsmodel_writes_the_guides_meter_cells(other: OtherProgram, conn: ts.Connection) -> None:
    meter = meter_day(_name("SENSOR"))
    other.create(meter.__tsmodel__.table, "METER")
    conn.save_all([meter(meter=987654, time=t, kwh=float(v))
                   for _, _, q, t, v in GUIDE_METER_CELLS if q != b"ID"])
    assert other.read(meter.__tsmodel__.table) == {c for c in GUIDE_METER_CELLS if c[2] != b"ID"}


def test_a_value_with_more_places_writes_nothing(other: OtherProgram,
                                                 conn: ts.Connection) -> None:
    meter = meter_day(_name("SENSOR"))
    other.create(meter.__tsmodel__.table, "METER")
    events = [meter(meter=987654, time=METER_DAY, kwh=12.34),
              meter(meter=987654, time=METER_DAY + timedelta(minutes=15), kwh=13.456)]
    with pytest.raises(ts.ValidationError) as info:
        conn.save_all(events)
    assert (info.value.model, info.value.field, info.value.value) == ("MeterDay", "kwh", 13.456)
    assert other.read(meter.__tsmodel__.table) == set()


def test_a_cell_without_its_places_is_refused(other: OtherProgram, conn: ts.Connection) -> None:
    meter = meter_day(_name("SENSOR"))
    other.create(meter.__tsmodel__.table, "METER")
    other.write(meter.__tsmodel__.table, [
        (b"0000987654#20170726", "METER", b"2345", METER_DAY + timedelta(hours=23, minutes=45),
         b"8.9")])
    with pytest.raises(ts.CellDecodingError, match="exactly 2 places") as info:
        list(meter.range(METER_DAY, METER_DAY + timedelta(days=1), meter=987654).using(conn))
    assert info.value.column == "METER:2345" and info.value.row_key == b"0000987654#20170726"

