"""The tsmodel pytest plugin, as a user's test suite sees it (pytest's ``pytester``).

Each test writes a small project of a user (models, application code, tests
using the ``tsmodel_*`` fixtures) into a temporary directory and runs pytest
on it, on the embedded store and on the emulator: in this process (a process
of its own costs a second or two more), with a configuration and a session of
its own. The plugin is named with ``-p``, as the entry point of an installed
tsmodel names it; ``test_an_installed_tsmodel_loads_the_plugin_by_itself``
checks the entry point itself, in a process of its own.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# pytester forgets the modules that a test imports: the Bigtable client's, imported
# again by the next in-process run, would register its protobuf files twice.
import tsmodel.backends._bigtable_admin  # noqa: F401
import tsmodel.backends.bigtable  # noqa: F401
import tsmodel.backends.bigtable_async  # noqa: F401
from tests.ports import assert_closes_when_killed

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "tsmodel.testing.plugin"

APP = '''
from datetime import datetime, timezone

import tsmodel as ts

T0 = datetime.fromtimestamp(1426535612.045, timezone.utc)


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
class ServerMetric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu1_usr: float = ts.value("CPU/CPU1_USR")


def record(hostname, cpu):
    """The application code under test: it uses the default connection."""
    db = ts.get_default_connection()
    db.create_tables(ServerMetric)
    db.save(ServerMetric(hostname=hostname, time=T0, cpu1_usr=cpu))
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(app=APP)
    pytester.syspathinsert()
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", PLUGIN, "-p", "no:cacheprovider", "-v", *args)


def test_a_users_tests_run_on_both_backends_with_the_default_connection(
        project: pytest.Pytester) -> None:
    project.makepyfile(test_app='''
        import struct
        from datetime import timedelta

        import tsmodel as ts
        from tsmodel.testing import assert_rows
        from app import ServerMetric, T0, record

        def test_record_writes_the_event_and_the_current_value(tsmodel_connection):
            assert ts.get_default_connection() is tsmodel_connection
            record("server1", 0.5)
            assert list(ServerMetric.range(T0, T0 + timedelta(hours=1), hostname="server1")) == [
                ServerMetric(hostname="server1", time=T0, cpu1_usr=0.5)]
            assert_rows(tsmodel_connection, "METRIC", {
                b"server1#1426535612045": {"METRIC:CPU/CPU1_USR": struct.pack(">d", 0.5)},
            })
            assert_rows(tsmodel_connection, "CURRENT_METRIC", {
                "server1": {"METRIC:CPU/CPU1_USR": [(1426535612045000, struct.pack(">d", 0.5))]},
            })

        def test_the_kind_is_the_backends(tsmodel_backend_kind, tsmodel_backend):
            assert tsmodel_backend.features.persistent is False
            assert type(tsmodel_backend).__name__ == {
                "embedded": "EmbeddedBackend", "emulator": "BigtableBackend"}[tsmodel_backend_kind]
    ''')
    result = run(project)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        "*test_record_writes_the_event_and_the_current_value?embedded? PASSED*",
        "*test_record_writes_the_event_and_the_current_value?emulator? PASSED*",
    ])


def test_the_documented_example_passes_on_both_backends(pytester: pytest.Pytester) -> None:
    page = (ROOT / "docs" / "testing.md").read_text()
    [example] = [block for block in page.split("```python\n")[1:]
                 if block.startswith("# test_metrics.py\n")]
    pytester.makepyfile(test_metrics=example.split("```")[0])
    result = run(pytester)
    result.assert_outcomes(passed=4)
    shown = page.split("$ pytest -v test_metrics.py\n", 1)[1].split("```")[0].splitlines()
    result.stdout.fnmatch_lines_random([line.replace("[", "[[]") + "*" for line in shown])


def test_every_test_gets_a_store_of_its_own(project: pytest.Pytester) -> None:
    # Both tests write the same table and expect to find only their own rows;
    # each URL is a new, empty store that a second connection sees.
    project.makepyfile(test_fresh='''
        import pytest
        import tsmodel as ts
        from tsmodel.testing import table_rows
        from app import ServerMetric, T0, record

        @pytest.mark.parametrize("host", ["a", "b"])
        def test_only_my_rows(tsmodel_connection, host):
            record(host, 1.0)
            assert list(table_rows(tsmodel_connection, "METRIC")) == [
                f"{host}#1426535612045".encode()]

        @pytest.mark.parametrize("host", ["a", "b"])
        def test_a_url_for_connect(tsmodel_url, host):
            with ts.connect(tsmodel_url, default=False) as db:
                assert db.backend.list_tables() == []
                db.create_tables(ServerMetric)
                db.save(ServerMetric(hostname=host, time=T0, cpu1_usr=2.0))
            with ts.connect(tsmodel_url, default=False) as again:
                assert again.latest(ServerMetric, hostname=host).cpu1_usr == 2.0
    ''')
    project.makeconftest('''
        import pytest
        import tsmodel as ts

        @pytest.fixture(autouse=True)
        def default_connection_put_back():  # torn down after tsmodel_connection
            before = ts.get_default_connection()
            yield
            assert ts.get_default_connection() is before
    ''')
    result = run(project)
    result.assert_outcomes(passed=8)


def test_backends_chosen_for_the_run_and_for_one_test(project: pytest.Pytester) -> None:
    project.makepyfile(test_kinds='''
        import pytest

        def test_any(tsmodel_backend_kind):
            pass

        @pytest.mark.tsmodel_backends("emulator")
        def test_emulator_only(tsmodel_backend):
            assert type(tsmodel_backend).__name__ == "BigtableBackend"

        def test_without_fixtures():
            pass
    ''')
    everything = run(project)
    everything.assert_outcomes(passed=4)
    everything.stdout.fnmatch_lines(["*test_emulator_only?emulator? PASSED*"])

    embedded = run(project, "--tsmodel-backends=embedded")
    embedded.assert_outcomes(passed=2, skipped=1)  # emulator_only: no kind left
    embedded.stdout.fnmatch_lines(["*test_any?embedded? PASSED*"])
    assert "[emulator]" not in embedded.stdout.str()

    project.makeini("[pytest]\ntsmodel_backends = emulator\n")
    from_ini = run(project)
    from_ini.assert_outcomes(passed=3)
    assert "[embedded]" not in from_ini.stdout.str()


def test_the_session_backend_is_one_per_kind(project: pytest.Pytester) -> None:
    project.makepyfile(test_shared='''
        import pytest

        seen = {}

        @pytest.mark.parametrize("n", [1, 2])
        def test_shared(tsmodel_session_backend, tsmodel_backend_kind, n):
            seen.setdefault(tsmodel_backend_kind, set()).add(id(tsmodel_session_backend))
            assert len(seen[tsmodel_backend_kind]) == 1

        def test_two_kinds_two_stores():
            assert len({store for stores in seen.values() for store in stores}) == 2
    ''')
    run(project).assert_outcomes(passed=5)


def test_open_backend_refuses_an_unknown_kind(request: pytest.FixtureRequest) -> None:
    from tsmodel.testing.plugin import open_backend

    with pytest.raises(ValueError, match="unknown backend kind 'embeded'; choose among "
                                         "embedded, emulator"):
        open_backend("embeded", request, instance="x")


def test_an_unknown_backend_kind_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makepyfile(test_x="def test_x(tsmodel_backend): pass")
    result = run(project, "--tsmodel-backends=embeded")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tsmodel-backends: unknown backend kind(s) 'embeded'; "
                                 "choose among embedded, emulator*"])


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_missing_emulator_skips_except_on_ci(project: pytest.Pytester,
                                              monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("TSMODEL_CBTEMULATOR", str(project.path / "no-such-cbtemulator"))
    monkeypatch.setenv("CI", ci)
    project.makepyfile(test_x="def test_x(tsmodel_connection): pass")
    result = run(project, "-rsE")
    if ci:
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines(["*CI=true and the Bigtable emulator is missing*"])
    else:
        result.assert_outcomes(passed=1, skipped=1)
        result.stdout.fnmatch_lines(["*Bigtable emulator not installed*no-such-cbtemulator*"])


def test_the_entry_point_names_the_plugin_module() -> None:
    # The name equals the module, so `pytest_plugins` (tests/conftest.py) and
    # the entry point load it once between them.
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject.split("\n[project.entry-points.pytest11]\n", 1)[1].split("\n[", 1)[0]
    entries = [line for line in section.splitlines() if line and not line.startswith("#")]
    assert entries == [f'"{PLUGIN}" = "{PLUGIN}"']


def test_an_installed_tsmodel_loads_the_plugin_by_itself(pytester: pytest.Pytester) -> None:
    # Only where this checkout is installed with its entry point (CI's
    # environments, the README's commands): the development venv of another
    # checkout may predate it.
    installed = [ep for ep in importlib.metadata.entry_points(group="pytest11")
                 if ep.value == PLUGIN]
    if not installed:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and the installed tsmodel has no pytest11 entry point")
        pytest.skip("tsmodel is not installed with its pytest11 entry point here")
    pytester.makepyfile(test_x='''
        def test_x(tsmodel_backend_kind, request):
            assert request.config.pluginmanager.has_plugin("tsmodel.testing.plugin")
    ''')
    # A separate process, so that only the installed entry point can load it.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                           "--tsmodel-backends=embedded")
    result.assert_outcomes(passed=1)


def test_an_assert_rows_failure_shows_the_diff_not_the_helpers_source(
        project: pytest.Pytester) -> None:
    project.makepyfile(test_diff='''
        import struct
        from tsmodel.testing import assert_rows
        from app import record

        def test_wrong_value(tsmodel_connection):
            record("server1", 0.5)
            assert_rows(tsmodel_connection, "METRIC", {
                b"server1#1426535612045": {"METRIC:CPU/CPU1_USR": struct.pack(">d", 0.25)},
            })
    ''')
    result = run(project, "--tsmodel-backends=embedded")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*rows of table 'METRIC' differ from the expected ones (0 as expected;*",
        "*row b'server1#1426535612045':*",
        "*METRIC:CPU/CPU1_USR (newest version):*",
    ])
    # The user's call is shown; none of the helper's own lines are.
    assert "assert_rows(tsmodel_connection" in out
    for helper_line in ("def assert_rows(", "want = {_bytes(key)", "raise AssertionError(",
                        "tsmodel/testing/_rows.py"):
        assert helper_line not in out, helper_line


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="the emulator stops with its parent on Linux only")
def test_a_killed_test_run_leaves_no_emulator_behind(project: pytest.Pytester) -> None:
    # A test run killed with SIGKILL (a CI timeout, an OOM kill, `kill -9`) gets no
    # chance to stop the session's emulator: the kernel must, or every such run
    # leaves a cbtemulator running, holding its memory and port, for ever.
    ready = project.path / "emulator-host-port"
    project.makepyfile(test_hang=f'''
        import time
        def test_hangs(tsmodel_emulator):
            open({str(ready)!r}, "w").write(tsmodel_emulator.host_port)
            time.sleep(600)
    ''')
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", PLUGIN, "-p", "no:cacheprovider", "-q",
         "--tsmodel-backends", "emulator", "-p", "no:randomly", "test_hang.py"],
        cwd=project.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text()):
            assert proc.poll() is None, f"pytest exited ({proc.returncode}) before the test ran"
            assert time.monotonic() < deadline, "the test never started"
            time.sleep(0.1)
        host_port = ready.read_text()
        assert_closes_when_killed(proc, host_port, "the emulator outlived the killed test run")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

