"""Typed backend calls: each makes the one backend method it names, sync and async alike."""

from __future__ import annotations

import asyncio
from typing import Any

from tsmodel.backends.base import GcRule, ReadRequest, RowMutation, SetCell, TableSpec
from tsmodel.backends.embedded import EmbeddedBackend
from tsmodel.backends.threaded import ThreadedBackend
from tsmodel.plan.calls import (
    BackendCall,
    CreateTable,
    DeleteFamily,
    DeleteTable,
    DescribeTable,
    ListTables,
    MutateRows,
)

SPEC = TableSpec("t", (("f", GcRule(max_versions=1)), ("g", GcRule())))
CALLS: list[BackendCall] = [
    CreateTable(SPEC), ListTables(), DescribeTable("t"),
    MutateRows("t", [RowMutation(b"k", (SetCell("f", b"q", 1000, b"v"),))]),
    DeleteFamily("t", "g"), DescribeTable("t"), DeleteTable("t"), ListTables(),
]


def answers_sync() -> list[Any]:
    backend = EmbeddedBackend()
    try:
        return [call.on(backend) for call in CALLS]
    finally:
        backend.close()


def answers_by_hand() -> list[Any]:
    """The same calls written out: the oracle of what each call means."""
    b = EmbeddedBackend()
    try:
        return [b.create_table(SPEC), b.list_tables(), b.describe_table("t"),
                b.mutate_rows("t", [RowMutation(b"k", (SetCell("f", b"q", 1000, b"v"),))]),
                b.delete_family("t", "g"), b.describe_table("t"), b.delete_table("t"),
                b.list_tables()]
    finally:
        b.close()


def test_each_call_is_its_backend_method() -> None:
    assert answers_sync() == answers_by_hand()


def test_an_async_driver_awaits_the_same_calls() -> None:
    async def drive() -> list[Any]:
        backend = ThreadedBackend(EmbeddedBackend())
        try:
            return [await call.on(backend) for call in CALLS]
        finally:
            await backend.close()

    assert asyncio.run(drive()) == answers_by_hand()


def test_the_mutation_reached_the_table() -> None:
    backend = EmbeddedBackend()
    try:
        for call in CALLS[:4]:
            call.on(backend)
        (row,) = backend.read_rows(ReadRequest("t"))
        assert (row.key, row.cells[0].value) == (b"k", b"v")
    finally:
        backend.close()
