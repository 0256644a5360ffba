"""``tsmodel layout``: sample rows of each of a model's tables, as a grid.

A few sample events (made up, or given) are saved by the library itself,
through `Connection.save_all()` (and `build_snapshot()` for snapshot tables),
into an in-memory embedded store; the raw rows are read back and drawn as
row keys × ``family:qualifier`` cells, like the tables of Google's
time-series guide. Nothing here encodes a key or a cell: what the grid shows
is what a save writes.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import tsmodel
from tsmodel import ModelSpec, spec_of
from tsmodel.cli._common import TARGETS, CliError, Command, arg, pairs, parse_time, typed
from tsmodel.cli._grid import FORMATS, SampleCell, TableSample, render
from tsmodel.cli._targets import load_models
from tsmodel.encoding.codecs import Codec
from tsmodel.encoding.keys import IntSegment, StrSegment
from tsmodel.errors import TsModelError
from tsmodel.ground.base import Cell, ReadRequest, Row
from tsmodel.layouts.codec import TableCodec
from tsmodel.plan.events import encode_event

__all__ = ["COMMAND", "TableSample", "SampleCell", "sample_events", "sample_tables"]

#: The first sample event: the weather balloons' first report in the guide.
DEFAULT_START = datetime(2021, 3, 5, 12, 0, tzinfo=timezone.utc)
#: Spacings tried in turn for the sample events: the first the model stores.
_SPACINGS = (timedelta(minutes=1), timedelta(minutes=15), timedelta(hours=1),
             timedelta(days=1), timedelta(days=7), timedelta(days=31))


def _run(args: argparse.Namespace) -> int:
    if args.events < 1 or args.entities < 1:
        raise CliError("--events and --entities must be at least 1")
    found = load_models(args.target)
    every = timedelta(seconds=args.every) if args.every is not None else None
    start = parse_time(args.start, "--start") if args.start else DEFAULT_START
    width = args.width or shutil.get_terminal_size().columns
    drawn = []
    for model in found:
        spec = spec_of(model)
        fixed = typed(spec, spec.key, pairs(args.field, "layout --field"),
                      list(spec.key_fields))
        events = sample_events(model, events=args.events, entities=args.entities,
                               start=start, every=every, fields=fixed)
        text = render(sample_tables(model, events), args.format, width=width)
        drawn.append(_heading(spec.name, args.format) + text if len(found) > 1 else text)
    print("\n".join(drawn), end="")
    return 0


def _heading(name: str, fmt: str) -> str:
    return {"text": f"== {name} ==\n\n", "markdown": f"### {name}\n\n",
            "html": f"<h3>{name}</h3>\n"}[fmt]


# -- sample events ----------------------------------------------------------------------


def sample_events(model: type, *, events: int = 3, entities: int = 1,
                  start: datetime = DEFAULT_START, every: timedelta | None = None,
                  fields: dict[str, Any] | None = None) -> list[Any]:
    """Made-up events of ``model``: ``events`` per entity, ``every`` apart.

    Args:
        model: a model class.
        events: events per entity.
        entities: how many entities (distinct key field values).
        start: the first event time.
        every: the time between events (default: the first of one minute,
            15 minutes, an hour, a day... at which the model stores them).
        fields: key field values every entity shares.

    Returns:
        The model instances, entity by entity, oldest first.

    Raises:
        CliError: a value field's type has no made-up value, or no spacing fits.
    """
    spec = spec_of(model)
    fields = fields or {}
    problem = None
    for spacing in ([every] if every is not None else list(_SPACINGS)):
        for first in (start, _floor(start, spacing)):
            made = [model(**_event_fields(spec, fields, entity, i, first + i * spacing))
                    for entity in range(entities) for i in range(events)]
            problem = _refusal(spec, made)
            if problem is None:
                return made
    raise CliError(f"{spec.name}: the sample events cannot be stored ({problem}); give "
                   "--start and --every")


def _floor(when: datetime, step: timedelta) -> datetime:
    """``when`` floored to a multiple of ``step`` since the epoch (a day: midnight UTC)."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    return when - (when - epoch) % step if step else when


def _refusal(spec: ModelSpec, events: list[Any]) -> str | None:
    """Why the library would refuse to save ``events``, or ``None``."""
    try:
        for event in events:
            encode_event(spec, event)
    except (TsModelError, ValueError, TypeError) as exc:
        return str(exc)
    return None


def _event_fields(spec: ModelSpec, fixed: dict[str, Any], entity: int, i: int,
                  when: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {spec.timestamp_field: when}
    for seg in spec.key.segments:
        if seg.field is not None and seg.field in spec.key_fields:
            out[seg.field] = fixed.get(seg.field, _key_value(seg, entity))
    for n, v in enumerate(spec.values):
        out[v.name] = _value(spec, v.name, v.codec, entity + n, i)
    if spec.version_field is not None:
        out[spec.version_field] = when
    return out


def _key_value(seg: Any, entity: int) -> Any:
    if isinstance(seg, IntSegment):
        return 3698 + entity if seg.width >= 4 else entity + 1
    assert isinstance(seg, StrSegment)
    number = str(entity + 1)
    name = seg.field.replace("_", "-")
    if seg.width is None:
        return name + number
    return (name[:max(seg.width - len(number), 0)] + number)[-seg.width:]


def _value(spec: ModelSpec, name: str, codec: Codec, entity: int, i: int) -> Any:
    kinds = codec.python_type if isinstance(codec.python_type, tuple) else (codec.python_type,)
    if bool in kinds:
        return i % 2 == 0
    if int in kinds and float not in kinds:
        return 100 * (entity + 1) + 7 * i
    if float in kinds:
        return round(20.5 + entity + 0.25 * i, 2)
    if str in kinds:
        return f"{name}-{entity + 1}.{i}"
    if bytes in kinds:
        return f"{name}{i}".encode()
    raise CliError(f"{spec.name}.{name}: no sample value for a {kinds[0].__name__} field "
                   "(its codec's type); draw the model from Python with your own events: "
                   "tsmodel.cli.layout.sample_tables(Model, events)")


# -- the tables they make ---------------------------------------------------------------


def sample_tables(model: type, events: Sequence[Any]) -> list[TableSample]:
    """Save ``events`` into an empty in-memory store; the rows of each table.

    The saves are the library's own (`Connection.save_all()`, and
    `build_snapshot()` for each period of a snapshot model): the rows are
    exactly what they write.

    Args:
        model: the model class.
        events: instances of it.

    Returns:
        One `TableSample` per table: the main table, the alternate-key
        tables, the current-value table, then the snapshot tables.
    """
    from tsmodel.jobs.snapshots import build_snapshot

    spec = spec_of(model)
    with tsmodel.connect(None, default=False) as db:
        db.create_tables(model)
        db.save_all(list(events), progress=False).raise_for_failures()
        tables = [(spec.table, "main", spec.codec, spec.layout.describe())]
        tables += [(alt.table, "alternate-key", alt.codec, alt.layout.describe())
                   for alt in spec.alternates]
        if spec.current_table is not None and spec.current_codec is not None:
            tables.append((spec.current_table, "current-value", spec.current_codec,
                           "a row per entity: its newest event"))
        if spec.snapshot is not None:
            tables += _snapshots(spec, events, db, build_snapshot, model)
        return [_sample(table, role, codec, describes, db.backend.read_rows(ReadRequest(table)))
                for table, role, codec, describes in tables]


def _snapshots(spec: ModelSpec, events: Iterable[Any], db: tsmodel.Connection,
               build: Callable[..., Any], model: type) -> list[tuple[str, str, TableCodec, str]]:
    assert spec.snapshot is not None
    out: list[tuple[str, str, TableCodec, str]] = []
    for us in sorted({spec.codec.time_of(e) for e in events}):
        target = spec.snapshot.spec_for(us)
        if all(target.table != t[0] for t in out):
            build(model, datetime.fromtimestamp(us / 1e6, timezone.utc), connection=db,
                  progress=False)
            out.append((target.table, "snapshot", target.codec, target.layout.describe()))
    return out


def _sample(table: str, role: str, codec: TableCodec, describes: str,
            rows: Iterable[Row]) -> TableSample:
    show = _cell_text(codec)
    found: list[tuple[bytes, dict[str, tuple[SampleCell, ...]]]] = []
    columns: set[tuple[str, bytes]] = set()
    for row in rows:
        key_time = codec.decode_key(row.key).get(codec.time_field)
        cells: dict[str, list[SampleCell]] = {}
        for cell in sorted(row.cells, key=lambda c: (c.family, c.qualifier, -c.timestamp)):
            columns.add((cell.family, cell.qualifier))
            cells.setdefault(_column(cell.family, cell.qualifier), []).append(
                SampleCell(cell.timestamp, show(cell, key_time)))
        found.append((row.key, {k: tuple(v) for k, v in cells.items()}))
    return TableSample(table, role, describes,
                       tuple(_column(f, q) for f, q in sorted(columns)), tuple(found))


def _column(family: str, qualifier: bytes) -> str:
    return f"{family}:{_raw(qualifier)}"


def _cell_text(codec: TableCodec) -> Callable[[Cell, int | None], str]:
    """How a cell's value reads: through the field that declares its column, or
    through the layout's reader (an offset column's reading), else raw."""
    shape = codec.shape
    ser = shape.serialization
    fields: dict[tuple[str, bytes], Codec] = {
        (v.family, v.qualifier): v.codec for v in (*shape.values, *_key_columns(shape))}
    owns = codec.layout.owns_column(shape)
    read = codec.layout.reader(shape)

    def text(cell: Cell, key_time: int | None) -> str:
        column = (cell.family, cell.qualifier)
        try:
            if ser is not None and column == (ser.family, ser.qualifier):
                return _fields(ser.decode(cell.value))
            if column in fields:
                return _shown(fields[column].decode(cell.value))
            if cell.value and owns(*column):
                events = read((cell,), key_time)
                if len(events) == 1:
                    values = [v for v in events[0][1].values() if v is not None]
                    if len(values) == 1:
                        return _shown(values[0])
        except (TsModelError, ValueError, TypeError, LookupError):
            pass  # not the field's bytes: shown raw
        return _raw(cell.value) if cell.value else '""'

    return text


def _key_columns(shape: Any) -> tuple[Any, ...]:
    return tuple(getattr(shape, "key_columns", ()))


def _fields(values: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in values.items()) + "}"


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value) if not value or value != value.strip() else value
    if isinstance(value, (bytes, bytearray)):
        return _raw(bytes(value))
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _raw(data: bytes) -> str:
    """Bytes as text when they are printable UTF-8, else hex (the first 16 bytes)."""
    try:
        text = data.decode("utf-8")
        if text.isprintable():
            return text
    except UnicodeDecodeError:
        pass
    more = f"… ({len(data)} bytes)" if len(data) > 16 else ""
    return "0x" + data[:16].hex() + more


COMMAND = Command(
    "layout", "draw sample rows of a model's tables",
    "Save a few sample events into an in-memory embedded store and draw "
    "the rows they make in each of the model's tables (main, current-value, "
    "alternate-key, snapshot): row keys down, family:qualifier columns "
    "across, each cell's value (decoded by its field's codec) and cell "
    "timestamp; a column's versions newest first, as Bigtable returns them.\n\n"
    "example:\n  tsmodel layout examples/server_metrics.py:ServerMetric "
    "--events 3 --entities 2",
    _run,
    (TARGETS,
     arg("--events", type=int, default=3, metavar="N",
         help="sample events per entity (default: 3)"),
     arg("--entities", type=int, default=1, metavar="N",
         help="entities, each with its own key field values (default: 1)"),
     arg("--start", help="the first event time, ISO 8601 (default: 2021-03-05T12:00Z)"),
     arg("--every", type=float, metavar="SECONDS",
         help="seconds between events (default: the first of 1 min, 15 min, "
              "1 h, 1 day... that the model stores)"),
     arg("--field", action="append", default=[], metavar="NAME=VALUE",
         help="a key field's value for every entity (repeat for several)"),
     arg("--format", choices=FORMATS, default="text",
         help="text (default; fits --width), markdown or html"),
     arg("--width", type=int, metavar="COLUMNS", help="text width (default: the terminal's)")))
