"""Without pyarrow, pandas or polars, the columnar results say which extra to install.

Runs in the core suite (where none of them is installed) and in a full
environment alike: the missing module is simulated by hiding it.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone

import pytest

import tsmodel as ts

UTC = timezone.utc


@ts.model(table="COLUMNAR_MISSING", family="F")
class Metric:
    host: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu: float = ts.value("CPU")


@pytest.fixture
def qs() -> ts.QuerySet[Metric]:
    db = ts.connect(default=False)
    db.create_tables(Metric)
    return Metric.range(datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 1, 2, tzinfo=UTC),
                        host="h").using(db)


@pytest.mark.parametrize(("call", "hidden", "extra"), [
    ("to_arrow", "pyarrow", "arrow"),
    ("to_arrow_batches", "pyarrow", "arrow"),
    ("to_pandas", "pandas", "pandas"),
    ("to_pandas", "pyarrow", "pandas"),
    ("to_polars", "polars", "polars"),
    ("to_polars", "pyarrow", "polars"),
])
def test_a_missing_extra_is_named(qs: ts.QuerySet[Metric], monkeypatch: pytest.MonkeyPatch,
                                  call: str, hidden: str, extra: str) -> None:
    monkeypatch.setitem(sys.modules, hidden, None)  # import raises ImportError
    with pytest.raises(ts.ExtraNotInstalledError) as raised:
        getattr(qs, call)()
    message = str(raised.value)
    assert f"{call}()" in message and hidden in message
    assert f"pip install 'tsmodel-bigtable[{extra}]'" in message  # from the package index
    # and from a checkout, in the editable mode type checkers follow
    assert f"pip install -e '.[{extra}]' --config-settings editable_mode=strict" in message
    assert isinstance(raised.value, ImportError)


def test_the_core_imports_no_extra() -> None:
    import subprocess

    code = ("import sys, tsmodel; from tsmodel.io import arrow, pandas, polars; "
            "print(sorted(m for m in ('pyarrow', 'pandas', 'polars') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
