"""``tsmodel repair``: rewrite a model's companion tables from its main table.

A thin wrapper of `tsmodel.repair()`.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from tsmodel import repair, spec_of
from tsmodel.cli._common import (
    CliError,
    add_app_profile,
    add_json,
    add_target,
    add_url,
    command,
    connect,
    pairs,
    parse_time,
    print_json,
    typed,
)
from tsmodel.cli._targets import one_model

__all__ = ["add_command"]


def add_command(commands: Any) -> None:
    """Add ``repair`` to the command's subparsers."""
    sub = command(
        commands, "repair", "rewrite companion tables from the main table",
        "Rewrite a model's current-value and alternate-key tables from its main table "
        "over [--start, --end): replays every event, deletes companion events the main "
        "table lacks. Idempotent.", _run)
    add_target(sub)
    sub.add_argument("--start", required=True, help="inclusive start, ISO 8601")
    sub.add_argument("--end", required=True, help="exclusive end, ISO 8601")
    sub.add_argument("--field", action="append", default=[], metavar="NAME=VALUE",
                     help="limit the repair to a key prefix (repeat for several)")
    add_url(sub)
    add_app_profile(sub)
    sub.add_argument("--batch-size", type=int, default=1000, metavar="N",
                     help="events per write batch (default: 1000)")
    sub.add_argument("--no-progress", action="store_true",
                     help="no progress bars (and no counting pass for their totals)")
    add_json(sub)


def _run(args: argparse.Namespace) -> int:
    model = one_model(args.target)
    if args.batch_size < 1:
        raise CliError(f"--batch-size must be at least 1, got {args.batch_size}")
    spec = spec_of(model)
    fields = typed(spec, spec.key, pairs(args.field, "--field"), list(spec.key_fields))
    began = time.monotonic()
    with connect(args.url, app_profile=args.app_profile) as conn:
        report = repair(model, parse_time(args.start, "--start"),
                        parse_time(args.end, "--end"), connection=conn,
                        batch_size=args.batch_size,
                        progress=False if args.no_progress else None, **fields)
    if args.json:
        print_json(report)
    else:
        print(f"{spec.name}: replayed {report.events} events into the companion tables; "
              f"deleted {report.alternate_events_deleted} alternate-key events the main "
              f"table lacks and restored {report.current_rows_fixed} current-value rows; "
              f"{report.failed} writes failed ({time.monotonic() - began:.2f} s)")
    return 0 if report.ok else 1
