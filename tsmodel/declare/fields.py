"""Field declarations: ``key()``, ``timestamp()``, ``value()``, ``constant()``, ``salt()``.

``key``, ``timestamp`` and ``value`` are thin wrappers over `attrs.field()`
that record what the field means for Bigtable in the field's ``metadata``.
``constant`` and ``salt`` are markers: they take a place in the row key but
are not attributes of instances.

The helpers record their arguments as given; ``@model`` checks their types
and ranges when the class is defined (`tsmodel.declare.params`), where
the error can name the model and the field.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs

from tsmodel import errors
from tsmodel.encoding.codecs import Codec

__all__ = ["key", "timestamp", "value", "version", "constant", "salt", "alternate", "snapshot",
           "rollup", "KeyInfo", "TimestampInfo", "ValueInfo", "VersionInfo", "Constant", "Salt",
           "Alternate", "Snapshot", "Rollup", "META"]

#: The metadata key under which tsmodel stores a field's declaration.
META = "tsmodel"


@attrs.frozen
class KeyInfo:
    """A key field: promoted into the row key."""

    width: int | None = None
    pad: str = " "
    align: str = "left"
    max_length: int = 256
    column: str | None = None
    column_codec: Codec | None = None


@attrs.frozen
class TimestampInfo:
    """The event time: the last row key segment and every cell's timestamp."""

    unit: str = "ms"
    digits: int | None = None
    format: str | None = None
    millis: bool = False
    reverse: bool = False
    bucket: str | timedelta | None = None
    label: str | None = None
    reverse_from: int | None = None
    origin: datetime | None = None
    unsorted_labels: bool = False
    column: str | None = None


@attrs.frozen
class ValueInfo:
    """A value field: one column (or one field of the serialized message)."""

    qualifier: str | None = None
    family: str | None = None
    codec: Codec | None = None
    allow_nan: bool = False


@attrs.frozen
class VersionInfo:
    """The version time of an event: the timestamp of every cell it writes."""


@attrs.frozen
class Constant:
    """A literal row key segment, such as ``BATTERY``."""

    text: str


@attrs.frozen
class Salt:
    """A salt segment: ``crc32`` of the ``on`` fields' encoded segments mod ``buckets``
    (plus ``first``), or what another program's function ``using`` gives."""

    buckets: int
    on: tuple[str, ...]
    using: Callable[..., int] | None = None
    first: int = 0


def key(
    *, width: int | None = None, pad: str = " ", align: str = "left", max_length: int = 256,
    column: str | None = None, column_codec: Codec | None = None,
) -> Any:
    """Declare a key field: a ``str`` or ``int`` promoted into the row key.

    Args:
        width: fixed width in bytes. Strings are padded with ``pad``; integers
            are left-padded with zeros and need a width. Without a width a
            string is variable width and may not contain the separator.
        pad: padding character of fixed-width strings.
        align: ``"left"`` (default) pads on the right, like the reference's
            ``"ZXZZT "``; ``"right"`` pads on the left.
        max_length: the most bytes of a variable-width string (bounds the key
            size, which Bigtable limits to 4 KB).
        column: also store the value in this column (qualifier) of the model's
            family, as the guide's ``MD:SYMBOL`` and ``METER:ID`` copy their
            key fields. tsmodel writes it from the key with every event (in a
            bucket row, one cell at the bucket start) and checks, on read,
            that it equals the key.
        column_codec: the column's codec (default: the value as UTF-8 text,
            unpadded: ``ZXZZT``, ``987654``).

    Returns:
        An attrs field; assign it in the class body.
    """
    return attrs.field(metadata={META: KeyInfo(width, pad, align, max_length, column,
                                               column_codec)})


def timestamp(
    *, unit: str = "ms", digits: int | None = None, format: str | None = None,
    millis: bool = False, reverse: bool = False, bucket: str | timedelta | None = None,
    label: str | None = None, reverse_from: int | None = None, origin: datetime | None = None,
    unsorted_labels: bool = False, column: str | None = None,
) -> Any:
    """Declare the event time: a timezone-aware ``datetime``.

    It is the last segment of the row key and the timestamp of every cell the
    event writes, so writes are idempotent and the newest event wins by event
    time.

    Args:
        unit: ``"ms"`` (13 digits, the default), ``"us"`` (16) or ``"s"`` (10):
            epoch units as zero-padded digits.
        digits: override the number of digits of an epoch unit (at least
            the unit's own, at most 4,096: a row key's size).
        format: an order-preserving UTC format instead of epoch digits, e.g.
            ``"%Y-%m-%d-%H%M"``; only ``%Y %m %d %j %H %M %S %f``, most
            significant first.
        millis: with ``format``, append three digits of milliseconds.
        reverse: store ``10**digits - 1 - t`` so that newest rows sort first
            (epoch units only).
        reverse_from: store ``reverse_from - t`` instead (implies a reversed
            timestamp): another program's reversal, such as Java's
            ``Long.MAX_VALUE - t`` (``reverse_from=2**63 - 1, digits=19``).
            Its width must be declared with ``digits``.
        bucket: put the *time bucket* in the row key instead of the time:
            ``"minute"``, ``"hour"``, ``"day"`` (``20170726``), ``"week"``
            (``2021-W09``), ``"month"`` (``201707``) or a ``timedelta``. The
            model then needs a bucket layout (``layout=ts.cells()``,
            ``ts.columns()`` or ``ts.offsets(step)``); the event time is the
            cell timestamp (or the offset column).
        label: the bucket label's format, checked to sort in time order
            (e.g. ``"%Y-%m-%d"`` for days, ``"%GW%V"`` for weeks); or, for a
            table another program labels ``week1``, ``week2`` ..., a numbered
            label such as ``"week{n}"`` with ``origin`` and ``unsorted_labels``.
        origin: the start of bucket 1 of a numbered label (a timezone-aware
            ``datetime``).
        unsorted_labels: accept a numbered label, which does not sort in time
            order: reads of a time range then take one read per bucket
            instead of one row range.
        column: also store the event time in this column (qualifier) of the
            model's family, as the row key's text never reversed (the guide's
            ``MD:QUOTETIME: 1426535612156``), checked on read to equal the
            key's time. Not for a bucket, whose row holds many times.

    Returns:
        An attrs field.
    """
    info = TimestampInfo(unit, digits, format, millis, reverse, bucket, label,
                         reverse_from=reverse_from, origin=origin,
                         unsorted_labels=unsorted_labels, column=column)
    return attrs.field(metadata={META: info})


def value(
    qualifier: str | None = None, *, family: str | None = None, codec: Codec | None = None,
    default: Any = attrs.NOTHING, factory: Callable[[], Any] | None = None,
    allow_nan: bool = False,
) -> Any:
    """Declare a value field: one column of the event's row.

    Args:
        qualifier: the column qualifier (default: the field name). Keep it
            short: it is stored with every cell.
        family: the column family (default: the model's family).
        codec: how the value becomes bytes (default: from the annotation:
            int, float, str, bool, bytes).
        default: a default value; ``None`` makes the field optional (no cell
            is written for ``None``). A field that is not optional reads its
            default from stored events that lack its cell (written before the
            field was added): see ``docs/evolving.md``.
        factory: a function of no argument giving the default (as
            ``attrs.field(factory=...)``), instead of ``default``.
        allow_nan: accept float NaN (refused by default).

    Returns:
        An attrs field.

    Raises:
        DeclarationError: both ``default`` and ``factory`` are given.
    """
    info = ValueInfo(qualifier, family, codec, allow_nan)
    if factory is not None:
        if default is not attrs.NOTHING:
            raise errors.DeclarationError(
                "ts.value(): give default= or factory=, not both")
        return attrs.field(factory=factory, metadata={META: info})
    return attrs.field(default=default, metadata={META: info})


def version() -> Any:
    """Declare the version time of an event: keep its amendments as cell versions.

    The guide's exception to "prefer rows to column versions": a closing price
    entered as 559.40 and amended to 558.40, with its history kept. The
    field (a timezone-aware ``datetime``, whole milliseconds) is the time this
    version of the event was recorded; it stamps every cell the event writes,
    so a save with a later version time adds versions beside the earlier ones
    instead of overwriting them (a save with the same version time stays
    idempotent). The event time stays in the row key. Reads return the
    newest version, `tsmodel.QuerySet.history()` every version.

    A model with a version field keeps a row per event (``ts.rows()``),
    required values only, no companion tables, and its range reads never
    filter by cell timestamp (the cells carry version times).

    Returns:
        An attrs field.
    """
    return attrs.field(metadata={META: VersionInfo()})


def constant(text: str) -> Any:
    """A literal row key segment at this place in the key, e.g. ``constant("BATTERY")``.

    Assign it to any name in the class body without an annotation; it does not
    become an attribute of instances.
    """
    return Constant(text)


def salt(buckets: int, *, on: tuple[str, ...] | list[str] | str,
         using: Callable[..., int] | None = None, first: int = 0) -> Any:
    """A salt segment at this place in the key.

    Args:
        buckets: number of salt values (``first .. first+buckets-1``, written
            as zero-padded digits); each time range read then runs one scan
            per salt value and merges them by time.
        on: the field(s) hashed (with a stable CRC-32, never Python's
            randomized ``hash``), e.g. the timestamp field.
        using: the salt function of a table another program writes: called
            with the ``on`` fields' values as the row key holds them (a
            timestamp as a UTC ``datetime``), one argument per field, it
            returns the salt value, an int in ``first .. first+buckets-1``.
            It must be deterministic (the same salt in every process: no
            Python ``hash()``); ``@model`` calls it on sample keys, refusing
            one that raises, returns no salt value or answers twice differently.
            ``None``: CRC-32 of the encoded segments, modulo ``buckets``.
        first: the smallest salt value (``1`` for salts ``1 .. 3``).
    """
    # Anything else is kept as given: @model refuses it, naming the model and field.
    names = (on,) if isinstance(on, str) else tuple(on) if isinstance(on, (list, tuple)) else on
    return Salt(buckets, names, using, first)


@attrs.frozen
class Alternate:
    """An alternate-key table: the same events under another row key order."""

    table: str
    segments: tuple[Any, ...]


@attrs.frozen
class Snapshot:
    """Per-period snapshot tables, built by a batch job from the main table."""

    pattern: str
    period: str | timedelta
    segments: tuple[Any, ...] | None


def alternate(table: str, *segments: Any) -> Alternate:
    """Declare an alternate-key table, kept in step with every save.

    Args:
        table: the table name, e.g. ``"GAME_BY_DAY"``.
        *segments: the row key, in order: names of the model's key fields
            and timestamp (each as declared), names of value fields to
            promote into the key (a ``str`` value field is variable width;
            give ``("score", ts.key(width=6))`` for another encoding),
            ``ts.constant(...)`` and ``ts.salt(...)``. Every key field of the
            model must appear, so that a row gives the whole event back.

    Example: the schema guide's game scores keyed ``LoL#Corrie#20150301`` can
    keep ``ts.alternate("GAME_BY_DAY", "game", "time", "player")`` to answer
    "all LoL games in March" from a key prefix.
    """
    return Alternate(table, tuple(segments))


def snapshot(pattern: str, *, period: str | timedelta = "day",
             key: tuple[Any, ...] | None = None) -> Snapshot:
    """Declare per-period snapshot tables (the guide's ``SENSOR_YYYYMMDD``).

    Args:
        pattern: the table name of a period, formatted with ``period`` (the
            period's start, a UTC datetime), e.g. ``"SENSOR_{period:%Y%m%d}"``.
        period: ``"hour"``, ``"day"`` (default), ``"week"``, ``"month"`` or a
            ``timedelta``.
        key: the snapshot's row key segments (as for `alternate()`);
            default: the main table's key.
    """
    return Snapshot(pattern, period, tuple(key) if isinstance(key, list) else key)


@attrs.frozen
class Rollup:
    """A rollup table: per entity and time bucket, aggregates of value fields."""

    table: str
    every: str | timedelta
    fields: tuple[str, ...] | None
    family: str | None
    retention: timedelta | None
    mode: str = "recompute"


def rollup(table: str, every: str | timedelta, *,
           fields: str | tuple[str, ...] | list[str] | None = None,
           family: str | None = None, retention: timedelta | None = None,
           mode: str = "recompute") -> Rollup:
    """Declare a rollup table: the model's events summed up per entity and time bucket.

    Every save, update and delete of the model keeps it exact: the buckets it
    touches are recomputed from the main table (docs/rollups.md). A row holds,
    for one entity (the model's key fields) and one bucket
    ``[start, start + every)``, the events' ``count`` and, per value field
    ``f``, ``f_count`` (events with a value), ``f_sum``, ``f_min``, ``f_max``,
    ``f_last`` (the value of the newest event) and ``f_mean``
    (``f_sum / f_count``, computed on read).

    Args:
        table: the rollup table, e.g. ``"METRIC_1H"``.
        every: the bucket size: ``"30s"``, ``"15min"``, ``"1h"``, ``"1d"`` or a
            ``timedelta`` (whole milliseconds); buckets start at multiples of it
            since the epoch (UTC).
        fields: the value fields to aggregate (``int`` or ``float`` fields;
            a string is one field's name); default: every ``int`` and
            ``float`` value field.
        family: the rollup table's column family (default: the model's).
        retention: keep rollup rows this long (a max-age GC rule on the bucket
            start); default: forever, whatever the main table keeps.
        mode: ``"recompute"`` (the default): every save rereads the buckets it
            touches and writes their rows whole, exact whatever happens.
            ``"increment"``: each save adds its events to the rollup rows on
            the server (``AddToCell`` into an aggregate column family of int64
            sums), with no read; the row holds ``count``, ``f_count`` and
            ``f_sum`` of ``int`` fields only, and a replayed or corrected
            event counts again (deletes and `tsmodel.repair()` recompute
            exactly). See docs/rollups.md.
    """
    names = (fields,) if isinstance(fields, str) else \
        tuple(fields) if isinstance(fields, (list, tuple)) else fields
    return Rollup(table, every, names, family, retention, mode)
