"""Storage backends: the protocol, the embedded store, and Cloud Bigtable.

Only `tsmodel.backends.bigtable` imports ``google.cloud``; it is imported
lazily, when a Bigtable URL is opened.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import SplitResult

from tsmodel.backends import _urls
from tsmodel.backends.base import AsyncBackend, Backend, Features, Reachable
from tsmodel.errors import ConfigurationError

__all__ = ["Backend", "AsyncBackend", "Features", "Reachable", "open_backend",
           "open_backend_async"]

_URL_FORMS = (
    "None or 'memory://' (embedded, in memory), 'sqlite:///relative/file.db' "
    "or 'sqlite:////absolute/file.db' (embedded, in a file), "
    "'bigtable://PROJECT/INSTANCE' (Cloud Bigtable; "
    "uses BIGTABLE_EMULATOR_HOST when it is set) or "
    "'bigtable-emulator://HOST:PORT/PROJECT/INSTANCE'"
)


def open_backend(url: str | None = None) -> Backend:
    """Open the backend a connection URL names.

    Args:
        url: see `tsmodel.connect()` for the accepted forms.

    Returns:
        A ready backend.

    Raises:
        ConfigurationError: the URL is not understood, holds credentials
            (``user:password@``), or has an unknown option; the message shows
            the URL with anything secret-looking replaced by ``***``.
    """
    if url is None or url in ("", "memory://", "sqlite://", "sqlite://:memory:", "embedded://"):
        from tsmodel.backends.embedded import EmbeddedBackend

        return EmbeddedBackend()
    parts = _urls.split(url)
    if parts.scheme in ("sqlite", "embedded"):
        _urls.options(url, parts, ())
        if parts.netloc:
            raise ConfigurationError(
                f"cannot open {_urls.redact(url)!r}: like SQLAlchemy, write "
                "sqlite:///relative/path.db or sqlite:////absolute/path.db (three slashes, "
                "then the path)"
            )
        path = parts.path[1:]  # drop the slash that ends the empty authority
        if not path or path == ":memory:":
            path = ":memory:"
        from tsmodel.backends.embedded import EmbeddedBackend

        return EmbeddedBackend(path)
    if parts.scheme in ("bigtable", "bigtable-emulator"):
        from tsmodel.backends.bigtable import BigtableBackend

        return BigtableBackend(**_bigtable_args(url, parts))
    raise ConfigurationError(f"cannot open {_urls.redact(url)!r}: expected {_URL_FORMS}")


def open_backend_async(url: str | None = None) -> AsyncBackend:
    """Open the asyncio backend a connection URL names (call it in a running event loop).

    Bigtable URLs open `AsyncBigtableBackend`;
    embedded ones the embedded store behind
    `ThreadedBackend` (its SQLite calls run
    in worker threads).

    Args:
        url: as for `open_backend()`.

    Raises:
        ConfigurationError: the URL is not understood.
    """
    if url is not None and url not in ("", "memory://", "sqlite://", "sqlite://:memory:",
                                       "embedded://"):
        parts = _urls.split(url)
        if parts.scheme in ("bigtable", "bigtable-emulator"):
            from tsmodel.backends.bigtable_async import AsyncBigtableBackend

            return AsyncBigtableBackend(**_bigtable_args(url, parts))
    from tsmodel.backends.threaded import ThreadedBackend

    return ThreadedBackend(open_backend(url))


def _bigtable_args(url: str, parts: SplitResult) -> dict[str, Any]:
    """The arguments of a Bigtable backend for a ``bigtable://`` or emulator URL."""
    options = _urls.options(url, parts, ("app_profile",))
    scheme, netloc = parts.scheme, parts.netloc
    segments = [s for s in parts.path.split("/") if s]
    if scheme == "bigtable":
        segments = [netloc, *segments]
        emulator_host = os.environ.get("BIGTABLE_EMULATOR_HOST") or None
    else:
        emulator_host = netloc
    if len(segments) != 2 or not all(segments) or not emulator_host and scheme != "bigtable":
        raise ConfigurationError(f"cannot open {_urls.redact(url)!r}: expected {_URL_FORMS}")
    return {"project": segments[0], "instance": segments[1], "emulator_host": emulator_host,
            "app_profile_id": options.get("app_profile") or None}
