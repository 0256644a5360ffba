"""Financial market data: quotes and trades, and a closing price amended with its history.

The schema guide's market-data example: a QUOTE and a TRADE table, a row per
message keyed ``EXCHANGE#SYMBOL#TIME`` (``NASDAQ#ZXZZT#1426535612156``: the
exchange padded to 6 characters, the ticker to 5, 13-digit epoch
milliseconds), and the key fields also stored as columns (``MD:SYMBOL``,
``MD:EXCHANGE``, ``MD:QUOTETIME``), kept equal to the key by tsmodel. Then
the guide's one good use of column versions: the ZXZZT close, entered as
559.40 and amended to 558.40, its history kept. Run it with no server::

    python examples/market_data.py
"""

from __future__ import annotations

import os
import random
from datetime import datetime, timedelta, timezone

import tsmodel as ts
from tsmodel.ground.base import ReadRequest, RowSet

UTC = timezone.utc


@ts.model(table="QUOTE", family="MD")
class Quote:
    """One quote message."""

    exchange: str = ts.key(width=6, column="EXCHANGE")
    symbol: str = ts.key(width=5, column="SYMBOL")
    time: datetime = ts.timestamp(unit="ms", column="QUOTETIME")
    bid: float = ts.value("BID", codec=ts.Text(float, places=2))
    ask: float = ts.value("ASK", codec=ts.Text(float, places=2))
    bid_size: int = ts.value("BIDSIZE", codec=ts.Text(int))
    ask_size: int = ts.value("ASKSIZE", codec=ts.Text(int))


@ts.model(table="TRADE", family="MD")
class Trade:
    """One trade message."""

    exchange: str = ts.key(width=6, column="EXCHANGE")
    symbol: str = ts.key(width=5, column="SYMBOL")
    time: datetime = ts.timestamp(unit="ms", column="TRADETIME")
    last_sale: float = ts.value("LASTSALE", codec=ts.Text(float, places=2))
    last_size: int = ts.value("LASTSIZE", codec=ts.Text(int))
    volume: int = ts.value("VOLUME", codec=ts.Text(int))


@ts.model(table="CLOSE", family="STOCK", max_versions=10)
class Close:
    """The closing price of a day; corrections are kept as versions of its cell."""

    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    time: datetime = ts.timestamp(format="%Y%m%d")
    price: float = ts.value("PRICE", codec=ts.Text(float, places=2))
    entered: datetime = ts.version()


QUOTE_TIME = datetime.fromtimestamp(1426535612.156, UTC)   # 12:53:32.156 (US Eastern)
TRADE_TIME = datetime.fromtimestamp(1426535612.045, UTC)
GUIDE_QUOTE = ("NASDAQ#ZXZZT#1426535612156 | MD:SYMBOL:ZXZZT | MD:BID:600.55 | MD:ASK:600.60 | "
               "MD:BIDSIZE:500 | MD:ASKSIZE:1500 | MD:QUOTETIME:1426535612156 | "
               "MD:EXCHANGE:NASDAQ")
GUIDE_TRADE = ("NASDAQ#ZXZZT#1426535612045 | MD:SYMBOL:ZXZZT | MD:LASTSALE:600.58 | "
               "MD:LASTSIZE:300 | MD:TRADETIME:1426535612045 | MD:EXCHANGE:NASDAQ | "
               "MD:VOLUME:89000")
#: The guide's ZXZZT closes (its column-versions table), 2015-03-01 .. 03-05.
CLOSES = [558.40, 571.34, 573.64, 573.37, 575.33]


def raw_row(db: ts.Connection, table: str, key: bytes) -> str:
    """A row as ``cbt`` shows it: the key, then family:qualifier:value of each column."""
    (row,) = db.read(ReadRequest(table, RowSet(keys=(key,))))
    return " | ".join([row.key.decode()] + [
        f"{c.family}:{c.qualifier.decode()}:{c.value.decode()}" for c in row.cells])


def messages(rng: random.Random) -> tuple[list[Quote], list[Trade]]:
    """The guide's quote and trade, and a second of other messages around them."""
    quotes = [Quote(exchange="NASDAQ", symbol="ZXZZT", time=QUOTE_TIME, bid=600.55, ask=600.60,
                    bid_size=500, ask_size=1500)]
    trades = [Trade(exchange="NASDAQ", symbol="ZXZZT", time=TRADE_TIME, last_sale=600.58,
                    last_size=300, volume=89000)]
    for ms in range(1, 1000, 37):
        when = QUOTE_TIME + timedelta(milliseconds=ms)
        bid = round(600.55 + rng.uniform(-0.2, 0.2), 2)
        quotes.append(Quote(exchange="NASDAQ", symbol="ZXZZT", time=when, bid=bid,
                            ask=round(bid + 0.05, 2), bid_size=100 * rng.randint(1, 9),
                            ask_size=100 * rng.randint(1, 20)))
        quotes.append(Quote(exchange="NYSE", symbol="ABC", time=when, bid=12.5, ask=12.55,
                            bid_size=100, ask_size=100))
    return quotes, trades


def main() -> None:
    db = ts.connect(os.environ.get("TSMODEL_URL"))
    db.create_tables(Quote, Trade, Close)
    quotes, trades = messages(random.Random(1426535612))
    print("saved:", db.save_all(quotes).summary(), "quotes,", db.save_all(trades).summary(),
          "trades")

    print("\nthe guide's QUOTE row, then tsmodel's (Bigtable sorts columns by qualifier):")
    print(" ", GUIDE_QUOTE)
    print(" ", raw_row(db, "QUOTE", ts.row_key(quotes[0])))
    print("the guide's TRADE row, then tsmodel's:")
    print(" ", GUIDE_TRADE)
    print(" ", raw_row(db, "TRADE", ts.row_key(trades[0])))

    second = Quote.range(QUOTE_TIME, QUOTE_TIME + timedelta(seconds=1), exchange="NASDAQ",
                         symbol="ZXZZT")
    print("\nZXZZT quotes in one second:")
    print(second.explain())
    got = list(second)
    print(f"{len(got)} quotes, bid {min(q.bid for q in got):.2f} .. {max(q.bid for q in got):.2f}")
    print("latest trade:", Trade.latest(exchange="NASDAQ", symbol="ZXZZT"))

    print("\nclosing prices, the first one entered wrong and amended the next morning:")
    days = [datetime(2015, 3, 1, tzinfo=UTC) + timedelta(days=i) for i in range(len(CLOSES))]
    evening = timedelta(hours=21)
    entered = [559.40, *CLOSES[1:]]                                 # 03-01 entered as 559.40
    db.save_all(Close(exchange="NASDAQ", symbol="ZXZZT", time=day, price=price,
                      entered=day + evening) for day, price in zip(days, entered, strict=True))
    db.save(Close(exchange="NASDAQ", symbol="ZXZZT", time=days[0], price=CLOSES[0],
                  entered=days[1] + timedelta(hours=9, minutes=30)))  # amended to 558.40
    march = Close.range(days[0], days[-1] + timedelta(days=1), exchange="NASDAQ",
                        symbol="ZXZZT")
    for close in march:
        print(f"  {close.time:%Y-%m-%d}  {close.price:.2f}  (entered {close.entered:%m-%d %H:%M})")
    print("history of 2015-03-01:")
    for version in march.history():
        if version.time == days[0]:
            print(f"  {version.price:.2f}  entered {version.entered:%Y-%m-%d %H:%M}")
    (row,) = db.read(ReadRequest("CLOSE", RowSet(keys=(b"NASDAQ#ZXZZT#20150301",))))
    print("its cell versions (newest first):",
          ", ".join(f"{c.value.decode()} @ {c.timestamp}" for c in row.cells))
    db.close()


if __name__ == "__main__":
    main()
