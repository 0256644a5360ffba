"""The check and encoding of a save rendered over a frame's Arrow columns.

`save_frame()` checks and encodes a chunk's rows a whole column at a time,
with Arrow's compute kernels and numpy, without a Python value or an
instance per row: `render_frame_encoder()` renders, from a model's
declaration (its main and current-value tables' key layouts, value
encoders and `Layout`), one function per model that takes a chunk's Arrow
columns and returns what the per-event check of `check_all()`
(`tsmodel.layouts.render_write.render_event_parts`) returns for each row,
as columns: the row keys, the event times in µs, each value's encoded
bytes, the current-value row keys. `FrameColumns.rows()` zips them into the
very tuples the per-event check returns, which the save writes as it
writes checked events.

Each piece is the declared one applied to a column: a key segment of a
field encodes each distinct value of its column with the segment's own
encoder (``segment.encoder()``), once, then Arrow takes them by index; the
time segment's digits are the declared `EpochEncoding`'s arithmetic
(`EpochEncoding.arithmetic`, as the Arrow decoding of keys reads them back);
a value of a fixed-width codec (`Int64`, `Float64`, `Bool`) is packed by
numpy in the codec's byte order, a `Utf8` or `Raw` value is Arrow's bytes
as they are, and any other codec encodes each value of its column with its
own ``encode``. The whole is held to the per-event check on every shape of
the oracle by ``tests/extras/test_frame_columns.py``.

It takes the common case only, as the column-wise check of
`render_column_check` does: a value the per-event check would refuse or
send through its full check (a null in a required column, a NaN, an int
a double would round, a key value its segment refuses, a time out of
range or not in UTC, an Arrow type whose Python values are not of exactly
an accepted type) raises `NotColumnWise`, and the chunk goes through the
row-wise check and then the per-event one, whose error, naming the row, is
the one raised.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import attrs

from tsmodel.encoding.buckets import Bucket
from tsmodel.encoding.codecs import Bool, Float64, Int64, Raw, Utf8
from tsmodel.encoding.keys import BucketSegment, ConstantSegment, TimestampSegment
from tsmodel.encoding.timestamps import EpochEncoding
from tsmodel.encoding.values import MAX_VALUE_BYTES, ValueSpec
from tsmodel.io import require
from tsmodel.layouts._fragment import Fragment
from tsmodel.layouts._source import compile_function
from tsmodel.layouts.render_write import NotColumnWise, column_fields
from tsmodel.plan.events import column_checker

__all__ = ["FrameColumns", "Missing", "render_frame_encoder", "frame_encoder"]

#: Arrow's time zones that are UTC itself (a frame's times in another zone, or
#: none, go through the row-wise check, which converts them as it converts
#: them for instances).
UTC_NAMES = frozenset({"UTC", "utc", "Etc/UTC", "+00:00", "Z"})
_UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1}
#: The µs of datetime.min and datetime.max (UTC): a time outside is no datetime.
_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999
#: Ints a double holds exactly (`Float64` refuses a larger int that it would round).
_EXACT_INT = 2**53


@attrs.frozen
class Missing:
    """A field without a column in the frame: every row takes its default."""

    default: Any


class FrameColumns:
    """The Arrow and numpy modules, and the column encoders built from them."""

    def __init__(self, pa: Any, pc: Any, np: Any) -> None:
        self.pa, self.pc, self.np = pa, pc, np

    # -- what a column's values are in Python --------------------------------------

    def python_type(self, t: Any) -> type | None:
        """The type of the Python values of an Arrow column of type ``t`` (its
        ``to_pylist()``), where it is one of the plain ones; else ``None``."""
        types = self.pa.types
        if types.is_dictionary(t):
            t = t.value_type
        if types.is_boolean(t):
            return bool
        if types.is_integer(t):
            return int
        if types.is_floating(t):
            return float
        if types.is_string(t) or types.is_large_string(t):
            return str
        if types.is_binary(t) or types.is_large_binary(t):
            return bytes
        return None

    def plain(self, column: Any) -> Any:
        """``column`` without a dictionary (its values in place of the indices)."""
        if self.pa.types.is_dictionary(column.type):
            return column.dictionary_decode()
        return column

    # -- the event time ---------------------------------------------------------------

    def time_us(self, column: Any, n: int) -> Any:
        """The event times in µs (numpy int64) of a UTC timestamp column without nulls,
        the instants its rows' datetimes stand for; else `NotColumnWise`."""
        pa = self.pa
        if isinstance(column, Missing):
            raise NotColumnWise
        t = column.type
        if not pa.types.is_timestamp(t) or t.tz not in UTC_NAMES or column.null_count:
            raise NotColumnWise
        if t.unit == "ns":
            try:  # whole microseconds only (all a datetime holds)
                column = column.cast(pa.timestamp("us", tz=t.tz))
            except pa.ArrowInvalid:
                raise NotColumnWise from None
        step = _UNIT_US[column.type.unit]
        ints = column.cast(pa.int64()).to_numpy(zero_copy_only=False)
        if n and (ints.min() < _MIN_US // step or ints.max() > _MAX_US // step):
            raise NotColumnWise  # no datetime: the row-wise conversion says why
        return ints * step if step != 1 else ints

    def time_checked(self, check: Callable[[int], str | None]) -> Callable[[Any], None]:
        """The layout's check of each event time (`Layout.time_check`), over a column."""

        def checked(us: Any) -> None:
            for t in us.tolist():
                if check(t) is not None:
                    raise NotColumnWise

        return checked

    # -- key segments ---------------------------------------------------------------

    def time_segment(self, segment: TimestampSegment | BucketSegment,
                     encode: Callable[[int], bytes]) -> Callable[[Any], Any]:
        """The time segment of each row from its time in µs: the digits of the declared
        `EpochEncoding` (its arithmetic: the range, unit and reversal its encoder
        applies), a bucket's label (`bucket_labels()`), or its encoder applied to
        each time (any other encoding)."""
        pa, pc, np = self.pa, self.pc, self.np
        if isinstance(segment, BucketSegment):
            return self.bucket_labels(segment.bucket, encode)
        encoding = segment.encoding
        if not isinstance(encoding, EpochEncoding):
            def each(us: Any) -> Any:
                try:
                    return pa.array([encode(t) for t in us.tolist()], pa.binary())
                except Exception:  # noqa: BLE001 (the row-wise check raises the error)
                    raise NotColumnWise from None

            return each
        digits, base, unit, low, high = encoding.arithmetic()

        def epoch(us: Any) -> Any:
            if len(us) and (us.min() < low or us.max() > high or np.any(us % unit)):
                raise NotColumnWise  # the segment refuses it: the row-wise check says why
            number = us // unit if unit != 1 else us
            if base is not None:
                number = base - number
            text = pc.utf8_lpad(pa.array(number, pa.int64()).cast(pa.string()), digits, "0")
            return text.cast(pa.binary())

        return epoch

    def bucket_labels(self, bucket: Bucket, encode: Callable[[int], bytes]
                      ) -> Callable[[Any], Any]:
        """The label of each row's bucket: the distinct times sorted, each bucket they
        fall in found once by the bucket's own arithmetic (its ``start`` and
        ``next``) and labelled by the segment's encoder (``encode`` of the bucket's
        first time: the bytes the row-wise encoding writes), then taken by index.
        A Python step per bucket, not per row."""
        pa, np = self.pa, self.np

        def labelled(us: Any) -> Any:
            if not len(us):
                return pa.array([], pa.binary())
            if us.min() < max(0, bucket.first_us):
                raise NotColumnWise  # the segment refuses it: the row-wise check says why
            times = np.unique(us)
            starts: list[int] = []
            labels: list[bytes] = []
            at = 0
            while at < len(times):
                first = int(times[at])
                start = bucket.start(first)
                following = bucket.next(start)
                if not start <= first < following:
                    raise NotColumnWise  # (no such bucket: the row-wise check decides)
                try:
                    labels.append(encode(first))
                except Exception:  # noqa: BLE001 (the row-wise check raises the error)
                    raise NotColumnWise from None
                starts.append(start)
                at = int(np.searchsorted(times, following, side="left"))
            index = np.searchsorted(np.array(starts, np.int64), us, side="right") - 1
            return pa.array(labels, pa.binary()).take(pa.array(index, pa.int32()))

        return labelled

    def field_segment(self, encode: Callable[[Any], bytes]) -> Callable[[Any, int], Any]:
        """A field's key segment of each row: each distinct value of its column encoded
        once by the segment's encoder, then taken by index."""
        pa = self.pa

        def distinct(column: Any, n: int) -> Any:
            if isinstance(column, Missing):
                try:
                    one = encode(column.default)
                except Exception:  # noqa: BLE001
                    raise NotColumnWise from None
                return pa.array([one], pa.binary()).take(pa.array([0] * n, pa.int32()))
            if self.python_type(column.type) is None or column.null_count:
                raise NotColumnWise
            coded = column if pa.types.is_dictionary(column.type) else \
                column.dictionary_encode()
            try:
                encoded = [encode(v) for v in coded.dictionary.to_pylist()]
            except Exception:  # noqa: BLE001 (the row-wise check raises the error)
                raise NotColumnWise from None
            out = pa.array(encoded, pa.binary()).take(coded.indices)
            if out.null_count:
                raise NotColumnWise
            return out

        return distinct

    def join(self, separator: bytes) -> Callable[..., Any]:
        """The row keys from their segments' columns (a constant: its bytes)."""
        pa, pc = self.pa, self.pc
        sep = pa.scalar(separator, pa.binary())

        def joined(*pieces: Any) -> Any:
            if len(pieces) == 1:
                piece = pieces[0]
                return piece if not isinstance(piece, bytes) else None
            return pc.binary_join_element_wise(
                *[pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in pieces],
                sep)

        return joined

    # -- values -----------------------------------------------------------------------

    def value(self, v: ValueSpec) -> Callable[[Any, int], Any]:
        """The encoded value of each row, as its codec encodes it (``None``: an optional
        value's null); a value the per-event check would not take as it is: `NotColumnWise`."""
        pa, pc, np = self.pa, self.pc, self.np
        exact = frozenset(v.accepted_types)
        kind: Any = type(v.codec)
        encode = v.codec.encode
        sized = kind not in (Int64, Float64, Bool)

        def one(item: Any) -> bytes | None:
            if item is None and v.optional:
                return None
            try:
                plain = type(item) in exact and item == item
            except ArithmeticError:
                plain = False
            if not plain:
                raise NotColumnWise
            try:
                data: bytes = encode(item)
            except Exception:  # noqa: BLE001 (the per-event check raises the error)
                raise NotColumnWise from None
            if sized and len(data) > MAX_VALUE_BYTES:
                raise NotColumnWise
            return data

        def fixed(data: Any, width: int, n: int) -> Any:
            offsets = np.arange(0, width * (n + 1), width, dtype=np.int32)
            return pa.Array.from_buffers(pa.binary(), n,
                                         [None, pa.py_buffer(offsets), pa.py_buffer(data)])

        def encoded(column: Any, n: int) -> Any:
            if isinstance(column, Missing):
                return pa.array([one(column.default)] * n, pa.binary())
            py = self.python_type(column.type)
            if py is None or py not in exact:
                raise NotColumnWise
            column = self.plain(column)
            nulls = column.null_count
            if nulls and not v.optional:
                raise NotColumnWise
            blank = {bool: False, int: 0, float: 0.0, str: "", bytes: b""}[py]
            filled = column.fill_null(pa.scalar(blank, column.type)) if nulls else column
            if kind is Int64 and py is int:
                try:
                    ints = filled.cast(pa.int64())
                except pa.ArrowInvalid:  # an unsigned int past int64: the codec says why
                    raise NotColumnWise from None
                out = fixed(ints.to_numpy(zero_copy_only=False).astype(">i8").tobytes(), 8, n)
            elif kind is Float64 and py is float:
                floats = filled.cast(pa.float64()).to_numpy(zero_copy_only=False)
                if np.isnan(floats).any():
                    raise NotColumnWise  # a NaN goes through the full check
                out = fixed(floats.astype(">f8").tobytes(), 8, n)
            elif kind is Float64 and py is int:
                try:
                    ints = filled.cast(pa.int64()).to_numpy(zero_copy_only=False)
                except pa.ArrowInvalid:
                    raise NotColumnWise from None
                if len(ints) and (ints.min() < -_EXACT_INT or ints.max() > _EXACT_INT):
                    raise NotColumnWise  # an int a double may round: the codec checks it
                out = fixed(ints.astype(">f8").tobytes(), 8, n)
            elif kind is Bool and py is bool:
                flags = filled.to_numpy(zero_copy_only=False).astype(np.uint8)
                out = fixed(flags.tobytes(), 1, n)
            elif (kind is Utf8 and py is str) or (kind is Raw and py is bytes):
                out = filled.cast(pa.large_binary() if pa.types.is_large_string(filled.type)
                                  or pa.types.is_large_binary(filled.type) else pa.binary())
                if n and pc.max(pc.binary_length(out)).as_py() > MAX_VALUE_BYTES:
                    raise NotColumnWise
                if out.type != pa.binary():
                    out = out.cast(pa.binary())
            else:  # any other codec: its own encode, value by value
                return pa.array([one(item) for item in column.to_pylist()], pa.binary())
            if nulls:
                return pc.if_else(column.is_valid(), out, pa.scalar(None, pa.binary()))
            return out

        return encoded

    # -- rows -------------------------------------------------------------------------

    @staticmethod
    def rows(key: Any, us: Any, values: list[Any], current_key: Any) -> list[tuple[Any, ...]]:
        """The checked tuple of each row, as the per-event check returns it."""
        columns = [key.to_pylist(), us.tolist(), *[v.to_pylist() for v in values]]
        if current_key is not None:
            columns.append(current_key.to_pylist())
        return list(zip(*columns, strict=True))


def render_frame_encoder(columns: FrameColumns, main: Any, current: Any | None
                         ) -> tuple[tuple[str, ...], Callable[..., Any]] | None:
    """The per-event check of ``main``'s model rendered over a chunk's Arrow columns:
    the fields it reads (`column_fields()`) and ``encode_frame(n, *columns)``,
    or ``None`` where it is not rendered (a salted key; or no column-wise check):
    the chunk's rows are then checked and encoded one by one.

    ``encode_frame`` takes the chunk's length and one Arrow array (or `Missing`)
    per field, in that order, and returns ``(keys, us, values, current_keys)``:
    Arrow binary arrays, the times as numpy int64, the list of each value's
    array in declared order, and ``None`` without a current-value table.
    `FrameColumns.rows()` makes them the checked tuples. It raises
    `NotColumnWise` for anything but the common case (see the module).
    """
    if main.key.salt() is not None or (current is not None and current.key.salt() is not None):
        return None
    if any(is_time and not isinstance(seg, (TimestampSegment, BucketSegment))
           for codec in (main, current) if codec is not None
           for seg, (_, _, is_time) in zip(
               [s for s in codec.key.segments if s.field is not None], codec._encoders,
               strict=True)):
        return None  # a time segment of no form known column-wise
    names = column_fields(main, current)
    src = Fragment()
    for reserved in ("n", "us"):
        src.local(reserved)
    cols = {name: src.local(f"c_{name}") for name in names}
    src.emit(f"us = {src.bind(columns.time_us, 'time_us')}({cols[main.time_field]}, n)")
    keys: dict[str, str] = {}

    def render_time_check(codec: Any, label: str) -> None:
        if codec._time_check is not None:
            check = src.bind(columns.time_checked(codec._time_check), f"{label}time_check")
            src.emit(f"{check}(us)")

    def render_keys(codec: Any, label: str) -> None:
        segments = [s for s in codec.key.segments if s.field is not None]
        for seg, (name, encode, is_time) in zip(segments, codec._encoders, strict=True):
            if name in keys:
                continue
            local = keys[name] = src.local(f"k_{name}")
            if is_time:
                coder = src.bind(columns.time_segment(seg, encode), f"{label}key_{name}")
                src.emit(f"{local} = {coder}(us)")
            else:
                coder = src.bind(columns.field_segment(encode), f"{label}key_{name}")
                src.emit(f"{local} = {coder}({cols[name]}, n)")

    def render_join(codec: Any, local: str, label: str) -> None:
        pieces = []
        for seg in codec.key.segments:
            if isinstance(seg, ConstantSegment):
                pieces.append(repr(seg.encode(None)))
            else:
                pieces.append(keys[seg.field])
        join = src.bind(columns.join(codec.key.separator), f"{label}join")
        src.emit(f"{local} = {join}({', '.join(pieces)})")
        src.emit(f"if {local} is None:")
        src.emit(f"raise {src.bind(NotColumnWise, 'NotColumnWise')}", 1)

    render_keys(main, "")
    render_time_check(main, "")
    key = src.local("key")
    render_join(main, key, "")
    values = []
    for v in main.values.values:
        local = src.local(f"v_{v.name}")
        src.emit(f"{local} = {src.bind(columns.value(v), f'value_{v.name}')}({cols[v.name]}, n)")
        values.append(local)
    ckey = "None"
    if current is not None:
        render_keys(current, "current_")  # the fields the main key lacks
        if current._like is None:
            render_time_check(current, "current_")
        ckey = src.local("current_key")
        render_join(current, ckey, "current_")
    src.emit(f"return {key}, us, [{', '.join(values)}], {ckey}")
    name = "encode_frame_" + "".join(ch if ch.isalnum() else "_" for ch in main.table)
    source = src.source(f"def {name}(n, {', '.join(cols.values())}):")
    function = compile_function(source, name, src.namespace,
                                f"<tsmodel codec {main.model}.{main.table} encode_frame>")
    return names, function


def frame_encoder(spec: Any) -> tuple[tuple[str, ...], Callable[..., Any]] | None:
    """``spec``'s frame encoder (`render_frame_encoder()` of its main and current-value
    tables), rendered once and kept with the main table's codec (its
    ``renderings``: ``tsmodel codec`` shows it); ``None`` where there is none:
    a model whose events `check_all()` encodes whole (`column_checker()`), or a
    salted key.

    Raises:
        ExtraNotInstalledError: pyarrow is not installed.
    """
    codec = spec.codec
    if "frame" not in codec.renderings:
        found = None
        if column_checker(spec) is not None:
            pa = require("pyarrow", "arrow", "save_frame()")
            columns = FrameColumns(pa, importlib.import_module("pyarrow.compute"),
                                   importlib.import_module("numpy"))
            found = render_frame_encoder(columns, codec, spec.current_codec)
        codec.renderings["frame"] = found[1] if found is not None else None
        codec.renderings["frame fields"] = found[0] if found is not None else None
    function = codec.renderings["frame"]
    return None if function is None else (codec.renderings["frame fields"], function)
