"""Query results as pandas data frames (``pip install 'tsmodel-bigtable[pandas]'``).

The frame is the Arrow table of `tsmodel.io.arrow`, converted with
nullable pandas dtypes: ``Int64`` for integers, ``boolean`` for booleans,
``string`` for text, ``category`` for string key fields,
``datetime64[<unit>, UTC]`` for times; floats stay ``float64`` (a missing
optional float is ``NaN``), but for an optional float that takes NaN
(``ts.value(allow_nan=True)``), where NaN and missing are two values: its
column is a nullable ``Float64``, missing ``<NA>`` and NaN the number.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from tsmodel.io import require

__all__ = ["frame_of", "require_all"]


def frame_of(table: Any, what: str = "to_pandas()", *,
             nan_columns: Collection[str] = ()) -> Any:
    """The ``pandas.DataFrame`` of a ``pyarrow.Table`` of query results.

    Args:
        table: the results.
        what: the call, for the error.
        nan_columns: the float columns in which NaN is a value, apart from
            null: they become ``Float64`` columns, null ``<NA>`` and NaN kept.

    Raises:
        ExtraNotInstalledError: pandas is not installed.
    """
    pd = require("pandas", "pandas", what)
    pa = require("pyarrow", "pandas", what)
    nullable = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(),
                pa.string(): pd.StringDtype()}
    frame = table.to_pandas(types_mapper=nullable.get)
    for name in nan_columns:
        if name in table.column_names and table.schema.field(name).type == pa.float64():
            column = table.column(name)
            # Not pandas' own conversion from Arrow, which turns NaN into <NA> too.
            frame[name] = pd.arrays.FloatingArray(
                column.fill_null(0.0).to_numpy(), column.is_null().to_numpy())
    return frame


def require_all(what: str) -> None:
    """Check, before reading, that pyarrow and pandas are installed.

    Raises:
        ExtraNotInstalledError: one of them is not installed.
    """
    require("pyarrow", "pandas", what)
    require("pandas", "pandas", what)
