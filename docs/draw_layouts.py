"""Draw the row pictures of docs/patterns.md with `tsmodel layout`'s own code.

Each picture sits between ``<!-- tsmodel layout: NAME -->`` and
``<!-- end tsmodel layout -->`` in the page; this script redraws them from
the example models (examples/), saving the guide's sample events through the
library into an in-memory store and reading the rows back
(`tsmodel.cli.layout.sample_tables`). tests/test_cli_layout.py fails when a
picture is out of date.

    python docs/draw_layouts.py            # rewrite the pictures in place
    python docs/draw_layouts.py --check    # exit 1 if one is out of date
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "patterns.md"
_PICTURE = re.compile(r"(<!-- tsmodel layout: (\S+) -->\n).*?(<!-- end tsmodel layout -->)",
                      re.S)

UTC = timezone.utc
T0 = datetime(2021, 3, 5, 12, 0, tzinfo=UTC)
#: The guide's first weather-balloon reports (time-series-patterns: single-timestamp rows).
REPORTS = [dict(location="us-west2", balloon=3698, time=T0 + timedelta(minutes=i),
                pressure=p, temperature=t, humidity=h, altitude=a)
           for i, (p, t, h, a) in enumerate([(94558, 9.6, 61, 612), (94122, 9.7, 62, 611),
                                             (95992, 9.5, 58, 602)])]
DAY = datetime(2017, 7, 26, tzinfo=UTC)


def _balloons(model: type) -> list[Any]:
    return [model(**r) for r in REPORTS]


def _metric(model: type) -> list[Any]:
    return [model(location=r["location"], balloon=r["balloon"], metric="pressure",
                  time=r["time"], value=r["pressure"]) for r in REPORTS]


def _meters(model: type) -> list[Any]:
    return [model(meter=987654, time=DAY + timedelta(minutes=15 * i), kwh=k)
            for i, k in enumerate([12.34, 11.9, 13.05])]


#: Picture name -> (the model as ``tsmodel layout`` names it, its sample events).
FIGURES: dict[str, tuple[str, Callable[[type], list[Any]]]] = {
    "rows": ("examples/weather_balloons.py:BalloonRow", _balloons),
    "serialized": ("examples/weather_balloons.py:BalloonBlob", _balloons),
    "cells": ("examples/weather_balloons.py:BalloonWeek", _balloons),
    "columns": ("examples/weather_balloons.py:BalloonMetric", _metric),
    "offsets": ("examples/energy_meters.py:MeterReading", _meters),
}


def picture(name: str) -> str:
    """The HTML of one picture."""
    from tsmodel.cli._grid import render
    from tsmodel.cli._targets import one_model
    from tsmodel.cli.layout import sample_tables

    target, events = FIGURES[name]
    model = one_model(str(ROOT / target.split(":")[0]) + ":" + target.split(":")[1])
    return render(sample_tables(model, events(model)), "html")


def redrawn(text: str) -> str:
    """``text`` with every picture drawn anew."""
    def draw(match: re.Match[str]) -> str:
        if match.group(2) not in FIGURES:
            raise SystemExit(f"{PAGE.name}: no picture named {match.group(2)!r}")
        return f"{match.group(1)}\n{picture(match.group(2))}\n{match.group(3)}"

    return _PICTURE.sub(draw, text)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    text = PAGE.read_text(encoding="utf-8")
    new = redrawn(text)
    if "--check" in argv:
        if new != text:
            print(f"{PAGE.relative_to(ROOT)}: pictures out of date; run python "
                  "docs/draw_layouts.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
