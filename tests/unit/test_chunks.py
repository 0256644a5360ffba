"""The ReadRows chunk merger against the official acceptance corpus, and beyond.

``tests/data/read-rows-acceptance-test.json`` comes from googleapis/python-bigtable
(Apache-2.0; see ``tests/data/README.md``). Every case runs twice: all chunks
in one response (as Cloud Bigtable packs them) and one chunk per response.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.cloud.bigtable_v2.types import ReadRowsResponse
from google.protobuf import json_format

from tsmodel.backends._bigtable_wire import ReadRowsView
from tsmodel.backends._chunks import InvalidChunk, ReadProgress, merge_batches, merge_rows
from tsmodel.backends.base import Cell, CellBatch, Row

CORPUS = Path(__file__).parent.parent / "data" / "read-rows-acceptance-test.json"
CASES: list[dict[str, Any]] = json.loads(CORPUS.read_text())["readRowsTests"]
RawResponse: Any = ReadRowsResponse.pb()
RawChunk: Any = ReadRowsResponse.CellChunk.pb()


def response(**fields: Any) -> Any:
    """A ``ReadRowsResponse`` as gRPC hands it to the merger: parsed into the view."""
    return ReadRowsView.FromString(RawResponse(**fields).SerializeToString())


def chunk(**fields: Any) -> Any:
    """A raw CellChunk from proto3 JSON field names (bytes as base64)."""
    return json_format.ParseDict(fields, RawChunk())


def responses(chunks: list[Any], packed: bool) -> Iterator[Any]:
    if packed:
        yield response(chunks=chunks)
    else:
        for c in chunks:
            yield response(chunks=[c])


def run(chunks: list[Any], packed: bool = True,
        reverse: bool = False) -> list[dict[str, Any]]:
    """Merge and flatten into the corpus's result form: one dict per cell, then any error."""
    results: list[dict[str, Any]] = []
    progress = ReadProgress(reverse=reverse)
    try:
        rows = merge_rows(responses(chunks, packed), progress, labels=True)
        for row in rows:
            labels = progress.labels or {}
            for index, c in enumerate(row.cells):
                results.append({
                    "rowKey": row.key.decode(), "familyName": c.family,
                    "qualifier": c.qualifier.decode(), "timestampMicros": c.timestamp,
                    "value": c.value.decode(), "label": ",".join(labels.get(index, ())),
                })
    except InvalidChunk:
        results.append({"error": True})
    return results


def both_forms(chunks: list[Any], packed: bool) -> tuple[list[Any], list[Any]]:
    """The rows of ``merge_rows()`` and of ``merge_batches()`` (each with
    ``progress`` where it stood as each came, then ``"error"`` if refused)."""
    forms: tuple[list[Any], list[Any]] = ([], [])
    for out, batched in zip(forms, (False, True), strict=True):
        progress = ReadProgress()
        try:
            if batched:
                for batch in merge_batches(responses(chunks, packed), progress):
                    assert isinstance(batch, CellBatch) and len(batch)
                    rows = list(batch.rows())
                    assert progress.last_key == rows[-1].key
                    out.extend((row, None) for row in rows[:-1])
                    out.append((rows[-1], progress.rows))
            else:
                for row in merge_rows(responses(chunks, packed), progress):
                    out.append((row, progress.rows))
        except InvalidChunk:
            out.append("error")
    counts = {n for x in forms[0] if x != "error" for n in [x[1]]}
    assert {x[1] for x in forms[1] if x != "error"} - {None} <= counts  # at a row's count
    strip = lambda form: [x if x == "error" else x[0] for x in form]  # noqa: E731
    return strip(forms[0]), strip(forms[1])


@pytest.mark.parametrize("packed", [True, False], ids=["one-response", "chunk-per-response"])
@pytest.mark.parametrize("case", CASES, ids=[case["description"] for case in CASES])
def test_acceptance_in_batches(case: dict[str, Any], packed: bool) -> None:
    """The batches' rows are the rows merged one by one, an error at the same point."""
    chunks = [json_format.ParseDict(c, RawChunk()) for c in case["chunks"]]
    rows, batched = both_forms(chunks, packed)
    assert batched == rows


def expected(case: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for result in case.get("results", []):
        if result.get("error"):
            out.append({"error": True})
        else:
            out.append({
                "rowKey": result["rowKey"], "familyName": result["familyName"],
                "qualifier": result["qualifier"],
                "timestampMicros": int(result.get("timestampMicros", 0)),
                "value": result.get("value", ""), "label": result.get("label", ""),
            })
    return out


def test_corpus_has_48_cases() -> None:
    assert len(CASES) == 48
    assert len({case["description"] for case in CASES}) == 48


@pytest.mark.parametrize("packed", [True, False], ids=["one-response", "chunk-per-response"])
@pytest.mark.parametrize("case", CASES, ids=[case["description"] for case in CASES])
def test_acceptance(case: dict[str, Any], packed: bool) -> None:
    chunks = [json_format.ParseDict(c, RawChunk()) for c in case["chunks"]]
    assert run(chunks, packed) == expected(case)


# -- beyond the corpus -------------------------------------------------------------

def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def cell_chunk(key: bytes | None, family: str | None, qualifier: bytes | None, ts: int,
               value: bytes, commit: bool = True, **more: Any) -> Any:
    fields: dict[str, Any] = {"timestampMicros": str(ts), "value": b64(value),
                              "commitRow": commit, **more}
    if key is not None:
        fields["rowKey"] = b64(key)
    if family is not None:
        fields["familyName"] = family
    if qualifier is not None:
        fields["qualifier"] = b64(qualifier)
    return chunk(**fields)


def merged(chunks: list[Any], **kwargs: Any) -> list[Row]:
    progress = ReadProgress(**kwargs)
    return list(merge_rows([response(chunks=chunks)], progress))


def test_rows_are_neutral_rows() -> None:
    [row] = merged([cell_chunk(b"r", "cf", b"q", 5000, b"v")])
    assert row == Row(b"r", (Cell("cf", b"q", 5000, b"v"),))
    assert isinstance(row.cells[0], Cell)


def test_families_out_of_name_order_are_sorted_stably() -> None:
    [row] = merged([
        cell_chunk(b"r", "z", b"a", 2, b"1", commit=False),
        cell_chunk(None, None, b"b", 1, b"2", commit=False),
        cell_chunk(None, "a", b"b", 9, b"3", commit=False),
        cell_chunk(None, None, None, 8, b"4", commit=False),
        cell_chunk(None, "m", b"x", 7, b"5"),
    ])
    assert [(c.family, c.qualifier, c.timestamp) for c in row.cells] == [
        ("a", b"b", 9), ("a", b"b", 8), ("m", b"x", 7), ("z", b"a", 2), ("z", b"b", 1)]


def test_labels_follow_their_cells_when_families_are_sorted() -> None:
    progress = ReadProgress()
    stream = [response(chunks=[
        cell_chunk(b"r", "z", b"a", 2, b"1", commit=False, labels=["late"]),
        cell_chunk(None, "a", b"b", 9, b"2", commit=False),
        cell_chunk(None, "m", b"x", 7, b"3", labels=["mid"]),
    ])]
    [row] = merge_rows(stream, progress, labels=True)
    assert [c.family for c in row.cells] == ["a", "m", "z"]
    assert progress.labels == {1: ("mid",), 2: ("late",)}


def test_reverse_order_is_enforced_and_accepted() -> None:
    rows = merged([cell_chunk(b"b", "cf", b"q", 1, b""), cell_chunk(b"a", "cf", b"q", 1, b"")],
                  reverse=True)
    assert [r.key for r in rows] == [b"b", b"a"]
    with pytest.raises(InvalidChunk, match="ascending"):
        merged([cell_chunk(b"b", "cf", b"q", 1, b""), cell_chunk(b"a", "cf", b"q", 1, b"")])
    with pytest.raises(InvalidChunk, match="descending"):
        merged([cell_chunk(b"a", "cf", b"q", 1, b""), cell_chunk(b"b", "cf", b"q", 1, b"")],
               reverse=True)


def test_resume_point_is_respected() -> None:
    with pytest.raises(InvalidChunk):
        merged([cell_chunk(b"k", "cf", b"q", 1, b"")], last_key=b"k")
    assert [r.key for r in merged([cell_chunk(b"l", "cf", b"q", 1, b"")], last_key=b"k")] == [b"l"]


def test_progress_tracks_rows_and_last_scanned_key() -> None:
    progress = ReadProgress()
    stream = [
        response(chunks=[cell_chunk(b"a", "cf", b"q", 1, b"")]),
        response(last_scanned_row_key=b"m"),
        response(chunks=[cell_chunk(b"n", "cf", b"q", 1, b"")]),
    ]
    it = merge_rows(stream, progress)
    assert next(it).key == b"a" and (progress.last_key, progress.rows) == (b"a", 1)
    assert next(it).key == b"n" and (progress.last_key, progress.rows) == (b"n", 2)
    with pytest.raises(StopIteration):
        next(it)


def test_last_scanned_key_out_of_order_is_invalid() -> None:
    progress = ReadProgress(last_key=b"m")
    with pytest.raises(InvalidChunk):
        list(merge_rows([response(last_scanned_row_key=b"c")], progress))


def test_last_scanned_key_inside_a_row_does_not_move_the_resume_point() -> None:
    progress = ReadProgress()
    stream = [response(chunks=[cell_chunk(b"a", "cf", b"q", 1, b"", commit=False)]),
              response(last_scanned_row_key=b"z")]
    with pytest.raises(InvalidChunk, match="ended inside"):
        list(merge_rows(stream, progress))
    assert progress.last_key is None


def test_split_value_across_responses() -> None:
    stream = [
        response(chunks=[cell_chunk(b"r", "cf", b"q", 7, b"ab", commit=False, valueSize=6)]),
        response(chunks=[cell_chunk(None, None, None, 0, b"cd", commit=False, valueSize=6)]),
        response(chunks=[cell_chunk(None, None, None, 0, b"ef")]),
    ]
    [row] = list(merge_rows(stream, ReadProgress()))
    assert row.cells == (Cell("cf", b"q", 7, b"abcdef"),)


def test_error_mid_stream_keeps_committed_rows_and_resume_point() -> None:
    def stream() -> Iterator[Any]:
        yield response(chunks=[cell_chunk(b"a", "cf", b"q", 1, b"")])
        yield response(chunks=[cell_chunk(b"b", "cf", b"q", 1, b"", commit=False)])
        raise ConnectionError("stream broken")

    progress = ReadProgress()
    got = []
    with pytest.raises(ConnectionError):
        for row in merge_rows(stream(), progress):
            got.append(row.key)
    assert got == [b"a"] and progress.last_key == b"a"


def test_batches_deliver_the_committed_rows_before_a_broken_stream() -> None:
    def stream() -> Iterator[Any]:
        yield response(chunks=[cell_chunk(b"a", "cf", b"q", 1, b"x")])
        yield response(chunks=[cell_chunk(b"b", "cf", b"q", 2, b"y"),
                               cell_chunk(b"c", "cf", b"q", 1, b"", commit=False)])
        raise ConnectionError("stream broken")

    progress = ReadProgress()
    got = []
    with pytest.raises(ConnectionError):
        for batch in merge_batches(stream(), progress):
            got.extend(batch.rows())
    assert got == [Row(b"a", (Cell("cf", b"q", 1, b"x"),)),
                   Row(b"b", (Cell("cf", b"q", 2, b"y"),))]
    assert progress.last_key == b"b" and progress.rows == 2


def test_batches_keep_rows_committed_before_an_invalid_chunk() -> None:
    chunks = [cell_chunk(b"a", "cf", b"q", 1, b"x"), cell_chunk(b"b", "cf", b"q", 1, b"y"),
              cell_chunk(b"a", "cf", b"q", 1, b"z")]  # out of order
    progress = ReadProgress()
    got = []
    with pytest.raises(InvalidChunk):
        for batch in merge_batches([response(chunks=chunks)], progress):
            got.extend(row.key for row in batch.rows())
    assert got == [b"a", b"b"] and progress.last_key == b"b"


def test_a_batch_of_rows_without_cells_and_of_sorted_families() -> None:
    chunks = [cell_chunk(b"a", "z", b"q", 1, b"1", commit=False),
              cell_chunk(None, "b", b"q", 1, b"2", commit=False),
              cell_chunk(None, "b", b"r", 1, b"3")]
    [batch] = merge_batches([response(chunks=chunks)], ReadProgress())
    assert list(batch.rows()) == [Row(b"a", (Cell("b", b"q", 1, b"2"), Cell("b", b"r", 1, b"3"),
                                             Cell("z", b"q", 1, b"1")))]
    assert batch.ends == [3] and CellBatch.of(batch.rows()).values == batch.values
