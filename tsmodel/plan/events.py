"""Event encoding: a validated event, encoded once for every table of its model.

The generated encoder of a model's main and current-value rows
(`TableCodec.event_encoder`), then its alternate-key rows; every writer of
events (saves, deletes, repairs, snapshot jobs) encodes through here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, TypeVar

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec, instance_spec
from tsmodel.ground.base import (
    DeclaredCells,
    Mutation,
    RowMutation,
)
from tsmodel.layouts import EncodedRow

__all__ = ["EncodedEvent", "Checked", "encode_event", "encode", "encoder", "event_encoder",
           "encode_all", "check_all"]

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

    def encode(entity: Any) -> EncodedEvent:
        main = event(entity)
        return main._replace(alternates=tuple(alt(entity) for alt in alternates), spec=marked)

    return encode



def encode_all(entities: Iterable[Any]) -> list[EncodedEvent]:
    """Encode every entity before anything is written (so nothing is half-written)."""
    return _each(entities, encoder)


class Checked(NamedTuple):
    """An event checked as its encoder checks it, its cells not laid out yet.

    A validated save checks every event before it writes any, and lays each
    batch's cells out as the batch goes (`check_all()`): it keeps one object
    per event waiting rather than its cells, and the garbage collector, which
    walks every object a save keeps, walks a third as many.

    Attributes:
        entity: the model instance.
        checked: what the check returned: row keys, event time, encoded values.
        lay_out: ``lay_out(entity, checked)`` is the event's `EncodedEvent`.
    """

    entity: Any
    checked: tuple[Any, ...]
    lay_out: Callable[[Any, Any], EncodedEvent]

    def encoded(self) -> EncodedEvent:
        """The event, laid out in its cells."""
        return self.lay_out(self.entity, self.checked)


def check_all(entities: Iterable[Any]) -> list[EncodedEvent | Checked]:
    """Check every entity before anything is written, as `encode_all()` does.

    Events whose cells are laid out from their checked values alone come back
    `Checked` (their `encoded()` is what `encode_all()` returns for them),
    the others encoded.

    Raises:
        ValidationError: as `encode_all()`.
    """
    return _each(entities, _checker)


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


def _checker(spec: ModelSpec) -> Callable[[Any], EncodedEvent | Checked]:
    if spec.alternates or spec.corrections_read_first or spec.rollups:
        return encoder(spec)
    parts = spec.codec.event_parts(spec.current_codec, EncodedEvent)
    if parts is None:
        return encoder(spec)
    check, lay_out = parts
    new = tuple.__new__

    def checked(entity: Any) -> Checked:
        return new(Checked, (entity, check(entity), lay_out))

    return checked
