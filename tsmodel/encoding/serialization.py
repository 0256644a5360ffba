"""Serializing a whole event into one cell (the "serialized" patterns).

`Protobuf` stores the value fields of an event as one protobuf message
in one column. Give it your own message class (its fields are matched to the
value fields by name), or let tsmodel generate a message from the value
fields: field numbers then follow the declaration order, so add new value
fields at the end and never reorder them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from tsmodel import errors
from tsmodel.encoding.codecs import Bool, Float64, Int64, Raw, Utf8
from tsmodel.encoding.values import ValueSpec

__all__ = ["Serialization", "Protobuf", "BoundSerialization"]

_FDP = descriptor_pb2.FieldDescriptorProto
_PROTO_TYPES: dict[type, int] = {
    Int64: _FDP.TYPE_INT64,
    Float64: _FDP.TYPE_DOUBLE,
    Utf8: _FDP.TYPE_STRING,
    Bool: _FDP.TYPE_BOOL,
    Raw: _FDP.TYPE_BYTES,
}
# Message field types that hold every value of the model's codec, and only those.
_COMPATIBLE: dict[int, set[int]] = {
    _FDP.TYPE_INT64: {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64,
                      FieldDescriptor.TYPE_SFIXED64},
    _FDP.TYPE_DOUBLE: {FieldDescriptor.TYPE_DOUBLE},
    _FDP.TYPE_STRING: {FieldDescriptor.TYPE_STRING},
    _FDP.TYPE_BOOL: {FieldDescriptor.TYPE_BOOL},
    _FDP.TYPE_BYTES: {FieldDescriptor.TYPE_BYTES},
}


class Serialization:
    """How a model's value fields become one cell. Subclasses implement ``bind``."""

    def bind(self, model: str, family: str, values: tuple[ValueSpec, ...]) -> BoundSerialization:
        raise NotImplementedError


@attrs.frozen
class BoundSerialization:
    """A serialization checked against one model: encodes and decodes its values."""

    family: str
    qualifier: bytes
    message_class: type[Message]
    fields: tuple[ValueSpec, ...]
    #: Per value field: its name, whether it has presence, may be absent (optional, or
    #: read as its default), is a string.
    _reading: tuple[tuple[str, bool, bool, bool], ...] = attrs.field(
        init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        by_name = self.message_class.DESCRIPTOR.fields_by_name
        reading = tuple((v.name, bool(by_name[v.name].has_presence), not v.stored,
                         by_name[v.name].type == FieldDescriptor.TYPE_STRING)
                        for v in self.fields)
        object.__setattr__(self, "_reading", reading)

    def encode(self, values: Mapping[str, Any]) -> bytes:
        """One serialized message holding every non-``None`` value."""
        msg = self.message_class()
        for v in self.fields:
            item = values[v.name]
            if isinstance(item, (bytearray, memoryview)):
                item = bytes(item)
            if item is not None:
                setattr(msg, v.name, item)
        return bytes(msg.SerializeToString(deterministic=True))

    def encode_entity(self, entity: Any) -> bytes:
        """One serialized message holding every non-``None`` value field of ``entity``."""
        return self.encode({v.name: getattr(entity, v.name) for v in self.fields})

    def decode(self, data: bytes) -> dict[str, Any]:
        """The value fields of a serialized message (``None`` for absent optional ones,
        and for absent ones with a default, which the table codec gives them).

        Raises:
            CellDecodingError: ``data`` is not a valid message, lacks a
                required value, or holds a string that is not UTF-8.
        """
        msg = self.message_class()
        try:
            msg.ParseFromString(data)
        except DecodeError as exc:
            raise self._refuse(data, f"cannot parse it: {exc}") from None
        out: dict[str, Any] = {}
        for name, presence, may_lack, text in self._reading:
            if presence and not msg.HasField(name):
                if not may_lack:
                    raise self._refuse(
                        data, f"it lacks {name!r}, a required value of the model (make the "
                        "field Optional[...] if events may lack it)", field=name)
                out[name] = None
                continue
            item = getattr(msg, name)
            if text and type(item) is not str:  # upb hands invalid proto2 UTF-8 over as bytes
                raise self._refuse(data, f"its string field {name!r} is not valid UTF-8",
                                   field=name)
            out[name] = item
        return out

    def _refuse(self, data: bytes, what: str, field: str | None = None) -> errors.CellDecodingError:
        shown = data if len(data) <= 32 else data[:32]
        more = "" if shown is data else f"... ({len(data)} bytes)"
        return errors.CellDecodingError(
            f"a {self.message_class.DESCRIPTOR.full_name} blob {shown!r}{more}: {what}",
            data=data, field=field)


@attrs.frozen
class Protobuf(Serialization):
    """Store the whole event as one protobuf message in one column.

    Args:
        message: a generated message class whose fields are named like the
            model's value fields; ``None`` generates one from the value fields.
        qualifier: the column qualifier of the serialized cell.
    """

    message: type[Message] | None = None
    qualifier: str = "blob"

    def bind(self, model: str, family: str, values: tuple[ValueSpec, ...]) -> BoundSerialization:
        """Check the serialization against a model's value fields.

        Raises:
            DeclarationError: a bad ``qualifier``, a ``message`` that is not a
                message class or that cannot hold the value fields, or value
                fields in another family.
        """
        qualifier = _qualifier(model, self.qualifier)
        for v in values:
            if v.family != family:
                raise errors.DeclarationError(
                    f"{model}.{v.name}: a serialized model stores one cell in family "
                    f"{family!r}; value fields cannot name another family ({v.family!r})"
                )
        if self.message is None:
            cls = _generate(model, values)
        else:
            cls = _message_class(model, self.message)
            _check_message(model, cls.DESCRIPTOR, values)
        return BoundSerialization(family, qualifier, cls, values)


def _qualifier(model: str, qualifier: object) -> bytes:
    if not isinstance(qualifier, str) or not qualifier:
        raise errors.DeclarationError(
            f"{model}: ts.Protobuf(qualifier={qualifier!r}): the qualifier must be a "
            "non-empty str, e.g. ts.Protobuf(qualifier='blob')"
        )
    try:
        return qualifier.encode("utf-8")
    except UnicodeEncodeError:
        raise errors.DeclarationError(
            f"{model}: ts.Protobuf(qualifier={qualifier!r}): the qualifier holds a lone "
            "surrogate, which UTF-8 cannot encode; use valid text"
        ) from None


def _message_class(model: str, message: object) -> type[Message]:
    if isinstance(message, type) and issubclass(message, Message) and isinstance(
            getattr(message, "DESCRIPTOR", None), Descriptor):
        return message
    hint = (f"pass the class, ts.Protobuf({type(message).__name__}), not an instance"
            if isinstance(message, Message) else "e.g. a class generated by protoc")
    raise errors.DeclarationError(
        f"{model}: ts.Protobuf(message={message!r}): message= takes a protobuf message "
        f"class; {hint}"
    )


def _proto_type(model: str, v: ValueSpec) -> int:
    for codec_cls, proto_type in _PROTO_TYPES.items():
        if isinstance(v.codec, codec_cls):
            return proto_type
    raise errors.DeclarationError(
        f"{model}.{v.name}: codec {v.codec.name!r} has no protobuf type; use int, float, "
        "str, bool or bytes fields, or pass your own message class"
    )


_PROTO_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


def _generate(model: str, values: tuple[ValueSpec, ...]) -> type[Message]:
    """A proto2 message with one optional field per value field, numbered in order."""
    for name, where in ((model, model), *((v.name, f"{model}.{v.name}") for v in values)):
        if not _PROTO_NAME.match(name):
            raise errors.DeclarationError(
                f"{where}: {name!r} cannot name a field of the generated protobuf message "
                "(ASCII letters, digits and '_', starting with a letter); rename it or "
                "pass your own message class, ts.Protobuf(message=...)"
            )
    file = descriptor_pb2.FileDescriptorProto(
        name=f"tsmodel_generated/{model}.proto", package="tsmodel.generated", syntax="proto2",
    )
    message = file.message_type.add(name=model)
    for number, v in enumerate(values, start=1):
        message.field.add(
            name=v.name, number=number, type=_proto_type(model, v), label=_FDP.LABEL_OPTIONAL,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName(f"tsmodel.generated.{model}")
    return message_factory.GetMessageClass(descriptor)  # type: ignore[no-any-return]


def _check_message(model: str, descriptor: Descriptor, values: tuple[ValueSpec, ...]) -> None:
    """Refuse a message that cannot hold every value field, exactly and alone."""
    oneofs: dict[str, str] = {}
    for v in values:
        field = descriptor.fields_by_name.get(v.name)
        if field is None:
            raise errors.DeclarationError(
                f"{model}.{v.name}: message {descriptor.full_name} has no field {v.name!r}"
            )
        where = f"{model}.{v.name}: message field {descriptor.full_name}.{v.name}"
        if _is_repeated(field):
            raise errors.DeclarationError(
                f"{where} is repeated (or a map) and holds a list, not one value; declare it "
                "without 'repeated' or use another message"
            )
        if field.type not in _COMPATIBLE[_proto_type(model, v)]:
            raise errors.DeclarationError(
                f"{where} cannot hold every {v.codec.name} value; use int64/sint64/sfixed64 "
                "for int, double for float, string, bool or bytes"
            )
        if v.optional and not field.has_presence:
            raise errors.DeclarationError(
                f"{where} has no presence, yet the value is Optional: None would come back "
                "as a zero value; declare it 'optional' in the .proto"
            )
        if v.optional and _is_required(field):
            raise errors.DeclarationError(
                f"{where} is required, yet the value is Optional: an event with None could "
                "not be serialized; make the field 'optional' in the .proto, or the value "
                "not Optional"
            )
        oneof = field.containing_oneof
        if oneof is not None:
            other = oneofs.setdefault(oneof.full_name, v.name)
            if other != v.name:
                raise errors.DeclarationError(
                    f"{model}: value fields {other!r} and {v.name!r} are in the same oneof "
                    f"{oneof.full_name}: setting one clears the other, so a value would be "
                    "lost; take them out of the oneof"
                )
    names = {v.name for v in values}
    for field in descriptor.fields:
        if _is_required(field) and field.name not in names:
            raise errors.DeclarationError(
                f"{model}: message {descriptor.full_name} has the required field "
                f"{field.name!r}, which is no value field of the model: no event could be "
                "serialized; declare a value field of that name, or make it 'optional'"
            )


def _is_repeated(field: FieldDescriptor) -> bool:
    # protobuf 7 has only is_repeated; protobuf < 6 only label.
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:
        repeated = field.label == FieldDescriptor.LABEL_REPEATED
    return bool(repeated)


def _is_required(field: FieldDescriptor) -> bool:
    required = getattr(field, "is_required", None)
    if required is None:
        required = field.label == FieldDescriptor.LABEL_REQUIRED
    return bool(required)
