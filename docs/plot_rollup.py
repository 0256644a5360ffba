"""Draw docs/img/rollup.png: a day of raw CPU events against its hourly rollup.

    pip install pandas matplotlib
    python docs/plot_rollup.py

Saves one day of a server's CPU (an event every 10 seconds: a daily cycle,
a burst in the afternoon, noise) to an in-memory embedded store with a
1-hour rollup, reads the raw events and the rollup rows back into pandas,
and draws the raw events with the rollup's mean, min and max per hour.
Deterministic (seeded): the image changes only when this script does.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import matplotlib  # type: ignore[import-not-found]

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # type: ignore[import-not-found]  # noqa: E402
import pandas as pd  # type: ignore[import-not-found]  # noqa: E402

import tsmodel as ts  # noqa: E402

DAY = datetime(2024, 5, 1, tzinfo=timezone.utc)
OUT = Path(__file__).resolve().parent / "img" / "rollup.png"


@ts.model(table="CPU", family="M", rollups=[ts.rollup("CPU_1H", "1h")])
class Cpu:
    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    usage: float = ts.value()


def day_of_events() -> list[Cpu]:
    rng = random.Random(2024)
    events = []
    for i in range(8_640):
        hours = i / 360
        usage = 30 + 20 * math.sin((hours - 9) / 24 * 2 * math.pi) + rng.gauss(0, 6)
        if 14 <= hours < 15.5:
            usage += 35 * math.exp(-((hours - 14.5) ** 2) * 8)
        events.append(Cpu(host="web-1", time=DAY + timedelta(seconds=10 * i),
                          usage=min(100.0, max(0.0, usage))))
    return events


def main() -> None:
    db = ts.connect("memory://", default=False)
    db.create_tables(Cpu)
    db.save_all(day_of_events())
    end = DAY + timedelta(days=1)
    raw = pd.DataFrame([{"time": e.time, "usage": e.usage}
                        for e in Cpu.range(DAY, end, host="web-1").using(db)])
    hourly = pd.DataFrame([{"time": r.time + timedelta(minutes=30), "mean": r.usage_mean,
                            "min": r.usage_min, "max": r.usage_max}
                           for r in Cpu.rollup("1h").using(db).range(DAY, end, host="web-1")])
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=100)
    ax.plot(raw["time"], raw["usage"], color="#9bb7d4", linewidth=0.5,
            label=f"raw events ({len(raw):,}, every 10 s)")
    ax.fill_between(hourly["time"], hourly["min"], hourly["max"], color="#f4a261", alpha=0.3,
                    step="mid", label="hourly min .. max (rollup)")
    ax.plot(hourly["time"], hourly["mean"], color="#e76f51", marker="o", linewidth=2,
            label=f"hourly mean ({len(hourly)} rollup rows)")
    ax.set_ylabel("CPU usage (%)")
    ax.set_title("One day of web-1: raw events and its 1-hour rollup")
    ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter("%H:%M", tz=timezone.utc))
    ax.set_xlim(DAY, end)
    ax.set_ylim(0, 105)
    ax.legend(loc="upper left", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    OUT.parent.mkdir(exist_ok=True)
    fig.savefig(OUT, metadata={"Software": None})
    print(f"wrote {OUT}: {len(raw)} events, {len(hourly)} hourly rows")


if __name__ == "__main__":
    main()
