"""The read side of the codec generator: a table's declaration rendered into decoders.

What the bytes of a table mean is declared once: its row key layout, its
`Layout` and the model's value codecs. This module renders that declaration
into the source of specialized functions, compiled once per table codec
(`tsmodel.layouts._source`, so tracebacks and debuggers show the generated
lines and `rendered()` prints them):

* `render_values()`: the value fields of one event's cells (a column per
  value field, or the serialized blob), every column of the declaration an
  ``if`` of its own, each value's codec bound by name; the readers of the
  built-in layouts call it.
* `render_rows()`: a row into the records of its events (`TableCodec.records`)
  and into instances (`TableCodec.decode`): the key's fields, the salt's
  check, the strict check of unknown columns, the layout's reader, the
  required values, the defaults, ``only=`` and the times, with every choice
  the declaration fixes made once, here, not per row.
* `render_columns()`: rows straight into columns (a list per field), the
  columnar results' decoding (`tsmodel.io.arrow`), rendered from the same
  declaration as the records.
* `render_batch_columns()`, `render_bucket_batch_columns()`: the collectors
  of a `CellBatch` 's undecoded columns, where rows have a fixed shape of
  cells; `render_batch_instances()`: a batch straight into instances from
  them (a range read's), a whole column at a time.

There is no other decoding of rows: the property tests of
``tests/unit/test_rendered_decoders.py`` hold every rendering to the
reference of the oracle harness on every layout shape, values and errors.
"""

from __future__ import annotations

import itertools
import operator
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from tsmodel import errors
from tsmodel.encoding.codecs import Float64, Int64
from tsmodel.encoding.keys import SegmentValueError, TimestampSegment
from tsmodel.encoding.timestamps import EPOCH, EpochEncoding
from tsmodel.ground.base import Cell
from tsmodel.layouts._source import compile_function
from tsmodel.layouts.base import MARKER, TableShape, column_name, missing_value

#: A `tsmodel.layouts.codec.TableCodec` (which imports this module).
TableCodec = Any

__all__ = ["render_values", "render_rows", "render_columns", "render_raw_columns",
           "render_batch_columns", "render_bucket_batch_columns", "render_batch_instances",
           "time_key_arithmetic"]

#: The errors an application's codec may raise for bytes it refuses its own way.
_REFUSALS = (ValueError, TypeError, ArithmeticError, LookupError)


class _Source:
    """Lines of source with indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def indent(self) -> _Source:
        self.depth += 1
        return self

    def dedent(self) -> None:
        self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _ident(text: str) -> str:
    """``text`` as part of a Python identifier (for readable generated names)."""
    out = "".join(ch if ch.isalnum() else "_" for ch in text)
    return out if out.isidentifier() else f"_{out}"


# -- the value fields of one event's cells ----------------------------------------------


def render_values(shape: TableShape) -> Callable[[Iterable[Cell]], dict[str, Any]]:
    """The decoder of the value fields in the cells of one event, rendered for ``shape``.

    The first cell of a column wins; a field without a cell is ``None``; other
    columns are ignored. Where no value must have a cell (every value optional
    or defaulted), an event is a value cell or the empty marker cell: cells
    holding neither are refused.

    Raises (from the decoder):
        CellDecodingError: a cell's bytes are not what its field declares; the
            error names the field and the column.
    """
    src = _Source()
    ns: dict[str, Any] = {"CellDecodingError": errors.CellDecodingError,
                          "REFUSALS": _REFUSALS}
    ser = shape.serialization
    if ser is not None:
        ns.update(parse=ser.decode, EMPTY={v.name: None for v in shape.values})
        src("def decode_values(cells):")
        src.indent()
        src("for c in cells:")
        src.indent()
        src(f"if c.qualifier == {ser.qualifier!r} and c.family == {ser.family!r}:")
        src.indent()
        src("try:")
        src("    return parse(c.value)")
        src("except CellDecodingError as exc:")
        src(f"    exc.locate(column={column_name(ser.family, ser.qualifier)!r})")
        src("    raise")
        src.dedent()
        src.dedent()
        src("return EMPTY.copy()")
        return compile_function(src.text(), "decode_values", ns,
                                f"<tsmodel codec {shape.name} values>")
    sparse = not any(v.stored for v in shape.values)
    names = {v.name: f"v{i}" for i, v in enumerate(shape.values)}
    by_family: dict[str, list[Any]] = {}
    for v in shape.values:
        by_family.setdefault(v.family, []).append(v)
    src("def decode_values(cells):")
    src.indent()
    if sparse:
        src("cells = tuple(cells)")
        src("marker = False")
    if names:
        src(" = ".join(names.values()) + " = None")
    src("for family, qualifier, _, value in cells:")
    src.indent()
    first = True
    families = list(by_family.items())
    if sparse and shape.family not in by_family:
        families.append((shape.family, []))
    for family, values in families:
        src(f"{'if' if first else 'elif'} family == {family!r}:")
        first = False
        src.indent()
        branch = "if"
        for v in values:
            var, dec = names[v.name], f"d_{names[v.name]}"
            ns[dec] = v.codec.decode
            where = column_name(v.family, v.qualifier)
            src(f"{branch} qualifier == {v.qualifier!r}:  # {v.name}")
            branch = "elif"
            src.indent()
            src(f"if {var} is None:")
            src.indent()
            src("try:")
            src(f"    {var} = {dec}(value)")
            src("except CellDecodingError as exc:")
            src(f"    exc.locate(field={v.name!r}, column={where!r})")
            src("    raise")
            src("except REFUSALS as exc:")
            src("    raise CellDecodingError(")
            src("        f\"the field's codec refused the cell: {exc!r}\", data=value,")
            src(f"        field={v.name!r}, column={where!r}) from exc")
            src.dedent()
            src.dedent()
        if sparse and family == shape.family and all(v.qualifier != MARKER for v in values):
            src(f"{branch} qualifier == {MARKER!r}:  # the empty marker cell")
            src("    marker = True")
            branch = "elif"
        if branch == "if":
            src("pass")
        src.dedent()
    src.dedent()
    if sparse:
        nothing = " and ".join(f"{var} is None" for var in names.values()) or "True"
        src(f"if {nothing} and not marker and cells:")
        src.indent()
        src("c = cells[0]")
        src("raise CellDecodingError(")
        src("    'no cell of a value field and no empty marker cell: not an event of this '")
        src("    'model (a foreign or damaged row)', column=column_name(c.family, c.qualifier))")
        src.dedent()
        ns["column_name"] = column_name
    src("return {" + ", ".join(f"{n!r}: {var}" for n, var in names.items()) + "}")
    return compile_function(src.text(), "decode_values", ns,
                            f"<tsmodel codec {shape.name} values>")


# -- rows into records and instances -----------------------------------------------------


def _namespace(codec: TableCodec) -> dict[str, Any]:
    return {
        "decode_key": codec.key.decode, "SegmentValueError": SegmentValueError,
        "KeyDecodingError": errors.KeyDecodingError,
        "CellDecodingError": errors.CellDecodingError,
        "check_salt": codec._check_salt, "check_columns": codec._check_columns,
        "check_key_columns": codec._check_key_columns,
        "read": codec._read, "read_history": codec._history or codec._read,
        "missing_value": missing_value, "SHAPE": codec.shape,
        "EPOCH": EPOCH, "timedelta": timedelta, "MODEL": codec.model, "TABLE": codec.table,
    }


def _head(src: _Source, codec: TableCodec) -> None:
    """The key's fields and the row's events: ``key``, ``keys``, ``key_time``, ``events``."""
    src("key = row.key")
    src("try:")
    src("    keys = decode_key(key)")
    src("except SegmentValueError as exc:")
    src("    raise KeyDecodingError(f'{MODEL}: row key {key!r} of table {TABLE!r}: {exc}') "
        "from None")
    if not codec._joins_plainly:
        src("check_salt(key, keys)")
        src(f"del keys[{'__salt__'!r}]")
    if codec.time_field in codec.key.fields:
        src(f"key_time = keys.pop({codec.time_field!r})")
    else:
        src("key_time = None")
    src("cells = row.cells")
    if codec._owns is not None:
        src("check_columns(cells)")
    src("events = read_history(cells, key_time) if history else read(cells, key_time)")
    if codec._key_columns:
        src("check_key_columns(cells, keys, key_time, events)")


def _event(src: _Source, codec: TableCodec, emit: str, datetimes: str) -> None:
    """The loop over ``events`` of one row, handing each record to ``emit``.

    Times are built as ``EPOCH + timedelta(0, 0, us)``: the same value as
    ``timedelta(microseconds=us)``, a third faster (0.34 us instead of 0.51,
    measured: ``timedelta`` takes keyword arguments the slow way).
    """
    values = codec.values.values
    required = [v.name for v in values if v.stored]
    witness = codec.witness
    defaulted = [v.name for v in values if v.has_default]
    per_event = not codec.layout.bucketed
    time_name, version = codec.time_field, codec._version_field
    src("for ts, values in events:")
    src.indent()
    if required or defaulted:
        src("if None in values.values():  # a C-level scan; a closer look if one is missing")
        src.indent()
        for name in required:
            always = "" if name != witness else " or True"
            cond = f"(only is None or {name!r} in only{always})" if not always else ""
            test = f"values[{name!r}] is None" + (f" and {cond}" if cond else "")
            src(f"if {test}:")
            if per_event:  # not an event of this model: a foreign or damaged row
                src(f"    raise missing_value(SHAPE, {name!r})")
            else:  # a bucket event past the version limit: never returned half-filled
                src("    continue")
        for name in defaulted:  # left out: the model's default applies
            src(f"if values[{name!r}] is None and (only is None or {name!r} in only):")
            src(f"    del values[{name!r}]")
        src.dedent()
    src("if only is not None:")
    src("    values = {k: (v if k in only else None) for k, v in values.items()}")
    if codec.key.fields:
        src("values.update(keys)  # promoted values are in the key (and the blob): the key wins")
    us = "key_time if key_time is not None else ts" if per_event else "ts"
    if datetimes == "True":
        src(f"values[{time_name!r}] = EPOCH + timedelta(0, 0, {us})")
        if version is not None:
            src(f"values[{version!r}] = EPOCH + timedelta(0, 0, ts)")
    else:
        src(f"if {datetimes}:")
        src(f"    values[{time_name!r}] = EPOCH + timedelta(0, 0, {us})")
        if version is not None:
            src(f"    values[{version!r}] = EPOCH + timedelta(0, 0, ts)")
        src("else:")
        src(f"    values[{time_name!r}] = {us}")
        if version is not None:
            src(f"    values[{version!r}] = ts")
    src(emit)
    src.dedent()


def _guarded(src: _Source, body: Callable[[], None]) -> None:
    """``body`` with the row's location added to a cell error."""
    src("try:")
    src.indent()
    body()
    src.dedent()
    src("except CellDecodingError as exc:")
    src("    exc.locate(model=MODEL, table=TABLE, row_key=key)")
    src("    raise")
    src("except OverflowError:  # a cell timestamp past the year 9999")
    src("    raise CellDecodingError(")
    src("        f'a cell timestamp ({max(c.timestamp for c in cells)} us) is past the '")
    src("        'last time a datetime holds (9999-12-31)', model=MODEL, table=TABLE,")
    src("        row_key=key) from None")


def _plain(codec: TableCodec, salted: bool = False) -> bool:
    """Whether ``codec``'s rows are plain events: a row per event, a column per value
    field, cells at the key's time, nothing else to check (no salt, no key
    column, no strict columns, no version field, some value required).
    ``salted``: a salted key too (its salt then checked by the caller)."""
    layout, shape = codec.layout, codec.shape
    return bool(layout.plain_event_rows and shape.serialization is None
                and shape.event_time_cells and not codec._key_columns and codec._owns is None
                and (codec._joins_plainly or salted) and codec._version_field is None
                and codec.time_field in codec.key.fields
                and any(v.stored for v in codec.values.values))


def _plain_instance(src: _Source, codec: TableCodec, ns: dict[str, Any]) -> None:
    """The instance of a plain event row (see `_plain()`), built straight from its cells;
    any other row (or ``only``, ``history``) goes on to the general decoding below,
    which reads it or raises its error."""
    values = codec.values.values
    time_name = codec.time_field
    key_fields = [f for f in codec.key.fields if f != time_name]
    slot = {v.name: f"v{i}" for i, v in enumerate(values)}
    last_name, width, decode_last = codec.key._last
    same_head = last_name == time_name and width is not None
    src("cells = row.cells")
    src("if only is None and not history and cells:")
    src.indent()
    src("key = row.key")
    if same_head:
        # Keys of one entity differ in their last segment, the time: the fields
        # before it are those of the key decoded last (one tuple, replaced whole).
        ns["decode_last"], ns["LAST"] = decode_last, [(None, 0, None)]
        src("head, size, keys = LAST[0]")
        src("if head is not None and len(key) == size and key.startswith(head):")
        src("    try:")
        src(f"        key_time = decode_last(key[{-width}:])")
        src("    except SegmentValueError:")
        src("        keys = None")
        src("else:")
        src.indent()
    src("try:")
    src("    keys = decode_key(key)")
    src("except SegmentValueError:")
    src("    keys = None")
    src("else:")
    src(f"    key_time = keys[{time_name!r}]")
    if same_head:
        src(f"    LAST[0] = (key[:{-width}], len(key), keys)")
        src.dedent()
    src("if keys is not None:")
    src.indent()
    src("ts = key_time // 1000 * 1000")
    src("plain = True")
    src(" = ".join(slot.values()) + " = None")
    src("for family, qualifier, t, value in cells:")
    src.indent()
    src("if t != ts:")
    src("    plain = False")
    src("    break")
    _render_cell_slots(src, values, slot)
    src.dedent()
    missing = [f"{slot[v.name]} is None" for v in values if v.stored or v.has_default]
    if missing:
        src(f"if {' or '.join(missing)}:")
        src("    plain = False  # a required value without its cell, or a default to apply")
    src("if plain:")
    src.indent()
    src("try:")
    src.indent()
    args = []
    for v in values:
        if v.name in key_fields:
            continue  # promoted: the key's value wins
        ns[f"d_{slot[v.name]}"] = v.codec.decode
        if v.optional:
            src(f"{slot[v.name]} = None if {slot[v.name]} is None else "
                f"d_{slot[v.name]}({slot[v.name]})")
        else:
            src(f"{slot[v.name]} = d_{slot[v.name]}({slot[v.name]})")
        args.append(f"{v.name}={slot[v.name]}")
    src("when = EPOCH + timedelta(0, 0, key_time)")
    src.dedent()
    src("except Exception:  # the general decoding says why, where")
    src("    plain = False")
    src("if plain:")
    args = [f"{f}=keys[{f!r}]" for f in key_fields] + [f"{time_name}=when"] + args
    src("    return [cls(" + ", ".join(args) + ")]")
    src.dedent()
    src.dedent()
    src.dedent()


def render_rows(codec: TableCodec) -> tuple[Callable[..., list[dict[str, Any]]],
                                            Callable[..., list[Any]]]:
    """The records and instances decoders of ``codec``'s table (see `TableCodec`)."""
    where = f"{codec.model}.{codec.table}"
    fns = []
    for name, head, emit, datetimes in (
            ("records", "def records(row, only=None, history=False, datetimes=False):",
             "append(values)", "datetimes"),
            ("decode", "def decode(cls, row, only=None, history=False):",
             "append(cls(**values))", "True")):
        src = _Source()
        ns = _namespace(codec)
        src(head)
        src.indent()
        if name == "decode" and _plain(codec):
            _plain_instance(src, codec, ns)
        src("key = cells = ()")

        def body(emit: str = emit, datetimes: str = datetimes, src: _Source = src) -> None:
            _head(src, codec)
            src("out = []")
            src("append = out.append")
            _event(src, codec, emit, datetimes)
            src("return out")

        _guarded(src, body)
        fns.append(compile_function(src.text(), name, ns, f"<tsmodel codec {where} {name}>"))
    return fns[0], fns[1]


def render_columns(codec: TableCodec,
                   names: tuple[str, ...]) -> Callable[..., dict[str, list[Any]]]:
    """The decoder of rows into columns of ``names`` (times in µs), for ``codec``'s table.

    The function takes ``(rows, only=None, history=False, columns=None)``
    and appends each event's values to ``columns`` (a new ``{name: list}``
    when ``None``), which it returns; a defaulted value without a cell is
    the field's default. It decodes as `render_rows()` does (same checks,
    same errors), with a list per field for the records' dicts.
    """
    src = _Source()
    ns = _namespace(codec)
    defaults = {v.name: v for v in codec.values.values if v.has_default}
    src("def columns(rows, only=None, history=False, columns=None):")
    src.indent()
    src("if columns is None:")
    src("    columns = {" + ", ".join(f"{n!r}: []" for n in names) + "}")
    for i, n in enumerate(names):
        src(f"c{i} = columns[{n!r}].append")
    src("cells = ()")
    src("key = None")
    src("for row in rows:")
    src.indent()
    emit_lines = []
    for i, n in enumerate(names):
        if n in defaults:
            ns[f"default_{i}"] = defaults[n].default_value
            emit_lines.append(f"c{i}(values[{n!r}] if {n!r} in values else default_{i}())")
        else:
            emit_lines.append(f"c{i}(values[{n!r}])")

    def body() -> None:
        _head(src, codec)
        _event(src, codec, "\n".join(emit_lines).replace("\n", "\n" + "    " * (src.depth + 1)),
               "False")

    _guarded(src, body)
    src.dedent()
    src("return columns")
    return compile_function(src.text(), "columns", ns,
                            f"<tsmodel codec {codec.model}.{codec.table} columns>")


def render_raw_columns(codec: TableCodec,
                       names: tuple[str, ...]) -> Callable[..., bool] | None:
    """A collector of rows' undecoded value bytes into columns, or ``None`` where the
    table's declaration has no such rendering.

    For a row per event with a column per value field (the common shape): the
    function takes ``(rows, columns)`` and appends, per row, its key fields,
    its time (µs) and each value field's cell bytes (``None`` without a cell)
    to ``columns[name]``, for a columnar decoder to decode whole columns at
    once. It returns ``False`` as soon as a row is anything but a plain event
    (cells of another time, a missing required value, a key that does not
    decode): the caller then decodes those rows with `render_columns()`,
    which reads them as `render_rows()` does or raises its error, so the
    outcome never depends on which of the two read them.
    """
    if not _plain(codec):
        return None
    values = {v.name: v for v in codec.values.values}
    key_fields = [f for f in codec.key.fields if f != codec.time_field]
    src = _Source()
    ns: dict[str, Any] = {"decode_key": codec.key.decode,
                          "SegmentValueError": SegmentValueError}
    src("def raw_columns(rows, columns, deferred=None):")
    src.indent()
    read = [v for v in codec.values.values if v.name in names or v.stored]
    _render_deferred(src, codec, read, names)
    var = {}
    for i, n in enumerate(names):
        var[n] = f"a{i}"
        src(f"a{i} = columns[{n!r}].append  # {n}")
    slot = {v.name: f"v{i}" for i, v in enumerate(read)}
    last_name, width, decode_last = codec.key._last
    # Keys of one entity differ in their last segment, the time: the fields before
    # it are those of the row before, whose key began with the same bytes.
    same_head = last_name == codec.time_field and width is not None
    ns["decode_last"] = decode_last
    src("keys = head = None")
    src("for row in rows:")
    src.indent()
    src("cells = row.cells")
    src("if not cells:")
    src("    continue  # no event")
    src("key = row.key")
    if same_head:
        src("if head is not None and len(key) == size and key.startswith(head):")
        src("    try:")
        src(f"        key_time = decode_last(key[{-width}:])")
        src("    except SegmentValueError:")
        src("        return False")
        src("else:")
        src.indent()
    src("try:")
    src("    keys = decode_key(key)")
    src("except SegmentValueError:")
    src("    return False")
    src(f"key_time = keys[{codec.time_field!r}]")
    if same_head:
        src(f"head, size = key[:{-width}], len(key)")
        src.dedent()
    src(f"ts = key_time // {1000} * {1000}")
    src(" = ".join(slot.values()) + " = None")
    src("for family, qualifier, t, value in cells:")
    src.indent()
    src("if t != ts:")
    src("    return False  # cells of another time: the reader's to sort out")
    _render_cell_slots(src, read, slot)
    src.dedent()
    for v in read:
        if v.stored:
            src(f"if {slot[v.name]} is None:")
            src("    return False  # a required value without its cell")
    for n in names:
        if n == codec.time_field:
            src(f"{var[n]}(key_time)")
        elif n in key_fields:
            src(f"{var[n]}(keys[{n!r}])")
        elif n in values:
            src(f"{var[n]}({slot[n]})")
        else:
            return None
    src.dedent()
    src("return True")
    return compile_function(src.text(), "raw_columns", ns,
                            f"<tsmodel codec {codec.model}.{codec.table} raw columns>")


def _render_deferred(src: _Source, codec: TableCodec, read: Sequence[Any],
                     names: tuple[str, ...]) -> None:
    """The branch of ``raw_columns`` for a caller that decodes the keys itself.

    With ``deferred`` (a list), each row's key, its cells' timestamp and its
    value bytes of the fields ``names`` go one after the other into that
    list, and the function returns the names of what each row put there
    (``"key"`` and ``"timestamp"`` first): the caller slices the columns out,
    and decodes the key fields and the time from the keys as a whole column
    and checks them against the timestamps. Only rows of exactly one cell
    per value field read, all required, in the order of the declaration's
    columns sorted (as both backends return them) and at one timestamp, are
    taken; at the first other row (a row without cells too) the function
    returns ``None``, and the caller calls it again without ``deferred`` (the
    row by row collection).
    """
    if not read or any(not v.stored for v in read) or len(
            {(v.family, v.qualifier) for v in read}) != len(read):
        src("if deferred is not None:")
        src("    return None  # no fixed shape of cells: collected row by row")
        return
    cols = sorted(read, key=lambda v: (v.family, v.qualifier))
    k = len(cols)
    kept = [(j, v.name) for j, v in enumerate(cols)
            if v.name in names and v.name not in codec.key.fields]  # promoted: the key's
    src("if deferred is not None:")
    src.indent()
    src("keep = deferred.extend")
    want = tuple(v.qualifier for v in cols) + tuple(v.family for v in cols)
    src(f"want = {want!r}  # qualifiers, then families")
    src("try:")
    src("    for key, cells in rows:")
    src.indent()
    src.indent()
    unpack = ", ".join(f"(f{j}, q{j}, t{j}, c{j})" for j in range(k))
    src(f"{unpack}{',' if k == 1 else ''} = cells")
    got = ", ".join([f"q{j}" for j in range(k)] + [f"f{j}" for j in range(k)])
    same = " == ".join(f"t{j}" for j in range(k))
    src(f"if ({got}) != want" + (f" or not {same}" if k > 1 else "") + ":")
    src("    return None")
    src("keep((key, t0" + "".join(f", c{j}" for j, _ in kept) + "))")
    src.dedent()
    src.dedent()
    src("except ValueError:  # another number of cells (or none): row by row")
    src("    return None")
    src(f"return {('key', 'timestamp', *(name for _, name in kept))!r}")
    src.dedent()


def _stored_sorted(read: list[Any]) -> list[Any] | None:
    """``read``, value fields, in the order the backends return their cells (family,
    then qualifier), or ``None`` unless each is stored in a column of its own."""
    if not read or any(not v.stored for v in read) or len(
            {(v.family, v.qualifier) for v in read}) != len(read):
        return None
    return sorted(read, key=lambda v: (v.family, v.qualifier))


def _fixed_cells(codec: TableCodec, names: tuple[str, ...],
                 salted: bool = False, every: bool = False) -> list[Any] | None:
    """The value fields whose cells make every plain event row of the fields ``names``:
    exactly one cell each, all required, in the order the backends return them
    (family, then qualifier); ``None`` where rows have no such fixed shape.
    ``salted``: salted keys too (`_plain()`). ``every``: rows with a cell of
    every value field, optional and defaulted ones too (each in a column of
    its own), which is the shape of such a model's rows where every value is
    there; the rows without one are another shape."""
    if not _plain(codec, salted):
        return None
    if every:
        values = list(codec.values.values)
        if len({(v.family, v.qualifier) for v in values}) != len(values):
            return None
        return sorted(values, key=lambda v: (v.family, v.qualifier))
    return _stored_sorted([v for v in codec.values.values if v.name in names or v.stored])


def render_batch_columns(codec: TableCodec, names: tuple[str, ...],
                         salted: bool = False, every: bool = False
                         ) -> Callable[..., Any] | None:
    """A collector of a `tsmodel.ground.base.CellBatch` 's undecoded columns, or
    ``None`` where the declaration's rows have no fixed shape of cells.

    The function takes a batch and returns ``(keys, timestamps, columns)``:
    each row's key, its cells' timestamp and, by field name, the value bytes
    of the fields ``names`` (promoted ones left to the key), taken a whole
    list at a time (slices and comparisons of the batch's lists, no loop per
    row), as `render_raw_columns()` with ``deferred`` takes them row by
    row. It returns ``None`` unless every row is exactly one cell per value
    field, in the declaration's columns sorted, all at one timestamp: the
    caller then reads the batch's rows (`CellBatch.rows()`) as before, which
    read them or raise their error, so the outcome never depends on which
    of the two read them. ``salted``: for a salted key too, whose salt the
    caller checks (the keys are not looked at here). ``every``: rows with a
    cell of every value field, optional ones too (`_fixed_cells()`).
    """
    cols = _fixed_cells(codec, names, salted, every)
    if cols is None:
        return None
    k, kept, src = _collector(codec, cols, names, "batch_columns")
    src("keys, values, times = batch.keys, batch.values, batch.timestamps")
    src("n = len(keys)")
    src(f"if len(values) != {k} * n or batch.ends != list(range({k}, {k} * n + 1, {k})):")
    src("    return None  # another number of cells in a row")
    src(f"if batch.qualifiers != {[v.qualifier for v in cols]!r} * n:")
    src("    return None")
    src(f"if batch.families != {[v.family for v in cols]!r} * n:")
    src("    return None")
    src(f"first = times[0::{k}]" if k > 1 else "first = times")
    for j in range(1, k):
        src(f"if times[{j}::{k}] != first:")
        src("    return None  # cells of one row at other times")
    taken = ", ".join(f"{name!r}: values[{j}::{k}]" if k > 1 else f"{name!r}: values"
                      for j, name in kept)
    src(f"return keys, first, {{{taken}}}")
    return compile_function(src.text(), "batch_columns", {},
                            f"<tsmodel codec {codec.model}.{codec.table} batch columns>")


def time_key_arithmetic(codec: TableCodec) -> tuple[int, int | None, int, int, int] | None:
    """What the digits of the time segment ending ``codec``'s row keys mean
    (`EpochEncoding.arithmetic`: ``(digits, base, unit, low, high)``), where a
    whole column of keys can be decoded at once: the key ends with the event
    time's segment, epoch digits of one width. ``None`` for any other key."""
    last = codec.key.segments[-1] if codec.key.segments else None
    if not isinstance(last, TimestampSegment) or last.field != codec.time_field or \
            not isinstance(last.encoding, EpochEncoding):
        return None
    return last.encoding.arithmetic()


def render_batch_instances(codec: TableCodec) -> Callable[..., Any] | None:
    """The decoder of a `tsmodel.ground.base.CellBatch` of plain event rows straight
    into instances, or ``None`` where the declaration has no such rendering.

    For a row per event, a column per value field, each with its cell (a
    model's optional and defaulted values too: a batch with a row without one
    is declined), and a key ending with the time (epoch digits, the common
    shape, or a formatted time of one width, decoded key by key by its
    declared decoder): the function
    takes ``(cls, batch)`` and returns ``(instances, None)``, the instances of
    the batch's rows in order (one a row), as `render_rows()`'s ``decode``
    builds them row by row, a whole column at a time: the values sliced out
    by `render_batch_columns()`, the keys' time digits checked and converted
    as one run (their arithmetic is the declared decoder's,
    `time_key_arithmetic()`), the segments before them decoded once per
    distinct head by the declared key decoding (a salted key encoded again
    and compared), each fixed-width number column unpacked by one
    ``struct`` call. It returns
    ``None`` as soon as anything in the batch is not such a row, or a value
    does not decode: the caller then decodes the batch's rows one by one
    (`CellBatch.rows()`), which read them or raise their error, so the
    outcome never depends on which of the two read them. For bucket rows of
    a fixed shape: `_render_bucket_instances()`, whose second item is each
    row's number of instances.
    """
    if codec.layout.bucketed:
        return _render_bucket_instances(codec)
    if not _plain(codec, salted=True):
        return None
    arithmetic = time_key_arithmetic(codec)
    time_name = codec.time_field
    last_name, width, decode_last = codec.key._last
    if arithmetic is None and (last_name != time_name or width is None):
        return None  # the time is not the key's last segment, of one width
    values = codec.values.values
    collect = render_batch_columns(codec, tuple(v.name for v in values), salted=True,
                                   every=True)
    if collect is None:
        return None
    src, ns, key_fields = _open_instances(codec, collect)
    src("keys, times, values = found")
    src("n = len(keys)")
    src("if not n:")
    src("    return [], None")
    if arithmetic is not None:  # epoch digits: checked and converted as one run
        digits, base, unit, low, high = arithmetic
        src(f"tails = [key[{-digits}:] for key in keys]")
        src("run = b''.join(tails)")
        src(f"if len(run) != {digits} * n or not run.isdigit():")
        src("    return None  # a key without the time's digits at its end")
        number = "int(tail)" if base is None else f"{base} - int(tail)"
        src(f"us = [({number}) * {unit} for tail in tails]")
        src(f"if min(us) < {low} or max(us) > {high}:")
        src("    return None")
        whole_ms = not unit % 1000
    else:  # another encoding of one width: its declared decoder, key by key
        digits, whole_ms = width, False
        ns["decode_last"] = decode_last
        src(f"tails = [key[{-digits}:] for key in keys]")
        src(f"if len(b''.join(tails)) != {digits} * n:")
        src("    return None  # a key shorter than its time segment")
        src("try:")
        src("    us = list(map(decode_last, tails))")
        src("except Exception:  # the rows say why")
        src("    return None")
    if whole_ms:  # the cells' timestamps are the key's times
        src("if times != us:")
    else:
        src("if times != [t // 1000 * 1000 for t in us]:")
    src("    return None  # cells of another time than the key's")
    salt = codec.key.salt()
    # One entity's rows (a range read of its key): every key its head, then its
    # time, found by comparing the keys with that head joined to their digits.
    one_head = bool(key_fields) and (salt is None or time_name not in salt.on)
    if key_fields or salt is not None:
        if one_head:
            src(f"head = keys[0][:{-digits}]")
            src("if set(map(len, keys)) == {len(keys[0])} and "
                "b''.join(keys) == head.join([b'', *tails]):")
            src("    heads = None  # one head: the first key's")
            src("    seen = {head: keys[0]}")
            src("else:")
            src.indent()
        src(f"heads = [key[:{-digits}] for key in keys]")
        src("seen = dict(zip(heads, keys))  # a key of each distinct head")
        if one_head:
            src.dedent()
        src("try:  # the fields before the time: once per distinct head")
        src("    fields = [decode_key(key) for key in seen.values()]")
        src("except SegmentValueError:")
        src("    return None")
    if salt is not None:  # each key under the salt its fields give (`_check_salt`)
        ns["encode_key"] = codec.key.encode
        src("try:")
        src.indent()
        if time_name in salt.on:  # a salt of each time: each key encoded again
            src("known = dict(zip(seen, fields))")
            src("for key, head, t in zip(keys, heads, us):")
            src("    canonical = known[head].copy()")
            src(f"    canonical[{time_name!r}] = t")
            src("    if encode_key(canonical) != key:")
            src("        return None  # another salt: the rows say whose")
        else:  # a salt of the fields before the time: once per distinct head
            src("for key, decoded in zip(seen.values(), fields):")
            src("    if encode_key(decoded) != key:")
            src("        return None")
        src.dedent()
        src("except SegmentValueError:")
        src("    return None")
    if key_fields:
        for i, f in enumerate(key_fields):
            src("if heads is None:")
            src(f"    k{i} = [fields[0][{f!r}]] * n")
            src("else:")
            src(f"    k{i} = dict(zip(seen, [decoded[{f!r}] for decoded in fields]))")
            src(f"    k{i} = list(map(k{i}.__getitem__, heads))")
    _render_instances(src, codec, ns, key_fields, "us", "None")
    return compile_function(src.text(), "batch_instances", ns,
                            f"<tsmodel codec {codec.model}.{codec.table} batch instances>")


def _open_instances(codec: TableCodec, collect: Callable[..., Any],
                    ) -> tuple[_Source, dict[str, Any], list[str]]:
    """A batch instances decoder's source, opened: ``collect`` (a batch collector)
    called, ``None`` returned where it declines the batch (its result is
    ``found``); its namespace, and the key fields other than the time."""
    ns: dict[str, Any] = {"collect": collect, "decode_key": codec.key.decode,
                          "SegmentValueError": SegmentValueError, "EPOCH": EPOCH,
                          "timedelta": timedelta, "unpack": struct.unpack}
    src = _Source()
    src("def batch_instances(cls, batch):")
    src.indent()
    src("found = collect(batch)")
    src("if found is None:")
    src("    return None  # rows of another shape")
    return src, ns, [f for f in codec.key.fields if f != codec.time_field]


def _render_instances(src: _Source, codec: TableCodec, ns: dict[str, Any],
                      key_fields: list[str], times: str, counts: str) -> None:
    """The close of a batch instances decoder: each value column decoded whole (a
    fixed-width number column by one ``struct`` call, a column holding ``None``
    where an optional value has no cell by its codec value by value), the
    times (µs, the list ``times``) as ``datetime`` s, and ``return`` of the
    instances, built from the key fields' lists ``k0``, ``k1``... and those,
    with ``counts`` (each row's number of instances, or ``None``: one each).
    A value that does not decode returns ``None``: the rows say why."""
    n = "len(whens)"
    src("try:")
    src.indent()
    src(f"whens = [EPOCH + timedelta(0, 0, t) for t in {times}]")
    args, columns = [], []
    for i, v in enumerate(codec.values.values):
        if v.name in codec.key.fields:
            continue  # promoted: the key's value wins
        col = f"values[{v.name!r}]"
        kind = type(v.codec)
        if v.optional:  # None where an event has no cell
            ns[f"d{i}"] = v.codec.decode
            src(f"v{i} = [None if b is None else d{i}(b) for b in {col}]")
        elif kind is Float64 or kind is Int64:
            fmt = "d" if kind is Float64 else "q"
            src(f"v{i} = {col}")
            src(f"if set(map(len, v{i})) != {{8}}:")
            src("    return None")
            src(f"v{i} = unpack(f'>{{{n}}}{fmt}', b''.join(v{i}))")
        else:
            ns[f"d{i}"] = v.codec.decode
            src(f"v{i} = list(map(d{i}, {col}))")
        args.append(f"{v.name}=a_v{i}")
        columns.append(f"v{i}")
    src.dedent()
    src("except Exception:  # the row by row decoding says why, where")
    src("    return None")
    cols = [f"k{i}" for i in range(len(key_fields))] + ["whens"] + columns
    items = [f"a{i}" for i in range(len(key_fields) + 1)] + [f"a_{c}" for c in columns]
    keyword = [f"{f}={a}" for f, a in zip([*key_fields, codec.time_field], items,
                                          strict=False)] + args
    src(f"return [cls({', '.join(keyword)})")
    src(f"        for {', '.join(items)} in zip({', '.join(cols)})], {counts}")


def _render_bucket_instances(codec: TableCodec) -> Callable[..., Any] | None:
    """`render_batch_instances()` for bucket rows: the events of a batch of them, as
    the bucket collector (`render_bucket_batch_columns()`) takes them for the
    columnar results, each row's key decoded once by the declared key decoding
    and its fields repeated for the row's events, the values and the event
    times (the cells' timestamps) decoded a whole column at a time."""
    values = codec.values.values
    collect = render_bucket_batch_columns(codec, tuple(v.name for v in values))
    if collect is None:
        return None
    src, ns, key_fields = _open_instances(codec, collect)
    ns.update(repeat=itertools.repeat, chain=itertools.chain)
    src("keys, counts, times, values = found")
    src("fields = []")
    src("try:  # each row's key once")
    src("    for key, count in zip(keys, counts):")
    src("        if count:")
    src("            fields.append(decode_key(key))")
    src("except SegmentValueError:")
    src("    return None")
    if key_fields:
        src("taken = [count for count in counts if count]")
    for i, f in enumerate(key_fields):
        src(f"k{i} = list(chain.from_iterable(map(repeat, "
            f"[decoded[{f!r}] for decoded in fields], taken)))")
    _render_instances(src, codec, ns, key_fields, "times", "counts")
    return compile_function(src.text(), "batch_instances", ns,
                            f"<tsmodel codec {codec.model}.{codec.table} batch instances>")


def _collector(codec: TableCodec, cols: list[Any], names: tuple[str, ...],
               name: str) -> tuple[int, list[tuple[int, str]], _Source]:
    """What a batch collector's rendering starts from: the number of ``cols``, the
    position among them and the name of each field of ``names`` whose value it
    takes from the cells (a field promoted to the key is read there), and its
    source, opened at ``def name(batch):``."""
    src = _Source()
    src(f"def {name}(batch):")
    src.indent()
    return len(cols), [(j, v.name) for j, v in enumerate(cols)
                       if v.name in names and v.name not in codec.key.fields], src


def _bucket_cells(codec: TableCodec, layout: str) -> list[Any] | None:
    """The value fields whose cells make every event of a bucket row of ``layout``:
    for ``ts.cells()``, one version per event in each, all required (every event
    has a cell in each), in the order the backends return them (family, then
    qualifier); for ``ts.columns()`` its one value field, whose qualifiers are
    the events' values. ``None`` where bucket rows have no such fixed shape."""
    shape = codec.shape
    if not (codec.layout.bucketed and codec.layout.name == layout
            and shape.serialization is None and shape.event_time_cells
            and not codec._key_columns and codec._owns is None and codec._joins_plainly
            and codec._version_field is None and codec.time_field in codec.key.fields):
        return None
    values = list(codec.values.values)
    if layout == "columns":
        return values
    if all(v.stored for v in values):
        return _stored_sorted(values)
    # Optional values beside at least one required (whose column holds every event);
    # a defaulted one reads its default where it has no cell: left to the rows.
    if not any(v.stored for v in values) or any(not v.stored and not v.optional
                                                 for v in values) \
            or len({v.qualifier for v in values}) != len(values):
        return None
    return sorted(values, key=lambda v: (v.family, v.qualifier))


def render_bucket_batch_columns(codec: TableCodec,
                                names: tuple[str, ...]) -> Callable[..., Any] | None:
    """A collector of a `tsmodel.ground.base.CellBatch` 's undecoded columns for a
    ``ts.cells()`` bucket table (for ``ts.columns()``: `_column_batch_columns()`),
    or ``None`` where its rows have no fixed shape.

    The function takes a batch and returns ``(keys, counts, times, columns)``:
    each row's key and its number of events, the events' times (their cells'
    timestamp, oldest first within a row, as the row reader orders them) and,
    by field name, the value bytes of the fields ``names`` (promoted ones left
    to the key), one entry per event. A row is taken when its cells are the
    declaration's value columns, sorted, each holding the same versions,
    newest first, at distinct timestamps: every version time is an event
    with a cell in each column. At the first other row it returns ``None``,
    and the batch's rows are read one by one as for `render_batch_columns()`.
    """
    cols = _bucket_cells(codec, "cells")
    if cols is None:
        return _column_batch_columns(codec, names)
    if not all(v.stored for v in cols):
        return _sparse_bucket_batch_columns(codec, cols, names)
    k, kept, src = _collector(codec, cols, names, "bucket_batch_columns")
    src("families, qualifiers = batch.families, batch.qualifiers")
    src("stamps, values = batch.timestamps, batch.values")
    src("counts = []")
    src("times = []")
    for j, _ in kept:
        src(f"c{j} = []")
    src("start = 0")
    src("for end in batch.ends:")
    src.indent()
    src(f"m, rest = divmod(end - start, {k})")
    src("if rest:")
    src("    return None  # not a cell per event in each column")
    src("counts.append(m)")
    src("if not m:")
    src("    continue")
    for j, v in enumerate(cols):
        lo = "start" if j == 0 else f"start + {j} * m"
        hi = "start + m" if j == 0 else f"start + {j + 1} * m"
        src(f"lo, hi = {lo}, {hi}")
        src(f"if qualifiers[lo:hi].count({v.qualifier!r}) != m or "
            f"families[lo:hi].count({v.family!r}) != m:")
        src("    return None  # another column")
        if j == 0:
            src("t = stamps[lo:hi]")
            src("if m > 1 and not all(map(gt, t, t[1:])):")
            src("    return None  # versions not newest first at distinct times")
        else:
            src("if stamps[lo:hi] != t:")
            src("    return None  # an event without its cell in every column")
        if any(jj == j for jj, _ in kept):
            src(f"c{j} += values[lo:hi][::-1]  # oldest first")
    return _bucket_end(src, codec, kept)


def _bucket_end(src: _Source, codec: TableCodec, kept: list[tuple[int, str]]
                ) -> Callable[..., Any]:
    """A ``ts.cells()`` bucket collector's close: the row's times (``t``, newest first)
    taken oldest first, the loop over rows ended, each kept field's list ``c{j}``
    returned by name; compiled."""
    src("times += t[::-1]")
    src("start = end")
    src.dedent()
    taken = ", ".join(f"{name!r}: c{j}" for j, name in kept)
    src(f"return batch.keys, counts, times, {{{taken}}}")
    return compile_function(src.text(), "bucket_batch_columns", {"gt": operator.gt},
                            f"<tsmodel codec {codec.model}.{codec.table} bucket batch columns>")


def _sparse_bucket_batch_columns(codec: TableCodec, cols: list[Any],
                                 names: tuple[str, ...]) -> Callable[..., Any]:
    """`render_bucket_batch_columns()` for ``ts.cells()`` buckets with optional values:
    an event is a version of every required column (the same times in each),
    and of an optional column where it has a value (``None`` where not). Each
    column's cells are found in the row's order (family, then qualifier), as
    many as its qualifier has; a row with another cell, or versions of a column
    at one time, is left to the rows. An optional cell at no required cell's
    time is no event, as the reader skips an event without a required value."""
    _, kept, src = _collector(codec, cols, names, "bucket_batch_columns")
    taken = {j for j, _ in kept}
    first = next(j for j, v in enumerate(cols) if v.stored)
    src("families, qualifiers = batch.families, batch.qualifiers")
    src("stamps, values = batch.timestamps, batch.values")
    src("counts = []")
    src("times = []")
    for j in taken:
        src(f"c{j} = []")
    src("start = 0")
    src("for end in batch.ends:")
    src.indent()
    src("row = qualifiers[start:end]")
    src("lo = start")
    for j, v in enumerate(cols):
        src(f"n{j} = row.count({v.qualifier!r})")
        src(f"hi = lo + n{j}")
        src(f"if n{j} and (qualifiers[lo:hi].count({v.qualifier!r}) != n{j} or "
            f"families[lo:hi].count({v.family!r}) != n{j}):")
        src("    return None  # another column among its cells")
        src(f"s{j} = stamps[lo:hi]")
        src(f"if n{j} > 1 and not all(map(gt, s{j}, s{j}[1:])):")
        src("    return None  # versions not newest first at distinct times")
        if j in taken:
            src(f"v{j} = values[lo:hi]")
        src("lo = hi")
    src("if lo != end:")
    src("    return None  # a cell of another column")
    src(f"m = n{first}")
    src("counts.append(m)")
    src(f"t = s{first}")
    for j, v in enumerate(cols):
        if j == first:
            continue
        if v.stored:
            src(f"if s{j} != t:")
            src("    return None  # an event without its cell in every required column")
        elif j in taken:
            src(f"if n{j} == m and s{j} == t:")
            src(f"    c{j} += v{j}[::-1]  # oldest first")
            src(f"elif n{j}:  # (a cell at no event's time is none, as for the reader)")
            src(f"    found = dict(zip(s{j}, v{j}))")
            src(f"    c{j} += [found.get(x) for x in reversed(t)]")
            src("else:")
            src(f"    c{j} += [None] * m")
    for j, v in enumerate(cols):
        if v.stored and j in taken:
            src(f"c{j} += v{j}[::-1]  # oldest first")
    return _bucket_end(src, codec, kept)


def _column_batch_columns(codec: TableCodec,
                          names: tuple[str, ...]) -> Callable[..., Any] | None:
    """`render_bucket_batch_columns()` for a ``ts.columns()`` bucket table: every
    cell of the value's family is an event, its qualifier the value's bytes, in
    the order of the layout's reader (time, then qualifier); the cells' values
    are not read. A batch with a cell of another family is left to the rows."""
    cols = _bucket_cells(codec, "columns")
    if cols is None:
        return None
    _, kept, src = _collector(codec, cols, names, "column_batch_columns")
    family = cols[0].family
    src("families, qualifiers, stamps = batch.families, batch.qualifiers, batch.timestamps")
    src(f"if families.count({family!r}) != len(families):")
    src("    return None  # a cell of another family")
    src("counts = []")
    src("times = []")
    src("found = []")
    src("start = 0")
    src("for end in batch.ends:")
    src.indent()
    src("counts.append(end - start)")
    src("if end - start == 1:")
    src("    times.append(stamps[start])")
    src("    found.append(qualifiers[start])")
    src("elif end > start:  # by time, then qualifier, as the layout's reader")
    src("    t, q = zip(*sorted(zip(stamps[start:end], qualifiers[start:end])))")
    src("    times += t")
    src("    found += q")
    src("start = end")
    src.dedent()
    taken = ", ".join(f"{name!r}: found" for _, name in kept)
    src(f"return batch.keys, counts, times, {{{taken}}}")
    return compile_function(src.text(), "column_batch_columns", {},
                            f"<tsmodel codec {codec.model}.{codec.table} column batch columns>")


def _render_cell_slots(src: Any, values: Sequence[Any], slot: Mapping[str, str]) -> None:
    """Render the branches that put a cell's value in its field's slot (the first
    cell of each column: the newest), by family, then qualifier."""
    by_family: dict[str, list[Any]] = {}
    for v in values:
        by_family.setdefault(v.family, []).append(v)
    first = True
    for family, vs in by_family.items():
        src(f"{'if' if first else 'elif'} family == {family!r}:")
        first = False
        src.indent()
        branch = "if"
        for v in vs:
            src(f"{branch} qualifier == {v.qualifier!r} and {slot[v.name]} is None:")
            src(f"    {slot[v.name]} = value")
            branch = "elif"
        src.dedent()
