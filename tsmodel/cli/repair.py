"""``tsmodel repair``: rewrite a model's companion tables from its main table.

A thin wrapper of `tsmodel.repair()`.
"""

from __future__ import annotations

import argparse
import time

from tsmodel import repair, spec_of
from tsmodel.cli._common import (
    JSON,
    STORE,
    TARGET,
    Command,
    arg,
    at_least_one,
    batch_size,
    bounds,
    key_prefix,
    open_store,
    parse_time,
    print_json,
)
from tsmodel.cli._targets import one_model

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    model = one_model(args.target)
    batch_size = at_least_one(args.batch_size, "--batch-size")
    fields = key_prefix(spec_of(model), args)
    began = time.monotonic()
    with open_store(args) as conn:
        report = repair(model, parse_time(args.start, "--start"),
                        parse_time(args.end, "--end"), connection=conn,
                        batch_size=batch_size,
                        progress=False if args.no_progress else None, **fields)
    if args.json:
        print_json(report)
    else:
        print(f"{spec_of(model).name}: replayed {report.events} events into the companion tables; "
              f"deleted {report.alternate_events_deleted} alternate-key events the main "
              f"table lacks and restored {report.current_rows_fixed} current-value rows; "
              f"{report.failed} writes failed ({time.monotonic() - began:.2f} s)")
    return 0 if report.ok else 1


COMMAND = Command(
    "repair", "rewrite companion tables from the main table",
    "Rewrite a model's current-value and alternate-key tables from its main table "
    "over [--start, --end): replays every event, deletes companion events the main "
    "table lacks. Idempotent.",
    _run,
    (TARGET, *bounds("repair"), *STORE, batch_size(1000, "events"),
     arg("--no-progress", action="store_true",
         help="no progress bars (and no counting pass for their totals)"),
     JSON))
