"""What a `Connection` and an `AsyncConnection` hold alike: the state, not the I/O."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from tsmodel.ground.base import Features
from tsmodel.plan.cursors import secret_bytes
from tsmodel.plan.pacing import WritePacer
from tsmodel.plan.schedule import DEFAULT_FLOW, WriteFlow, check_write_options
from tsmodel.run.observe import Observer
from tsmodel.settings import DEFAULT_SETTINGS, Settings

__all__ = ["ConnectionState", "DEFAULT_BATCH_SIZE"]

#: Entities per bulk write call, per table (of both kinds of connection).
DEFAULT_BATCH_SIZE = 1000



class _Backend(Protocol):
    """What the state reads of a backend of either kind."""

    @property
    def features(self) -> Features: ...


B = TypeVar("B", bound=_Backend)


class ConnectionState(Generic[B]):
    """The backend, the write options, the observer and the pacer of a connection.

    The arguments are those of `tsmodel.Connection` (checked here, for both kinds).
    """

    def __init__(self, backend: B, *, batch_size: int = DEFAULT_BATCH_SIZE,
                 flow: WriteFlow = DEFAULT_FLOW, settings: Settings = DEFAULT_SETTINGS,
                 cursor_secret: str | bytes | None = None) -> None:
        check_write_options(batch_size, flow)
        #: The key that signs page tokens, or ``None``.
        self.cursor_secret = secret_bytes(cursor_secret)
        self.settings = settings
        #: The one instrumentation point: logs and telemetry of every operation.
        self._observer = Observer(settings)
        self.backend = backend
        self.batch_size = batch_size
        self.flow = flow
        #: The pace of writes the server asked for (``None`` with
        #: ``flow.server_rate_limits`` off): ``pacer.rate``, ``pacer.changes``.
        self.pacer: WritePacer | None = WritePacer() if flow.server_rate_limits else None
        #: Main tables that have taken a write here: their companions go with them.
        self._trusted: set[str] = set()

    @property
    def features(self) -> Features:
        return self.backend.features

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {type(self.backend).__name__}>"
