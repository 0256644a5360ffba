"""Query results as polars data frames (``pip install 'tsmodel-bigtable[polars]'``).

The frame is the Arrow table of `tsmodel.io.arrow`, handed to polars
(no copy for most columns): string key fields become ``Categorical``, times
``Datetime(<unit>, "UTC")``, the other columns their Arrow types' polars twins.
"""

from __future__ import annotations

from typing import Any

from tsmodel.io import require

__all__ = ["frame_of", "require_all"]


def frame_of(table: Any, what: str = "to_polars()") -> Any:
    """The ``polars.DataFrame`` of a ``pyarrow.Table`` of query results.

    Raises:
        ExtraNotInstalledError: polars is not installed.
    """
    pl = require("polars", "polars", what)
    return pl.from_arrow(table)


def require_all(what: str) -> None:
    """Check, before reading, that pyarrow and polars are installed.

    Raises:
        ExtraNotInstalledError: one of them is not installed.
    """
    require("pyarrow", "polars", what)
    require("polars", "polars", what)
