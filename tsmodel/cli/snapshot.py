"""``tsmodel snapshot``: build one period's snapshot table, resuming an interrupted run.

A thin wrapper of `tsmodel.build_snapshot()`.
"""

from __future__ import annotations

import argparse

from tsmodel import build_snapshot
from tsmodel.cli._common import JOB, TARGET, Command, arg, parse_time, print_json, run_job
from tsmodel.cli._targets import one_model

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    report = run_job(args, build_snapshot, one_model(args.target),
                     parse_time(args.period, "--period"), restart=args.restart)
    if args.json:
        print_json(report)
    else:
        print(report)
    return 0


COMMAND = Command(
    "snapshot", "build one period's snapshot table",
    "Copy one period (a day by default) of a model's main table into its snapshot table "
    "(e.g. SENSOR_20170726), in batches, recording progress after each: running it "
    "again after an interruption resumes; on a complete snapshot it does nothing "
    "unless --restart.\n\nexample:\n  tsmodel snapshot examples/energy_meters.py:"
    "MeterReading --period 2017-07-26 --url sqlite:///meters.db",
    _run,
    (TARGET,
     arg("--period", required=True,
         help="any instant of the period, ISO 8601 (no offset means UTC)"),
     arg("--restart", action="store_true",
         help="copy the whole period again, ignoring recorded progress"),
     *JOB))
