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

from tsmodel import errors
from tsmodel.plan.calls import Steps
from tsmodel.plan.deletes import DeletePlan, delete_steps
from tsmodel.plan.results import WriteResult
from tsmodel.plan.schedule import SaveSchedule, schedule_save

__all__ = ["Progress", "ProgressCallback", "WriteProgress", "Writing", "BAR_DELAY"]

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
            raise errors.ArgumentTypeError(
                f"{what}(progress=...): progress= takes True, False, None or a callable "
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


class Writing:
    """One save or delete on a connection (sync or async): its progress meter,
    its observed operation (``op``) and its steps.

    ``with Writing(conn, "save", progress) as w:`` then drive `save()` (or
    `delete()`) under ``w.op`` and hand the result to `done()`; however the
    block ends, the operation ends (with the result, or the error) and the
    bar closes.
    """

    def __init__(self, conn: Any, kind: str, progress: Progress) -> None:
        self.meter = WriteProgress(progress, kind)
        self.op = conn._observer.operation(kind)
        self._conn = conn
        self._result: Any = None

    def __enter__(self) -> Writing:
        return self

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        try:
            self.op.end(self._result, error)
        finally:
            self.meter.close()

    def save(self, entities: Iterable[Any], accept_expired: bool,
             validate_first: bool) -> SaveSchedule:
        """The schedule of a ``save_all`` reporting to the meter; its total is the
        events validated first, else the input's length if it has one."""
        conn = self._conn
        schedule = schedule_save(entities, conn.batch_size, conn.flow, trusted=conn._trusted,
                                 accept_expired=accept_expired, validate_first=validate_first)
        total = len(schedule.plan.events) if validate_first else length_of(entities)
        schedule.on_batch = self.meter.start(total)
        return schedule

    def delete(self, entities: Iterable[Any]) -> Steps[WriteResult]:
        """The steps of a ``delete_all`` reporting to the meter."""
        plan = DeletePlan(entities, self._conn.features)
        return delete_steps(plan, self._conn.batch_size, on_batch=self.meter.start(
            len(plan.events)))

    def done(self, result: WriteResult) -> WriteResult:
        """The operation's result (what it ends with)."""
        self._result = result
        return result
