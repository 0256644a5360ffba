"""tsmodel's loggers, and the retries of the backend call in progress.

The library logs through the standard `logging` module under these
names and never configures logging itself: this module gives the
``tsmodel`` logger a ``NullHandler`` (``tsmodel/__init__.py`` imports it
first), so nothing is printed until the application configures logging
(docs/operations.md). Refused scans are logged on ``tsmodel.queries`` by
`ScanRefusedError` itself (errors.py imports
nothing of tsmodel).

The Bigtable backend counts its retries into the `RetryCount` that
`RETRIES`, a context variable, holds when one of its operations starts;
the executors (`tsmodel.run.observe`) set it around the start of each
backend call, so a call made on a worker thread or in an asyncio task counts
into its own count, never into a neighbour's.

In the same way, the Bigtable backend notes the server's flow-control
answer (``RateLimitInfo`` in a ``MutateRows`` response) into the
`RateLimitNote` that `RATE_LIMITS` holds when its write starts; the write
executors set one around each write and hand what it noted to their
`tsmodel.plan.pacing.WritePacer`, which decides the pace.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import NamedTuple

__all__ = ["RETRY_LOG", "CALL_LOG", "WRITE_LOG", "JOB_LOG", "RetryCount", "RETRIES",
           "RateLimit", "RateLimitNote", "RATE_LIMITS"]

# A library never configures logging: records go nowhere until the application
# sets it up, and Python's last-resort handler never prints them to stderr.
logging.getLogger("tsmodel").addHandler(logging.NullHandler())

#: Retries of Bigtable calls (INFO), and calls whose retries ran out (WARNING).
RETRY_LOG = logging.getLogger("tsmodel.bigtable")
#: Backend calls slower than the ``slow_call_threshold`` setting (WARNING).
CALL_LOG = logging.getLogger("tsmodel.calls")
#: The outcomes of each save and delete, summed up (DEBUG).
WRITE_LOG = logging.getLogger("tsmodel.writes")
#: The progress of repair and snapshot jobs (INFO).
JOB_LOG = logging.getLogger("tsmodel.jobs")


class RetryCount:
    """The retries of one backend call (attempts after the first)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


#: The count of the backend call starting in this context, if it is observed:
#: a retry policy takes it when its operation starts, and counts into it.
RETRIES: ContextVar[RetryCount | None] = ContextVar("tsmodel_retries", default=None)


class RateLimit(NamedTuple):
    """What Cloud Bigtable asked of a bulk writer (``RateLimitInfo`` of ``MutateRows``).

    Attributes:
        period: seconds to wait before changing the rate again.
        factor: what to multiply the current rate by (below 1: slow down).
    """

    period: float
    factor: float


class RateLimitNote:
    """The rate limit the server answered one write with, if it answered one."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        #: The last `RateLimit` of the write's responses, or ``None``: the server sent none.
        self.seen: RateLimit | None = None


#: The note of the write starting in this context, if its executor paces writes:
#: a backend that receives a rate limit notes it there.
RATE_LIMITS: ContextVar[RateLimitNote | None] = ContextVar("tsmodel_rate_limits", default=None)
