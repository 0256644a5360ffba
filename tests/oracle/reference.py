"""The reference model: what each table must hold and what each query must answer.

Pure Python, built from the documented semantics only (docs/queries.md,
docs/writes.md, docs/companions.md, docs/patterns.md, docs/row-keys.md) and a
hand-written :class:`~tests.oracle.shapes.Shape`; no line of it calls
tsmodel. Events go in, tables and answers come out:

* an event is identified by its key fields and its event time; saving the
  same identity again replaces the event (a correction), whatever the order
  of arrival;
* ``range(start, end, **fields)`` holds the events with ``start <= time <
  end`` whose fields match, read from the table the documented rule picks
  (every field given a key prefix; time in the key first, then the main
  table), in that table's row-key order; salted reads that reach the time
  are merged by event time;
* ``latest(**key)`` is the entity's event with the greatest event time (full
  precision), ``latest(as_of=t, **key)`` the greatest at or before ``t`` of
  those reads return, ``current(**prefix)`` the newest event of each entity in key
  order;
* bucket rows keep ``max_versions`` versions per column, and reads answer
  as if garbage collection had run: an event a version limit drops is
  missing, never half-filled (:meth:`Reference.visible`), and gone for
  good: deleting the newer events later does not bring it back
  (:meth:`Reference.save`);
* a current-value row holds exactly the newest event's cells, whatever the
  order of arrival (:meth:`Reference.current_row_problem`); row keys are
  encoded as docs/row-keys.md prints them.

Where the docs leave a semantic open, the choice made here says so.
"""

from __future__ import annotations

import struct
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

from tests.oracle.shapes import DAY, MS, Seg, Shape

__all__ = ["Ev", "Answer", "Reference", "Refused", "dt_of", "iso"]

UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dt_of(us: int) -> datetime:
    """The UTC datetime of epoch microseconds."""
    return _EPOCH + timedelta(microseconds=us)


def iso(us: int) -> str:
    return dt_of(us).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Ev:
    """One event: key field values, event time (µs) and value fields.

    ``zone`` is the UTC offset (minutes) the event's time is given in when
    saved; it never changes the instant and takes no part in equality.
    """

    keys: tuple[tuple[str, Any], ...]
    t: int
    values: tuple[tuple[str, Any], ...]
    zone: int = field(default=0, compare=False)

    @property
    def identity(self) -> tuple[tuple[tuple[str, Any], ...], int]:
        return self.keys, self.t

    @property
    def entity(self) -> tuple[tuple[str, Any], ...]:
        return self.keys

    def get(self, name: str) -> Any:
        if name == "time":
            return self.t
        for k, v in self.keys:
            if k == name:
                return v
        for k, v in self.values:
            if k == name:
                return v
        raise KeyError(name)

    def fields(self) -> dict[str, Any]:
        return {**dict(self.keys), "time": self.t, **dict(self.values)}

    def strict(self) -> tuple[Any, ...]:
        """A comparison key that tells 1 from True and 0.0 from -0.0."""
        return (tuple((k, type(v).__name__, repr(v)) for k, v in self.keys), self.t,
                tuple((k, type(v).__name__, repr(v)) for k, v in self.values))

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def __repr__(self) -> str:
        when = iso(self.t) + (f"@{self.zone:+d}min" if self.zone else "")
        shown = [f"{k}={v!r}" for k, v in self.keys] + [f"time={when}"]
        shown += [f"{k}={v!r}" for k, v in self.values]
        return f"Ev({', '.join(shown)})"


class Refused(Exception):
    """The query must raise: ``kind`` names the tsmodel exception class."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True)
class Answer:
    """The events a query must return, in order."""

    events: tuple[Ev, ...]

    def problem(self, got: Sequence[Ev], limit: int | None = None) -> str | None:
        """Why ``got`` is not this answer (under ``limit``), or ``None``."""
        want = [e.strict() for e in self.events]
        if limit is not None:
            want = want[:limit]
        return None if [e.strict() for e in got] == want else "differs"

    def count_problem(self, n: int, limit: int | None = None) -> str | None:
        want = len(self.events) if limit is None else min(len(self.events), limit)
        return None if n == want else f"count {n}, expected {want}"


@dataclass(frozen=True)
class _Table:
    """One table of the shape as the reference orders it."""

    index: int  # 0: the main table, 1...: the alternates
    segs: tuple[Seg, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.field for s in self.segs if s.kind not in ("const", "salt")
                     and s.field is not None)

    @property
    def salt(self) -> Seg | None:
        return next((s for s in self.segs if s.kind == "salt"), None)


class Reference:
    """What the tables of one shape hold after the saves so far."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.events: dict[Any, Ev] = {}
        self.snapshots: dict[int, tuple[Ev, ...]] = {}
        self.tables = tuple(_Table(i, segs) for i, segs in
                            enumerate((shape.key, *shape.alternates)))
        #: The current-value rows as written: entity -> column -> {timestamp: value}.
        self.current_cells: dict[Any, dict[bytes, dict[int, bytes]]] = {}
        #: Entities whose current row a repair may have rewritten (see current_row_problem).
        self.repaired: set[Any] = set()

    # -- writes ---------------------------------------------------------------------

    def save(self, events: Sequence[Ev], batch_size: int = 1000) -> None:
        """Saving an identity again replaces the event: a correction.

        docs/writes.md: ``save_all`` writes batches of ``batch_size``; per
        batch, the events of one current-value row "collapse into one write
        of the newest".

        docs/deleting.md "Version limits": an event that a batch pushes past
        the version limit of a bucket row's column is gone for good, whether
        garbage collection ran or not: a later delete of the newer events (or
        a correction moving one to another column) does not bring it back.
        """
        for at in range(0, len(events), batch_size):
            batch = events[at:at + batch_size]
            newest: dict[Any, Ev] = {}
            for e in batch:
                self.events[e.identity] = e
                if e.entity not in newest or e.t > newest[e.entity].t:
                    newest[e.entity] = e
            kept = {e.identity for e in self.visible()}
            for identity in [i for i in self.events if i not in kept]:
                del self.events[identity]  # past the limit: gone for good
            if self.shape.current:
                for e in newest.values():
                    self._write_current(e)

    def _write_current(self, e: Ev) -> None:
        """One current-row write (docs/writes.md "Optional values").

        A value writes its cell at the event's cell timestamp; ``None``
        deletes the column's versions up to the event's millisecond ("in a
        row that holds one event ... it deletes every older version of the
        column too"). An event with a value of an optional field is written
        only if the row holds no newer cell (docs/writes.md "The current-value
        table": "a late, older event ... is not written there"), so that the
        row holds exactly the newest event's cells.
        """
        row = self.current_cells.setdefault(e.entity, {})
        ts = self.current_timestamp(e.t)
        if not self.shape.serialized and any(
                v.optional and e.get(v.name) is not None for v in self.shape.values) and any(
                t > ts for column in row.values() for t in column):
            return
        for v in self.shape.values:
            column = row.setdefault(v.qualifier.encode(), {})
            value = e.get(v.name)
            if value is None:
                for old in [t for t in column if t <= ts]:
                    del column[old]
            else:
                column[ts] = encode_value(v.kind, value)
        if e.t == self.newest_by_entity()[e.entity].t:
            self.repaired.discard(e.entity)  # every older version of a None column is gone

    def delete(self, events: Sequence[Ev], batch_size: int = 1000) -> None:
        """docs/deleting.md: each event's cells go from every table, snapshots too.

        Per batch: the events leave the main table (an event past a version
        limit was gone already, see :meth:`save`); each one's cells leave its
        current-value row (every column at its cell timestamp); where the row
        showed one of them (its newest timestamp), every cell newer than the
        entity's newest remaining event, up to the deleted ones, goes, and the
        row is written with that event, as a save writes it, or left empty.
        """
        gone = {e.identity for e in events}
        for day, held in self.snapshots.items():  # its snapshot rows go too
            self.snapshots[day] = tuple(e for e in held if e.identity not in gone)
        for at in range(0, len(events), batch_size):
            batch = events[at:at + batch_size]
            shown = {e.entity: self._shown(e.entity) for e in batch}
            for e in batch:
                self.events.pop(e.identity, None)
            if not self.shape.current:
                continue
            for e in batch:
                ts = self.current_timestamp(e.t)
                for column in self.current_cells.get(e.entity, {}).values():
                    column.pop(ts, None)
            newest = self.newest_by_entity()
            for entity in {e.entity for e in batch
                           if shown[e.entity] == self.current_timestamp(e.t)}:
                # Rewritten: no cell newer than the newest remaining event, up to the
                # deleted ones, stays (an event gone past a version limit left some).
                top = max(self.current_timestamp(e.t) for e in batch if e.entity == entity)
                low = self.current_timestamp(newest[entity].t) if entity in newest else -1
                for column in self.current_cells.get(entity, {}).values():
                    for t in [t for t in column if low < t <= top]:
                        del column[t]
                if entity in newest:
                    self._write_current(newest[entity])

    def _shown(self, entity: Any) -> int | None:
        """The cell timestamp of the event a current-value row shows (its newest)."""
        times = [t for column in self.current_cells.get(entity, {}).values() for t in column]
        return max(times, default=None)

    def saved(self) -> list[Ev]:
        return list(self.events.values())

    # -- time -----------------------------------------------------------------------

    def bucket_start(self, t: int) -> int:
        size = self.shape.time.bucket
        return t - t % size

    # -- which table a range reads ----------------------------------------------------

    def choose(self, given: frozenset[str], allow_scan: bool) -> tuple[_Table, bool, bool]:
        """The table a range query reads, whether it reaches the time, whether it scans.

        docs/companions.md: "A query reads the table whose key uses every
        field given as a prefix, preferring one with the time range in the
        key, then the main table"; docs/queries.md: no prefix at all refuses
        with ScanRefusedError unless allow_scan=True, which scans the main
        table and checks the fields on decoded rows.
        """
        best: tuple[tuple[bool, bool], _Table] | None = None
        for table in self.tables:
            names = table.names
            n = len(given)
            head = names[:n]
            if set(head) != given or "time" in head:
                continue
            reaches = names[n] == "time"
            if not given and not reaches:
                continue  # no key field narrows the key
            score = (reaches, table.index == 0)
            if best is None or score > best[0]:
                best = (score, table)
        if best is not None:
            return best[1], best[0][0], False
        if not allow_scan:
            raise Refused("ScanRefusedError")
        return self.tables[0], False, True

    # -- orders ---------------------------------------------------------------------

    def salt_of(self, seg: Seg, e: Ev) -> int:
        """docs/row-keys.md: crc32 of the encoded segment of the ``on`` field, mod N."""
        on = next(s for s in self.shape.key if s.field == seg.on)
        return zlib.crc32(self.encode_seg(on, e)) % seg.buckets

    def row_order(self, table: _Table, e: Ev) -> tuple[Any, ...]:
        """Row-key order of ``table``: segments in turn (key order is value order)."""
        parts: list[Any] = []
        for seg in table.segs:
            if seg.kind == "const":
                continue
            if seg.kind == "salt":
                parts.append(self.salt_of(seg, e))
            elif seg.kind == "time":
                if self.shape.bucketed:
                    parts.append(self.bucket_start(e.t))
                else:
                    parts.append(-e.t if self.shape.time.reverse else e.t)
            else:
                parts.append(e.get(seg.field or ""))
        if self.shape.bucketed:
            parts.append(e.t)  # a bucket row's events, oldest first
        return tuple(parts)

    # -- queries --------------------------------------------------------------------

    def range(self, start: int, end: int, fields: dict[str, Any], *, allow_scan: bool = False,
              newest_first: bool = False) -> Answer:
        """docs/queries.md "Time ranges", "Key-field prefixes", "Newest first", "Salted models"."""
        if start > end:
            raise Refused("QueryError")
        table, reaches, _ = self.choose(frozenset(fields), allow_scan)
        salt = table.salt
        merged = (salt is not None and reaches
                  and not all(name in fields for name in (salt.on,)))
        found = [e for e in self.visible() if start <= e.t < end
                 and all(e.get(k) == v for k, v in fields.items())]
        if merged:  # one read per salt, merged by event time
            found.sort(key=lambda e: e.t)
        else:
            found.sort(key=lambda e: self.row_order(table, e))
        if newest_first:
            if table.index == 0 and self.shape.time.reverse:
                pass  # "newest_first() changes nothing" on a reversed timestamp
            elif merged:
                found.sort(key=lambda e: -e.t)
            else:
                found.reverse()  # "reverse row-key order"
        return Answer(tuple(found))

    def current_key(self) -> tuple[str, ...]:
        return self.shape.key_fields

    def current(self, fields: dict[str, Any], *, allow_scan: bool = False) -> Answer:
        """The newest event of each entity under a key prefix, in key order.

        docs/queries.md: "current() without arguments reads the whole
        current-value table ... it is not refused as a scan"; other fields
        must form a prefix of the key (the scan rule otherwise).
        """
        names = self.current_key()
        head = names[:len(fields)]
        if set(head) != set(fields) and not allow_scan:
            raise Refused("ScanRefusedError")
        newest = self.newest_by_entity()
        found = [e for e in newest.values() if all(e.get(k) == v for k, v in fields.items())]
        found.sort(key=lambda e: tuple(e.get(n) for n in names))
        return Answer(tuple(found))

    def newest_by_entity(self) -> dict[Any, Ev]:
        newest: dict[Any, Ev] = {}
        for e in self.events.values():
            if e.entity not in newest or e.t > newest[e.entity].t:
                newest[e.entity] = e
        return newest

    def latest(self, key: dict[str, Any]) -> Ev:
        """docs/queries.md "Latest values": the newest event, or DoesNotExist."""
        entity = tuple((n, key[n]) for n in self.shape.key_fields)
        found = self.newest_by_entity().get(entity)
        if found is None:
            raise Refused("DoesNotExist")
        return found

    def latest_as_of(self, key: dict[str, Any], as_of: int) -> Ev:
        """docs/queries.md "As of a time": the entity's newest event at or before
        ``as_of`` among those reads return, or DoesNotExist."""
        entity = tuple((n, key[n]) for n in self.shape.key_fields)
        found = [e for e in self.visible() if e.entity == entity and e.t <= as_of]
        if not found:
            raise Refused("DoesNotExist")
        return max(found, key=lambda e: e.t)

    # -- snapshots and repair -------------------------------------------------------

    def build_snapshot(self, period: int, restart: bool) -> tuple[int, bool]:
        """docs/companions.md "Snapshot tables": the events written, and "already complete".

        A period built once is complete; building it again writes nothing
        unless ``restart`` (which copies the whole period again).
        """
        day = period - period % DAY
        if day in self.snapshots and not restart:
            return 0, True
        held = [e for e in self.visible() if day <= e.t < day + DAY]
        held.sort(key=lambda e: self.row_order(self.tables[0], e))
        self.snapshots[day] = tuple(held)
        return len(held), False

    def snapshot(self, period: int, fields: dict[str, Any]) -> Answer:
        day = period - period % DAY
        held = self.snapshots[day]
        return Answer(tuple(e for e in held if all(e.get(k) == v for k, v in fields.items())))

    def repair_events(self, start: int, end: int, fields: dict[str, Any]) -> Answer:
        """The main-table events a repair of [start, end) replays (docs/companions.md).

        "ts.repair over the event's time rewrites the row" (docs/writes.md):
        the current rows of the entities it covers may be rewritten clean.
        """
        found = [e for e in self.visible() if start <= e.t < end
                 and all(e.get(k) == v for k, v in fields.items())]
        self.repaired |= {e.entity for e in self.events.values()
                          if all(e.get(k) == v for k, v in fields.items())}
        return Answer(tuple(found))

    # -- version limits -------------------------------------------------------------

    def _columns_of(self, e: Ev) -> list[Any]:
        """The columns of a bucket row an event writes a cell version in."""
        layout = self.shape.layout
        if layout == "columns":
            (value,) = self.shape.values
            return [("column", e.get(value.name))]
        if self.shape.serialized:
            return ["blob"]
        return [v.name for v in self.shape.values if e.get(v.name) is not None]

    def visible(self) -> list[Ev]:
        """The events reads return: those a bucket row's version limit keeps.

        docs/patterns.md: reads apply the version limit as a read filter,
        "every backend answers as the embedded store does once garbage
        collection has run": a column keeps its newest ``max_versions``
        versions, and "an event whose required value's cell went past the
        limit ... is left out, never returned half-filled". An event whose
        every cell is kept is read whole. With every value optional (ts.cells()),
        an event older than the oldest version a column keeps at the limit is
        left out. (:meth:`save` forgets the others at
        once: they never come back.)
        """
        limit = self.shape.max_versions
        events = list(self.events.values())
        if limit is None or self.shape.layout not in ("cells", "columns"):
            return events
        versions: dict[Any, list[int]] = defaultdict(list)
        for e in events:
            for col in self._columns_of(e) or [""]:  # "": the marker of an event of no value
                versions[(e.entity, self.bucket_start(e.t), col)].append(e.t)
        if self.shape.layout == "cells" and not self.shape.serialized and all(
                v.optional for v in self.shape.values):
            # No column holds every event: one older than the oldest version a
            # column keeps at the limit may have lost its cell there, and nothing
            # tells; it is left out (docs/patterns.md).
            cut: dict[Any, int] = defaultdict(int)
            for (entity, start, _), ts in versions.items():
                if len(ts) >= limit:
                    cut[(entity, start)] = max(cut[(entity, start)],
                                               sorted(ts, reverse=True)[limit - 1])
            return [e for e in events if e.t >= cut[(e.entity, self.bucket_start(e.t))]]
        kept = {k: set(sorted(ts, reverse=True)[:limit]) for k, ts in versions.items()}
        return [e for e in events if all(e.t in kept[(e.entity, self.bucket_start(e.t), col)]
                                         for col in self._columns_of(e))]

    # -- rollups ----------------------------------------------------------------------

    def rollup_fields(self) -> list[str]:
        """docs/rollups.md: by default every int and float value field."""
        return [v.name for v in self.shape.values if v.kind in ("int", "float")]

    def buckets(self, events: Iterable[Ev], every: int) -> dict[Any, dict[str, Any]]:
        """Per (entity key values, bucket start): ``count`` and per number field its
        ``count``, exact ``sum``, ``min``, ``max`` and ``last`` (of the newest
        event with a value); buckets start at multiples of ``every``."""
        groups: dict[Any, list[Ev]] = defaultdict(list)
        for e in events:
            groups[(tuple(v for _, v in e.keys), e.t - e.t % every)].append(e)
        out = {}
        for slot, members in groups.items():
            row: dict[str, Any] = {"count": len(members)}
            for name in self.rollup_fields():
                have = [(e.t, e.get(name)) for e in sorted(members, key=lambda e: e.t)
                        if e.get(name) is not None]
                vals = [v for _, v in have]
                row[name] = (len(vals), _exact_sum(vals) if vals else None,
                             min(vals) if vals else None, max(vals) if vals else None,
                             vals[-1] if vals else None)
            out[slot] = row
        return out

    def rollup(self, every: int) -> dict[Any, dict[str, Any]]:
        """What the rollup table of bucket size ``every`` holds: the stored events' buckets,
        but none older than the rollup's retention (docs/rollups.md: "A bucket older
        than it has no row")."""
        rows = self.buckets(self.visible(), every)
        keep = self.shape.rollup_retention
        if keep is None:
            return rows
        horizon = (datetime.now(UTC) - _EPOCH) // timedelta(microseconds=1) - keep
        return {slot: row for slot, row in rows.items() if slot[1] >= horizon}

    # -- raw tables -----------------------------------------------------------------

    def encode_seg(self, seg: Seg, e: Ev) -> bytes:
        """A key segment, encoded as docs/row-keys.md shows."""
        if seg.kind == "const":
            return seg.text.encode()
        if seg.kind == "salt":
            digits = len(str(seg.buckets - 1))
            return str(self.salt_of(seg, e)).zfill(digits).encode()
        if seg.kind == "time":
            return self.encode_time(e.t)
        value = e.get(seg.field or "")
        if seg.kind == "str":
            return str(value).encode()
        if seg.kind == "fstr":
            return str(value).ljust(seg.width).encode()
        if seg.kind == "int":
            return str(value).zfill(seg.width).encode()
        raise AssertionError(seg.kind)

    def encode_time(self, t: int) -> bytes:
        tm = self.shape.time
        if tm.kind == "epoch":
            n = t // tm.precision
            if tm.reverse:
                n = 10**tm.digits - 1 - n
            return str(n).zfill(tm.digits).encode()
        if tm.kind == "format":
            text = dt_of(t).strftime(tm.fmt)
            if tm.millis:
                text += f"{t // MS % 1000:03d}"
            return text.encode()
        return dt_of(self.bucket_start(t)).strftime(tm.label).encode()

    def key_of(self, segs: Iterable[Seg], e: Ev) -> bytes:
        return b"#".join(self.encode_seg(s, e) for s in segs)

    def table_keys(self, index: int) -> set[bytes]:
        """Row keys of the main table (0) or an alternate (1...)."""
        segs = self.tables[index].segs
        return {self.key_of(segs, e) for e in self.events.values()}

    def snapshot_keys(self, day: int) -> set[bytes]:
        return {self.key_of(self.shape.key, e) for e in self.snapshots[day]}

    def current_segs(self) -> tuple[Seg, ...]:
        """docs/writes.md: the row key without the timestamp and the salt."""
        return tuple(s for s in self.shape.key if s.kind not in ("salt", "time"))

    def current_keys(self) -> set[bytes]:
        return {self.key_of(self.current_segs(), e) for e in self.newest_by_entity().values()}

    def value_cells(self, e: Ev) -> set[tuple[str, bytes, int, bytes]]:
        """A main-table event's cells, a column per value field (docs/writes.md).

        ``None`` writes no cell; every cell carries the event time in whole
        milliseconds, as microseconds.
        """
        ts = e.t // MS * MS
        return {(self.shape.family, v.qualifier.encode(), ts, encode_value(v.kind, e.get(v.name)))
                for v in self.shape.values if e.get(v.name) is not None}

    def current_timestamp(self, t: int) -> int:
        """docs/writes.md "Microsecond models": µs x 1000 for unit="us", else whole ms."""
        return t * 1000 if self.shape.time.precision < MS else t // MS * MS

    def current_rows(self) -> dict[bytes, dict[bytes, tuple[int, bytes]]]:
        """Each current-value row as a reader sees it: the newest version per column."""
        out = {}
        for e in self.newest_by_entity().values():
            row = self.current_cells.get(e.entity, {})
            out[self.key_of(self.current_segs(), e)] = {
                q: max(column.items()) for q, column in row.items() if column}
        return out

    def current_row_problem(self, key: bytes, got: dict[bytes, tuple[int, bytes]]) -> str | None:
        """Why a current row read with one version per column is wrong, or ``None``.

        The row holds the newest event's cells, and no other (a late older
        event is not written where a newer one stands). After a repair
        covering the entity the row is rewritten with the newest event's
        cells: until its newest event is written again, a ``None`` column may
        hold what the cells written say.
        """
        want = self.current_rows()[key]
        if got == want:
            return None
        entity = next(e.entity for e in self.newest_by_entity().values()
                      if self.key_of(self.current_segs(), e) == key)
        if entity in self.repaired:
            newest = self.newest_by_entity()[entity]
            ts = self.current_timestamp(newest.t)
            exact = {q: (ts, v) for _, q, _, v in
                     ((None, v.qualifier.encode(), None, encode_value(v.kind, newest.get(v.name)))
                      for v in self.shape.values if newest.get(v.name) is not None)}
            written = self.current_cells.get(entity, {})
            if all(got.get(q) == cell for q, cell in exact.items()) and all(
                    q in exact or cell[1] == written.get(q, {}).get(cell[0])
                    for q, cell in got.items()):
                return None
        return f"row {key!r}: {got!r}, expected {want!r}"

    def main_rows(self) -> dict[bytes, set[tuple[str, bytes, int, bytes]]]:
        """Each main-table row of a row-per-event shape: its event's cells."""
        return {self.key_of(self.shape.key, e): self.value_cells(e) for e in self.events.values()}


def encode_value(kind: str, value: Any) -> bytes:
    """docs/writes.md "How an event becomes cells": Int64, Float64, Utf8, Bool."""
    if kind == "int":
        return struct.pack(">q", value)
    if kind == "float":
        return struct.pack(">d", value)
    if kind == "str":
        return str(value).encode("utf-8")
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    raise AssertionError(kind)


def _exact_sum(values: list[Any]) -> Any:
    """docs/rollups.md: an int field's exact sum; a float field's correctly rounded sum
    (the exact sum of the values, rounded once), infinities as IEEE adds them."""
    if all(type(v) is int for v in values):
        return sum(values)
    floats = [float(v) for v in values]
    if any(v != v for v in floats) or (float("inf") in floats and float("-inf") in floats):
        return float("nan")
    for inf in (float("inf"), float("-inf")):
        if inf in floats:
            return inf
    total = sum((Fraction(v) for v in floats), Fraction(0))
    try:
        return float(total)
    except OverflowError:
        return float("inf") if total > 0 else float("-inf")
