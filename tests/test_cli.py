"""The ``tsmodel`` command: what it prints and the status it exits with.

Each test runs the command as ``python -m tsmodel`` would, in the test's own
process (tests/inprocess.py: its working directory, environment and
``sys.path``, output captured, ``SystemExit`` as the status); a few start real
processes: the console script, ``python -m tsmodel``'s exit statuses, a
closed pipe. The ``console`` blocks of
docs/cli.md run here too: each ``$ tsmodel ...`` line is run from a scratch
directory that sees the repository's ``examples/``, and what it prints
(standard output, then standard error) must be the text under it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.inprocess import Done, run_tsmodel
from tsmodel.backends.base import GcRule, TableSpec
from tsmodel.backends.embedded import EmbeddedBackend

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/server_metrics.py:ServerMetric"
CI = os.environ.get("CI", "").lower() == "true"

MODELS = '''
from datetime import datetime

import tsmodel as ts


@ts.model(table="QUOTE", family="MD", current="CURRENT_QUOTE")
class Quote:
    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    quotetime: datetime = ts.timestamp(unit="ms")
    bid: float = ts.value("BID")


@ts.model(table="METER", family="M")
class Meter:
    meter: int = ts.key(width=10)
    time: datetime = ts.timestamp(unit="ms")
    kwh: float = ts.value("KWH")
'''


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TSMODEL_URL", "PYTHONPATH")}
    env.update(extra)
    return env


def run(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
        command: list[str] | None = None) -> Done | subprocess.CompletedProcess[str]:
    """``tsmodel ARGS``: in this process, or in a new one running ``command``."""
    if command is None:
        return run_tsmodel(*args, cwd=cwd, env=env or _env())
    return subprocess.run([*command, *args], cwd=cwd, env=env or _env(), capture_output=True,
                          text=True, timeout=120)


def ok(*args: str, **kwargs: object) -> str:
    done = run(*args, **kwargs)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def fails(*args: str, status: int = 1, **kwargs: object) -> str:
    """Run a command that must fail with one ``tsmodel: error:`` line; return that line."""
    done = run(*args, **kwargs)  # type: ignore[arg-type]
    assert done.returncode == status, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tsmodel: error: "), done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with ``mymodels.py`` (two models) and ``broken.py`` (fails on import)."""
    where = tmp_path_factory.mktemp("models")
    (where / "mymodels.py").write_text(MODELS, encoding="utf-8")
    (where / "broken.py").write_text("raise RuntimeError('no database configured')\n",
                                     encoding="utf-8")
    (where / "empty.py").write_text("X = 1\n", encoding="utf-8")
    return where


# -- help and entry points ------------------------------------------------------------

COMMANDS = [[], ["schema"], ["schema", "plan"], ["schema", "apply"], ["explain"], ["keys"],
            ["keys", "encode"], ["keys", "decode"], ["advise"], ["emulator"], ["snapshot"],
            ["repair"]]


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "tsmodel")
def test_every_command_has_help(words: list[str]) -> None:
    out = ok(*words, "--help")
    assert out.startswith(f"usage: tsmodel {' '.join(words)}".rstrip())
    assert "--help" in out


@pytest.mark.parametrize("words", [[], ["schema"], ["keys"]], ids=lambda w: " ".join(w) or "-")
def test_a_command_group_alone_prints_its_help(words: list[str]) -> None:
    done = run(*words)
    assert done.returncode == 2
    assert "usage: tsmodel" in done.stderr


def test_version() -> None:
    assert ok("--version").startswith("tsmodel ")


def _console_script() -> str | None:
    beside = Path(sys.executable).with_name("tsmodel")
    if beside.is_file():
        return str(beside)
    return shutil.which("tsmodel")


def test_console_script_runs_the_same_command() -> None:
    script = _console_script()
    if script is None:
        if CI:
            pytest.fail("CI=true and the tsmodel console script is not installed")
        pytest.skip("the tsmodel console script is not installed (pip install -e .)")
    args = ["keys", "encode", EXAMPLE, "hostname=server1.aaa.bbb.com",
            "time=2015-03-16T19:53:32.045Z"]
    assert ok(*args, command=[script]) == ok(*args)
    assert fails("keys", "decode", EXAMPLE, "nope", command=[script]).startswith(
        "tsmodel: error: ServerMetric: row key b'nope'")


@pytest.mark.parametrize(("args", "status"), [
    (["--version"], 0),
    (["keys", "decode", EXAMPLE, "nope"], 1),
    (["frobnicate"], 2),
], ids=["ok", "error", "usage"])
def test_python_m_tsmodel_exits_with_the_status_of_main(args: list[str], status: int) -> None:
    """The real ``python -m tsmodel``: the other tests call `main` in their own process."""
    done = run(*args, command=[sys.executable, "-m", "tsmodel"])
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr
    assert (done.stdout if status == 0 else done.stderr).startswith(
        "tsmodel " if status == 0 else "tsmodel: error: "), done.stdout + done.stderr


# -- the examples of docs/cli.md --------------------------------------------------------

_CONSOLE = re.compile(r"^```console\n(.*?)^```$", re.S | re.M)


def console_examples(page: str = "cli.md") -> list[tuple[str, str]]:
    """``(command, expected output)`` of every ``$ tsmodel`` line of a docs page."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    examples: list[tuple[str, str]] = []
    for block in _CONSOLE.findall(text):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            examples.append((command, output))
    return examples


def test_docs_have_console_examples() -> None:
    commands = [c for c, _ in console_examples()]
    for word in ("keys encode", "keys decode", "explain", "advise", "schema plan",
                 "schema apply", "layout"):
        assert any(c.startswith(f"tsmodel {word}") for c in commands), word


def test_docs_console_examples_print_what_they_show(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    check_console_examples("cli.md", cwd=tmp_path)


def check_console_examples(page: str, cwd: Path) -> None:
    """Run every ``$ tsmodel`` line of a docs page in ``cwd``: it must print the text
    under it (standard output, then standard error)."""
    for command, expected in console_examples(page):
        words = shlex.split(command)
        assert words[0] == "tsmodel", command
        done = run(*words[1:], cwd=cwd)
        shown = _lines(done.stdout + done.stderr)
        assert shown == _lines(expected), f"docs/{page}: `{command}` prints:\n" + \
            done.stdout + done.stderr


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


# -- keys -------------------------------------------------------------------------------


def test_keys_encode_pads_fixed_width_segments(models_dir: Path) -> None:
    out = json.loads(ok("keys", "encode", "mymodels.py:Quote", "exchange=NYSE", "symbol=IBM",
                        "quotetime=2015-03-16T19:53:32.156Z", "--json", cwd=models_dir))
    assert out["row_key"] == "NYSE  #IBM  #1426535612156"
    assert out["current_row_key"] == "NYSE  #IBM  "
    assert bytes.fromhex(out["row_key_hex"]) == b"NYSE  #IBM  #1426535612156"
    assert [s["segment"] for s in out["segments"]] == ["exchange", "symbol", "quotetime"]
    assert out["segments"][0]["bytes"] == "NYSE  "


def test_keys_table_quotes_padded_segments(models_dir: Path) -> None:
    out = ok("keys", "encode", "mymodels.py:Quote", "exchange=NYSE", "symbol=IBM",
             "quotetime=2015-03-16T19:53:32.156+00:00", cwd=models_dir)
    assert "row key          NYSE  #IBM  #1426535612156" in out
    assert re.search(r"^exchange   'NYSE  '  ", out, re.M), out


def test_keys_decode_round_trips(models_dir: Path) -> None:
    key = "NASDAQ#ZXZZT#1426535612156"
    out = json.loads(ok("keys", "decode", "mymodels.py:Quote", key, "--json", cwd=models_dir))
    assert out["fields"] == {"exchange": "NASDAQ", "symbol": "ZXZZT",
                             "quotetime": "2015-03-16T19:53:32.156000+00:00"}
    again = json.loads(ok("keys", "encode", "mymodels.py:Quote", "exchange=NASDAQ",
                          "symbol=ZXZZT", "quotetime=" + out["fields"]["quotetime"], "--json",
                          cwd=models_dir))
    assert again["row_key"] == key


def test_keys_decode_hex_and_current_keys(models_dir: Path) -> None:
    hexed = b"0000000042#1426535612156".hex()
    out = ok("keys", "decode", "mymodels.py:Meter", hexed, "--hex", cwd=models_dir)
    assert re.search(r"^meter\s+42$", out, re.M), out
    current = json.loads(ok("keys", "decode", "mymodels.py:Quote", "NYSE  #IBM  ", "--current",
                            "--json", cwd=models_dir))
    assert current["fields"] == {"exchange": "NYSE", "symbol": "IBM"}


def test_keys_decode_any_table_of_the_model() -> None:
    game = "examples/game_scores.py:GameScore"
    by_day = json.loads(ok("keys", "decode", game, "LoL#20150301#Corrie", "--table",
                           "GAME_BY_DAY", "--json"))
    assert by_day["table"] == "GAME_BY_DAY" and by_day["fields"] == {
        "game": "LoL", "time": "2015-03-01T00:00:00+00:00", "player": "Corrie"}
    assert json.loads(ok("keys", "decode", game, "LoL#Corrie", "--table", "CURRENT_GAME",
                         "--json"))["fields"] == {"game": "LoL", "player": "Corrie"}
    assert json.loads(ok("keys", "decode", game, "LoL#Corrie#20150301", "--json"))[
        "table"] == "GAME"
    line = fails("keys", "decode", game, "LoL#Corrie", "--current", "--table", "GAME",
                 status=2)
    assert "argument --table: not allowed with argument --current" in line, line


def test_keys_decode_current_of_a_model_without_one(models_dir: Path) -> None:
    line = fails("keys", "decode", "mymodels.py:Meter", "0000000042", "--current",
                 cwd=models_dir)
    assert line == "tsmodel: error: Meter declares no current-value table (current=...)"


def test_keys_integer_fields_are_typed(models_dir: Path) -> None:
    out = json.loads(ok("keys", "encode", "mymodels.py:Meter", "meter=42",
                        "time=2015-03-16T19:53:32.156", "--json", cwd=models_dir))
    assert out["row_key"] == "0000000042#1426535612156"  # no offset: UTC
    line = fails("keys", "encode", "mymodels.py:Meter", "meter=forty", "time=2015-03-16",
                 cwd=models_dir)
    assert line == "tsmodel: error: Meter.meter: 'forty' is not an integer"


@pytest.mark.parametrize(("args", "message"), [
    (["decode", EXAMPLE, "server1#123"], "ServerMetric: row key b'server1#123'"),
    (["decode", EXAMPLE, "zz", "--hex"], "'zz' is not hexadecimal"),
    (["encode", EXAMPLE, "hostname=a"], "ServerMetric: give time=..."),
    (["encode", EXAMPLE, "hostname=a", "time=x"], "ServerMetric.time: 'x' is not an ISO 8601"),
    (["encode", EXAMPLE, "host=a", "time=2015-03-16"], "ServerMetric has no key field 'host'"),
    (["encode", EXAMPLE, "hostname=a#b", "time=2015-03-16"],
     "ServerMetric.hostname: 'a#b' contains the separator"),
    (["encode", EXAMPLE, "hostname=a", "time=2015-03-16T00:00:00.0001Z"],
     "ServerMetric.time: 2015-03-16T00:00:00.000100+00:00 is not a whole number of milliseconds"),
    (["encode", EXAMPLE, "hostname"], "keys encode: expected NAME=VALUE, got 'hostname'"),
    (["encode", EXAMPLE, "hostname=a", "hostname=b"], "keys encode: 'hostname' given twice"),
    (["decode", EXAMPLE, "a#b", "--current"],
     "ServerMetric: row key b'a#b' of table 'CURRENT_METRIC': 'a#b' contains the separator"),
    (["decode", EXAMPLE, "a", "--table", "CURRENT"],
     "ServerMetric has no table 'CURRENT': its tables are 'METRIC' (main), 'CURRENT_METRIC' "
     "(current value)"),
])
def test_keys_errors_are_one_line(args: list[str], message: str) -> None:
    line = fails("keys", *args)
    assert line.startswith(f"tsmodel: error: {message}"), line


# -- explain ------------------------------------------------------------------------------

SPAN = ["--start", "2015-03-16T20:00:00Z", "--end", "2015-03-16T20:01:00Z"]


def test_explain_json_describes_the_reads() -> None:
    plan = json.loads(ok("explain", EXAMPLE, *SPAN, "--field", "hostname=server1.aaa.bbb.com",
                         "--json"))
    assert plan["table"] == "METRIC" and plan["scan"] is False
    (read,) = plan["reads"]
    assert read["row_ranges"] == [{"start": "server1.aaa.bbb.com#1426536000000",
                                   "end": "server1.aaa.bbb.com#1426536060000"}]
    assert read["filter"]["families"] == ["METRIC"]
    assert "timestamp_start" not in read["filter"]  # the key range selects the times


def test_explain_refuses_a_scan_unless_allowed() -> None:
    line = fails("explain", EXAMPLE, *SPAN)
    assert "full table scan" in line and "--allow-scan" in line
    plan = json.loads(ok("explain", EXAMPLE, *SPAN, "--allow-scan", "--json"))
    assert plan["scan"] is True and plan["reads"][0]["whole_table"] is True


def test_explain_current_limit_and_newest_first(models_dir: Path) -> None:
    current = ok("explain", "mymodels.py:Quote", "--current", "--field", "exchange=NYSE",
                 cwd=models_dir)
    assert "read table 'CURRENT_QUOTE'" in current
    limited = json.loads(ok("explain", "mymodels.py:Quote", *SPAN, "--field", "exchange=NYSE",
                            "--field", "symbol=IBM", "--limit", "5", "--newest-first", "--json",
                            cwd=models_dir))
    assert limited["reads"][0]["limit"] == 5


@pytest.mark.parametrize(("args", "message"), [
    ([], "explain needs --start and --end"),
    (SPAN + ["--field", "host=x"], "ServerMetric has no key field 'host'"),
    (["--start", "yesterday", "--end", "2015-03-16"], "--start: 'yesterday' is not an ISO"),
    (["--start", "2015-03-17", "--end", "2015-03-16", "--field", "hostname=a"],
     "ServerMetric: start 2015-03-17"),
])
def test_explain_errors_are_one_line(args: list[str], message: str) -> None:
    assert fails("explain", EXAMPLE, *args).startswith(f"tsmodel: error: {message}")


# -- advise -----------------------------------------------------------------------------


def test_advise_json() -> None:
    out = json.loads(ok("advise", EXAMPLE, "--rate", "0.2", "--entities", "8", "--json"))
    assert out["events_per_period"] == 17280 and out["period"] == "day"
    assert out["cells_per_row"] == 4 and out["versions_needed"] == 1
    assert out["leading_values"] == 8 and out["hotspot_risk"] == "low"
    assert out["writes_per_second"] == pytest.approx(1.6)


def test_advise_rates_a_busy_key_range(models_dir: Path) -> None:
    out = json.loads(ok("advise", "mymodels.py:Quote", "--rate", "2000", "--entities", "1",
                        "--json", cwd=models_dir))
    assert out["hotspot_risk"] == "high"


@pytest.mark.parametrize(("args", "message", "status"), [
    ([], "ServerMetric: no event rate", 1),
    (["--rate", "0"], "ServerMetric: the event rate must be positive", 1),
    (["--rate", "1", "--entities", "0"], "ServerMetric: entities must be at least 1", 1),
    (["--rate", "fast"], "advise: argument --rate: invalid float value: 'fast'", 2),
])
def test_advise_errors_are_one_line(args: list[str], message: str, status: int) -> None:
    assert fails("advise", EXAMPLE, *args, status=status).startswith(
        f"tsmodel: error: {message}")


# -- schema ----------------------------------------------------------------------------


def test_schema_plan_apply_on_a_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    example = str(ROOT / "examples" / "server_metrics.py")
    assert run("schema", "plan", example, "--url", url, "--check").returncode == 3
    plan = json.loads(ok("schema", "plan", example, "--url", url, "--json"))
    assert [(c["action"], c["table"]) for c in plan["changes"]] == [
        ("create table", "METRIC"), ("create table", "CURRENT_METRIC")]
    applied = json.loads(ok("schema", "apply", example, "--url", url, "--json"))
    assert len(applied["applied"]) == 2
    assert ok("schema", "plan", example, "--url", url, "--check").startswith("No changes")
    backend = EmbeddedBackend(str(tmp_path / "db.sqlite"))
    try:
        assert backend.list_tables() == ["CURRENT_METRIC", "METRIC"]
    finally:
        backend.close()


def test_schema_deletes_only_the_tables_named(tmp_path: Path, models_dir: Path) -> None:
    path = tmp_path / "db.sqlite"
    backend = EmbeddedBackend(str(path))
    for name in ("OLD", "TSMODEL_JOBS", "METER_20170726"):
        backend.create_table(TableSpec(name, (("F", GcRule()),)))
    backend.close()
    url = f"sqlite:///{path}"
    kept = ok("schema", "apply", "mymodels.py:Meter", "--url", url, cwd=models_dir)
    assert ("left alone: METER_20170726, OLD, TSMODEL_JOBS (--drop-table NAME deletes one"
            in kept), kept
    dropping = ok("schema", "plan", "mymodels.py:Meter", "--url", url, "--drop", cwd=models_dir)
    assert dropping.startswith("No changes"), dropping  # --drop never deletes a table
    plan = ok("schema", "plan", "mymodels.py:Meter", "--url", url, "--drop-table", "OLD",
              "--drop-table", "TSMODEL_JOBS", cwd=models_dir)
    assert re.search(r"^delete table\s+OLD\s+\*", plan, re.M), plan
    assert re.search(r"^delete table\s+TSMODEL_JOBS\s+\*", plan, re.M), plan
    assert "left alone: METER_20170726 (" in plan
    data = json.loads(ok("schema", "apply", "mymodels.py:Meter", "--url", url, "--drop-table",
                         "OLD", "--json", cwd=models_dir))
    assert data["plan"]["drop_tables"] == ["OLD"]
    assert [(c["action"], c["table"]) for c in data["applied"]] == [("delete table", "OLD")]
    backend = EmbeddedBackend(str(path))
    try:
        assert backend.list_tables() == ["METER", "METER_20170726", "TSMODEL_JOBS"]
    finally:
        backend.close()


@pytest.mark.parametrize(("table", "message"), [
    ("METER", "cannot drop table 'METER': the models declare it"),
    ("OLD", "cannot drop table 'OLD': the backend has no such table (tables: METER)"),
])
def test_schema_refuses_to_drop_a_declared_or_missing_table(
        tmp_path: Path, models_dir: Path, table: str, message: str) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    ok("schema", "apply", "mymodels.py:Meter", "--url", url, cwd=models_dir)
    for action in ("plan", "apply"):
        line = fails("schema", action, "mymodels.py:Meter", "--url", url, "--drop-table", table,
                     cwd=models_dir)
        assert line.startswith(f"tsmodel: error: {message}"), line
    assert "No changes" in ok("schema", "plan", "mymodels.py:Meter", "--url", url,
                              cwd=models_dir)


def test_schema_takes_modules_and_several_targets(tmp_path: Path, models_dir: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    env = _env(PYTHONPATH=str(models_dir))
    plan = json.loads(ok("schema", "plan", "mymodels", str(ROOT / "examples/server_metrics.py"),
                         "--url", url, "--json", env=env, cwd=tmp_path))
    created = sorted(c["table"] for c in plan["changes"])
    assert created == ["CURRENT_METRIC", "CURRENT_QUOTE", "METER", "METRIC", "QUOTE"]


@pytest.mark.parametrize(("value", "message"), [
    ("0", "must be a positive number of seconds, got 0"),
    ("soon", "invalid number of seconds: 'soon'"),
])
def test_the_connect_timeout_is_checked(value: str, message: str) -> None:
    line = fails("schema", "plan", EXAMPLE, "--connect-timeout", value, status=2)
    assert f"argument --connect-timeout: {message}" in line, line


def test_schema_without_url_says_it_plans_against_memory() -> None:
    done = run("schema", "plan", EXAMPLE)
    assert done.returncode == 0
    assert "using an empty in-memory embedded store" in done.stderr
    assert run("schema", "plan", EXAMPLE, env=_env(TSMODEL_URL="nope://")).returncode == 1


@pytest.mark.parametrize("url", [["--url", "memory://"], []])
def test_schema_apply_to_memory_says_the_tables_vanish_at_exit(url: list[str]) -> None:
    done = run("schema", "apply", EXAMPLE, *url)
    assert done.returncode == 0, done.stderr
    assert "Applied 2 changes." in done.stdout
    assert "in-memory store is discarded when the command exits" in done.stderr, done.stderr
    assert "discarded" not in done.stdout


def test_schema_apply_to_a_file_says_nothing_of_vanishing(tmp_path: Path) -> None:
    done = run("schema", "apply", EXAMPLE, "--url", f"sqlite:///{tmp_path / 'm.db'}")
    assert done.returncode == 0, done.stderr
    assert "discarded" not in done.stderr + done.stdout


# -- targets and errors ------------------------------------------------------------------


def test_dotted_module_targets(models_dir: Path, tmp_path: Path) -> None:
    env = _env(PYTHONPATH=str(models_dir))
    out = ok("keys", "decode", "mymodels:Meter", "0000000042#1426535612156", env=env,
             cwd=tmp_path)
    assert "42" in out
    line = fails("advise", "mymodels", "--rate", "1", env=env, cwd=tmp_path)
    assert line == ("tsmodel: error: 'mymodels' holds 2 models (Quote, Meter); name one as "
                    "mymodels:Quote")


def test_the_working_directory_is_importable(models_dir: Path) -> None:
    assert "QUOTE" in ok("schema", "plan", "mymodels:Quote", cwd=models_dir)


@pytest.mark.parametrize(("target", "message"), [
    ("nowhere.py:X", "no such file: 'nowhere.py'"),
    ("no_such_module_xyz:X", "no module named 'no_such_module_xyz'"),
    ("broken.py:X", "cannot import 'broken.py': RuntimeError: no database configured"),
    ("empty.py", "'empty.py' holds no tsmodel model"),
    ("empty.py:X", "'empty.py:X' is not a tsmodel model"),
    ("mymodels.py:Nope", "'mymodels.py' has no attribute 'Nope'"),
])
def test_bad_targets_are_one_line(models_dir: Path, target: str, message: str) -> None:
    line = fails("advise", target, "--rate", "1", cwd=models_dir)
    assert line == f"tsmodel: error: {message}" or line.startswith(f"tsmodel: error: {message}")


def test_usage_errors_are_one_line() -> None:
    line = fails("keys", "decode", EXAMPLE, status=2)
    assert line == ("tsmodel: error: keys decode: the following arguments are "
                    "required: KEY (see 'tsmodel keys decode --help')")
    assert fails("frobnicate", status=2).startswith("tsmodel: error: unknown command "
                                                    "'frobnicate'; choose from schema, ")


def test_a_closed_pipe_is_not_an_error() -> None:
    command = f"{shlex.quote(sys.executable)} -m tsmodel --help | head -1"
    done = subprocess.run(["sh", "-c", command], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.startswith("usage: tsmodel")
    assert "Traceback" not in done.stderr


def test_models_file_with_sibling_imports(tmp_path: Path) -> None:
    (tmp_path / "pkgdir").mkdir()
    (tmp_path / "pkgdir" / "helpers.py").write_text("FAMILY = 'H'\n", encoding="utf-8")
    (tmp_path / "pkgdir" / "app.py").write_text(textwrap.dedent('''
        from datetime import datetime
        import tsmodel as ts
        from helpers import FAMILY

        @ts.model(table="APP", family=FAMILY)
        class Event:
            name: str = ts.key()
            time: datetime = ts.timestamp()
            n: int = ts.value("N")
        '''), encoding="utf-8")
    out = ok("schema", "plan", "pkgdir/app.py", cwd=tmp_path)
    assert re.search(r"^create table\s+APP\s+H\s+max_versions=1$", out, re.M), out


# -- the package ------------------------------------------------------------------------

CLI = ROOT / "tsmodel" / "cli"


def _imports(path: Path) -> list[tuple[str, str]]:
    """``(module, name)`` of every import in a module (name ``""`` for ``import x``)."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_cli_modules_share_only_public_helpers_and_never_grpc(path: Path) -> None:
    for module, name in _imports(path):
        assert module.split(".")[0] not in ("grpc", "google"), (path.name, module)
        if module.startswith("tsmodel.cli"):
            assert not name.startswith("_"), f"{path.name} imports {module}.{name}"


def test_codec_prints_the_source_generated_for_each_table() -> None:
    out = ok("codec", EXAMPLE)
    # A function's file name is numbered (`` #2``) when this process compiled
    # another source under the same name first (an earlier test's ServerMetric).
    for table, function in (("METRIC", "encode_event"), ("METRIC", "encode"),
                            ("CURRENT_METRIC", "encode"), ("METRIC", "check_event"),
                            ("METRIC", "lay_out_event"), ("METRIC", "wire rows"),
                            ("CURRENT_METRIC", "wire rows"), ("CURRENT_METRIC", "wire")):
        assert re.search(rf"^# table {table}: <tsmodel codec ServerMetric\.{table} "
                         rf"{function}( #\d+)?>$", out, re.MULTILINE), out[:2000]
    blocks = out.split("# table ")[1:]
    for block in blocks:  # each block is one function's whole source
        source = block.split("\n", 1)[1]
        compile(source, "<printed>", "exec")
    fails("codec", "examples/server_metrics.py:NoSuchModel")
