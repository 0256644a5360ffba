"""``tsmodel keys encode`` and ``tsmodel keys decode``: row keys of a model.

Encoding and decoding are the library's (`tsmodel.encode_row_key()`,
`tsmodel.decode_row_key()`); this module parses the text and prints the
result.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from tsmodel import ModelSpec, decode_row_key, encode_row_key, spec_of
from tsmodel.cli._common import (
    JSON,
    TARGET,
    CliError,
    command,
    group,
    pairs,
    print_json,
    print_table,
    shown,
    text,
    typed,
)
from tsmodel.cli._targets import one_model
from tsmodel.encoding.keys import ConstantSegment, KeyLayout, SaltSegment, Segment
from tsmodel.layouts.codec import SALT_FIELD

__all__ = ["add_command"]


def add_command(commands: Any) -> None:
    """Add ``keys encode`` and ``keys decode`` to the command's subparsers."""
    actions = group(commands, "keys", "encode or decode row keys",
                    "Build a row key from field values, or read the typed fields of a row key.")
    enc = command(actions, "encode", "the row key of field values",
                  "The row key (and current-value row key) of key field values; the "
                  "timestamp is ISO 8601 (no offset means UTC).\n\nexample:\n  tsmodel keys "
                  "encode examples/server_metrics.py:ServerMetric hostname=server1.aaa.bbb.com "
                  "time=2015-03-16T19:53:32.045Z", _run_encode)
    TARGET.add_to(enc)
    enc.add_argument("values", nargs="*", metavar="NAME=VALUE", help="key field values")
    JSON.add_to(enc)
    dec = command(actions, "decode", "the typed fields of a row key",
                  "The key field values of a row key; the timestamp as ISO 8601 UTC.",
                  _run_decode)
    TARGET.add_to(dec)
    dec.add_argument("key", metavar="KEY", help="the row key (UTF-8 text, or hex with --hex)")
    dec.add_argument("--hex", action="store_true", help="KEY is hexadecimal")
    which = dec.add_mutually_exclusive_group()
    which.add_argument("--current", action="store_true",
                       help="KEY is a row key of the current-value table")
    which.add_argument("--table", metavar="NAME",
                       help="KEY is a row key of this table of the model: its main, "
                            "current-value or an alternate-key table (default: main)")
    JSON.add_to(dec)


# -- encode -----------------------------------------------------------------------------


def _run_encode(args: argparse.Namespace) -> int:
    model = one_model(args.target)
    spec = spec_of(model)
    values = _values(spec, args.values)
    key = encode_row_key(model, values)
    current = (encode_row_key(model, values, table=spec.current_table)
               if spec.current_table is not None else None)
    parts = _segment_parts(spec.key, key)
    if args.json:
        print_json({"model": spec.name, "table": spec.table, "row_key": key,
                    "row_key_hex": key.hex(), "current_table": spec.current_table,
                    "current_row_key": current, "segments": [
                        {"segment": n, "bytes": b, "hex": b.hex(), "encoding": d}
                        for n, b, d in parts]})
    else:
        _print_encoded(key, current, parts)
    return 0


def _print_encoded(key: bytes, current: bytes | None,
                   parts: list[tuple[str, bytes, str]]) -> None:
    head = [("row key", text(key))]
    if current is not None:
        head.append(("current row key", text(current)))
    print_table(None, head)
    print()
    print_table(("SEGMENT", "BYTES", "ENCODING"), [(n, shown(b), d) for n, b, d in parts])


def _values(spec: ModelSpec, items: list[str]) -> dict[str, Any]:
    """Every key field's typed value, from ``NAME=VALUE`` arguments."""
    needed = list(spec.key.fields)
    values = typed(spec, spec.key, pairs(items, "keys encode"), needed)
    missing = [n for n in needed if n not in values]
    if missing:
        raise CliError(f"{spec.name}: give {', '.join(f'{n}=...' for n in missing)} (the row "
                       f"key is built from {', '.join(needed)})")
    return values


def _segment_parts(layout: KeyLayout, key: bytes) -> list[tuple[str, bytes, str]]:
    """``(name, bytes, encoding)`` of each segment of a key tsmodel encoded, in order."""
    values = layout.decode(key)  # cannot fail: the key is canonical
    return [(_segment_name(seg), seg.encode(values.get(seg.field or SALT_FIELD)),
             seg.describe()) for seg in layout.segments]


def _segment_name(seg: Segment) -> str:
    if seg.field is not None:
        return seg.field
    if isinstance(seg, SaltSegment):
        return "salt"
    return "constant" if isinstance(seg, ConstantSegment) else type(seg).__name__


# -- decode -----------------------------------------------------------------------------


def _run_decode(args: argparse.Namespace) -> int:
    model = one_model(args.target)
    spec = spec_of(model)
    raw = _key_bytes(args.key, args.hex)
    table = _table(spec, args.current, args.table)
    values = decode_row_key(model, raw, table=table)
    fields = {("salt" if k == "__salt__" else k): v for k, v in values.items()}
    if args.json:
        print_json({"model": spec.name, "table": table or spec.table, "row_key": raw,
                    "fields": fields})
        return 0
    rows = [(k, v.isoformat() if isinstance(v, datetime) else str(v)) for k, v in fields.items()]
    print_table(("FIELD", "VALUE"), rows)
    return 0


def _table(spec: ModelSpec, current: bool, table: str | None) -> str | None:
    """The table ``--current`` or ``--table`` names (``None``: the main table)."""
    if current and spec.current_table is None:
        raise CliError(f"{spec.name} declares no current-value table (current=...)")
    return spec.current_table if current else table


def _key_bytes(key: str, is_hex: bool) -> bytes:
    if not is_hex:
        return key.encode("utf-8")
    try:
        return bytes.fromhex(key)
    except ValueError:
        raise CliError(f"{key!r} is not hexadecimal") from None
