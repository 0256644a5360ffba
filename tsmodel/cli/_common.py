"""What the ``tsmodel`` commands share: subparsers, input values, connections, output.

Every command module declares itself as a `Command` (or adds a `group()`
of actions), its arguments `arg()` values (those several commands take are
declared here once: `TARGET`, `JSON`, `JOB`, `bounds()`...); it parses
text with `parse_time()`, `pairs()`, `typed()` and `key_prefix()`, opens the backend with
`connect()` (a job in this process: `run_job()`) and prints
with `print_json()` or a table. Bad input raises
`CliError`, which ``main`` prints as one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import attrs

import tsmodel
from tsmodel.backends import with_app_profile
from tsmodel.cli._style import BOLD, CYAN, RED, paint
from tsmodel.encoding.keys import KeyLayout, Segment, SegmentValueError
from tsmodel.errors import key_error

__all__ = [
    "CliError", "Run", "Arg", "arg", "Command", "TARGET", "TARGETS", "JSON", "JOB", "url",
    "app_profile", "bounds", "batch_size", "URL_HELP", "print_error", "command", "group",
    "wrap", "APP_PROFILE_HELP", "parse_time", "pairs", "typed", "key_prefix", "bounds_of",
    "at_least_one",
    "app_profile_id", "connect", "run_job", "jsonable", "print_json", "print_table",
    "print_note", "text", "shown",
]

_R = TypeVar("_R")

#: What a command runs: the parsed arguments in, the exit status out.
Run = Callable[[argparse.Namespace], int]

URL_HELP = "backend URL (default: $TSMODEL_URL, else an empty in-memory embedded store)"


class CliError(Exception):
    """Bad input on the command line; printed as one line, exit status 1."""


def print_error(message: str) -> None:
    """``tsmodel: error: MESSAGE`` on standard error, on one line (in red on a terminal)."""
    prefix = paint("tsmodel: error:", BOLD, RED, stream=sys.stderr)
    print(f"{prefix} {' '.join(message.split())}", file=sys.stderr)


def print_note(message: str, *, prefix: str = "note:", stream: Any = None) -> None:
    """``note: MESSAGE`` on ``stream`` (standard output), its prefix coloured on a terminal."""
    stream = sys.stdout if stream is None else stream
    print(f"{paint(prefix, CYAN, stream=stream)} {message}", file=stream)


# -- subparsers -------------------------------------------------------------------------


def command(commands: Any, name: str, summary: str, description: str,
            run: Run | None = None) -> argparse.ArgumentParser:
    """Add the subparser ``name`` to ``commands``; ``run`` is what it runs."""
    sub: argparse.ArgumentParser = commands.add_parser(
        name, help=summary, description=wrap(description),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    if run is not None:
        sub.set_defaults(run=run)
    return sub


def group(commands: Any, name: str, summary: str, description: str) -> Any:
    """Add a command with actions (``schema plan``); return the actions' subparsers.

    The command alone prints its help and exits with status 2.
    """
    parent = command(commands, name, summary, description)
    parent.set_defaults(run=lambda args: _usage(parent))
    return parent.add_subparsers(title="actions", metavar="ACTION")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def wrap(text: str) -> str:
    """Fill prose paragraphs to 79 columns; keep the ``example:`` ones as written."""
    paragraphs = text.split("\n\n")
    return "\n\n".join(p if p.startswith("example") else textwrap.fill(p, 79)
                       for p in paragraphs)


@attrs.frozen
class Arg:
    """One argument of a command, declared: what ``add_argument()`` takes."""

    flags: tuple[str, ...]
    options: dict[str, Any]

    def add_to(self, sub: Any) -> None:
        """Add the argument to ``sub`` (a parser or an argument group)."""
        sub.add_argument(*self.flags, **self.options)


def arg(*flags: str, **options: Any) -> Arg:
    """The argument ``add_argument(*flags, **options)`` would add."""
    return Arg(flags, options)


@attrs.frozen
class Command:
    """A command without actions, declared: its subparser's words, what it runs
    and its arguments, in the order ``--help`` lists them."""

    name: str
    summary: str
    description: str
    run: Run
    arguments: tuple[Arg, ...] = ()

    def add(self, commands: Any) -> argparse.ArgumentParser:
        """Add the command's subparser to ``commands``."""
        sub = command(commands, self.name, self.summary, self.description, self.run)
        for argument in self.arguments:
            argument.add_to(sub)
        return sub


#: The ``TARGET`` model.
TARGET = arg("target", metavar="TARGET", help="module:Model")
#: The ``TARGET`` models: a module stands for each of its models.
TARGETS = arg("target", metavar="TARGET", help="module:Model, or a module for each of its models")
#: ``--json``.
JSON = arg("--json", action="store_true", help="print JSON instead of a table")


def url(more: str = "") -> Arg:
    """``--url``; ``more`` is added to its help."""
    return arg("--url", default=None, help=URL_HELP + more)


APP_PROFILE_HELP = ("the Cloud Bigtable app profile of the requests, e.g. a low-priority "
                    "one for batch work (as ?app_profile=ID in the URL; the embedded "
                    "store ignores it)")


def app_profile(help: str = APP_PROFILE_HELP) -> Arg:
    return arg("--app-profile", default=None, metavar="ID", help=help)


def bounds(what: str) -> tuple[Arg, ...]:
    """The required time range [--start, --end) of a ``what``, and its key prefix
    (``--field``): read by `bounds_of()`."""
    return (arg("--start", required=True, help="inclusive start, ISO 8601"),
            arg("--end", required=True, help="exclusive end, ISO 8601"),
            arg("--field", action="append", default=[], metavar="NAME=VALUE",
                help=f"limit the {what} to a key prefix (repeat for several)"))


def batch_size(default: int, unit: str) -> Arg:
    """``--batch-size N``: ``unit`` (events, entities) per write batch (`at_least_one()`)."""
    return arg("--batch-size", type=int, default=default, metavar="N",
               help=f"{unit} per write batch (default: {default})")


#: The arguments of a job run in this process (`run_job()`), after the command's own:
#: the store it works on (``--url``, ``--app-profile``), ``--batch-size``,
#: ``--no-progress`` and ``--json``.
JOB = (url(), app_profile(), batch_size(1000, "events"),
       arg("--no-progress", action="store_true",
           help="no progress bars (and no counting pass for their totals)"),
       JSON)


# -- input values -----------------------------------------------------------------------


def parse_time(text: str, what: str) -> datetime:
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


def pairs(items: Sequence[str], what: str) -> dict[str, str]:
    """``NAME=VALUE`` arguments as a dict; ``what`` names them in errors."""
    out: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise CliError(f"{what}: expected NAME=VALUE, got {item!r}")
        if name in out:
            raise CliError(f"{what}: {name!r} given twice")
        out[name] = value
    return out


def at_least_one(value: int, option: str) -> int:
    """``value`` of ``option`` (``--batch-size``), refused below 1."""
    if value < 1:
        raise CliError(f"{option} must be at least 1, got {value}")
    return value


def app_profile_id(value: str | None) -> str | None:
    """The ``--app-profile`` id; given empty, refused."""
    if value == "":
        raise CliError("--app-profile: expected an app profile id, got ''")
    return value


def key_prefix(spec: tsmodel.ModelSpec, args: argparse.Namespace) -> dict[str, Any]:
    """The typed key prefix of `bounds()`'s ``--field NAME=VALUE`` arguments."""
    return typed(spec, spec.key, pairs(args.field, "--field"), list(spec.key_fields))


def bounds_of(args: argparse.Namespace,
              model: type) -> tuple[datetime, datetime, dict[str, Any]]:
    """What `bounds()` declares, parsed for ``model``: the start, the end and the
    key prefix (`key_prefix()`)."""
    fields = key_prefix(tsmodel.spec_of(model), args)
    return parse_time(args.start, "--start"), parse_time(args.end, "--end"), fields


def typed(spec: tsmodel.ModelSpec, layout: KeyLayout, raw: dict[str, str],
          allowed: Sequence[str]) -> dict[str, Any]:
    """Key field values from text (`Segment.parse()`); the timestamp as a datetime."""
    unknown = [n for n in raw if n not in allowed]
    if unknown:
        raise CliError(f"{spec.name} has no key field {', '.join(map(repr, unknown))} "
                       f"(key fields: {', '.join(allowed) or 'none'})")
    segments = {s.field: s for s in layout.segments if s.field is not None}
    return {name: _typed_value(spec, name, segments[name], value) for name, value in raw.items()}


def _typed_value(spec: tsmodel.ModelSpec, name: str, segment: Segment, value: str) -> Any:
    if name == spec.timestamp_field:
        return parse_time(value, f"{spec.name}.{name}")
    try:
        return segment.parse(value)
    except SegmentValueError as exc:
        raise key_error(exc, model=spec.name, field=name, value=value) from None


# -- backends ---------------------------------------------------------------------------


def connect(url: str | None, *, announce: bool = True,
            app_profile: str | None = None) -> tsmodel.Connection:
    """A connection to ``url``, else ``$TSMODEL_URL``, else an in-memory store.

    With ``announce``, the in-memory fallback is said on standard error. An
    ``app_profile`` (``--app-profile``) goes into the URL's options.
    """
    url = url or os.environ.get("TSMODEL_URL") or None
    if url is None and announce:
        print_note("no --url and no TSMODEL_URL: using an empty in-memory embedded store",
                   prefix="tsmodel: note:", stream=sys.stderr)
    if app_profile_id(app_profile) is not None:
        url = with_app_profile(url or "memory://", app_profile)
    return tsmodel.connect(url, default=False)


def run_job(args: argparse.Namespace, job: Callable[..., _R], *where: Any,
            **options: Any) -> _R:
    """Run ``job`` (`tsmodel.repair`, `tsmodel.build_snapshot`) in this process, as the
    arguments of `JOB` say: ``job(*where, connection=, batch_size=, progress=, **options)``
    on the store of ``--url`` and ``--app-profile``; its report."""
    size = at_least_one(args.batch_size, "--batch-size")
    with connect(args.url, app_profile=args.app_profile) as conn:
        return job(*where, connection=conn, batch_size=size,
                   progress=False if args.no_progress else None, **options)


# -- output -----------------------------------------------------------------------------


def jsonable(obj: Any) -> Any:
    """Plain JSON types: bytes as text (escaped), times as ISO 8601, attrs as dicts."""
    if isinstance(obj, bytes):
        return text(obj)
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, timedelta):
        return obj.total_seconds()
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if attrs.has(type(obj)):
        return jsonable(attrs.asdict(obj, recurse=False))
    return obj


def print_table(headers: tuple[str, ...] | None, rows: Sequence[tuple[str, ...]], *,
                colours: dict[str, str] | None = None) -> None:
    """Rows in aligned columns; on a terminal, the header line in bold and each
    last-column value that is a key of ``colours`` in its colour."""
    from tsmodel.plan.schema import format_table

    lines = format_table(headers, rows).splitlines()
    if headers and lines:
        lines[0] = paint(lines[0], BOLD)
    for i, row in enumerate(rows, start=1 if headers else 0):
        code = (colours or {}).get(row[-1]) if row else None
        if code and lines[i].endswith(row[-1]):
            lines[i] = lines[i][:-len(row[-1])] + paint(row[-1], code)
    print("\n".join(lines))


def print_json(obj: Any) -> None:
    print(json.dumps(jsonable(obj), indent=2))


def text(data: bytes) -> str:
    """Bytes as text; what is not UTF-8 is shown escaped."""
    return data.decode("utf-8", errors="backslashreplace")


def shown(data: bytes) -> str:
    """Bytes for a table cell: quoted when edge spaces or odd characters would hide."""
    as_text = text(data)
    return repr(as_text) if as_text != as_text.strip() or not as_text.isprintable() else as_text
