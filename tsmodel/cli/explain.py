"""``tsmodel explain``: the read plan of a range or current-value query."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

import attrs

from tsmodel import ModelSpec, QuerySet, ReadPlan, spec_of
from tsmodel.cli._common import (
    JSON,
    TARGET,
    CliError,
    Command,
    arg,
    connect,
    jsonable,
    pairs,
    parse_time,
    print_json,
    text,
    typed,
    url,
)
from tsmodel.cli._targets import one_model
from tsmodel.ground.base import ReadRequest

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    model = one_model(args.target)
    fields = _fields(spec_of(model), args)
    with connect(args.url, announce=False) as conn:
        plan = _query(QuerySet(model, connection=conn), args, fields).explain()
    if args.json:
        print_json(_plan_dict(plan))
    else:
        print(plan)
    return 0


def _fields(spec: ModelSpec, args: argparse.Namespace) -> dict[str, Any]:
    """The typed ``--field`` values; the time is given by --start and --end."""
    layout = spec.current_key if args.current and spec.current_key is not None else spec.key
    return typed(spec, layout, pairs(args.field, "--field"),
                 [f for f in layout.fields if f != spec.timestamp_field])


def _query(qs: QuerySet[Any], args: argparse.Namespace,
           fields: dict[str, Any]) -> QuerySet[Any]:
    """The query the arguments describe."""
    qs = qs.current(allow_scan=args.allow_scan, **fields) if args.current else \
        qs.range(*_span(args), allow_scan=args.allow_scan, **fields)
    qs = qs.limit(args.limit) if args.limit is not None else qs
    return qs.newest_first() if args.newest_first else qs


def _span(args: argparse.Namespace) -> tuple[datetime, datetime]:
    if args.start is None or args.end is None:
        raise CliError("explain needs --start and --end (ISO 8601), or --current")
    return parse_time(args.start, "--start"), parse_time(args.end, "--end")


def _plan_dict(plan: ReadPlan) -> dict[str, Any]:
    return {
        "model": plan.model, "table": plan.table, "scan": plan.scan, "reason": plan.reason,
        "merge": plan.merge, "client_filters": list(plan.client_filters),
        "reads": [_request_dict(r) for r in plan.requests],
    }


def _request_dict(req: ReadRequest) -> dict[str, Any]:
    flt = {k: v for k, v in attrs.asdict(req.filter, recurse=False).items()
           if v is not None and v is not False}
    if "columns" in flt:
        flt["columns"] = [f"{fam}:{text(q)}" for fam, q in flt["columns"]]
    out: dict[str, Any] = jsonable({
        "table": req.table,
        "row_keys": list(req.rows.keys),
        "row_ranges": [{"start": r.start, "end": r.end} for r in req.rows.ranges],
        "whole_table": req.rows.is_whole_table(),
        "filter": flt, "limit": req.limit or None, "reverse": req.reverse,
    })
    return out


COMMAND = Command(
    "explain", "show the read plan of a range query",
    "Show how a time-range query (or, with --current, a current-value query) "
    "reads Bigtable: the table, row ranges, filters and whether it scans.\n\n"
    "example:\n  tsmodel explain examples/server_metrics.py:ServerMetric \\\n"
    "      --start 2015-03-16T19:00Z --end 2015-03-16T20:00Z "
    "--field hostname=server1.aaa.bbb.com",
    _run,
    (TARGET,
     arg("--start", help="inclusive start, ISO 8601 (no offset means UTC)"),
     arg("--end", help="exclusive end, ISO 8601 (no offset means UTC)"),
     arg("--field", action="append", default=[], metavar="NAME=VALUE",
         help="a key field value (repeat for several)"),
     arg("--current", action="store_true",
         help="query the current-value table instead of a time range"),
     arg("--allow-scan", action="store_true",
         help="plan a query that is not served by a row-key prefix"),
     arg("--limit", type=int, help="at most this many events"),
     arg("--newest-first", action="store_true", help="newest events first"),
     url("; only its features (reverse scans) matter"),
     JSON))
