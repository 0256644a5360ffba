"""``tsmodel repair``: rewrite a model's companion tables from its main table.

A thin wrapper of `tsmodel.repair()`.
"""

from __future__ import annotations

import argparse
import time

from tsmodel import repair, spec_of
from tsmodel.cli._common import JOB, TARGET, Command, bounds, bounds_of, print_json, run_job
from tsmodel.cli._targets import one_model

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    model = one_model(args.target)
    start, end, fields = bounds_of(args, model)
    began = time.monotonic()
    report = run_job(args, repair, model, start, end, **fields)
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
    (TARGET, *bounds("repair"), *JOB))
