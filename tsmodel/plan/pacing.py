"""Pacing bulk writes by the server's flow control (Cloud Bigtable's ``RateLimitInfo``).

Cloud Bigtable may answer a ``MutateRows`` call with a rate limit: a
``factor`` to multiply the writer's load by, and a ``period`` to wait before
changing it again. The Java and C++ clients honour it; so does tsmodel.
The backend only reports what the server said (`tsmodel._observe.RATE_LIMITS`);
a `WritePacer` decides the pace, and the executors (`Connection`,
`AsyncConnection`, and through them the Beam sink and the jobs) wait as it
says before each write. No I/O here: the pacer reads a clock it is given and
answers how long to wait.

The pace is a rate in rows (entries of ``MutateRows``) per second, a load
comparable over time whatever the batch size:

* unpaced until the server first asks to slow down; the first limit is the
  rate measured over the last `WINDOW` seconds of writes, times the factor;
* a factor changes the rate at most once per period (a factor of 1 holds
  it for a period) (the period of the
  answer that changed it), and is clamped to [`MIN_FACTOR`, `MAX_FACTOR`]
  as the other official clients clamp it; the rate stays within
  [`MIN_RATE`, `MAX_RATE`];
* a factor above 1 raises the rate only if writes had to wait for it since
  the last change (a rate that does not hold writes back is not raised);
* once a period has passed since the last change, the first answer without
  a rate limit lifts it: the server stopped asking.

Each write is let go when the rows before it are paid for (a token bucket
that may run into debt, as Guava's ``RateLimiter``): a write of ``n`` rows
delays the next one by ``n / rate`` seconds.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

import attrs

from tsmodel._observe import RateLimit

__all__ = ["WritePacer", "RateChange", "MIN_FACTOR", "MAX_FACTOR", "MIN_RATE", "MAX_RATE",
           "WINDOW"]

#: The smallest and largest factor applied (the Java and C++ clients' bounds).
MIN_FACTOR, MAX_FACTOR = 0.7, 1.3
#: The slowest and fastest pace, in rows per second.
MIN_RATE, MAX_RATE = 1.0, 1e7
#: Seconds of past writes the first limit is measured over.
WINDOW = 2.0
#: The longest period honoured, in seconds (a longer one is taken as this).
MAX_PERIOD = 300.0
#: The shortest span a rate is measured over, in seconds.
_MIN_SPAN = 0.05


@attrs.frozen
class RateChange:
    """One change of the pace: what a log line or a test looks at.

    Attributes:
        time: when, on the pacer's clock.
        rate: the new pace in rows per second; ``None``: writes are no longer paced.
        before: the pace before (``None``: unpaced; then it was measured as ``measured``).
        factor: the factor applied (clamped), or ``None`` when the limit is lifted.
        period: seconds before the next change may come.
        measured: the rows per second measured when a first limit was set, else ``None``.
    """

    time: float
    rate: float | None
    before: float | None
    factor: float | None = None
    period: float = 0.0
    measured: float | None = None


class WritePacer:
    """The pace of one connection's writes, from the rate limits its server answers with.

    Thread-safe: a connection's writes may run on several threads at once.

    Args:
        clock: seconds, never going back (``time.monotonic``; tests give a fake one).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._rate: float | None = None
        #: When the rows handed out so far are paid for: the next write may go then.
        self._free = -math.inf
        #: No change of the rate before this time.
        self._next_change = -math.inf
        #: Whether a write had to wait since the last change.
        self._held = False
        #: Recent writes: (time, rows), for the first limit's measure.
        self._recent: deque[tuple[float, int]] = deque()
        #: Every change so far, oldest first (the last 100).
        self.changes: deque[RateChange] = deque(maxlen=100)

    @property
    def rate(self) -> float | None:
        """The pace in rows per second, or ``None``: writes are not paced."""
        return self._rate

    def wait(self, rows: int) -> float:
        """Take the turn of a write of ``rows`` rows: the seconds to wait before sending it."""
        now = self.clock()
        with self._lock:
            rate = self._rate
            if rate is None:
                self._note(now, rows)
                return 0.0
            start = max(now, self._free)
            self._free = start + rows / rate
            self._note(start, rows)
            if start > now:
                self._held = True
            return start - now

    def observe(self, seen: RateLimit | None) -> RateChange | None:
        """What the server answered a write with; the change of pace it makes, if any.

        Args:
            seen: the rate limit of the write's responses, or ``None`` if none carried one.
        """
        now = self.clock()
        with self._lock:
            if now < self._next_change:
                return None
            if seen is None:
                if self._rate is None:
                    return None
                change = RateChange(now, None, self._rate)
                self._rate, self._free, self._held = None, -math.inf, False
                self.changes.append(change)
                return change
            factor = _clamp(seen.factor, MIN_FACTOR, MAX_FACTOR, 1.0)
            period = _clamp(seen.period, 0.0, MAX_PERIOD, 0.0)
            before, measured = self._rate, None
            if before is None:
                if factor >= 1:
                    return None  # unpaced, and not asked to slow down
                measured = self._measured(now)
                base = measured
            else:
                if factor > 1 and not self._held:
                    self._next_change = now + period
                    return None  # the rate does not hold writes back: no use raising it
                base = before
            rate = _clamp(base * factor, MIN_RATE, MAX_RATE, MIN_RATE)
            self._held, self._next_change = False, now + period
            if rate == before:
                return None  # a factor of 1 (or a bound reached): the pace holds
            self._rate = rate
            if before is None:
                self._free = now
            change = RateChange(now, rate, before, factor, period, measured)
            self.changes.append(change)
            return change

    def _note(self, at: float, rows: int) -> None:
        recent = self._recent
        recent.append((at, rows))
        while recent[0][0] < at - WINDOW:
            recent.popleft()

    def _measured(self, now: float) -> float:
        """Rows per second sent over the last `WINDOW` seconds (or since the first write)."""
        recent = self._recent
        while recent and recent[0][0] < now - WINDOW:
            recent.popleft()
        if not recent:
            return MIN_RATE
        span = max(now - recent[0][0], _MIN_SPAN)
        return sum(rows for _, rows in recent) / span


def _clamp(value: float, low: float, high: float, otherwise: float) -> float:
    """``value`` within [low, high]; ``otherwise`` for a value that is no number (NaN)."""
    if math.isnan(value):
        return otherwise
    return min(high, max(low, value))
