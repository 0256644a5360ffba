"""Fixtures that run the conformance suite on every backend.

They are thin aliases of the tsmodel pytest plugin's (tsmodel/testing/plugin.py,
loaded by tests/conftest.py), which users get too: ``backend`` is the plugin's
``tsmodel_session_backend``, parametrized over the embedded store and the Cloud
Bigtable emulator; ``emulator`` is ``tsmodel_emulator``, started once per test
session on a free loopback port and stopped at the end. Without the emulator
the emulator half is skipped, except under ``CI=true``, where a missing
emulator fails the run.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from tsmodel.backends.base import AsyncBackend, Backend
from tsmodel.backends.emulator import Emulator


@pytest.fixture(scope="session")
def emulator(tsmodel_emulator: Emulator) -> Emulator:
    return tsmodel_emulator


@pytest.fixture(scope="session")
def backend(tsmodel_session_backend: Backend) -> Backend:
    """One backend per kind for the whole session; tests use unique table names."""
    return tsmodel_session_backend


@pytest.fixture
def table_name() -> str:
    """A table name no other test uses."""
    return "t_" + uuid.uuid4().hex[:12]


@contextlib.asynccontextmanager
async def asynchronous(backend: Backend) -> AsyncIterator[AsyncBackend]:
    """The asyncio backend of the same kind and store as ``backend`` (the session's).

    The embedded store is shared through :class:`ThreadedBackend` (and stays
    open); the emulator gets an :class:`AsyncBigtableBackend` of its own,
    closed at the end.
    """
    from tsmodel.backends.bigtable import BigtableBackend
    from tsmodel.backends.threaded import ThreadedBackend

    if not isinstance(backend, BigtableBackend):
        yield ThreadedBackend(backend)
        return
    from tsmodel.backends.bigtable_async import AsyncBigtableBackend

    async with AsyncBigtableBackend(backend.project, backend.instance,
                                    emulator_host=backend.emulator_host) as b:
        yield b
