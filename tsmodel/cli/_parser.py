"""The argument parser of the ``tsmodel`` command: one subparser per command module."""

from __future__ import annotations

import argparse
import difflib
import re
from typing import NoReturn

from tsmodel.cli import (
    advise,
    codec,
    emulator,
    explain,
    job,
    keys,
    layout,
    repair,
    schema,
    snapshot,
)
from tsmodel.cli._common import print_error, wrap

__all__ = ["build_parser"]

#: What adds each command's subparser, in the order ``tsmodel --help`` lists them: a
#: `Command` declared, or the ``add_command`` of a command with actions.
COMMANDS = (schema.add_command, explain.COMMAND.add, keys.add_command, layout.COMMAND.add,
            codec.COMMAND.add, advise.COMMAND.add, emulator.COMMAND.add, snapshot.COMMAND.add,
            repair.COMMAND.add, job.add_command)


#: argparse's message for a word that is not one of a subparser's choices.
_INVALID_CHOICE = re.compile(
    r"argument (?P<what>COMMAND|ACTION): invalid choice: '(?P<word>[^']*)' "
    r"\(choose from (?P<choices>.*)\)$")


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line: ``tsmodel: error: [COMMAND: ]message (see ... --help)``.

    The command's own name is not repeated (``tsmodel: error: tsmodel: ...``);
    an unknown command or action says so, with the closest known one.
    """

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("tsmodel").strip()
        print_error(f"{where + ': ' if where else ''}{_usage_message(message)} "
                    f"(see '{self.prog} --help')")
        raise SystemExit(2)


def _usage_message(message: str) -> str:
    """``unknown command 'shema' (did you mean 'schema'?); choose from ...`` for argparse's
    ``argument COMMAND: invalid choice: ...``; any other message as it is."""
    match = _INVALID_CHOICE.match(message)
    if match is None:
        return message
    # Quoted before Python 3.14 ('plan', 'apply'), bare since (plan, apply).
    choices = [c.strip().strip("'") for c in match["choices"].split(",")]
    word = match["word"]
    close = difflib.get_close_matches(word, choices, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown {match['what'].lower()} {word!r}{hint}; choose from {', '.join(choices)}"


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
    for add in COMMANDS:
        add(commands)
    return parser
