"""The model shapes the oracle harness runs, each declared twice.

Once as a tsmodel model (``make_model(suffix)``, fresh tables per example), and
once as a :class:`Shape`: a hand-written description of its row keys, time,
layout, values and companion tables that the reference model
(:mod:`tests.oracle.reference`) reads. The reference never looks at
tsmodel's spec; ``test_oracle.py`` only checks that both declarations name
the same fields.

Each shape also fixes the small universe its events are drawn from (entities,
event times, value choices), small enough that saves collide: corrections,
replays, late events, same-millisecond events, full bucket rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import tsmodel as ts

__all__ = ["Seg", "Time", "Value", "Shape", "SHAPES", "shape_named", "us_of",
           "MS", "HOUR", "DAY"]

UTC = timezone.utc
MS = 1_000
SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def us_of(dt: datetime) -> int:
    """Microseconds since the epoch of an aware datetime."""
    return (dt - _EPOCH) // timedelta(microseconds=1)


@dataclass(frozen=True)
class Seg:
    """One row key segment as the reference sees it.

    ``kind``: ``const`` (``text``), ``salt`` (``buckets``, hashing field ``on``),
    ``str`` (variable width), ``fstr`` (fixed ``width``, space padded on the
    right), ``int`` (zero padded to ``width``) or ``time``.
    """

    kind: str
    field: str | None = None
    text: str = ""
    width: int = 0
    on: str = ""
    buckets: int = 0


@dataclass(frozen=True)
class Time:
    """The timestamp as documented: epoch digits, a calendar format, or a bucket label.

    ``precision`` is the smallest step of event times the model keeps (µs).
    """

    kind: str  # "epoch" | "format" | "bucket"
    precision: int = MS
    digits: int = 13
    reverse: bool = False
    fmt: str = ""
    millis: bool = False
    bucket: int = 0  # bucket duration in µs (epoch aligned)
    label: str = ""  # bucket label format


@dataclass(frozen=True)
class Value:
    """A value field: its column and the values the harness draws for it."""

    name: str
    kind: str  # "int" | "float" | "str" | "bool"
    qualifier: str
    choices: tuple[Any, ...]
    optional: bool = False


@dataclass(frozen=True)
class Shape:
    """What the reference knows of one model shape."""

    name: str
    declare: Callable[[str, Shape], type]  # (table suffix, this shape) -> a fresh model
    key: tuple[Seg, ...]  # main table key, time included
    time: Time
    layout: str  # "rows" | "cells" | "columns" | "offsets"
    values: tuple[Value, ...]
    entities: tuple[dict[str, Any], ...]
    times: tuple[int, ...]  # candidate event times, µs
    current: bool = False
    alternates: tuple[tuple[Seg, ...], ...] = ()
    snapshot: bool = False  # a snapshot table per UTC day
    serialized: bool = False
    max_versions: int | None = None  # version limit of bucket rows
    family: str = "F"
    rollups: tuple[int, ...] = ()  # bucket sizes (µs) of rollup tables of the number fields
    rollup_retention: int | None = None  # the rollups' retention (µs); the model keeps events

    def make_model(self, suffix: str) -> type:
        """The shape's model, on tables named with ``suffix``."""
        return self.declare(suffix, self)

    @property
    def key_fields(self) -> tuple[str, ...]:
        return tuple(s.field for s in self.key if s.kind not in ("const", "salt", "time")
                     and s.field is not None)

    @property
    def time_field(self) -> str:
        return "time"

    @property
    def bucketed(self) -> bool:
        return self.time.kind == "bucket"

    @property
    def optional_values(self) -> bool:
        return any(v.optional for v in self.values)

    @property
    def companions(self) -> bool:
        return self.current or bool(self.alternates)

    def value(self, name: str) -> Value:
        return next(v for v in self.values if v.name == name)

    def __repr__(self) -> str:
        return f"<shape {self.name}>"


def _t(*args: int) -> int:
    return us_of(datetime(*args, tzinfo=UTC))  # type: ignore[misc]


def _unique(name: str, suffix: str) -> str:
    return f"O{name.upper()}_{suffix}"


# -- row per event -----------------------------------------------------------------------

_MIDNIGHT = _t(2015, 3, 2)


def _rows(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("rows", suffix), family="F", current=_unique("rows_cur", suffix),
              alternates=[ts.alternate(_unique("rows_alt", suffix), "site", "time", "host")],
              snapshot=ts.snapshot(_unique("rows", suffix) + "_S_{period:%Y%m%d}"))
    class Rows:
        site: str = ts.key()
        host: int = ts.key(width=3)
        time: datetime = ts.timestamp(unit="ms")
        x: int = ts.value("X")
        note: Optional[str] = ts.value("N", default=None)  # noqa: UP045

    return Rows


ROWS = Shape(
    name="rows", declare=_rows,
    key=(Seg("str", "site"), Seg("int", "host", width=3), Seg("time", "time")),
    time=Time("epoch"), layout="rows",
    values=(Value("x", "int", "X", (0, 1, -1, 2**63 - 1)),
            Value("note", "str", "N", (None, "", "n1", "é"), optional=True)),
    entities=tuple({"site": s, "host": h} for s in ("a", "ab", "b") for h in (1, 2)),
    times=tuple(_MIDNIGHT + d for d in (-10 * MS, -2 * MS, -MS, 0, MS, 5 * MS, 3 * HOUR,
                                         DAY - MS)),
    current=True,
    alternates=((Seg("str", "site"), Seg("time", "time"), Seg("int", "host", width=3)),),
    snapshot=True,
)


_T_US = _t(2015, 3, 16, 19, 53, 32)
_LATE_US = _t(2262, 1, 1)  # late, yet inside the times a current row of µs can order


def _rows_us(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("rows_us", suffix), family="F",
              current=_unique("rows_us_cur", suffix),
              rollups=[ts.rollup(_unique("rows_us_1s", suffix), "1s",
                                 retention=None if shape.rollup_retention is None
                                 else timedelta(microseconds=shape.rollup_retention))])
    class RowsUs:
        dev: str = ts.key(width=4)
        time: datetime = ts.timestamp(unit="us")
        v: float = ts.value("V")
        ok: Optional[bool] = ts.value("OK", default=None)  # noqa: UP045

    return RowsUs


def _us_times() -> tuple[int, ...]:
    """Several times in one millisecond (item 1), and late ones."""
    times = [_T_US + d for d in (1, 2, 999, 1_001, 1_999, 2_500, 5_007, SECOND + 3)]
    return tuple(times + [_LATE_US + 1, _LATE_US + 2])


ROWS_US = Shape(
    name="rows_us", declare=_rows_us,
    key=(Seg("fstr", "dev", width=4), Seg("time", "time")),
    time=Time("epoch", precision=1, digits=16), layout="rows",
    values=(Value("v", "float", "V", (0.0, -0.0, 1.5, 1e300, float("inf"))),
            Value("ok", "bool", "OK", (None, True, False), optional=True)),
    entities=({"dev": "d1"}, {"dev": "d10"}, {"dev": "e"}),
    times=_us_times(),
    current=True,
    rollups=(SECOND,),
    # The 2015 events are past it (saved, kept, resampled from the raw events: issue
    # 26, items 1 and 2), the late ones of 2262 within it.
    rollup_retention=365 * DAY,
)


_MAX_MS13 = (10**13 - 1) * MS


def _reversed(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("reversed", suffix), family="F")
    class Reversed:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms", reverse=True)
        x: int = ts.value("X")

    return Reversed


REVERSED = Shape(
    name="reversed", declare=_reversed,
    key=(Seg("str", "host"), Seg("time", "time")),
    time=Time("epoch", reverse=True), layout="rows",
    values=(Value("x", "int", "X", (0, 7, -(2**63))),),
    entities=({"host": "h"}, {"host": "h2"}, {"host": "i"}),
    times=(0, _T_US // MS * MS, _T_US // MS * MS + MS, _T_US // MS * MS + 2 * MS,
           _T_US // MS * MS + SECOND, _MAX_MS13 - MS, _MAX_MS13),
)


_FAR_DAY = _t(9999, 12, 31)
_FAR_LAST_MS = _FAR_DAY + DAY - MS


def _format_far(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("format_far", suffix), family="F")
    class FormatFar:
        host: str = ts.key()
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        x: int = ts.value("X")
        s: Optional[str] = ts.value("S", default=None)  # noqa: UP045

    return FormatFar


_T_FMT = _t(2015, 3, 1, 12, 45, 1)

FORMAT_FAR = Shape(
    name="format_far", declare=_format_far,
    key=(Seg("str", "host"), Seg("time", "time")),
    time=Time("format", fmt="%Y%m%d%H%M%S", millis=True), layout="rows",
    values=(Value("x", "int", "X", (1, 2)),
            Value("s", "str", "S", (None, "a", "long text " * 3), optional=True)),
    entities=({"host": "a"}, {"host": "b"}),
    times=(0, _T_FMT, _T_FMT + MS, _T_FMT + 999 * MS, _T_FMT + SECOND, _FAR_DAY - MS,
           _FAR_DAY, _FAR_LAST_MS - MS, _FAR_LAST_MS),
)


def _salted_time(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("salted_time", suffix), family="F",
              current=_unique("salted_time_cur", suffix),
              alternates=[ts.alternate(_unique("salted_time_alt", suffix), ts.constant("BAT"),
                                       "user", "time")])
    class SaltedTime:
        kind = ts.constant("BAT")
        salt = ts.salt(3, on="time")
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        user: str = ts.value("USER")
        pct: int = ts.value("PCT")

    return SaltedTime


SALTED_TIME = Shape(
    name="salted_time", declare=_salted_time,
    key=(Seg("const", text="BAT"), Seg("salt", on="time", buckets=3), Seg("time", "time")),
    time=Time("format", fmt="%Y%m%d%H%M%S", millis=True), layout="rows",
    values=(Value("user", "str", "USER", ("Corrie", "Jo", "Sam")),
            Value("pct", "int", "PCT", (98, 54, 0))),
    entities=({},),
    times=tuple(_T_FMT + d * MS for d in (1, 2, 3, 4, 5, 1000, 60_000)),
    current=True,
    alternates=((Seg("const", text="BAT"), Seg("str", "user"), Seg("time", "time")),),
)


def _salted_key(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("salted_key", suffix), family="F",
              current=_unique("salted_key_cur", suffix),
              rollups=[ts.rollup(_unique("salted_key_1m", suffix), "1min")])
    class SaltedKey:
        salt = ts.salt(4, on="host")
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        x: int = ts.value("X")
        opt: Optional[int] = ts.value("O", default=None)  # noqa: UP045

    return SaltedKey


SALTED_KEY = Shape(
    name="salted_key", declare=_salted_key,
    key=(Seg("salt", on="host", buckets=4), Seg("str", "host"), Seg("time", "time")),
    time=Time("epoch"), layout="rows",
    values=(Value("x", "int", "X", (1, 2, 3)),
            Value("opt", "int", "O", (None, 0, 5), optional=True)),
    entities=tuple({"host": h} for h in ("a", "ab", "b", "c", "server1")),
    times=tuple(_T_US // MS * MS + d * MS for d in (0, 1, 2, 3, 1000, 60_000)),
    current=True,
    rollups=(MINUTE,),
)


def _serialized(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("serialized", suffix), family="F",
              current=_unique("serialized_cur", suffix),
              serialization=ts.Protobuf(qualifier="blob"))
    class Serialized:
        loc: str = ts.key()
        id: int = ts.key(width=2)
        time: datetime = ts.timestamp(unit="ms")
        p: int = ts.value()
        t: float = ts.value()
        h: Optional[int] = ts.value(default=None)  # noqa: UP045

    return Serialized


SERIALIZED = Shape(
    name="serialized", declare=_serialized,
    key=(Seg("str", "loc"), Seg("int", "id", width=2), Seg("time", "time")),
    time=Time("epoch"), layout="rows", serialized=True,
    values=(Value("p", "int", "p", (94558, 0)),
            Value("t", "float", "t", (9.5, -1.25)),
            Value("h", "int", "h", (None, 0, 61), optional=True)),
    entities=tuple({"loc": loc, "id": i} for loc in ("eu", "us-west2") for i in (1, 12)),
    times=tuple(_T_FMT + d * MS for d in (0, 1, 2, 60_000, 3_600_000)),
    current=True,
)


# -- time buckets ------------------------------------------------------------------------

_H0 = _t(2021, 3, 7, 23)  # the last hour of a Sunday: the next hour is another day and week


def _cells(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("cells", suffix), family="F", layout=ts.cells(),
              max_versions=shape.max_versions, current=_unique("cells_cur", suffix),
              alternates=[ts.alternate(_unique("cells_alt", suffix), "game", "time", "player")])
    class Cells:
        game: str = ts.key()
        player: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour", label="%Y%m%d%H")
        a: int = ts.value("A")
        b: Optional[str] = ts.value("B", default=None)  # noqa: UP045

    return Cells


CELLS = Shape(
    name="cells", declare=_cells,
    key=(Seg("str", "game"), Seg("str", "player"), Seg("time", "time")),
    time=Time("bucket", bucket=HOUR, label="%Y%m%d%H"), layout="cells",
    values=(Value("a", "int", "A", (1, 2, 3)),
            Value("b", "str", "B", (None, "x", "y"), optional=True)),
    entities=tuple({"game": g, "player": p} for g in ("Dota", "LoL") for p in ("Corrie", "Jo")),
    times=tuple(_H0 + d for d in (0, MS, 10 * MINUTE, 20 * MINUTE, HOUR - MS, HOUR,
                                  HOUR + MS, HOUR + 30 * MINUTE)),
    current=True,
    alternates=((Seg("str", "game"), Seg("time", "time"), Seg("str", "player")),),
    max_versions=3,
)


_D0 = _t(2017, 7, 26)


def _far_days(*offsets: int) -> tuple[int, ...]:
    """Times on 9999-12-31, the last day (item 9)."""
    return tuple(_FAR_DAY + d for d in offsets)


def _cells_blob(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("cells_blob", suffix), family="F", layout=ts.cells(),
              max_versions=shape.max_versions, serialization=ts.Protobuf(qualifier="blob"))
    class CellsBlob:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="day")
        p: int = ts.value()
        q: Optional[float] = ts.value(default=None)  # noqa: UP045

    return CellsBlob


CELLS_BLOB = Shape(
    name="cells_blob", declare=_cells_blob,
    key=(Seg("str", "host"), Seg("time", "time")),
    time=Time("bucket", bucket=DAY, label="%Y%m%d"), layout="cells", serialized=True,
    values=(Value("p", "int", "p", (1, 2)),
            Value("q", "float", "q", (None, 0.5), optional=True)),
    entities=({"host": "h1"}, {"host": "h2"}),
    times=tuple(_D0 + d for d in (0, MS, HOUR, 12 * HOUR, DAY - MS, DAY))
    + _far_days(0, 12 * HOUR, DAY - MS),
    max_versions=3,
)


def _columns(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("columns", suffix), family="F", layout=ts.columns(),
              max_versions=shape.max_versions, current=_unique("columns_cur", suffix))
    class Columns:
        host: str = ts.key()
        metric: str = ts.key()
        time: datetime = ts.timestamp(bucket="hour", label="%Y%m%d%H")
        value: int = ts.value()

    return Columns


COLUMNS = Shape(
    name="columns", declare=_columns,
    key=(Seg("str", "host"), Seg("str", "metric"), Seg("time", "time")),
    time=Time("bucket", bucket=HOUR, label="%Y%m%d%H"), layout="columns",
    values=(Value("value", "int", "value", (1, 2, 3)),),
    entities=tuple({"host": h, "metric": m} for h in ("h1", "h2") for m in ("cpu", "mem")),
    times=tuple(_H0 + d for d in (0, MS, 15 * MINUTE, 30 * MINUTE, HOUR - MS, HOUR)),
    current=True,
    max_versions=2,
)


def _offsets(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("offsets", suffix), family="F",
              layout=ts.offsets(timedelta(minutes=15)), current=_unique("offsets_cur", suffix),
              snapshot=ts.snapshot(_unique("offsets", suffix) + "_S_{period:%Y%m%d}"))
    class Offsets:
        meter: int = ts.key(width=4)
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value()

    return Offsets


OFFSETS = Shape(
    name="offsets", declare=_offsets,
    key=(Seg("int", "meter", width=4), Seg("time", "time")),
    time=Time("bucket", bucket=DAY, label="%Y%m%d"), layout="offsets",
    values=(Value("kwh", "float", "kwh", (0.0, 1.5, 12.34)),),
    entities=({"meter": 7}, {"meter": 42}),
    times=tuple(_D0 + d for d in (0, 15 * MINUTE, 12 * HOUR, DAY - 15 * MINUTE, DAY,
                                  DAY + 15 * MINUTE)) + (_FAR_DAY, _FAR_DAY + DAY - 15 * MINUTE),
    current=True,
    snapshot=True,
)


def _offsets_blob(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("offsets_blob", suffix), family="F",
              layout=ts.offsets(timedelta(hours=1)), serialization=ts.Protobuf(qualifier="e"))
    class OffsetsBlob:
        meter: int = ts.key(width=4)
        time: datetime = ts.timestamp(bucket="day")
        a: int = ts.value()
        b: Optional[str] = ts.value(default=None)  # noqa: UP045

    return OffsetsBlob


OFFSETS_BLOB = Shape(
    name="offsets_blob", declare=_offsets_blob,
    key=(Seg("int", "meter", width=4), Seg("time", "time")),
    time=Time("bucket", bucket=DAY, label="%Y%m%d"), layout="offsets", serialized=True,
    values=(Value("a", "int", "a", (1, -5)),
            Value("b", "str", "b", (None, "", "z"), optional=True)),
    entities=({"meter": 1}, {"meter": 2}),
    times=tuple(_D0 + d for d in (0, HOUR, 23 * HOUR, DAY)) + _far_days(0, 23 * HOUR),
)


# -- tables another program wrote (issue 11): answers must not change -----------------


def _reversed_adopted(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("reversed_adopted", suffix), family="F", event_time_cells=False)
    class ReversedAdopted:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms", reverse=True)
        x: int = ts.value("X")

    return ReversedAdopted


#: REVERSED, read by row key only: no cell timestamp filter, times checked client-side.
REVERSED_ADOPTED = replace(REVERSED, name="reversed_adopted", declare=_reversed_adopted)


def _offsets_adopted(suffix: str, shape: Shape) -> type:
    @ts.model(table=_unique("offsets_adopted", suffix), family="F",
              layout=ts.offsets(timedelta(minutes=15), qualifier="%-Hh%M"),
              event_time_cells=False,
              snapshot=ts.snapshot(_unique("offsets_adopted", suffix) + "_S_{period:%Y%m%d}"))
    class OffsetsAdopted:
        meter: int = ts.key(width=4, column="ID")   # a key column beside the offsets
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value()

    return OffsetsAdopted


#: OFFSETS with a METER:ID-like key column, unpadded qualifiers (0h15 ... 23h45: no
#: qualifier range) and reads by row key and qualifier only.
OFFSETS_ADOPTED = replace(OFFSETS, name="offsets_adopted", declare=_offsets_adopted,
                          current=False)


SHAPES: tuple[Shape, ...] = (ROWS, ROWS_US, REVERSED, FORMAT_FAR, SALTED_TIME, SALTED_KEY,
                             SERIALIZED, CELLS, CELLS_BLOB, COLUMNS, OFFSETS, OFFSETS_BLOB,
                             REVERSED_ADOPTED, OFFSETS_ADOPTED)


def shape_named(name: str) -> Shape:
    return next(s for s in SHAPES if s.name == name)

