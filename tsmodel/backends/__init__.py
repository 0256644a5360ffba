"""Storage backends: the embedded store and Cloud Bigtable, opened by URL.

The protocol they implement and the values they speak are in the ground
package (`tsmodel.ground.base`, re-exported here and as `tsmodel.backends.base`).

Only `tsmodel.backends.bigtable` imports ``google.cloud``; it is imported
lazily, when a Bigtable URL is opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import SplitResult, urlsplit

from tsmodel.backends import _urls

# The old paths of the ground vocabulary, loaded with the package as before.
from tsmodel.backends import base as base  # noqa: F401
from tsmodel.backends import gc as gc  # noqa: F401
from tsmodel.backends._urls import with_app_profile
from tsmodel.errors import ConfigurationError
from tsmodel.ground.base import AsyncBackend, Backend, Features, Reachable
from tsmodel.settings import DEFAULT_SETTINGS, Settings, resolve

__all__ = ["Backend", "AsyncBackend", "Features", "Reachable", "open_backend",
           "open_backend_async", "url_settings", "backend_for", "async_backend_for",
           "with_app_profile"]

_URL_FORMS = (
    "None or 'memory://' (embedded, in memory), 'sqlite:///relative/file.db' "
    "or 'sqlite:////absolute/file.db' (embedded, in a file), "
    "'bigtable://PROJECT/INSTANCE' (Cloud Bigtable; "
    "uses BIGTABLE_EMULATOR_HOST when it is set) or "
    "'bigtable-emulator://HOST:PORT/PROJECT/INSTANCE'"
)


_IN_MEMORY = (None, "", "memory://", "sqlite://", "sqlite://:memory:", "embedded://")


def open_backend(url: str | None = None, **settings: Any) -> Backend:
    """Open the backend a connection URL names.

    Args:
        url: see `tsmodel.connect()` for the accepted forms.
        **settings: connection settings (`Settings`),
            over the URL's query options.

    Returns:
        A ready backend.

    Raises:
        ConfigurationError: the URL is not understood, holds credentials
            (``user:password@``), or has an unknown option; a setting is
            unknown or out of range. The message shows the URL with anything
            secret-looking replaced by ``***``.
    """
    return backend_for(url, url_settings(url, settings))


def url_settings(url: str | None, options: Mapping[str, Any]) -> Settings:
    """The settings of ``url``'s query options, with the keyword ``options`` over them.

    Raises:
        ConfigurationError: as for `open_backend()`.
    """
    if url is not None and not isinstance(url, str):
        raise ConfigurationError(
            f"a connection URL is a str or None, got {type(url).__name__} {url!r}; for "
            "a file write 'sqlite:///relative/file.db' or 'sqlite:////absolute/file.db'")
    if url in _IN_MEMORY:
        return resolve({}, options)
    assert url is not None
    parts = _urls.split(url)
    return resolve(_urls.options(url, parts), options, where=repr(_urls.redact(url)))


def backend_for(url: str | None, settings: Settings = DEFAULT_SETTINGS) -> Backend:
    """The backend of ``url`` with resolved ``settings`` (`url_settings()`).

    The URL's query options are not read here: they are in ``settings``.

    Raises:
        ConfigurationError: the URL is not understood.
    """
    if url in _IN_MEMORY:
        from tsmodel.backends.embedded import EmbeddedBackend

        return EmbeddedBackend()
    assert url is not None
    parts = _urls.split(url)
    if parts.scheme == "memory" and not parts.netloc and parts.path in ("", "/"):
        from tsmodel.backends.embedded import EmbeddedBackend

        return EmbeddedBackend()  # memory://?option=...
    if parts.scheme in ("sqlite", "embedded"):
        if parts.netloc:
            raise ConfigurationError(
                f"cannot open {_urls.redact(url)!r}: like SQLAlchemy, write "
                "sqlite:///relative/path.db or sqlite:////absolute/path.db (three slashes, "
                "then the path)"
            )
        if parts.path == "/":  # the file's path left out (an unset variable?)
            raise ConfigurationError(
                f"cannot open {_urls.redact(url)!r}: the path of the database file is empty; "
                f"write {parts.scheme}:///path/to/file.db (relative) or "
                f"{parts.scheme}:////path/to/file.db (absolute) for a file, or memory:// for "
                "an in-memory store that keeps nothing when closed"
            )
        path = parts.path[1:] or ":memory:"  # drop the slash that ends the empty authority
        from tsmodel.backends.embedded import EmbeddedBackend

        return EmbeddedBackend(path)
    if parts.scheme in ("bigtable", "bigtable-emulator"):
        from tsmodel.backends.bigtable import BigtableBackend

        return BigtableBackend(**_bigtable_args(url, parts), settings=settings)
    raise ConfigurationError(f"cannot open {_urls.redact(url)!r}: expected {_URL_FORMS}")


def open_backend_async(url: str | None = None, **settings: Any) -> AsyncBackend:
    """Open the asyncio backend a connection URL names (call it in a running event loop).

    Bigtable URLs open `AsyncBigtableBackend`;
    embedded ones the embedded store behind
    `ThreadedBackend` (its SQLite calls run
    in worker threads).

    Args:
        url: as for `open_backend()`.
        **settings: as for `open_backend()`.

    Raises:
        ConfigurationError: the URL or a setting is not understood.
    """
    return async_backend_for(url, url_settings(url, settings))


def async_backend_for(url: str | None, settings: Settings = DEFAULT_SETTINGS) -> AsyncBackend:
    """`backend_for()`, for asyncio (see `open_backend_async()`)."""
    if url not in _IN_MEMORY:
        assert url is not None
        parts = _urls.split(url)
        if parts.scheme in ("bigtable", "bigtable-emulator"):
            from tsmodel.backends.bigtable_async import AsyncBigtableBackend

            return AsyncBigtableBackend(**_bigtable_args(url, parts), settings=settings)
    from tsmodel.backends.threaded import ThreadedBackend

    return ThreadedBackend(backend_for(url, settings))


def _bigtable_args(url: str, parts: SplitResult) -> dict[str, Any]:
    """The project, instance and emulator of a ``bigtable://`` or emulator URL."""
    scheme, netloc = parts.scheme, parts.netloc
    segments = [s for s in parts.path.split("/") if s]
    if scheme == "bigtable":
        segments = [netloc, *segments]
        emulator_host = os.environ.get("BIGTABLE_EMULATOR_HOST") or None
    else:
        emulator_host = netloc
    if len(segments) != 2 or not all(segments) or not emulator_host and scheme != "bigtable":
        raise ConfigurationError(f"cannot open {_urls.redact(url)!r}: expected {_URL_FORMS}")
    if emulator_host is not None and not _host_and_port(emulator_host):
        given = ("the emulator's address" if scheme == "bigtable-emulator"
                 else "BIGTABLE_EMULATOR_HOST")
        raise ConfigurationError(
            f"cannot open {_urls.redact(url)!r}: {given} must be HOST:PORT with a port "
            f"from 1 to 65535 (such as localhost:8086, as 'tsmodel emulator' prints), "
            f"got {emulator_host!r}")
    return {"project": segments[0], "instance": segments[1], "emulator_host": emulator_host}


def _host_and_port(address: str) -> bool:
    """Whether ``address`` is ``HOST:PORT`` (``[::1]:PORT`` for IPv6), the port 1-65535."""
    try:
        parts = urlsplit("//" + address)
        port = parts.port
    except ValueError:  # not a number, or out of range
        return False
    return bool(parts.hostname) and port is not None and port > 0
