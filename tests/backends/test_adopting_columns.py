"""Tables tsmodel did not create: the column-level layouts of the reference.

Issue 11, items 3, 4, 5, 6 and 8. Each test writes rows in the reference's
exact layout as another program would (on the emulator with the official
``google-cloud-bigtable`` client, on the embedded store with raw mutations
through the backend protocol) and reads them through tsmodel models; or the
other way round: tsmodel writes, and a raw read shows the guide's bytes. The
guide's worked-example rows are the test vectors.
"""

from __future__ import annotations

import os
import time
import uuid
import warnings
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tsmodel.backends.base import Backend, ReadFilter, ReadRequest, RowMutation, SetCell

UTC = timezone.utc
#: The guide's quote time, 1426535612156 ms: 2015-03-16T19:53:32.156Z.
QUOTE_TIME = datetime.fromtimestamp(1426535612.156, UTC)
#: One foreign cell: (family, qualifier, value, timestamp in µs or None for the
#: writer's clock, as the official client stamps a cell by default).
ForeignCell = tuple[str, bytes, bytes, int | None]


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def conn(backend: Backend) -> ts.Connection:
    return ts.Connection(backend)


def is_emulator(backend: Backend) -> bool:
    return getattr(backend, "emulator_host", None) is not None


def now_ms_us() -> int:
    """The writer's clock in µs, floored to the millisecond (as the official client does)."""
    now = time.time_ns() // 1_000
    return now - now % 1_000


def foreign_write(backend: Backend, table: str,
                  rows: Sequence[tuple[bytes, Sequence[ForeignCell]]]) -> None:
    """Write ``rows`` as another program would.

    On the emulator: the official data client (``google.cloud.bigtable.data``), its
    ``SetCell`` stamping a cell without a timestamp with the client's clock. On the
    embedded store: raw mutations through the backend protocol, stamped likewise.
    """
    if not is_emulator(backend):
        outcomes = backend.mutate_rows(table, [
            RowMutation(key, tuple(SetCell(f, q, now_ms_us() if t is None else t, v)
                                   for f, q, v, t in cells))
            for key, cells in rows])
        assert all(o.error is None for o in outcomes), outcomes
        return
    from google.cloud.bigtable import data

    with _official_client(backend) as client:
        target = client.get_table(backend.instance, table)  # type: ignore[attr-defined]
        target.bulk_mutate_rows([
            data.RowMutationEntry(key, [data.SetCell(f, q, v, t) for f, q, v, t in cells])
            for key, cells in rows])


def foreign_read(backend: Backend, table: str) -> dict[bytes, list[tuple[str, bytes, bytes]]]:
    """Every cell of every row, newest version of each column, as another reader sees
    it: ``{row key: [(family, qualifier, value), ...]}`` in Bigtable's cell order."""
    if not is_emulator(backend):
        rows = backend.read_rows(ReadRequest(table, filter=ReadFilter(cells_per_column=1)))
        return {r.key: [(c.family, c.qualifier, c.value) for c in r.cells] for r in rows}
    from google.cloud.bigtable import data

    with _official_client(backend) as client:
        target = client.get_table(backend.instance, table)  # type: ignore[attr-defined]
        newest = data.row_filters.CellsColumnLimitFilter(1)
        found = target.read_rows(data.ReadRowsQuery(row_filter=newest))
        return {r.row_key: [(c.family, c.qualifier, c.value) for c in r.cells] for r in found}


def foreign_versions(backend: Backend, table: str, key: bytes) -> list[tuple[bytes, int, bytes]]:
    """Every version of every cell of one row: ``(qualifier, timestamp µs, value)``."""
    if not is_emulator(backend):
        from tsmodel.backends.base import RowSet

        (row,) = backend.read_rows(ReadRequest(table, RowSet(keys=(key,))))
        return [(c.qualifier, c.timestamp, c.value) for c in row.cells]
    with _official_client(backend) as client:
        target = client.get_table(backend.instance, table)  # type: ignore[attr-defined]
        row = target.read_row(key)
        return [(c.qualifier, c.timestamp_micros, c.value) for c in row.cells]


class _official_client:
    """The official data client on the emulator (it reads the host from the environment)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def __enter__(self) -> Any:
        from google.cloud.bigtable import data

        previous = os.environ.get("BIGTABLE_EMULATOR_HOST")
        os.environ["BIGTABLE_EMULATOR_HOST"] = self.backend.emulator_host  # type: ignore[attr-defined]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                self.client = data.BigtableDataClient(
                    project=self.backend.project)  # type: ignore[attr-defined]
        finally:
            if previous is None:
                os.environ.pop("BIGTABLE_EMULATOR_HOST", None)
            else:
                os.environ["BIGTABLE_EMULATOR_HOST"] = previous
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.close()



def us_of(dt: datetime) -> int:
    return int(dt.timestamp() * 1_000_000)


# -- 3: key fields also stored as columns -------------------------------------------------

#: The guide's QUOTE row: key, then its columns in Bigtable's order (by qualifier).
QUOTE_KEY = b"NASDAQ#ZXZZT#1426535612156"
QUOTE_COLUMNS = [("MD", b"ASK", b"600.60"), ("MD", b"ASKSIZE", b"1500"),
                 ("MD", b"BID", b"600.55"), ("MD", b"BIDSIZE", b"500"),
                 ("MD", b"EXCHANGE", b"NASDAQ"), ("MD", b"QUOTETIME", b"1426535612156"),
                 ("MD", b"SYMBOL", b"ZXZZT")]
#: The guide's TRADE row.
TRADE_KEY = b"NASDAQ#ZXZZT#1426535612045"
TRADE_COLUMNS = [("MD", b"EXCHANGE", b"NASDAQ"), ("MD", b"LASTSALE", b"600.58"),
                 ("MD", b"LASTSIZE", b"300"), ("MD", b"SYMBOL", b"ZXZZT"),
                 ("MD", b"TRADETIME", b"1426535612045"), ("MD", b"VOLUME", b"89000")]


def quote_model(table: str) -> Any:
    @ts.model(table=table, family="MD")
    class Quote:
        exchange: str = ts.key(width=6, column="EXCHANGE")
        symbol: str = ts.key(width=5, column="SYMBOL")
        time: datetime = ts.timestamp(unit="ms", column="QUOTETIME")
        bid: float = ts.value("BID", codec=ts.Text(float, places=2))
        ask: float = ts.value("ASK", codec=ts.Text(float, places=2))
        bid_size: int = ts.value("BIDSIZE", codec=ts.Text(int))
        ask_size: int = ts.value("ASKSIZE", codec=ts.Text(int))

    return Quote


def trade_model(table: str) -> Any:
    @ts.model(table=table, family="MD")
    class Trade:
        exchange: str = ts.key(width=6, column="EXCHANGE")
        symbol: str = ts.key(width=5, column="SYMBOL")
        time: datetime = ts.timestamp(unit="ms", column="TRADETIME")
        last_sale: float = ts.value("LASTSALE", codec=ts.Text(float, places=2))
        last_size: int = ts.value("LASTSIZE", codec=ts.Text(int))
        volume: int = ts.value("VOLUME", codec=ts.Text(int))

    return Trade


def test_guide_quote_and_trade_rows_read_with_their_key_columns(conn: ts.Connection) -> None:
    """Item 3: MD:SYMBOL, MD:EXCHANGE, MD:QUOTETIME could only be hand-kept value fields."""
    quotes, trades = _name("QUOTE"), _name("TRADE")
    Quote, Trade = quote_model(quotes), trade_model(trades)
    conn.create_tables(Quote, Trade)
    foreign_write(conn.backend, quotes, [(QUOTE_KEY, [(f, q, v, us_of(QUOTE_TIME))
                                                      for f, q, v in QUOTE_COLUMNS])])
    trade_time = datetime.fromtimestamp(1426535612.045, UTC)
    foreign_write(conn.backend, trades, [(TRADE_KEY, [(f, q, v, us_of(trade_time))
                                                      for f, q, v in TRADE_COLUMNS])])
    (quote,) = Quote.range(QUOTE_TIME, QUOTE_TIME + timedelta(seconds=1), exchange="NASDAQ",
                           symbol="ZXZZT").using(conn)
    assert quote == Quote(exchange="NASDAQ", symbol="ZXZZT", time=QUOTE_TIME, bid=600.55,
                          ask=600.6, bid_size=500, ask_size=1500)
    trade = Trade.using(conn).latest(exchange="NASDAQ", symbol="ZXZZT")
    assert (trade.time, trade.last_sale, trade.volume) == (trade_time, 600.58, 89000)


def test_tsmodel_writes_the_guide_quote_and_trade_rows(conn: ts.Connection) -> None:
    """Item 3, the reverse: the key columns are written from the key, byte for byte."""
    quotes, trades = _name("QUOTE"), _name("TRADE")
    Quote, Trade = quote_model(quotes), trade_model(trades)
    conn.create_tables(Quote, Trade)
    conn.save(Quote(exchange="NASDAQ", symbol="ZXZZT", time=QUOTE_TIME, bid=600.55, ask=600.60,
                    bid_size=500, ask_size=1500))
    conn.save(Trade(exchange="NASDAQ", symbol="ZXZZT",
                    time=datetime.fromtimestamp(1426535612.045, UTC), last_sale=600.58,
                    last_size=300, volume=89000))
    assert foreign_read(conn.backend, quotes) == {QUOTE_KEY: QUOTE_COLUMNS}
    assert foreign_read(conn.backend, trades) == {TRADE_KEY: TRADE_COLUMNS}


def test_a_key_column_that_disagrees_with_the_key_is_refused(conn: ts.Connection) -> None:
    """Item 3: a copy that is not the key is named, never returned as if it were."""
    quotes = _name("QUOTE")
    Quote = quote_model(quotes)
    conn.create_tables(Quote)
    damaged = [(f, q, b"ZXZZQ" if q == b"SYMBOL" else v, us_of(QUOTE_TIME))
               for f, q, v in QUOTE_COLUMNS]
    foreign_write(conn.backend, quotes, [(QUOTE_KEY, damaged)])
    with pytest.raises(ts.CellDecodingError) as info:
        Quote.using(conn).latest(exchange="NASDAQ", symbol="ZXZZT")
    err = info.value
    assert (err.model, err.field, err.table, err.row_key, err.column, err.data) == (
        "Quote", "symbol", quotes, QUOTE_KEY, "MD:SYMBOL", b"ZXZZQ")
    assert "'ZXZZQ' but the row key 'ZXZZT'" in str(err)
    late = [(f, q, b"1426535612157" if q == b"QUOTETIME" else v, us_of(QUOTE_TIME))
            for f, q, v in QUOTE_COLUMNS]
    foreign_write(conn.backend, quotes, [(QUOTE_KEY, late)])
    with pytest.raises(ts.CellDecodingError, match="MD:QUOTETIME"):
        list(Quote.range(QUOTE_TIME, QUOTE_TIME + timedelta(seconds=1), exchange="NASDAQ",
                         symbol="ZXZZT").using(conn))


def test_server_metrics_hostname_column_in_main_and_current_rows(conn: ts.Connection) -> None:
    """Item 3: METRIC:HOSTNAME beside the metrics, in METRIC and CURRENT_METRIC."""
    metric, current = _name("METRIC"), _name("CURRENT_METRIC")

    @ts.model(table=metric, family="METRIC", current=current)
    class ServerMetric:
        hostname: str = ts.key(column="HOSTNAME")
        time: datetime = ts.timestamp(unit="ms")
        cpu1_usr: float = ts.value("CPU/CPU1_USR", codec=ts.Text(float, places=2))
        blk_read: int = ts.value("IO/BLK_READ", codec=ts.Text(int))

    conn.create_tables(ServerMetric)
    t0 = datetime.fromtimestamp(1426535612.045, UTC)
    conn.save(ServerMetric(hostname="server1.bbb.com", time=t0, cpu1_usr=0.02,
                           blk_read=253453634))
    columns = [("METRIC", b"CPU/CPU1_USR", b"0.02"), ("METRIC", b"HOSTNAME", b"server1.bbb.com"),
               ("METRIC", b"IO/BLK_READ", b"253453634")]
    assert foreign_read(conn.backend, metric) == {b"server1.bbb.com#1426535612045": columns}
    assert foreign_read(conn.backend, current) == {b"server1.bbb.com": columns}
    foreign_write(conn.backend, current, [(b"server1.bbb.com", [
        ("METRIC", b"HOSTNAME", b"server2.bbb.com", us_of(t0))])])
    with pytest.raises(ts.CellDecodingError, match="METRIC:HOSTNAME"):
        ServerMetric.using(conn).latest(hostname="server1.bbb.com")


# -- 8: cells that carry the write time instead of the event time ------------------------


def metric_model(table: str, *, event_time_cells: bool = True) -> Any:
    @ts.model(table=table, family="METRIC", event_time_cells=event_time_cells)
    class ServerMetric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu1_usr: float = ts.value("CPU/CPU1_USR", codec=ts.Text(float))
        blk_read: int = ts.value("IO/BLK_READ", codec=ts.Text(int))

    return ServerMetric


def write_time_metrics(backend: Backend, table: str, count: int = 24) -> list[datetime]:
    """``count`` METRIC rows of the guide (``server1.bbb.com#1426535612045``...), five
    seconds apart, written by another program that stamps cells with its clock."""
    t0 = datetime.fromtimestamp(1426535612.045, UTC)
    times = [t0 + timedelta(seconds=5 * i) for i in range(count)]
    foreign_write(backend, table, [
        (f"server1.bbb.com#{int(t.timestamp() * 1000)}".encode(),
         [("METRIC", b"CPU/CPU1_USR", b"0.02", None),
          ("METRIC", b"IO/BLK_READ", str(253453634 + i).encode(), None)])
        for i, t in enumerate(times)])
    return times


def test_write_time_cells_are_read_exactly_when_declared(conn: ts.Connection) -> None:
    """Item 8: range() found 0 of 24 rows whose cells carry the write time."""
    table = _name("METRIC")
    conn.create_tables(metric_model(table))
    times = write_time_metrics(conn.backend, table)
    Metric = metric_model(table, event_time_cells=False)
    got = list(Metric.range(times[0], times[-1] + timedelta(seconds=1),
                            hostname="server1.bbb.com").using(conn))
    assert [m.time for m in got] == times
    assert [m.blk_read for m in got] == [253453634 + i for i in range(24)]
    middle = Metric.range(times[3], times[7], hostname="server1.bbb.com").using(conn)
    assert [m.time for m in middle] == times[3:7]
    assert [m.time for m in middle.newest_first().limit(2)] == [times[6], times[5]]
    latest = Metric.using(conn).latest(hostname="server1.bbb.com")
    assert latest.time == times[-1]
    plan = middle.explain()
    assert plan.requests[0].filter.timestamp_start is None
    assert "cell timestamps are not event times" in plan.reason


def test_write_time_cells_refused_loudly_by_a_default_model(conn: ts.Connection) -> None:
    """Item 8: latest() returned a row range() could not see; now the mismatch is named."""
    table = _name("METRIC")
    Metric = metric_model(table)
    conn.create_tables(Metric)
    write_time_metrics(conn.backend, table, count=3)
    with pytest.raises(ts.CellDecodingError, match="event_time_cells=False") as info:
        Metric.using(conn).latest(hostname="server1.bbb.com")
    assert info.value.model == "ServerMetric" and info.value.table == table
    assert info.value.row_key == b"server1.bbb.com#1426535622045"
    # A range selected by the row key sends no cell timestamp filter: it sees the
    # rows and refuses them (it answered 0 events, silently).
    hour = datetime(2015, 3, 16, 19, 53, tzinfo=timezone.utc)
    qs = Metric.range(hour, hour + timedelta(hours=1), hostname="server1.bbb.com").using(conn)
    with pytest.raises(ts.CellDecodingError, match="event_time_cells=False"):
        qs.first()
    # count() agrees with iteration (issue 26, item 8d): it refuses the same rows,
    # where it used to count them without the check.
    with pytest.raises(ts.CellDecodingError, match="event_time_cells=False"):
        qs.count()


def test_tsmodel_writes_event_time_cells_under_either_declaration(conn: ts.Connection) -> None:
    """Item 8, the reverse: tsmodel's own rows keep event-time cells, so both models read them."""
    table = _name("METRIC")
    Metric = metric_model(table, event_time_cells=False)
    conn.create_tables(Metric)
    t0 = datetime.fromtimestamp(1426535612.045, UTC)
    conn.save(Metric(hostname="server1.bbb.com", time=t0, cpu1_usr=0.02, blk_read=253453634))
    assert foreign_read(conn.backend, table) == {b"server1.bbb.com#1426535612045": [
        ("METRIC", b"CPU/CPU1_USR", b"0.02"), ("METRIC", b"IO/BLK_READ", b"253453634")]}
    assert foreign_versions(conn.backend, table, b"server1.bbb.com#1426535612045")[0][1] == \
        1426535612045000
    Default = metric_model(table)
    assert Default.using(conn).latest(hostname="server1.bbb.com").blk_read == 253453634


def test_write_time_cells_beside_offsets(conn: ts.Connection) -> None:
    """Item 8 on the energy meters: offsets read by qualifier, not by cell timestamp."""
    table = _name("SENSOR")

    def meter(event_time_cells: bool) -> Any:
        @ts.model(table=table, family="METER", layout=ts.offsets(timedelta(minutes=15)),
                  event_time_cells=event_time_cells)
        class Meter:
            meter: int = ts.key(width=10)
            time: datetime = ts.timestamp(bucket="day")
            kwh: float = ts.value(codec=ts.Text(float))

        return Meter

    conn.create_tables(meter(True))
    foreign_write(conn.backend, table, [(b"0000987654#20170726", [
        ("METER", b"0000", b"12.34", None), ("METER", b"0015", b"13.45", None),
        ("METER", b"2330", b"27.89", None), ("METER", b"2345", b"28.9", None)])])
    day = datetime(2017, 7, 26, tzinfo=UTC)
    Meter = meter(False)
    got = list(Meter.range(day, day + timedelta(days=1), meter=987654).using(conn))
    assert [(m.time.strftime("%H%M"), m.kwh) for m in got] == [
        ("0000", 12.34), ("0015", 13.45), ("2330", 27.89), ("2345", 28.9)]
    night = Meter.range(day + timedelta(hours=23), day + timedelta(days=1), meter=987654)
    assert [m.kwh for m in night.using(conn)] == [27.89, 28.9]
    with pytest.raises(ts.CellDecodingError, match="event_time_cells=False"):
        meter(True).using(conn).latest(meter=987654)


# -- 5: row-level columns beside bucketed events -----------------------------------------


def test_a_foreign_row_column_is_no_event_of_a_new_cells_bucket(conn: ts.Connection) -> None:
    """Item 5: a cell of another column in a ts.cells() bucket row read as an empty event."""
    table = _name("BALLOON")

    @ts.model(table=table, family="measurements", layout=ts.cells(), max_rate=1 / 60)
    class Balloon:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(bucket="week")
        pressure: int | None = ts.value(codec=ts.Text(int), default=None)

    conn.create_tables(Balloon)
    week = datetime(2021, 3, 1, tzinfo=UTC)
    minute = week + timedelta(days=4, hours=12)
    foreign_write(conn.backend, table, [(b"asia-south2#3698#2021-W09", [
        ("measurements", b"ID", b"3698", int(week.timestamp() * 1e6)),
        ("measurements", b"pressure", b"94558", int(minute.timestamp() * 1e6))])])
    got = list(Balloon.range(week, week + timedelta(days=7), location="asia-south2",
                             balloon=3698).using(conn))
    assert [(b.time, b.pressure) for b in got] == [(minute, 94558)]


#: The guide's SENSOR row (the readings it prints; "..." stands for the 92 others).
SENSOR_KEY = b"0000987654#20170726"
SENSOR_COLUMNS = [("METER", b"0000", b"12.34"), ("METER", b"0015", b"13.45"),
                  ("METER", b"2330", b"27.89"), ("METER", b"2345", b"28.90"),
                  ("METER", b"ID", b"987654")]
DAY = datetime(2017, 7, 26, tzinfo=UTC)


def meter_model(table: str) -> Any:
    @ts.model(table=table, family="METER", layout=ts.offsets(timedelta(minutes=15)))
    class Meter:
        meter: int = ts.key(width=10, column="ID")
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value(codec=ts.Text(float, places=2))

    return Meter


def offset_time(qualifier: bytes) -> datetime:
    return DAY + timedelta(hours=int(qualifier[:2]), minutes=int(qualifier[2:]))


def test_guide_sensor_row_reads_with_its_meter_id_column(conn: ts.Connection) -> None:
    """Item 5: METER:ID beside the offset columns is the meter's key column, checked."""
    table = _name("SENSOR")
    Meter = meter_model(table)
    conn.create_tables(Meter)
    # Another program writes each reading with the meter's ID, at the reading's time.
    foreign_write(conn.backend, table, [(SENSOR_KEY, [
        cell for f, q, v in SENSOR_COLUMNS[:4]
        for cell in ((f, q, v, us_of(offset_time(q))), ("METER", b"ID", b"987654",
                                                        us_of(offset_time(q))))])])
    day = list(Meter.range(DAY, DAY + timedelta(days=1), meter=987654).using(conn))
    assert [(m.time.strftime("%H%M"), m.kwh) for m in day] == [
        ("0000", 12.34), ("0015", 13.45), ("2330", 27.89), ("2345", 28.9)]
    night = Meter.range(DAY + timedelta(hours=23), DAY + timedelta(days=1), meter=987654)
    assert [m.kwh for m in night.using(conn)] == [27.89, 28.9]
    assert Meter.using(conn).latest(meter=987654).kwh == 28.9
    last = us_of(offset_time(b"2345"))
    foreign_write(conn.backend, table, [(SENSOR_KEY, [("METER", b"ID", b"987655", last)])])
    # A read inside the day selects its offset columns only; one over the whole row sees ID.
    with pytest.raises(ts.CellDecodingError) as info:
        list(Meter.range(DAY, DAY + timedelta(days=2), meter=987654).using(conn))
    assert (info.value.field, info.value.column, info.value.row_key) == (
        "meter", "METER:ID", SENSOR_KEY)


def test_tsmodel_writes_the_guide_sensor_row(conn: ts.Connection) -> None:
    """Item 5, the reverse: one METER:ID cell per day row, at the bucket start."""
    table = _name("SENSOR")
    Meter = meter_model(table)
    conn.create_tables(Meter)
    conn.save_all([Meter(meter=987654, time=offset_time(q), kwh=float(v))
                   for _, q, v in SENSOR_COLUMNS[:4]])
    assert foreign_read(conn.backend, table) == {SENSOR_KEY: SENSOR_COLUMNS}
    ids = [(t, v) for q, t, v in foreign_versions(conn.backend, table, SENSOR_KEY) if q == b"ID"]
    assert ids == [(us_of(DAY), b"987654")]


# -- 6: the short-and-wide month row -----------------------------------------------------

MARCH = datetime(2015, 3, 1, tzinfo=UTC)
#: The guide's month row: VEGGIEGARDEN#20150301 | TEMP:1:60.4 | TEMP:2:61.2 ... TEMP:31:60.4
#: (the days it elides hold 60.0 here).
GARDEN_TEMPS = {1: b"60.4", 2: b"61.2", 3: b"61.0", 4: b"65.1", 5: b"62.2",
                **{day: b"60.0" for day in range(6, 31)}, 31: b"60.4"}


def garden_model(table: str) -> Any:
    @ts.model(table=table, family="TEMP", layout=ts.offsets(timedelta(days=1), qualifier="%-d"))
    class Garden:
        garden: str = ts.key()
        time: datetime = ts.timestamp(bucket="month", label="%Y%m%d")
        temp: float = ts.value(codec=ts.Text(float))

    return Garden


def test_guide_month_row_reads_day_by_day(conn: ts.Connection) -> None:
    """Item 6: VEGGIEGARDEN#20150301 | TEMP:1 ... TEMP:31 could not be declared."""
    table = _name("GARDEN")
    Garden = garden_model(table)
    conn.create_tables(Garden)
    foreign_write(conn.backend, table, [(b"VEGGIEGARDEN#20150301", [
        ("TEMP", str(day).encode(), temp, us_of(MARCH + timedelta(days=day - 1)))
        for day, temp in GARDEN_TEMPS.items()])])
    month = list(Garden.range(MARCH, MARCH + timedelta(days=31),
                              garden="VEGGIEGARDEN").using(conn))
    assert [(g.time.day, g.temp) for g in month] == [
        (day, float(temp)) for day, temp in GARDEN_TEMPS.items()]
    some = Garden.range(MARCH + timedelta(days=1), MARCH + timedelta(days=10),
                        garden="VEGGIEGARDEN").using(conn)
    assert [g.time.day for g in some] == list(range(2, 11))
    assert Garden.using(conn).latest(garden="VEGGIEGARDEN").time == MARCH + timedelta(days=30)


def test_tsmodel_writes_the_guide_month_row(conn: ts.Connection) -> None:
    """Item 6, the reverse: a tsmodel month row is the guide's, byte for byte."""
    table = _name("GARDEN")
    Garden = garden_model(table)
    conn.create_tables(Garden)
    conn.save_all([Garden(garden="VEGGIEGARDEN", time=MARCH + timedelta(days=day - 1),
                          temp=float(temp)) for day, temp in GARDEN_TEMPS.items()])
    rows = foreign_read(conn.backend, table)
    assert list(rows) == [b"VEGGIEGARDEN#20150301"]
    assert sorted(rows[b"VEGGIEGARDEN#20150301"]) == sorted(
        ("TEMP", str(day).encode(), temp) for day, temp in GARDEN_TEMPS.items())


# -- 4: amendment history as column versions ---------------------------------------------

CLOSE_DAY = datetime(2015, 3, 1, tzinfo=UTC)
ENTERED = datetime(2015, 3, 1, 21, 0, tzinfo=UTC)          # the close entered, mistakenly
AMENDED = datetime(2015, 3, 2, 9, 30, tzinfo=UTC)          # the correction


def close_model(table: str, max_versions: int | None = None) -> Any:
    @ts.model(table=table, family="STOCK", max_versions=max_versions)
    class Close:
        symbol: str = ts.key()
        time: datetime = ts.timestamp(format="%Y%m%d")
        price: float = ts.value("PRICE", codec=ts.Text(float, places=2))
        entered: datetime = ts.version()

    return Close


def test_guide_close_amended_by_another_program_keeps_its_history(
        conn: ts.Connection) -> None:
    """Item 4: the ZXZZT close entered as 559.40 and amended to 558.40, history kept."""
    table = _name("CLOSE")
    Close = close_model(table)
    conn.create_tables(Close)
    before = ts.floor_timestamp(datetime.now(UTC))
    key = b"ZXZZT#20150301"
    foreign_write(conn.backend, table, [(key, [("STOCK", b"PRICE", b"559.40", None)])])
    time.sleep(0.005)
    foreign_write(conn.backend, table, [(key, [("STOCK", b"PRICE", b"558.40", None)])])
    after = datetime.now(UTC)
    # A column the model does not declare, written later, is no version of the close.
    foreign_write(conn.backend, table, [(key, [("STOCK", b"NOTE", b"checked",
                                                now_ms_us() + 60_000_000)])])
    qs = Close.range(CLOSE_DAY, CLOSE_DAY + timedelta(days=1), symbol="ZXZZT").using(conn)
    (close,) = qs
    assert close.price == 558.40 and before <= close.entered <= after
    versions = list(qs.history())
    assert [v.price for v in versions] == [559.40, 558.40]
    assert versions[0].entered < versions[1].entered == close.entered
    assert {v.time for v in versions} == {CLOSE_DAY}
    assert Close.using(conn).latest(symbol="ZXZZT") == close


def test_tsmodel_amends_with_versions_every_reader_sees(conn: ts.Connection) -> None:
    """Item 4, the reverse: a correction adds a cell version; newest-cell readers see it."""
    table = _name("CLOSE")
    Close = close_model(table)
    conn.create_tables(Close)
    first = Close(symbol="ZXZZT", time=CLOSE_DAY, price=559.40, entered=ENTERED)
    fixed = Close(symbol="ZXZZT", time=CLOSE_DAY, price=558.40, entered=AMENDED)
    conn.save_all([first, fixed])              # both versions in one batch: both kept
    conn.save(fixed)                           # saving a version again changes nothing
    assert foreign_read(conn.backend, table) == {b"ZXZZT#20150301": [
        ("STOCK", b"PRICE", b"558.40")]}
    assert foreign_versions(conn.backend, table, b"ZXZZT#20150301") == [
        (b"PRICE", us_of(AMENDED), b"558.40"), (b"PRICE", us_of(ENTERED), b"559.40")]
    qs = Close.range(CLOSE_DAY, CLOSE_DAY + timedelta(days=1), symbol="ZXZZT").using(conn)
    assert list(qs) == [fixed]
    assert list(qs.history()) == [first, fixed]
    assert list(qs.history().newest_first()) == [fixed, first]


def test_amending_one_column_of_the_guide_trade_row(conn: ts.Connection) -> None:
    """Item 4: a version is the row as it stood then, every column's newest cell by then."""
    table = _name("TRADE")

    @ts.model(table=table, family="MD")
    class Trade:
        exchange: str = ts.key(width=6, column="EXCHANGE")
        symbol: str = ts.key(width=5, column="SYMBOL")
        time: datetime = ts.timestamp(unit="ms", column="TRADETIME")
        last_sale: float = ts.value("LASTSALE", codec=ts.Text(float, places=2))
        last_size: int = ts.value("LASTSIZE", codec=ts.Text(int))
        volume: int = ts.value("VOLUME", codec=ts.Text(int))
        entered: datetime = ts.version()

    conn.create_tables(Trade)
    trade_time = datetime.fromtimestamp(1426535612.045, UTC)
    entered, amended = trade_time + timedelta(milliseconds=3), trade_time + timedelta(hours=2)
    foreign_write(conn.backend, table, [(TRADE_KEY, [(f, q, v, us_of(entered))
                                                     for f, q, v in TRADE_COLUMNS])])
    foreign_write(conn.backend, table, [(TRADE_KEY, [("MD", b"LASTSALE", b"600.48",
                                                      us_of(amended))])])
    qs = Trade.range(trade_time, trade_time + timedelta(seconds=1), exchange="NASDAQ",
                     symbol="ZXZZT").using(conn)
    (trade,) = qs
    assert (trade.last_sale, trade.last_size, trade.volume, trade.entered) == (
        600.48, 300, 89000, amended)
    assert [(v.last_sale, v.volume, v.entered) for v in qs.history()] == [
        (600.58, 89000, entered), (600.48, 89000, amended)]
