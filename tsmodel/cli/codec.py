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

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    models = load_models(args.target)
    for i, model in enumerate(models):
        if len(models) > 1:
            print(("\n" if i else "") + f"# -- model {model.__name__} " + "-" * 40)
        print(codec_source(model), end="")
    return 0


COMMAND = Command(
    "codec", "print the source generated for a model's codecs",
    "Print the Python source of every function generated from the model's "
    "declaration for its tables (the encoder of a save, each table's encoder, "
    "the decoders made so far): what runs for each event, and what a "
    "traceback through it shows.\n\nexample:\n  tsmodel codec "
    "examples/server_metrics.py:ServerMetric",
    _run, (TARGETS,))
