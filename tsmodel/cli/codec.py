"""``tsmodel codec``: the Python source generated for a model's codecs.

Each table codec renders its declaration into specialized functions, compiled
once (`tsmodel.codec_source()`); this command prints their source, the lines
a traceback through them shows.
"""

from __future__ import annotations

import argparse

from tsmodel import codec_source
from tsmodel.cli._common import TARGETS, Command
from tsmodel.cli._targets import load_models
from tsmodel.declare.spec import spec_of
from tsmodel.errors import ExtraNotInstalledError
from tsmodel.io.frame_columns import frame_encoder
from tsmodel.plan.codecs import table_codecs

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    models = load_models(args.target)
    for i, model in enumerate(models):
        _frame_encoder(model)
        _wire_writers(model)
        if len(models) > 1:
            print(("\n" if i else "") + f"# -- model {model.__name__} " + "-" * 40)
        print(codec_source(model), end="")
    return 0


def _frame_encoder(model: type) -> None:
    """Render the model's frame encoder (``save_frame()``'s) too, where pyarrow is installed."""
    try:
        frame_encoder(spec_of(model))
    except ExtraNotInstalledError:
        pass


def _wire_writers(model: type) -> None:
    """Render the Bigtable backend's writers of each table's declared cells: the
    ``MutateRows`` wire bytes a save sends, rendered at its first write. (gRPC is
    loaded here, not with the command line.)"""
    from tsmodel.backends.bigtable import render_wire_writers

    spec = spec_of(model)
    for codec in table_codecs(spec):
        if codec.declared_cells is not None:
            render_wire_writers(codec.declared_cells)


COMMAND = Command(
    "codec", "print the source generated for a model's codecs",
    "Print the Python source of every function generated from the model's "
    "declaration for its tables (the encoder of a save and its check, each table's "
    "encoder, the Bigtable backend's writers of MutateRows wire bytes, the decoders "
    "made so far, and save_frame()'s encoder of a frame's columns where "
    "pyarrow is installed): what runs for each event, and what a "
    "traceback through it shows.\n\nexample:\n  tsmodel codec "
    "examples/server_metrics.py:ServerMetric",
    _run, (TARGETS,))
