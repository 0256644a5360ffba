"""``tsmodel job``: the jobs on Apache Beam (the ``tsmodel-bigtable[beam]`` extra).

``tsmodel job snapshot|repair|backfill|migrate|rollups TARGET ... [--runner R]
[-- PIPELINE OPTIONS]``: thin wrappers of `tsmodel.jobs.beam`. Arguments after ``--`` go to
Beam as pipeline options (``--project=... --region=... --temp_location=gs://...``).
"""

from __future__ import annotations

import argparse
import atexit
import functools
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tsmodel import errors
from tsmodel.cli._common import (
    APP_PROFILE_HELP,
    JSON,
    TARGET,
    Arg,
    CliError,
    Command,
    Run,
    app_profile,
    app_profile_id,
    arg,
    at_least_one,
    batch_size,
    bounds,
    bounds_of,
    group,
    parse_time,
    print_json,
)
from tsmodel.cli._targets import one_model

__all__ = ["add_command"]

_EPILOG = ("Arguments after -- go to Apache Beam as pipeline options, e.g. -- "
           "--project=P --region=europe-west1 --temp_location=gs://B/tmp "
           "--service_account_email=SA. Needs the beam extra: "
           "pip install 'tsmodel-bigtable[beam]'. An error is one line; with "
           "TSMODEL_DEBUG=1, Beam's log of a failed worker and the traceback show too.")


#: The arguments of every action, before its own.
_SHARED = (
    TARGET,
    arg("--url", required=True,
        help="the store every worker opens: bigtable://PROJECT/INSTANCE"
             "[?app_profile=ID], an emulator, or sqlite:////absolute/file.db"),
    app_profile(APP_PROFILE_HELP.replace("the requests", "the workers' requests")),
    arg("--runner", default="DirectRunner",
        help="Beam runner: DirectRunner (default), DataflowRunner, ..."),
    batch_size(500, "entities"),
    arg("--max-parts", type=int, default=512, metavar="N",
        help="the most key ranges a read is cut into (default: 512)"),
    arg("--dead-letters", default=None, metavar="PATH",
        help="where entities that could not be written go, as JSON lines "
             "(a gs:// prefix on Dataflow; default: the log)"),
    JSON,
)

#: The optional time range of a backfill or a migration.
_SPAN = (arg("--start", default=None, help="inclusive start, ISO 8601 (default: all)"),
         arg("--end", default=None, help="exclusive end, ISO 8601 (default: all)"))


def add_command(commands: Any) -> None:
    """Add ``job`` and its actions to the command's subparsers."""
    actions = group(commands, "job", "run a job on Apache Beam (DirectRunner, Dataflow)",
                    "Run a job over whole tables on Apache Beam: locally on the "
                    "DirectRunner, at scale on Dataflow. " + _EPILOG)
    for action in (
        _action("snapshot", "build one period's snapshot table",
                "Build the snapshot table of the period holding --period, as "
                "'tsmodel snapshot' does, on Beam.", _snapshot,
                arg("--period", required=True, help="any instant of the period, ISO 8601")),
        _action("repair", "rewrite companion tables from the main table",
                "Rewrite the current-value and alternate-key tables from the main "
                "table over [--start, --end), as 'tsmodel repair' does, on Beam.", _repair,
                *bounds("repair")),
        _action("backfill", "fill newly declared companion tables",
                "Write every main-table event into companion tables declared after "
                "the data was written (alternate-key and current-value tables).", _backfill,
                arg("--table", action="append", default=None, metavar="TABLE",
                    help="a companion table to fill (repeat; default: all)"),
                *_SPAN),
        _action("migrate", "copy a table into a new key layout, then verify",
                "Copy every event of TARGET into the model NEW (a new salt count, "
                "bucket, key order or table), then count both sides and look some "
                "events up in the new table.", _migrate,
                arg("new", metavar="NEW", help="module:Model of the new layout"),
                arg("--to-url", default=None, help="the new table's store (default: --url)"),
                arg("--no-verify", action="store_true", help="skip the verification pass"),
                arg("--verify-only", action="store_true",
                    help="only verify an earlier copy (count and spot-check both sides)"),
                arg("--spot-checks", type=int, default=100, metavar="N",
                    help="events looked up in the new table (default: 100)"),
                *_SPAN),
        _action("rollups", "recompute rollup rows from the main table",
                "Recompute every rollup row of a bucket overlapping [--start, --end) "
                "from the main table's events, as 'tsmodel repair' does for rollups "
                "(a row whose bucket has no event left is deleted), on Beam.", _rollups,
                *bounds("rebuild")),
    ):
        action.add(actions).set_defaults(pipeline_args=[])  # what follows -- (tsmodel.cli.main)


def _action(name: str, summary: str, description: str, run: Run, *own: Arg) -> Command:
    """A job action: the arguments every action takes, then its own."""
    return Command(name, summary, description + "\n\n" + _EPILOG, _one_line(run),
                   (*_SHARED, *own))


#: The logger Beam's runners log a failed worker's exception on, with its traceback.
_WORKER_LOG = "apache_beam.runners.common"


def _one_line(run: Run) -> Run:
    """``run`` with a failure shown as one line, as every command's: Beam's log of a
    worker's exception is silenced (unless ``TSMODEL_DEBUG`` is set), and the
    exception Beam raises for it, rebuilt from its first argument, gives way to
    tsmodel's own (its model, table and row key are in its message). The job's
    temporary files go to a directory of its own (`_temporary_directory_of_its_own()`)."""

    @functools.wraps(run)
    def quiet(args: argparse.Namespace) -> int:
        with _temporary_directory_of_its_own():
            if os.environ.get("TSMODEL_DEBUG"):
                return run(args)
            with _silenced(logging.getLogger(_WORKER_LOG)):
                try:
                    return run(args)
                except Exception as exc:
                    original = exc.__context__
                    if getattr(exc, "_tagged_with_step", False) and isinstance(
                            original, errors.TsModelError):
                        step = str(exc).rpartition(" [while running ")[2]
                        raise CliError(f"{original} [while running {step}") from exc
                    raise

    return quiet


@contextmanager
def _temporary_directory_of_its_own() -> Iterator[None]:
    """Point temporary files at a directory of the job's own, removed when the process exits.

    The DirectRunner first tries the Prism runner, and each try that fails to
    start it (no binary, no network) leaves an empty ``beam-temp*`` folder that
    nothing removes; Beam's stager leaves more. The removal is registered before
    Beam registers its own exit handlers, so it runs after them (they stop a
    Prism server that did start, and remove its folder). The process's own
    temporary directory is back once the job returns.
    """
    own = tempfile.mkdtemp(prefix="tsmodel-job-")
    atexit.register(shutil.rmtree, own, ignore_errors=True)
    before, tempfile.tempdir = tempfile.tempdir, own
    env_before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = own  # the DirectRunner's worker processes
    try:
        yield
    finally:
        tempfile.tempdir = before
        if env_before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = env_before


@contextmanager
def _silenced(logger: logging.Logger) -> Iterator[None]:
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _beam() -> Any:
    try:
        from tsmodel.jobs import beam
    except ImportError as exc:  # the ConfigurationError of a missing extra is a TsModelError
        raise CliError(
            f"tsmodel job needs Apache Beam: {errors.install_hint('beam')} ({exc})") from exc
    return beam


def _common(args: argparse.Namespace) -> dict[str, Any]:
    return {"options": [f"--runner={args.runner}", *args.pipeline_args],
            "batch_size": at_least_one(args.batch_size, "--batch-size"),
            "max_parts": at_least_one(args.max_parts, "--max-parts"),
            "dead_letters": args.dead_letters, "app_profile": app_profile_id(args.app_profile)}


def _time(text: str | None, what: str) -> Any:
    return None if text is None else parse_time(text, what)


def _done(report: Any, args: argparse.Namespace) -> int:
    if args.json:
        print_json({"job": report.job, "ok": report.ok, "seconds": report.seconds,
                    "counters": dict(report.counters), "verification": report.verification})
    else:
        print(report)
    return 0 if report.ok else 1


def _snapshot(args: argparse.Namespace) -> int:
    beam, model = _beam(), one_model(args.target)
    report = beam.snapshot(args.url, model, parse_time(args.period, "--period"),
                           **_common(args))
    return _done(report, args)


def _repair(args: argparse.Namespace) -> int:
    beam, model = _beam(), one_model(args.target)
    start, end, fields = bounds_of(args, model)
    report = beam.repair(args.url, model, start, end, **_common(args), **fields)
    return _done(report, args)


def _backfill(args: argparse.Namespace) -> int:
    beam, model = _beam(), one_model(args.target)
    report = beam.backfill(args.url, model, tables=args.table,
                           start=_time(args.start, "--start"), end=_time(args.end, "--end"),
                           **_common(args))
    return _done(report, args)


def _migrate(args: argparse.Namespace) -> int:
    beam, model, new = _beam(), one_model(args.target), one_model(args.new)
    if args.verify_only and args.no_verify:
        raise CliError("--verify-only and --no-verify leave nothing to do")
    report = beam.migrate(args.url, model, new, to_url=args.to_url,
                          start=_time(args.start, "--start"), end=_time(args.end, "--end"),
                          copy=not args.verify_only, verify=not args.no_verify,
                          spot_checks=args.spot_checks,
                          **_common(args))
    return _done(report, args)


def _rollups(args: argparse.Namespace) -> int:
    beam, model = _beam(), one_model(args.target)
    start, end, fields = bounds_of(args, model)
    options = _common(args)
    options.pop("dead_letters")  # rows not written are counted as failed
    report = beam.rebuild_rollups(args.url, model, start, end, **options, **fields)
    return _done(report, args)
