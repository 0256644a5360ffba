"""The ``tsmodel`` command: schema plans, read plans, row keys, sizing, the emulator.

Every subcommand takes ``--help``. Models are named ``module:Model`` (or a
module, for all the models in it); the module may be a file path such as
``examples/server_metrics.py:ServerMetric``. Output is an aligned table, or
JSON with ``--json``. An error prints one line, ``tsmodel: error: ...``, and
exits with status 1 (2 for a command line that does not parse).

One module per command (`schema`, `explain`,
`keys`, `advise`,
`emulator`, `snapshot`,
`repair`, `job`), each declaring a ``COMMAND`` or, with actions, adding its
subparser with ``add_command``;
what they share is in ``_common`` (subparsers, input values, output) and
``_targets`` (which models a TARGET names).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from tsmodel import errors
from tsmodel.cli._common import CliError, Run, print_error
from tsmodel.cli._parser import build_parser
from tsmodel.cli._targets import load_models

__all__ = ["main", "build_parser", "load_models", "CliError"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tsmodel`` command.

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 on success, 1 on an error, 2 on a command line
        that does not parse, 3 for ``schema plan --check`` with changes
        pending, 130 when interrupted. With ``TSMODEL_DEBUG`` set, errors
        raise with their traceback instead.

    Raises:
        SystemExit: for ``--help``, ``--version`` and a command line that does
            not parse (status 2), as argparse does.
    """
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # What follows ``--`` passes through (``tsmodel job ... -- --project=P``):
    # argparse's subparsers do not take it as positional arguments.
    passed = argv[argv.index("--") + 1:] if "--" in argv else None
    args = parser.parse_args(argv if passed is None else argv[:argv.index("--")])
    if passed is not None:
        if not hasattr(args, "pipeline_args"):
            parser.error("arguments after -- are only for 'tsmodel job'")
        args.pipeline_args = passed
    run: Run | None = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 1
    except (CliError, errors.TsModelError, OSError, ValueError, TypeError) as exc:
        if os.environ.get("TSMODEL_DEBUG"):
            raise
        print_error(_message(exc, args))
        return 1


def _message(exc: BaseException, args: argparse.Namespace) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, errors.ScanRefusedError):
        text += " (on the command line: --allow-scan)"
    if isinstance(exc, errors.TableNotFoundError) and hasattr(args, "url"):
        url = args.url or os.environ.get("TSMODEL_URL") or "memory://"
        if url not in text:  # which store: the wrong --url is the usual cause
            text += f" (--url {url})"
    if not isinstance(exc, (CliError, errors.TsModelError)):
        text = f"{type(exc).__name__}: {text}"
    return text


def _silence_stdout() -> None:
    """After a closed pipe (``tsmodel ... | head``), let the exit flush go nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
