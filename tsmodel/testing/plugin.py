"""The tsmodel pytest plugin: run your tests on the embedded store and the emulator.

Installing tsmodel registers this module with pytest (a ``pytest11`` entry
point), so its fixtures are there in every test suite; they do nothing until a
test asks for one. Every name starts with ``tsmodel_``.

Fixtures:

* ``tsmodel_connection``: a `Connection` on a fresh, empty
  store, made the default connection for the test (``Model.range(...)``
  without ``.using()`` reads it), closed afterwards.
* ``tsmodel_backend``: the fresh store itself (a
  `Backend`), closed afterwards.
* ``tsmodel_url``: a URL of a fresh, empty store, for code that calls
  ``tsmodel.connect(url)`` itself.
* ``tsmodel_backend_kind``: ``"embedded"`` or ``"emulator"``.
* ``tsmodel_session_backend``: one store per kind shared by the whole session
  (faster; tests must then use table names of their own).
* ``tsmodel_emulator``: the Cloud Bigtable emulator
  (`Emulator`), started once per session on
  a free loopback port and stopped at the end.

A test that uses any of the first five runs once per backend kind: on the
embedded store (an in-memory SQLite store, or a file for ``tsmodel_url``) and
on the emulator (a new instance per test). Without the emulator installed the
emulator half is skipped, unless the ``CI`` environment variable is ``true``:
then it fails. Choose the kinds for the run with ``--tsmodel-backends=embedded``
(or the ``tsmodel_backends`` ini option), and for one test with
``@pytest.mark.tsmodel_backends("emulator")``.

Turn the plugin off with ``-p no:tsmodel.testing.plugin``. Importing it
imports tsmodel and pytest only: it starts nothing until a fixture is used.
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tsmodel.errors import ArgumentError
from tsmodel.testing import BACKEND_KINDS

if TYPE_CHECKING:
    from tsmodel.backends.emulator import Emulator
    from tsmodel.ground.base import Backend
    from tsmodel.run.connection import Connection

__all__ = [
    "tsmodel_emulator",
    "tsmodel_backend_kind",
    "tsmodel_session_backend",
    "tsmodel_backend",
    "tsmodel_connection",
    "tsmodel_url",
    "open_backend",
]

_KIND = "tsmodel_backend_kind"
_MARKER = "tsmodel_backends"
#: The project of every emulator store the fixtures open.
PROJECT = "tsmodel-test"
#: The instance of the session's shared emulator store.
SESSION_INSTANCE = "tsmodel-test"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tsmodel", "tsmodel fixtures")
    group.addoption(
        "--tsmodel-backends", dest="tsmodel_backends", default=None, metavar="KINDS",
        help="comma-separated backend kinds that tests using the tsmodel_* fixtures "
             f"run on, of {', '.join(BACKEND_KINDS)} (default: the tsmodel_backends "
             "ini option, else all)")
    parser.addini(_MARKER, "backend kinds that tests using the tsmodel_* fixtures run on "
                  f"(of {', '.join(BACKEND_KINDS)}; default: all)", type="args", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{_MARKER}(*kinds): run this test's tsmodel fixtures on these backend "
                   f"kinds only (of {', '.join(BACKEND_KINDS)})")
    _configured_kinds(config)  # a typo is a usage error at once, not a skip later


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that uses a tsmodel fixture once per backend kind."""
    if _KIND not in metafunc.fixturenames or _parametrized_directly(metafunc):
        return
    kinds = _configured_kinds(metafunc.config)
    marker = metafunc.definition.get_closest_marker(_MARKER)
    if marker is not None:
        chosen = _kinds(marker.args, f"@pytest.mark.{_MARKER} of {metafunc.definition.nodeid}")
        kinds = tuple(kind for kind in kinds if kind in chosen)
    metafunc.parametrize(_KIND, kinds, indirect=True, ids=list(kinds), scope="session")


def _parametrized_directly(metafunc: pytest.Metafunc) -> bool:
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [name.strip() for name in names.split(",")]
        if _KIND in names:
            return True
    return False


def _configured_kinds(config: pytest.Config) -> tuple[str, ...]:
    option = config.getoption("tsmodel_backends", None)
    if option:
        return _kinds([option], "--tsmodel-backends")
    ini: list[str] = config.getini(_MARKER)
    return _kinds(ini, f"the {_MARKER} ini option") if ini else BACKEND_KINDS


def _kinds(values: object, where: str) -> tuple[str, ...]:
    """Backend kinds from ``"a,b"`` / ``"a b"`` strings, in `BACKEND_KINDS` order."""
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
        raise pytest.UsageError(f"{where}: give backend kinds as strings, got {values!r}")
    names = {name for value in values for name in re.split(r"[,\s]+", value) if name}
    unknown = sorted(names - set(BACKEND_KINDS))
    if unknown or not names:
        raise pytest.UsageError(
            f"{where}: unknown backend kind(s) {', '.join(map(repr, unknown)) or '(none)'}; "
            f"choose among {', '.join(BACKEND_KINDS)}")
    return tuple(kind for kind in BACKEND_KINDS if kind in names)


@pytest.fixture(scope="session")
def tsmodel_emulator() -> Iterator[Emulator]:
    """The Cloud Bigtable emulator, on a free loopback port for the whole session.

    Its garbage collection runs from the start, every second or so, as Cloud
    Bigtable's may at any moment: a test sees cells a GC rule collects gone or
    not yet gone, whatever ran before it (the emulator on its own starts
    collecting only once some test changes a family's GC rule, so a test
    could pass alone and fail after another).

    On Linux the kernel stops it with the run's main thread: a run killed with
    SIGKILL leaves no emulator behind.

    Skips the test when ``cbtemulator`` is not installed, except under
    ``CI=true``, where that fails the test.
    """
    from tsmodel.backends.emulator import Emulator, find_emulator
    from tsmodel.errors import EmulatorNotFoundError

    try:
        binary = find_emulator()
    except EmulatorNotFoundError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the Bigtable emulator is missing: {exc}", pytrace=False)
        pytest.skip(f"Bigtable emulator not installed: {exc}")
    # Stopped by the kernel with the thread that starts it (a run killed with
    # SIGKILL leaves none behind): pytest's main thread lives as long as the session.
    emulator = Emulator(binary, stop_with_parent=(
        threading.current_thread() is threading.main_thread()))
    emulator.start()
    try:
        emulator.collect_garbage_continuously()
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture(scope="session")
def tsmodel_backend_kind(request: pytest.FixtureRequest) -> str:
    """``"embedded"`` or ``"emulator"``: the kind of store this test runs on."""
    kind: str = getattr(request, "param", BACKEND_KINDS[0])
    return kind


@pytest.fixture(scope="session")
def tsmodel_session_backend(tsmodel_backend_kind: str,
                            request: pytest.FixtureRequest) -> Iterator[Backend]:
    """One store per kind for the whole session: tests must use their own table names."""
    backend = open_backend(tsmodel_backend_kind, request, instance=SESSION_INSTANCE)
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture
def tsmodel_backend(tsmodel_backend_kind: str,
                    request: pytest.FixtureRequest) -> Iterator[Backend]:
    """A fresh, empty store for this test: in memory, or a new emulator instance."""
    backend = open_backend(tsmodel_backend_kind, request, instance=_fresh_instance())
    try:
        yield backend
    finally:
        try:
            if tsmodel_backend_kind == "emulator":
                _drop_tables(backend)
        finally:
            backend.close()


@pytest.fixture
def tsmodel_connection(tsmodel_backend: Backend) -> Iterator[Connection]:
    """A connection on a fresh store, the default connection while the test runs."""
    from tsmodel.run import connection as connection_module

    conn = connection_module.Connection(tsmodel_backend)
    previous = connection_module._default
    connection_module.set_default_connection(conn)
    try:
        yield conn
    finally:
        connection_module.set_default_connection(previous)
        conn.close()


@pytest.fixture
def tsmodel_url(tsmodel_backend_kind: str, request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a fresh, empty store, for ``tsmodel.connect(url)``.

    An SQLite file in a temporary directory on the embedded kind, a new
    instance on the emulator; its tables are dropped after the test.
    """
    if tsmodel_backend_kind == "embedded":
        yield f"sqlite:///{tmp_path_factory.mktemp('tsmodel') / 'tsmodel.db'}"
        return
    emulator: Emulator = request.getfixturevalue("tsmodel_emulator")
    instance = _fresh_instance()
    yield f"bigtable-emulator://{emulator.host_port}/{PROJECT}/{instance}"
    backend = open_backend("emulator", request, instance=instance)
    try:
        _drop_tables(backend)
    finally:
        backend.close()


def _fresh_instance() -> str:
    return "tsmodel-" + uuid.uuid4().hex[:16]


def open_backend(kind: str, request: pytest.FixtureRequest, *, instance: str) -> Backend:
    """Open a store of ``kind`` for a fixture of your own; close it when done.

    Args:
        kind: ``"embedded"`` (a new in-memory store) or ``"emulator"``.
        request: the fixture's request: the emulator kind starts the
            session's emulator through `tsmodel_emulator` (skipped, or failed
            under ``CI=true``, when it is not installed).
        instance: the emulator instance (any name makes a separate namespace
            of tables); ignored by the embedded kind.

    Raises:
        ValueError: ``kind`` is not one of `BACKEND_KINDS`.
    """
    if kind not in BACKEND_KINDS:
        raise ArgumentError(f"open_backend(kind): unknown backend kind {kind!r}; choose among "
                            f"{', '.join(BACKEND_KINDS)}")
    if kind == "embedded":
        from tsmodel.backends.embedded import EmbeddedBackend

        return EmbeddedBackend()
    from tsmodel.backends.bigtable import BigtableBackend

    emulator: Emulator = request.getfixturevalue("tsmodel_emulator")
    return BigtableBackend(project=PROJECT, instance=instance,
                           emulator_host=emulator.host_port)


def _drop_tables(backend: Backend) -> None:
    """Free the emulator's memory of a test's instance."""
    from tsmodel.errors import TsModelError

    try:
        for name in backend.list_tables():
            backend.delete_table(name)
    except TsModelError:
        pass  # closed by the test: the instance dies with the emulator
