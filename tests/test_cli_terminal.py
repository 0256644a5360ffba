"""What the ``tsmodel`` command looks like on a terminal: colour, usage errors, advice.

In-process (``tsmodel.cli.main(argv)``, pytest's ``capsys``): colour is
decided per stream, so a fake terminal stream stands in for a real one.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tsmodel.cli import main
from tsmodel.cli._style import enabled, paint

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/server_metrics.py:ServerMetric"
ESC = "\033["
COMMANDS = ["schema", "explain", "keys", "layout", "codec", "advise", "emulator", "snapshot",
            "repair", "job"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TSMODEL_URL", "TSMODEL_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.chdir(ROOT)


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    return line


# -- colour -----------------------------------------------------------------------------


def test_colour_on_a_terminal_only() -> None:
    assert enabled(Terminal())
    assert not enabled(io.StringIO())  # a pipe, a file
    assert paint("x", "31", stream=Terminal()) == "\033[31mx\033[0m"
    assert paint("x", "31", stream=io.StringIO()) == "x"


@pytest.mark.parametrize(("variable", "value", "terminal", "coloured"), [
    ("NO_COLOR", "1", True, False),
    ("NO_COLOR", "", True, True),        # set but empty: as if unset (no-color.org)
    ("FORCE_COLOR", "1", False, True),
    ("TERM", "dumb", True, False),
])
def test_colour_follows_the_environment(monkeypatch: pytest.MonkeyPatch, variable: str,
                                        value: str, terminal: bool, coloured: bool) -> None:
    monkeypatch.setenv(variable, value)
    assert enabled(Terminal() if terminal else io.StringIO()) is coloured


def test_no_color_wins_over_force_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    assert not enabled(Terminal())


def test_captured_output_has_no_colour(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", EXAMPLE, "--rate", "2000", "--entities", "3"]) == 0
    assert main(["keys", "decode", EXAMPLE, "a#1577836800000"]) == 0
    out, err = capsys.readouterr()
    assert ESC not in out and ESC not in err
    assert ESC not in usage_error(capsys, "frob")


def test_forced_colour_marks_errors_headers_notes_and_risk(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["advise", EXAMPLE, "--rate", "2000", "--entities", "3"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if "MEASURE" in line)
    assert header.startswith(f"{ESC}1m") and header.endswith(f"{ESC}0m")
    risk = next(line for line in lines if line.startswith("hotspot risk"))
    assert risk.endswith(f"{ESC}1;31mhigh{ESC}0m")  # 2,000 writes/s on one range
    assert all(line.startswith(f"{ESC}36mnote:{ESC}0m ") for line in lines
               if "note:" in line)
    # The columns stay aligned: the codes are around the text, not in its width.
    plain = re.sub(r"\033\[[0-9;]*m", "", out)
    assert "hotspot risk                high" in plain
    assert usage_error(capsys, "frob").startswith(f"{ESC}1;31mtsmodel: error:{ESC}0m ")


# -- usage errors -----------------------------------------------------------------------


def test_an_unknown_command_says_so_once(capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(capsys, "frobnicate")
    assert line == ("tsmodel: error: unknown command 'frobnicate'; choose from "
                    f"{', '.join(COMMANDS)} (see 'tsmodel --help')")
    assert "tsmodel: error: tsmodel" not in line


def test_a_misspelt_command_gets_the_closest_one(capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(capsys, "shema", "plan", EXAMPLE)
    assert line.startswith("tsmodel: error: unknown command 'shema' (did you mean 'schema'?);")


def test_an_unknown_action_names_its_command(capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(capsys, "schema", "frob")
    assert line == ("tsmodel: error: schema: unknown action 'frob'; choose from plan, apply "
                    "(see 'tsmodel schema --help')")


def test_a_bad_argument_names_the_command_once(capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(capsys, "advise", EXAMPLE, "--rate", "fast")
    assert line == ("tsmodel: error: advise: argument --rate: invalid float value: 'fast' "
                    "(see 'tsmodel advise --help')")


# -- advise -----------------------------------------------------------------------------


def test_advise_says_where_its_thresholds_come_from(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", EXAMPLE, "--rate", "2000", "--entities", "3"]) == 0
    out = capsys.readouterr().out
    [note] = [line for line in out.splitlines() if "writes/s over" in line]
    # 3 entities at 2,000 events/s each: 6,000 writes/s, 2,000 per entity's range.
    assert note.startswith("note: 6,000 writes/s over 3 key ranges is 2,000 writes/s per range;")
    assert "1,000/s on one range a high risk" in note
    assert "https://cloud.google.com/bigtable/docs/performance" in note
    assert "14,000 on SSD, 10,000 on HDD" in note
