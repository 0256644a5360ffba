"""Frames in: a DataFrame or Arrow data whose columns are a model's fields, as events.

`Connection.save_frame()` (and the async connection's) saves a pandas or
polars ``DataFrame``, a ``pyarrow.Table`` or ``RecordBatch``, or an iterable
of record batches. This module reads such input as Arrow record batches,
``rows`` at a time, so that memory stays bounded whatever the input's size,
and makes each a `Chunk` to save as ``save_all`` saves the same events (the
same validation, cells, companions, rollups and outcomes). Where the model
allows, a chunk is checked and encoded a whole column at a time
(`FrameEncoder`, `tsmodel.io.frame_columns`) and saved from its checked
tuples, without an instance per row; otherwise (or for a value that
encoding leaves to the per-event check) its columns are converted to
Python values a column at a time (Arrow's conversion, one call per column:
times to aware datetimes, those of a UTC column in ``datetime.timezone.utc``
from its integers, dictionary columns to their values, nulls to ``None``),
its instances built (by a constructor compiled for the frame's columns,
taking them by position) and checked per event. `FrameSave` is the state
of one save; `tsmodel.run.frame_steps` is the sequence both connections
drive.

Columns must be fields of the model; a field missing from the frame takes
its declared default (a field without one is refused before anything is
read). Arrow's types are kept as they are: an integer column of a float
field is refused by the save's validation as it would be in ``save_all``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from itertools import starmap
from typing import Any, cast, overload

import attrs

from tsmodel import errors
from tsmodel.declare.spec import spec_of
from tsmodel.encoding.timestamps import to_micros
from tsmodel.ground.base import DeclaredColumns
from tsmodel.io import require
from tsmodel.io.frame_columns import FrameColumns, Missing, frame_encoder
from tsmodel.layouts._source import compile_function
from tsmodel.layouts.render_write import NotColumnWise
from tsmodel.plan.events import CheckedEvents, checked_events, column_checker
from tsmodel.plan.results import EntityResult, FrameResult, WriteResult, WriteStatus
from tsmodel.plan.retention import retention_horizons
from tsmodel.plan.writes import prepare_save

__all__ = ["Chunk", "FrameEncoder", "is_stream", "row_count", "FrameSave", "DEFAULT_FRAME_ROWS"]

#: Rows of a frame saved at a time (validated, then written, then let go).
DEFAULT_FRAME_ROWS = 20_000

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: Arrow's time zones that are UTC itself.
_UTC_NAMES = frozenset({"UTC", "utc", "Etc/UTC", "+00:00", "Z"})
_UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1}


@attrs.frozen
class Chunk:
    """Consecutive rows of a frame as instances.

    Attributes:
        start: the index of the first row in the whole input (0 for the first).
        instances: one instance per row, in the frame's order.
    """

    start: int
    instances: list[Any]
    #: The rows checked and encoded column-wise (`FrameEncoder`), saved without
    #: their instances (``instances`` then makes each one only when asked).
    checked: CheckedEvents | None = None


def is_stream(frame: Any) -> bool:
    """Whether ``frame`` is a one-shot iterable of record batches (not a frame or table)."""
    return _kind(frame) == "batches" and iter(frame) is frame


def _kind(frame: Any) -> str:
    module = type(frame).__module__.split(".")[0]
    name = type(frame).__name__
    if module == "pandas" and name == "DataFrame":
        return "pandas"
    if module == "polars" and name == "DataFrame":
        return "polars"
    if module == "pyarrow" and name in ("Table", "RecordBatch"):
        return "arrow"
    if isinstance(frame, (str, bytes)) or not isinstance(frame, Iterable):
        raise errors.ArgumentTypeError(
            "save_frame() takes a pandas or polars DataFrame, a pyarrow Table or RecordBatch, "
            f"or an iterable of record batches as its frame; got {type(frame).__name__} "
            f"{frame!r:.80}")
    return "batches"


def _arrow_chunks(model: str, frame: Any, rows: int,
                  nan_fields: frozenset[str] = frozenset(),
                  on_columns: Callable[[tuple[str, ...]], None] = lambda names: None,
                  ) -> Iterator[Any]:
    """The input as Arrow record batches (or tables) of at most ``rows`` rows.

    ``on_columns`` is called with the column names of the frame (of each batch of a
    stream) before its rows, also when it has none.

    A pandas float column's NaN is a missing value (null), pandas' convention,
    except in ``nan_fields``: fields that take NaN and cannot be ``None``, where
    NaN is the number (what ``to_pandas()`` writes for one).

    Raises:
        ValidationError: a pandas column holds values Arrow cannot hold in one
            column (its ``row``: the first value of another type than the first),
            or two columns of a pandas frame have one name.
    """
    kind = _kind(frame)
    pa = require("pyarrow", "arrow", "save_frame()")
    if kind == "pandas":
        # pyarrow refuses a frame with two columns of one name before they are checked
        names = [str(n) for n in frame.columns]
        _check_unique(model, names)
        on_columns(tuple(names))
        numbers = [n for n in frame.columns
                   if n in nan_fields and getattr(frame[n].dtype, "kind", "") == "f"
                   and type(frame[n].dtype).__module__.startswith("numpy")]
        for at in range(0, len(frame), rows):
            part = frame.iloc[at:at + rows]
            try:
                batch = pa.RecordBatch.from_pandas(part, preserve_index=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise _mixed_column(pa, model, part, at, exc) from None
            if numbers:
                columns = list(batch.columns)
                for n in numbers:
                    i = batch.schema.get_field_index(n)
                    columns[i] = pa.array(part[n].to_numpy(), type=columns[i].type)
                batch = pa.RecordBatch.from_arrays(columns, schema=batch.schema)
            yield batch
    elif kind == "polars":
        on_columns(tuple(frame.columns))
        for at in range(0, frame.height, rows):
            yield frame.slice(at, rows).to_arrow()
    elif kind == "arrow":
        on_columns(tuple(frame.schema.names))
        yield from _rechunked(frame, rows)
    else:
        for batch in frame:
            if type(batch).__module__.split(".")[0] != "pyarrow":
                raise errors.ArgumentTypeError(
                    "save_frame() takes an iterable of pyarrow record batches as its frame; "
                    f"got one of {type(batch).__name__} {batch!r:.80}")
            on_columns(tuple(batch.schema.names))
            yield from _rechunked(batch, rows)


def _mixed_column(pa: Any, model: str, part: Any, at: int,
                  exc: Exception) -> errors.ValidationError:
    """The error of a pandas chunk (from row ``at``) that Arrow could not convert."""
    for name in part.columns:
        try:
            pa.array(part[name], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            values = part[name].tolist()
            present = [(i, v) for i, v in enumerate(values) if v is not None and v == v]
            kind = type(present[0][1]) if present else None
            i, value = next(((i, v) for i, v in present if type(v) is not kind),
                            present[0] if present else (0, None))
            error = errors.ValidationError(
                f"{value!r} ({type(value).__name__}) in a column of "
                f"{kind.__name__ if kind else 'other'} values: a frame's column holds "
                f"values of one type (pyarrow: {exc})", model=model, field=str(name),
                value=value)
            return _at_row(error, at + i)
    return _at_row(errors.ValidationError(
        f"the frame's rows from here to row {at + len(part) - 1} cannot be read as Arrow "
        f"columns (pyarrow: {exc})", model=model), at)


def _at_row(error: errors.ValidationError, row: int) -> errors.ValidationError:
    error.row = row
    error.args = (f"row {row}: {error.args[0]}", *error.args[1:])
    return error


def _rechunked(data: Any, rows: int) -> Iterator[Any]:
    for at in range(0, data.num_rows, rows):
        yield data.slice(at, rows)


def _python_column(pa: Any, column: Any) -> list[Any]:
    """An Arrow column's values as Python objects (times as aware datetimes)."""
    t = column.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        try:  # whole microseconds (all a datetime holds): exact as datetimes
            column = column.cast(pa.timestamp("us", tz=t.tz))
        except pa.ArrowInvalid:
            pass  # sub-microsecond times: pandas Timestamps, refused by the save's check
    t = column.type
    if pa.types.is_timestamp(t) and t.tz in _UTC_NAMES and t.unit in _UNIT_US:
        # UTC times, a whole column at a time: its integers, each to a datetime in
        # datetime.timezone.utc (Arrow's own conversion makes a ZoneInfo("UTC")
        # datetime, several times slower, which the encoder then converts again).
        # The same instants; a null stays None.
        step = timedelta(microseconds=_UNIT_US[t.unit])
        ints = column.cast(pa.int64()).to_pylist()
        return [None if i is None else _EPOCH + i * step for i in ints]
    values: list[Any] = column.to_pylist()
    return values


def _batches(model: type, frame: Any, rows: int) -> Iterator[tuple[int, Any]]:
    """The rows of ``frame`` as Arrow record batches (or tables) of at most ``rows``
    rows, their columns checked against the model's fields, each with its start."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise errors.ArgumentError(
            f"save_frame(rows): rows per chunk must be an int >= 1, got {rows!r:.80}")
    fields = {a.name: a for a in attrs.fields(model)}
    nan_fields = frozenset(v.name for v in spec_of(model).values
                           if v.allow_nan and not v.optional)
    start = 0
    checked: tuple[str, ...] | None = None

    def check(names: tuple[str, ...]) -> None:
        nonlocal checked
        if names != checked:
            _check_columns(model.__name__, fields, names)
            checked = names

    def declared(names: tuple[str, ...]) -> None:
        # A frame's columns are checked before its rows, if it has none too: they
        # are wrong whatever its rows. A frame without columns (``pd.DataFrame()``)
        # says nothing until it has rows.
        if names:
            check(names)

    for data in _arrow_chunks(model.__name__, frame, rows, nan_fields, declared):
        check(tuple(data.schema.names))
        yield start, data
        start += data.num_rows


def _python_columns(pa: Any, data: Any) -> dict[str, list[Any]]:
    """A chunk's columns as Python values by field name (what its instances are made of)."""
    return {n: _python_column(pa, data.column(i)) for i, n in enumerate(data.schema.names)}


class _Instances(Sequence[Any]):
    """The instances of a chunk's rows, each made when asked for (`Chunk.instances` of a
    chunk saved from its checked tuples: only a row not written is ever made)."""

    def __init__(self, pa: Any, data: Any, make: Callable[..., Any]) -> None:
        self._pa, self._data, self._make = pa, data, make
        self._columns: list[list[Any]] | None = None

    def __len__(self) -> int:
        return int(self._data.num_rows)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if self._columns is None:
            self._columns = list(_python_columns(self._pa, self._data).values())
        return self._make(*[column[index] for column in self._columns])


class FrameEncoder:
    """A model's frames checked and encoded column-wise, without instances, where
    the model allows it (`_ColumnCheck`, and a key without salt): the per-event
    check rendered over Arrow columns (`tsmodel.io.frame_columns`).

    `checked()` is a chunk's checked tuples, or ``None`` when the chunk must go
    through the row-wise check (a value the column-wise encoding leaves to it,
    or rows past a max age unless ``accept_expired``).
    """

    def __init__(self, model: type, column_check: _ColumnCheck) -> None:
        self.model, self.spec = model, column_check.spec
        self._pa = require("pyarrow", "arrow", "save_frame()")
        self._fields = column_check.fields
        self._horizons = column_check.horizons
        self._render = frame_encoder(self.spec) if column_check.check is not None else None
        self._makers: dict[tuple[str, ...], Callable[..., Any]] = {}

    def encoded(self, data: Any, accept_expired: bool) -> tuple[Any, ...] | None:
        """The chunk's columns encoded (`render_frame_encoder`), or ``None``."""
        if self._render is None:
            return None
        names, encode = self._render
        given = data.schema.names
        columns = []
        for name in names:
            if name in given:
                columns.append(data.column(given.index(name)))
            else:
                default = self._fields[name].default
                if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                    return None
                columns.append(Missing(default))
        try:
            found: tuple[Any, ...] = encode(data.num_rows, *columns)
        except NotColumnWise:
            return None
        us = found[1]
        if accept_expired or not self._horizons or not len(us):
            return found
        return found if _fresh(self._horizons, int(us.min())) else None

    def checked(self, start: int, data: Any, accept_expired: bool) -> Chunk | None:
        """The chunk saved from its checked tuples, or ``None`` (see the class)."""
        found = self.encoded(data, accept_expired)
        if found is None:
            return None
        names = tuple(data.schema.names)
        make = self._makers.get(names) or self._makers.setdefault(
            names, _maker(self.model, names))
        instances = _Instances(self._pa, data, make)
        rows = FrameColumns.rows(*found)
        keys, us, values, _ = found
        return Chunk(start, cast("list[Any]", instances),
                     checked_events(self.spec, instances, rows,
                                    DeclaredColumns(keys, us, values)))


def _fresh(horizons: tuple[tuple[str, str, timedelta], ...], oldest_us: int) -> bool:
    """Whether an event at ``oldest_us`` (and so every later one) is within every max age."""
    now_us = to_micros(datetime.now(timezone.utc))
    oldest = oldest_us // 1_000 * 1_000
    return all(oldest >= now_us - age // timedelta(microseconds=1) for _, _, age in horizons)


class _ColumnCheck:
    """The check of a frame's rows column-wise, without their instances, where it
    is the check ``save_all`` makes of them: `tsmodel.plan.events.column_checker`,
    the per-event check rendered over columns, for a model whose instances hold
    exactly the values they are made of (no attrs converter, validator or
    post-init hook) and whose missing columns' defaults are plain values."""

    def __init__(self, model: type) -> None:
        self.spec = spec_of(model)
        self.fields = {a.name: a for a in attrs.fields(model)}
        found = column_checker(self.spec)
        plain = all(a.converter is None and a.validator is None for a in self.fields.values())
        hooks = any(hasattr(model, h) for h in ("__attrs_post_init__", "__attrs_pre_init__"))
        self.check = found if plain and not hooks else None
        self.horizons = retention_horizons(self.spec)

    def rows_pass(self, columns: dict[str, list[Any]], accept_expired: bool) -> bool:
        """Whether every row passes the check (and retention, unless ``accept_expired``);
        ``False``: the rows must be checked per event (one may be refused)."""
        if self.check is None:
            return False
        names, check = self.check
        n = len(next(iter(columns.values()))) if columns else 0
        given = []
        for name in names:
            column = columns.get(name)
            if column is None:
                default = self.fields[name].default
                if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                    return False
                column = [default] * n
            given.append(column)
        try:
            checked = check(*given)
        except Exception:  # noqa: BLE001 (the per-event check raises the error to show)
            return False
        if accept_expired or not self.horizons or not checked:
            return True
        return _fresh(self.horizons, min(t[1] for t in checked))


def _maker(model: type, names: tuple[str, ...]) -> Any:
    """``model``'s constructor taking the frame's columns by position: each row's
    values as keywords, without a dict per row (a compiled one-line function)."""
    args = [f"c{i}" for i in range(len(names))]
    call = ", ".join(f"{n}={a}" for n, a in zip(names, args, strict=True))
    source = f"def make({', '.join(args)}):\n    return model({call})\n"
    return compile_function(source, "make", {"model": model},
                            f"<tsmodel frame {model.__name__} rows>")


def _check_columns(model: str, fields: dict[str, Any], names: tuple[str, ...]) -> None:
    unknown = [n for n in names if n not in fields]
    if unknown:
        raise errors.ValidationError(
            f"the frame's column {unknown[0]!r} is no field of the model (fields: "
            f"{', '.join(fields)})", model=model, field=unknown[0])
    _check_unique(model, names)
    missing = [n for n, a in fields.items() if n not in names and a.default is attrs.NOTHING]
    if missing:
        raise errors.ValidationError(
            f"the frame has no column for {missing[0]!r}, a field without a default",
            model=model, field=missing[0])


def _check_unique(model: str, names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise errors.ValidationError(f"the frame has two columns named {twice!r}",
                                     model=model, field=twice)


def row_count(frame: Any) -> int | None:
    """The rows of ``frame`` when known before reading it (``None``: a stream)."""
    kind = _kind(frame)
    if kind == "pandas":
        return len(frame)
    if kind == "polars":
        return int(frame.height)
    if kind == "arrow":
        return int(frame.num_rows)
    return None


class FrameSave:
    """The sequence of one ``save_frame()``, for the sync and the async connection.

    The connection saves each chunk of `chunks()` with ``save_all`` and hands
    its result to `saved()` (or the `ValidationError` it raised to
    `refused()`); `result()` is the whole frame's `FrameResult`: counts per
    outcome, and the `EntityResult` of each row not written (with its
    ``row``), nothing kept of a row written, so that memory stays flat.

    Args:
        validate_first: `validate()` checks every row before the first write (a
            second pass over the input: a one-shot stream of batches is
            refused); else each chunk is validated before it is written.
    """

    def __init__(self, model: type, frame: Any, rows: int, *, validate_first: bool,
                 accept_expired: bool) -> None:
        if validate_first and is_stream(frame):
            raise errors.ArgumentError(
                "save_frame(validate_first=True) reads the input twice (every row is "
                "checked before the first write); a one-shot iterator of record batches "
                "can be read once: pass validate_first=False (each chunk is checked before "
                "it is written), or a list of batches or a pyarrow Table")
        self.model, self.frame, self.rows = model, frame, rows
        self.validate_first, self.accept_expired = validate_first, accept_expired
        self._rows = self._written = 0
        self._not_written: list[EntityResult] = []
        #: The rows of the frame when known before reading it (``None``: a stream).
        self.total = row_count(frame)
        self._at = 0  # the row of the entity encoded last (see counted())
        self._checks: _ColumnCheck | None = None
        self._encodes: FrameEncoder | None = None

    def validate(self) -> None:
        """Check every row as ``save_all`` checks it, nothing written (``validate_first``).

        Raises:
            ValidationError: a row cannot be stored; ``row`` is its index.
            RetentionError: unless ``accept_expired``, events already too old.
        """
        if not self.validate_first:
            return
        column_check = self._column_check()
        encoder = self._encoder()
        pa = require("pyarrow", "arrow", "save_frame()")
        makers: dict[tuple[str, ...], Any] = {}
        for start, data in _batches(self.model, self.frame, self.rows):
            if encoder.encoded(data, self.accept_expired) is not None:
                continue  # checked column-wise, a whole column at a time
            columns = _python_columns(pa, data)
            if column_check.rows_pass(columns, self.accept_expired):
                continue  # no instance made: the rows pass the check save_all makes
            # A row refused (or a value the column-wise check leaves to the per-event
            # one): the chunk's instances, checked as save_all checks them.
            names = tuple(columns)
            make = makers.get(names) or makers.setdefault(names, _maker(self.model, names))
            chunk = Chunk(start, list(starmap(make, zip(*columns.values(), strict=True))))
            try:
                prepare_save(self.counted(chunk), self.accept_expired)
            except errors.ValidationError as exc:
                raise self._located(exc) from None

    def _column_check(self) -> _ColumnCheck:
        if self._checks is None:
            self._checks = _ColumnCheck(self.model)
        return self._checks

    def _encoder(self) -> FrameEncoder:
        if self._encodes is None:
            self._encodes = FrameEncoder(self.model, self._column_check())
        return self._encodes

    def chunks(self) -> Iterator[Chunk]:
        """The chunks to save: each checked and encoded column-wise where it can be
        (`FrameEncoder`: no instance made), else as its instances (each column's
        Python values, a row's instance made by a constructor compiled for the
        frame's columns).

        Raises:
            TypeError: ``frame`` is none of the inputs `save_frame()` takes.
            ValidationError: a column is no field of the model, or a field without a
                default has no column (raised before the first chunk).
            ValueError: ``rows`` is not an int >= 1.
            ExtraNotInstalledError: pyarrow is not installed.
        """
        encoder = self._encoder()
        pa = require("pyarrow", "arrow", "save_frame()")
        for start, data in _batches(self.model, self.frame, self.rows):
            chunk = encoder.checked(start, data, self.accept_expired)
            if chunk is None:
                names = tuple(data.schema.names)
                make = encoder._makers.get(names) or encoder._makers.setdefault(
                    names, _maker(self.model, names))
                values = _python_columns(pa, data).values()
                chunk = Chunk(start, list(starmap(make, zip(*values, strict=True))))
            yield chunk

    def entities(self, chunk: Chunk) -> Iterable[Any]:
        """What the chunk's ``save_all`` takes: its `CheckedEvents` where it was checked
        column-wise, else its instances `counted()`."""
        return chunk.checked if chunk.checked is not None else self.counted(chunk)

    def counted(self, chunk: Chunk) -> Iterator[Any]:
        """The chunk's instances, each one's row noted as it is taken (to name a bad one)."""
        for i, instance in enumerate(chunk.instances):
            self._at = chunk.start + i
            yield instance

    def _located(self, exc: errors.ValidationError) -> errors.ValidationError:
        if exc.row is not None:  # located where it was found (a value Arrow refused)
            return exc
        return _at_row(exc, self._at)

    def saved(self, chunk: Chunk, result: WriteResult) -> None:
        """Take the `WriteResult` of one chunk's ``save_all``: its rows counted, and the
        `EntityResult` of each row not written kept (with its ``row``), nothing else."""
        self._rows += len(result)
        written = result.counts().get(WriteStatus.WRITTEN, 0)
        self._written += written
        if written == len(result):  # the common case: no row's result is made at all
            return
        for row, r in enumerate(result.results, chunk.start):
            if r.status is not WriteStatus.WRITTEN:
                self._not_written.append(EntityResult(r.entity, r.status, r.tables, row))

    def refused(self, exc: errors.ValidationError) -> errors.ValidationError:
        """The error of a chunk refused (validated chunk by chunk): its row, and the
        result of the chunks before (written) as ``exc.result``."""
        exc = self._located(exc)
        exc.result = self.result()
        return exc

    def result(self) -> FrameResult:
        """The frame's result so far: counts per outcome, the rows not written."""
        counts = Counter(r.status for r in self._not_written)
        return FrameResult(self._rows, self._written, counts[WriteStatus.FAILED],
                           counts[WriteStatus.UNKNOWN], counts[WriteStatus.PARTIAL],
                           tuple(self._not_written))
