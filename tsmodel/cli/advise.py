"""``tsmodel advise``: row sizes, versions and hotspot risk for an event rate."""

from __future__ import annotations

import argparse

from tsmodel import spec_of
from tsmodel.cli._common import (
    JSON,
    TARGET,
    Command,
    arg,
    print_json,
    print_note,
    print_table,
)
from tsmodel.cli._style import BOLD, GREEN, RED, YELLOW
from tsmodel.cli._targets import one_model
from tsmodel.plan.advice import Advice, advise

__all__ = ["COMMAND"]


#: The hotspot risk levels' colours on a terminal.
_RISK_COLOURS = {"high": f"{BOLD};{RED}", "medium": YELLOW, "low": GREEN}


def _run(args: argparse.Namespace) -> int:
    model = one_model(args.target)
    advice = advise(model, args.rate, args.entities)
    if args.json:
        print_json(advice.to_dict())
        return 0
    print(f"{_headline(model, advice)}\n")
    print_table(("MEASURE", "VALUE"), advice.rows(), colours=_RISK_COLOURS)
    if advice.notes:
        print()
    for note in advice.notes:
        print_note(note)
    return 0


def _headline(model: type, advice: Advice) -> str:
    """``ServerMetric at 0.2 events/s per entity: a row per event, no time bucket``."""
    spec = spec_of(model)
    layout = getattr(getattr(spec, "layout", None), "describe", lambda: "a row per event")()
    bucket = f"{advice.bucket} buckets" if advice.bucket else "no time bucket"
    who = "per entity" if advice.entities is None else f"for each of {advice.entities:,} entities"
    return f"{advice.model} at {advice.rate:g} events/s {who}: {layout}, {bucket}"


COMMAND = Command(
    "advise", "size rows and rate the hotspot risk for an event rate",
    "For an event rate per entity: events, rows and cells per bucket (per day "
    "without a bucket), the estimated row size, the versions a row needs and "
    "the GC rule keeps, and the hotspot risk of the row key's leading segment.",
    _run,
    (TARGET,
     arg("--rate", type=float, metavar="EVENTS_PER_SEC",
         help="events per second of one entity (default: the model's max_rate)"),
     arg("--entities", type=int, metavar="N",
         help="how many entities write (distinct row keys without the time)"),
     JSON))
