"""Draw the row pictures of docs/patterns.md from the code shown above them.

Each picture sits between ``<!-- tsmodel layout: MODEL: EVENTS -->`` and
``<!-- end tsmodel layout -->`` in the page. This script runs the page's
``python`` blocks in order, in one namespace (as tests/unit/test_docs.py
does), and at each picture takes the model class ``MODEL`` the code above
defined and the events the expression ``EVENTS`` gives in that namespace
(e.g. ``[Balloon(**r) for r in reports[:3]]``). It saves those events through
the library into an empty in-memory store and draws the rows read back
(`tsmodel.cli.layout.sample_tables`, what ``tsmodel layout`` draws): table
names, qualifiers and values are the page's own, and cannot drift from it.
tests/test_cli_layout.py fails when a picture is out of date.

    python docs/draw_layouts.py            # rewrite the pictures in place
    python docs/draw_layouts.py --check    # exit 1 if one is out of date
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import textwrap
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "patterns.md"
#: A picture: its opening marker (model, events), the drawing, the closing marker.
_PICTURE = re.compile(
    r"(<!-- tsmodel layout: (?P<model>\w+): (?P<events>.+?) -->\n).*?(<!-- end tsmodel layout -->)",
    re.S)
_FENCE = re.compile(r"^([ \t]*)```([^\n`]*)\n(.*?)^\1```[ \t]*$", re.S | re.M)


def pictures(text: str) -> list[tuple[str, str]]:
    """``(model, events expression)`` of each picture of ``text``, in page order."""
    return [(m["model"], m["events"]) for m in _PICTURE.finditer(text)]


def redrawn(text: str) -> str:
    """``text`` with every picture drawn anew from the page's own code."""
    import tsmodel as ts
    from tsmodel.cli._grid import render
    from tsmodel.cli.layout import sample_tables

    namespace = _module()
    previous = ts.get_default_connection()
    conn = ts.connect("memory://", default=False)
    ts.set_default_connection(conn)
    out: list[str] = []
    done = 0
    try:
        for match in _PICTURE.finditer(text):
            _run_blocks(text[done:match.start()], namespace)
            where = f"{PAGE.name}: picture {match['model']}"
            model = namespace.__dict__.get(match["model"])
            if not isinstance(model, type):
                raise SystemExit(f"{where}: the code above defines no model {match['model']!r}")
            events = eval(match["events"], namespace.__dict__)  # the page's own expression
            if not events or not all(isinstance(e, model) for e in events):
                raise SystemExit(f"{where}: {match['events']} gives no {match['model']} events")
            out.append(text[done:match.start()])
            out.append(f"{match.group(1)}\n{render(sample_tables(model, events), 'html')}\n"
                       f"{match.group(4)}")
            done = match.end()
    finally:
        ts.set_default_connection(previous)
        conn.close()
        sys.modules.pop(namespace.__name__, None)
    out.append(text[done:])
    return "".join(out)


def _module() -> types.ModuleType:
    module = types.ModuleType("docs_patterns_pictures")
    module.__file__ = str(PAGE)
    sys.modules[module.__name__] = module  # lets @ts.model resolve string annotations
    return module


def _run_blocks(text: str, namespace: types.ModuleType) -> None:
    """Run the ``python`` blocks of ``text`` (a part of the page) in ``namespace``."""
    for match in _FENCE.finditer(text):
        if match.group(2).split()[:1] != ["python"] or "no-run" in match.group(2).split():
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(textwrap.dedent(match.group(3)), str(PAGE), "exec"),
                 namespace.__dict__)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    text = PAGE.read_text(encoding="utf-8")
    new = redrawn(text)
    if "--check" in argv:
        if new != text:
            print(f"{PAGE.relative_to(ROOT)}: pictures out of date; run python "
                  "docs/draw_layouts.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
