"""The ``tsmodel`` command: schema plans, read plans, row keys, sizing, the emulator.

Every subcommand takes ``--help``. Models are named ``module:Model`` (or a
module, for all the models in it); the module may be a file path such as
``examples/server_metrics.py:ServerMetric``. Output is an aligned table, or
JSON with ``--json``. An error prints one line, ``tsmodel: error: ...``, and
exits with status 1 (2 for a command line that does not parse).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import signal
import socket
import sys
import textwrap
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, NoReturn

import attrs

from tsmodel import errors
from tsmodel.backends import open_backend
from tsmodel.backends.base import Backend, ReadRequest
from tsmodel.declare.spec import SPEC_ATTR, ModelSpec, spec_of
from tsmodel.encoding.keys import (
    ConstantSegment,
    IntSegment,
    KeyLayout,
    SaltSegment,
    SegmentValueError,
)
from tsmodel.encoding.timestamps import to_micros
from tsmodel.plan import schema
from tsmodel.plan.advice import advise

__all__ = ["main", "build_parser", "load_models", "CliError"]

#: Exit status of ``schema plan --check`` when the backend differs from the models.
EXIT_CHANGES = 3
#: Seconds ``schema plan/apply`` wait for an emulator to answer (``--connect-timeout``).
CONNECT_TIMEOUT = 10.0
_URL_HELP = "backend URL (default: $TSMODEL_URL, else an empty in-memory embedded store)"


class CliError(Exception):
    """Bad input on the command line; printed as one line, exit status 1."""


# -- entry point -------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tsmodel`` command.

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 on success, 1 on an error, 2 on a command line
        that does not parse, 3 for ``schema plan --check`` with changes
        pending, 130 when interrupted. With ``TSMODEL_DEBUG`` set, errors
        raise with their traceback instead.

    Raises:
        SystemExit: for ``--help``, ``--version`` and a command line that does
            not parse (status 2), as argparse does.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] | None = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 1
    except (CliError, errors.TsModelError, OSError, ValueError, TypeError) as exc:
        if os.environ.get("TSMODEL_DEBUG"):
            raise
        _print_error(_message(exc))
        return 1


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, errors.ScanRefusedError):
        text += " (on the command line: --allow-scan)"
    if not isinstance(exc, (CliError, errors.TsModelError)):
        text = f"{type(exc).__name__}: {text}"
    return text


def _print_error(text: str) -> None:
    print(f"tsmodel: error: {' '.join(text.split())}", file=sys.stderr)


def _silence_stdout() -> None:
    """After a closed pipe (``tsmodel ... | head``), let the exit flush go nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


# -- the parser ------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line: ``tsmodel: error: PROG: message``."""

    def error(self, message: str) -> NoReturn:
        _print_error(f"{self.prog}: {message} (see '{self.prog} --help')")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``tsmodel`` command and its subcommands."""
    from tsmodel import __version__

    parser = _Parser(
        prog="tsmodel", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_wrap("Schema plans, read plans, row keys and sizing for tsmodel "
                          "models, and the Cloud Bigtable emulator for local development."),
        epilog=_wrap("Models are given as module:Model or a module (every model in it); "
                     "the module may be a file path, e.g. "
                     "examples/server_metrics.py:ServerMetric."),
    )
    parser.add_argument("--version", action="version", version=f"tsmodel {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    _add_schema(commands)
    _add_explain(commands)
    _add_keys(commands)
    _add_advise(commands)
    _add_emulator(commands)
    from tsmodel.cli import jobs as cli_jobs

    cli_jobs.add_commands(commands)
    return parser


def _sub(commands: Any, name: str, summary: str, description: str,
         run: Callable[[argparse.Namespace], int] | None = None) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = commands.add_parser(
        name, help=summary, description=_wrap(description),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    if run is not None:
        sub.set_defaults(run=run)
    return sub


def _wrap(text: str) -> str:
    """Fill prose paragraphs to 79 columns; keep the ``example:`` ones as written."""
    paragraphs = text.split("\n\n")
    return "\n\n".join(p if p.startswith("example") else textwrap.fill(p, 79)
                       for p in paragraphs)


def _add_target(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("target", metavar="TARGET", help="module:Model")


def _add_json(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_schema(commands: Any) -> None:
    group = _sub(commands, "schema", "plan or apply the tables, families and GC rules",
                 "Compare the tables the models need (families, GC rules) with a backend, "
                 "and apply the difference.")
    actions = group.add_subparsers(title="actions", metavar="ACTION")
    group.set_defaults(run=lambda args: _usage(group))
    plan = _sub(actions, "plan", "show the changes, change nothing",
                "Show what 'schema apply' would change: tables to create, families to add, "
                "GC rules to change and, with --drop and --drop-table, families and tables "
                "to delete.", _cmd_schema_plan)
    apply = _sub(actions, "apply", "make the changes",
                 "Create the tables and families the models need and set their GC rules. "
                 "Nothing is deleted without --drop (undeclared families of the models' "
                 "tables) or --drop-table NAME (that table); other tables are left alone.",
                 _cmd_schema_apply)
    for sub in (plan, apply):
        sub.add_argument("targets", nargs="+", metavar="TARGET",
                         help="module:Model or module (all its models)")
        sub.add_argument("--url", default=None, help=_URL_HELP)
        sub.add_argument("--drop", action="store_true",
                         help="also delete the families of the models' tables that the "
                              "models do not declare")
        sub.add_argument("--drop-table", action="append", default=[], metavar="NAME",
                         dest="drop_tables",
                         help="delete this table, which no model may declare (repeat for "
                              "several); no other table is ever deleted")
        sub.add_argument("--connect-timeout", type=_seconds, default=CONNECT_TIMEOUT,
                         metavar="SECONDS",
                         help="on the emulator: how long to wait for it to answer before "
                              f"giving up (default: {CONNECT_TIMEOUT:g})")
        _add_json(sub)
    plan.add_argument("--check", action="store_true",
                      help=f"exit with status {EXIT_CHANGES} when there are changes (for CI)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _add_explain(commands: Any) -> None:
    sub = _sub(commands, "explain", "show the read plan of a range query",
               "Show how a time-range query (or, with --current, a current-value query) "
               "reads Bigtable: the table, row ranges, filters and whether it scans.\n\n"
               "example:\n  tsmodel explain examples/server_metrics.py:ServerMetric \\\n"
               "      --start 2015-03-16T19:00Z --end 2015-03-16T20:00Z "
               "--field hostname=server1.aaa.bbb.com", _cmd_explain)
    _add_target(sub)
    sub.add_argument("--start", help="inclusive start, ISO 8601 (no offset means UTC)")
    sub.add_argument("--end", help="exclusive end, ISO 8601 (no offset means UTC)")
    sub.add_argument("--field", action="append", default=[], metavar="NAME=VALUE",
                     help="a key field value (repeat for several)")
    sub.add_argument("--current", action="store_true",
                     help="query the current-value table instead of a time range")
    sub.add_argument("--allow-scan", action="store_true",
                     help="plan a query that is not served by a row-key prefix")
    sub.add_argument("--limit", type=int, help="at most this many events")
    sub.add_argument("--newest-first", action="store_true", help="newest events first")
    sub.add_argument("--url", default=None,
                     help=_URL_HELP + "; only its features (reverse scans) matter")
    _add_json(sub)


def _add_keys(commands: Any) -> None:
    group = _sub(commands, "keys", "encode or decode row keys",
                 "Build a row key from field values, or read the typed fields of a row key.")
    actions = group.add_subparsers(title="actions", metavar="ACTION")
    group.set_defaults(run=lambda args: _usage(group))
    enc = _sub(actions, "encode", "the row key of field values",
               "The row key (and current-value row key) of key field values; the timestamp "
               "is ISO 8601 (no offset means UTC).\n\nexample:\n  tsmodel keys encode "
               "examples/server_metrics.py:ServerMetric hostname=server1.aaa.bbb.com "
               "time=2015-03-16T19:53:32.045Z", _cmd_keys_encode)
    _add_target(enc)
    enc.add_argument("values", nargs="*", metavar="NAME=VALUE", help="key field values")
    _add_json(enc)
    dec = _sub(actions, "decode", "the typed fields of a row key",
               "The key field values of a row key; the timestamp as ISO 8601 UTC.",
               _cmd_keys_decode)
    _add_target(dec)
    dec.add_argument("key", metavar="KEY", help="the row key (UTF-8 text, or hex with --hex)")
    dec.add_argument("--hex", action="store_true", help="KEY is hexadecimal")
    dec.add_argument("--current", action="store_true",
                     help="KEY is a row key of the current-value table")
    _add_json(dec)


def _add_advise(commands: Any) -> None:
    sub = _sub(commands, "advise", "size rows and rate the hotspot risk for an event rate",
               "For an event rate per entity: events, rows and cells per bucket (per day "
               "without a bucket), the estimated row size, the versions a row needs and the "
               "GC rule keeps, and the hotspot risk of the row key's leading segment.",
               _cmd_advise)
    _add_target(sub)
    sub.add_argument("--rate", type=float, metavar="EVENTS_PER_SEC",
                     help="events per second of one entity (default: the model's max_rate)")
    sub.add_argument("--entities", type=int, metavar="N",
                     help="how many entities write (distinct row keys without the time)")
    _add_json(sub)


def _add_emulator(commands: Any) -> None:
    sub = _sub(commands, "emulator", "run the Cloud Bigtable emulator until Ctrl-C",
               "Start the Cloud Bigtable emulator (cbtemulator) on a free port, print the "
               "environment to point clients at it, and stop it on Ctrl-C or SIGTERM. "
               "Its data lives in memory and is lost when it stops.\n\nexample:\n"
               "  tsmodel emulator --port 8086", _cmd_emulator)
    sub.add_argument("--port", type=int, help="port to listen on (default: a free one)")
    sub.add_argument("--host", default="127.0.0.1", help="address to listen on")
    sub.add_argument("--project", default="local",
                     help="project in the printed TSMODEL_URL (any name works)")
    sub.add_argument("--instance", default="local",
                     help="instance in the printed TSMODEL_URL (any name works)")
    _add_json(sub)


# -- targets ------------------------------------------------------------------------


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
        found = [obj for obj in vars(module).values() if _is_model(obj)]
        if not found:
            raise CliError(f"{where!r} holds no tsmodel model (a class decorated with "
                           "@tsmodel.model); name one as module:Model")
        return list(dict.fromkeys(found))
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise CliError(f"{where!r} has no attribute {name!r}")
        obj = getattr(obj, part)
    if not _is_model(obj):
        raise CliError(f"{target!r} is not a tsmodel model (decorate it with @tsmodel.model)")
    return [obj]


def _is_model(obj: object) -> bool:
    return isinstance(obj, type) and isinstance(obj.__dict__.get(SPEC_ATTR), ModelSpec)


def _split_target(target: str) -> tuple[str, str | None]:
    where, colon, name = target.rpartition(":")
    if colon and where and name and all(p.isidentifier() for p in name.split(".")):
        return where, name
    return target, None


def _import(where: str) -> ModuleType:
    path = Path(where)
    is_file = where.endswith(".py") or os.sep in where or "/" in where
    try:
        return _import_file(path) if is_file else _import_module(where)
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


def _models(targets: Sequence[str]) -> list[type]:
    found: list[type] = []
    for target in targets:
        found += [m for m in load_models(target) if m not in found]
    return found


def _one_model(target: str) -> type:
    found = load_models(target)
    if len(found) > 1:
        names = ", ".join(m.__name__ for m in found)
        raise CliError(f"{target!r} holds {len(found)} models ({names}); name one as "
                       f"{_split_target(target)[0]}:{found[0].__name__}")
    return found[0]


# -- input values --------------------------------------------------------------------


def _parse_time(text: str, what: str) -> datetime:
    """An ISO 8601 time; ``Z`` and no offset both mean UTC."""
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(raw)
    except ValueError:
        raise CliError(f"{what}: {text!r} is not an ISO 8601 time such as "
                       "2015-03-16T19:53:32.045Z") from None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not name:
            raise CliError(f"{what}: expected NAME=VALUE, got {item!r}")
        if name in out:
            raise CliError(f"{what}: {name!r} given twice")
        out[name] = text
    return out


def _typed(spec: ModelSpec, layout: KeyLayout, raw: dict[str, str],
           allowed: Sequence[str]) -> dict[str, Any]:
    """Key field values from text: ints for integer segments, µs for the timestamp."""
    unknown = [n for n in raw if n not in allowed]
    if unknown:
        raise CliError(f"{spec.name} has no key field {', '.join(map(repr, unknown))} "
                       f"(key fields: {', '.join(allowed) or 'none'})")
    kinds = {s.field: s for s in layout.segments if s.field is not None}
    out: dict[str, Any] = {}
    for name, text in raw.items():
        if name == spec.timestamp_field:
            out[name] = to_micros(_parse_time(text, f"{spec.name}.{name}"))
        elif isinstance(kinds.get(name), IntSegment):
            try:
                out[name] = int(text)
            except ValueError:
                raise CliError(f"{spec.name}.{name}: {text!r} is not an integer") from None
        else:
            out[name] = text
    return out


# -- backends ----------------------------------------------------------------------


def _open(url: str | None, *, announce: bool = True) -> Backend:
    url = url or os.environ.get("TSMODEL_URL") or None
    if url is None and announce:
        print("tsmodel: note: no --url and no TSMODEL_URL: using an empty in-memory "
              "embedded store", file=sys.stderr)
    return open_backend(url)


# -- output ----------------------------------------------------------------------------


def _jsonable(obj: Any) -> Any:
    """Plain JSON types: bytes as text (escaped), times as ISO 8601, attrs as dicts."""
    if isinstance(obj, bytes):
        return _text(obj)
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, timedelta):
        return obj.total_seconds()
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if attrs.has(type(obj)):
        return _jsonable(attrs.asdict(obj, recurse=False))
    return obj


def _print_json(obj: Any) -> None:
    print(json.dumps(_jsonable(obj), indent=2))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")


def _shown(data: bytes) -> str:
    """Bytes for a table cell: quoted when edge spaces or odd characters would hide."""
    text = _text(data)
    return repr(text) if text != text.strip() or not text.isprintable() else text


# -- schema ----------------------------------------------------------------------------


def _cmd_schema_plan(args: argparse.Namespace) -> int:
    plan = _schema(args, apply=False)[0]
    print(plan.to_json() if args.json else plan)
    return EXIT_CHANGES if args.check and plan.has_changes else 0


def _cmd_schema_apply(args: argparse.Namespace) -> int:
    plan, applied = _schema(args, apply=True)
    if args.json:
        print(json.dumps({"plan": plan.to_dict(),
                          "applied": [c.to_dict() for c in applied]}, indent=2))
    elif applied:
        print(f"{plan}\n\nApplied {len(applied)} change{'' if len(applied) == 1 else 's'}.")
    else:
        print(plan)
    return 0


def _schema(args: argparse.Namespace,
            apply: bool) -> tuple[schema.SchemaPlan, tuple[schema.Change, ...]]:
    """The plan of ``schema plan/apply``, and the changes made when ``apply``."""
    models = _models(args.targets)
    backend = _open(args.url)
    try:
        _check_reachable(backend, args.connect_timeout)
        plan = schema.plan(backend, *models, drop=args.drop, drop_tables=args.drop_tables)
        return plan, (schema.apply(backend, plan) if apply else ())
    finally:
        backend.close()


def _check_reachable(backend: Backend, seconds: float) -> None:
    """Fail at once when an emulator does not answer, rather than after a minute of retries."""
    where = getattr(backend, "emulator_host", None)
    if not isinstance(where, str) or not where:
        return  # not on the emulator
    hint = ("is it running? 'tsmodel emulator' starts one; a slow one needs a longer "
            f"--connect-timeout (now {seconds:g} s)")
    host, _, port = where.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=seconds):
            pass
    except ValueError:
        pass  # not HOST:PORT: the gRPC check below says
    except OSError as exc:
        raise CliError(f"cannot reach the Bigtable emulator at {where}: "
                       f"{exc.strerror or exc}; {hint}") from None
    import grpc

    channel = grpc.insecure_channel(where)
    try:
        grpc.channel_ready_future(channel).result(timeout=seconds)
    except grpc.FutureTimeoutError:
        raise CliError(f"the Bigtable emulator at {where} does not answer (no gRPC "
                       f"connection within {seconds:g} s); {hint}") from None
    finally:
        channel.close()


# -- explain ---------------------------------------------------------------------------


def _cmd_explain(args: argparse.Namespace) -> int:
    from tsmodel.run.connection import Connection
    from tsmodel.run.query import QuerySet

    model = _one_model(args.target)
    spec = spec_of(model)
    layout = spec.current_key if args.current and spec.current_key is not None else spec.key
    fields = _typed(spec, layout, _pairs(args.field, "--field"),
                    [f for f in layout.fields if f != spec.timestamp_field])
    with Connection(_open(args.url, announce=False)) as conn:
        qs: QuerySet[Any] = QuerySet(model, connection=conn)
        qs = qs.current(allow_scan=args.allow_scan, **fields) if args.current else \
            qs.range(*_span(args), allow_scan=args.allow_scan, **fields)
        qs = qs.limit(args.limit) if args.limit is not None else qs
        plan = (qs.newest_first() if args.newest_first else qs).explain()
    if args.json:
        _print_json(_plan_dict(plan))
    else:
        print(plan)
    return 0


def _span(args: argparse.Namespace) -> tuple[datetime, datetime]:
    if args.start is None or args.end is None:
        raise CliError("explain needs --start and --end (ISO 8601), or --current")
    return _parse_time(args.start, "--start"), _parse_time(args.end, "--end")


def _plan_dict(plan: Any) -> dict[str, Any]:
    return {
        "model": plan.model, "table": plan.table, "scan": plan.scan, "reason": plan.reason,
        "merge": plan.merge, "client_filters": list(plan.client_filters),
        "reads": [_request_dict(r) for r in plan.requests],
    }


def _request_dict(req: ReadRequest) -> dict[str, Any]:
    flt = {k: v for k, v in attrs.asdict(req.filter, recurse=False).items()
           if v is not None and v is not False}
    if "columns" in flt:
        flt["columns"] = [f"{fam}:{_text(q)}" for fam, q in flt["columns"]]
    out: dict[str, Any] = _jsonable({
        "table": req.table,
        "row_keys": list(req.rows.keys),
        "row_ranges": [{"start": r.start, "end": r.end} for r in req.rows.ranges],
        "whole_table": req.rows.is_whole_table(),
        "filter": flt, "limit": req.limit or None, "reverse": req.reverse,
    })
    return out


# -- keys ----------------------------------------------------------------------------


def _cmd_keys_encode(args: argparse.Namespace) -> int:
    spec = spec_of(_one_model(args.target))
    needed = list(spec.key.fields)
    values = _typed(spec, spec.key, _pairs(args.values, "keys encode"), needed)
    missing = [n for n in needed if n not in values]
    if missing:
        raise CliError(f"{spec.name}: give {', '.join(f'{n}=...' for n in missing)} (the row "
                       f"key is built from {', '.join(needed)})")
    encoded = _encode(spec, values)
    key = spec.key.join(encoded)
    current = spec.current_key.join(encoded) if spec.current_key is not None else None
    parts = _segment_parts(spec.key, encoded)
    if args.json:
        _print_json({"model": spec.name, "table": spec.table, "row_key": key,
                     "row_key_hex": key.hex(), "current_table": spec.current_table,
                     "current_row_key": current, "segments": [
                         {"segment": n, "bytes": b, "hex": b.hex(), "encoding": d}
                         for n, b, d in parts]})
        return 0
    head = [("row key", _text(key))]
    if current is not None:
        head.append(("current row key", _text(current)))
    print(schema.format_table(None, head))
    print()
    print(schema.format_table(("SEGMENT", "BYTES", "ENCODING"),
                              [(n, _shown(b), d) for n, b, d in parts]))
    return 0


def _encode(spec: ModelSpec, values: dict[str, Any]) -> dict[str, bytes]:
    try:
        return spec.key.encode_segments(values)
    except SegmentValueError as exc:
        field = getattr(exc, "field", None)
        raise errors.key_error(exc, model=spec.name, field=field,
                               value=values.get(field or "")) from None


def _segment_parts(layout: KeyLayout,
                   encoded: dict[str, bytes]) -> list[tuple[str, bytes, str]]:
    parts = []
    for seg in layout.segments:
        if seg.field is not None:
            data, name = encoded[seg.field], seg.field
        elif isinstance(seg, SaltSegment):
            data, name = seg.encode(seg.salt_of(encoded)), "salt"
        else:
            data = seg.encode(None)
            name = "constant" if isinstance(seg, ConstantSegment) else type(seg).__name__
        parts.append((name, data, seg.describe()))
    return parts


def _cmd_keys_decode(args: argparse.Namespace) -> int:
    from tsmodel.plan.mapper import decode_row_key

    model = _one_model(args.target)
    spec = spec_of(model)
    raw = _key_bytes(args.key, args.hex)
    values = _decode_current(spec, raw) if args.current else decode_row_key(model, raw)
    shown = {("salt" if k == "__salt__" else k): v for k, v in values.items()}
    if args.json:
        _print_json({"model": spec.name, "row_key": raw, "fields": shown})
        return 0
    rows = [(k, v.isoformat() if isinstance(v, datetime) else str(v)) for k, v in shown.items()]
    print(schema.format_table(("FIELD", "VALUE"), rows))
    return 0


def _key_bytes(text: str, is_hex: bool) -> bytes:
    if not is_hex:
        return text.encode("utf-8")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise CliError(f"{text!r} is not hexadecimal") from None


def _decode_current(spec: ModelSpec, raw: bytes) -> dict[str, Any]:
    layout = spec.current_key
    if layout is None:
        raise CliError(f"{spec.name} declares no current-value table (current=...)")
    try:
        values = layout.decode(raw)
        canonical = layout.encode(values)
    except SegmentValueError as exc:
        raise errors.KeyDecodingError(f"{spec.name}: current row key {raw!r}: {exc}") from None
    if canonical != raw:
        raise errors.KeyDecodingError(
            f"{spec.name}: current row key {raw!r} is not canonical: its values encode to "
            f"{canonical!r}")
    return values


# -- advise ---------------------------------------------------------------------------


def _cmd_advise(args: argparse.Namespace) -> int:
    model = _one_model(args.target)
    advice = advise(model, args.rate, args.entities)
    if args.json:
        _print_json(advice.to_dict())
        return 0
    spec = spec_of(model)
    layout = getattr(getattr(spec, "layout", None), "describe", lambda: "a row per event")()
    bucket = f"{advice.bucket} buckets" if advice.bucket else "no time bucket"
    who = "per entity" if advice.entities is None else f"for each of {advice.entities:,} entities"
    print(f"{advice.model} at {advice.rate:g} events/s {who}: {layout}, {bucket}\n")
    print(schema.format_table(("MEASURE", "VALUE"), advice.rows()))
    if advice.notes:
        print()
    for note in advice.notes:
        print(f"note: {note}")
    return 0


# -- emulator -------------------------------------------------------------------------


def _cmd_emulator(args: argparse.Namespace) -> int:
    from tsmodel.backends.emulator import Emulator

    emu = Emulator(host=args.host, port=args.port)
    stop = threading.Event()
    previous = _on_signals(lambda signum, frame: stop.set())
    try:
        try:
            emu.start()
        except RuntimeError as exc:  # a busy port, or an emulator that would not start
            raise CliError(str(exc)) from None
        _announce(emu.host_port, args)
        while not stop.wait(0.2):
            if not emu.running:
                raise CliError(f"the emulator exited on its own; its output: {emu.output()}")
    except KeyboardInterrupt:
        pass
    finally:
        emu.stop()
        _restore_signals(previous)
    print("tsmodel: emulator stopped", file=sys.stderr)
    return 0


_Handler = Callable[[int, FrameType | None], Any]


def _on_signals(handler: _Handler) -> dict[int, Any]:
    wanted = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    return {sig: signal.signal(sig, handler) for sig in wanted}


def _restore_signals(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _announce(host_port: str, args: argparse.Namespace) -> None:
    url = f"bigtable-emulator://{host_port}/{args.project}/{args.instance}"
    if args.json:
        host, _, port = host_port.rpartition(":")
        print(json.dumps({"BIGTABLE_EMULATOR_HOST": host_port, "TSMODEL_URL": url,
                          "host": host, "port": int(port)}), flush=True)
    else:
        print(f"export BIGTABLE_EMULATOR_HOST={host_port}\nexport TSMODEL_URL={url}",
              flush=True)
    print(f"tsmodel: Cloud Bigtable emulator on {host_port} (in memory); Ctrl-C stops it",
          file=sys.stderr, flush=True)
