"""The one module of private client internals: loud errors, the version range, its monopoly.

A missing internal is simulated by handing the lookup a stand-in object
that lacks it; nothing in ``google.cloud`` or ``grpc`` is patched.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from google.auth.credentials import AnonymousCredentials
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tsmodel.backends import _client_private as private
from tsmodel.errors import ConfigurationError, TsModelError

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tsmodel"
PRIVATE_MODULE = PACKAGE / "backends" / "_client_private.py"


class Bare:
    """A stand-in for a client module or class of a release that lacks the internal."""


def assert_loud(error: ConfigurationError, name: str) -> None:
    message = str(error)
    assert isinstance(error, TsModelError) and isinstance(error, ValueError)
    assert name in message
    assert f"google-cloud-bigtable {private.installed_version()}" in message
    assert f"google-cloud-bigtable{private.SUPPORTED_RANGE}" in message
    assert "Why tsmodel uses it" in message


def test_lookup_of_a_missing_internal_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError) as info:
        private.lookup(Bare(), "_build_grpc_channel", private.CHANNEL_HOOK)
    assert_loud(info.value, "BigtableDataClient._build_grpc_channel")
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_lookup_of_a_present_internal_returns_it() -> None:
    stand_in = Bare()
    stand_in.SingleThreadedUnaryStream = "option"  # type: ignore[attr-defined]
    assert private.single_threaded_unary_stream(stand_in) == "option"
    assert private.single_threaded_unary_stream() == "SingleThreadedUnaryStream"


def test_missing_grpc_channel_option_is_loud() -> None:
    with pytest.raises(ConfigurationError) as info:
        private.single_threaded_unary_stream(Bare())
    assert_loud(info.value, "grpc.experimental.ChannelOptions.SingleThreadedUnaryStream")
    assert f"grpcio {private.installed_version('grpcio')}" in str(info.value)


def test_a_client_without_the_channel_hook_is_refused() -> None:
    # google-cloud-bigtable before 2.33 had no _build_grpc_channel.
    with pytest.raises(ConfigurationError) as info:
        private.require_channel_hook(Bare)
    assert_loud(info.value, "_build_grpc_channel")
    not_a_method = type("Renamed", (), {"_build_grpc_channel": None})
    with pytest.raises(ConfigurationError, match="is not a method"):
        private.require_channel_hook(not_a_method)
    private.require_channel_hook()  # the installed client has it


def test_the_installed_client_calls_the_channel_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    client = private.DataClient(project="p", credentials=AnonymousCredentials(),  # no I/O
                                channel_options=[("grpc.tsmodel_test_option", 1)])
    try:
        assert client._tsmodel_channels_built == 1
    finally:
        client.close()


def test_every_internal_says_why() -> None:
    assert private.INTERNALS
    for internal in private.INTERNALS:
        assert internal.name.startswith(("google.cloud.", "grpc."))
        assert len(internal.why) > 40


def test_supported_range_is_pyprojects_and_holds_the_installed_client() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    [pinned] = re.findall(r'"google-cloud-bigtable([^"]*)"', pyproject)
    assert pinned == private.SUPPORTED_RANGE
    supported = SpecifierSet(private.SUPPORTED_RANGE)
    assert Version(private.installed_version()) in supported
    assert Version("2.32.0") not in supported  # no _build_grpc_channel before 2.33


PRIVATE_NAMES = ("_build_grpc_channel", "_emulator_host", "_swappable_channel",
                 "SwappableChannel", "_sync_autogen", "grpc.experimental")


def google_private_uses(path: Path) -> list[str]:
    """The private google/grpc names that ``path`` imports, reaches through a module,
    looks up by name, or mentions."""
    tree = ast.parse(path.read_text(), str(path))
    modules: set[str] = set()  # local names bound to google or grpc modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("google", "grpc"):
                    modules.add((alias.asname or alias.name).split(".")[0])
                    found += _private_parts(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] in ("google", "grpc"):
            found += _private_parts(node.module, node.lineno)
            for alias in node.names:
                modules.add(alias.asname or alias.name)
                found += _private_parts(alias.name, node.lineno)
    if not modules:
        return found  # no google or grpc here: a private name in it is tsmodel's own
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _root(node) in modules and _private(node.attr):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "hasattr") and len(node.args) > 1 and \
                isinstance(node.args[1], ast.Constant) and _private(str(node.args[1].value)):
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    text = path.read_text()
    found += [f"mentions {name}" for name in PRIVATE_NAMES if name in text]
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_parts(dotted: str, line: int) -> list[str]:
    return [f"line {line}: {dotted}"] if any(map(_private, dotted.split("."))) else []


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def test_private_client_names_are_reached_only_through_the_one_module() -> None:
    # Every module that imports google or grpc (the Bigtable backend's, the
    # protobuf serializer...), not only the backend's. _bigtable_rpc.py, which
    # imports grpc, once read the client's channel with getattr(channel, "_channel").
    offenders = {
        str(path.relative_to(ROOT)): uses
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PRIVATE_MODULE and (uses := google_private_uses(path))
    }
    assert offenders == {}
    assert google_private_uses(PRIVATE_MODULE)  # the scan does see them there


def test_the_backends_page_lists_every_internal_and_the_range() -> None:
    page = (ROOT / "docs" / "backends.md").read_text()
    assert f"`google-cloud-bigtable{private.SUPPORTED_RANGE}`" in page
    for internal in private.INTERNALS:
        assert f"`{internal.name}`" in page
