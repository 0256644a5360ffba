"""``MutateRows`` requests written as wire bytes equal the message-built ones.

The Bigtable backend writes each entry's protobuf wire bytes straight from
the neutral mutations (`tsmodel.backends._bigtable_wire.entry_bytes`). The
oracle is the encoder it replaced, kept here only: one raw
``google.bigtable.v2`` message per request, entry and cell, serialized by
protobuf. Both must give the same bytes for every entry (every layout shape
of the oracle, arbitrary neutral mutations, edge values), split requests
alike, and refuse the same entries.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import pytest
from google.cloud.bigtable_v2.types import bigtable as bigtable_types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tests.oracle.ops import aware
from tests.oracle.shapes import SHAPES, Shape
from tests.strategies import oracle_events, row_mutations
from tsmodel.backends import _bigtable_wire as wire
from tsmodel.backends.base import (
    AddToCell,
    DeclaredRows,
    DeleteCells,
    DeleteFamily,
    DeleteRow,
    RowMutation,
    SetCell,
)
from tsmodel.layouts._source import rendered
from tsmodel.plan.events import check_all, encode_event

MutateRowsRequest: Any = bigtable_types.MutateRowsRequest.pb()


# -- the oracle: the message-built encoder the wire bytes replaced ------------------

def _fill_entry(pb: Any, entry: RowMutation) -> int:
    key = entry.key
    if not key or len(key) > wire.MAX_ROW_KEY:
        raise ValueError(f"row key must be 1 to {wire.MAX_ROW_KEY} bytes, got {len(key)}")
    if not entry.mutations:
        raise ValueError(f"row {key!r:.80}: an entry needs at least one mutation")
    pb.row_key = key
    add = pb.mutations.add
    for mutation in entry.mutations:
        # protobuf 7 refuses a boolean for an int64 field, as the wire bytes do;
        # protobuf 6 (which apache-beam installs) took True as 1.
        if isinstance(getattr(mutation, "timestamp", None), bool):
            raise TypeError(f"expected an int, got a boolean: {mutation.timestamp!r}")
    count = 0
    for mutation in entry.mutations:
        if type(mutation) is SetCell:
            if mutation.timestamp < 0:
                raise ValueError(f"cell timestamp {mutation.timestamp} is negative; tsmodel "
                                 "writes explicit timestamps so that retries are idempotent")
            cell = add().set_cell
            cell.family_name = mutation.family
            cell.column_qualifier = mutation.qualifier
            cell.timestamp_micros = mutation.timestamp
            cell.value = mutation.value
        elif type(mutation) is AddToCell:
            if mutation.timestamp < 0:
                raise ValueError(f"cell timestamp {mutation.timestamp} is negative")
            added = add().add_to_cell
            added.family_name = mutation.family
            added.column_qualifier.raw_value = mutation.qualifier
            added.timestamp.raw_timestamp_micros = mutation.timestamp
            added.input.int_value = mutation.value
        elif type(mutation) is DeleteCells:
            span = wire._deletion_range(mutation)
            if span is None:
                continue
            column = add().delete_from_column
            column.family_name = mutation.family
            column.column_qualifier = mutation.qualifier
            start, end = span
            column.time_range.start_timestamp_micros = start
            column.time_range.end_timestamp_micros = end
        elif type(mutation) is DeleteFamily:
            add().delete_from_family.family_name = mutation.family
        elif type(mutation) is DeleteRow:
            add().delete_from_row.SetInParent()
        else:
            raise TypeError(f"not a tsmodel mutation: {mutation!r:.200}")
        count += 1
    return count


def message_requests(
    table_name: str, app_profile_id: str | None, entries: Sequence[RowMutation],
    indices: Sequence[int], max_mutations: int, max_bytes: int,
    refuse: Callable[[int, Exception], None],
) -> Iterator[tuple[Any, list[int]]]:
    def new_request() -> Any:
        return MutateRowsRequest(table_name=table_name, app_profile_id=app_profile_id or "")

    request, mutations, size = new_request(), 0, 0
    positions: list[int] = []
    for index in indices:
        entry = entries[index]
        pb = request.entries.add()
        try:
            count = _fill_entry(pb, entry)
        except (TypeError, ValueError, OverflowError) as exc:
            del request.entries[-1]
            refuse(index, exc)
            continue
        if not count:
            del request.entries[-1]
            continue
        entry_size = pb.ByteSize()
        if positions and (mutations + count > max_mutations or size + entry_size > max_bytes):
            moved = request.entries.pop()
            yield request, positions
            request, positions, mutations, size = new_request(), [], 0, 0
            request.entries.append(moved)
        positions.append(index)
        mutations += count
        size += entry_size
    if positions:
        yield request, positions


# -- the comparison ------------------------------------------------------------------

def _both(entries: Sequence[RowMutation], max_mutations: int = 100_000,
          max_bytes: int = 20 * 1024 * 1024, table: str = "projects/p/instances/i/tables/t",
          profile: str | None = None) -> None:
    """Both encoders give the same requests, positions and refusals."""
    refused: dict[str, list[tuple[int, type, str]]] = {"wire": [], "message": []}

    def refuse(side: str) -> Callable[[int, Exception], None]:
        return lambda i, exc: refused[side].append((i, type(exc), _message(exc)))

    got = [(r.SerializeToString(), p) for r, p in wire.entry_requests(
        table, profile, entries, range(len(entries)), max_mutations, max_bytes,
        refuse("wire"))]
    expected = [(r.SerializeToString(), p) for r, p in message_requests(
        table, profile, entries, range(len(entries)), max_mutations, max_bytes,
        refuse("message"))]
    assert got == expected
    assert refused["wire"] == refused["message"]


def _message(exc: Exception) -> str:
    """The message of a refusal: exact for tsmodel's own, the type's for protobuf's."""
    text = str(exc)
    if isinstance(exc, ValueError) and ("row key" in text or "negative" in text
                                        or "at least one mutation" in text):
        return text
    return ""


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_mutations(), max_size=8), st.sampled_from([None, "", "profile-é"]))
def test_arbitrary_entries_give_the_message_built_bytes(entries: list[RowMutation],
                                                         profile: str | None) -> None:
    _both(entries, profile=profile)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_mutations(), max_size=12), st.integers(1, 8), st.integers(1, 3_000))
def test_requests_split_at_the_same_limits(entries: list[RowMutation], max_mutations: int,
                                           max_bytes: int) -> None:
    _both(entries, max_mutations, max_bytes)


_MODELS: dict[str, type] = {}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_shape_sends_the_message_built_bytes(shape: Shape, data: Any) -> None:
    model = _MODELS.get(shape.name) or _MODELS.setdefault(shape.name, shape.make_model("W"))
    spec = ts.spec_of(model)
    events = data.draw(st.lists(oracle_events(shape), min_size=1, max_size=6))
    entries = []
    for e in events:
        ev = encode_event(spec, model(**{**e.fields(), "time": aware(e.t, e.zone)}))
        entries.append(ev.row_mutation())
        current = ev.current_row_mutation()
        if current is not None:
            entries.append(current)
        entries += [alt.row_mutation() for alt in ev.alternates]
    _both(entries)


def test_bad_types_are_refused_as_protobuf_refuses_them() -> None:
    bad = [RowMutation(b"k", (m,)) for m in (
        SetCell("f", "q", 0, b""), SetCell("f", b"q", 0, bytearray(b"v")),  # type: ignore[arg-type]
        SetCell("f", b"q", 1.0, b""),  # type: ignore[arg-type]
        SetCell("f\ud800", b"q", 0, b""), SetCell("f", b"q", 2**63, b""),
        SetCell(None, b"q", 0, b""), AddToCell("f", b"q", 0, 1.5),  # type: ignore[arg-type]
        DeleteCells("f", "q", 0, 5000), DeleteCells("f", b"q", 1.5, 5000),  # type: ignore[arg-type]
        "not a mutation",  # type: ignore[arg-type]
    )] + [RowMutation("k", (SetCell("f", b"q", 0, b""),))]  # type: ignore[arg-type]
    _both(bad)


def test_a_bool_timestamp_is_refused_whatever_the_protobuf_version() -> None:
    """protobuf 7.34 refuses a bool where an int goes; the 6.x that Beam pins only
    warns, so the message-built oracle cannot say it there: the wire encoder refuses."""
    refused: list[type] = []
    entries = [RowMutation(b"k", (SetCell("f", b"q", True, b""),))]  # type: ignore[arg-type]
    got = list(wire.entry_requests("t", None, entries, [0], 100, 1 << 20,
                                   lambda i, exc: refused.append(type(exc))))
    assert got == [] and refused == [TypeError]


def test_family_checks_delete_a_column_of_each_family() -> None:
    request = wire.family_check_request("t", "p", ["A", "é"])
    pb = MutateRowsRequest.FromString(request.SerializeToString())
    assert (pb.table_name, pb.app_profile_id) == ("t", "p")
    assert [e.row_key.startswith(wire.CHECK_ROW_PREFIX) for e in pb.entries] == [True, True]
    assert [[m.WhichOneof("mutation") for m in e.mutations] for e in pb.entries] == [
        ["delete_from_column"], ["delete_from_column"]]
    assert [e.mutations[0].delete_from_column.family_name for e in pb.entries] == ["A", "é"]
    assert not pb.entries[0].mutations[0].delete_from_column.HasField("time_range")


def test_a_subset_of_a_request_keeps_its_entries_and_adds() -> None:
    entries = [RowMutation(b"a", (SetCell("f", b"q", 0, b"1"),)),
               RowMutation(b"b", (AddToCell("f", b"q", 0, 1),)),
               RowMutation(b"c", (AddToCell("f", b"q", 0, 2),))]
    [(request, _)] = wire.entry_requests("t", None, entries, range(3), 100, 10_000, pytest.fail)
    assert request.adds == frozenset({1, 2})
    part = request.subset([2, 0])
    assert part.adds == frozenset({0})
    [(expected, _)] = message_requests("t", None, [entries[2], entries[0]], range(2), 100,
                                       10_000, pytest.fail)
    assert part.SerializeToString() == expected.SerializeToString()


# -- the generated writer of declared cells --------------------------------------------

def _declares(shape: Shape) -> bool:
    """Which shapes lay every event out as one cell per value field, as the shape
    describes itself (not tsmodel's spec): a row per event or cell versions, every
    value required, no serialized blob."""
    return (shape.layout in ("rows", "cells") and not shape.serialized
            and not any(v.optional for v in shape.values))


def test_the_shapes_that_declare_their_cells() -> None:
    declaring = [s.name for s in SHAPES
                 if ts.spec_of(_model(s)).codec.declared_cells is not None]
    assert declaring == [s.name for s in SHAPES if _declares(s)]
    assert declaring  # the rendering below is exercised


def _model(shape: Shape) -> type:
    return _MODELS.get(shape.name) or _MODELS.setdefault(shape.name, shape.make_model("W"))


@pytest.mark.parametrize("shape", [s for s in SHAPES if _declares(s)], ids=lambda s: s.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_declared_rendering_writes_the_message_built_bytes(shape: Shape,
                                                                 data: Any) -> None:
    """The generated writer of a table's declared cells, not its fall-back: the same
    entry bytes as the general writer, which the message-built oracle holds."""
    model = _model(shape)
    spec = ts.spec_of(model)
    events = data.draw(st.lists(oracle_events(shape), min_size=1, max_size=6))
    entries = []
    for e in events:
        ev = encode_event(spec, model(**{**e.fields(), "time": aware(e.t, e.zone)}))
        for entry in (ev.row_mutation(), ev.current_row_mutation()):
            if entry is not None and entry.declared is not None:
                entries.append(entry)
    assert entries and all(e.declared is spec.codec.declared_cells for e in entries)
    write = wire.render_cells_writer(spec.codec.declared_cells)
    for entry in entries:
        written = write(entry.key, entry.mutations)
        if entry.mutations[0].timestamp >= 0:  # before 1970: refused by the general path
            assert written is not None
            assert written == wire.entry_bytes(attrs.evolve(entry, declared=None))
        else:
            assert written is None
    _both(entries)


@pytest.mark.parametrize("stamp", [0, -1_000, 2**63, -(2**63), True, 1_000.0, 5_000])
def test_declared_cells_outside_the_rendering_are_written_or_refused_alike(stamp: Any) -> None:
    """Timestamps the generated writer leaves to the general path: the same bytes or
    the same refusal as for undeclared cells."""
    shape = next(s for s in SHAPES if _declares(s))
    declared = ts.spec_of(_model(shape)).codec.declared_cells
    assert declared is not None
    cells = tuple(SetCell(family, qualifier, stamp, b"\x00" * n)
                  for n, (family, qualifier) in enumerate(declared.columns))
    _both([RowMutation(b"k", cells, None, declared),
           RowMutation(b"k" * 200, cells, None, declared)])


@pytest.mark.parametrize("stamp", [1, 127, 128, 2**28 - 1, 2**28, 2**28 + 1, 2**35 + 7,
                                   1_426_532_400_000_000, 2**56 - 1, 2**56, 2**63 - 1])
def test_declared_cells_at_every_timestamp_width_give_the_message_built_bytes(
        stamp: int) -> None:
    """The generated writers' timestamps (high bits looked up above 2**28): the bytes
    of the message-built request, written twice (the second time from the cache), and
    the same entries sized alike with the values' sizes varied."""
    shape = next(s for s in SHAPES if _declares(s))
    declared = ts.spec_of(_model(shape)).codec.declared_cells
    assert declared is not None
    for size in (0, 1, 127, 128):
        cells = tuple(SetCell(family, qualifier, stamp, b"v" * (size + n))
                      for n, (family, qualifier) in enumerate(declared.columns))
        entries = [RowMutation(b"k", cells, None, declared),
                   RowMutation(b"k" * 200, cells, None, declared)]
        _both(entries)
        _both(entries)


def test_timestamps_kept_over_generations_give_the_message_built_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Timestamps repeating at every distance, across many turns of the two kept
    generations (made small here): each entry's bytes are the message-built ones.
    And a timestamp written less than a generation ago is still kept, whichever
    generation it is in, as the events of one time from many keys need."""
    monkeypatch.setattr(wire, "_STAMPS_KEPT", 64)
    monkeypatch.setattr(wire, "_TIMESTAMP_VARINTS", wire._TIMESTAMP_VARINTS)
    wire._TIMESTAMP_VARINTS.clear()
    wire._OLDER_VARINTS.clear()
    shape = next(s for s in SHAPES if _declares(s))
    declared = ts.spec_of(_model(shape)).codec.declared_cells
    assert declared is not None
    rng = random.Random(7)
    distinct = [rng.choice((0, 1, 127, 2**28, 2**40, 1_426_532_400_000_000, 2**63 - 1))
                + i * 1000 for i in range(200)]
    times = [t for _ in range(4) for t in rng.sample(distinct, len(distinct))]
    times += [rng.choice(distinct) for _ in range(400)]
    entries = [RowMutation(b"k%d" % i, tuple(SetCell(f, q, min(t, 2**63 - 1), b"v")
                                            for f, q in declared.columns), None, declared)
               for i, t in enumerate(times)]
    _both(entries)
    _both(entries[::-1])
    recent = list(dict.fromkeys(times))[:64]  # the last 64 distinct written (reversed)
    kept = wire._TIMESTAMP_VARINTS.keys() | wire._OLDER_VARINTS.keys()
    assert {min(t, 2**63 - 1) for t in recent} <= kept
    # One found among the older is made new again: it outlives the next turn.
    monkeypatch.setattr(wire, "_STAMPS_KEPT", 4)
    for t in range(1, 6):  # 1-4 older, 5 new
        assert wire._stamp_of(t) == b"\x18" + bytes((t,))
    assert wire._stamp_of(1) == b"\x18\x01"
    for t in range(6, 9):  # 5, 1, 6, 7 older, 8 new
        wire._stamp_of(t)
    assert set(wire._OLDER_VARINTS) == {5, 1, 6, 7}


def test_the_rendered_writer_is_there_to_read() -> None:
    shape = next(s for s in SHAPES if _declares(s))
    declared = ts.spec_of(_model(shape)).codec.declared_cells
    assert declared is not None
    write = wire.render_cells_writer(declared)
    source = rendered(write)
    assert source.startswith("def write_entry(key, cells):")
    for family, qualifier in declared.columns:
        assert repr(qualifier) in source and repr(family) in source
    assert inspect.getsourcefile(write) == f"<tsmodel codec {declared.label} wire>"


# -- a batch of declared rows, written from the events' checked tuples ------------------

@pytest.mark.parametrize("shape", [s for s in SHAPES if _declares(s)], ids=lambda s: s.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), max_bytes=st.sampled_from([20 * 1024 * 1024, 300]))
def test_a_batch_of_checked_tuples_sends_the_message_built_bytes(shape: Shape, data: Any,
                                                                 max_bytes: int) -> None:
    """A save's batch carried as its checked tuples (`DeclaredRows`): as rows, the
    rows the generated encoder lays out; as requests, the bytes, split and refusals
    of the message-built oracle for those rows, in the main and current-value table."""
    model = _model(shape)
    spec = ts.spec_of(model)
    events = data.draw(st.lists(oracle_events(shape), min_size=1, max_size=6))
    entities = [model(**{**e.fields(), "time": aware(e.t, e.zone)}) for e in events]
    checked = check_all(entities)
    if spec.alternates or spec.corrections_read_first or spec.rollups:
        assert not checked.plain  # such models' events are laid out
        return
    (plain,) = checked.plain.values()
    encoded = [encode_event(spec, e) for e in entities]
    tables = [(DeclaredRows(plain.declared, checked.events), [ev.row_mutation()
                                                                for ev in encoded])]
    if plain.current_table is not None:
        tables.append((DeclaredRows(plain.declared, checked.events,
                                    len(checked.events[0]) - 1),
                       [ev.current_row_mutation() for ev in encoded]))
    for rows, laid_out in tables:
        assert list(rows) == laid_out
        assert [r.declared for r in rows] == [r.declared for r in laid_out]
        for max_mutations in (7, 100_000):  # split, and (mostly) all in one request
            _same_requests(rows, laid_out, max_bytes, max_mutations)


def _same_requests(rows: DeclaredRows, laid_out: list[Any], max_bytes: int,
                   max_mutations: int = 7) -> None:
    """The batch writer on ``rows`` gives the message-built requests of ``laid_out``."""
    refused: dict[str, list[tuple[int, type, str]]] = {"wire": [], "message": []}
    got = [(r.SerializeToString(), p) for r, p in wire.entry_requests(
        "t", None, rows, range(len(rows)), max_mutations, max_bytes,
        lambda i, exc: refused["wire"].append((i, type(exc), _message(exc))))]
    expected = [(r.SerializeToString(), p) for r, p in message_requests(
        "t", None, laid_out, range(len(laid_out)), max_mutations, max_bytes,
        lambda i, exc: refused["message"].append((i, type(exc), _message(exc))))]
    assert got == expected
    assert refused["wire"] == refused["message"]


def test_the_rendered_rows_writer_is_there_to_read() -> None:
    shape = next(s for s in SHAPES if _declares(s))
    declared = ts.spec_of(_model(shape)).codec.declared_cells
    assert declared is not None
    write = wire.render_rows_writer(declared)
    assert rendered(write).startswith("def write_rows(checked, key_at, indices):")
    assert inspect.getsourcefile(write) == f"<tsmodel codec {declared.label} wire rows>"
