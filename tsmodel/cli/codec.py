"""``tsmodel codec``: the Python source generated for a model's codecs.

Each table codec renders its declaration into specialized functions, compiled
once (`tsmodel.codec_source()`); this command prints their source, the lines
a traceback through them shows.
"""

from __future__ import annotations

import argparse
from typing import Any

from tsmodel import codec_source
from tsmodel.cli._common import add_target, command
from tsmodel.cli._targets import load_models

__all__ = ["add_command"]


def add_command(commands: Any) -> None:
    """Add ``codec`` to the command's subparsers."""
    sub = command(commands, "codec", "print the source generated for a model's codecs",
                  "Print the Python source of every function generated from the model's "
                  "declaration for its tables (the encoder of a save, each table's encoder, "
                  "the decoders made so far): what runs for each event, and what a "
                  "traceback through it shows.\n\nexample:\n  tsmodel codec "
                  "examples/server_metrics.py:ServerMetric", _run)
    add_target(sub, each=True)


def _run(args: argparse.Namespace) -> int:
    models = load_models(args.target)
    for i, model in enumerate(models):
        if len(models) > 1:
            print(("\n" if i else "") + f"# -- model {model.__name__} " + "-" * 40)
        print(codec_source(model), end="")
    return 0
