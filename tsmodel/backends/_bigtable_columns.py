"""The ``MutateRows`` entries of a batch of declared rows, written from their columns.

A frame's chunk comes with its main-table rows as columns (`DeclaredColumns`:
the row keys and the encoded values as Arrow binary arrays, the event times
as numpy). `render_columns_writer()` renders, from a table's `DeclaredCells`,
the writer of a whole batch's entries from them: the same bytes the row
writer of `tsmodel.backends._bigtable_wire` writes from the checked tuples
(``<tsmodel codec Model.table wire rows>``), assembled a column at a time
by numpy (a byte matrix, where every piece has one width) or Arrow's string
kernels (the timestamps' and lengths' varints by numpy, the bytes around
each cell worked out once per distinct size by the row writer's own
`_set_cell_head()`), then handed over as one list. A batch the row writer
would leave in part to the general path (a key Bigtable refuses, a
timestamp out of range, the epoch itself) is left whole to the row writer.
Held to the row writer by ``tests/extras/test_frame_columns.py``. Imported
only where the columns exist, that is where pyarrow is installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from tsmodel.ground.base import DeclaredCells, DeclaredColumns
from tsmodel.layouts._fragment import Fragment
from tsmodel.layouts._source import compile_function

__all__ = ["columns_writer"]

_INT64_MAX = 2**63 - 1
#: Bytes a varint of a uint64 takes at most.
_GROUPS = 10

ColumnsWriter = Callable[[DeclaredColumns], "tuple[list[bytes], list[int]] | None"]


#: The bytes around a cell's timestamp and value: ``head(family, qualifier, stamp size,
#: value size)`` (the row writer's `_bigtable_wire._set_cell_head`).
CellHead = Callable[[str, bytes, int, int], "tuple[bytes, bytes]"]


class _Kernels:
    """The numpy and Arrow pieces the rendered writer joins."""

    def __init__(self, cell_head: CellHead) -> None:
        self.cell_head = cell_head
        self.np = np = importlib.import_module("numpy")
        self.pa = pa = importlib.import_module("pyarrow")
        self.pc = importlib.import_module("pyarrow.compute")
        self.empty = pa.scalar(b"", pa.binary())
        self.spans = np.arange(_GROUPS)

    def binary(self, data: bytes) -> Any:
        return self.pa.scalar(data, self.pa.binary())

    def lengths(self, array: Any) -> Any:
        """The byte length of each item of a binary array (numpy int64)."""
        return self.pc.binary_length(array).to_numpy(zero_copy_only=False).astype(self.np.int64)

    def varints(self, numbers: Any) -> tuple[Any, Any]:
        """Each number's varint (``0 <= n < 2**63``): a binary array, and each one's length."""
        np, pa = self.np, self.pa
        n = len(numbers)
        if not n:
            return pa.array([], pa.binary()), np.zeros(0, np.int64)
        x = numbers.astype(np.uint64)
        top = max(1, -(-int(x.max()).bit_length() // 7))  # the groups of the largest
        groups = np.empty((n, top), np.uint8)
        for j in range(top):
            groups[:, j] = ((x >> np.uint64(7 * j)) & np.uint64(127)).astype(np.uint8)
        low = max(1, -(-int(x.min()).bit_length() // 7))
        if low == top:  # one length (the common case): every group but the last flagged
            groups[:, :top - 1] |= 128
            length = np.full(n, top, np.int64)
            data = groups.ravel()
        else:
            length = np.ones(n, np.int64)
            for j in range(1, top):
                length[(x >> np.uint64(7 * j)) > 0] = j + 1
            spans = self.spans[:top]
            groups[spans < (length - 1)[:, None]] |= 128
            data = groups[spans < length[:, None]]
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(length, out=offsets[1:])
        array = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                       pa.py_buffer(data.tobytes())])
        return array, length

    def heads(self, family: str, qualifier: bytes) -> Callable[[Any, Any], tuple[Any, Any]]:
        """A column's bytes before each cell's timestamp and before its value
        (`_set_cell_head()` of its stamp and value sizes), once per distinct sizes."""
        np, pa = self.np, self.pa

        def heads(stamps: Any, sizes: Any) -> tuple[Any, Any]:
            keys = sizes * 16 + stamps
            if keys.min() == keys.max():  # one size of stamp and value (the common case)
                pair = self.cell_head(family, qualifier, int(stamps[0]), int(sizes[0]))
                return pair
            found, at = np.unique(keys, return_inverse=True)
            pairs = [self.cell_head(family, qualifier, int(k % 16), int(k // 16))
                     for k in found.tolist()]
            if len(pairs) == 1:
                return pairs[0]
            index = pa.array(at.ravel(), pa.int32())
            return (pa.array([p[0] for p in pairs], pa.binary()).take(index),
                    pa.array([p[1] for p in pairs], pa.binary()).take(index))

        return heads

    def join(self, *pieces: Any) -> Any:
        """Each row's pieces end to end (a piece of bytes: the same in every row), in a
        byte matrix where every piece has one width in every row (fixed-width
        values, one size of timestamp: the common case), else by Arrow's join."""
        np, pa = self.np, self.pa
        matrices: list[Any] = []
        n = None
        for p in pieces:
            if isinstance(p, bytes):
                matrices.append(np.frombuffer(p, np.uint8))
                continue
            m = self.matrix(p)
            if m is None:
                return self.pc.binary_join_element_wise(
                    *[self.binary(q) if isinstance(q, bytes) else q for q in pieces],
                    self.empty)
            n = len(p)
            matrices.append(m)
        assert n is not None
        width = sum(m.shape[-1] for m in matrices)
        out = np.empty((n, width), np.uint8)
        at = 0
        for m in matrices:
            w = m.shape[-1]
            out[:, at:at + w] = m
            at += w
        offsets = np.arange(0, width * (n + 1), width, dtype=np.int32)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(out.tobytes())])

    def matrix(self, array: Any) -> Any:
        """A binary array of items of one width as a byte matrix (a row per item), else
        ``None``."""
        np = self.np
        n = len(array)
        if not n or array.null_count or array.type != self.pa.binary():
            return None
        offsets = np.frombuffer(array.buffers()[1], np.int32, n + 1, array.offset * 4)
        width = int(offsets[1] - offsets[0])
        if int(offsets[-1] - offsets[0]) != width * n or \
                (n > 1 and not (np.diff(offsets) == width).all()):
            return None
        if not width:
            return np.empty((n, 0), np.uint8)
        return np.frombuffer(array.buffers()[2], np.uint8, width * n,
                             int(offsets[0])).reshape(n, width)


def columns_writer(declared: DeclaredCells, cell_head: CellHead,
                   max_row_key: int) -> ColumnsWriter:
    """The writer of ``declared``'s entries from a batch's columns, rendered once (kept in
    its renderings): ``write(columns)`` returns the entries' bytes and sizes,
    as the row writer returns them for the same rows, or ``None`` for a batch
    left to the row writer. ``cell_head`` and ``max_row_key``: the row writer's
    (`tsmodel.backends._bigtable_wire`, which calls this)."""
    found: ColumnsWriter | None = declared.renderings.get("bigtable columns")
    if found is None:
        found = declared.renderings["bigtable columns"] = _render(
            declared, _Kernels(cell_head), max_row_key)
    return found


def _render(declared: DeclaredCells, k: _Kernels, max_row_key: int) -> ColumnsWriter:
    src = Fragment()
    for reserved in ("columns", "us", "ts", "keys", "klen", "stamp", "n", "body", "size"):
        src.local(reserved)
    src.emit("us = columns.times")
    src.emit("if not len(us):")
    src.emit("return [], []", 1)
    if declared.exact_times:  # the times themselves, in ns: within int64 only
        src.emit(f"if us.min() <= 0 or us.max() > {_INT64_MAX // 1000}:")
        src.emit("return None", 1)
        src.emit("ts = us * 1000")
    else:
        src.emit("ts = us // 1000 * 1000")
        src.emit("if ts.min() <= 0:")
        src.emit("return None", 1)  # negative, or the epoch: its stamp has no field
    lengths = src.bind(k.lengths, "lengths")
    src.emit("keys = columns.keys")
    src.emit(f"klen = {lengths}(keys)")
    src.emit(f"if klen.min() < 1 or klen.max() > {max_row_key}:")
    src.emit("return None", 1)
    varints = src.bind(k.varints, "varints")
    join = src.bind(k.join, "join")
    src.emit(f"stamp, n = {varints}(ts)")
    src.emit(f"stamp = {join}(b'\\x18', stamp)")  # the timestamp's field
    src.emit("n = n + 1")
    names = [src.local(f"v{i}") for i in range(len(declared.columns))]
    src.emit(f"{''.join(v + ', ' for v in names)}= columns.values")
    pieces = []
    for i, ((family, qualifier), v) in enumerate(zip(declared.columns, names, strict=True)):
        head, tail = src.local(f"h{i}"), src.local(f"t{i}")
        heads = src.bind(k.heads(family, qualifier), f"heads{i}")
        src.emit(f"{head}, {tail} = {heads}(n, {lengths}({v}))")
        pieces += [head, "stamp", tail, v]
    src.emit(f"body = {join}({', '.join(pieces)})")
    src.emit(f"klen_bytes, klen_size = {varints}(klen)")
    src.emit(f"size = klen + {lengths}(body) + 1 + klen_size")
    src.emit(f"return {join}(b'\\x12', {varints}(size)[0], b'\\x0a', klen_bytes, keys, body)"
             ".to_pylist(), size.tolist()")
    name = "write_columns"
    return compile_function(src.source(f"def {name}(columns):"), name, src.namespace,
                            f"<tsmodel codec {declared.label} wire columns>")
