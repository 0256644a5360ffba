"""Models whose rows are plain events with keys ending in the time's digits, and
bucket models whose rows have a fixed shape of cells; events drawn for them,
and the ways a row of theirs is damaged: what the decoders that take such rows
a whole column at a time are held to the row by row decoding with
(tests/unit/test_batch_instances.py, tests/extras/test_columnar_decoders.py).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

import tsmodel as ts
from tsmodel.backends.base import Cell, Row

#: The damages `bucket_damaged()` knows.
BUCKET_DAMAGES = ("key", "no cells", "older version", "same time", "cell time",
                  "foreign column", "other family", "bytes", "dropped", "swapped")
#: The damages `group_damaged()` knows.
DAMAGES = ("tail digit", "salt", "row time", "short key", "no separator", "cell time", "no cells",
           "older version", "foreign column", "other family", "bytes", "dropped")

START = datetime(2015, 3, 16, 19, tzinfo=timezone.utc)


def whole_key_models() -> list[type]:
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"WK_MS_{suffix}", family="M")
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU/USR")
        blk: int = ts.value("IO/BLK")
        name: str = ts.value("NAME")
        up: bool = ts.value("UP")

    @ts.model(table=f"WK_S_{suffix}", family="M")
    class Reading:
        site: str = ts.key()
        meter: int = ts.key(width=3)
        time: datetime = ts.timestamp(unit="s", reverse=True)
        kwh: int = ts.value("KWH")

    @ts.model(table=f"WK_US_{suffix}", family="M")
    class Micro:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="us")
        level: int = ts.value("N")

    @ts.model(table=f"WK_PAIR_{suffix}", family="M")
    class Pair:  # values of one width: a column taken for another would read
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        low: float = ts.value("A")
        high: float = ts.value("B")
        gap: float = ts.value("C", family="N")

    return [Metric, Reading, Micro, Pair]


def salted_models() -> list[type]:
    """Plain event rows under a salt: of each time (as `ts.salt(n, on="time")` spreads a
    series), and of the key's host."""
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"WK_SALT_T_{suffix}", family="M")
    class SaltTime:
        salt = ts.salt(4, on="time")
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU")

    @ts.model(table=f"WK_SALT_H_{suffix}", family="M")
    class SaltHost:
        salt = ts.salt(4, on="host")
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        blk: int = ts.value("BLK")

    return [SaltTime, SaltHost]


def format_models() -> list[type]:
    """Plain event rows whose key ends with a time in a format of one width (the
    reference's balloons and salted batteries): decoded key by key."""
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"WK_FMT_{suffix}", family="M")
    class Balloon:
        location: str = ts.key()
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(format="%Y-%m-%d-%H%M")
        pressure: int = ts.value()
        temperature: float = ts.value("temp")

    @ts.model(table=f"WK_FMS_{suffix}", family="M")
    class Battery:
        kind = ts.constant("BATTERY")
        salt = ts.salt(3, on="time", first=1)
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        user: str = ts.value("USER")
        percentage: int = ts.value("PERCENTAGE", codec=ts.Text(int))

    return [Balloon, Battery]


def optional_models() -> list[type]:
    """Plain event rows of models with optional and defaulted values: a row has the
    cell of such a value only where the event had one (a batch in which every
    row has every cell is of a fixed shape; any other is not)."""
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"WK_OPT_{suffix}", family="M")
    class Sparse:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU")
        blk: int | None = ts.value("BLK", default=None)
        note: str | None = ts.value("A/NOTE", default=None)
        level: int = ts.value("LEVEL", default=7)

    return [Sparse]


def full(model: type, rows: list[Row]) -> bool:
    """Whether each of ``rows`` has a cell of every value field of ``model`` (rows of
    the models of `optional_models()` may lack some)."""
    values = model.__tsmodel__.values  # type: ignore[attr-defined]
    if not any(v.optional or v.has_default for v in values):
        return True  # every row has every value: a required one's cell
    return all(len(row.cells) == len(values) for row in rows)


def draw_event(data: st.DataObject, model: type, i: int) -> Any:
    when = START + timedelta(seconds=i * 7 + data.draw(st.integers(0, 3)))
    name = model.__name__
    if name == "Sparse":  # every value there, mostly
        def maybe(values: Any) -> Any:
            return st.one_of(values, st.none()) if data.draw(st.integers(0, 3)) == 0 \
                else values
        return model(host=data.draw(st.sampled_from(["a", "b"])), time=when,
                     cpu=data.draw(st.floats(allow_nan=False)),
                     blk=data.draw(maybe(st.integers(-(2**63), 2**63 - 1))),
                     note=data.draw(maybe(st.text(max_size=4))),
                     level=data.draw(st.integers(-5, 5)))
    if name == "Balloon":
        return model(location=data.draw(st.sampled_from(["here", "there"])),
                     balloon=data.draw(st.integers(0, 9999)),
                     time=START + timedelta(minutes=i * 3 + data.draw(st.integers(0, 2))),
                     pressure=data.draw(st.integers(-(2**63), 2**63 - 1)),
                     temperature=data.draw(st.floats(allow_nan=False)))
    if name == "Battery":
        return model(time=when + timedelta(milliseconds=data.draw(st.integers(0, 999))),
                     user=data.draw(st.text(max_size=4)),
                     percentage=data.draw(st.integers(0, 100)))
    if name == "SaltTime":
        return model(host=data.draw(st.sampled_from(["a", "b"])), time=when,
                     cpu=data.draw(st.floats(allow_nan=False)))
    if name == "SaltHost":
        return model(host=data.draw(st.sampled_from(["a", "b", "c"])), time=when,
                     blk=data.draw(st.integers(-(2**63), 2**63 - 1)))
    if name == "Metric":
        return model(host=data.draw(st.sampled_from(["a", "b.example", "c"])), time=when,
                     cpu=data.draw(st.floats(allow_nan=False)), blk=data.draw(
                         st.integers(-(2**63), 2**63 - 1)),
                     name=data.draw(st.text(max_size=5)), up=data.draw(st.booleans()))
    if name == "Reading":
        return model(site=data.draw(st.sampled_from(["x", "yy"])),
                     meter=data.draw(st.integers(0, 999)), time=when,
                     kwh=data.draw(st.integers(0, 10**6)))
    if name == "Pair":
        return model(host=data.draw(st.sampled_from(["p", "q"])), time=when,
                     low=data.draw(st.floats(allow_nan=False)),
                     high=data.draw(st.floats(allow_nan=False)),
                     gap=data.draw(st.floats(allow_nan=False)))
    return model(host=data.draw(st.sampled_from(["p", "q"])),
                 time=when + timedelta(microseconds=data.draw(st.integers(0, 999_999))),
                 level=data.draw(st.integers(0, 9)))


def group_damaged(row: Any, how: str) -> Any:
    cells = list(row.cells)
    c = cells[0]
    if how == "tail digit":
        return Row(row.key[:-1] + b"x", row.cells)
    if how == "salt":  # a salted key under the next salt value (another key's digit else)
        first = row.key[:1]
        other = b"%d" % ((int(first) + 1) % 4) if first.isdigit() else b"0"
        return Row(other + row.key[1:], row.cells)
    if how == "short key":
        return Row(row.key[-3:], row.cells)
    if how == "no separator":
        return Row(row.key.replace(b"#", b"", 1), row.cells)
    if how == "row time":  # every cell a millisecond after the key's time
        return Row(row.key, tuple(Cell(x.family, x.qualifier, x.timestamp + 1000, x.value)
                                  for x in cells))
    if how == "cell time":
        cells[-1] = Cell(cells[-1].family, cells[-1].qualifier, cells[-1].timestamp + 1000,
                         cells[-1].value)
    elif how == "no cells":
        cells = []
    elif how == "older version":
        cells.insert(1, Cell(c.family, c.qualifier, c.timestamp - 1000, c.value))
    elif how == "foreign column":
        cells.append(Cell("M", b"ZZ", c.timestamp, b"?"))
    elif how == "other family":  # (not every model declares one)
        cells.append(Cell("N", b"7", c.timestamp, b""))
    elif how == "bytes":
        cells[0] = Cell(c.family, c.qualifier, c.timestamp, b"\xff" * 3)
    elif how == "dropped":
        del cells[0]
    return Row(row.key, tuple(cells))


def stored_rows(conn: Any, model: Any, days: int = 1) -> tuple[Any, list[Row]]:
    """The plan of ``model``'s range of ``days`` from `START` on ``conn``, and the rows
    its requests read from the backend, undecoded."""
    plan = model.range(START, START + timedelta(days=days), allow_scan=True).using(
        conn).explain()
    return plan, [r for q in plan.requests for r in conn.backend.read_rows(q)]


def bucket_models() -> list[type]:
    suffix = uuid.uuid4().hex[:8].upper()

    @ts.model(table=f"BK_H_{suffix}", family="M", layout=ts.cells(), max_rate=1 / 5)
    class Hourly:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        cpu: float = ts.value("CPU/USR")
        blk: int = ts.value("IO/BLK")
        name: str = ts.value("NAME")
        up: bool = ts.value("UP", family="N")

    @ts.model(table=f"BK_D_{suffix}", family="M", layout=ts.cells(), max_rate=1 / 5)
    class Daily:
        site: str = ts.key()
        meter: int = ts.key(width=3)
        time: datetime = ts.timestamp(bucket="day", unit="s")
        kwh: int = ts.value("KWH")

    @ts.model(table=f"BK_C_{suffix}", family="M", layout=ts.columns(), max_rate=1 / 5)
    class Columned:
        host: str = ts.key()
        metric: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        reading: int = ts.value()

    @ts.model(table=f"BK_T_{suffix}", family="M", layout=ts.columns(), max_rate=1 / 5)
    class Pressure:
        balloon: int = ts.key(width=4)
        time: datetime = ts.timestamp(bucket="week")
        pascal: int = ts.value(codec=ts.Text(int))

    @ts.model(table=f"BK_O_{suffix}", family="M", layout=ts.cells(), max_rate=1 / 5)
    class Sparse:  # optional values beside a required one, in two families
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour")
        load: float | None = ts.value("LOAD")
        cpu: float = ts.value("CPU/USR")
        note: str | None = ts.value("NOTE", family="N")
        code: int | None = ts.value("A", family="N")

    return [Hourly, Daily, Columned, Pressure, Sparse]


def draw_bucket_event(data: st.DataObject, model: type, i: int) -> Any:
    when = START + timedelta(seconds=i * 600 + data.draw(st.integers(0, 500)))
    if model.__name__ == "Hourly":
        return model(host=data.draw(st.sampled_from(["a", "b.example"])), time=when,
                     cpu=data.draw(st.floats(allow_nan=False)),
                     blk=data.draw(st.integers(-(2**63), 2**63 - 1)),
                     name=data.draw(st.text(max_size=5)), up=data.draw(st.booleans()))
    if model.__name__ == "Columned":
        return model(host=data.draw(st.sampled_from(["a", "b.example"])),
                     metric=data.draw(st.sampled_from(["cpu", "mem"])), time=when,
                     reading=data.draw(st.integers(-(2**63), 2**63 - 1)))
    if model.__name__ == "Sparse":
        return model(host=data.draw(st.sampled_from(["a", "b.example"])), time=when,
                     load=data.draw(st.none() | st.floats(allow_nan=False)),
                     cpu=data.draw(st.floats(allow_nan=False)),
                     note=data.draw(st.none() | st.text(max_size=5)),
                     code=data.draw(st.none() | st.integers(-(2**63), 2**63 - 1)))
    if model.__name__ == "Pressure":
        return model(balloon=data.draw(st.integers(0, 9999)), time=when,
                     pascal=data.draw(st.integers(-5, 10**6)))
    return model(site=data.draw(st.sampled_from(["x", "yy"])),
                 meter=data.draw(st.integers(0, 999)), time=when,
                 kwh=data.draw(st.integers(0, 10**6)))


def bucket_damaged(row: Any, how: str, data: st.DataObject) -> Any:
    cells = list(row.cells)
    at = data.draw(st.integers(0, 10**6)) % len(cells)  # draws alike on every replay
    c = cells[at]
    if how == "key":
        return Row(row.key + b"\xff#x", row.cells)
    if how == "no cells":
        cells = []
    elif how == "older version":  # an event with a cell in one column only
        cells.insert(at + 1, Cell(c.family, c.qualifier, c.timestamp - 1000, c.value))
    elif how == "same time":  # two versions of a column at one time
        cells.insert(at + 1, Cell(c.family, c.qualifier, c.timestamp, c.value))
    elif how == "cell time":  # a column's version at another time than the others'
        cells[at] = Cell(c.family, c.qualifier, c.timestamp + 1000, c.value)
    elif how == "foreign column":
        cells.append(Cell("M", b"ZZ", c.timestamp, b"?"))
    elif how == "other family":  # (not every model declares one)
        cells.append(Cell("N", b"7", c.timestamp, b""))
    elif how == "bytes":
        cells[at] = Cell(c.family, c.qualifier, c.timestamp, b"\xff" * 3)
    elif how == "dropped":
        del cells[at]
    elif how == "swapped":  # two cells of a row in another order
        cells[0], cells[-1] = cells[-1], cells[0]
    return Row(row.key, tuple(cells))
