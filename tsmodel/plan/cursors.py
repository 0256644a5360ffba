"""Cursors: where a read stands, and the opaque token that carries it. Pure.

A read plan's answer is a fold of its requests' streams
(`ReadMerge`), and what of it has been handed
out is, for each stream, a prefix of that stream. A `Position` says
where each prefix ends: after one event of one row (a `Mark`: the
row key, the event's time, and which event of that time in the row). A read
resumes from a position by re-reading each stream from its mark's row
(`resume_request()`) and leaving out what came up to the mark; the
merge of those suffixes is exactly the rest of the answer. The iterator's
own resume after a broken stream and a web API's next page are the same
thing: a position.

A `CursorCodec` turns a position into a token and back: URL-safe
base64 of a versioned binary record, bound to the query it came from (a
digest of the model, the table, the requests' row ranges, the time window,
the order and the fields read), closed by an HMAC-SHA256 tag when the
connection has a ``cursor_secret``, else by a BLAKE2b checksum.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import zlib
from typing import Any, Generic, TypeVar

import attrs

from tsmodel import errors
from tsmodel.ground.base import ReadRequest, RowRange, RowSet
from tsmodel.plan.reads import QueryState, ReadPlan

__all__ = ["Mark", "Position", "Page", "CursorCodec", "resume_request", "cursor_codec",
           "cursor_problem", "secret_bytes", "FORMAT"]

M = TypeVar("M")

#: The token format written; a token of another format is refused.
FORMAT = 1
#: A token whose first byte is above this (or 0) is no format tsmodel ever wrote.
_LAST_PLAUSIBLE_FORMAT = 15
_SIGNED, _COMPRESSED = 1, 2
_DIGEST = 16  # bytes of the query's digest
_HMAC_TAG = 16  # bytes of HMAC-SHA256 kept
_CHECKSUM = 8  # bytes of the BLAKE2b checksum of an unsigned token
#: The shortest secret accepted (bytes).
MIN_SECRET = 16


@attrs.frozen
class Mark:
    """Where one stream stands: just after one event of one row.

    Attributes:
        row_key: the row the event came from.
        time_us: the event's time (µs).
        seen: which event of that time in the row, counted in the row's
            order from 1 (a bucket row may hold several events at one
            time; a row read with ``history()``, each version).
    """

    row_key: bytes
    time_us: int
    seen: int = 1


@attrs.frozen
class Position:
    """Where a read stands: what of each of its plan's requests was handed out.

    Attributes:
        emitted: the instances handed out since the query's start (a
            ``limit()`` counts from there).
        done: the requests numbered below it are read to their end (streams
            read one after the other).
        last: the request whose event was handed out last (streams merged
            by time), or ``None``.
        marks: ``(request number, mark)`` of each request read in part.
    """

    emitted: int = 0
    done: int = 0
    last: int | None = None
    marks: tuple[tuple[int, Mark], ...] = ()

    def mark(self, request: int) -> Mark | None:
        """The mark of one request, or ``None``: read it from its start."""
        return next((m for j, m in self.marks if j == request), None)


@attrs.frozen
class Page(Generic[M]):
    """One page of a query: its instances and the token of the next page.

    Attributes:
        items: the instances, in the query's order.
        next: the token that re-opens the query after the last of ``items``
            (``qs.page(size, after=page.next)``), or ``None``: the query has
            no more instances (as of this read).
    """

    items: list[M]
    next: str | None

    def __iter__(self) -> Any:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def resume_request(request: ReadRequest, mark: Mark | None,
                   remaining: int | None) -> ReadRequest | None:
    """``request`` narrowed to start at ``mark``'s row (kept: more of it may follow).

    The row set is intersected with the keys from the mark's row on (down to
    it, for a reversed read), so a resumed read never leaves the rows the
    query selects, whatever a token says. A row limit shrinks to the rows
    still wanted, plus the mark's row read again.

    Returns:
        The narrowed request, or ``None`` when no row of it is left to read.
    """
    limit = request.limit
    if limit and remaining is not None:
        limit = max(1, min(limit, remaining + (mark is not None)))
    if mark is None:
        return request if limit == request.limit else attrs.evolve(request, limit=limit)
    rows = _from_key(request.rows, mark.row_key, request.reverse)
    if rows is None:
        return None
    return attrs.evolve(request, rows=rows, limit=limit)


def _from_key(rows: RowSet, key: bytes, reverse: bool) -> RowSet | None:
    """``rows`` from ``key`` on (``key`` and below, ``reverse``); ``None`` if empty."""
    after = key + b"\x00"  # the first key after ``key``
    if rows.is_whole_table():
        return RowSet(ranges=(RowRange(None, after) if reverse else RowRange(key, None),))
    keys = tuple(k for k in rows.keys if (k <= key if reverse else k >= key))
    ranges = []
    for r in rows.ranges:
        if reverse:
            end = after if r.end is None else min(r.end, after)
            cut = RowRange(r.start, end)
        else:
            cut = RowRange(key if r.start is None else max(r.start, key), r.end)
        if not cut.is_empty():
            ranges.append(cut)
    if not keys and not ranges:
        return None
    return RowSet(keys=keys, ranges=tuple(ranges))


def cursor_problem(plan: ReadPlan) -> str | None:
    """Why ``plan`` cannot hand out cursors, or ``None`` (a plan that reads nothing can)."""
    if not plan.requests:
        return None
    if plan.merge == "sort":
        return ("its bucket labels do not sort, so its events are sorted in memory after "
                "every row is read: no position in the table stands for a point of the answer")
    if plan.reverse_after:
        return ("it is read oldest first and reversed in memory (the backend has no reverse "
                "scans): no position in the table stands for a point of the answer")
    return None


def cursor_codec(plan: ReadPlan, state: QueryState,
                 secret: bytes | None = None) -> CursorCodec:
    """The codec of the tokens of one query (``plan`` compiled from ``state``)."""
    return CursorCodec(plan.model, _digest(plan, state), len(plan.requests), secret,
                       cursor_problem(plan))


def _digest(plan: ReadPlan, state: QueryState) -> bytes:
    """What binds a token to its query: a digest of everything that decides the
    answer's rows and order (never of the limit, nor of the clock)."""
    described = [
        FORMAT, plan.model, plan.table, state.mode, state.start_us, state.end_us,
        state.snapshot_us, state.newest_first, state.history,
        None if state.only is None else sorted(state.only),
        list(plan.client_filters), plan.merge, plan.descending,
        [[r.table, [k.hex() for k in r.rows.keys],
          [[_hex(g.start), _hex(g.end)] for g in r.rows.ranges], r.reverse,
          repr(r.filter)]  # its server-side conditions (value ranges...) too
         for r in plan.requests],
    ]
    text = json.dumps(described, separators=(",", ":"), default=repr)
    return hashlib.blake2b(text.encode(), digest_size=_DIGEST).digest()


def _hex(key: bytes | None) -> str | None:
    return None if key is None else key.hex()


@attrs.frozen
class CursorCodec:
    """Tokens of one query: `encode()` a position, `decode()` a token.

    Attributes:
        model: the model name, for messages.
        digest: the query's digest (see `cursor_codec()`).
        requests: how many requests the query's plan reads.
        secret: the HMAC key, or ``None``: tokens carry a checksum only.
        problem: why the query hands out no cursors, or ``None``.
    """

    model: str
    digest: bytes
    requests: int
    secret: bytes | None = attrs.field(default=None, repr=False)
    problem: str | None = None

    def check(self) -> None:
        """Raise when the query cannot hand out cursors.

        Raises:
            QueryError: naming the model and why.
        """
        if self.problem is not None:
            raise errors.QueryError(f"{self.model}: this query hands out no cursors: "
                                    f"{self.problem}")

    def encode(self, position: Position) -> str:
        """The token of ``position``: URL-safe, no padding."""
        self.check()
        body = self.digest + _pack(position)
        flags = _SIGNED if self.secret is not None else 0
        packed = zlib.compress(body, 9)
        if len(packed) < len(body):
            body, flags = packed, flags | _COMPRESSED
        head = bytes((FORMAT, flags)) + body
        return base64.urlsafe_b64encode(head + self._tag(head)).rstrip(b"=").decode()

    def decode(self, token: str) -> Position:
        """The position ``token`` holds, checked against this query.

        Raises:
            InvalidCursorError: the token is malformed, damaged, truncated,
                altered, signed otherwise than this connection expects, or
                made by another query.
        """
        self.check()
        raw = self._raw(token)
        if not 0 < raw[0] <= _LAST_PLAUSIBLE_FORMAT:
            raise self._invalid(f"it is not a tsmodel cursor (it starts with byte {raw[0]}; "
                                "pass the page's .next, or an iterator's .cursor, as given)")
        if raw[0] != FORMAT:
            raise self._invalid(f"it is of format {raw[0]}; this tsmodel reads format {FORMAT}")
        flags = raw[1]
        signed = bool(flags & _SIGNED)
        if signed and self.secret is None:
            raise self._invalid("it is signed, and this connection has no cursor_secret: "
                                "open it with the secret of the application that made it")
        if not signed and self.secret is not None:
            raise self._invalid("it is not signed, and this connection accepts only cursors "
                                "signed with its cursor_secret")
        size = _HMAC_TAG if signed else _CHECKSUM
        head, tag = raw[:-size], raw[-size:]
        if len(raw) <= 2 + size or not hmac.compare_digest(tag, self._tag(head)):
            raise self._invalid("it is damaged, truncated or altered" +
                                (", or signed with another secret" if signed else ""))
        body = head[2:]
        try:
            if flags & _COMPRESSED:
                body = zlib.decompress(body)
            if body[:_DIGEST] != self.digest:
                raise self._invalid("it was made by another query (its model, table, time "
                                    "range, key fields, order, mode, fields or where() "
                                    "conditions differ)")
            position = _unpack(body[_DIGEST:])
        except (zlib.error, IndexError, ValueError) as exc:
            if isinstance(exc, errors.InvalidCursorError):
                raise
            raise self._invalid("its record does not parse") from None
        if position.done > self.requests or any(j >= self.requests
                                                 for j, _ in position.marks):
            raise self._invalid("it names reads this query does not make")
        return position

    def _raw(self, token: str) -> bytes:
        if not isinstance(token, str):
            raise errors.InvalidCursorError(
                f"{self.model}: a cursor is a str (a page's .next), got {type(token).__name__}")
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise self._invalid("it is not a tsmodel cursor (not URL-safe base64)") from None
        if len(raw) <= 2 + _CHECKSUM:  # the head, a checksum (the shorter tag) and a body
            raise self._invalid(f"it is not a tsmodel cursor (too short: {len(raw)} bytes; "
                                "truncated?)")
        return raw

    def _tag(self, head: bytes) -> bytes:
        if head[1] & _SIGNED:
            assert self.secret is not None
            return hmac.new(self.secret, head, hashlib.sha256).digest()[:_HMAC_TAG]
        return hashlib.blake2b(head, digest_size=_CHECKSUM).digest()

    def _invalid(self, why: str) -> errors.InvalidCursorError:
        return errors.InvalidCursorError(f"{self.model}: cursor refused: {why}")


def secret_bytes(secret: str | bytes | None) -> bytes | None:
    """A ``cursor_secret`` as bytes (a str is UTF-8 encoded), checked.

    Raises:
        ConfigurationError: it is shorter than `MIN_SECRET` bytes, or
            neither str nor bytes.
    """
    if secret is None:
        return None
    if isinstance(secret, str):
        secret = secret.encode()
    if not isinstance(secret, bytes):
        raise errors.ConfigurationError(
            f"cursor_secret must be str or bytes, got {type(secret).__name__}")
    if len(secret) < MIN_SECRET:
        raise errors.ConfigurationError(
            f"cursor_secret must be at least {MIN_SECRET} bytes, got {len(secret)}; "
            "make one with secrets.token_urlsafe(32)")
    return secret


# -- the binary record ------------------------------------------------------------------


def _pack(position: Position) -> bytes:
    out = bytearray()
    _varint(out, position.emitted)
    _varint(out, position.done)
    _varint(out, 0 if position.last is None else position.last + 1)
    _varint(out, len(position.marks))
    for j, mark in position.marks:
        _varint(out, j)
        _varint(out, len(mark.row_key))
        out += mark.row_key
        _varint(out, (mark.time_us << 1) ^ (mark.time_us >> 63))  # zigzag: times may be < 0
        _varint(out, mark.seen)
    return bytes(out)


def _unpack(data: bytes) -> Position:
    reader = _Reader(data)
    emitted, done, last = reader.varint(), reader.varint(), reader.varint()
    marks = []
    for _ in range(reader.varint()):
        j = reader.varint()
        key = reader.take(reader.varint())
        zigzag = reader.varint()
        marks.append((j, Mark(key, (zigzag >> 1) ^ -(zigzag & 1), reader.varint())))
    if reader.at != len(data):
        raise ValueError("trailing bytes")
    return Position(emitted, done, None if last == 0 else last - 1, tuple(marks))


def _varint(out: bytearray, n: int) -> None:
    if n < 0:
        raise ValueError(f"a varint is not negative, got {n}")
    while True:
        byte, n = n & 0x7F, n >> 7
        if not n:
            out.append(byte)
            return
        out.append(byte | 0x80)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def varint(self) -> int:
        n = shift = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return n
            shift += 7
            if shift > 70:
                raise ValueError("varint too long")

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise ValueError("truncated")
        chunk = self.data[self.at:self.at + size]
        self.at += size
        return chunk


