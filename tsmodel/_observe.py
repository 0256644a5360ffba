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
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

__all__ = ["RETRY_LOG", "CALL_LOG", "WRITE_LOG", "JOB_LOG", "RetryCount", "RETRIES"]

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
