"""A bad argument to a public call raises a tsmodel error, never a bare builtin.

Each case calls one public entry point (sync and async connections, QuerySet
and AsyncQuerySet, ``ts.*`` functions, the testing helpers) with a bad
argument. The error must be a `ts.TsModelError` and still the builtin it was
before (``except TypeError`` keeps working), and its message must name the
argument and show the value. The guard at the end keeps the tree free of new
bare ``raise ValueError`` / ``raise TypeError`` outside an allowlist of
internal sites.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import tsmodel as ts


@ts.model(table="ARGS", family="F")
class Reading:
    sensor: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    level: float = ts.value("LEVEL")


T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
T1 = T0 + timedelta(hours=1)


def _db() -> ts.Connection:
    db = ts.connect(default=False)
    db.create_tables(Reading)
    return db


def _qs() -> ts.QuerySet[Reading]:
    return _db().range(Reading, T0, T1, sensor="s1")


def _table() -> Any:
    pa = pytest.importorskip("pyarrow")
    return pa.table({"sensor": ["s1"], "time": [T0], "level": [0.5]})


def _run(make: Callable[[ts.AsyncConnection], Any]) -> Any:
    """Run ``make(adb)`` (a coroutine, or a plain call) on a new async embedded store."""
    async def main() -> Any:
        async with ts.connect_async() as adb:
            await adb.create_tables(Reading)
            out = make(adb)
            if asyncio.iscoroutine(out):
                return await out
            return out
    return asyncio.run(main())


async def _drain(agen: Any) -> None:
    async for _ in agen:
        pass


def _open_backend(kind: str) -> Any:
    from tsmodel.testing.plugin import open_backend
    return open_backend(kind, None, instance="x")  # type: ignore[arg-type]


# (id, call, builtin it raised before, text the message must hold)
CASES: list[tuple[str, Callable[[], Any], type[Exception], tuple[str, ...]]] = [
    ("page-0", lambda: _qs().page(0), ValueError, ("size", "0")),
    ("page-str", lambda: _qs().page("10"), ValueError, ("size", "'10'")),
    ("limit-negative", lambda: _qs().limit(-1), ValueError, ("limit", "-1")),
    ("limit-str", lambda: _qs().limit("a"), TypeError, ("limit", "'a'")),
    ("after-int", lambda: _qs().after(5), TypeError, ("cursor", "5")),  # type: ignore[arg-type]
    ("slice-2-5", lambda: _qs()[2:5], TypeError, ("slice", "2:5")),
    ("index", lambda: _qs()[3], TypeError, ("slice", "3")),  # type: ignore[index]
    ("to_arrow_batches-0", lambda: next(iter(_qs().to_arrow_batches(rows=0))), ValueError,
     ("rows", "0")),
    ("save-object", lambda: _db().save(object()), TypeError, ("object", "tsmodel model")),
    ("delete-object", lambda: _db().delete(object()), TypeError, ("object", "tsmodel model")),
    ("row_key-object", lambda: ts.row_key(object()), TypeError, ("object", "tsmodel model")),
    ("spec_of-object", lambda: ts.spec_of(object()), TypeError, ("object", "tsmodel model")),
    ("table_specs-class", lambda: ts.table_specs(Reading), TypeError,  # type: ignore[arg-type]
     ("spec", "Reading")),
    ("codec_source-int", lambda: ts.codec_source(int), TypeError, ("int", "tsmodel model")),
    ("save_all-progress", lambda: _db().save_all([], progress="yes"), TypeError,  # type: ignore[arg-type]
     ("progress", "'yes'")),
    ("save_frame-rows-0", lambda: _db().save_frame(Reading, _table(), rows=0), ValueError,
     ("rows", "0")),
    ("save_frame-progress", lambda: _db().save_frame(Reading, _table(), progress="yes"),  # type: ignore[arg-type]
     TypeError, ("progress", "'yes'")),
    ("save_frame-42", lambda: _db().save_frame(Reading, 42), TypeError, ("frame", "int")),
    ("save_frame-not-batches", lambda: _db().save_frame(Reading, [1, 2]), TypeError,
     ("frame", "int")),
    ("save_frame-one-shot", lambda: _db().save_frame(Reading, iter(_table().to_batches())),
     ValueError, ("validate_first", "iterator")),
    ("plan_schema-drop_tables-str", lambda: _db().plan_schema(Reading, drop_tables="OLD"),
     TypeError, ("drop_tables", "'OLD'")),
    ("floor_timestamp-naive", lambda: ts.floor_timestamp(datetime(2024, 1, 1)), ValueError,
     ("dt", "2024")),
    ("floor_timestamp-str", lambda: ts.floor_timestamp("2024"), TypeError,  # type: ignore[arg-type]
     ("dt", "'2024'")),
    ("open_backend-kind", lambda: _open_backend("nope"), ValueError, ("kind", "'nope'")),
    # async
    ("async-page-0", lambda: _run(lambda adb: adb.range(Reading, T0, T1, sensor="s").page(0)),
     ValueError, ("size", "0")),
    ("async-limit-str", lambda: _run(lambda adb: adb.range(Reading, T0, T1, sensor="s")
                                     .limit("a")), TypeError, ("limit", "'a'")),
    ("async-to_arrow_batches-0", lambda: _run(lambda adb: _drain(
        adb.range(Reading, T0, T1, sensor="s").to_arrow_batches(rows=0))),
     ValueError, ("rows", "0")),
    ("async-save-object", lambda: _run(lambda adb: adb.save(object())), TypeError,
     ("object", "tsmodel model")),
    ("async-save_frame-42", lambda: _run(lambda adb: adb.save_frame(Reading, 42)), TypeError,
     ("frame", "int")),
    ("async-save_frame-rows-0", lambda: _run(lambda adb: adb.save_frame(Reading, _table(),
                                                                       rows=0)),
     ValueError, ("rows", "0")),
    ("async-iter", lambda: _run(lambda adb: iter(adb.range(Reading, T0, T1, sensor="s"))),
     TypeError, ("AsyncConnection", "async for")),
    ("async-bool", lambda: _run(lambda adb: bool(adb.range(Reading, T0, T1, sensor="s"))),
     TypeError, ("AsyncConnection", "exists")),
    ("async-resample-all", lambda: _run(
        lambda adb: adb.range(Reading, T0, T1, sensor="s").resample("1h").all()),
     TypeError, ("AsyncConnection", "await")),
    ("AsyncQuerySet-on-sync", lambda: ts.AsyncQuerySet(Reading, connection=_db()),  # type: ignore[arg-type]
     TypeError, ("connection", "Connection")),
    ("sync-aiter", lambda: _qs().__aiter__(), TypeError, ("AsyncConnection", "async for")),
    ("sync-resample-aall", lambda: asyncio.run(_qs().resample("1h").aall()), TypeError,
     ("AsyncConnection", "resample")),
]


#: Cases that reach the argument's check only where pyarrow is installed (without
#: it, the ExtraNotInstalledError saying so comes first).
_NEEDS_ARROW = {"to_arrow_batches-0", "async-to_arrow_batches-0", "save_frame-not-batches"}
_HAS_ARROW = importlib.util.find_spec("pyarrow") is not None


@pytest.mark.parametrize(("call", "builtin", "words"), [
    pytest.param(*case[1:], id=case[0], marks=[pytest.mark.skipif(
        case[0] in _NEEDS_ARROW and not _HAS_ARROW, reason="needs pyarrow")])
    for case in CASES])
def test_a_bad_argument_raises_a_tsmodel_error(call: Callable[[], Any],
                                               builtin: type[Exception],
                                               words: tuple[str, ...]) -> None:
    with pytest.raises(Exception) as info:  # noqa: PT011 - the class is checked below
        call()
    exc = info.value
    assert isinstance(exc, ts.TsModelError), f"{type(exc).__name__}: {exc}"
    assert isinstance(exc, builtin), f"{type(exc).__name__} is no longer a {builtin.__name__}"
    for word in words:
        assert word in str(exc), f"{word!r} not in {str(exc)!r}"


def test_argument_errors_are_exported_and_typed() -> None:
    assert issubclass(ts.ArgumentError, ts.TsModelError)
    assert issubclass(ts.ArgumentError, ValueError)
    assert issubclass(ts.ArgumentTypeError, ts.ArgumentError)
    assert issubclass(ts.ArgumentTypeError, TypeError)


# The ``raise ValueError`` / ``raise TypeError`` sites left in tsmodel/, counted per
# file: each is internal (no bad argument to a public call reaches it as is),
# for the reason given. A new bare raise fails here, in a new file or as one
# more in a listed file: raise a tsmodel error (tsmodel/errors.py) instead, or,
# if it is internal, list it with its reason.
INTERNAL: dict[str, tuple[int, str]] = {
    "backends/_bigtable_wire.py": (11, "the wire encoding of ground mutations; the Bigtable "
                                       "backends wrap its refusals into BackendError"),
    "encoding/buckets.py": (18, "bucket sizes and labels; declarations and resample() turn "
                                "its refusals into DeclarationError / QueryError"),
    "encoding/timestamps.py": (17, "timestamp codecs and formats; declarations, saves, "
                                   "queries and floor_timestamp() raise tsmodel errors"),
    "layouts/_fragment.py": (2, "the code generator's own expression tree"),
    "layouts/_source.py": (1, "rendered() is given only functions tsmodel generated"),
    "layouts/base.py": (1, "a stripped cell is never handed to a writer"),
    "layouts/offsets.py": (6, "qualifier formats and parsing; ts.offsets() reports a bad "
                              "format as a DeclarationError, reads a bad qualifier as a "
                              "CellDecodingError"),
    "plan/cursors.py": (4, "cursor decoding; its refusals become InvalidCursorError"),
    "plan/events.py": (1, "called only for models whose events are checked apart"),
    "plan/merge.py": (1, "the merge's sink is chosen by tsmodel, never by a user"),
    "plan/results.py": (1, "a WriteResult is assembled by tsmodel"),
    "plan/retention.py": (1, "an example in the module's docstring"),
    "settings.py": (1, "URL option parsing; url_settings() raises ConfigurationError"),
}

_RAISE = re.compile(r"raise (ValueError|TypeError)\b")


def test_no_bare_builtin_raise_outside_the_internal_sites() -> None:
    root = Path(__file__).resolve().parents[2] / "tsmodel"  # the tree, not an installed copy
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _RAISE.search(line):
                found.setdefault(name, []).append(f"tsmodel/{name}:{n}: {line.strip()}")
    new = [site for name, sites in found.items()
           if len(sites) > INTERNAL.get(name, (0, ""))[0] for site in sites]
    assert not new, ("bare builtin raises beyond the internal ones listed in INTERNAL "
                     "(raise a tsmodel error instead):\n" + "\n".join(new))
    fewer = {name: (len(found.get(name, [])), count) for name, (count, _) in INTERNAL.items()
             if len(found.get(name, [])) < count}
    assert not fewer, f"fewer bare raises than INTERNAL lists (found, listed): lower it: {fewer}"
