"""Every private name of google-cloud-bigtable and grpc that tsmodel relies on, in one place.

The Bigtable backend keeps to its client library's public API except at the
points listed in `INTERNALS`, each with the reason tsmodel needs it.
Each such name is reached here and nowhere else, the way PynamoDB keeps the
private botocore APIs it uses in one ``_botocore_private.py``. When a release
of the client drops or moves one, connecting raises
`ConfigurationError` naming the missing internal, the
installed google-cloud-bigtable version and the supported range: never a
silent fallback to slower or subtly different behaviour.

pyproject.toml pins google-cloud-bigtable to `SUPPORTED_RANGE`: 2.33
is the first release with the channel hook below, and the upper bound is the
next minor after the newest release tested (2.50.2; 2.33.0 was tested too).
Raise it after running the test suite on the newer client.

Private names that tsmodel no longer needs (do not bring them back):
``BigtableDataClient._emulator_host`` (the backend knows its emulator host),
``data._sync_autogen._swappable_channel.SwappableChannel`` (the emulator data
path has its own public ``grpc.insecure_channel``) and ``SwappableChannel._channel``
(a raw call is made on the client's channel each time, so a refreshed channel
is used at once; making the call object costs under a microsecond).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from typing import Any, NamedTuple

import grpc
import grpc.experimental
from google.cloud.bigtable import data as bt

from tsmodel.errors import ConfigurationError

__all__ = [
    "SUPPORTED_RANGE", "Internal", "INTERNALS", "CHANNEL_HOOK", "SINGLE_THREADED_UNARY_STREAM",
    "DataClient", "lookup", "missing", "require_channel_hook", "single_threaded_unary_stream",
    "installed_version",
]

#: The google-cloud-bigtable versions tsmodel supports; pyproject.toml pins the same.
SUPPORTED_RANGE = ">=2.33,<2.51"


class Internal(NamedTuple):
    """A private name tsmodel uses: its full name, and why tsmodel needs it."""

    name: str
    why: str


CHANNEL_HOOK = Internal(
    "google.cloud.bigtable.data.BigtableDataClient._build_grpc_channel",
    "the data client's gRPC transport calls it to create its channel (since 2.33); tsmodel "
    "overrides it to add the SingleThreadedUnaryStream channel option, so that its raw "
    "ReadRows and MutateRows calls run on the client's own channel (credentials, endpoint, "
    "metrics, channel refresh and warm-up) and streamed reads run about 4x faster",
)
SINGLE_THREADED_UNARY_STREAM = Internal(
    "grpc.experimental.ChannelOptions.SingleThreadedUnaryStream",
    "gRPC Python hands each streamed message over on the calling thread with this option "
    "instead of from a background thread, where ~80% of a read's time went; it is part "
    "of grpcio's EXPERIMENTAL API, outside its stability promise",
)
#: Everything private that tsmodel uses, for the docs and the tests.
INTERNALS = (CHANNEL_HOOK, SINGLE_THREADED_UNARY_STREAM)


def installed_version(distribution: str = "google-cloud-bigtable") -> str:
    """The installed version of ``distribution``, or ``"unknown"``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def missing(internal: Internal, what: str = "is missing") -> ConfigurationError:
    """The error for an internal that the installed client lacks (``what`` says how)."""
    return ConfigurationError(
        f"tsmodel needs {internal.name}, a private part of its Bigtable client, and it {what} "
        f"in the installed google-cloud-bigtable {installed_version()} (grpcio "
        f"{installed_version('grpcio')}). tsmodel supports google-cloud-bigtable"
        f"{SUPPORTED_RANGE}: install one with "
        f"`pip install 'google-cloud-bigtable{SUPPORTED_RANGE}'`. "
        f"(Why tsmodel uses it: {internal.why}.)"
    )


def lookup(owner: object, attribute: str, internal: Internal) -> Any:
    """``owner.attribute``, or `missing()` raised for ``internal``.

    Raises:
        ConfigurationError: ``owner`` has no ``attribute``.
    """
    try:
        return getattr(owner, attribute)
    except AttributeError:
        raise missing(internal) from None


def single_threaded_unary_stream(options: object = grpc.experimental.ChannelOptions) -> str:
    """The name of gRPC Python's ``SingleThreadedUnaryStream`` channel option.

    Args:
        options: where to look it up (gRPC's ``ChannelOptions``; tests pass
            a stand-in).

    Raises:
        ConfigurationError: the installed grpcio has no such option.
    """
    name: str = lookup(options, "SingleThreadedUnaryStream", SINGLE_THREADED_UNARY_STREAM)
    return name


def require_channel_hook(client_class: type = bt.BigtableDataClient) -> None:
    """Check that ``client_class`` still has the channel hook `DataClient` overrides.

    Raises:
        ConfigurationError: it has none (google-cloud-bigtable older than 2.33,
            or a release that renamed it).
    """
    if not callable(lookup(client_class, "_build_grpc_channel", CHANNEL_HOOK)):
        raise missing(CHANNEL_HOOK, "is not a method")


class DataClient(bt.BigtableDataClient):
    """The data client, with more options on the gRPC channels its transport creates.

    Args:
        channel_options: gRPC channel options added to the client's own (on
            Cloud Bigtable; the client makes its emulator channel without any).
        **kwargs: the arguments of ``BigtableDataClient``.

    Raises:
        ConfigurationError: the client does not create its channel through
            the hook (see `CHANNEL_HOOK`).
    """

    def __init__(self, *, channel_options: Sequence[tuple[str, Any]] = (),
                 **kwargs: Any) -> None:
        require_channel_hook()
        self._tsmodel_channel_options = tuple(channel_options)
        self._tsmodel_channels_built = 0
        super().__init__(**kwargs)
        if not self._tsmodel_channels_built:
            self.close()
            raise missing(CHANNEL_HOOK, "is not called to create the client's channel")

    def _build_grpc_channel(self, *args: Any, **kwargs: Any) -> Any:
        self._tsmodel_channels_built += 1
        kwargs["options"] = [*kwargs.get("options", ()), *self._tsmodel_channel_options]
        return super()._build_grpc_channel(*args, **kwargs)
