"""The generated encoders hold to the declaration on every oracle shape.

Each table codec's encoder is rendered from its declaration
(`tsmodel.layouts.render_write`). Two oracles hold it there:

* the reference model (`tests/oracle/reference.py`), written from the docs
  without tsmodel: the row keys, the current-value key and the cells of a
  column per value field;
* the generic walk of the declaration that the generated code replaced
  (`tests/walk_encoder.py`, kept for tests only): every cell of every table
  and every error (class, message, model, field, value) for the same input,
  bad values included.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests import walk_encoder
from tests.oracle.ops import aware
from tests.oracle.reference import Reference, encode_value
from tests.oracle.shapes import MS, SHAPES, Shape
from tests.strategies import junk, oracle_events
from tsmodel.backends.base import SetCell
from tsmodel.layouts._source import rendered
from tsmodel.plan.events import EncodedEvent, encode_event

_MODELS: dict[str, type] = {}


def _model(shape: Shape) -> type:
    if shape.name not in _MODELS:
        _MODELS[shape.name] = shape.make_model("GEN")
    return _MODELS[shape.name]


def _outcome(fn: Any, *args: Any) -> Any:
    """What ``fn(*args)`` returns, or the error it raises as comparable facts."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - every error is compared
        return ("raised", type(exc), str(exc), getattr(exc, "model", None),
                getattr(exc, "field", None), repr(getattr(exc, "value", None)))


def _codecs(spec: Any) -> list[Any]:
    codecs = [spec.codec, *(alt.codec for alt in spec.alternates)]
    if spec.current_codec is not None:
        codecs.append(spec.current_codec)
    if spec.snapshot is not None:
        codecs.append(spec.snapshot.template.codec)
    return codecs


def _event_rows(spec: Any, entity: Any) -> Any:
    """The main and current rows of the generated event encoder (alternates aside)."""
    ev = spec.codec.event_encoder(spec.current_codec, EncodedEvent)(entity)
    return (ev.main, ev.current)


def _parts_rows(spec: Any, entity: Any) -> Any:
    """The same rows through the encoder's two parts: the checks, then the cells laid out."""
    parts = spec.codec.event_parts(spec.current_codec, EncodedEvent)
    assert parts is not None
    check, lay_out = parts
    checked = check(entity)
    # Only values the garbage collector stops tracking (no object of the entity's).
    assert type(checked) is tuple
    assert all(type(x) in (bytes, int) or x is None for x in checked), checked
    ev = lay_out(entity, checked)
    return (ev.main, ev.current)


def _has_parts(spec: Any) -> bool:
    return spec.codec.event_parts(spec.current_codec, EncodedEvent) is not None


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_encoders_write_what_the_declaration_says(shape: Shape, data: Any) -> None:
    model = _model(shape)
    spec = ts.spec_of(model)
    e = data.draw(oracle_events(shape))
    fields = {**e.fields(), "time": aware(e.t, e.zone)}
    entity = model(**fields)
    ev = encode_event(spec, entity)
    # The reference (written from the docs): keys and a column per value field.
    ref = Reference(shape)
    assert ev.key == ref.key_of(shape.key, e)
    assert ev.timestamp == e.t
    if shape.current:
        assert ev.current_key == ref.key_of(ref.current_segs(), e)
    cells = {tuple(m) for m in ev.mutations if type(m) is SetCell}
    # Key columns of adopted tables (a copy of a key field beside the events) aside:
    key_columns = {(k.family, k.qualifier) for k in spec.key_columns}
    cells = {c for c in cells if (c[0], c[1]) not in key_columns}
    if shape.serialized:
        assert len(cells) == 1 and {c[2] for c in cells} == {e.t // MS * MS}
    elif shape.layout == "columns":
        (v,) = shape.values
        assert cells == {(shape.family, encode_value(v.kind, e.get(v.name)), e.t // MS * MS,
                          b"")}
    elif shape.layout == "offsets":
        (v,) = shape.values
        assert [(c[0], c[2], c[3]) for c in cells] == [
            (shape.family, e.t // MS * MS, encode_value(v.kind, e.get(v.name)))]
    elif any(e.get(v.name) is not None for v in shape.values):
        assert cells == ref.value_cells(e)
    # The walk of the declaration it replaced: every table, every cell.
    assert _event_rows(spec, entity) == walk_encoder.encode_event(spec, entity)
    if _has_parts(spec):
        assert _parts_rows(spec, entity) == walk_encoder.encode_event(spec, entity)
    for codec in _codecs(spec):
        assert codec.encode(entity) == walk_encoder.encode(codec, entity)


def _as_declared(spec: Any, entity: Any) -> None:
    """Every generated encoder of ``spec`` writes or refuses ``entity`` as the walk of
    the declaration does: the whole event, its two parts, each table's row."""
    assert _outcome(_event_rows, spec, entity) == _outcome(walk_encoder.encode_event, spec,
                                                           entity)
    if _has_parts(spec):
        assert _outcome(_parts_rows, spec, entity) == _outcome(walk_encoder.encode_event,
                                                               spec, entity)
    for codec in _codecs(spec):
        assert _outcome(codec.encode, entity) == _outcome(walk_encoder.encode, codec, entity)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_encoders_refuse_as_the_declaration_does(shape: Shape, data: Any) -> None:
    model = _model(shape)
    spec = ts.spec_of(model)
    e = data.draw(oracle_events(shape))
    fields: dict[str, Any] = {**e.fields(), "time": aware(e.t, e.zone)}
    name = data.draw(st.sampled_from(sorted(fields)))
    fields[name] = data.draw(junk() | st.sampled_from([float("nan"), 2**64, -1, "", "a#b",
                                                       "\ud800", b"x", True, 1.5]))
    entity = model(**fields)
    _as_declared(spec, entity)


#: Event times at and past the ends of what the oracle shapes' keys hold (the epoch;
#: 13, 16 and 19 digits of ms, us and s run out in 2286, 2286 and beyond year 9999),
#: a microsecond either side of each, and whole units and odd microseconds between.
_EDGE_TIMES = [datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)
               for edge in (0, 9_999_999_999_999_000, 9_999_999_999_999_999, 2**53)
               for us in (edge - 1_000_000, edge - 1_000, edge - 1, edge, edge + 1, edge + 1_000)
               if -62_135_596_800_000_000 <= us <= 253_402_300_799_999_999]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_encoders_take_and_refuse_times_as_the_declaration_does(
        shape: Shape, data: Any) -> None:
    """Times outside a key's range, or not a whole number of its unit, are refused
    with the declaration's error (the time segment's digits are written inline)."""
    model = _model(shape)
    spec = ts.spec_of(model)
    e = data.draw(oracle_events(shape))
    when = data.draw(st.sampled_from(_EDGE_TIMES) | st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
        timezones=st.just(timezone.utc)))
    entity = model(**{**e.fields(), "time": when})
    _as_declared(spec, entity)


def test_each_generated_function_shows_its_source() -> None:
    spec = ts.spec_of(_model(SHAPES[0]))
    encoder = spec.codec.event_encoder(spec.current_codec, EncodedEvent)
    source = rendered(encoder)
    assert source.startswith("def encode_event_")
    assert encoder.__code__.co_filename.startswith("<tsmodel codec ")
    assert encoder in spec.codec.generated()
    assert spec.codec.encoder() in spec.codec.generated()


def test_codec_source_lists_every_generated_function_of_a_model() -> None:
    shape = next(s for s in SHAPES if s.current and s.alternates and s.snapshot)
    model = _model(shape)
    spec = ts.spec_of(model)
    text = ts.codec_source(model)
    tables = [spec.table, spec.current_table, *(a.table for a in spec.alternates),
              spec.snapshot.template.table]
    for table in tables:
        assert f"<tsmodel codec {spec.name}.{table} encode>" in text
    assert f"<tsmodel codec {spec.name}.{spec.table} encode_event>" in text
    for function in (spec.codec.encoder(), spec.codec.event_encoder(spec.current_codec,
                                                                       EncodedEvent)):
        assert rendered(function) in text


def test_codec_source_lists_a_save_s_check_and_each_backend_s_rendering() -> None:
    """A save's checks and layouts in two parts, and a backend's writer of a table's
    declared cells (the Bigtable wire bytes), are listed too: they run for every
    event of a save. Before, neither was, though nothing else of a save's runs."""
    from tsmodel.backends.bigtable import render_wire_writers

    models = [_model(s) for s in SHAPES if s.current]
    model = next(m for m in models if _has_parts(ts.spec_of(m))
                 and ts.spec_of(m).codec.declared_cells is not None
                 and ts.spec_of(m).current_codec.declared_cells is not None)
    spec = ts.spec_of(model)
    check, lay_out = spec.codec.event_parts(spec.current_codec, EncodedEvent)
    text = ts.codec_source(model)
    for function in (check, lay_out):
        assert f"# table {spec.table}: {function.__code__.co_filename}\n" in text
        assert rendered(function) in text
    writers = {codec.table: render_wire_writers(codec.declared_cells)
               for codec in (spec.codec, spec.current_codec)}
    text = ts.codec_source(model)
    for table, functions in writers.items():
        assert functions, table
        for function in functions:
            name = function.__code__.co_filename
            assert name.startswith(f"<tsmodel codec {spec.name}.{table} wire"), name
            assert f"# table {table}: {function.__code__.co_filename}\n" in text
            assert rendered(function) in text


def test_the_two_parts_cover_the_plain_layouts_and_only_them() -> None:
    """Rows, cells and columns layouts without a blob, key or version cells are
    checked apart from laying their cells out; the others are not."""
    with_parts = {s.name for s in SHAPES if _has_parts(ts.spec_of(_model(s)))}
    assert with_parts, "no oracle shape is checked apart"
    for shape in SHAPES:
        spec = ts.spec_of(_model(shape))
        codecs = [spec.codec] + ([spec.current_codec] if spec.current_codec else [])
        apart = all(c.layout.name in ("rows", "cells", "columns") and not shape.serialized
                    and not spec.key_columns and c._version_field is None for c in codecs)
        assert (shape.name in with_parts) == apart, shape.name


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_validated_save_checks_every_event_and_lays_each_out_later(shape: Shape,
                                                                     data: Any) -> None:
    """`check_all()` keeps the plain tuples of the checks where a model's rows allow
    it; laid out, they are what `encode_all()` gives."""
    from tsmodel.plan.events import check_all, encode_all

    model = _model(shape)
    spec = ts.spec_of(model)
    entities = [model(**{**e.fields(), "time": aware(e.t, e.zone)})
                for e in data.draw(st.lists(oracle_events(shape), max_size=5))]
    checked = check_all(entities)
    plain = _has_parts(spec) and not (spec.alternates or spec.corrections_read_first
                                      or spec.rollups)
    assert checked.entities == entities
    assert all((type(c) is tuple) == plain for c in checked.events)
    assert all((lay_out is not None) == plain for lay_out in checked.lay_outs)
    assert [lay_out(e, c) if lay_out is not None else c for e, c, lay_out in zip(
        checked.entities, checked.events, checked.lay_outs, strict=True)] == encode_all(entities)
