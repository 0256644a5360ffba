"""The write half of the generated codecs: a table's declaration rendered into an encoder.

At declaration, each `TableCodec` renders its declaration (key layout, value
encoders, `Layout`) into the Python source of one function that validates
an instance and encodes it for the table, and compiles it once
(`tsmodel.layouts._source`: the source shows in tracebacks, and
``tsmodel codec MODULE:Model`` prints it). A model's main table also renders
the encoder of a whole event: its row there and in the current-value
table, sharing the event's time, key segments and encoded values.

What the bytes mean is declared once: the key segments' encoders, the value
codecs and their checks (`ValueEncoder.checked`), the layout's rendering of
its cells (`Layout.render_writer`). The generator only joins them, unrolled
for the model's fields, so that no generic code walks the declaration per
event. Validation is exactly that of the declaration: the fast path of a
value is taken only for a value of exactly an accepted type that its codec
takes; anything else goes through the full check, which raises the error.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from tsmodel import errors
from tsmodel.encoding.codecs import fixed_width
from tsmodel.encoding.keys import ConstantSegment, SaltSegment, SegmentValueError
from tsmodel.encoding.timestamps import EPOCH
from tsmodel.encoding.values import MAX_VALUE_BYTES, too_big
from tsmodel.ground.base import SetCell
from tsmodel.layouts._fragment import Fragment
from tsmodel.layouts._source import compile_function

#: A `tsmodel.layouts.codec.TableCodec` (which imports this module).
TableCodec = Any

__all__ = ["render_row_encoder", "render_event_encoder", "render_event_parts",
           "render_column_check", "NotColumnWise"]


class NotColumnWise(Exception):  # noqa: N818 (a signal, not an error shown to users)
    """A column-wise check met a value it does not take on its own (a time not in
    ``datetime.timezone.utc``): the rows go through the per-event check instead."""


def _attribute(name: str) -> str:
    """The expression of field ``name`` in the per-event renderings."""
    return f"entity.{name}"

#: Types whose values always equal themselves (no NaN): no ``item == item`` test.
_NEVER_NAN = frozenset({int, str, bytes, bool})
#: One microsecond: an event time's unit.
_US = timedelta(microseconds=1)


class _Locals:
    """The locals of an event's shared encoding: time, key segments, values."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}
        self.values: dict[str, str] = {}


def _key_failed(model: str, field: str, entity: Any, exc: SegmentValueError) -> Exception:
    """The tsmodel error of a key segment that refused its field's value."""
    return errors.key_error(exc, model=model, field=field, value=getattr(entity, field, None))


def _time_refused(model: str, field: str, entity: Any, problem: str) -> Exception:
    """The tsmodel error of an event time the layout cannot store."""
    raw = getattr(entity, field)
    return errors.ValidationError(f"{raw} {problem}", model=model, field=field, value=raw)


def _render_time(src: Fragment, codec: TableCodec, of: Callable[[str], str] = _attribute,
                 columns: bool = False) -> None:
    """``us``: the event time in µs (a UTC datetime inline, else the checked path;
    column-wise, anything else is `NotColumnWise`)."""
    dt, utc, epoch = (src.bind(datetime, "datetime"), src.bind(timezone.utc, "UTC"),
                      src.bind(EPOCH, "EPOCH"))
    src.emit(f"raw = {of(codec.time_field)}")
    src.emit(f"if type(raw) is {dt} and raw.tzinfo is {utc}:")
    src.emit(f"us = (raw - {epoch}) // {src.bind(_US, 'US')}", 1)
    src.emit("else:")
    if columns:
        src.emit(f"raise {src.bind(NotColumnWise, 'NotColumnWise')}", 1)
    else:
        src.emit(f"us = {src.bind(codec.time_of, 'time_of')}(entity)", 1)


def _render_keys(src: Fragment, codec: TableCodec, out: _Locals,
                 of: Callable[[str], str] = _attribute) -> None:
    """A local per key segment of a field, each refusal named by its field."""
    failed = src.bind(_key_failed, "key_failed")
    refused = src.bind(SegmentValueError, "SegmentValueError")
    for name, encode, is_time in codec._encoders:
        local = out.keys.get(name) or src.local(f"k_{name}")
        out.keys[name] = local
        encoder = src.bind(encode, f"key_{name}")
        value = "us" if is_time else of(name)
        d = 0
        known = codec._known_keys.get(name)
        if is_time and codec._time_digits is not None:
            # Epoch digits inline, as `EpochEncoding.encoder()` writes them; a time
            # out of range or not of the unit goes to the encoder, which refuses it.
            digits, base, unit, low, high = codec._time_digits
            number = f"us // {unit}" if base is None else f"{base} - us // {unit}"
            src.emit(f"if {low} <= us <= {high} and not us % {unit}:")
            src.emit(f"{local} = {b'%%0%dd' % digits!r} % ({number})", 1)
            src.emit("else:")
            d = 1
        elif known is not None:
            # A str kept by the segment's encoder is looked up here (no call); any
            # other value goes to the encoder, which checks it and keeps it.
            item = src.local(f"key_item_{name}")
            src.emit(f"{item} = {value}")
            value = item
            src.emit(f"{local} = {src.bind(known, f'known_{name}')}.get({item}) "
                     f"if type({item}) is {src.bind(str, 'str')} else None")
            src.emit(f"if {local} is None:")
            d = 1
        src.emit("try:", d)
        src.emit(f"{local} = {encoder}({value})", d + 1)
        src.emit(f"except {refused} as exc:", d)
        src.emit(f"raise {failed}({codec.model!r}, {name!r}, entity, exc) from None", d + 1)


def _render_values(src: Fragment, codec: TableCodec, out: _Locals,
                   of: Callable[[str], str] = _attribute) -> None:
    """A local per value field: its bytes, or ``None`` for an optional ``None``."""
    checked = src.bind(codec.values.checked, "checked")
    for v in codec.values.values:
        local = src.local(f"v_{v.name}")
        out.values[v.name] = local
        spec = src.bind(v, f"spec_{v.name}")
        exact = tuple(v.accepted_types)
        item = src.local(f"item_{v.name}")
        src.emit(f"{item} = {of(v.name)}")
        d = 0
        if _render_exact(src, v, item, local, checked, spec):
            if len(exact) > 1:  # the codec's other types: as below, under else
                src.emit("else:")
                d = 1
            else:  # every value it may encode went first: the rest is checked
                if v.optional:
                    src.emit(f"elif {item} is None:")
                    src.emit(f"{local} = None", 1)
                src.emit("else:")
                src.emit(f"{local} = {checked}({spec}, {item})", 1)
                _render_size_check(src, codec, v, local)
                continue
        encode = src.bind(v.codec.encode, f"encode_{v.name}")
        if len(exact) == 1:
            test = f"type({item}) is {src.bind(exact[0], exact[0].__name__)}"
        else:
            test = f"type({item}) in {src.bind(frozenset(exact), f'types_{v.name}')}"
        if set(exact) <= _NEVER_NAN:
            src.emit(f"if {test}:", d)
        else:
            # item == item is False for NaN only: NaN takes the checked path (as does a
            # signalling Decimal NaN, whose comparison raises).
            plain = src.local("plain")
            src.emit("try:", d)
            src.emit(f"{plain} = {test} and {item} == {item}", d + 1)
            src.emit("except ArithmeticError:", d)
            src.emit(f"{plain} = False", d + 1)
            src.emit(f"if {plain}:", d)
        src.emit("try:", d + 1)
        src.emit(f"{local} = {encode}({item})", d + 2)
        src.emit("except (ValueError, OverflowError, UnicodeError):", d + 1)
        src.emit(f"{local} = {checked}({spec}, {item})", d + 2)
        if v.optional:
            src.emit(f"elif {item} is None:", d)
            src.emit(f"{local} = None", d + 1)
        src.emit("else:", d)
        src.emit(f"{local} = {checked}({spec}, {item})", d + 1)
        _render_size_check(src, codec, v, local)


def _render_size_check(src: Fragment, codec: TableCodec, v: Any, local: str) -> None:
    """The refusal of a value over the size limit, for codecs of no fixed size."""
    if fixed_width(v.codec) is None:
        size = src.bind(too_big, "too_big")
        guard = f"{local} is not None and " if v.optional else ""
        src.emit(f"if {guard}len({local}) > {MAX_VALUE_BYTES}:")
        src.emit(f"raise {size}({codec.model!r}, {v.family!r}, {v.qualifier!r}, "
                 f"len({local}), field={v.name!r})", 1)


def _render_exact(src: Fragment, v: Any, item: str, local: str, checked: str,
                  spec: str) -> bool:
    """``if`` the value is of exactly the codec's type, its own encoder (`exact()`: an
    int64's or a float64's struct pack); whether there is one (the caller goes
    on with ``elif`` or ``else``).

    The same bytes as the codec's ``encode()`` of that type; where the pack
    raises, the checked path raises the documented error. A float that is NaN
    goes on (``item == item`` is false) to the check of NaN."""
    exact = getattr(v.codec, "exact", None)
    if exact is None:
        return False
    kind, pack, raises = exact()
    if kind not in v.accepted_types:
        return False
    test = f"type({item}) is {src.bind(kind, kind.__name__)}"
    if kind not in _NEVER_NAN:
        test += f" and {item} == {item}"
    encode = src.bind(pack, f"pack_{v.name}")
    src.emit(f"if {test}:")
    if raises:
        src.emit("try:", 1)
        src.emit(f"{local} = {encode}({item})", 2)
        src.emit(f"except {src.bind(raises, f'pack_errors_{v.name}')}:", 1)
        src.emit(f"{local} = {checked}({spec}, {item})", 2)
    else:
        src.emit(f"{local} = {encode}({item})", 1)
    return True


def _render_join(src: Fragment, codec: TableCodec, keys: dict[str, str]) -> str:
    """The expression of the row key from the segments' locals."""
    if codec.key.salt() is not None:  # the salt is computed from the other segments
        parts = {**{f"{n!r}": local for n, local in keys.items()},
                 **{repr(k): repr(v) for k, v in codec._constants.items()}}
        join = src.bind(codec._join_salted, "join_salted")
        return f"{join}({{" + ", ".join(f"{k}: {v}" for k, v in parts.items()) + "})"
    pieces = []
    for seg in codec.key.segments:
        if isinstance(seg, ConstantSegment):
            pieces.append(repr(seg.encode(None)))
        else:
            assert seg.field is not None and not isinstance(seg, SaltSegment)
            pieces.append(keys[seg.field])
    sep = codec.key.separator
    return f" + {sep!r} + ".join(pieces)


def _render_row(src: Fragment, codec: TableCodec, out: _Locals, prefix: str,
                like: str | None = None) -> tuple[str, str]:
    """The row of ``codec``: lines computing its cells and key; their locals.

    Args:
        like: the local of the cells of the row of the codec ``codec`` was
            built ``like`` (the main table's), shared where both lay cells
            out alike.
    """
    key = src.local(f"{prefix}key")
    if like is not None and codec._like is not None:
        src.emit(f"{key} = {_render_join(src, codec, out.keys)}")
        return key, like
    _render_time_check(src, codec, prefix)
    cells = _render_cells(src, codec, out, prefix)
    src.emit(f"{key} = {_render_join(src, codec, out.keys)}")
    return key, cells


def _render_time_check(src: Fragment, codec: TableCodec, prefix: str) -> None:
    """The layout's check of the event time, if it has one."""
    if codec._time_check is not None:
        check = src.bind(codec._time_check, f"{prefix}time_check")
        problem = src.local("problem")
        src.emit(f"{problem} = {check}(us)")
        src.emit(f"if {problem} is not None:")
        src.emit(f"raise {src.bind(_time_refused, 'time_refused')}({codec.model!r}, "
                 f"{codec.time_field!r}, entity, {problem})", 1)


def _render_cells(src: Fragment, codec: TableCodec, out: _Locals, prefix: str) -> str:
    """The lines laying the row's cells out; the local holding them."""
    cells = src.local(f"{prefix}cells")
    laid_out = codec.layout.render_writer(codec.shape, src, out.values)
    if laid_out.isidentifier():
        cells = laid_out
    else:
        src.emit(f"{cells} = {laid_out}")
    if codec._key_columns:
        src.emit(f"{cells} += {src.bind(codec._key_cells, f'{prefix}key_cells')}(entity, us)")
    if codec._version_field is not None:
        version = src.local("version")
        set_cell = src.bind(SetCell, "SetCell")
        stamped = src.build(SetCell, "m.family", "m.qualifier", version, "m.value")
        src.emit(f"{version} = {src.bind(codec._version_time, 'version_time')}(entity)")
        src.emit(f"{cells} = tuple({stamped} if type(m) is {set_cell} else m for m in {cells})")
    if codec.shape.serialization is not None:  # a blob of values checked one by one
        set_cell = src.bind(SetCell, "SetCell")
        src.emit(f"for m in {cells}:")
        src.emit(f"if type(m) is {set_cell} and len(m.value) > {MAX_VALUE_BYTES}:", 1)
        src.emit(f"raise {src.bind(too_big, 'too_big')}({codec.model!r}, m.family, "
                 "m.qualifier, len(m.value))", 2)
    return cells


def _shared(src: Fragment, codec: TableCodec, of: Callable[[str], str] = _attribute,
            columns: bool = False) -> _Locals:
    out = _Locals()
    for reserved in ("entity", "us", "raw", "exc", "m"):
        src.local(reserved)
    _render_time(src, codec, of, columns)
    _render_keys(src, codec, out, of)
    _render_values(src, codec, out, of)
    return out


def _declared(src: Fragment, codec: TableCodec) -> str:
    """The expression of the table's `DeclaredCells`: its cells are exactly those."""
    if codec.declared_cells is None:
        return "None"
    return src.bind(codec.declared_cells, "declared")


def _label(codec: TableCodec) -> str:
    return f"{codec.model}.{codec.table}"


def render_row_encoder(codec: TableCodec, make_row: Callable[..., Any]) -> Callable[[Any], Any]:
    """The generated ``encode(entity)`` of one table: its `EncodedRow`.

    Raises (from the encoder):
        ValidationError: a value cannot be stored, as the declaration checks it.
    """
    src = Fragment()
    out = _shared(src, codec)
    key, cells = _render_row(src, codec, out, "")
    src.emit(f"return {src.build(make_row, repr(codec.table), key, 'us', cells)}")
    name = "encode_" + _identifier(codec.table)
    source = src.source(f"def {name}(entity):")
    return compile_function(source, name, src.namespace,
                            f"<tsmodel codec {_label(codec)} encode>")


def render_event_encoder(main: TableCodec, current: TableCodec | None,
                         make_event: Callable[..., Any]) -> Callable[[Any], Any]:
    """The generated encoder of a whole event: its rows in the main and current tables.

    The encoder returns ``make_event(entity, table, key, us, cells)``, and with
    a current-value table ``..., current_table, current_key, current_cells)``:
    the write planner's event, built once.
    """
    src = Fragment()
    out = _shared(src, main)
    key, cells = _render_row(src, main, out, "")
    fields = len(getattr(make_event, "_fields", ()))
    declared = _declared(src, main)
    if current is None:
        rest = ["None", "None", "()", "()", "None", declared][:fields - 5]
        event = src.build(make_event, "entity", repr(main.table), key, "us", cells, *rest)
        src.emit(f"return {event}")
    else:
        extra = [n for n, _, _ in current._encoders if n not in out.keys]
        if extra:  # a current key of fields the main key lacks: encode them too
            _render_extra_keys(src, current, out, extra)
        ckey, ccells = _render_row(src, current, out, "current_", like=cells)
        rest = ["()", "None", declared][:fields - 8]
        event = src.build(make_event, "entity", repr(main.table), key, "us", cells,
                          repr(current.table), ckey, ccells, *rest)
        src.emit(f"return {event}")
    name = "encode_event_" + _identifier(main.table)
    source = src.source(f"def {name}(entity):")
    return compile_function(source, name, src.namespace,
                            f"<tsmodel codec {_label(main)} encode_event>")


def _checks_apart(codec: TableCodec) -> bool:
    """Whether the rows of ``codec`` can be checked first and laid out later: every
    check is of the key segments, values and event time, and the layout's cells
    are made from the values alone (no serialized blob to size, no key or
    version cells taken from the entity)."""
    return (codec.layout.writer_of_values and codec.shape.serialization is None
            and not codec._key_columns and codec._version_field is None)


def render_event_parts(main: TableCodec, current: TableCodec | None,
                       make_event: Callable[..., Any]) -> tuple[Callable[[Any], tuple[Any, ...]],
                                                                Callable[[Any, Any], Any]] | None:
    """The event encoder of `render_event_encoder()` in two parts: ``check(entity)``
    and ``lay_out(entity, checked)``, or ``None`` where the rows cannot be laid
    out apart from their checks (`_checks_apart()`).

    ``check`` makes every check the whole encoder makes, raising the same
    errors, and returns a plain tuple of the row keys, the event time and
    the encoded values (bytes, ints, ``None``: a tuple the garbage collector
    stops tracking); ``lay_out(entity, check(entity))`` returns what the
    whole encoder returns, raising nothing. A save checks all of its events
    first and lays each batch's cells out as the batch goes, so that it
    keeps no cell objects of the batches still waiting.
    """
    if not _checks_apart(main) or (current is not None and not _checks_apart(current)):
        return None
    fields = len(getattr(make_event, "_fields", ()))
    src = Fragment()
    kept = _render_check(src, main, current)
    src.emit(f"return ({', '.join(kept)},)")
    name = "check_event_" + _identifier(main.table)
    check = compile_function(src.source(f"def {name}(entity):"), name, src.namespace,
                             f"<tsmodel codec {_label(main)} check_event>")

    src = Fragment()
    for reserved in ("entity", "checked", "us", "m"):
        src.local(reserved)
    values = _Locals()
    for v in main.values.values:
        values.values[v.name] = src.local(f"v_{v.name}")
    key = src.local("key")
    names = [key, "us", *values.values.values()]
    ckey = src.local("current_key")
    if current is not None:
        names.append(ckey)
    src.emit(f"{', '.join(names)}, = checked")
    cells = _render_cells(src, main, values, "")
    declared = _declared(src, main)
    if current is None:
        rest = ["None", "None", "()", "()", "None", declared][:fields - 5]
        event = src.build(make_event, "entity", repr(main.table), key, "us", cells, *rest)
    else:
        ccells = cells if current._like is not None else _render_cells(src, current, values,
                                                                      "current_")
        rest = ["()", "None", declared][:fields - 8]
        event = src.build(make_event, "entity", repr(main.table), key, "us", cells,
                          repr(current.table), ckey, ccells, *rest)
    src.emit(f"return {event}")
    name = "lay_out_event_" + _identifier(main.table)
    lay_out = compile_function(src.source(f"def {name}(entity, checked):"), name,
                               src.namespace, f"<tsmodel codec {_label(main)} lay_out_event>")
    return check, lay_out


def _render_check(src: Fragment, main: TableCodec, current: TableCodec | None,
                  of: Callable[[str], str] = _attribute, columns: bool = False) -> list[str]:
    """The lines of an event's checks (`render_event_parts`); the locals of its tuple."""
    out = _shared(src, main, of, columns)
    _render_time_check(src, main, "")
    key = src.local("key")
    src.emit(f"{key} = {_render_join(src, main, out.keys)}")
    kept = [key, "us", *out.values.values()]
    if current is not None:
        extra = [n for n, _, _ in current._encoders if n not in out.keys]
        if extra:
            _render_extra_keys(src, current, out, extra, of)
        if current._like is None:
            _render_time_check(src, current, "current_")
        ckey = src.local("current_key")
        src.emit(f"{ckey} = {_render_join(src, current, out.keys)}")
        kept.append(ckey)
    return kept


def column_fields(main: TableCodec, current: TableCodec | None) -> tuple[str, ...]:
    """The fields an event's checks read, in the order `render_column_check()` takes them."""
    names = [main.time_field]
    for codec in (main, current):
        if codec is not None:
            names += [n for n, _, is_time in codec._encoders if not is_time]
    names += [v.name for v in main.values.values]
    return tuple(dict.fromkeys(names))


def render_column_check(main: TableCodec, current: TableCodec | None
                        ) -> tuple[tuple[str, ...], Callable[..., list[tuple[Any, ...]]]] | None:
    """The check of `render_event_parts()` rendered column-wise: the fields it reads
    (`column_fields()`) and ``check_columns(*columns)``, or ``None`` where the
    event parts are not rendered.

    ``check_columns`` takes one sequence of values per field, in that order,
    and returns the list of the rows' checked tuples: for each row, the tuple
    the per-event ``check`` returns for an instance holding those values. It
    is the same rendering with each field read from its column instead of an
    attribute, in a loop over the rows: the same checks, encoders and
    bytes. It takes the common case only: any exception it raises (a value
    refused, or `NotColumnWise`: a time not in ``datetime.timezone.utc``)
    means the rows must go through the per-event check, whose error, naming
    the row's entity, is the one to raise.
    """
    if not _checks_apart(main) or (current is not None and not _checks_apart(current)):
        return None
    names = column_fields(main, current)
    src = Fragment()
    for reserved in ("columns", "out", "append"):
        src.local(reserved)
    cols = {n: src.local(f"c_{n}") for n in names}
    kept = _render_check(src, main, current, cols.__getitem__, columns=True)
    src.emit(f"append(({', '.join(kept)},))")
    body = src.lines
    src.lines = []
    src.emit("entity = None  # no instance: an error raised here names none (see above)")
    src.emit("out = []")
    src.emit("append = out.append")
    src.emit(f"for {', '.join(cols.values())}, in zip(*columns, strict=True):")
    src.lines += ["    " + line for line in body]
    src.emit("return out")
    name = "check_columns_" + _identifier(main.table)
    check = compile_function(src.source(f"def {name}(*columns):"), name, src.namespace,
                             f"<tsmodel codec {_label(main)} check_columns>")
    return names, check


def _render_extra_keys(src: Fragment, codec: TableCodec, out: _Locals, names: list[str],
                       of: Callable[[str], str] = _attribute) -> None:
    failed = src.bind(_key_failed, "key_failed")
    refused = src.bind(SegmentValueError, "SegmentValueError")
    for name, encode, is_time in codec._encoders:
        if name not in names:
            continue
        local = out.keys[name] = src.local(f"k_{name}")
        src.emit("try:")
        src.emit(f"{local} = {src.bind(encode, f'current_key_{name}')}"
                 f"({'us' if is_time else of(name)})", 1)
        src.emit(f"except {refused} as exc:")
        src.emit(f"raise {failed}({codec.model!r}, {name!r}, entity, exc) from None", 1)


def _identifier(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)

