"""The write pumps of ``tsmodel.backends._bigtable_rpc``: each written once, as a
coroutine that the async driver awaits and the sync driver runs with `_blocking()`
(the fault harness, tests/backends/test_faults.py, drives both through faults)."""

from __future__ import annotations

import asyncio

import pytest

from tsmodel.backends._bigtable_rpc import _Blocking, _blocking


def test_a_pump_whose_awaits_never_suspend_runs_in_one_step() -> None:
    async def pump() -> list[int]:
        return [n async for n in _Blocking(iter([1, 2, 3]))]

    assert _blocking(pump()) == [1, 2, 3]


def test_a_pump_that_suspends_on_the_blocking_channel_is_refused() -> None:
    """An await that suspends would leave the sync driver's call half done: refused."""
    reached: list[str] = []

    async def pump() -> None:
        await asyncio.sleep(0)  # suspends: an event loop's await
        reached.append("after")

    with pytest.raises(RuntimeError, match="suspended"):
        _blocking(pump())
    assert reached == []


def test_an_error_inside_the_pump_comes_out_as_it_is() -> None:
    async def pump() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        _blocking(pump())
