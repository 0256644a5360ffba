"""Cloud Bigtable (and its emulator) under asyncio: an ``AsyncBackend``.

The data path is the sync backend's. Writes are driven by the event loop:
the same raw protobuf requests (`_bigtable_wire`), the same steps of a
write (`mutate_steps()`: batching, the emulator's refusals, the
classification of each entry as APPLIED, FAILED or UNKNOWN), the same retry
policy (`_bigtable_rpc`), awaited on a ``grpc.aio`` channel. On Cloud
Bigtable that channel is the one google-cloud-bigtable's
``BigtableDataClientAsync`` builds, so its credentials, endpoint, channel
refresh and warm-up apply; on the emulator it is a plain insecure channel
without gRPC's 4 MiB receive limit. Reads are the sync backend's own, run in
a worker thread and handed to the loop a batch of rows per hop (see
`AsyncBigtableBackend.read_rows()` for why).

Table administration (create, describe, delete) goes through the same
`TableAdmin` as the sync backend, in a worker
thread: it is rare, and one code path for it is worth more than a thread hop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

import grpc
import grpc.aio
from google.cloud.bigtable.data import BigtableDataClientAsync

from tsmodel.backends._bigtable_rpc import AsyncDataRpc
from tsmodel.backends.bigtable import (
    BigtableBackend,
    MutateDriven,
    _BigtableBase,
    _check_listening,
)
from tsmodel.backends.threaded import ThreadedBackend
from tsmodel.ground.base import (
    MutationOutcome,
    ReadRequest,
    Row,
    RowMutation,
    TableSpec,
)
from tsmodel.settings import DEFAULT_SETTINGS, Settings

__all__ = ["AsyncBigtableBackend"]



class AsyncBigtableBackend(_BigtableBase):
    """Cloud Bigtable, or its emulator, as an `AsyncBackend`.

    Create it inside a running event loop (the data client starts its
    channel refresh there); `tsmodel.connect_async()` does. It is opened
    as the sync backend is (the same constructor, settings and retry
    policies), with google-cloud-bigtable's async data client and a
    ``grpc.aio`` channel.

    Args:
        project: the Google Cloud project id.
        instance: the Bigtable instance id.
        emulator_host: ``"HOST:PORT"`` of a ``cbtemulator``; ``None`` uses
            ``BIGTABLE_EMULATOR_HOST`` when it is set, else Cloud Bigtable.
        settings: as for `BigtableBackend`.

    Raises:
        BackendError: the clients could not be created (e.g. no credentials).
    """

    _data_client_class = BigtableDataClientAsync
    _rpc_class = AsyncDataRpc
    _insecure_channel = staticmethod(grpc.aio.insecure_channel)

    def __init__(self, project: str, instance: str, *, emulator_host: str | None = None,
                 settings: Settings = DEFAULT_SETTINGS) -> None:
        super().__init__(project, instance, emulator_host=emulator_host, settings=settings)
        #: The sync backend whose reads this one hands to the loop (see `read_rows()`).
        self._sync: ThreadedBackend | None = None
        self._blocking: BigtableBackend | None = None  # the backend ``_sync`` runs
        self._opening = asyncio.Lock()

    # -- tables: the sync admin calls, in a worker thread ------------------------

    async def create_table(self, spec: TableSpec) -> None:
        """See `tsmodel.backends.bigtable.BigtableBackend.create_table()`."""
        self._check_open()
        try:
            await asyncio.to_thread(self._admin.create_table, spec)
        finally:
            self._families.pop(spec.name, None)

    async def delete_table(self, name: str) -> None:
        """See `tsmodel.backends.bigtable.BigtableBackend.delete_table()`."""
        self._check_open()
        await asyncio.to_thread(self._admin.delete_table, name)
        target = self._targets.pop(name, None)
        self._families.pop(name, None)
        if target is not None:
            await target.table.close()

    async def delete_family(self, table: str, family: str) -> None:
        """See `tsmodel.backends.bigtable.BigtableBackend.delete_family()`."""
        self._check_open()
        try:
            await asyncio.to_thread(self._admin.delete_family, table, family)
        finally:
            self._families.pop(table, None)

    async def list_tables(self) -> list[str]:
        """See `tsmodel.backends.bigtable.BigtableBackend.list_tables()`."""
        self._check_open()
        return await asyncio.to_thread(self._admin.list_tables)

    async def describe_table(self, name: str) -> TableSpec:
        """See `tsmodel.backends.bigtable.BigtableBackend.describe_table()`."""
        self._check_open()
        return await asyncio.to_thread(self._admin.describe_table, name)

    # -- data ------------------------------------------------------------------------

    async def mutate_rows(self, table: str,
                          entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        """See `tsmodel.backends.bigtable.BigtableBackend.mutate_rows()`.

        Returns:
            One outcome per entry: an entry the server may have applied
            (timeout, lost connection) is UNKNOWN, never FAILED.
        """
        steps = MutateDriven(self, table, entries)
        while steps.send is not None:
            steps.answer(await steps.send(steps.request, steps.metadata))
        return steps.outcomes

    def read_rows(self, request: ReadRequest) -> AsyncIterator[Row]:
        """See `tsmodel.backends.bigtable.BigtableBackend.read_rows()`.

        The rows are read by the sync backend's path, on a sync channel in a
        worker thread, and handed to the event loop a batch per thread hop
        (`ThreadedBackend`): ``grpc.aio`` hands each streamed message to the
        loop at two to eight times the cost of a sync channel that delivers
        it on the reading thread, and the emulator sends a message per row.
        Cancellation and back-pressure are the hop's: no row is read ahead of
        the batch the loop asked for, beyond what gRPC's flow-control window
        holds. Once the sync reader is open, the hop's own iterator is
        returned: no generator of this backend's re-yields each row.
        """
        self._check_open()
        if self._sync is not None:
            return self._sync.read_rows(request)
        return self._first_read(request)

    async def blocking(self) -> BigtableBackend:
        """The sync backend whose reads this one runs (see
        `tsmodel.ground.base.ThreadBacked`); opened on the first call."""
        await self._reader()
        assert self._blocking is not None
        return self._blocking

    async def _first_read(self, request: ReadRequest) -> AsyncIterator[Row]:
        reader = await self._reader()
        async for row in reader.read_rows(request):
            yield row

    async def _reader(self) -> ThreadedBackend:
        """The sync backend that reads for this one (opened on the first read)."""
        self._check_open()
        if self._sync is None:
            async with self._opening:
                if self._sync is None:
                    sync = await asyncio.to_thread(
                        BigtableBackend, self.project, self.instance,
                        emulator_host=self.emulator_host, settings=self.settings)
                    self._blocking, self._sync = sync, ThreadedBackend(sync)
        return self._sync

    # -- readiness and lifecycle -----------------------------------------------------

    async def check_reachable(self, timeout: float) -> None:
        """See `tsmodel.backends.bigtable.BigtableBackend.check_reachable()`."""
        self._check_open()
        if self.emulator_host is None:
            return
        deadline = time.monotonic() + timeout
        await asyncio.to_thread(_check_listening, self.emulator_host, timeout)
        await asyncio.to_thread(self._admin.check_answers, timeout,
                                max(deadline - time.monotonic(), 0.001))

    async def close(self) -> None:
        """Close the data client, the channel and the admin transport. Idempotent."""
        if self._closed:
            return
        self._closed = True
        targets, self._targets = list(self._targets.values()), {}
        for target in targets:
            await target.table.close()
        await self._data.close()
        await asyncio.to_thread(self._admin.close)
        if self._sync is not None:
            await self._sync.close()
        if self._emulator_channel is not None:
            await self._emulator_channel.close()

    async def __aenter__(self) -> AsyncBigtableBackend:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
