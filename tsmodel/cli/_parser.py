"""The argument parser of the ``tsmodel`` command: one subparser per command module."""

from __future__ import annotations

import argparse
from typing import NoReturn

from tsmodel.cli import advise, emulator, explain, job, keys, layout, repair, schema, snapshot
from tsmodel.cli._common import print_error, wrap

__all__ = ["build_parser"]

#: The command modules, in the order ``tsmodel --help`` lists them.
COMMANDS = (schema, explain, keys, layout, advise, emulator, snapshot, repair, job)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line: ``tsmodel: error: PROG: message``."""

    def error(self, message: str) -> NoReturn:
        print_error(f"{self.prog}: {message} (see '{self.prog} --help')")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``tsmodel`` command and its subcommands."""
    from tsmodel import __version__

    parser = _Parser(
        prog="tsmodel", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=wrap("Schema plans, read plans, row keys and sizing for tsmodel "
                         "models, and the Cloud Bigtable emulator for local development."),
        epilog=wrap("Models are given as module:Model or a module (every model in it); "
                    "the module may be a file path, e.g. "
                    "examples/server_metrics.py:ServerMetric."),
    )
    parser.add_argument("--version", action="version", version=f"tsmodel {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for module in COMMANDS:
        module.add_command(commands)
    return parser
