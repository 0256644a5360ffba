"""How users declare models, as a type checker sees it (checked by mypy in
tests/unit/test_user_types.py; never imported).

A line that ends in ``# error: CODE`` must get that mypy error, and no other
line may get one.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from typing_extensions import assert_type

import tsmodel as ts


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC",
          retention=timedelta(days=30), max_rate=10, max_versions=None,
          unknown_columns="error", layout=ts.rows(), allow_hotspot=False,
          alternates=[ts.alternate("METRIC_BY_TIME", "time", "host")])
class Metric:
    host: str = ts.key()
    time: datetime = ts.timestamp()
    cpu: float = ts.value()


assert_type(Metric(host="a", time=datetime(2026, 1, 1), cpu=1.0), Metric)
assert_type(ts.spec_of(Metric), ts.ModelSpec)
Metric(host=1, time=datetime(2026, 1, 1), cpu=1.0)  # error: arg-type


@ts.model  # error: arg-type
class Bare:  # error: call-arg
    time: datetime = ts.timestamp()


ts.model(table="T")  # error: call-arg
ts.model(table="T", family="F", tabel="X")  # error: call-arg
ts.model(table="T", family="F", max_rate="5")  # error: arg-type
ts.model(table="T", family="F", unknown_columns="skip")  # error: arg-type
ts.model(table="T", family="F", retention=30)  # error: arg-type
