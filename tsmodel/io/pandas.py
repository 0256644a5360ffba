"""Query results as pandas data frames (``pip install 'tsmodel-bigtable[pandas]'``).

The frame is the Arrow table of `tsmodel.io.arrow`, converted with
nullable pandas dtypes: ``Int64`` for integers, ``boolean`` for booleans,
``string`` for text, ``category`` for string key fields,
``datetime64[<unit>, UTC]`` for times; floats stay ``float64`` (a missing
optional float is ``NaN``).
"""

from __future__ import annotations

from typing import Any

from tsmodel.io import require

__all__ = ["frame_of", "require_all"]


def frame_of(table: Any, what: str = "to_pandas()") -> Any:
    """The ``pandas.DataFrame`` of a ``pyarrow.Table`` of query results.

    Raises:
        ExtraNotInstalledError: pandas is not installed.
    """
    pd = require("pandas", "pandas", what)
    pa = require("pyarrow", "pandas", what)
    nullable = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(),
                pa.string(): pd.StringDtype()}
    return table.to_pandas(types_mapper=nullable.get)


def require_all(what: str) -> None:
    """Check, before reading, that pyarrow and pandas are installed.

    Raises:
        ExtraNotInstalledError: one of them is not installed.
    """
    require("pyarrow", "pandas", what)
    require("pandas", "pandas", what)
