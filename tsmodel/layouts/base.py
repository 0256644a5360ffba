"""The `Layout` strategy: how events become cells and cells become events.

A layout is the one place that knows a storage pattern. Everything else
(the table codec, the write planner, the read compiler, sizing and advice)
asks the layout through the methods below and never checks which layout a
model has. To add a storage pattern, subclass `Layout` and implement
them; ``docs/layouts.md`` walks through one.

Layouts see a model through `TableShape`, the few facts of a table
they need, so they depend on nothing above the encoding layer.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs

from tsmodel import errors
from tsmodel.encoding.codecs import Bool, Float64, Int64
from tsmodel.encoding.serialization import BoundSerialization
from tsmodel.encoding.timestamps import from_micros
from tsmodel.ground.base import Cell, DeleteCells, Mutation, SetCell
from tsmodel.layouts._fragment import Fragment

if TYPE_CHECKING:
    from tsmodel.encoding.buckets import Bucket
    from tsmodel.encoding.values import ValueSpec

__all__ = ["Layout", "TableShape", "Event", "Writer", "Reader", "TimeCheck", "render_value_cells",
           "value_columns", "missing_value", "not_event_time", "bucket_problem",
           "column_name", "stripped_shape",
           "newest_cells", "value_bytes", "CELL_OVERHEAD", "MS"]

MS = 1_000
#: Bytes a cell costs beyond its qualifier and value (timestamp, lengths...).
CELL_OVERHEAD = 16
#: Assumed size of a value whose codec has no fixed size (strings, bytes).
VARIABLE_VALUE_BYTES = 64

#: An event read back: its time in microseconds and its value fields.
Event = tuple[int, dict[str, Any]]
#: A compiled writer: (time in µs, the instance, encoded values) -> the row's mutations.
Writer = Callable[[int, Any, Mapping[str, bytes]], tuple[Mutation, ...]]
#: A compiled check of an event time: why it cannot be stored, or ``None``.
TimeCheck = Callable[[int], "str | None"]
#: A compiled reader: (the row's cells, the bucket start in µs) -> the row's events.
Reader = Callable[[tuple[Cell, ...], "int | None"], list[Event]]


class TableShape(Protocol):
    """What a layout needs to know of a table (a model's spec provides it)."""

    @property
    def name(self) -> str:
        """The model name, for messages."""

    @property
    def family(self) -> str:
        """The default column family."""

    @property
    def timestamp_field(self) -> str:
        """The name of the timestamp field, for messages."""

    @property
    def bucket(self) -> Bucket | None:
        """The time bucket of the row key, or ``None`` for a row per event."""

    @property
    def values(self) -> tuple[ValueSpec, ...]:
        """The value fields stored in the table."""

    @property
    def serialization(self) -> BoundSerialization | None:
        """The serialization of the whole event, or ``None``."""

    @property
    def event_time_cells(self) -> bool:
        """Whether cell timestamps are event times (``False``: another program's times)."""

    @property
    def max_versions(self) -> int | None:
        """The versions per column the table keeps (``None``: every one)."""


class Layout(abc.ABC):
    """How the events of one model are laid out in the cells of a table.

    Subclasses are frozen value objects: two equal layouts lay out equally.
    """

    #: A short name for messages and ``explain()`` output.
    name: ClassVar[str]
    #: The layout as a declaration spells it, for messages (``ts.cells()``); empty:
    #: its class's name, called (``TimeColumns()``).
    spelled: ClassVar[str] = ""
    #: Whether a row holds the events of a time bucket (else a row per event).
    bucketed: ClassVar[bool] = True
    #: Versions per column a read needs (``None``: every version).
    read_versions: ClassVar[int | None] = None
    #: Whether a read's ``only(...)`` can become a column filter.
    columns_are_fields: ClassVar[bool] = False
    #: Whether an event's qualifiers depend on its values, so that a correction
    #: (same key and time, new values) must delete the cells it no longer writes.
    cells_depend_on_values: ClassVar[bool] = False
    #: Whether an event's time is read from its cell timestamp (else from the
    #: row key or the qualifier): such a layout needs event-time cells.
    reads_time_from_cells: ClassVar[bool] = True

    @property
    def plain_event_rows(self) -> bool:
        """Whether a row holds one event whose cells all carry the key's time floored
        to the millisecond, a column per value field (the reader's common case,
        which the columnar decoder reads without the reader)."""
        return False

    #: Whether `render_writer` lays the cells out from the values' locals and the
    #: event time alone, and raises nothing: the event's checks can then run
    #: apart from laying out its cells (`tsmodel.layouts.render_write`).
    writer_of_values: ClassVar[bool] = False
    #: Whether `render_writer` lays an event out, when every value is required and
    #: none is serialized, as one `SetCell` per value field in declaration order,
    #: all at one timestamp (`render_value_cells`): the table's `DeclaredCells`.
    cells_per_value: ClassVar[bool] = False

    # -- declaration ------------------------------------------------------------------

    def check(self, shape: TableShape) -> str | None:
        """Why the table cannot use this layout, or ``None``: what it needs beyond
        a time bucket or none, which `bucketed` says (`bucket_problem()`)."""
        return None

    @abc.abstractmethod
    def describe(self) -> str:
        """The layout in words, as the docs and ``explain()`` show it."""

    # -- writes -----------------------------------------------------------------------

    def time_check(self, shape: TableShape) -> TimeCheck | None:
        """The check of an event time (µs) before a write, or ``None`` when any time fits.

        The check returns why the time cannot be stored, or ``None``. Bucket
        layouts hold whole milliseconds (the cell timestamp is the time).
        """
        return _whole_ms


    def render_writer(self, shape: TableShape, src: Fragment, values: Mapping[str, str]) -> str:
        """Render, into the table codec's generated encoder, how an event's cells are laid out.

        The table codec's encoder is Python source generated once per table
        at declaration (`tsmodel.layouts.render_write`); each layout adds the
        lines that lay out one event's cells. They run with the locals ``us``
        (the event time in µs, checked by `time_check`), ``entity`` (the
        instance, for a serialization that needs the values as given) and,
        for each value field, the local ``values[name]``: its bytes, encoded
        and checked by its codec, or ``None`` (an optional value that is
        ``None``). Emit lines with ``src.emit(line, depth)``, bind objects
        with ``src.bind(obj, hint)`` and take fresh locals with
        ``src.local(hint)``; work out here what is the same for every event.

        Returns:
            The expression of the event's mutations (a tuple).

        By default, a call of the function `writer()` returns (for a layout
        that writes its cells by hand).
        """
        write = src.bind(self.writer(shape), f"write_{self.name}")
        present = [f"{name!r}: {local}" for name, local in values.items()]
        optional = {v.name for v in shape.values if v.optional}
        if optional:
            encoded = ("{k: v for k, v in ((" + "), (".join(
                f"{name!r}, {local}" for name, local in values.items()) + "),) if v is not None}")
        else:
            encoded = "{" + ", ".join(present) + "}"
        return f"{write}(us, entity, {encoded})"

    def writer(self, shape: TableShape) -> Writer:
        """The function that writes one event's cells, for a layout without `render_writer`.

        It takes the event time ``us`` (microseconds), the model instance and
        the non-``None`` value fields encoded by their codecs (a dict); it
        returns the row's mutations. The shipped layouts render their writing
        into the generated encoder instead (`render_writer`).
        """
        raise NotImplementedError(f"layout {self.name!r} implements neither render_writer() "
                                  "nor writer()")

    # -- reads ------------------------------------------------------------------------

    @abc.abstractmethod
    def reader(self, shape: TableShape) -> Reader:
        """The function that reads one row's events, compiled for ``shape``.

        The reader takes the row's cells (as a read with this layout's
        filters returns them) and the start of the row's bucket in µs (for
        bucket layouts; else the key's time or ``None``), and returns the
        row's events, oldest first, each as ``(time in µs, value fields)``
        with a fresh dict the caller may change.
        """

    def history_reader(self, shape: TableShape) -> Reader | None:
        """The reader of every version of a row's events, or ``None`` without one.

        For a model whose cells carry version times (``ts.version()``): the
        reader gets every cell version of the row and returns one entry per
        version, oldest first, each ``(version time in µs, value fields)`` as
        the event stood then. Layouts that keep other things in cell versions
        return ``None`` (the default), and such models are refused.
        """
        return None

    def cell_timestamp(self, us: int) -> int:
        """The cell timestamp of an event at ``us``: the time floored to the millisecond."""
        return us // MS * MS

    def row_cell_timestamp(self, shape: TableShape, us: int) -> int:
        """The timestamp of a row-level cell (a key column) written with an event at ``us``.

        In a bucket row, the bucket's start: every event of the bucket writes the
        same cell, so the row keeps one version. Else the event's cell timestamp.
        """
        if self.bucketed and shape.bucket is not None:
            return shape.bucket.start(us) // MS * MS
        return self.cell_timestamp(us)

    def row_column_problem(self, shape: TableShape, family: str,
                           qualifier: bytes) -> str | None:
        """Why a row-level column (a key column) cannot stand beside the events, or ``None``.

        A layout whose reader could take the column for an event says so here.
        """
        return None

    def version_cut(self, shape: TableShape) -> int | None:
        """The version limit a read must see whole to leave out the events it may
        have cut in part, or ``None`` (the default): where events keep a cell
        version each in several columns and no column holds every event (every
        value optional), an event older than the oldest version a column
        keeps at the limit may have lost its cell there (`Cells`). A read
        then fetches the row's kept versions up to its end (not to the
        range's) and checks the range's end on the client."""
        return None

    def read_columns(self, shape: TableShape) -> frozenset[tuple[str, bytes]] | None:
        """The columns a read of the table's events needs, where a column filter
        keeping only them loses nothing; ``None`` (the default) where other
        columns matter: in a row per event, a row holding only columns no field
        declares is refused as no event of the model, never left out unseen."""
        return None

    def owns_column(self, shape: TableShape) -> Callable[[str, bytes], bool]:
        """The test of a column that holds the table's events: ``(family, qualifier)``
        in, whether this layout reads it (the others are no field's: a retired
        field's column, another writer's). By default the value columns (or the
        serialized one) and the empty marker cell's column."""
        owned = value_columns(shape) | {(shape.family, MARKER)}
        return lambda family, qualifier: (family, qualifier) in owned

    def value_column(self, shape: TableShape, name: str) -> tuple[str, bytes | None] | None:
        """The column whose cells hold value field ``name`` as its codec encodes it, so
        that a server-side value filter on them finds the rows of events with a
        matching value: ``(family, qualifier)``, the qualifier ``None`` for any
        column of the family; ``None`` where the values are elsewhere (a
        serialized blob, a qualifier). By default a column per value field."""
        if shape.serialization is not None:
            return None
        v = next(v for v in shape.values if v.name == name)
        return v.family, v.qualifier

    def qualifier_range(self, shape: TableShape, start_us: int,
                        end_us: int) -> tuple[bytes, bytes] | None:
        """A qualifier range selecting exactly ``[start, end)`` in one row, if one exists."""
        return None

    # -- sizes ------------------------------------------------------------------------

    def event_bytes(self, shape: TableShape) -> int:
        """The estimated bytes one event adds to a row."""
        ser = shape.serialization
        if ser is not None:
            blob = sum(value_bytes(v) + 2 for v in shape.values)
            return blob + len(ser.qualifier) + CELL_OVERHEAD
        return sum(len(v.qualifier) + value_bytes(v) + CELL_OVERHEAD for v in shape.values)

    def events_per_row(self, shape: TableShape, events: float) -> float:
        """How many of ``events`` (an entity's events in one bucket) one row holds."""
        return events if self.bucketed else 1

    def cells_per_event(self, shape: TableShape) -> int:
        """How many cells one event writes."""
        return 1 if shape.serialization is not None else len(shape.values)


def _whole_ms(us: int) -> str | None:
    if us % MS:
        return ("has microseconds; cell timestamps hold whole milliseconds: round it "
                "with tsmodel.floor_timestamp(dt)")
    return None


def value_bytes(v: ValueSpec) -> int:
    """The size of one encoded value (an estimate for variable-size codecs)."""
    if isinstance(v.codec, (Int64, Float64)):
        return 8
    if isinstance(v.codec, Bool):
        return 1
    return VARIABLE_VALUE_BYTES


# -- cells of value fields, shared by the layouts ---------------------------------------


#: The qualifier of the empty cell that makes an event without value cells exist.
MARKER = b""


def render_value_cells(shape: TableShape, src: Fragment, values: Mapping[str, str], *,
                       erase_older: bool = False, exact_times: bool = False) -> str:
    """Render the cells of a column per value field (or of one serialized cell).

    The shared `Layout.render_writer` of `rows()` and `cells()`: see there for
    ``src`` and ``values``; returns the expression of the event's mutations.

    Args:
        erase_older: a ``None`` value erases every older version of its column
            too (a row that holds one event: its older versions are older
            events of the row, as in a current-value row), not only this
            event's cell (a bucket row's other events stay).
        exact_times: cell timestamps are the event time in µs times 1000, a
            whole number of "milliseconds" ordering events by their full
            microsecond time (current-value rows of ``unit="us"`` models);
            else the event time floored to the millisecond.
    """
    ts = src.local("ts")
    src.emit(f"{ts} = us * {MS}" if exact_times else f"{ts} = us // {MS} * {MS}")
    ser = shape.serialization
    if ser is not None:
        serialize = src.bind(ser.encode_entity, "serialize")
        cell = src.build(SetCell, repr(ser.family), repr(ser.qualifier), ts, f"{serialize}(entity)")
        return f"({cell},)"
    if not shape.values:
        # Every field is in the row key (an alternate key promoting every value):
        # one empty cell makes the row exist.
        return f"({src.build(SetCell, repr(shape.family), repr(MARKER), ts, repr(b''))},)"

    def put(v: ValueSpec) -> str:
        return src.build(SetCell, repr(v.family), repr(v.qualifier), ts, values[v.name])

    optional = [v for v in shape.values if v.optional]
    cells = src.local("cells")
    if not optional:  # every value has a cell
        src.emit(f"{cells} = (")
        for v in shape.values:
            src.emit(put(v) + ",", 1)
        src.emit(")")
        return cells
    # A None value erases its column's cell at the event's time (all older versions
    # too with erase_older), so a re-save with None is exact and idempotent. When
    # every value is optional, an event whose values are all None has no value
    # cell: the empty marker cell makes it exist (else it would be lost). Events
    # with a value erase the marker at their time (a corrected event), and a row
    # of one event keeps no older event's marker.
    delete = src.bind(DeleteCells, "DeleteCells")
    markers = len(optional) == len(shape.values)
    erase_from = "0" if erase_older else ts
    if not markers:
        src.emit("if " + " and ".join(f"{values[v.name]} is not None" for v in optional)
                 + ":")
        src.emit(f"{cells} = (" + "".join(put(v) + ", " for v in shape.values) + ")", 1)
        src.emit("else:")
        depth = 1
    else:
        depth = 0
    src.emit(f"{cells} = (", depth)
    for v in shape.values:
        if v.optional:
            src.emit(f"{delete}({v.family!r}, {v.qualifier!r}, {erase_from}, {ts} + {MS}) "
                     f"if {values[v.name]} is None else {put(v)},", depth + 1)
        else:
            src.emit(put(v) + ",", depth + 1)
    src.emit(")", depth)
    if markers:
        family = shape.family
        src.emit("if " + " is None and ".join(values[v.name] for v in shape.values)
                 + " is None:")
        if erase_older:  # (an end of 0 would mean "no end" on Bigtable)
            src.emit(f"if {ts}:", 1)
            src.emit(f"{cells} += ({delete}({family!r}, {MARKER!r}, 0, {ts}),)", 2)
        src.emit(f"{cells} += ({src.build(SetCell, repr(family), repr(MARKER), ts, repr(b''))},)",
                 1)
        src.emit("else:")
        src.emit(f"{cells} += ({delete}({family!r}, {MARKER!r}, {erase_from}, {ts} + {MS}),)",
                 1)
    return cells


def bucket_problem(layout: Layout, shape: TableShape) -> str | None:
    """Why the table cannot use ``layout`` for its time bucket, or ``None``: a
    `bucketed` layout's rows each hold a bucket of events, so it needs
    one; a row per event has none. Checked before `Layout.check()`."""
    if layout.bucketed and shape.bucket is None:
        spelled = layout.spelled or f"{type(layout).__name__}()"
        return (f"layout={spelled} needs ts.timestamp(bucket=...) on field "
                f"{shape.timestamp_field!r}")
    if not layout.bucketed and shape.bucket is not None:
        return (f"a bucket (ts.timestamp(bucket=...) on field {shape.timestamp_field!r}) "
                "needs a bucket layout: layout=ts.cells(), ts.columns() or ts.offsets(step)")
    return None


def value_columns(shape: TableShape) -> frozenset[tuple[str, bytes]]:
    """The columns that hold an event's values: a column per value field, or the
    serialized event's one column; and the empty marker cell's column, where an
    event may have no value cell (no value must have one, or none stored)."""
    ser = shape.serialization
    if ser is not None:
        return frozenset({(ser.family, ser.qualifier)})
    columns = {(v.family, v.qualifier) for v in shape.values}
    if not any(v.stored for v in shape.values):
        # Every value optional (or defaulted: its events stored before the field
        # existed may be markers of a model whose values were all optional).
        columns.add((shape.family, MARKER))
    return frozenset(columns)


def newest_cells(cells: tuple[Cell, ...]) -> dict[tuple[str, bytes], Cell]:
    """The newest cell of each column."""
    newest: dict[tuple[str, bytes], Cell] = {}
    for cell in cells:
        col = (cell.family, cell.qualifier)
        if col not in newest or cell.timestamp > newest[col].timestamp:
            newest[col] = cell
    return newest


class _Present:
    """The codec of a cell read with its value stripped: there, its value unknown."""

    python_type: type | tuple[type, ...] = object
    name = "present"

    def encode(self, value: Any) -> bytes:
        raise TypeError("a cell read with its value stripped is never written")

    def decode(self, data: bytes) -> bool:
        return True


class _StrippedBlob(BoundSerialization):
    """A serialized event read with its value stripped: every value there."""

    def decode(self, data: bytes) -> dict[str, Any]:
        return {v.name: True for v in self.fields}


@attrs.frozen
class _StrippedShape:
    name: str
    family: str
    timestamp_field: str
    bucket: Bucket | None
    values: tuple[ValueSpec, ...]
    serialization: BoundSerialization | None
    event_time_cells: bool
    max_versions: int | None


def stripped_shape(shape: TableShape) -> TableShape:
    """``shape`` as a read with values stripped sees it (``count()``).

    Each value cell decodes as ``True`` (there), a serialized event as every
    value there: a layout's reader of this shape refuses a row for what its
    cells' columns and timestamps say, as its reader of ``shape`` does the
    row read whole (a required value's cell missing, cells of another
    clock, no value cell nor marker), without the value bytes.
    """
    ser = shape.serialization
    blob = None if ser is None else _StrippedBlob(ser.family, ser.qualifier, ser.message_class,
                                                  ser.fields)
    present = _Present()
    return _StrippedShape(shape.name, shape.family, shape.timestamp_field, shape.bucket,
                          tuple(attrs.evolve(v, codec=present) for v in shape.values), blob,
                          shape.event_time_cells, shape.max_versions)


def missing_value(shape: TableShape, name: str) -> errors.CellDecodingError:
    """The error for a row that lacks a required value's cell."""
    v = next(v for v in shape.values if v.name == name)
    ser = shape.serialization
    where = column_name(ser.family, ser.qualifier) if ser is not None else \
        column_name(v.family, v.qualifier)
    return errors.CellDecodingError(
        f"the row has no cell for {name!r}, a required value: not an event of this model "
        "(a foreign or damaged row, or a column deleted by hand)", field=name, column=where)


def not_event_time(cell: Cell, us: int, whose: str) -> errors.CellDecodingError:
    """The error for a cell whose timestamp is not the event time ``us`` of ``whose``
    (the row key, an offset column): a table written with another clock, which
    range reads filtering by cell timestamp would answer in part."""
    return errors.CellDecodingError(
        f"cell timestamp {cell.timestamp} us ({from_micros(cell.timestamp // MS * MS)}) is not "
        f"the time of {whose} ({from_micros(us // MS * MS)}): the table's cells do not carry "
        "event times (written by another program with its clock?), so range reads filtering "
        "by cell timestamp would miss events. Declare event_time_cells=False on the model",
        column=column_name(cell.family, cell.qualifier))


def column_name(family: str, qualifier: bytes) -> str:
    """``family:qualifier`` for messages."""
    return f"{family}:{qualifier.decode('utf-8', 'backslashreplace')}"
