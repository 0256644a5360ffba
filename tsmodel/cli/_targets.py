"""Which model classes a command-line TARGET names: ``module:Model`` or a module."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from tsmodel import spec_of
from tsmodel.cli._common import CliError

__all__ = ["load_models", "models", "one_model"]


def load_models(target: str) -> list[type]:
    """The model classes a target names.

    Args:
        target: ``module:Model`` (a dotted attribute path after the colon) or
            a module, for every model defined or imported in it. The module
            is a dotted name (importable from the working directory) or a
            ``.py`` file path.

    Returns:
        The model classes, in the module's order.

    Raises:
        CliError: the module cannot be imported, the name is missing or not
            a model, or the module holds no model.
    """
    where, name = _split_target(target)
    module = _import(where)
    if name is None:
        return _all_models(module, where)
    obj = _attribute(module, where, name)
    if not _is_model(obj):
        raise CliError(f"{target!r} is not a tsmodel model (decorate it with @tsmodel.model)")
    return [obj]


def models(targets: Sequence[str]) -> list[type]:
    """The models of several targets, each once, in order."""
    found: list[type] = []
    for target in targets:
        found += [m for m in load_models(target) if m not in found]
    return found


def one_model(target: str) -> type:
    """The one model a target names; a module holding several is refused."""
    found = load_models(target)
    if len(found) > 1:
        names = ", ".join(m.__name__ for m in found)
        raise CliError(f"{target!r} holds {len(found)} models ({names}); name one as "
                       f"{_split_target(target)[0]}:{found[0].__name__}")
    return found[0]


def _all_models(module: ModuleType, where: str) -> list[type]:
    found = [obj for obj in vars(module).values() if _is_model(obj)]
    if not found:
        raise CliError(f"{where!r} holds no tsmodel model (a class decorated with "
                       "@tsmodel.model); name one as module:Model")
    return list(dict.fromkeys(found))


def _attribute(module: ModuleType, where: str, name: str) -> Any:
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise CliError(f"{where!r} has no attribute {name!r}")
        obj = getattr(obj, part)
    return obj


def _is_model(obj: object) -> bool:
    """A class decorated with ``@tsmodel.model`` itself (not a subclass of one)."""
    if not isinstance(obj, type):
        return False
    try:
        spec_of(obj)
    except TypeError:
        return False
    return True


def _split_target(target: str) -> tuple[str, str | None]:
    where, colon, name = target.rpartition(":")
    if colon and where and name and all(p.isidentifier() for p in name.split(".")):
        return where, name
    return target, None


def _import(where: str) -> ModuleType:
    is_file = where.endswith(".py") or os.sep in where or "/" in where
    try:
        return _import_file(Path(where)) if is_file else _import_module(where)
    except CliError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and where.startswith(exc.name):
            raise CliError(f"no module named {where!r} (run from the directory that holds "
                           "it, set PYTHONPATH, or give a .py file path)") from None
        raise CliError(f"cannot import {where!r}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # the user's module failed while it was imported
        raise CliError(f"cannot import {where!r}: {type(exc).__name__}: {exc}") from None


def _import_module(name: str) -> ModuleType:
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(name)


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise CliError(f"no such file: {str(path)!r}")
    name = path.stem if path.stem.isidentifier() and path.stem not in sys.modules \
        else f"_tsmodel_target_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {str(path)!r}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))  # its sibling imports work, as in a script
    sys.modules[name] = module  # @tsmodel.model resolves annotations through it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
