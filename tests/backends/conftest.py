"""Fixtures that run the conformance suite on every backend.

They come from tsmodel's pytest plugin (tsmodel/testing/plugin.py, loaded by
tests/conftest.py), which users get too: ``emulator`` is its
``tsmodel_emulator``, started once per test session on a free loopback port
and stopped at the end; ``backend`` gives what its ``tsmodel_session_backend``
gives (one store per kind for the whole session, opened by the plugin's
``open_backend``), parametrized under the name that the suite's test ids and
``request.node.callspec.params["backend"]`` use. Without the emulator the
emulator half is skipped, except under ``CI=true``, where a missing emulator
fails the run.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from tsmodel.backends.base import AsyncBackend, Backend
from tsmodel.backends.emulator import Emulator
from tsmodel.testing import BACKEND_KINDS
from tsmodel.testing.plugin import SESSION_INSTANCE, open_backend


@pytest.fixture(scope="session")
def emulator(tsmodel_emulator: Emulator) -> Emulator:
    return tsmodel_emulator


@pytest.fixture(scope="session", params=BACKEND_KINDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """One backend per kind for the whole session; tests use unique table names."""
    b = open_backend(request.param, request, instance=SESSION_INSTANCE)
    try:
        yield b
    finally:
        b.close()


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
