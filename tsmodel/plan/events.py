"""Event encoding: a validated event, encoded once for every table of its model.

The generated encoder of a model's main and current-value rows
(`TableCodec.event_encoder`), then its alternate-key rows; every writer of
events (saves, deletes, repairs, snapshot jobs) encodes through here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar, cast

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec, instance_spec
from tsmodel.ground.base import (
    DeclaredCells,
    DeclaredColumns,
    Mutation,
    RowMutation,
)
from tsmodel.layouts import EncodedRow

__all__ = ["EncodedEvent", "CheckedEvents", "encode_event", "encode", "encoder",
           "event_encoder", "encode_all", "check_all", "checked_events", "PlainRows"]

_T = TypeVar("_T")


class EncodedEvent(NamedTuple):
    """One validated event, encoded for every table of its model.

    One flat tuple: a save keeps one per entity until it returns, and the
    fewer objects it keeps, the less the garbage collector walks (with
    50,000 events, a row object per table cost a third of encoding time).

    Attributes:
        entity: the model instance.
        table: the main table.
        key: its row key there.
        timestamp: the event time in microseconds.
        mutations: its cells there.
        current_table: the current-value table, or ``None``.
        current_key: its row key there, or ``None``.
        current_mutations: its cells there (often the same tuple as ``mutations``).
        alternates: its row in each alternate-key table.
        spec: the model's spec, where the event may correct one stored before
            (its cells depend on its values) or has rollups: a batch that holds
            one reads before or after its writes, and goes alone.
        declared: the main table's `DeclaredCells` while ``mutations`` are
            exactly its cells as the encoder laid them out (``None`` once a
            correction changes them): a backend writes them with its rendering.
    """

    entity: Any
    table: str
    key: bytes
    timestamp: int
    mutations: tuple[Mutation, ...]
    current_table: str | None = None
    current_key: bytes | None = None
    current_mutations: tuple[Mutation, ...] = ()
    alternates: tuple[EncodedRow, ...] = ()
    spec: ModelSpec | None = None
    declared: DeclaredCells | None = None

    @classmethod
    def of(cls, entity: Any, main: EncodedRow, current: EncodedRow | None = None,
           alternates: tuple[EncodedRow, ...] = (),
           spec: ModelSpec | None = None) -> EncodedEvent:
        """The event from its rows in each table."""
        if current is None:
            return cls(entity, *main, None, None, (), alternates, spec)
        return cls(entity, *main, current.table, current.key, current.mutations,
                   alternates, spec)

    @property
    def main(self) -> EncodedRow:
        """Its row in the main table."""
        return EncodedRow(self.table, self.key, self.timestamp, self.mutations)

    @property
    def current(self) -> EncodedRow | None:
        """Its row in the current-value table, or ``None``."""
        if self.current_table is None or self.current_key is None:
            return None
        return EncodedRow(self.current_table, self.current_key, self.timestamp,
                          self.current_mutations)

    def row_mutation(self) -> RowMutation:
        return RowMutation(self.key, self.mutations, None, self.declared)

    def current_row_mutation(self) -> RowMutation | None:
        if self.current_key is None:
            return None
        mutations = self.current_mutations
        # The current-value row's cells are the main row's where both lay them out alike.
        return RowMutation(self.current_key, mutations, None,
                           self.declared if mutations is self.mutations else None)


def encode_event(spec: ModelSpec, entity: Any) -> EncodedEvent:
    """Validate an instance and encode it for every table of its model.

    Raises:
        ValidationError: a value cannot be stored; the message names the model,
            the field and the value. Nothing is encoded half-way.
    """
    if instance_spec(entity) is not spec:
        raise errors.FieldTypeError(
            f"expected a {spec.name} instance, got {type(entity).__name__}",
            model=spec.name, value=entity,
        )
    return encode(spec, entity)


def encode(spec: ModelSpec, entity: Any) -> EncodedEvent:
    """Encode an instance of ``spec``'s model (one decoded from its rows, say): no
    check of its class, as `encode_event()` makes."""
    return encoder(spec)(entity)


#: Where `EncodedEvent` has ``alternates``; ``spec`` follows it.
_ALTERNATES = EncodedEvent._fields.index("alternates")


def event_encoder(spec: ModelSpec) -> Callable[[Any], EncodedEvent]:
    """The generated encoder of ``spec``'s events in its main and current-value tables."""
    return spec.codec.event_encoder(spec.current_codec, EncodedEvent)


def encoder(spec: ModelSpec) -> Callable[[Any], EncodedEvent]:
    """The encoder of ``spec``'s events: the main table's generated event encoder
    (main and current-value rows), then the alternate-key rows where there are."""
    event = event_encoder(spec)
    if not spec.alternates and not spec.corrections_read_first and not spec.rollups:
        return event  # the common case: the generated function alone
    alternates = tuple(alt.codec.encode for alt in spec.alternates)
    marked = spec if spec.corrections_read_first or spec.rollups else None

    # Built whole, the fields before ``alternates`` and after ``spec`` taken as they
    # are, joined as tuples: ``main._replace()`` took an eighth of a read-first
    # model's check, and the named tuple's own ``__new__`` is a Python call too.
    new = tuple.__new__
    before, after = _ALTERNATES, _ALTERNATES + 2

    def encode(entity: Any) -> EncodedEvent:
        main = event(entity)
        return new(EncodedEvent, main[:before] + (tuple([alt(entity) for alt in alternates]),
                                                  marked) + main[after:])

    return encode


def encode_all(entities: Iterable[Any]) -> list[EncodedEvent]:
    """Encode every entity before anything is written (so nothing is half-written)."""
    return _each(entities, encoder)


#: Lays a checked event's cells out: ``lay_out(entity, checked)`` is its `EncodedEvent`.
LayOut = Callable[[Any, tuple[Any, ...]], EncodedEvent]


class PlainRows(NamedTuple):
    """How a model's checked events are written without laying them out: the
    common case of a save (no correction read first, no rollup, no alternate
    key), where the main table's cells are `DeclaredCells` and the
    current-value row, if any, holds the same cells.

    A batch of such events is carried down to the backend as their checked
    tuples (`tsmodel.ground.base.DeclaredRows`): no cell, event or row object
    per event.

    Attributes:
        table: the main table.
        declared: its declared cells (the current-value row's too).
        current_table: the current-value table, or ``None``.
    """

    table: str
    declared: DeclaredCells
    current_table: str | None


class CheckedEvents(NamedTuple):
    """Every event of a save checked as its encoder checks it (`check_all()`).

    A validated save checks every event before it writes any, and lays each
    batch's cells out as the batch goes. What waits is no object per event:
    where a model's cells are laid out from its checked values alone, an
    event waits as the plain tuple its check returned (row keys, event
    time, encoded values: a tuple of bytes and ints, which the garbage
    collector stops tracking), beside the list of entities and the
    function that lays it out. The collector's full collections walk every
    object a save keeps; with 50,000 events, an object per event waiting
    was one more walked 50,000 times over.

    Attributes:
        entities: the entities, in input order.
        events: per entity, its `EncodedEvent`, or the plain tuple of its checks.
        lay_outs: per entity, the function that lays its checked tuple out
            (``lay_outs[i](entities[i], events[i])`` is the `EncodedEvent`),
            ``None`` for an event encoded whole.
        plain: per lay-out function, its model's `PlainRows` where its
            events may be written without being laid out.
        columns: the main-table rows of ``events`` as columns, where they come
            with them (a frame's chunk: `checked_events()`), else ``None``.
    """

    entities: list[Any]
    events: list[Any]
    lay_outs: list[LayOut | None]
    plain: dict[LayOut, PlainRows] = {}
    columns: DeclaredColumns | None = None


def check_all(entities: Iterable[Any]) -> CheckedEvents:
    """Check every entity before anything is written, as `encode_all()` does.

    Events whose cells are laid out from their checked values alone stay
    their checks' plain tuples (see `CheckedEvents`), the others are encoded.

    Raises:
        ValidationError: as `encode_all()`.
    """
    # Per model class: its check and lay-out, or its whole encoder and None. Each
    # entity is checked as it is taken from ``entities`` (a generator may note which
    # it handed out last: save_frame() names a bad row so); the lay-outs are filled
    # in per run of one class at the end, so that no object per event is made.
    makers: dict[type, tuple[Callable[[Any], Any], LayOut | None]] = {}
    plain: dict[LayOut, PlainRows] = {}
    kept: list[Any] = []
    events: list[Any] = []
    keep, checked = kept.append, events.append
    runs: list[tuple[int, LayOut | None]] = []
    kind: type | None = None
    check: Callable[[Any], Any] = _unchecked
    for e in entities:
        if type(e) is not kind:
            kind = type(e)
            maker = makers.get(kind)
            if maker is None:
                spec = instance_spec(e)
                maker = makers[kind] = _checker(spec)
                rows = _plain_rows(spec) if maker[1] is not None else None
                if rows is not None:
                    plain[cast("LayOut", maker[1])] = rows
            check = maker[0]
            runs.append((len(kept), maker[1]))
        keep(e)
        checked(check(e))
    lay_outs: list[LayOut | None] = []
    for n, (start, lay_out) in enumerate(runs):
        stop = runs[n + 1][0] if n + 1 < len(runs) else len(kept)
        lay_outs += [lay_out] * (stop - start)
    return CheckedEvents(kept, events, lay_outs, plain)


def checked_events(spec: ModelSpec, entities: Sequence[Any], events: list[tuple[Any, ...]],
                   columns: DeclaredColumns | None = None) -> CheckedEvents:
    """The `CheckedEvents` of ``spec``'s events checked elsewhere: ``events[i]`` is the
    tuple the check of `check_all()` returns for ``entities[i]`` (a frame's
    column-wise check: `tsmodel.io.frame_columns`), for a model `column_checker()`
    renders (where `check_all()` checks apart from laying out).

    ``entities`` is only read for what a save reports of an entity (the
    results of the rows not written) or lays out from it (a model whose rows
    are not `PlainRows`): a frame makes an instance when asked for one.
    ``columns``: the same rows as columns, kept where they are `PlainRows`.
    """
    check, lay_out = _checker(spec)
    if lay_out is None:
        raise ValueError(f"{spec.name}: its events are encoded whole, not checked apart")
    rows = _plain_rows(spec)
    return CheckedEvents(cast("list[Any]", entities), events, [lay_out] * len(events),
                         {} if rows is None else {lay_out: rows},
                         None if rows is None else columns)


def _unchecked(entity: Any) -> Any:
    raise AssertionError("no check chosen")  # never called: the first entity chooses one


def _plain_rows(spec: ModelSpec) -> PlainRows | None:
    """``spec``'s `PlainRows`, where its checked events are written as they are."""
    declared = spec.codec.declared_cells
    current = spec.current_codec
    if declared is None or spec.alternates or spec.corrections_read_first or spec.rollups:
        return None
    if current is not None and current._like is None:  # its cells are its own
        return None
    return PlainRows(spec.codec.table, declared, None if current is None else current.table)


def _each(entities: Iterable[Any], made_for: Callable[[ModelSpec], Callable[[Any], _T]]
          ) -> list[_T]:
    """``made_for(spec)(e)`` of every entity, ``made_for`` called once per model class."""
    made: dict[type, Callable[[Any], _T]] = {}
    out = []
    for e in entities:
        make = made.get(type(e))
        if make is None:
            make = made[type(e)] = made_for(instance_spec(e))
        out.append(make(e))
    return out


def _checker(spec: ModelSpec) -> tuple[Callable[[Any], Any], LayOut | None]:
    if spec.alternates or spec.corrections_read_first or spec.rollups:
        return encoder(spec), None
    parts = spec.codec.event_parts(spec.current_codec, EncodedEvent)
    if parts is None:
        return encoder(spec), None
    return parts


def column_checker(spec: ModelSpec) -> tuple[tuple[str, ...], Callable[..., list[Any]]] | None:
    """The check `check_all()` makes of each of ``spec``'s events, rendered column-wise
    (`tsmodel.layouts.codec.TableCodec.column_check`): the fields it reads and
    ``check_columns(*columns)``; ``None`` where `check_all()` encodes the events whole."""
    if spec.alternates or spec.corrections_read_first or spec.rollups:
        return None
    return spec.codec.column_check(spec.current_codec)
