"""Columnar results: Arrow record batches, pandas and polars data frames.

Each of these is an optional extra: ``pip install 'tsmodel-bigtable[arrow]'``
(pyarrow), ``'tsmodel-bigtable[pandas]'`` (pyarrow and pandas) or
``'tsmodel-bigtable[polars]'`` (pyarrow and polars). The core imports none of them;
`tsmodel.QuerySet.to_arrow()` and its siblings import them when called,
and say which extra to install when one is missing.

Rows become columns without model instances: the query's read plan streams
its rows into `ArrowColumns`, decoded by the table codec's generated column
decoders (`tsmodel.layouts.render_read`), or its records
(`tsmodel.layouts.TableCodec.records()`) where the plan filters or merges
events. Frames come in through `tsmodel.io.frames` (``save_frame()``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tsmodel.errors import ExtraNotInstalledError, install_hint

__all__ = ["require"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import an optional dependency, or say which extra installs it.

    Args:
        module: the module to import (``"pyarrow"``).
        extra: the tsmodel extra that installs it (``"arrow"``).
        what: the feature that needs it, for the message (``"to_arrow()"``).

    Raises:
        ExtraNotInstalledError: the module is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ExtraNotInstalledError(
            f"{what} needs {module}, which is not installed: {install_hint(extra)}") from exc
