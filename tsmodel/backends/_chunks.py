"""Merge the cell chunks of a ReadRows response stream into rows.

Cloud Bigtable streams a read as ``ReadRowsResponse`` messages, each holding
``CellChunk`` messages. A chunk carries one cell, or a piece of one (a large
value is split over several chunks announced by ``value_size``); the row key,
family and qualifier are sent only when they change; ``commit_row`` ends a
row and ``reset_row`` discards the row in progress. The rules are those of
the official clients, checked against their acceptance corpus
(``tests/data/read-rows-acceptance-test.json``).

The merger works on the responses as parsed into a lean view of the
``google.bigtable.v2`` messages (`tsmodel.backends._bigtable_wire.ReadRowsView`,
rendered from the official descriptor): the same fields, with the
``family_name`` and ``qualifier`` wrapper messages and the labels left as
their wire bytes; the Bigtable backend parses a stream's responses into it
a group at a time (`tsmodel.backends._bigtable_rpc._views`). Reading a
wrapper's value from a message costs two attribute reads and a message
object per chunk; from its bytes, a lookup
(measured: the merge of a row of four cells, parsing included, 4.8 us
instead of 5.6). ``tests/unit/test_chunk_wire.py`` holds the merge of the
view to that of the official messages, the protobuf library as the oracle.
The merger imports nothing from Google: it is the dependency-free half of
the Bigtable backend's read path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Any

from tsmodel.errors import BackendError
from tsmodel.ground.base import Cell, CellBatch, Row

__all__ = ["InvalidChunk", "ReadProgress", "merge_batches", "merge_rows"]

_family_of = itemgetter(0)
#: Wrapper messages as sent (bytes) and their value, for the few columns a read meets.
_WRAPPERS_KEPT = 4096
#: Rows a batch of `merge_batches()` holds at least (but the last): Cloud Bigtable
#: packs many rows in a response, the emulator sends one row per response.
BATCH_ROWS = 256


class InvalidChunk(BackendError):
    """A ReadRows response broke the chunk protocol; the read cannot continue."""


class ReadProgress:
    """Where a read stands: what a retry needs to resume it.

    Attributes:
        reverse: rows come in descending key order.
        last_key: the key of the last row returned (or reported scanned by the
            server); rows up to it, inclusive, are done.
        rows: how many rows were returned.
        labels: for the row just returned, the labels of its cells by cell
            index, or ``None`` when it has none (tsmodel never asks for labels).
    """

    __slots__ = ("reverse", "last_key", "rows", "labels")

    def __init__(self, reverse: bool = False, last_key: bytes | None = None) -> None:
        self.reverse = reverse
        self.last_key = last_key
        self.rows = 0
        self.labels: dict[int, tuple[str, ...]] | None = None

    def check_order(self, key: bytes) -> None:
        """Raise unless ``key`` comes strictly after every row done."""
        last = self.last_key
        if last is not None and (key >= last if self.reverse else key <= last):
            order = "descending" if self.reverse else "ascending"
            raise InvalidChunk(f"row key {key!r:.80} is not in {order} order after {last!r:.80}")


def merge_rows(responses: Iterable[Any], progress: ReadProgress, *,
               labels: bool = False) -> Iterator[Row]:
    """Yield the committed rows of a stream of ``ReadRowsResponse`` messages.

    Cells come out as the server sent them (qualifiers in order, newest
    first), with families sorted by name when the server sent them in another
    order. ``progress`` is updated before each row is yielded.

    Args:
        responses: the ``ReadRowsResponse`` messages, parsed into the lean
            view (`tsmodel.backends._bigtable_wire.ReadRowsView`).
        progress: where the read stands; updated as rows complete.
        labels: keep the cells' labels in ``progress.labels`` and check them
            in split cells. Only label filters make the server send labels;
            tsmodel uses none, and skipping them saves a field read per cell.

    Raises:
        InvalidChunk: a chunk breaks the protocol, or the stream ends inside
            a row, or a wrapper message or label is malformed. Rows committed
            before it have been yielded.
    """
    return _merged(iter(responses), progress, labels, None)  # type: ignore[return-value]


def merge_batches(responses: Iterable[Any], progress: ReadProgress) -> Iterator[CellBatch]:
    """The committed rows of `merge_rows()`, in columns: `CellBatch` es (their rows,
    `CellBatch.rows()`, are those `merge_rows()` yields, in order), for a
    columnar decoder to take without `Row` objects. A batch is yielded at the
    end of the response that brought it to `BATCH_ROWS` rows, the last one at
    the end of the stream.

    ``progress`` stands at the last row of each batch when it is yielded
    (labels are not kept). When the stream breaks or a chunk is refused, the
    rows committed before it come first, in a batch of their own, then the
    error: a read resumed after ``progress`` loses no row.

    Raises:
        InvalidChunk: as `merge_rows()`.
    """
    return _batched(iter(responses), progress)


class _Filling:
    """The batch `_merged()` fills: the cells of its rows flat, four items a cell
    (family, qualifier, timestamp, value: no object per cell), the rows' keys and
    ends (in cells), and the rows' committed part taken as a `CellBatch`."""

    __slots__ = ("flat", "keys", "ends")

    def __init__(self) -> None:
        self.flat: list[Any] = []
        self.keys: list[bytes] = []
        self.ends: list[int] = []

    def take(self) -> CellBatch:
        """The committed rows as a batch; the row in progress stays."""
        batch = CellBatch()
        batch.keys, batch.ends, self.keys, self.ends = self.keys, self.ends, [], []
        flat = self.flat
        done = 4 * batch.ends[-1] if batch.ends else 0
        batch.families, batch.qualifiers = flat[0:done:4], flat[1:done:4]
        batch.timestamps, batch.values = flat[2:done:4], flat[3:done:4]
        del flat[:done]
        return batch


def _batched(responses: Iterator[Any], progress: ReadProgress) -> Iterator[CellBatch]:
    filling = _Filling()
    try:
        yield from _merged(responses, progress, False, filling)  # type: ignore[misc]
    except Exception:
        if filling.keys:
            yield filling.take()  # rows committed (and counted in progress) before the error
        raise


def _merged(responses: Iterator[Any], progress: ReadProgress, labels: bool,
            filling: _Filling | None) -> Iterator[Row | CellBatch]:
    """The chunk merger of `merge_rows()` and `merge_batches()`: the rules live here
    once, for both backends (the async one reads in a worker thread), and for
    both forms of rows. It pulls the responses itself, so that a row costs one
    generator switch. With ``filling``, the cells go flat into ``filling.flat``
    (``cells`` is that list, the row in progress from ``first`` on) and the
    committed rows come out as `CellBatch` es (see `merge_batches()`) instead
    of one `Row` at a time."""
    new = tuple.__new__  # Cell(...) and Row(...) without their Python __new__
    key: bytes | None = None  # the row in progress
    flat = filling is not None
    cells: list[Any] = filling.flat if filling is not None else []  # Cells, or flat
    first = 0  # where the row in progress begins in ``cells`` (flat: in items)
    family = ""
    qualifier: bytes | None = None
    unsorted = False  # a family came after a greater one
    parts: list[bytes] | None = None  # the pieces of a split cell
    timestamp = 0
    cell_labels: tuple[str, ...] = ()
    row_labels: dict[int, tuple[str, ...]] | None = None
    families: dict[bytes, str] = {}  # family_name wrappers as sent: their names
    qualifiers: dict[bytes, bytes] = {}  # qualifier wrappers as sent: their qualifiers
    for response in responses:
        scanned = response.last_scanned_row_key
        if scanned and key is None:  # inside a row, the row's own key will do
            progress.check_order(scanned)
            progress.last_key = scanned
        for chunk in response.chunks:
            if chunk.reset_row:
                if key is None:
                    raise InvalidChunk("reset_row outside a row")
                _check_bare_reset(chunk)
                del cells[first:]
                key, family, qualifier = None, "", None
                unsorted, parts, row_labels = False, None, None
                continue
            if parts is not None:  # the next piece of a split cell
                _check_continuation(chunk, key, family, qualifier, timestamp,
                                    cell_labels if labels else None)
                parts.append(chunk.value)
                if chunk.value_size > 0:
                    if chunk.commit_row:
                        raise InvalidChunk("commit_row inside a split cell")
                    continue
                if flat:
                    cells += (family, qualifier, timestamp, b"".join(parts))
                else:
                    cells.append(new(Cell, (family, qualifier, timestamp, b"".join(parts))))
                parts = None
            else:
                # Each field is read once, a sub-message's presence asked only when
                # its value is empty (an unset wrapper reads as empty): the common
                # chunk costs a few attribute reads (measured: a fifth of the merge).
                row_key = chunk.row_key
                if key is None:
                    if not row_key:
                        raise InvalidChunk("the first chunk of a row has no row key")
                    last = progress.last_key
                    if last is not None and (row_key >= last if progress.reverse
                                             else row_key <= last):
                        progress.check_order(row_key)  # raises
                    key = row_key
                elif row_key and row_key != key:
                    raise InvalidChunk(
                        f"row key {row_key!r:.80} began before row {key!r:.80} "
                        "was committed")
                # The wrappers as their bytes, their values looked up: the common chunk
                # costs a few attribute reads (measured: a fifth of the merge).
                wrapped = chunk.qualifier
                if wrapped:
                    new_qualifier = qualifiers.get(wrapped)
                    if new_qualifier is None:
                        new_qualifier = _wrapper_value(qualifiers, wrapped, bytes)
                    has_qualifier = True
                else:  # none, or an empty one: an empty qualifier
                    new_qualifier = b""
                    has_qualifier = chunk.HasField("qualifier")
                wrapped = chunk.family_name
                if wrapped:
                    new_family = families.get(wrapped)
                    if new_family is None:
                        new_family = _wrapper_value(families, wrapped, str)
                else:
                    new_family = ""
                if new_family:
                    if not has_qualifier:
                        raise InvalidChunk(f"family {new_family!r} came without a qualifier")
                    if new_family != family:
                        unsorted = unsorted or (len(cells) > first and new_family < family)
                        family = new_family
                    qualifier = new_qualifier
                elif has_qualifier:
                    if not family:
                        raise InvalidChunk("a qualifier came without a family")
                    qualifier = new_qualifier
                elif qualifier is None:
                    raise InvalidChunk("a cell came without a family and a qualifier")
                timestamp = chunk.timestamp_micros
                if labels:
                    cell_labels = _labels(chunk.labels)
                    if cell_labels:
                        row_labels = row_labels or {}
                        row_labels[len(cells)] = cell_labels
                if chunk.value_size > 0:
                    if chunk.commit_row:
                        raise InvalidChunk("commit_row inside a split cell")
                    parts = [chunk.value]
                    continue
                if flat:
                    cells += (family, qualifier, timestamp, chunk.value)
                else:
                    cells.append(new(Cell, (family, qualifier, timestamp, chunk.value)))
            if chunk.commit_row:
                progress.last_key = key
                progress.rows += 1
                if filling is not None:
                    if unsorted:  # stable: each family keeps its order
                        mine = cells[first:]
                        row_cells = sorted(zip(mine[0::4], mine[1::4], mine[2::4], mine[3::4],
                                               strict=True), key=_family_of)
                        cells[first:] = [x for cell in row_cells for x in cell]
                    first = len(cells)
                    filling.keys.append(key)  # type: ignore[arg-type]  # set: a row began
                    filling.ends.append(first // 4)
                    key, family, qualifier, unsorted = None, "", None, False
                    continue
                if unsorted:  # stable: each family keeps its order, and its labels
                    if row_labels:
                        order = sorted(range(len(cells)), key=lambda i: cells[i].family)
                        row_labels = {at: row_labels[i] for at, i in enumerate(order)
                                      if i in row_labels}
                    cells.sort(key=_family_of)
                progress.labels = row_labels
                row = new(Row, (key, tuple(cells)))
                key, cells, family, qualifier = None, [], "", None
                unsorted, row_labels = False, None
                yield row
        if filling is not None and len(filling.keys) >= BATCH_ROWS:
            yield filling.take()  # the row in progress, if any, now begins the list
            first = 0
    if key is not None:
        raise InvalidChunk(f"the stream ended inside row {key!r:.80}")
    if filling is not None and filling.keys:
        yield filling.take()


def _check_bare_reset(chunk: Any) -> None:
    if (chunk.row_key or chunk.HasField("family_name") or chunk.HasField("qualifier")
            or chunk.timestamp_micros or chunk.labels or chunk.value or chunk.value_size):
        raise InvalidChunk("a reset_row chunk carries data")


def _check_continuation(chunk: Any, key: bytes | None, family: str, qualifier: bytes | None,
                        timestamp: int, labels: tuple[str, ...] | None) -> None:
    """Raise unless ``chunk`` may continue the split cell described by the other arguments."""
    if chunk.row_key and chunk.row_key != key:
        raise InvalidChunk("the row key changed inside a split cell")
    if chunk.HasField("family_name") and _wrapper_value({}, chunk.family_name, str) != family:
        raise InvalidChunk("the family changed inside a split cell")
    if chunk.HasField("qualifier") and _wrapper_value({}, chunk.qualifier, bytes) != qualifier:
        raise InvalidChunk("the qualifier changed inside a split cell")
    if chunk.timestamp_micros and chunk.timestamp_micros != timestamp:
        raise InvalidChunk("the timestamp changed inside a split cell")
    if labels is not None and chunk.labels and _labels(chunk.labels) != labels:
        raise InvalidChunk("the labels changed inside a split cell")


# -- the bytes the view leaves as they came -----------------------------------------------


def _labels(raw: Any) -> tuple[str, ...]:
    """A chunk's labels (sent as strings: UTF-8)."""
    try:
        return tuple(label.decode("utf-8") for label in raw)
    except UnicodeDecodeError:
        raise InvalidChunk(f"a label is not UTF-8: {list(raw)!r:.80}") from None


def _wrapper_value(known: dict[bytes, Any], wrapped: bytes, kind: type) -> Any:
    """The value of a ``StringValue`` (``kind`` str) or ``BytesValue`` (bytes) wrapper
    message as sent, read as protobuf reads it (the last ``value`` field wins,
    other fields are skipped), kept in ``known`` for the chunks that follow.

    Raises:
        InvalidChunk: not a well-formed message, or a string that is not UTF-8.
    """
    value = b""
    p, end = 0, len(wrapped)
    try:
        while p < end:
            tag, p = _varint(wrapped, p)
            kind_of_field = tag & 7
            if tag >> 3 == 0 or tag > 0xFFFFFFFF:
                raise InvalidChunk(f"field number 0 in a wrapper: {wrapped!r:.80}")
            if kind_of_field == 2:
                n, p = _varint(wrapped, p)
                if p + n > end:
                    raise IndexError
                if tag == 0x0A:  # the value
                    value = wrapped[p:p + n]
                p += n
            elif kind_of_field == 0:
                _, p = _varint(wrapped, p)
            elif kind_of_field in (1, 5):
                p += 8 if kind_of_field == 1 else 4
            elif kind_of_field == 3:  # a group: its fields up to its end tag
                p = _group_end(wrapped, p, tag >> 3)
            else:
                raise InvalidChunk(f"wire type {kind_of_field} in a wrapper: {wrapped!r:.80}")
        if p != end:
            raise IndexError
    except IndexError:
        raise InvalidChunk(f"a wrapper's field runs past its end: {wrapped!r:.80}") from None
    if kind is str:
        try:
            found: Any = value.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidChunk(f"a family name is not UTF-8: {value!r:.80}") from None
    else:
        found = value
    if len(known) >= _WRAPPERS_KEPT:
        known.clear()
    known[wrapped] = found
    return found


def _varint(data: bytes, p: int) -> tuple[int, int]:
    """The varint at ``data[p]`` (at most ten bytes) and where it ends."""
    out = shift = 0
    for q in range(p, p + 10):
        b = data[q]
        out |= (b & 127) << shift
        if b < 128:
            return out & 0xFFFFFFFFFFFFFFFF, q + 1
        shift += 7
    raise InvalidChunk("a varint of more than ten bytes")


def _group_end(data: bytes, p: int, number: int) -> int:
    """Where the group of field ``number`` whose fields start at ``data[p]`` ends."""
    while True:
        tag, p = _varint(data, p)
        kind = tag & 7
        if kind == 4:
            if tag >> 3 != number:
                raise InvalidChunk("a group ends with another field's end tag")
            return p
        if kind == 0:
            _, p = _varint(data, p)
        elif kind == 2:
            n, p = _varint(data, p)
            p += n
        elif kind in (1, 5):
            p += 8 if kind == 1 else 4
        elif kind == 3:
            p = _group_end(data, p, tag >> 3)
        else:
            raise InvalidChunk(f"wire type {kind} in a group")
        if p > len(data):
            raise IndexError
