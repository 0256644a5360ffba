"""The generated codec functions of a model, and their source.

Each table codec renders its declaration into Python source, compiled once
(`tsmodel.layouts.render_write` for writes; the read side renders its own);
`codec_source()` lists every function generated for a model's codecs with
its source, as ``tsmodel codec MODULE:Model`` prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.layouts import TableCodec
from tsmodel.layouts._source import rendered
from tsmodel.plan.events import EncodedEvent, column_checker, event_encoder

__all__ = ["codec_source", "generated_functions", "table_codecs"]


def table_codecs(spec: ModelSpec) -> list[TableCodec]:
    """Every table codec of a model: main, current-value, alternate-key, snapshot, rollups."""
    codecs = [spec.codec]
    if spec.current_codec is not None:
        codecs.append(spec.current_codec)
    codecs += [alt.codec for alt in spec.alternates]
    if spec.snapshot is not None:
        codecs.append(spec.snapshot.template.codec)
    for rollup in spec.rollups:
        codecs += table_codecs(spec_of(rollup.model))
    return codecs


def generated_functions(model: type) -> list[tuple[str, Callable[..., Any]]]:
    """``(table, function)`` for each function generated for ``model``'s codecs.

    The event encoder of a save, its check column-wise (`save_frame()`'s),
    each table's encoder and its decoder of a batch of rows into instances
    (a range read's, where the table has one) are rendered here if they
    were not yet; the read side's other functions are listed as far as they
    were made.

    Raises:
        DeclarationError: ``model`` is not a tsmodel model.
    """
    spec = spec_of(model)
    event_encoder(spec)  # rendered at a model's first save: render it now
    spec.codec.event_parts(spec.current_codec, EncodedEvent)  # a save's check, apart
    column_checker(spec)  # and the check save_frame() makes column-wise
    out: list[tuple[str, Callable[..., Any]]] = []
    seen: set[int] = set()
    for codec in table_codecs(spec):
        codec.batch_instances()  # rendered at a range read's first use
        for function in [*codec.generated(), *_backend_renderings(codec)]:
            if id(function) not in seen:
                seen.add(id(function))
                out.append((codec.table, function))
    return out


def _backend_renderings(codec: TableCodec) -> list[Callable[..., Any]]:
    """The functions backends have rendered so far from the codec's `DeclaredCells`
    (the Bigtable backend: its ``MutateRows`` entry writers)."""
    declared = codec.declared_cells
    if declared is None:
        return []
    found: list[Callable[..., Any]] = []
    for rendering in declared.renderings.values():
        for item in rendering if isinstance(rendering, tuple) else (rendering,):
            if callable(item) and hasattr(item, "__tsmodel_source__"):
                found.append(item)
    return found


def codec_source(model: type) -> str:
    """The Python source of every function generated for ``model``'s codecs.

    Each function under a comment naming its table and the file name its
    tracebacks show (``<tsmodel codec Model.TABLE encode>``).

    Raises:
        DeclarationError: ``model`` is not a tsmodel model.
    """
    blocks = []
    for table, function in generated_functions(model):
        blocks.append(f"# table {table}: {function.__code__.co_filename}\n"
                      + rendered(function))
    return "\n\n".join(blocks)
