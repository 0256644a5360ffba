"""Declarations about a table's cells beyond the value columns: what cell timestamps mean.

Checked once, when the model class is defined. By default every cell
timestamp is its event's time; ``event_time_cells=False`` declares a table
whose cells carry other times (another program's write time), which only
layouts that hold the event time in the row key or the qualifier can read.
"""

from __future__ import annotations

from tsmodel import errors
from tsmodel.declare.spec import ModelSpec

__all__ = ["check_cell_times"]


def check_cell_times(spec: ModelSpec) -> None:
    """Refuse what cannot work with cell timestamps that are not event times.

    Raises:
        DeclarationError: the layout reads event times from cell timestamps,
            or the model keeps a current-value table.
    """
    if spec.event_time_cells:
        return
    if spec.layout.reads_time_from_cells:
        raise errors.DeclarationError(
            f"{spec.name}: event_time_cells=False, but layout={spec.layout.name} reads each "
            "event's time from its cell timestamp; only a layout that holds the time in the "
            "row key or the qualifier (ts.rows(), ts.offsets(step)) can read a table whose "
            "cell timestamps are not event times")
    if spec.current_table is not None:
        raise errors.DeclarationError(
            f"{spec.name}: event_time_cells=False with current={spec.current_table!r}: a "
            "current-value row has no time in its key, its cell timestamps say which event "
            "is newest and when it happened. Drop current=; latest() then reads the newest "
            "row of the main table by its key")
