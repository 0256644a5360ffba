"""Progress of a long save or delete: a bar on a terminal, or a callback.

``save_all(events, progress=...)`` and ``delete_all(..., progress=...)`` take:

* ``None`` (the default): a `tqdm` bar on standard error when it is a
  terminal, shown once the call has run for `BAR_DELAY` seconds (a quick
  save shows nothing); nothing when standard error is not a terminal.
* ``True``: the bar at once, wherever standard error goes; ``False``: none.
* a callable ``progress(done, total)``: called after each batch is answered
  with the entities done so far and the total (``None`` when the input has
  no length: a generator saved with ``validate_first=False``); no bar.

The total is the number of entities when it is known (every validated save
and every delete, a streamed save of a list), so the bar shows a percentage
and an ETA; otherwise it counts up.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Progress", "ProgressCallback", "WriteProgress", "BAR_DELAY"]

#: What a ``progress=`` callable receives: entities done, and the total (or ``None``).
ProgressCallback = Callable[[int, "int | None"], object]
#: What ``progress=`` takes.
Progress = bool | ProgressCallback | None
#: Seconds a save or a delete runs before its default bar shows.
BAR_DELAY = 1.0


class WriteProgress:
    """The progress of one save or delete, as ``progress=`` asks.

    Args:
        progress: ``None``, ``True``, ``False`` or a callable (above).
        what: the operation, the bar's label (``"save"``, ``"delete"``).

    Raises:
        TypeError: ``progress`` is none of those.
    """

    def __init__(self, progress: Progress, what: str) -> None:
        if not (progress is None or isinstance(progress, bool) or callable(progress)):
            raise TypeError(f"progress= takes True, False, None or a callable "
                            f"progress(done, total), got {progress!r}")
        self._setting = progress
        self._what = what
        self._callback: ProgressCallback | None = None
        if callable(progress) and not isinstance(progress, bool):
            self._callback = progress
        self.done = 0
        self.total: int | None = None
        self._bar: Any = None

    def start(self, total: int | None) -> Callable[[int], None]:
        """Begin with ``total`` entities (``None``: unknown); the per-batch hook."""
        self.total = total
        setting = self._setting
        show = sys.stderr.isatty() if setting is None else setting is True
        if show:
            from tqdm import tqdm  # type: ignore[import-untyped]

            self._bar = tqdm(desc=self._what, total=total, unit=" events", file=sys.stderr,
                             dynamic_ncols=True, delay=BAR_DELAY if setting is None else 0)
        return self.advance

    def advance(self, n: int) -> None:
        """``n`` more entities are done (their batch answered)."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        if self._callback is not None:
            self._callback(self.done, self.total)

    def close(self) -> None:
        """End the bar, if any."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def length_of(entities: Iterable[Any]) -> int | None:
    """``len(entities)``, or ``None`` for an input without a length (a generator)."""
    try:
        return len(entities)  # type: ignore[arg-type]
    except TypeError:
        return None


def watch_save(meter: WriteProgress, entities: Iterable[Any], validated: bool,
               schedule: Any) -> Any:
    """``schedule`` (a save's) reporting to ``meter``; its total is the events
    ``validated`` first, else the input's length if it has one."""
    total = len(schedule.plan.events) if validated else length_of(entities)
    schedule.on_batch = meter.start(total)
    return schedule


def watch_delete(meter: WriteProgress, plan: Any, batch_size: int) -> Any:
    """The steps of a delete of ``plan`` reporting to ``meter``."""
    from tsmodel.plan.deletes import delete_steps

    return delete_steps(plan, batch_size, on_batch=meter.start(len(plan.events)))
