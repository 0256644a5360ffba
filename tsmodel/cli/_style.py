"""Colour on a terminal: error and note prefixes, table headers, risk levels.

Colour is on when the stream is a terminal (and ``TERM`` is not ``dumb``),
off when ``NO_COLOR`` is set to anything non-empty (https://no-color.org), and
on for any stream when ``FORCE_COLOR`` is set non-empty (``NO_COLOR`` wins).
Piped or redirected output has none, so scripts and ``--json`` see plain text.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

__all__ = ["enabled", "paint", "BOLD", "RED", "GREEN", "YELLOW", "CYAN"]

BOLD = "1"
RED = "31"
GREEN = "32"
YELLOW = "33"
CYAN = "36"


def enabled(stream: TextIO | None = None) -> bool:
    """Whether to colour what goes to ``stream`` (default: standard output)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


def paint(text: str, *codes: str, stream: TextIO | None = None) -> str:
    """``text`` in the SGR ``codes`` when `enabled()` for ``stream``, else as is."""
    if not codes or not text or not enabled(stream):
        return text
    return f"\033[{';'.join(codes)}m{text}\033[0m"
