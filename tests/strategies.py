"""Every Hypothesis strategy of the test suite, in one place.

The strategies generate values that a row key segment accepts (so that the
round-trip and order properties can be stated without filtering) and the
timestamps each encoding can hold, as timezone-aware datetimes in assorted
time zones. The ``oracle_*`` strategies draw the events and queries of the
oracle harness (``tests/oracle``) from a shape's small universe.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from tsmodel.encoding.timestamps import from_micros

__all__ = [
    "variable_width_text",
    "fixed_width_text",
    "key_ints",
    "zones",
    "aware_datetimes",
    "epoch_datetimes",
    "format_datetimes",
    "distinct_pair",
    "int64s",
    "float64s",
    "byte_strings",
    "unicode_text",
    "oracle_events",
    "oracle_batches",
    "oracle_correction",
    "oracle_instants",
    "oracle_key_fields",
    "oracle_refinements",
    "oracle_range_queries",
    "oracle_current_queries",
    "oracle_entities",
    "oracle_key_prefixes",
    "oracle_periods",
    "oracle_repair_spans",
    "neutral_mutations",
    "row_mutations",
    "read_rows_streams",
]

#: First code point a variable-width segment accepts with the ``#`` separator
#: (the separator and everything below it are refused).
_ABOVE_HASH = ord("#") + 1
#: First code point a space-padded fixed-width segment accepts.
_SPACE = ord(" ")

_US_PER_UNIT = {"us": 1, "ms": 1_000, "s": 1_000_000}


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def variable_width_text(*, max_bytes: int = 24, ascii_only: bool = False) -> st.SearchStrategy[str]:
    """Non-empty strings a variable-width key segment accepts (``#`` separator).

    Every character sorts above the separator; surrogates (which UTF-8
    cannot encode) are excluded.
    """
    chars = st.characters(
        min_codepoint=_ABOVE_HASH,
        max_codepoint=0x7E if ascii_only else None,
        exclude_categories=("Cs",),
    )
    return st.text(chars, min_size=1, max_size=max_bytes).filter(
        lambda s: _utf8_len(s) <= max_bytes
    )


def fixed_width_text(width: int, *, ascii_only: bool = False) -> st.SearchStrategy[str]:
    """Strings a fixed-width, space-padded, left-aligned key segment accepts.

    At most ``width`` UTF-8 bytes, no character below the pad (space), and
    not ending with the pad. The empty string is allowed (all padding).
    """
    chars = st.characters(
        min_codepoint=_SPACE,
        max_codepoint=0x7E if ascii_only else None,
        exclude_categories=("Cs",),
    )
    return st.text(chars, max_size=width).filter(
        lambda s: _utf8_len(s) <= width and not s.endswith(" ")
    )


def key_ints(width: int) -> st.SearchStrategy[int]:
    """Integers a zero-padded integer key segment of ``width`` digits accepts."""
    return st.integers(min_value=0, max_value=10**width - 1)


def zones() -> st.SearchStrategy[timezone]:
    """UTC and a few fixed offsets, including non-whole-hour ones."""
    return st.sampled_from([
        timezone.utc,
        timezone(timedelta(hours=5, minutes=30)),
        timezone(timedelta(hours=-8)),
        timezone(timedelta(hours=14)),
        timezone(timedelta(hours=-12)),
    ])


def aware_datetimes(min_us: int, max_us: int, unit_us: int = 1) -> st.SearchStrategy[datetime]:
    """Aware datetimes between two epoch-microsecond bounds, whole ``unit_us`` multiples.

    The instant is drawn as an integer number of units, so it is exact, then
    shown in one of :func:`zones` (the zone never changes the instant).
    """
    lo = -((-min_us) // unit_us)
    hi = max_us // unit_us

    def build(n: int, tz: timezone) -> datetime:
        utc = from_micros(n * unit_us)
        try:
            return utc.astimezone(tz)
        except OverflowError:  # year 1 or 9999 shown in a far zone
            return utc

    return st.builds(build, st.integers(min_value=lo, max_value=hi), zones())


def epoch_datetimes(unit: str = "ms", digits: int | None = None) -> st.SearchStrategy[datetime]:
    """The instants an epoch encoding (``unit``, ``digits``) can hold."""
    default = {"us": 16, "ms": 13, "s": 10}[unit]
    per = _US_PER_UNIT[unit]
    top = (10 ** (digits or default) - 1) * per
    return aware_datetimes(0, top, per)


# Year 1 .. the last millisecond of 9999: the range of FormatEncoding.
_FORMAT_MIN_US = 0  # cell timestamps cannot be negative: formats start at 1970
_FORMAT_MAX_US = 253_402_300_799_999_000


def format_datetimes(unit_us: int) -> st.SearchStrategy[datetime]:
    """The instants a calendar-format encoding whose unit is ``unit_us`` can hold."""
    return aware_datetimes(_FORMAT_MIN_US, _FORMAT_MAX_US, unit_us)


def distinct_pair(values: st.SearchStrategy[object]) -> st.SearchStrategy[tuple[object, object]]:
    """Two different values of one strategy."""
    return st.tuples(values, values).filter(lambda p: p[0] != p[1])


def int64s() -> st.SearchStrategy[int]:
    """Every signed 64-bit integer."""
    return st.integers(min_value=-(2**63), max_value=2**63 - 1)


def float64s() -> st.SearchStrategy[float]:
    """Every double, NaN and infinities included."""
    return st.floats(allow_nan=True, allow_infinity=True)


def byte_strings() -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, empty included."""
    return st.binary(max_size=64)


def unicode_text() -> st.SearchStrategy[str]:
    """Any text UTF-8 can encode."""
    return st.text(st.characters(exclude_categories=("Cs",)), max_size=32)


# -- the oracle harness (tests/oracle) -------------------------------------------------
#
# Events, corrections, instants and queries drawn from the small universe a
# shape (tests/oracle/shapes.py) declares, so that saves collide. Composite
# strategies, so that a failing run prints each step's values as they read.
#
# The strategies a draw uses are built once per shape (`_per_shape`): a new
# strategy object is validated and labelled again at its first draw, which
# cost the oracle machine more than the steps themselves. The draws are the
# same choices either way.

#: UTC offsets (minutes) events and query bounds are given in.
_ORACLE_ZONES = (0, 330, -480, 840, -720)
#: The last microsecond a datetime holds, 9999-12-31T23:59:59.999999Z.
_DATETIME_MAX_US = 253_402_300_799_999_999

_ZONES = st.sampled_from(_ORACLE_ZONES)
_SCANS = st.sampled_from((False, False, True))
_LIMITS = st.one_of(st.none(), st.integers(0, 4))
_RUNS = st.sampled_from(("list", "list", "count", "first", "exists", "slice"))
_BACKWARDS = st.integers(0, 9)

_built: dict[tuple[int, str], tuple[Any, Any]] = {}


def _per_shape(shape: Any, what: str, build: Any) -> Any:
    """``build(shape)``, once per shape (shapes hold dicts: keyed by identity, kept alive)."""
    key = (id(shape), what)
    if key not in _built:
        _built[key] = (shape, build(shape))
    return _built[key][1]


def _oracle_event(shape: Any, entity: dict[str, Any], t: int, values: dict[str, Any],
                  zone: int) -> Any:
    from tests.oracle.reference import Ev

    keys = tuple((name, entity[name]) for name in shape.key_fields)
    return Ev(keys, t, tuple((v.name, values[v.name]) for v in shape.values), zone)


def _oracle_values(shape: Any) -> st.SearchStrategy[dict[str, Any]]:
    return _per_shape(shape, "values", lambda shape: st.fixed_dictionaries(
        {v.name: st.sampled_from(v.choices) for v in shape.values}))


@st.composite
def oracle_events(draw: st.DrawFn, shape: Any) -> Any:
    """One event of the shape's universe: an entity, a time, values, a time zone."""
    entities, times = _per_shape(shape, "event", lambda shape: (
        st.sampled_from(shape.entities), st.sampled_from(shape.times)))
    return _oracle_event(shape, draw(entities), draw(times), draw(_oracle_values(shape)),
                         draw(_ZONES))


def oracle_batches(shape: Any) -> st.SearchStrategy[list[Any]]:
    """The events of one ``save_all``: distinct identities, in any order."""
    return st.lists(oracle_events(shape), min_size=1, max_size=8,
                    unique_by=lambda e: e.identity)


@st.composite
def oracle_correction(draw: st.DrawFn, shape: Any, old: Any) -> Any:
    """The same identity (key fields and time) with values drawn again."""
    return _oracle_event(shape, dict(old.keys), old.t, draw(_oracle_values(shape)),
                         draw(_ZONES))


def oracle_instants(shape: Any) -> st.SearchStrategy[int]:
    """Query bounds (µs): event times and their neighbours, bucket edges, the extremes."""
    return _per_shape(shape, "instants", _instants)


def _instants(shape: Any) -> st.SearchStrategy[int]:
    jitters = [0, 0, 1, -1, 1000, -1000]
    if shape.bucketed:
        jitters += [shape.time.bucket // 2, -shape.time.bucket]
    near = st.tuples(st.sampled_from(shape.times), st.sampled_from(jitters)).map(
        lambda drawn: min(max(sum(drawn), 0), _DATETIME_MAX_US))
    return st.one_of(near, st.sampled_from([0, _DATETIME_MAX_US]))


def oracle_repair_spans(shape: Any) -> st.SearchStrategy[tuple[int, int]]:
    """The [start, end) of a repair."""
    bounds = oracle_instants(shape)
    return st.tuples(bounds, bounds).map(lambda ab: (min(ab), max(ab)))


def oracle_periods(shape: Any) -> st.SearchStrategy[int]:
    """An instant of a snapshot period (a UTC day) holding some of the shape's times."""
    return st.sampled_from(shape.times)


def _absent(seg: Any) -> Any:
    return 10**seg.width - 1 if seg.kind == "int" else "zz"


def _promoted(shape: Any) -> set[str]:
    """Value fields promoted into an alternate key."""
    names = {v.name for v in shape.values}
    return {s.field for key in shape.alternates for s in key if s.field in names}


def oracle_key_fields(shape: Any, *, current: bool = False) -> st.SearchStrategy[Any]:
    """Key fields of a query: any subset of the queryable fields, known or absent values."""
    def build(shape: Any) -> st.SearchStrategy[Any]:
        values = _queryable(shape, current)
        names = st.lists(st.sampled_from(list(values)), unique=True) if values else st.just([])
        return _key_fields(names, values)

    return _per_shape(shape, f"key_fields:{current}", build)


def _queryable(shape: Any, current: bool) -> dict[str, st.SearchStrategy[Any]]:
    """The queryable fields, in key order, each with its values: known, or absent."""
    segs: dict[str, Any] = {}
    for key in (shape.key,) if current else (shape.key, *shape.alternates):
        for seg in key:
            if seg.kind not in ("const", "salt", "time") and seg.field not in segs:
                segs[seg.field] = seg
    values: dict[str, st.SearchStrategy[Any]] = {}
    for name, seg in segs.items():
        if name in shape.key_fields:
            known = sorted({e[name] for e in shape.entities}, key=repr)
        else:  # a value promoted into an alternate key
            known = [c for c in shape.value(name).choices if c is not None]
        values[name] = st.sampled_from([*known, _absent(seg)])
    return values


@st.composite
def _key_fields(draw: st.DrawFn, names_of: st.SearchStrategy[list[str]],
                values: dict[str, st.SearchStrategy[Any]]) -> tuple[Any, ...]:
    names = draw(names_of) if values else []
    return tuple((name, draw(values[name])) for name in values if name in names)


def oracle_refinements(shape: Any) -> st.SearchStrategy[Any]:
    """Limit, newest first, only(...) and the way the QuerySet is run."""
    return _per_shape(shape, "refinements", lambda shape: _refinements(
        [v.name for v in shape.values],
        st.lists(st.sampled_from([v.name for v in shape.values]), min_size=1, unique=True)
        if shape.values else st.nothing()))


@st.composite
def _refinements(draw: st.DrawFn, names: list[str], onlys: st.SearchStrategy[list[str]]) -> Any:
    from tests.oracle.ops import Refine

    only = None
    if names and draw(st.booleans()):
        only = tuple(draw(onlys))
    limit = draw(_LIMITS)
    run = draw(_RUNS)
    return Refine(limit, draw(st.booleans()), only, run)


@st.composite
def oracle_range_queries(draw: st.DrawFn, shape: Any) -> Any:
    """A range query: bounds (now and then backwards), key fields, scan, refinements."""
    from tests.oracle.ops import RangeQuery, Refine

    a, b = draw(oracle_instants(shape)), draw(oracle_instants(shape))
    lo, hi = min(a, b), max(a, b)
    if draw(_BACKWARDS) == 0:
        lo, hi = hi, lo  # start after end: a QueryError
    fields = draw(oracle_key_fields(shape))
    scan = draw(_SCANS)
    refine = draw(oracle_refinements(shape))
    named = {n for n, _ in fields}
    promoted = _promoted(shape)
    if refine.only is not None and named & promoted and not promoted <= set(refine.only):
        # Read from the alternate key: whether only() blanks a value the key
        # holds is left open by the docs, so only() keeps every promoted value.
        refine = Refine(refine.limit, refine.newest_first, None, refine.run)
    return RangeQuery(lo, hi, fields, scan, refine, draw(_ZONES))


@st.composite
def oracle_current_queries(draw: st.DrawFn, shape: Any) -> Any:
    """A current() query; newest_first() there is not documented, so never asked."""
    from tests.oracle.ops import CurrentQuery, Refine

    fields = draw(oracle_key_fields(shape, current=True))
    scan = draw(_SCANS)
    refine = draw(oracle_refinements(shape))
    return CurrentQuery(fields, scan, Refine(refine.limit, False, refine.only, refine.run))


@st.composite
def oracle_key_prefixes(draw: st.DrawFn, shape: Any) -> dict[str, Any]:
    """Leading key fields of the main key, with values of the universe."""
    names = shape.key_fields[:draw(st.integers(0, len(shape.key_fields)))]
    return {n: draw(st.sampled_from(sorted({e[n] for e in shape.entities}, key=repr)))
            for n in names}


def oracle_entities(shape: Any) -> st.SearchStrategy[dict[str, Any]]:
    """An entity of the universe, or one that never has an event."""
    absent = {s.field: _absent(s) for s in shape.key
              if s.kind not in ("const", "salt", "time")}
    return st.sampled_from([*shape.entities, absent])


# -- error fuzzing (tests/unit/test_error_fuzz.py) ---------------------------------------
#
# Declaration parameters, field values and stored bytes of every kind, right
# and wrong, to check that only tsmodel's own errors escape.

#: The first microsecond of the year 2 (year 1 shown in a far zone cannot be).
_YEAR_2_US = -62_104_060_800_000_000
#: Text UTF-8 cannot encode: lone surrogates.
_SURROGATES = ("\ud800", "a\udc80b", "\udfff#")


def junk() -> st.SearchStrategy[object]:
    """A value of any kind that a parameter or a field might wrongly be given."""
    import tsmodel as ts

    things: list[object] = [object(), object, int, str, ts.Int64, ts.rows, ts.Protobuf,
                            ts.constant("X"), ts.key(), len, Ellipsis, (), [], {}]
    return st.one_of(
        st.none(), st.booleans(), st.integers(-3, 70), st.integers(),
        st.floats(), st.text(max_size=6), st.sampled_from(_SURROGATES),
        st.binary(max_size=6), st.lists(st.integers(0, 9) | st.text(max_size=3), max_size=2),
        st.timedeltas(min_value=timedelta(days=-3), max_value=timedelta(days=400)),
        st.sampled_from(things),
    )


#: Per declaration parameter, values that a valid declaration may give it.
DECLARATION_SLOTS: dict[tuple[str, str], tuple[object, ...]] = {
    ("key", "width"): (None, 6),
    ("key", "pad"): (" ", "_"),
    ("key", "align"): ("left", "right"),
    ("key", "max_length"): (16, 256),
    ("timestamp", "unit"): ("ms", "us", "s"),
    ("timestamp", "digits"): (None,),
    ("timestamp", "format"): (None, "%Y%m%d%H%M%S"),
    ("timestamp", "millis"): (False,),
    ("timestamp", "reverse"): (False, True),
    ("timestamp", "bucket"): (None,),
    ("timestamp", "label"): (None,),
    ("value", "qualifier"): (None, "Q/V"),
    ("value", "family"): (None, "G"),
    ("value", "codec"): (None,),
    ("value", "allow_nan"): (False, True),
    ("constant", "text"): ("BATTERY",),
    ("salt", "buckets"): (4,),
    ("salt", "on"): ("time", ("host", "time")),
    ("alternate", "table"): ("ALT",),
    ("snapshot", "pattern"): ("SNAP_{period:%Y%m%d}",),
    ("snapshot", "period"): ("day",),
    ("protobuf", "qualifier"): ("blob",),
    ("model", "table"): ("T",),
    ("model", "family"): ("F",),
    ("model", "current"): (None, "CURRENT_T"),
    ("model", "separator"): ("#", "|"),
    ("model", "allow_hotspot"): (False, True),
    ("model", "layout"): (None,),
    ("model", "max_rate"): (None, 10),
    ("model", "retention"): (None, timedelta(days=30)),
    ("model", "max_versions"): (None, 1),
}


@st.composite
def declarations(draw: st.DrawFn) -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
    """A model declaration: (class body, annotations, ``@model`` options).

    Every parameter takes a valid value, except one to three drawn at random
    that take :func:`junk`; constants, salts, companions and a serialization
    come and go.
    """
    import tsmodel as ts

    slots = list(DECLARATION_SLOTS)
    wrong = draw(st.sets(st.sampled_from(slots), min_size=0, max_size=3))
    p: dict[tuple[str, str], object] = {}
    for slot in slots:
        p[slot] = draw(junk() if slot in wrong else st.sampled_from(DECLARATION_SLOTS[slot]))

    def params(helper: str) -> dict[str, object]:
        return {name: value for (h, name), value in p.items() if h == helper}

    key_hint = draw(st.sampled_from([str, str, int]))
    value_hint = draw(st.sampled_from([float, int, str, bool, bytes, float | None, str | None]))
    value_options = params("value")
    if draw(st.booleans()) and value_hint in (float, int):
        value_options["codec"] = ts.Text(value_hint)
    default = {"default": None} if value_hint in (float | None, str | None) else {}
    body: dict[str, object] = {}
    annotations: dict[str, object] = {"host": key_hint, "time": datetime, "v": value_hint}
    if draw(st.booleans()):
        body["c"] = ts.constant(p["constant", "text"])
    key_options = params("key")
    if key_hint is int and key_options["width"] is None:
        key_options["width"] = 6
    body["host"] = ts.key(**key_options)
    if draw(st.booleans()):
        salt = params("salt")
        body["s"] = ts.salt(salt["buckets"], on=salt["on"])
    body["time"] = ts.timestamp(**params("timestamp"))
    body["v"] = ts.value(**value_options, **default)
    options = {name: value for (h, name), value in p.items() if h == "model"}
    if draw(st.booleans()):
        options["alternates"] = [ts.alternate(p["alternate", "table"], "host", "time")]
    if draw(st.booleans()):
        options["snapshot"] = ts.snapshot(p["snapshot", "pattern"],
                                          period=p["snapshot", "period"])
    if draw(st.booleans()):
        options["serialization"] = ts.Protobuf(
            qualifier=p["protobuf", "qualifier"])
    return body, annotations, options


def field_values(hint: object) -> st.SearchStrategy[object]:
    """Values for a field annotated ``hint``: mostly right, sometimes :func:`junk`."""
    right: dict[object, st.SearchStrategy[object]] = {
        int: st.integers(-(2**70), 2**70),
        float: st.floats() | st.integers(-(2**70), 2**70),
        str: st.text(max_size=12) | st.sampled_from(_SURROGATES),
        bool: st.booleans(),
        bytes: st.binary(max_size=12),
        datetime: st.one_of(aware_datetimes(0, _FORMAT_MAX_US, 1_000),
                            aware_datetimes(_YEAR_2_US, _FORMAT_MAX_US), st.datetimes()),
    }
    base = right.get(hint, st.nothing())
    if hint in (float | None, str | None):
        base = st.none() | right[float if hint == float | None else str]
    return st.one_of(base, base, base, junk())


def stored_bytes(samples: tuple[bytes, ...] = ()) -> st.SearchStrategy[bytes]:
    """Cell values or row keys: well-formed samples, their mutations, random bytes."""
    mutated = st.builds(_mutate, st.sampled_from(samples), st.integers(0, 64),
                        st.binary(max_size=3)) if samples else st.nothing()
    known = st.sampled_from(samples) if samples else st.nothing()
    return st.one_of(st.binary(max_size=24), known, mutated,
                     st.sampled_from([b"", b"\x00", b"\x01", b"\x02", b"\xff" * 8]))


def _mutate(data: bytes, at: int, insert: bytes) -> bytes:
    at = at % (len(data) + 1)
    return data[:at] + insert + data[at + 1:]



# -- neutral mutations, for the wire encoders ---------------------------------------

#: Timestamps at the edges: 0, small, whole ms, not whole ms, the int64 edge, beyond it.
_EDGE_TIMES = (0, 1, 999, 1_000, 1_425_213_901_001_000, 2**63 - 1_000, 2**63 - 1, 2**63,
               2**64, -1, -(2**63))


def _times() -> st.SearchStrategy[int]:
    return st.sampled_from(_EDGE_TIMES) | st.integers(0, 2**63 - 1) | st.integers(-5, 5)


def _families() -> st.SearchStrategy[str]:
    return st.sampled_from(["F", "METRIC", "", "é", "\U0001f600", "a" * 200]) | st.text(
        max_size=8)


def _qualifiers() -> st.SearchStrategy[bytes]:
    return st.sampled_from([b"", b"Q", b"\x00", "é".encode(), b"x" * 300]) | st.binary(
        max_size=12)


def _values() -> st.SearchStrategy[bytes]:
    return st.sampled_from([b"", b"\x00" * 8, b"v" * 127, b"v" * 128, b"v" * 20_000]) | \
        st.binary(max_size=40)


def neutral_mutations() -> st.SearchStrategy[Any]:
    """Any neutral mutation, edge values included (empty qualifier and value, int64
    edges and beyond, negative times, non-ASCII names, long values)."""
    from tsmodel.backends.base import AddToCell, DeleteCells, DeleteFamily, DeleteRow, SetCell

    optional_times = st.none() | _times()
    return st.one_of(
        st.builds(SetCell, _families(), _qualifiers(), _times(), _values()),
        st.builds(AddToCell, _families(), _qualifiers(), _times(),
                  st.integers(-(2**63), 2**63 - 1) | st.sampled_from([2**63, -(2**63) - 1])),
        st.builds(DeleteCells, _families(), _qualifiers(), optional_times, optional_times),
        st.builds(DeleteFamily, _families()),
        st.just(DeleteRow()),
    )


def row_mutations() -> st.SearchStrategy[Any]:
    """An entry of a bulk write: a key (empty and over 4 KB among them) and 0-6 mutations."""
    from tsmodel.backends.base import RowMutation

    keys = st.sampled_from([b"", b"k", b"\xff" * 4096, b"x" * 4097, "é".encode()]) | \
        st.binary(min_size=1, max_size=20)
    return st.builds(RowMutation, keys,
                     st.lists(neutral_mutations(), max_size=6).map(tuple))


# -- ReadRows response streams (tests/unit/test_chunk_wire.py) ------------------------------

#: Unknown fields as protobuf writes them, one of each wire type (field numbers the
#: messages do not declare; a known number under another wire type is unknown too).
_UNKNOWN_FIELDS = (
    b"\x78\x05",  # field 15, a varint
    b"\xf8\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # field 31, a ten-byte varint
    b"\x79" + bytes(8),  # field 15, fixed64
    b"\x7d" + bytes(4),  # field 15, fixed32
    b"\x7a\x03abc",  # field 15, length-delimited
    b"\x7b\x08\x01\x7c",  # field 15, a group holding a varint
    b"\x08\x07",  # field 1 as a varint: not the bytes field 1 is
)
#: Timestamps whose varints take every width from one byte to ten (negative).
_TIMESTAMPS = st.one_of(
    st.integers(0, 62).flatmap(lambda bits: st.integers(2 ** bits // 2, 2 ** bits)),
    st.integers(-(2 ** 63), -1), st.sampled_from([0, 1, 127, 128, 2 ** 63 - 1]))


@st.composite
def _cell_chunks(draw: st.DrawFn) -> list[dict[str, Any]]:
    """The chunks of one row as Bigtable sends them (family and qualifier only when they
    change, values split over chunks), then perturbed: fields dropped or added, commits
    and resets moved, labels; as field dicts for ``ReadRowsResponse.CellChunk``."""
    key = draw(st.sampled_from([b"a", b"b", b"k" * 200, b"r\x00w", b"z"]))
    chunks: list[dict[str, Any]] = []
    family, qualifier = None, None
    for _ in range(draw(st.integers(0, 4))):
        new_family = draw(st.sampled_from(["f", "g", "", "\u00e9t\u00e9"]))
        new_qualifier = draw(st.sampled_from([b"q", b"", b"r" * 130, b"\xff"]))
        value = draw(st.binary(max_size=20) | st.sampled_from([b"v" * 200, b"w" * 17000]))
        chunk: dict[str, Any] = {"timestamp_micros": draw(_TIMESTAMPS)}
        if not chunks:
            chunk["row_key"] = key
        if new_family != family or not chunks:
            chunk["family_name"] = new_family
            family = new_family
        if new_qualifier != qualifier or "family_name" in chunk:
            chunk["qualifier"] = new_qualifier
            qualifier = new_qualifier
        if draw(st.booleans()):
            chunk["labels"] = draw(st.lists(st.sampled_from(["l", "m", "\u2603"]), max_size=2))
        pieces = draw(st.integers(1, 3)) if len(value) > 1 else 1
        cut = [len(value) * i // pieces for i in range(pieces + 1)]
        for i in range(pieces):
            piece = dict(chunk) if i == 0 else {}
            piece["value"] = value[cut[i]:cut[i + 1]]
            if i < pieces - 1:
                piece["value_size"] = len(value)
            chunks.append(piece)
    if chunks:
        chunks[-1]["commit_row"] = True
    for _ in range(draw(st.integers(0, 2))):  # the protocol broken, or stretched
        if not chunks:
            break
        at = draw(st.integers(0, len(chunks) - 1))
        change = draw(st.sampled_from([
            "drop_key", "drop_family", "drop_qualifier", "commit", "uncommit", "reset",
            "value_size", "another_key"]))
        chunk = chunks[at]
        if change == "drop_key":
            chunk.pop("row_key", None)
        elif change == "drop_family":
            chunk.pop("family_name", None)
        elif change == "drop_qualifier":
            chunk.pop("qualifier", None)
        elif change == "commit":
            chunk["commit_row"] = True
        elif change == "uncommit":
            chunk.pop("commit_row", None)
        elif change == "reset":
            chunks.insert(at, {"reset_row": True} if draw(st.booleans()) else
                          {"reset_row": True, "value": b"x"})
        elif change == "value_size":
            chunk["value_size"] = draw(st.integers(-(2 ** 31), 2 ** 31 - 1))
        else:
            chunk["row_key"] = draw(st.sampled_from([b"a", b"c", b"y"]))
    return chunks


@st.composite
def read_rows_streams(draw: st.DrawFn) -> list[bytes]:
    """A ReadRows stream: ``ReadRowsResponse`` messages built with the protobuf classes
    of google-cloud-bigtable and serialized, each holding some chunks of rows (of
    `_cell_chunks`), or a ``last_scanned_row_key``, with unknown fields added to
    responses, chunks and wrapper messages (bytes the classes parse back as
    unknown fields)."""
    from google.cloud.bigtable_v2.types import ReadRowsResponse
    from google.protobuf import wrappers_pb2

    response_class: Any = ReadRowsResponse.pb()
    chunk_class: Any = ReadRowsResponse.CellChunk.pb()
    unknown = st.sampled_from(_UNKNOWN_FIELDS)
    chunks = [c for rows in draw(st.lists(_cell_chunks(), max_size=4)) for c in rows]
    out: list[bytes] = []
    while chunks or not out:
        take = draw(st.integers(0, 3))
        group, chunks = chunks[:take], chunks[take:]
        response = response_class()
        for fields in group:
            wrappers = {}
            if "family_name" in fields:
                wrappers["family_name"] = wrappers_pb2.StringValue(value=fields["family_name"])
            if "qualifier" in fields:
                wrappers["qualifier"] = wrappers_pb2.BytesValue(value=fields["qualifier"])
            chunk = chunk_class(**{k: v for k, v in fields.items() if k not in wrappers})
            for name, wrapper in wrappers.items():
                extra = draw(unknown) if draw(st.integers(0, 4)) == 0 else b""
                getattr(chunk, name).MergeFromString(wrapper.SerializeToString() + extra)
                chunk.HasField(name) or getattr(chunk, name).SetInParent()
            if draw(st.integers(0, 4)) == 0:
                chunk.MergeFromString(draw(unknown))
            response.chunks.append(chunk)
        if draw(st.integers(0, 5)) == 0:
            response.last_scanned_row_key = draw(st.sampled_from([b"a", b"m", b"zz"]))
        data = response.SerializeToString()
        if draw(st.integers(0, 4)) == 0:
            data += draw(unknown)
        out.append(data)
    return out
