"""Layouts: how one event becomes cells, and how a row's cells become events.

One layout per storage pattern of Google's time-series guide:

* `rows()` — a row per event (the default): a column per value field, or
  one serialized cell (single-timestamp unserialized / serialized);
* `cells()` — a bucket row, each event a new cell version at its event
  time in one column per value field ("new cells for new events");
* `columns()` — a bucket row, each event a new column whose qualifier is
  the encoded measurement and whose value is empty ("new columns for new
  events");
* `offsets()` — a bucket row with a column per time offset (``0000`` ...
  ``2345``) holding the measurement or the serialized event.

Every cell's timestamp is the event time (whole milliseconds), so writes are
idempotent and a timestamp-range filter selects events exactly.
`Layout` is the strategy each of them implements; a model compiles
its layout into a `TableCodec` per table.
"""

from tsmodel.layouts.base import Event, Layout, TableShape
from tsmodel.layouts.cells import Cells, cells
from tsmodel.layouts.codec import EncodedRow, TableCodec
from tsmodel.layouts.columns import Columns, columns
from tsmodel.layouts.offsets import Offsets, offsets
from tsmodel.layouts.rows import Rows, rows

__all__ = ["Layout", "TableShape", "Event", "TableCodec", "EncodedRow",
           "rows", "cells", "columns", "offsets", "Rows", "Cells", "Columns", "Offsets"]
