"""``tsmodel schema plan`` and ``tsmodel schema apply``: the tables the models need.

Thin wrappers of `tsmodel.Connection.plan_schema()` and
`tsmodel.Connection.apply_schema()`; they first ask the backend whether it answers
(`check_reachable()`), so that a stopped
emulator fails at once rather than after the client's minute of retries.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tsmodel.backends.embedded import EmbeddedBackend
from tsmodel.cli._common import JSON, CliError, command, connect, group, print_note, url
from tsmodel.cli._targets import models
from tsmodel.errors import BackendUnreachableError
from tsmodel.ground.base import Backend, Reachable
from tsmodel.plan import schema

__all__ = ["add_command", "EXIT_CHANGES", "CONNECT_TIMEOUT"]

#: Exit status of ``schema plan --check`` when the backend differs from the models.
EXIT_CHANGES = 3
#: Seconds ``schema plan/apply`` wait for an emulator to answer (``--connect-timeout``).
CONNECT_TIMEOUT = 10.0


def add_command(commands: Any) -> None:
    """Add ``schema plan`` and ``schema apply`` to the command's subparsers."""
    actions = group(commands, "schema", "plan or apply the tables, families and GC rules",
                    "Compare the tables the models need (families, GC rules) with a backend, "
                    "and apply the difference.")
    plan = command(actions, "plan", "show the changes, change nothing",
                   "Show what 'schema apply' would change: tables to create, families to "
                   "add, GC rules to change and, with --drop and --drop-table, families and "
                   "tables to delete.", _run_plan)
    apply = command(actions, "apply", "make the changes",
                    "Create the tables and families the models need and set their GC rules. "
                    "Nothing is deleted without --drop (undeclared families of the models' "
                    "tables) or --drop-table NAME (that table); other tables are left alone.",
                    _run_apply)
    for sub in (plan, apply):
        _add_arguments(sub)
    plan.add_argument("--check", action="store_true",
                      help=f"exit with status {EXIT_CHANGES} when there are changes (for CI)")


def _add_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("targets", nargs="+", metavar="TARGET",
                     help="module:Model or module (all its models)")
    url().add_to(sub)
    sub.add_argument("--drop", action="store_true",
                     help="also delete the families of the models' tables that the "
                          "models do not declare")
    sub.add_argument("--drop-table", action="append", default=[], metavar="NAME",
                     dest="drop_tables",
                     help="delete this table, which no model may declare (repeat for "
                          "several); no other table is ever deleted")
    sub.add_argument("--connect-timeout", type=_seconds, default=CONNECT_TIMEOUT,
                     metavar="SECONDS",
                     help="on the emulator: how long to wait for it to answer before "
                          f"giving up (default: {CONNECT_TIMEOUT:g})")
    JSON.add_to(sub)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _run_plan(args: argparse.Namespace) -> int:
    plan = _schema(args, apply=False)[0]
    print(plan.to_json() if args.json else plan)
    return EXIT_CHANGES if args.check and plan.has_changes else 0


def _run_apply(args: argparse.Namespace) -> int:
    plan, applied = _schema(args, apply=True)
    if args.json:
        print(json.dumps({"plan": plan.to_dict(),
                          "applied": [c.to_dict() for c in applied]}, indent=2))
    elif applied:
        print(f"{plan}\n\nApplied {len(applied)} change{'' if len(applied) == 1 else 's'}.")
    else:
        print(plan)
    return 0


def _schema(args: argparse.Namespace,
            apply: bool) -> tuple[schema.SchemaPlan, tuple[schema.Change, ...]]:
    """The plan of ``schema plan/apply``, and the changes made when ``apply``."""
    targets = models(args.targets)
    with connect(args.url) as conn:
        _check_reachable(conn.backend, args.connect_timeout)
        plan = conn.plan_schema(*targets, drop=args.drop, drop_tables=args.drop_tables)
        if apply and isinstance(conn.backend, EmbeddedBackend) and not conn.features.persistent:
            print_note("the in-memory store is discarded when the command exits: the "
                       "tables applied here are gone with it; give --url a store that "
                       "persists (sqlite:///FILE.db, bigtable://PROJECT/INSTANCE, or the "
                       "emulator's bigtable-emulator://HOST:PORT/PROJECT/INSTANCE)",
                       prefix="tsmodel: note:", stream=sys.stderr)
        return plan, (conn.apply_schema(plan) if apply else ())


def _check_reachable(backend: Backend, seconds: float) -> None:
    """Fail at once when the backend does not answer, rather than after a minute of retries."""
    if not isinstance(backend, Reachable):
        return
    try:
        backend.check_reachable(seconds)
    except BackendUnreachableError as exc:
        hint = (f"a slow one needs a longer --connect-timeout (now {seconds:g} s)"
                if exc.listening else "'tsmodel emulator' starts one")
        raise CliError(f"{exc}; {hint}") from exc
