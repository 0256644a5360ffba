"""The ``@model`` class decorator: a class declaration checked once, into a frozen spec.

The decorator inspects the class once, when it is created: it validates the
declaration, turns the class into an attrs class and attaches one frozen
`ModelSpec`. Every mistake that can be seen from the
declaration raises `DeclarationError` then, never on
the first write.
"""

from __future__ import annotations

import difflib
import sys
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union

import attrs
from typing_extensions import Unpack, dataclass_transform

from tsmodel import errors
from tsmodel.declare import params, sizing
from tsmodel.declare.cells import (
    check_cell_times,
    check_key_columns,
    check_versions,
    key_columns,
    version_field,
)
from tsmodel.declare.companions import derive_alternate, derive_snapshot
from tsmodel.declare.fields import (
    META,
    Constant,
    KeyInfo,
    Salt,
    TimestampInfo,
    ValueInfo,
    VersionInfo,
    key,
    timestamp,
    value,
    version,
)
from tsmodel.declare.options import OPTION_NAMES, ModelArguments, ModelOptions
from tsmodel.declare.rollups import derive_rollup
from tsmodel.declare.salts import check_salt_function
from tsmodel.declare.spec import SPEC_ATTR, ModelSpec, ValueSpec
from tsmodel.encoding.buckets import make_bucket
from tsmodel.encoding.codecs import codec_for
from tsmodel.encoding.keys import (
    BucketSegment,
    ConstantSegment,
    IntSegment,
    KeyLayout,
    SaltSegment,
    Segment,
    StrSegment,
    TimestampSegment,
)
from tsmodel.encoding.timestamps import (
    EpochEncoding,
    FormatEncoding,
    TimestampEncoding,
    default_digits,
)
from tsmodel.layouts import rows

if TYPE_CHECKING:
    from tsmodel.encoding.serialization import BoundSerialization

__all__ = ["model"]

T = TypeVar("T", bound=type)

#: Bigtable's limit on the size of a row key.
MAX_ROW_KEY_BYTES = 4096
_RESERVED = frozenset({"range", "latest", "latest_many", "current", "snapshot", "using",
                       "rollup", "DoesNotExist"})


@dataclass_transform(kw_only_default=True,
                     field_specifiers=(attrs.field, key, timestamp, value, version))
def model(cls: None = None, /, **options: Unpack[ModelArguments]) -> Callable[[T], T]:
    """The declaration half of `tsmodel.model`: the class checked, made an attrs
    class, its frozen `ModelSpec` attached (the query class methods are the
    run layer's, `tsmodel.run.model.model`).

    Raises:
        DeclarationError: the declaration cannot work, or ``@ts.model`` was
            used without arguments.
    """
    if cls is not None:
        raise errors.DeclarationError(
            f"{getattr(cls, '__name__', params.show(cls))}: use @ts.model with arguments, "
            'at least @ts.model(table="TABLE", family="FAMILY"): a model needs its table '
            "and column family"
        )
    given: dict[str, Any] = dict(options)

    def wrap(klass: T) -> T:
        if not isinstance(klass, type):
            raise errors.DeclarationError(
                f"@tsmodel.model(...) decorates a class, not {type(klass).__name__} "
                f"{params.show(klass)}"
            )
        return typing.cast(T, _build(klass, _options(klass.__name__, given)))

    return wrap


def _options(name: str, given: Mapping[str, Any]) -> ModelOptions:
    """``@model``'s keyword arguments, checked (by `ModelOptions`' validators)."""
    unknown = [option for option in given if option not in OPTION_NAMES]
    if unknown:
        close = difflib.get_close_matches(unknown[0], OPTION_NAMES, n=1)
        hint = f"did you mean {close[0]}=? " if close else ""
        raise errors.DeclarationError(
            f"{name}: @ts.model({unknown[0]}=...): no such option; {hint}the options are "
            f"{', '.join(OPTION_NAMES)}"
        )
    if given.get("table") is None or given.get("family") is None:
        raise errors.DeclarationError(
            f"{name}: @tsmodel.model needs table=... and family=..."
        )
    return ModelOptions(name=name, **given)


def _build(cls: type, options: ModelOptions) -> type:
    name = cls.__name__
    _check_no_inherited_fields(cls)
    items = _declared_items(cls)
    hints = _type_hints(cls)
    for attr, item in items:
        if isinstance(item, (Constant, Salt)):
            if attr in hints:
                what = "ts.constant()" if isinstance(item, Constant) else "ts.salt()"
                raise errors.DeclarationError(
                    f"{name}.{attr}: {what} takes a place in the row key but is no field of "
                    f"instances; assign it without an annotation ({attr} = {what[:-1]}...))"
                )
            delattr(cls, attr)
    new_cls = attrs.define(cls, kw_only=True, slots=True, eq=True)
    # A value default (or factory) stands in for the cell of events stored before the
    # field existed; a None default is no value of a field that is not Optional.
    defaults = {a.name: a.default for a in attrs.fields(new_cls)
                if a.default is not attrs.NOTHING and a.default is not None}
    spec = _make_spec(name, items, hints, options, defaults)
    _check_unmapped(name, hints, items)
    setattr(new_cls, SPEC_ATTR, spec)
    new_cls.DoesNotExist = type(  # type: ignore[attr-defined]
        "DoesNotExist", (errors.DoesNotExist,), {"__module__": cls.__module__,
                                                 "__qualname__": f"{cls.__qualname__}.DoesNotExist"}
    )
    return new_cls


def _check_no_inherited_fields(cls: type) -> None:
    """Refuse a class whose base declares tsmodel fields: a model's row key and columns
    come from its own class body only."""
    for base in cls.__mro__[1:]:
        if SPEC_ATTR in base.__dict__:
            names = [a.name for a in attrs.fields(base)]
        else:
            names = [attr for attr, _ in _declared_items(base)]
        if names:
            raise errors.DeclarationError(
                f"{cls.__name__}: its base class {base.__name__} declares tsmodel fields "
                f"({', '.join(names)}); a model takes its fields from its own class body "
                "only, not from a base class or another model: declare them all in "
                f"{cls.__name__}")


def _declared_items(cls: type) -> list[tuple[str, Any]]:
    items = []
    for attr, item in cls.__dict__.items():
        if isinstance(item, (Constant, Salt)):
            items.append((attr, item))
        elif META in (getattr(item, "metadata", None) or {}):
            items.append((attr, item.metadata[META]))
    return items


def _type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception as exc:  # NameError, TypeError from forward references
        raise errors.DeclarationError(
            f"{cls.__name__}: cannot resolve the field annotations ({exc}); "
            "import the types they name at module level"
        ) from exc


def _check_unmapped(name: str, hints: dict[str, Any], items: list[tuple[str, Any]]) -> None:
    declared = {attr for attr, _ in items}
    for attr, hint in hints.items():
        if attr in declared or typing.get_origin(hint) is ClassVar or hint is ClassVar:
            continue
        raise errors.DeclarationError(
            f"{name}.{attr}: every field must be declared with tsmodel.key(), "
            "tsmodel.timestamp() or tsmodel.value(); annotate class constants with ClassVar"
        )


def _make_spec(
    name: str, items: list[tuple[str, Any]], hints: dict[str, Any], options: ModelOptions,
    defaults: Mapping[str, Any] | None = None,
) -> ModelSpec:
    sep = options.separator.encode("ascii")
    segments: list[Segment] = []
    ts_segments: list[TimestampSegment | BucketSegment] = []
    values: list[ValueSpec] = []
    versions = []
    for attr, info in items:
        if attr in _RESERVED:
            raise errors.DeclarationError(
                f"{name}.{attr}: the name {attr!r} is reserved by tsmodel"
            )
        if attr.startswith("_") and isinstance(info, (KeyInfo, TimestampInfo, ValueInfo)):
            raise errors.DeclarationError(
                f"{name}.{attr}: a field name may not start with an underscore: attrs names "
                f"its __init__ argument {attr.lstrip('_')!r}, so rows could not be read back "
                "into instances; rename the field"
            )
        if isinstance(info, ValueInfo):
            values.append(_value_spec(name, attr, info, hints.get(attr), options.family,
                                      (defaults or {}).get(attr, attrs.NOTHING)))
            continue
        if isinstance(info, VersionInfo):
            versions.append(attr)
            continue
        if ts_segments and not isinstance(info, TimestampInfo):
            raise errors.DeclarationError(
                f"{name}.{attr}: key segments after the timestamp make time-range reads of one "
                "entity impossible; declare the timestamp last among the key segments"
            )
        seg = _segment(name, attr, info, hints.get(attr), sep)
        segments.append(seg)
        if isinstance(seg, (TimestampSegment, BucketSegment)):
            ts_segments.append(seg)
    key = KeyLayout(tuple(segments), sep)
    ts_seg = _check_key(name, key, ts_segments, options)
    _check_values(name, values)
    current_key = None
    if options.current is not None:
        kept = [s for s in segments
                if not isinstance(s, (TimestampSegment, BucketSegment, SaltSegment))]
        current_key = KeyLayout(tuple(kept), sep)
    spec = ModelSpec(
        name=name, table=options.table, family=options.family,
        current_table=options.current, key=key, current_key=current_key,
        timestamp=ts_seg, key_fields=tuple(s.field for s in segments
                                           if s.field is not None and s is not ts_seg),
        values=tuple(values), serialization=_bind_serialization(name, options, values),
        layout=options.layout or rows(), max_rate=options.max_rate,
        retention=options.retention,
        # Cells stamped with version times carry no event times.
        event_time_cells=options.event_time_cells and not versions,
        key_columns=key_columns(name, items, hints, segments, options.family),
        version_field=version_field(name, versions, hints),
        unknown_columns=options.unknown_columns,
    )
    spec = _finish_layout(spec, options)
    return _with_companions(spec, options, hints, sep, items)


def _with_companions(spec: ModelSpec, options: ModelOptions, hints: dict[str, Any],
                     sep: bytes, items: list[tuple[str, Any]]) -> ModelSpec:
    """Derive and check the alternate-key and snapshot table specs."""
    def make(attr: str, info: Any, hint: Any) -> Segment:
        return _segment(spec.name, attr, info, hint, sep)

    alternates = tuple(derive_alternate(spec, a, hints, {}, make) for a in options.alternates)
    tables = [spec.table, spec.current_table, *(a.table for a in alternates)]
    if len({t for t in tables if t}) != len([t for t in tables if t]):
        raise errors.DeclarationError(f"{spec.name}: two of its tables have the same name")
    snap = derive_snapshot(spec, options.snapshot, hints, {}, make) if options.snapshot else None
    for derived in (*alternates, *([snap.template] if snap else [])):
        _check_leading(spec.name, derived.key, derived.timestamp, options.allow_hotspot)
        check_salt_function(spec.name, derived.table, derived.key)
        if derived.key.max_length > MAX_ROW_KEY_BYTES:
            raise errors.DeclarationError(
                f"{spec.name}: row keys of {derived.table!r} can reach "
                f"{derived.key.max_length} bytes, over Bigtable's 4 KB limit"
            )
    spec = attrs.evolve(spec, alternates=alternates, snapshot=snap)
    if not options.rollups:
        return spec

    def build(cls: type, table: str, family: str, retention: timedelta | None,
              allow_hotspot: bool) -> type:
        return _build(cls, ModelOptions(name=cls.__name__, table=table, family=family,
                                        separator=options.separator,
                                        allow_hotspot=allow_hotspot, retention=retention))

    rollups = tuple(derive_rollup(spec, r, items, hints, options.allow_hotspot, build)
                    for r in options.rollups)
    names = [*tables, *(r.table for r in rollups)]
    if len({t for t in names if t}) != len([t for t in names if t]):
        raise errors.DeclarationError(f"{spec.name}: two of its tables have the same name "
                                      "(a rollup table names another of its tables)")
    sizes = [r.every for r in rollups]
    if len(set(sizes)) != len(sizes):
        raise errors.DeclarationError(f"{spec.name}: two rollups have the same bucket size")
    return attrs.evolve(spec, rollups=rollups)


def _finish_layout(spec: ModelSpec, options: ModelOptions) -> ModelSpec:
    """Derive the version limit and apply the size guard (the layout was checked when
    the spec compiled its codec)."""
    check_versions(spec, alternates=bool(options.alternates),
                   snapshot=options.snapshot is not None)
    check_cell_times(spec)
    check_key_columns(spec)
    spec = attrs.evolve(spec, max_versions=_version_limit(spec, options))
    sizing.check_row_size(spec)
    return spec


def _version_limit(spec: ModelSpec, options: ModelOptions) -> int | None:
    if spec.version_field is not None:
        return options.max_versions  # the amendments kept per column (None: every one)
    if spec.layout.read_versions is not None:
        if options.max_versions not in (None, 1):
            raise errors.DeclarationError(
                f"{spec.name}: max_versions applies to bucket rows of ts.cells() or "
                "ts.columns(); this layout keeps one version per column"
            )
        return 1
    needed = sizing.events_per_bucket(spec)
    limit = options.max_versions if options.max_versions is not None else needed
    if needed is not None and limit is not None and needed > limit:
        raise errors.DeclarationError(
            f"{spec.name}: at max_rate={spec.max_rate}/s a "
            f"{spec.bucket.name if spec.bucket else ''} bucket gets up to {needed} cells per "
            f"column, over max_versions={limit}: "
            "garbage collection would delete events of the current bucket. Raise "
            "max_versions, or choose a smaller bucket"
        )
    if limit is None and spec.retention is None:
        raise errors.DeclarationError(
            f"{spec.name}: a {spec.layout.name} bucket keeps one cell version per event and "
            "needs a garbage-collection rule: declare max_rate= (versions for a full bucket "
            "are derived from it), max_versions=, or retention= (a max age)"
        )
    return limit


def _segment(name: str, attr: str, info: Any, hint: Any, sep: bytes) -> Segment:
    params.check_info(f"{name}.{attr}", info)
    if isinstance(info, Constant):
        if not info.text or sep.decode() in info.text:
            raise errors.DeclarationError(
                f"{name}.{attr}: constant {info.text!r} must be non-empty and must not "
                f"contain the separator {sep.decode()!r}"
            )
        return ConstantSegment(info.text)
    if isinstance(info, Salt):
        if info.buckets < 2:
            raise errors.DeclarationError(f"{name}.{attr}: a salt needs at least 2 buckets")
        if not info.on:
            raise errors.DeclarationError(
                f"{name}.{attr}: salt(on=...) must name at least one field to hash (usually "
                "the timestamp); hashing nothing puts every row under the same salt"
            )
        return SaltSegment(info.buckets, info.on, info.using, info.first,
                           attr if not attr.startswith("__") else "salt")
    if isinstance(info, TimestampInfo):
        if hint is not datetime:
            raise errors.DeclarationError(
                f"{name}.{attr}: a timestamp field must be annotated 'datetime', not {hint!r}"
            )
        if info.bucket is not None:
            return _bucket_segment(name, attr, info, sep)
        if info.origin is not None or info.unsorted_labels:
            raise errors.DeclarationError(
                f"{name}.{attr}: origin= and unsorted_labels= number the labels of time "
                "buckets; declare bucket=... too (e.g. bucket='week', label='week{n}')")
        return TimestampSegment(attr, _timestamp_encoding(name, attr, info))
    return _key_segment(name, attr, info, hint, sep)


def _bucket_segment(name: str, attr: str, info: TimestampInfo, sep: bytes) -> BucketSegment:
    assert info.bucket is not None
    try:
        bucket = make_bucket(info.bucket, info.label, origin=info.origin,
                             unsorted_labels=info.unsorted_labels)
    except ValueError as exc:
        raise errors.DeclarationError(f"{name}.{attr}: {exc}") from exc
    if bucket.width is None and sep.decode() in bucket.label_format:
        raise errors.DeclarationError(
            f"{name}.{attr}: label {bucket.label_format!r} holds the separator "
            f"{sep.decode()!r}; labels of several widths cannot be told apart from the "
            "segments after them")
    return BucketSegment(attr, bucket)


def _key_segment(name: str, attr: str, info: KeyInfo, hint: Any, sep: bytes) -> Segment:
    if hint is int:
        if info.width is None or info.width < 1:
            raise errors.DeclarationError(
                f"{name}.{attr}: an int key field needs width=N (zero-padded to N digits so that "
                "keys sort in numeric order), e.g. tsmodel.key(width=10)"
            )
        return IntSegment(attr, info.width)
    if hint is not str:
        raise errors.DeclarationError(
            f"{name}.{attr}: key fields must be annotated str or int, not {hint!r}"
        )
    if info.width is not None and info.width < 1:
        raise errors.DeclarationError(f"{name}.{attr}: width must be at least 1")
    if info.max_length < 1:
        raise errors.DeclarationError(f"{name}.{attr}: max_length must be at least 1")
    return StrSegment(attr, info.width, info.pad, info.align, info.max_length, sep)


def _timestamp_encoding(name: str, attr: str, info: TimestampInfo) -> TimestampEncoding:
    if info.format is not None:
        if info.reverse or info.reverse_from is not None:
            what = "reverse=True" if info.reverse_from is None else "reverse_from="
            raise errors.DeclarationError(
                f"{name}.{attr}: {what} needs epoch digits (unit='ms'...), not a format"
            )
        try:
            return FormatEncoding(info.format, info.millis)
        except ValueError as exc:
            raise errors.DeclarationError(f"{name}.{attr}: {exc}") from exc
    if info.unit not in ("ms", "us", "s"):
        raise errors.DeclarationError(
            f"{name}.{attr}: unit={info.unit!r}; use 'ms' (13 digits), 'us' (16) or 's' (10)"
        )
    digits = info.digits if info.digits is not None else default_digits(info.unit)
    if digits > MAX_ROW_KEY_BYTES:  # before anything computes 10**digits
        raise errors.DeclarationError(
            f"{name}.{attr}: digits={digits}: a row key holds at most {MAX_ROW_KEY_BYTES} "
            f"bytes; epoch {info.unit} take {default_digits(info.unit)} digits"
        )
    if digits < default_digits(info.unit):
        raise errors.DeclarationError(
            f"{name}.{attr}: {digits} digits of epoch {info.unit} run out before today and "
            f"would not sort in time order; use at least {default_digits(info.unit)}"
        )
    if info.reverse_from is not None:
        _check_reverse_from(f"{name}.{attr}", info)
        return EpochEncoding(info.unit, digits, True, info.reverse_from)
    return EpochEncoding(info.unit, digits, info.reverse)


def _check_reverse_from(where: str, info: TimestampInfo) -> None:
    """Another program's reversal: its width declared, holding the base, lasting until today."""
    base = info.reverse_from
    assert base is not None
    if info.digits is None:
        raise errors.DeclarationError(
            f"{where}: reverse_from={base} is another program's reversal: declare its width "
            f"as well, digits=N (keys of {base} - t are zero-padded to N digits; Java's "
            "Long.MAX_VALUE - t takes digits=19)")
    if base >= 10**info.digits:  # digits: at most MAX_ROW_KEY_BYTES (checked before)
        if base >= 10**MAX_ROW_KEY_BYTES:  # more digits than str() prints
            raise errors.DeclarationError(
                f"{where}: reverse_from has more than {info.digits} digits (more than "
                f"{MAX_ROW_KEY_BYTES}, what a row key holds): the oldest times would not fit")
        raise errors.DeclarationError(
            f"{where}: reverse_from={base} has {len(str(base))} digits, more than digits="
            f"{info.digits}: the oldest times would not fit; declare digits={len(str(base))}")
    least = 10**default_digits(info.unit) - 1
    if base < least:
        raise errors.DeclarationError(
            f"{where}: reverse_from={base} runs out before today: {base} - t turns negative "
            f"for times past {base} {info.unit} after the epoch; use at least {least}")


def _check_key(
    name: str, key: KeyLayout, ts_segments: list[TimestampSegment | BucketSegment],
    options: ModelOptions,
) -> TimestampSegment | BucketSegment:
    salt = key.salt()
    if not ts_segments:
        why = (f"a salted key needs a timestamp to merge the {salt.buckets} per-salt scans by "
               "time" if salt else "a time-series model needs the event time")
        raise errors.DeclarationError(
            f"{name}: no timestamp field: {why}; declare one with tsmodel.timestamp()"
        )
    if len(ts_segments) > 1:
        raise errors.DeclarationError(
            f"{name}: two timestamp fields ({', '.join(s.field for s in ts_segments)}); a model "
            "has exactly one event time. Store other times as value fields"
        )
    ts_seg = ts_segments[0]
    _check_leading(name, key, ts_seg, options.allow_hotspot)
    if salt is not None:
        _check_salt(name, key, salt)
        check_salt_function(name, options.table, key)
    if key.max_length > MAX_ROW_KEY_BYTES:
        raise errors.DeclarationError(
            f"{name}: row keys can reach {key.max_length} bytes, over Bigtable's 4 KB limit "
            f"({MAX_ROW_KEY_BYTES}); lower max_length= of variable-width key fields or widths"
        )
    return ts_seg


def _check_leading(
    name: str, key: KeyLayout, ts_seg: TimestampSegment | BucketSegment, allow: bool
) -> None:
    varying = [s for s in key.segments if not isinstance(s, ConstantSegment)]
    if varying and varying[0] is ts_seg and not allow:
        raise errors.DeclarationError(
            f"{name}: the row key {key.describe_order()} starts with the timestamp, so every "
            "write goes to the same node (hotspotting). Promote a field before it "
            "(tsmodel.key(), e.g. BATTERY#<user>#<ts>), or add tsmodel.salt(...) before it; pass "
            "allow_hotspot=True only for low write rates"
        )


def _check_salt(name: str, key: KeyLayout, salt: SaltSegment) -> None:
    known = set(key.fields)
    for field in salt.on:
        if field not in known:
            raise errors.DeclarationError(
                f"{name}: salt(on={field!r}) names no key field; a salt hashes key fields "
                f"or the timestamp ({', '.join(sorted(known))})"
            )


def _value_spec(
    name: str, attr: str, info: ValueInfo, hint: Any, default_family: str,
    default: Any = attrs.NOTHING,
) -> ValueSpec:
    params.check_info(f"{name}.{attr}", info)
    base, optional = _unwrap_optional(hint)
    codec = info.codec or codec_for(base)
    if codec is None:
        raise errors.DeclarationError(
            f"{name}.{attr}: no codec for {hint!r}; annotate int, float, str, bool or bytes, "
            "or pass codec=... to tsmodel.value()"
        )
    qualifier = info.qualifier if info.qualifier is not None else attr
    if not qualifier:
        raise errors.DeclarationError(f"{name}.{attr}: the qualifier must not be empty")
    family = info.family or default_family
    has_default = default is not attrs.NOTHING and not optional
    return ValueSpec(attr, family, qualifier.encode("utf-8"), codec, optional, info.allow_nan,
                     has_default=has_default, default=default if has_default else None)


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(hint)
    if origin is Union or (sys.version_info >= (3, 10) and origin is types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def _check_values(name: str, values: list[ValueSpec]) -> None:
    seen: dict[tuple[str, bytes], str] = {}
    for v in values:
        column = (v.family, v.qualifier)
        if column in seen:
            raise errors.DeclarationError(
                f"{name}: fields {seen[column]!r} and {v.name!r} both use the column "
                f"{v.family}:{v.qualifier.decode()}; give each value field its own qualifier"
            )
        seen[column] = v.name


def _bind_serialization(
    name: str, options: ModelOptions, values: list[ValueSpec],
) -> BoundSerialization | None:
    if options.serialization is None:
        return None
    return options.serialization.bind(name, options.family, tuple(values))
