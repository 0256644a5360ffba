"""Query results as Arrow record batches, built straight from decoded records.

`ArrowColumns` knows a model's columns and their Arrow types, worked
out once per query from the model's declaration (not from the data, so an
empty result has the same schema as a full one):

* key fields: ``dictionary<int32, string>`` for strings (categories in pandas
  and polars), ``int64`` for integers;
* the timestamp: ``timestamp[unit, tz=UTC]`` in the model's precision
  (``s``, ``ms`` or ``us``); the version time of a model with a version field
  likewise, in ``ms`` (a cell timestamp);
* value fields by codec: ``int64``, ``float64``, ``string``, ``bool``,
  ``binary``; ``Text`` codecs by the kind they decode to (``decimal128`` for
  ``Decimal`` with ``places``); any other codec's values as pyarrow infers
  them (``null`` when there are none).

Every column is nullable: an optional value without a cell is null.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from decimal import Decimal
from itertools import islice
from typing import Any

import attrs

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.encoding.codecs import Bool, Float64, Int64, Raw, Text, Utf8
from tsmodel.encoding.keys import IntSegment, SegmentValueError, StrSegment
from tsmodel.io import require
from tsmodel.layouts.render_read import time_key_arithmetic

__all__ = ["ArrowColumns", "DEFAULT_BATCH_ROWS"]

#: Events per record batch unless asked otherwise: enough that the per-batch
#: cost vanishes, few enough that a batch of a few columns stays a few MiB.
DEFAULT_BATCH_ROWS = 65_536

#: A column: (field name, its Arrow type or None (inferred), its kind).
_Column = tuple[str, Any, str]


def _arrow(what: str) -> Any:
    return require("pyarrow", "arrow", what)


def _unit(us: int) -> str:
    """The Arrow time unit of a model whose times are multiples of ``us`` µs."""
    if us % 1_000_000 == 0:
        return "s"
    return "ms" if us % 1_000 == 0 else "us"


class ArrowColumns:
    """The Arrow schema of a model's query results, and the builder of its batches.

    Args:
        model: the model class.
        only: the value fields read (``None``: all); the others are no column.
        what: the call that needs pyarrow, for the message when it is missing.

    Raises:
        ExtraNotInstalledError: pyarrow is not installed.
    """

    def __init__(self, model: type, only: tuple[str, ...] | None = None,
                 what: str = "to_arrow()") -> None:
        pa = self._pa = _arrow(what)
        spec = spec_of(model)
        self.spec = spec
        kinds = self._kinds(spec, only)
        order = [a.name for a in attrs.fields(model)]
        self.columns: list[_Column] = [
            (name, *kinds[name]) for name in sorted(kinds, key=order.index)]
        self.schema = pa.schema([pa.field(name, t if t is not None else pa.null())
                                 for name, t, _ in self.columns])
        self._defaults = _defaults(spec)
        key_fields = set(spec.key.fields)
        #: The value fields read from cells (a promoted one is read from the key).
        self._values = {v.name: v for v in spec.values if v.name not in key_fields}
        try:
            self._np: Any = importlib.import_module("numpy")  # typed Any: an optional extra
        except ImportError:  # pragma: no cover - pyarrow>=16 runs without numpy
            self._np = None

    def _kinds(self, spec: ModelSpec, only: tuple[str, ...] | None) -> dict[str, tuple[Any, str]]:
        pa = self._pa
        kinds: dict[str, tuple[Any, str]] = {}
        for seg in spec.key.segments:
            if isinstance(seg, StrSegment) and seg.field is not None:
                kinds[seg.field] = (pa.dictionary(pa.int32(), pa.string()), "category")
            elif isinstance(seg, IntSegment) and seg.field is not None:
                kinds[seg.field] = (pa.int64(), "plain")
        kinds[spec.timestamp_field] = (pa.timestamp(_unit(spec.time_unit), tz="UTC"), "time")
        if spec.version_field is not None:
            kinds[spec.version_field] = (pa.timestamp("ms", tz="UTC"), "time")
        for v in spec.values:
            if v.name not in kinds and (only is None or v.name in only):
                kinds[v.name] = (_value_type(pa, v.codec), "plain")
        return kinds

    # -- building ---------------------------------------------------------------------

    def batch(self, records: list[dict[str, Any]]) -> Any:
        """One ``pyarrow.RecordBatch`` of ``records`` (`TableCodec.records()`)."""
        columns = {}
        for name, _, _ in self.columns:
            default = self._defaults.get(name)
            if default is None:
                columns[name] = [r[name] for r in records]
            else:
                columns[name] = [r[name] if name in r else default() for r in records]
        return self._batch(columns, {})

    def _batch(self, columns: dict[str, list[Any]], done: dict[str, Any],
               times: Any = None) -> Any:
        """A record batch of decoded values (a list per column; times in µs) and of
        columns already built (``done``: Arrow arrays by name); ``times``: the
        event times' column in µs when decoded apart (a numpy array)."""
        pa = self._pa
        arrays = []
        for name, arrow_type, kind in self.columns:
            if name in done:
                arrays.append(done[name])
                continue
            values = times if times is not None and name == self.spec.timestamp_field \
                else columns[name]
            if kind == "time":  # µs since the epoch, whole units of the column's
                array = pa.array(values, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
                arrays.append(array.cast(arrow_type))
            elif kind == "category":
                arrays.append(pa.array(values, pa.string()).dictionary_encode())
            elif arrow_type is None:  # a codec of the application's: as pyarrow sees it
                arrays.append(pa.array(values))
            else:
                arrays.append(pa.array(values, arrow_type))
        schema = self.schema
        if any(t is None for _, t, _ in self.columns):
            schema = pa.schema([pa.field(f.name, a.type) for f, a in
                                zip(self.schema, arrays, strict=True)])
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    # -- rows straight into columns ---------------------------------------------------

    def rows_batch(self, codec: Any, rows: list[Any], only: tuple[str, ...] | None) -> Any:
        """One record batch of the events of ``rows``, read by ``codec``'s columnar
        decoders: value bytes collected per column and decoded a whole column at a
        time (numpy for fixed-width numbers, Arrow for text) where the rows are
        plain events, else each value by its codec as `TableCodec.records()`
        reads it (same values, same errors).
        """
        names = tuple(name for name, _, _ in self.columns)
        raw, decoded = codec.column_decoders(names)
        if raw is not None:
            columns: dict[str, Any] = {n: [] for n in names}
            if self._np is not None and _whole_keys(codec) is not None:
                flat: list[Any] = []
                order = raw(rows, None, flat)
                if order:
                    width = len(order)
                    columns.update((n, flat[i::width]) for i, n in enumerate(order) if i > 1)
                    found = self._whole(codec, flat[0::width], flat[1::width], columns)
                    if found is not None:
                        return found
                    columns = {n: [] for n in names}  # again, row by row
            if raw(rows, columns):
                done = self._decode_raw(columns)
                if done is not None:
                    return self._batch(columns, done)
        return self._batch(decoded(rows, only, False), {})

    def _whole(self, codec: Any, keys: list[bytes], times: list[int],
               columns: dict[str, Any]) -> Any:
        """The record batch of rows collected with their keys undecoded (each row one
        cell per value field), decoded a whole column at a time, or ``None`` where
        a key or a value is not what its decoding reads."""
        keyed = self._key_columns(codec, keys, times)
        if keyed is None:
            return None
        done = self._decode_raw(columns, complete=True)
        if done is None:
            return None
        return self._batch(columns, {**keyed[0], **done}, keyed[1])

    def cells_batch(self, codec: Any, batch: Any, only: tuple[str, ...] | None) -> Any:
        """One record batch of the events of a `tsmodel.ground.base.CellBatch`: its
        lists sliced into columns by the generated collector
        (`TableCodec.batch_decoder`) and decoded a whole column at a time, with
        no `Row` in between; where that does not read the batch (rows of another
        shape, keys or values the whole-column decoding refuses), its rows, read
        by `rows_batch()` (same values, same errors)."""
        return self._decoded(codec, batch, only, self._collected(codec, batch))

    def _collected(self, codec: Any, batch: Any) -> Any:
        """What the generated collector takes of ``batch`` (its lists sliced into
        columns), or ``None``: rows of another shape, or no collector where
        `takes_batches()` is false."""
        if not self.takes_batches(codec):
            return None
        return codec.batch_decoder(tuple(name for name, _, _ in self.columns))(batch)

    def _decoded(self, codec: Any, batch: Any, only: tuple[str, ...] | None,
                 found: Any) -> Any:
        """`cells_batch()` of ``batch``, whose collected columns are ``found``."""
        if found is not None:
            if codec.layout.bucketed:
                done = self._buckets(codec, *found)
            else:
                keys, times, values = found
                columns: dict[str, Any] = {name: [] for name, _, _ in self.columns}
                columns.update(values)
                done = self._whole(codec, keys, times, columns)
            if done is not None:
                return done
        return self.rows_batch(codec, list(batch.rows()), only)

    def _buckets(self, codec: Any, keys: list[bytes], counts: list[int], times: list[int],
                 values: dict[str, list[bytes]]) -> Any:
        """The record batch of bucket rows collected by the generated bucket collector
        (`tsmodel.layouts.render_read.render_bucket_batch_columns`): each row's key
        decoded once by the declared key decoding and its fields repeated for
        the row's events, the values decoded a whole column at a time. ``None``
        when a key or a value is not what its decoding reads (the caller reads
        row by row, which says why)."""
        np, pa = self._np, self._pa
        if not times:
            return None  # nothing to gain
        decoded = []
        for key, count in zip(keys, counts, strict=True):
            if count:
                try:
                    decoded.append(codec.key.decode(key))
                except SegmentValueError:
                    return None
        index = pa.array(np.repeat(np.arange(len(decoded), dtype=np.int32),
                                   [c for c in counts if c]))
        columns: dict[str, Any] = {name: [] for name, _, _ in self.columns}
        columns.update(values)
        # An optional value's column holds None where an event has no cell.
        done = self._decode_raw(columns, complete=all(v.stored for v in codec.values.values))
        if done is None:
            return None
        for name, arrow_type, kind in self.columns:
            if name == codec.time_field or name not in codec.key.fields:
                continue
            found = [fields[name] for fields in decoded]
            if kind == "category":
                done[name] = pa.array(found, pa.string()).take(index).dictionary_encode()
            else:
                done[name] = pa.array(found, arrow_type).take(index)
        us = np.fromiter(times, np.int64, len(times))
        if (us % 1000).any():
            return None  # not whole ms: as the rows read (or refuse) them
        return self._batch(columns, done, us)

    def _key_columns(self, codec: Any, keys: list[bytes],
                     times: list[int]) -> tuple[dict[str, Any], Any] | None:
        """The key fields and the times of rows collected with their keys undecoded
        (``raw_columns(..., deferred)``), decoded a whole column at a time: the
        time segment's digits by numpy with the arithmetic the declaration's
        decoder applies (`EpochEncoding.arithmetic`), the segments before it
        once per distinct head, by the declared key decoding. ``None`` when a
        key is not what that decoding reads, or a row's cells are not at its
        key's time: the caller then reads row by row, which says why.

        Returns:
            The key fields' Arrow arrays by name, and the times (µs, numpy).
        """
        np, pa = self._np, self._pa
        pc = importlib.import_module("pyarrow.compute")
        digits, base, unit, low, high = _whole_keys(codec)  # type: ignore[misc]
        n = len(keys)
        if not n:
            return None  # nothing to gain
        whole = pa.array(keys, pa.binary())
        tails = pc.binary_slice(whole, -digits)  # a shorter key: all of it
        offsets = np.frombuffer(tails.buffers()[1], np.int32, n + 1, tails.offset * 4)
        if offsets[-1] - offsets[0] != n * digits:
            return None  # a key shorter than its time segment
        d = np.frombuffer(tails.buffers()[2], np.uint8, n * digits, int(offsets[0]))
        d = d.reshape(n, digits).astype(np.int64) - 48
        if d.min() < 0 or d.max() > 9:
            return None
        number = d @ (10 ** np.arange(digits - 1, -1, -1, dtype=np.int64))
        us = (number if base is None else base - number) * unit
        if us.min() < low or us.max() > high:
            return None
        if not np.array_equal(np.fromiter(times, np.int64, n), us // 1000 * 1000):
            return None  # cells of another time than the key's
        heads = pc.binary_slice(whole, 0, -digits).dictionary_encode()
        index = heads.indices
        _, first = np.unique(index.to_numpy(zero_copy_only=False), return_index=True)
        decoded = []
        for i in first.tolist():
            try:
                decoded.append(codec.key.decode(keys[i]))
            except SegmentValueError:
                return None
        out = {}
        for name, arrow_type, kind in self.columns:
            if name == codec.time_field or name not in codec.key.fields:
                continue
            values = [found[name] for found in decoded]
            if kind == "category":
                dictionary = pa.array(values, pa.string())
                if len(set(values)) == len(values):
                    out[name] = pa.DictionaryArray.from_arrays(index, dictionary)
                else:  # heads of other fields' values too: one entry per value
                    out[name] = dictionary.take(index).dictionary_encode()
            else:
                out[name] = pa.array(values, arrow_type).take(index)
        return out, us

    def _decode_raw(self, columns: dict[str, list[Any]],
                    complete: bool = False) -> dict[str, Any] | None:
        """The value columns of undecoded bytes as Arrow arrays, or ``None`` when a
        cell is not what its codec reads (the caller decodes value by value then,
        which raises the codec's error where it belongs). ``complete``: every
        value has its cell (no ``None`` to look for)."""
        out = {}
        for name, arrow_type, _ in self.columns:
            v = self._values.get(name)
            if v is None:
                continue  # a key field or a time: decoded with the key
            array = _whole_column(self._pa, self._np, v, columns[name], arrow_type,
                                  complete)
            if array is None:
                return None
            out[name] = array
        return out

    def batches(self, records: Iterable[dict[str, Any]], rows: int) -> Iterator[Any]:
        """Record batches of at most ``rows`` events each, as ``records`` come.

        Raises:
            ValueError: ``rows`` is not an int >= 1 (raised by this call).
        """
        _check_rows(rows)
        return self._batches(iter(records), rows)

    def _batches(self, it: Iterator[dict[str, Any]], rows: int) -> Iterator[Any]:
        with _closing(it):
            while chunk := list(islice(it, rows)):
                yield self.batch(chunk)

    def row_batches(self, codec: Any, rows: Iterable[Any], only: tuple[str, ...] | None,
                    size: int) -> Iterator[Any]:
        """Record batches of ``size`` events (the last may hold fewer) of rows read
        whole (a plan that `tsmodel.plan.merge.reads_whole_rows()`), decoded by
        `rows_batch()` a group of rows at a time."""
        _check_rows(size)
        return self._row_batches(codec, iter(rows), only, size)

    def _row_batches(self, codec: Any, it: Iterator[Any], only: tuple[str, ...] | None,
                     size: int) -> Iterator[Any]:
        sized = _Sized(self._pa, size)
        with _closing(it):
            group: list[Any] = []
            cells = 0
            for row in it:
                group.append(row)
                cells += len(row.cells)
                if cells >= size:  # at most ``size`` events and one row's more
                    yield from sized.add(self.rows_batch(codec, group, only))
                    group, cells = [], 0
            if group:
                yield from sized.add(self.rows_batch(codec, group, only))
            yield from sized.rest()

    def takes_batches(self, codec: Any) -> bool:
        """Whether `cell_batches()` reads ``codec``'s rows a whole list at a time (its
        rows have one fixed shape of cells and keys decoded as a whole column, or
        are buckets of a cell per event in each value column):
        else their rows, read by `row_batches()`, cost less than batches."""
        names = tuple(name for name, _, _ in self.columns)
        return self._np is not None and (
            codec.layout.bucketed or _whole_keys(codec) is not None) and \
            codec.batch_decoder(names) is not None

    def cell_batches(self, codec: Any, batches: Iterable[Any], only: tuple[str, ...] | None,
                     size: int) -> Iterator[Any]:
        """`row_batches()` of rows read in `tsmodel.ground.base.CellBatch` es, each
        group of them decoded by `cells_batch()`."""
        _check_rows(size)
        return self._cell_batches(codec, iter(batches), only, size)

    def _cell_batches(self, codec: Any, it: Iterator[Any], only: tuple[str, ...] | None,
                      size: int) -> Iterator[Any]:
        groups = _CellGroups(self, codec, only, size)
        with _closing(it):
            for batch in it:
                yield from groups.add(batch)
            yield from groups.end()

    def acell_batches(self, codec: Any, batches: AsyncIterator[Any],
                      only: tuple[str, ...] | None, size: int) -> AsyncIterator[Any]:
        """`cell_batches()` of an asynchronous stream of `CellBatch` es."""
        _check_rows(size)
        return self._acell_batches(codec, batches, only, size)

    async def _acell_batches(self, codec: Any, batches: AsyncIterator[Any],
                             only: tuple[str, ...] | None, size: int) -> AsyncIterator[Any]:
        groups = _CellGroups(self, codec, only, size)
        try:
            async for batch in batches:
                for b in groups.add(batch):
                    yield b
            for b in groups.end():
                yield b
        finally:
            aclose = getattr(batches, "aclose", None)
            if aclose is not None:
                await aclose()

    def arow_batches(self, codec: Any, rows: AsyncIterator[Any], only: tuple[str, ...] | None,
                     size: int) -> AsyncIterator[Any]:
        """`row_batches()` of an asynchronous stream of rows."""
        _check_rows(size)
        return self._arow_batches(codec, rows, only, size)

    async def _arow_batches(self, codec: Any, rows: AsyncIterator[Any],
                            only: tuple[str, ...] | None, size: int) -> AsyncIterator[Any]:
        sized = _Sized(self._pa, size)
        try:
            group: list[Any] = []
            cells = 0
            async for row in rows:
                group.append(row)
                cells += len(row.cells)
                if cells >= size:
                    for b in sized.add(self.rows_batch(codec, group, only)):
                        yield b
                    group, cells = [], 0
            if group:
                for b in sized.add(self.rows_batch(codec, group, only)):
                    yield b
            for b in sized.rest():
                yield b
        finally:
            aclose = getattr(rows, "aclose", None)
            if aclose is not None:
                await aclose()

    def abatches(self, records: AsyncIterator[dict[str, Any]],
                 rows: int) -> AsyncIterator[Any]:
        """`batches()` of an asynchronous stream of records."""
        _check_rows(rows)
        return self._abatches(records, rows)

    async def _abatches(self, records: AsyncIterator[dict[str, Any]],
                        rows: int) -> AsyncIterator[Any]:
        try:
            chunk: list[dict[str, Any]] = []
            async for record in records:
                chunk.append(record)
                if len(chunk) >= rows:
                    yield self.batch(chunk)
                    chunk = []
            if chunk:
                yield self.batch(chunk)
        finally:
            aclose = getattr(records, "aclose", None)
            if aclose is not None:
                await aclose()

    def table(self, batches: Iterable[Any]) -> Any:
        """One ``pyarrow.Table`` of ``batches`` (the schema's, when there are none)."""
        pa = self._pa
        batches = list(batches)
        if not batches:
            return self.schema.empty_table()
        return pa.Table.from_batches(batches)


def _whole_keys(codec: Any) -> tuple[int, int | None, int, int, int] | None:
    """The arithmetic of the time segment ending ``codec``'s row keys, where keys can be
    decoded a whole column at a time (`ArrowColumns._key_columns`), else ``None``."""
    found = time_key_arithmetic(codec)
    if found is None:
        return None
    digits, base, unit, _, _ = found
    biggest = max(10 ** digits - 1, base or 0) * unit
    return found if biggest < 2 ** 63 else None  # numpy's int64 must hold every step


def _whole_column(pa: Any, np: Any, v: Any, raw: list[bytes | None], arrow_type: Any,
                  complete: bool = False) -> Any:
    """One value column of cell bytes (``None``: no cell, unless ``complete``) decoded
    as a whole, or ``None`` when a cell is not what the field's codec reads, or a
    defaulted field lacks a cell (then the caller reads value by value)."""
    codec = type(v.codec)
    missing = not complete and None in raw
    if missing and v.has_default:
        return None
    if codec in (Int64, Float64, Bool) and np is not None:
        return _fixed_width(pa, np, codec, raw, arrow_type, missing)
    if codec in (Utf8, Raw):
        try:
            array = pa.array(raw, pa.binary())
            return array.cast(pa.string()) if codec is Utf8 else array
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # not UTF-8: the codec says why
            return None
    decode = v.codec.decode
    try:
        values = [None if d is None else decode(d) for d in raw]
    except Exception:  # noqa: BLE001 - read again value by value: the codec's own error
        return None
    return pa.array(values) if arrow_type is None else pa.array(values, arrow_type)


def _fixed_width(pa: Any, np: Any, codec: type, raw: list[bytes | None], arrow_type: Any,
                 missing: bool) -> Any:
    """A column of fixed-width values (``Int64``, ``Float64``, ``Bool``) decoded as a
    whole, or ``None`` when a cell is not of the codec's width (each cell's
    length is checked, not their sum) or a ``Bool`` not 0 or 1."""
    width = 1 if codec is Bool else 8
    n = len(raw)
    cells = pa.array(raw, pa.binary())  # no cell: null
    offsets = np.frombuffer(cells.buffers()[1], np.int32, n + 1)
    lengths = np.diff(offsets)
    mask = cells.is_null().to_numpy(zero_copy_only=False) if missing else None
    sized = lengths == width
    if not (sized.all() if mask is None else np.array_equal(sized, ~mask)):
        return None  # a cell of another size
    count = n if mask is None else n - int(mask.sum())
    data = cells.buffers()[2]
    dtype = np.uint8 if codec is Bool else (">i8" if codec is Int64 else ">f8")
    flat = np.frombuffer(data, dtype, count, int(offsets[0])) if count else \
        np.zeros(0, dtype)
    if codec is Bool:
        if count and flat.max() > 1:
            return None
        flat = flat.astype(bool)
    else:
        flat = flat.astype(flat.dtype.newbyteorder("="))
    if mask is not None:
        full = np.zeros(n, flat.dtype)
        full[~mask] = flat
        flat = full
    return pa.array(flat, pa.bool_() if codec is Bool else arrow_type, mask=mask)


class _CellGroups:
    """`CellBatch` es gathered until they hold ``size`` events (and a batch's more),
    each group decoded by `ArrowColumns.cells_batch()` into record batches of
    ``size`` rows: the sync and the async `ArrowColumns.cell_batches()`.

    A group whose rows are not all of the shape the generated collector takes
    (a row without an optional value's cell, among rows with every cell) is
    decoded a reader's batch at a time instead: the batches without such a
    row are still taken a whole list at a time, the others read row by row.
    """

    def __init__(self, columns: ArrowColumns, codec: Any, only: tuple[str, ...] | None,
                 size: int) -> None:
        self._columns, self._codec, self._only, self._size = columns, codec, only, size
        self._sized = _Sized(columns._pa, size)
        self._group: Any = None
        self._parts: list[Any] = []

    def add(self, batch: Any) -> list[Any]:
        """The record batches complete with ``batch``."""
        group = self._group
        if group is None:
            group = self._group = type(batch)()  # the reader's batches stay as handed
        group.extend(batch)
        self._parts.append(batch)
        if len(group.values) < self._size:
            return []
        return self._flush()

    def end(self) -> list[Any]:
        """The record batches of what is left."""
        out = self._flush() if self._group is not None else []
        return out + self._sized.rest()

    def _flush(self) -> list[Any]:
        group, parts, self._group, self._parts = self._group, self._parts, None, []
        columns, codec, only = self._columns, self._codec, self._only
        found = columns._collected(codec, group)
        if found is None and len(parts) > 1 and columns.takes_batches(codec):
            out = []
            for part in parts:
                out += self._sized.add(columns.cells_batch(codec, part, only))
            return out
        return self._sized.add(columns._decoded(codec, group, only, found))


class _Sized:
    """Record batches cut to ``size`` rows (the last one holds the rest)."""

    def __init__(self, pa: Any, size: int) -> None:
        self._pa, self._size = pa, size
        self._pending: list[Any] = []
        self._count = 0

    def add(self, batch: Any) -> list[Any]:
        """The batches of ``size`` rows complete with ``batch``."""
        if not batch.num_rows:
            return []
        self._pending.append(batch)
        self._count += batch.num_rows
        if self._count < self._size:
            return []
        table = self._pa.Table.from_batches(self._pending).combine_chunks()
        out = []
        at = 0
        while table.num_rows - at >= self._size:
            out.extend(table.slice(at, self._size).to_batches())
            at += self._size
        rest = table.slice(at)
        self._pending = rest.to_batches() if rest.num_rows else []
        self._count = rest.num_rows
        return out

    def rest(self) -> list[Any]:
        """The last rows, fewer than ``size`` (none when nothing is left)."""
        if not self._count:
            return []
        out = self._pa.Table.from_batches(self._pending).combine_chunks().to_batches()
        self._pending, self._count = [], 0
        return list(out)


@contextlib.contextmanager
def _closing(it: Iterator[Any]) -> Iterator[None]:
    """Close ``it`` (if it can be closed) on the way out: the reads still streaming
    under it end now, not when it is collected."""
    try:
        yield
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


def _check_rows(rows: int) -> None:
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise errors.ArgumentError(
            f"to_arrow_batches(rows): rows per batch must be an int >= 1, got {rows!r:.80}")


def _value_type(pa: Any, codec: Any) -> Any:
    """The Arrow type of a value codec's values, or ``None`` to let pyarrow infer it."""
    if isinstance(codec, Int64):
        return pa.int64()
    if isinstance(codec, Float64):
        return pa.float64()
    if isinstance(codec, Utf8):
        return pa.string()
    if isinstance(codec, Bool):
        return pa.bool_()
    if isinstance(codec, Raw):
        return pa.binary()
    if isinstance(codec, Text):
        if codec.kind is Decimal:
            return pa.decimal128(38, codec.places) if codec.places is not None else None
        return {int: pa.int64(), float: pa.float64(), str: pa.string()}[codec.kind]
    python_type = getattr(codec, "python_type", None)
    simple = {int: pa.int64(), float: pa.float64(), (float, int): pa.float64(),
              str: pa.string(), bool: pa.bool_(), bytes: pa.binary()}
    try:
        return simple.get(python_type)
    except TypeError:  # an unhashable python_type
        return None


def _defaults(spec: ModelSpec) -> dict[str, Callable[[], Any]]:
    """The default of each value field that has one: what a record without it holds."""
    return {v.name: v.default_value for v in spec.values if v.has_default}


#: The aggregates of each field of a resample window, in column order.
WINDOW_AGGREGATES = ("count", "sum", "min", "max", "last", "mean")


def window_table(spec: ModelSpec, fields: tuple[str, ...], every: int, windows: Iterable[Any],
                 what: str = "to_arrow()") -> Any:
    """The ``pyarrow.Table`` of a resample's windows (`tsmodel.plan.rollups.Window`).

    A row per window, by entity then time: the key fields (typed as in query
    results), ``start`` and ``end`` (``timestamp[s or ms, tz=UTC]``, the
    unit of the step), ``count``, then per field ``f``: ``f_count``
    (``int64``), ``f_sum``, ``f_min``, ``f_max``, ``f_last`` (``int64`` for
    an int field, else ``float64``) and ``f_mean`` (``float64``): the
    names of a rollup row's columns. A field without a value in a window is
    null there (its ``f_count`` is 0). The schema is the same with no window.

    Raises:
        ExtraNotInstalledError: pyarrow is not installed.
    """
    pa = _arrow(what)
    time = pa.timestamp(_unit(every), tz="UTC")
    types: list[tuple[str, Any]] = []
    for seg in spec.key.segments:
        if isinstance(seg, StrSegment) and seg.field is not None:
            types.append((seg.field, pa.dictionary(pa.int32(), pa.string())))
        elif isinstance(seg, IntSegment) and seg.field is not None:
            types.append((seg.field, pa.int64()))
    keys = [name for name, _ in types]
    types += [("start", time), ("end", time), ("count", pa.int64())]
    for f in fields:
        number = pa.int64() if spec.value(f).codec.python_type is int else pa.float64()
        types += [(f"{f}_count", pa.int64()), (f"{f}_sum", number), (f"{f}_min", number),
                  (f"{f}_max", number), (f"{f}_last", number), (f"{f}_mean", pa.float64())]
    schema = pa.schema([pa.field(name, t) for name, t in types])
    rows = list(windows)
    columns: dict[str, list[Any]] = {name: [] for name, _ in types}
    for w in rows:
        for k in keys:
            columns[k].append(w.key[k])
        columns["start"].append(w.start)
        columns["end"].append(w.end)
        columns["count"].append(w.count)
        for f in fields:
            stats = w.fields[f]
            for agg in WINDOW_AGGREGATES:
                columns[f"{f}_{agg}"].append(getattr(stats, agg))
    arrays = []
    for name, arrow_type in types:
        if pa.types.is_dictionary(arrow_type):
            arrays.append(pa.array(columns[name], pa.string()).dictionary_encode())
        else:
            arrays.append(pa.array(columns[name], arrow_type))
    return pa.Table.from_arrays(arrays, schema=schema)
