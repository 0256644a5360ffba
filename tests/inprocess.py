"""Run the ``tsmodel`` command, or a script, in this process as a new process would.

A new Python process costs about a second of CPU before it does anything (the
interpreter, then tsmodel and the Bigtable client imported again), which made
the CLI and example tests some of the slowest of the suite. These helpers run
`tsmodel.cli.main` (or a script, as ``python script.py`` does) in the test's
process instead, with what a process of its own would have had:

* its working directory and its environment (``env`` replaces the whole of
  it; ``PYTHONPATH`` in it extends ``sys.path``, as the interpreter does);
* the directory a process would put first on ``sys.path``: the working
  directory for ``python -m tsmodel``, the script's for ``python script.py``;
* standard output and standard error captured as text; ``SystemExit`` becomes
  the exit status; an uncaught exception prints its traceback on standard
  error and gives status 1, as the interpreter does;
* then everything put back: the working directory, the environment,
  ``sys.path``, the default connection, and the modules imported from outside
  the Python installation and tsmodel (the users' model files), so that the
  next run imports them afresh, as a new process would.

A handful of tests still start real processes (tests/test_cli.py: the console
script, a closed pipe; tests/backends/test_cli_emulator.py: ``tsmodel
emulator`` and its signals).
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Done", "run_tsmodel", "run_script"]

_KEEP = tuple(str(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})


@dataclass(frozen=True)
class Done:
    """What a finished process gives: ``subprocess.CompletedProcess``'s fields."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def run_tsmodel(*args: str, cwd: str | Path | None = None,
                env: Mapping[str, str] | None = None) -> Done:
    """``python -m tsmodel ARGS``, run by `tsmodel.cli.main` in this process."""
    from tsmodel.cli import main

    where = Path(cwd or os.getcwd()).resolve()
    return _run(["tsmodel", *args], lambda: main(list(args)), where, env, first=where)


def run_script(script: str | Path, *, cwd: str | Path | None = None,
               env: Mapping[str, str] | None = None) -> Done:
    """``python SCRIPT``: the file run as ``__main__`` in this process."""
    path = Path(script).resolve()

    def main() -> int:
        runpy.run_path(str(path), run_name="__main__")
        return 0

    return _run([str(path)], main, Path(cwd or os.getcwd()).resolve(), env, first=path.parent)


def _run(argv: list[str], main: object, cwd: Path, env: Mapping[str, str] | None,
         *, first: Path) -> Done:
    out, err = io.StringIO(), io.StringIO()
    with _isolated(argv, cwd, env, first), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            status = main()  # type: ignore[operator]
        except SystemExit as exc:
            status = _exit_status(exc.code)
        except Exception:  # what the interpreter does with an uncaught exception
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
    return Done(argv, int(status or 0), out.getvalue(), err.getvalue())


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _isolated(argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None,
              first: Path) -> Iterator[None]:
    from tsmodel.run import connection

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_path, saved_argv = sys.path[:], sys.argv[:]
    saved_modules = set(sys.modules)
    saved_default = connection._default
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    os.environ.setdefault("COLUMNS", "80")  # argparse's width when output is not a terminal
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [str(first), *extra]
    sys.argv[:] = list(argv)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path
        sys.argv[:] = saved_argv
        if connection._default is not saved_default:
            if connection._default is not None:
                connection._default.close()
            connection.set_default_connection(saved_default)
        for name in set(sys.modules) - saved_modules:
            if not _installed(sys.modules[name]):
                del sys.modules[name]


def _installed(module: object) -> bool:
    """A module of the Python installation or of tsmodel: kept, as importing it is costly."""
    name = getattr(module, "__name__", "")
    if name == "tsmodel" or name.startswith("tsmodel."):
        return True
    where = getattr(module, "__file__", None)
    if where is None:
        return True  # built in, or a namespace package
    return str(Path(where).resolve()).startswith(_KEEP)
