"""The chunk merger reads ReadRows responses as protobuf does: the library is the oracle.

The Bigtable backend has gRPC parse responses into a lean view of the
messages (`tsmodel.backends._bigtable_wire.ReadRowsView`: the wrapper
messages and labels of a chunk left as their bytes), which the merger reads
(`tsmodel.backends._chunks`). Here random streams built with the official
``google.bigtable.v2`` classes (`tests.strategies.read_rows_streams`: unknown
fields of every wire type in responses, chunks and wrappers, split values,
commits and resets, labels, varints of every width) are merged through the
view and, independently, read with the official classes by the plain
transcription of the chunk rules below: rows, labels, progress and errors
must be the same.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.cloud.bigtable_v2.types import ReadRowsResponse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import read_rows_streams
from tsmodel.backends._bigtable_rpc import _views
from tsmodel.backends._bigtable_wire import ReadRowsView
from tsmodel.backends._chunks import InvalidChunk, ReadProgress, merge_batches, merge_rows
from tsmodel.backends.base import Cell, Row

Official: Any = ReadRowsResponse.pb()
Chunk: Any = ReadRowsResponse.CellChunk.pb()


class Broken(Exception):
    """The reference's InvalidChunk."""


def reference(stream: list[bytes], reverse: bool) -> list[Any]:
    """The stream read with the official classes: each row with its labels, then
    ``"error"`` if the chunks break the protocol (the rules of the official
    clients, one field read at a time)."""
    out: list[Any] = []
    last: bytes | None = None
    row: dict[str, Any] | None = None
    split: dict[str, Any] | None = None

    def after(key: bytes) -> bool:
        return last is None or (key < last if reverse else key > last)

    try:
        for data in stream:
            response = Official.FromString(data)
            if response.last_scanned_row_key and row is None:
                if not after(response.last_scanned_row_key):
                    raise Broken
                last = response.last_scanned_row_key
            for c in response.chunks:
                family = c.family_name.value if c.HasField("family_name") else None
                qualifier = c.qualifier.value if c.HasField("qualifier") else None
                labels = tuple(c.labels)
                if c.reset_row:
                    if row is None or c.row_key or family is not None or \
                            qualifier is not None or c.timestamp_micros or labels or \
                            c.value or c.value_size:
                        raise Broken
                    row, split = None, None
                    continue
                if split is not None:
                    same = (not c.row_key or c.row_key == row["key"]) and \
                        (family is None or family == split["family"]) and \
                        (qualifier is None or qualifier == split["qualifier"]) and \
                        (not c.timestamp_micros or c.timestamp_micros == split["ts"]) and \
                        (not labels or labels == split["labels"])
                    if not same:
                        raise Broken
                    split["value"] += c.value
                    if c.value_size > 0:
                        if c.commit_row:
                            raise Broken
                        continue
                    cell = split
                    split = None
                else:
                    if row is None:
                        if not c.row_key or not after(c.row_key):
                            raise Broken
                        row = {"key": c.row_key, "cells": [], "family": "",
                               "qualifier": None}
                    elif c.row_key and c.row_key != row["key"]:
                        raise Broken
                    if family:  # an empty family name counts as none
                        if qualifier is None:
                            raise Broken
                        row["family"], row["qualifier"] = family, qualifier
                    elif qualifier is not None:
                        if not row["family"]:
                            raise Broken
                        row["qualifier"] = qualifier
                    elif row["qualifier"] is None:
                        raise Broken
                    cell = {"family": row["family"], "qualifier": row["qualifier"],
                            "ts": c.timestamp_micros, "value": c.value, "labels": labels}
                    if c.value_size > 0:
                        if c.commit_row:
                            raise Broken
                        split = cell
                        continue
                row["cells"].append(cell)
                if c.commit_row:
                    cells = sorted(row["cells"], key=lambda x: x["family"])  # stable
                    out.append((
                        Row(row["key"], tuple(Cell(x["family"], x["qualifier"], x["ts"],
                                                   x["value"]) for x in cells)),
                        {i: x["labels"] for i, x in enumerate(cells) if x["labels"]} or None))
                    last, row = row["key"], None
        if row is not None:
            raise Broken
    except Broken:
        out.append("error")
    return out


def merged(stream: list[bytes], reverse: bool, group: int = 256) -> list[Any]:
    """The stream merged as the Bigtable backend merges it (parsed ``group``
    responses at a time), in the reference's form."""
    out: list[Any] = []
    progress = ReadProgress(reverse=reverse)
    try:
        for row in merge_rows(_views(stream, group_responses=group), progress, labels=True):
            out.append((row, progress.labels))
            assert progress.last_key == row.key and progress.rows == len(out)
    except InvalidChunk:
        out.append("error")
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=read_rows_streams(), group=st.integers(1, 4))
def test_the_merge_of_the_view_is_that_of_the_official_messages(stream: list[bytes],
                                                                 group: int) -> None:
    for reverse in (False, True):
        assert merged(stream, reverse, group) == reference(stream, reverse)
        assert batched(stream, reverse, group) == [
            x if x == "error" else x[0] for x in reference(stream, reverse)]


def batched(stream: list[bytes], reverse: bool, group: int = 256) -> list[Any]:
    """The stream merged into batches (`merge_batches()`), as their rows."""
    out: list[Any] = []
    progress = ReadProgress(reverse=reverse)
    try:
        for batch in merge_batches(_views(stream, group_responses=group), progress):
            out.extend(batch.rows())
            # at the batch's last row, or past it: a row key the server reported scanned
            last = progress.last_key
            assert last is not None and (last <= out[-1].key if reverse
                                         else last >= out[-1].key)
            assert progress.rows == len(out)
    except InvalidChunk:
        out.append("error")
    return out


def test_the_view_sees_the_official_fields() -> None:
    """The view's descriptor is the official one with three fields as bytes."""
    def shape(f: Any) -> tuple[Any, ...]:
        oneof = f.containing_oneof
        return f.name, f.is_repeated, oneof.name if oneof else None

    view = ReadRowsView.DESCRIPTOR.fields_by_name["chunks"].message_type
    assert {f.number: shape(f) for f in view.fields} == \
        {f.number: shape(f) for f in Chunk.DESCRIPTOR.fields}
    assert {f.name for f in view.fields if f.type != Chunk.DESCRIPTOR.fields_by_number[
        f.number].type} == {"family_name", "qualifier", "labels"}
    assert all(view.fields_by_name[name].has_presence for name in ("family_name", "qualifier"))


@pytest.mark.parametrize("chunk", [
    b"\x0a\x01r\x12\x03\x0a\x01\xff\x1a\x00\x48\x01",  # a family name that is not UTF-8
    b"\x0a\x01r\x12\x03\x0a\x01f\x1a\x00\x2a\x01\xff\x48\x01",  # a label that is not UTF-8
    b"\x0a\x01r\x12\x03\x0a\x05f\x1a\x00\x48\x01",  # a family name past its wrapper
    b"\x0a\x01r\x12\x03\x0a\x01f\x1a\x02\x00\x00\x48\x01",  # field number 0 in a qualifier
])
def test_a_malformed_wrapper_or_label_is_an_invalid_chunk(chunk: bytes) -> None:
    """Bytes the official classes refuse to parse: the merger refuses them too."""
    data = b"\x0a" + bytes([len(chunk)]) + chunk
    with pytest.raises(Exception):  # noqa: B017 - the oracle's own parse error
        Official.FromString(data)
    with pytest.raises(InvalidChunk):
        list(merge_rows([ReadRowsView.FromString(data)], ReadProgress(), labels=True))


# -- responses parsed a group at a time (`_views()`) ---------------------------------------


def as_merged(views: Any) -> list[tuple[str, bytes]]:
    """What the merger reads of ``views``, in order: each one's scanned row key (where
    it has one; a joined group has none, or it is not joined), then its chunks."""
    out: list[tuple[str, bytes]] = []
    for view in views:
        scanned = view.last_scanned_row_key
        for key in [scanned] if isinstance(scanned, bytes) else scanned:
            if key:
                out.append(("scanned", key))
        out += [("chunk", chunk.SerializeToString(deterministic=True))
                for chunk in view.chunks]
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=read_rows_streams(), responses=st.integers(1, 5), size=st.integers(1, 400))
def test_responses_parsed_in_groups_are_those_parsed_one_by_one(
        stream: list[bytes], responses: int, size: int) -> None:
    """However the groups fall (by count, by bytes, a response larger than a group,
    scanned row keys among them), the merger reads the same chunks and keys,
    in the same order, as from each response parsed on its own."""
    one_by_one = as_merged(map(ReadRowsView.FromString, stream))
    grouped = as_merged(_views(stream, group_bytes=size, group_responses=responses))
    assert grouped == one_by_one


def test_a_group_without_scanned_keys_is_one_list_of_chunks() -> None:
    stream = [Official(chunks=[Chunk(row_key=b"r%d" % i, value=b"v", commit_row=True)])
              .SerializeToString() for i in range(5)]
    views = list(_views(stream))  # groups of 1, 2, then what is left
    assert [v.DESCRIPTOR.name for v in views] == [
        "ReadRowsResponse", "ReadRowsJoined", "ReadRowsJoined"]
    assert [c.row_key for v in views for c in v.chunks] == [b"r%d" % i for i in range(5)]


class StreamBroke(grpc.RpcError):
    """What a gRPC response iterator raises when the stream breaks."""


def breaking(stream: list[bytes], after: int) -> Any:
    yield from stream[:after]
    raise StreamBroke()


@pytest.mark.parametrize("after", [0, 1, 3, 5])
def test_a_broken_stream_gives_the_responses_before_the_break(after: int) -> None:
    stream = [Official(last_scanned_row_key=b"k%d" % i).SerializeToString() for i in range(6)]
    got: list[bytes] = []
    with pytest.raises(StreamBroke):
        for view in _views(breaking(stream, after)):
            got.append(view.last_scanned_row_key)
    assert got == [b"k%d" % i for i in range(after)]


@pytest.mark.parametrize("bad", [0, 2, 4])
@pytest.mark.parametrize("data", [
    b"\x0a\x05ab",  # a chunk that runs past the end
    # A chunk whose length runs into the next response (two unknown varint fields),
    # which parses joined to it: a value of the next response's first field.
    b"\x0a\x04\x32\x02",
])
def test_a_response_that_does_not_parse_ends_the_stream_as_grpc_does(bad: int,
                                                                     data: bytes) -> None:
    """The responses before it, then INTERNAL "Exception deserializing response!"
    (what a blocking channel raises when its deserializer fails)."""
    stream = [Official(chunks=[Chunk(row_key=b"k%d" % i, value=b"v", commit_row=True)])
              .SerializeToString() if i % 2 == 0 else b"\x48\x01\x48\x01" for i in range(5)]
    stream[bad] = data
    with pytest.raises(Exception):  # noqa: B017 - the oracle's own parse error
        Official.FromString(stream[bad])
    for group in (256, 1):  # all in one group, or each response alone
        got: list[Any] = []
        with pytest.raises(grpc.RpcError) as raised:
            for view in _views(iter(stream), group_responses=group):
                got += as_merged([view])
        assert got == as_merged(map(ReadRowsView.FromString, stream[:bad]))
        assert raised.value.code() is grpc.StatusCode.INTERNAL
        assert raised.value.details() == "Exception deserializing response!"


def test_the_first_response_comes_alone_then_groups_grow() -> None:
    """A read's first rows come as soon as they are sent: the first group is one
    response, each next one twice the last, up to the group size."""
    def rows(n: int) -> Any:
        for i in range(n):
            yield Official(chunks=[Chunk(row_key=b"r%03d" % i, value=b"v", commit_row=True)]
                           ).SerializeToString()

    sizes = [len(view.chunks) for view in _views(rows(40), group_responses=8)]
    assert sizes == [1, 2, 4, 8, 8, 8, 8, 1]
    taken = 0

    def counted() -> Any:
        nonlocal taken
        for message in rows(40):
            taken += 1
            yield message

    first = next(iter(_views(counted())))
    assert taken == 1 and first.chunks[0].row_key == b"r000"
