"""The ``tsmodel snapshot`` and ``tsmodel repair`` commands: companion-table jobs.

``snapshot`` builds one period's snapshot table (``SENSOR_20170726``) from the
main table, resuming an interrupted run; ``repair`` rewrites a model's
current-value and alternate-key tables from its main table over a time range.
Both are thin wrappers of :func:`tsmodel.build_snapshot` and
:func:`tsmodel.jobs.repair`.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from tsmodel import cli
from tsmodel.declare.spec import spec_of
from tsmodel.jobs.repair import repair
from tsmodel.jobs.snapshots import build_snapshot
from tsmodel.run.connection import Connection

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Add ``snapshot`` and ``repair`` to the command's subparsers."""
    snap = cli._sub(
        commands, "snapshot", "build one period's snapshot table",
        "Copy one period (a day by default) of a model's main table into its snapshot table "
        "(e.g. SENSOR_20170726), in batches, recording progress after each: running it "
        "again after an interruption resumes; on a complete snapshot it does nothing "
        "unless --restart.\n\nexample:\n  tsmodel snapshot examples/energy_meters.py:"
        "MeterReading --period 2017-07-26 --url sqlite:///meters.db", _cmd_snapshot)
    cli._add_target(snap)
    snap.add_argument("--period", required=True,
                      help="any instant of the period, ISO 8601 (no offset means UTC)")
    snap.add_argument("--url", default=None, help=cli._URL_HELP)
    snap.add_argument("--batch-size", type=int, default=1000, metavar="N",
                      help="events per write batch (default: 1000)")
    snap.add_argument("--restart", action="store_true",
                      help="copy the whole period again, ignoring recorded progress")
    snap.add_argument("--no-progress", action="store_true", help="no progress bar")
    cli._add_json(snap)
    fix = cli._sub(
        commands, "repair", "rewrite companion tables from the main table",
        "Rewrite a model's current-value and alternate-key tables from its main table "
        "over [--start, --end): replays every event, deletes companion events the main "
        "table lacks. Idempotent.", _cmd_repair)
    cli._add_target(fix)
    fix.add_argument("--start", required=True, help="inclusive start, ISO 8601")
    fix.add_argument("--end", required=True, help="exclusive end, ISO 8601")
    fix.add_argument("--field", action="append", default=[], metavar="NAME=VALUE",
                     help="limit the repair to a key prefix (repeat for several)")
    fix.add_argument("--url", default=None, help=cli._URL_HELP)
    cli._add_json(fix)


def _cmd_snapshot(args: argparse.Namespace) -> int:
    model = cli._one_model(args.target)
    if args.batch_size < 1:
        raise cli.CliError(f"--batch-size must be at least 1, got {args.batch_size}")
    with Connection(cli._open(args.url)) as conn:
        report = build_snapshot(model, cli._parse_time(args.period, "--period"),
                                connection=conn, batch_size=args.batch_size,
                                progress=False if args.no_progress else None,
                                restart=args.restart)
    if args.json:
        cli._print_json(report)
    else:
        print(report)
    return 0


def _cmd_repair(args: argparse.Namespace) -> int:
    model = cli._one_model(args.target)
    spec = spec_of(model)
    fields = cli._typed(spec, spec.key, cli._pairs(args.field, "--field"), list(spec.key_fields))
    began = time.monotonic()
    with Connection(cli._open(args.url)) as conn:
        report = repair(model, cli._parse_time(args.start, "--start"),
                        cli._parse_time(args.end, "--end"), connection=conn, **fields)
    if args.json:
        cli._print_json(report)
    else:
        print(f"{spec.name}: replayed {report.events} events into the companion tables; "
              f"deleted {report.alternate_events_deleted} alternate-key events and fixed "
              f"{report.current_rows_fixed} current values the main table lacks; "
              f"{report.failed} writes failed ({time.monotonic() - began:.2f} s)")
    return 0 if report.ok else 1
