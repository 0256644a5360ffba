"""Make the ``tests`` package importable however pytest starts; run ``async def`` tests.

The suite uses tsmodel's own pytest plugin (tests/backends/conftest.py aliases
its fixtures). An installed tsmodel loads it through its entry point, which
bears the module's name, so naming it here too loads it once either way.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

pytest_plugins = ["tsmodel.testing.plugin", "pytester"]

# No per-example deadline: CI shares two cores with the emulator, so a slow example
# says nothing about the code (a test that sets its own deadline keeps it).
settings.register_profile("tsmodel", deadline=None)
settings.load_profile("tsmodel")


# -- coverage ------------------------------------------------------------------------
# The oracle machines (marked ``unmeasured``) run a few thousand saves and queries
# per shape through paths the conformance suite already reaches: measuring their
# lines again costs a third of their time and adds nothing to the figure
# (docs/contributing.md). Their fixtures are still measured.

def _coverage() -> Any:
    try:
        import coverage
    except ImportError:
        return None
    return coverage.Coverage.current()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    measuring = _coverage() if item.get_closest_marker("unmeasured") else None
    if measuring is None:
        return (yield)
    measuring.stop()
    try:
        return (yield)
    finally:
        measuring.start()


# -- async tests ---------------------------------------------------------------------
# ``async def`` tests run on a fresh event loop each, with asyncio.run: all tsmodel
# needs, without a plugin dependency (pytest-asyncio, anyio) for one hook.

@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True
