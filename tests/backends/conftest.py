"""Fixtures that run the conformance suite on every backend.

The ``backend`` fixture is parametrized over the embedded store and the Cloud
Bigtable emulator. The emulator is started once per test session on a free
loopback port and stopped at the end. Without the emulator the emulator half
is skipped, except under ``CI=true``, where a missing emulator fails the run.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from tsmodel.backends.base import AsyncBackend, Backend
from tsmodel.errors import EmulatorNotFoundError

BACKENDS = ["embedded", "emulator"]


@pytest.fixture(scope="session")
def emulator() -> Iterator[object]:
    from tsmodel.backends.emulator import Emulator, find_emulator

    try:
        binary = find_emulator()
    except EmulatorNotFoundError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the Bigtable emulator is missing: {exc}", pytrace=False)
        pytest.skip(f"Bigtable emulator not installed: {exc}")
    emu = Emulator(binary)
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """One backend per kind for the whole session; tests use unique table names."""
    if request.param == "embedded":
        from tsmodel.backends.embedded import EmbeddedBackend

        b: Backend = EmbeddedBackend()
    else:
        from tsmodel.backends.bigtable import BigtableBackend

        emu = request.getfixturevalue("emulator")
        b = BigtableBackend(
            project="tsmodel-test", instance="tsmodel-test", emulator_host=emu.host_port
        )
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
