"""Make the ``tests`` package importable however pytest starts; run ``async def`` tests."""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


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
