"""The table codec: one table's row keys and cells, compiled once per model.

A `TableCodec` joins a row key layout, a `Layout`
and the model's value encoder into the one path by which instances become a
table's row mutations and that table's rows become instances again. Models
compile their codecs at declaration (main table, current-value table, each
alternate-key table, the snapshot template); every writer (saves, repairs,
snapshot jobs) and every reader (queries, jobs, the CLI) goes through them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from operator import itemgetter
from types import SimpleNamespace
from typing import Any, NamedTuple, TypeVar

from tsmodel import errors
from tsmodel.encoding.codecs import fixed_width
from tsmodel.encoding.keys import (
    ConstantSegment,
    KeyLayout,
    SegmentValueError,
    StrSegment,
    TimestampSegment,
)
from tsmodel.encoding.timestamps import EPOCH, EpochEncoding, to_micros
from tsmodel.encoding.values import MAX_VALUE_BYTES, ValueEncoder, ValueSpec
from tsmodel.ground.base import (
    Cell,
    CellBatch,
    DeclaredCells,
    Mutation,
    Row,
    RowMutation,
    SetCell,
)
from tsmodel.layouts.base import (
    Event,
    Layout,
    Reader,
    TableShape,
    column_name,
    missing_value,
    newest_cells,
    stripped_shape,
)
from tsmodel.layouts.render_read import (
    render_batch_columns,
    render_batch_instances,
    render_bucket_batch_columns,
    render_columns,
    render_raw_columns,
    render_rows,
)
from tsmodel.layouts.render_write import (
    _time_refused,
    render_column_check,
    render_event_encoder,
    render_event_parts,
    render_row_encoder,
)

__all__ = ["TableCodec", "EncodedRow", "MAX_VALUE_BYTES", "SALT_FIELD"]

M = TypeVar("M")
_US = timedelta(microseconds=1)
#: Where `KeyLayout.decode()` puts a key's salt.
SALT_FIELD = "__salt__"


class EncodedRow(NamedTuple):
    """One validated event encoded for one table (a tuple: cheap to build).

    Attributes:
        table: the table.
        key: the row key.
        timestamp: the event time in microseconds.
        mutations: the row's cell mutations.
    """

    table: str
    key: bytes
    timestamp: int
    mutations: tuple[Mutation, ...]

    def row_mutation(self) -> RowMutation:
        return RowMutation(self.key, self.mutations)


def _constant_name(data: bytes) -> str:
    """The name of a constant key segment among the encoded parts of a key."""
    return "\0constant " + data.hex()


class TableCodec:
    """The row key and cell codec of one table of one model.

    Args:
        shape: the model's facts the layout needs.
        table: the table name.
        key: the table's row key layout.
        layout: how events become the table's cells.
        time_field: the model's timestamp field.
        values: the model's value encoder (shared by its tables).
        like: the model's main-table codec, for a companion table: where both
            lay cells out alike, `row()` shares the main row's cells.
        key_columns: key fields (or the timestamp) also stored as columns: each
            row gets their cells, and a read checks them against the key.
        version_field: the field whose time stamps every cell of an event (its
            amendments kept as cell versions), or ``None``.
        strict_columns: refuse a row holding a cell of a column that no field
            declares (``@ts.model(unknown_columns="error")``); else such cells
            are ignored.
    """

    __slots__ = ("shape", "table", "key", "layout", "time_field", "values",
                 "_encoders", "_known_keys", "_time_digits", "_constants", "_joins_plainly",
                 "_join", "_read",
                 "_time_check", "_like", "_required", "_defaulted", "witness", "_key_columns",
                 "_version_field", "_history", "_owns", "_rendered_records",
                 "_rendered_decode", "_rendered_columns", "_rendered_batches", "_encode",
                 "_batch_instances",
                 "_events", "_parts",
                 "_columns", "_stripped_read", "declared_cells", "renderings")

    def __init__(self, shape: TableShape, *, table: str, key: KeyLayout, layout: Layout,
                 time_field: str, values: ValueEncoder, like: TableCodec | None = None,
                 key_columns: tuple[ValueSpec, ...] = (),
                 version_field: str | None = None, strict_columns: bool = False) -> None:
        self.shape = shape
        self.table = table
        self.key = key
        self.layout = layout
        self.time_field = time_field
        self.values = values
        encoders = []
        #: Per str key field, the strings its encoder keeps the bytes of
        #: (`StrSegment.keeping_encoder()`): a generated encoder looks there first.
        self._known_keys: dict[str, dict[str, bytes]] = {}
        #: The event time's segment as epoch digits (`EpochEncoding.arithmetic()`),
        #: which a generated encoder writes inline; ``None`` for any other encoding.
        self._time_digits: tuple[int, int | None, int, int, int] | None = None
        for seg in key.segments:
            if seg.field is None:
                continue
            if isinstance(seg, StrSegment):
                encode, self._known_keys[seg.field] = seg.keeping_encoder()
            else:
                encode = seg.encoder()
            if seg.field == time_field and isinstance(seg, TimestampSegment) and \
                    isinstance(seg.encoding, EpochEncoding):
                self._time_digits = seg.encoding.arithmetic()
            encoders.append((seg.field, encode, seg.field == time_field))
        self._encoders = tuple(encoders)
        # A constant segment's bytes stand in the parts under a name no field has,
        # the same in every table of the model, so a key is one C-level join.
        self._constants = {_constant_name(seg.encode(None)): seg.encode(None)
                           for seg in key.segments if isinstance(seg, ConstantSegment)}
        self._joins_plainly = key.salt() is None
        self._join = self._joiner()
        self._read = layout.reader(shape)
        self._time_check = layout.time_check(shape)
        self._like = like if like is not None and like.layout == layout else None
        self._required = tuple(v.name for v in values.values if v.stored)
        #: Values that read as their declared default from an event without their
        #: cell (stored before the field existed).
        self._defaulted = tuple(v.name for v in values.values if v.has_default)
        #: The required value whose cell every event of the table has: a read
        #: of ``only(...)`` reads its column too, so that an event whose chosen
        #: values are all None is found, and one past a version limit is not.
        self.witness: str | None = self._required[0] if self._required else None
        self._key_columns = {(k.family, k.qualifier): k for k in key_columns}
        self._version_field = version_field
        self._history = layout.history_reader(shape) if version_field is not None else None
        if version_field is not None:
            self._like = None  # cells stamped with version times are this table's own
        #: The cells of every event, where the layout declares them plainly: a
        #: backend may render its own writer of them (`DeclaredCells`).
        self.declared_cells = DeclaredCells(f"{shape.name}.{table}", tuple(
            (v.family, v.qualifier) for v in shape.values),
            getattr(layout, "exact_times", False),
            tuple(fixed_width(v.codec) for v in shape.values)) if (
            layout.cells_per_value and shape.serialization is None and shape.values
            and not any(v.optional for v in shape.values) and not key_columns
            and version_field is None) else None
        #: The test of a column some field declares, when unknown columns are refused.
        self._owns = layout.owns_column(shape) if strict_columns else None
        #: The reader of rows read with values stripped (`count_events()`), made on first use.
        self._stripped_read: Reader | None = None
        # The one decoding of the table's rows, rendered from all of the above.
        self._rendered_records, self._rendered_decode = render_rows(self)
        self._rendered_columns: dict[tuple[str, ...], tuple[Any, Any]] = {}
        self._rendered_batches: dict[tuple[str, ...], Callable[..., Any] | None] = {}
        self._batch_instances: Callable[..., Any] | None | bool = False  # False: not yet
        #: The generated encoder of this table, rendered at its first use.
        self._encode: Callable[[Any], EncodedRow] | None = None
        self._events: dict[tuple[TableCodec | None, Callable[..., Any]],
                           Callable[[Any], Any]] = {}
        self._parts: dict[tuple[TableCodec | None, Callable[..., Any]],
                          tuple[Callable[[Any], Any], Callable[[Any, Any], Any]] | None] = {}
        self._columns: dict[TableCodec | None,
                            tuple[tuple[str, ...], Callable[..., Any]] | None] = {}
        #: Functions rendered from this declaration by the layers above (the frame
        #: encoder of `tsmodel.io.frame_columns`), by name; listed by `generated()`.
        self.renderings: dict[str, Any] = {}

    @property
    def model(self) -> str:
        return self.shape.name

    # -- writes ---------------------------------------------------------------------

    def encode(self, entity: Any) -> EncodedRow:
        """Validate ``entity`` and encode it for this table.

        Through the encoder generated from the table's declaration
        (`encoder()`).

        Raises:
            ValidationError: a value cannot be stored (a `FieldTypeError`
                for a wrong type, a `KeyEncodingError` for a key field).
        """
        return (self._encode or self.encoder())(entity)

    def encoder(self) -> Callable[[Any], EncodedRow]:
        """The generated ``encode(entity)`` of this table (`tsmodel.layouts.render_write`),
        rendered and compiled once, at its first use."""
        if self._encode is None:
            self._encode = render_row_encoder(self, EncodedRow)
        return self._encode

    def generated(self) -> list[Callable[..., Any]]:
        """The functions generated so far for this table's codec (their source: `rendered()`)."""
        found = [self.encoder(), *self._events.values(),
                 *(f for parts in self._parts.values() if parts is not None for f in parts),
                 *(c[1] for c in self._columns.values() if c is not None)]
        for slot in self.__slots__:  # the read side's, wherever they are kept
            value = getattr(self, slot, None)
            items = value.values() if isinstance(value, dict) else \
                value if isinstance(value, (tuple, list)) else (value,)
            for item in items:
                if callable(item) and hasattr(item, "__tsmodel_source__") and \
                        all(item is not f for f in found):
                    found.append(item)
        return found

    def event_encoder(self, current: TableCodec | None,
                      make: Callable[..., M]) -> Callable[[Any], M]:
        """The generated encoder of a whole event of this (main) table's model.

        It validates an instance and returns ``make(entity, table, key, us,
        cells)``, with a current-value table ``make(..., current.table,
        current_key, current_cells)``: the rows share the event's time, key
        segments and encoded values (and cells, where both lay them out
        alike). Rendered once per ``(current, make)``.
        """
        found = self._events.get((current, make))
        if found is None:
            found = self._events[(current, make)] = render_event_encoder(self, current, make)
        return found

    def event_parts(self, current: TableCodec | None, make: Callable[..., M]
                    ) -> tuple[Callable[[Any], Any], Callable[[Any, Any], M]] | None:
        """`event_encoder()` in two parts, ``check(entity)`` and ``lay_out(entity,
        checked)`` (`tsmodel.layouts.render_write.render_event_parts`), or ``None``
        where this table's rows cannot be laid out apart from their checks."""
        key = (current, make)
        if key not in self._parts:
            self._parts[key] = render_event_parts(self, current, make)
        return self._parts[key]

    def column_check(self, current: TableCodec | None
                     ) -> tuple[tuple[str, ...], Callable[..., list[tuple[Any, ...]]]] | None:
        """The check of `event_parts()` rendered column-wise: the fields it reads and
        ``check_columns(*columns)`` (`tsmodel.layouts.render_write.render_column_check`),
        or ``None`` where the event parts are not rendered. Rendered once per ``current``."""
        if current not in self._columns:
            self._columns[current] = render_column_check(self, current)
        return self._columns[current]

    def time_of(self, entity: Any) -> int:
        """The event time of ``entity`` in microseconds."""
        raw = getattr(entity, self.time_field)
        if type(raw) is datetime and raw.tzinfo is timezone.utc:
            return (raw - EPOCH) // _US
        return self.time_micros(raw)

    def time_micros(self, raw: Any) -> int:
        """A value of the time field in microseconds.

        Raises:
            FieldTypeError: not a time (naming the model and the field).
            ValidationError: a time out of range.
        """
        try:
            return to_micros(raw)
        except TypeError as exc:
            raise errors.FieldTypeError(str(exc), model=self.model, field=self.time_field,
                                        value=raw) from None
        except ValueError as exc:
            raise errors.ValidationError(str(exc), model=self.model, field=self.time_field,
                                         value=raw) from None

    def check_event(self, key_fields: Mapping[str, Any], raw: Any) -> int:
        """The time ``raw`` in µs of an event of these key fields, refused as a save
        refuses it: its key segments (`key_parts()`) and the layout's time check.

        Raises:
            ValidationError: the time (or a key field) cannot be stored.
        """
        us = self.time_micros(raw)
        named = SimpleNamespace(**key_fields, **{self.time_field: raw})
        self.key_parts(named, us)
        if self._time_check is not None:
            problem = self._time_check(us)
            if problem is not None:
                raise _time_refused(self.model, self.time_field, named, problem)
        return us

    def key_parts(self, entity: Any, us: int) -> dict[str, bytes]:
        """The encoded key segments of ``entity`` by field."""
        parts: dict[str, bytes] = self._constants.copy()
        name = ""
        try:
            for name, encode, is_time in self._encoders:
                parts[name] = encode(us if is_time else getattr(entity, name))
        except SegmentValueError as exc:
            value = getattr(entity, name, None)
            raise errors.key_error(exc, model=self.model, field=name, value=value) from None
        return parts

    def join(self, parts: Mapping[str, bytes]) -> bytes:
        """The row key from encoded segments (`key_parts()` of this model)."""
        return self._join(parts)

    def _joiner(self) -> Callable[[Mapping[str, bytes]], bytes]:
        if not self._joins_plainly:
            return self._join_salted  # the salt is computed from the other segments
        names = [s.field if s.field is not None else _constant_name(s.encode(None))
                 for s in self.key.segments]
        if len(names) == 1:
            return itemgetter(names[0])
        get, sep = itemgetter(*names), self.key.separator
        return lambda parts: sep.join(get(parts))

    def _join_salted(self, parts: Mapping[str, bytes]) -> bytes:
        try:
            return self.key.join(parts)
        except SegmentValueError as exc:  # another program's salt function refused the key
            raise errors.key_error(exc, model=self.model, field=getattr(exc, "field", None),
                                   value=getattr(exc, "value", None)) from exc.__cause__

    def _version_time(self, entity: Any) -> int:
        """The version time of ``entity`` (µs): the timestamp of its cells."""
        name = self._version_field
        assert name is not None
        raw = getattr(entity, name)
        try:
            us = to_micros(raw)
        except TypeError as exc:
            raise errors.FieldTypeError(str(exc), model=self.model, field=name,
                                        value=raw) from None
        except ValueError as exc:
            raise errors.ValidationError(str(exc), model=self.model, field=name,
                                         value=raw) from None
        if us < 0 or us % 1_000:
            raise errors.ValidationError(
                f"{raw} is not a cell timestamp: the version time stamps the event's cells, "
                "whole milliseconds from 1970 on (round it with tsmodel.floor_timestamp(dt))",
                model=self.model, field=name, value=raw)
        return us

    def _key_cells(self, entity: Any, us: int) -> tuple[Mutation, ...]:
        """The cells of the key columns: the key's values (already checked by the key)."""
        ts = self.layout.row_cell_timestamp(self.shape, us)
        out = []
        for k in self._key_columns.values():
            item = getattr(entity, k.name)
            try:
                data = k.codec.encode(item)
            except (ValueError, TypeError, OverflowError) as exc:  # a column_codec of the app's
                raise errors.ValidationError(
                    f"the codec of its column {column_name(k.family, k.qualifier)} refused the "
                    f"value: {exc}", model=self.model, field=k.name, value=item) from None
            out.append(SetCell(k.family, k.qualifier, ts, data))
        return tuple(out)

    # -- reads ----------------------------------------------------------------------

    def decode_key(self, key: bytes) -> dict[str, Any]:
        """The typed fields of a row key (timestamps in µs, the salt under ``__salt__``).

        Raises:
            KeyDecodingError: the key does not match this table's key layout.
        """
        try:
            return self.key.decode(key)
        except SegmentValueError as exc:
            raise errors.KeyDecodingError(
                f"{self.model}: row key {key!r} of table {self.table!r}: {exc}") from None

    def check_key(self, key: bytes) -> bytes:
        """``key``, checked as `records()` checks a row's key (a count reads no cells).

        Raises:
            KeyDecodingError: the key does not match this table's key layout,
                or (salted) is not under the salt value its fields give.
        """
        keys = self.decode_key(key)
        if not self._joins_plainly:
            self._check_salt(key, keys)
        return key

    def decode(self, cls: Callable[..., M], row: Row,
               only: tuple[str, ...] | None = None, history: bool = False) -> list[M]:
        """The events of one row as instances, oldest first.

        A row per event gives one event (the cells of its newest timestamp); a
        bucket row gives its events. Value fields without a cell, or left out
        by ``only``, are ``None``. With ``history`` (a model with a version
        field), every version of the row's event, oldest first.

        Raises:
            KeyDecodingError: the row key does not match this table's key layout.
            CellDecodingError: a cell is not what its field declares, or a row
                lacks a required value; the error names the model, the table,
                the row key and the column.
        """
        return self._rendered_decode(cls, row, only, history)

    def records(self, row: Row, only: tuple[str, ...] | None = None, history: bool = False,
                datetimes: bool = False) -> list[dict[str, Any]]:
        """The events of one row as ``{field: value}`` records, oldest first.

        The one decoding of a row: `decode()` builds instances of these
        records, the columnar exports (`tsmodel.io`) columns. A record
        holds the key fields, the time, the version time (a model with a
        version field) and the value fields read; a defaulted value without a
        cell is left out (the model's default applies). Times are µs since
        the epoch, or UTC datetimes with ``datetimes``.

        Raises:
            KeyDecodingError, CellDecodingError: as `decode()`.
        """
        return self._rendered_records(row, only, history, datetimes)

    def column_decoders(self, names: tuple[str, ...]) -> tuple[Callable[..., bool] | None,
                                                               Callable[..., Any]]:
        """The columnar decoders of fields ``names`` (rendered once per set of names).

        Returns:
            ``(raw, decoded)``: ``raw(rows, columns)`` collects undecoded value
            bytes of plain event rows (``None`` where the layout has no such
            rendering; ``False`` back for rows it leaves to ``decoded``), and
            ``decoded(rows, only, history, columns)`` reads rows as `records()`
            does into a list per field (see `tsmodel.layouts.render_read`).
        """
        found = self._rendered_columns.get(names)
        if found is None:
            found = self._rendered_columns[names] = (render_raw_columns(self, names),
                                                     render_columns(self, names))
        return found

    def batch_decoder(self, names: tuple[str, ...]) -> Callable[..., Any] | None:
        """The collector of a `tsmodel.ground.base.CellBatch` 's undecoded columns of
        fields ``names`` (`render_batch_columns()`, for a bucket layout
        `render_bucket_batch_columns()`; ``None`` where the layout has none),
        rendered once per set of names. Rows of a model with optional or
        defaulted values are collected where every row of a batch has a cell of
        every value field (``every``); a batch with a row without one is not."""
        if names not in self._rendered_batches:
            if self.layout.bucketed:
                found = render_bucket_batch_columns(self, names)
            else:  # optional values too, in a batch whose rows have every value's cell
                found = render_batch_columns(self, names) or \
                    render_batch_columns(self, names, every=True)
            self._rendered_batches[names] = found
        return self._rendered_batches[names]

    def batch_instances(self) -> Callable[[Callable[..., M], CellBatch],
                                          tuple[list[M], list[int] | None] | None] | None:
        """The decoder of a `tsmodel.ground.base.CellBatch` into instances,
        ``decoder(cls, batch)`` (`render_batch_instances()`: the instances
        `decode()` builds from ``batch.rows()``, and each row's number of them,
        ``None`` where each row is one, or ``None`` for a batch it leaves to
        the rows), or ``None`` where the declaration has no such rendering:
        plain event rows, and bucket rows of a fixed shape. Rendered at its
        first use."""
        found = self._batch_instances
        if found is False:
            found = self._batch_instances = render_batch_instances(self)
        return found  # type: ignore[return-value]

    @property
    def decoders(self) -> tuple[Callable[..., Any], ...]:
        """The generated functions of `records()` and `decode()` (their source:
        `tsmodel.layouts._source.rendered`)."""
        return self._rendered_records, self._rendered_decode

    def count_events(self, row: Row, only: tuple[str, ...] | None = None) -> int:
        """How many events `records()` gives of ``row``, read with values stripped.

        The row is refused as `records()` refuses it for its key and for
        what its cells' columns and timestamps say (a required value's cell
        missing, cells of another clock, a column no field declares); the
        value bytes, stripped, are not checked.

        Raises:
            KeyDecodingError, CellDecodingError: as `records()`.
        """
        try:
            _, key_time = self._row_keys(row)
            if self._stripped_read is None:
                self._stripped_read = self.layout.reader(stripped_shape(self.shape))
            per_event = not self.layout.bucketed
            n = 0
            witness = self.witness
            for _, values in self._stripped_read(row.cells, key_time):
                missing = next((name for name in self._required if values[name] is None and (
                    only is None or name in only or name == witness)), None)
                if missing is not None and per_event:
                    raise missing_value(self.shape, missing)
                n += missing is None
            return n
        except errors.CellDecodingError as exc:
            exc.locate(model=self.model, table=self.table, row_key=row.key)
            raise

    def _row_keys(self, row: Row) -> tuple[dict[str, Any], int | None]:
        """The key fields of ``row`` and its key's time, its key and columns checked."""
        keys = self.decode_key(row.key)
        if not self._joins_plainly:
            self._check_salt(row.key, keys)
        keys.pop(SALT_FIELD, None)
        key_time = keys.pop(self.time_field, None)
        if self._owns is not None:
            self._check_columns(row.cells)
        return keys, key_time

    def _check_columns(self, cells: tuple[Cell, ...]) -> None:
        """Refuse a cell of a column no field declares (``unknown_columns="error"``)."""
        owns = self._owns
        assert owns is not None
        for c in cells:
            if not owns(c.family, c.qualifier) and (c.family, c.qualifier) not in \
                    self._key_columns:
                raise errors.CellDecodingError(
                    "no field of the model declares this column (unknown_columns='error'): "
                    "a retired field's column or another writer's; declare it, delete its "
                    "cells, or declare unknown_columns='ignore'",
                    column=column_name(c.family, c.qualifier))

    def _check_key_columns(self, cells: tuple[Cell, ...], keys: dict[str, Any],
                           key_time: int | None, events: list[Event]) -> None:
        """Refuse a key column (its newest cell) that disagrees with the key.

        A row without the column reads from the key alone: the key is the truth,
        and a read whose cell timestamp filter leaves out a bucket row's start
        does not see the column.
        """
        if not events:
            return
        for (family, qualifier), cell in newest_cells(tuple(
                c for c in cells if (c.family, c.qualifier) in self._key_columns)).items():
            k = self._key_columns[(family, qualifier)]
            where = column_name(family, qualifier)
            try:
                stored = k.codec.decode(cell.value)
            except errors.CellDecodingError as exc:
                raise exc.locate(field=k.name, column=where) from None
            except (ValueError, TypeError, ArithmeticError, LookupError) as exc:
                raise errors.CellDecodingError(
                    f"the key column's codec refused the cell: {exc!r}", data=cell.value,
                    field=k.name, column=where) from exc
            if k.name == self.time_field:
                # Only a row per event keeps a time column: the key's time, or the
                # event's (a current-value row).
                us = key_time if key_time is not None else events[0][0]
                expected: Any = EPOCH + timedelta(microseconds=us)
            else:
                expected = keys[k.name]
            if stored != expected:
                raise errors.CellDecodingError(
                    f"the column holds {stored!r} but the row key {expected!r}: a copy of the "
                    f"key field {k.name!r} that disagrees with the key (a foreign or damaged "
                    "row)", data=cell.value, field=k.name, column=where)

    def _check_salt(self, key: bytes, keys: dict[str, Any]) -> None:
        """Refuse a row under another salt value than its fields give: such a row is
        not tsmodel's, and the rows of its fields' own salt may be elsewhere."""
        try:
            canonical = self.key.encode(keys)
        except SegmentValueError as exc:  # the salt function refused the key's fields
            raise errors.KeyDecodingError(
                f"{self.model}: row key {key!r} of table {self.table!r}: {exc}") from exc
        if canonical != key:
            raise errors.KeyDecodingError(
                f"{self.model}: row key {key!r} of table {self.table!r} is not canonical: its "
                f"fields give {canonical!r} (another salt: written by another program?)")
