"""Connection URLs: which backend each form opens, and clear errors for the rest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tsmodel as ts
from tsmodel.backends import open_backend
from tsmodel.backends.embedded import EmbeddedBackend


@pytest.mark.parametrize("url", [None, "", "memory://", "sqlite://", "sqlite:///:memory:"])
def test_in_memory_forms(url: str | None) -> None:
    backend = open_backend(url)
    try:
        assert isinstance(backend, EmbeddedBackend)
        assert not backend.features.persistent
    finally:
        backend.close()


def test_three_slashes_is_a_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with ts.connect("sqlite:///data.db", default=False) as conn:
        assert conn.features.persistent
    assert (tmp_path / "data.db").exists()


def test_four_slashes_is_an_absolute_path(tmp_path: Path) -> None:
    target = tmp_path / "abs.db"
    assert os.path.isabs(target)
    with ts.connect(f"sqlite:///{target}", default=False):
        pass
    assert target.exists()


@pytest.mark.parametrize("url", ["sqlite:///", "sqlite:///?telemetry=false", "embedded:///"])
def test_an_empty_file_path_is_refused_naming_the_fix(url: str) -> None:
    """Issue 26 item 8: ``sqlite:///`` (a file URL whose path was left out, say of an
    unset variable) silently opened an in-memory store that loses every write."""
    scheme = url.split(":")[0]
    with pytest.raises(ts.ConfigurationError) as info:
        open_backend(url)
    message = str(info.value)
    assert repr(url) in message
    assert f"{scheme}:///path/to/file.db" in message and "memory://" in message
    with pytest.raises(ts.ConfigurationError):
        ts.connect(url, default=False)


@pytest.mark.parametrize("url", ["sqlite://data.db", "postgres://x", "bigtable://onlyproject",
                                 "bigtable-emulator:///p/i", "nonsense"])
def test_bad_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ts.ConfigurationError, match="cannot open"):
        open_backend(url)


@pytest.mark.parametrize("url", [b"memory://", 5, Path("metrics.db")],
                         ids=["bytes", "int", "path"])
def test_a_url_that_is_no_string_is_a_configuration_error(url: object) -> None:
    # bytes raised TypeError from urllib, an int AttributeError ('decode'), a Path
    # AttributeError too: none said that the URL is the problem.
    for call in (lambda: open_backend(url),  # type: ignore[arg-type]
                 lambda: ts.connect(url, default=False)):  # type: ignore[arg-type]
        with pytest.raises(ts.ConfigurationError, match="URL") as info:
            call()
        assert repr(url) in str(info.value) and type(url).__name__ in str(info.value)


SECRET = "s3cret"


@pytest.mark.parametrize("url", [
    f"bigtable://alice:{SECRET}@proj/inst",
    f"bigtable://{SECRET}@proj/inst",  # a token as the user name
    f"bigtable-emulator://alice:{SECRET}@localhost:8086/p/i",
    f"sqlite://alice:{SECRET}@/data.db",
    f"memory://alice:{SECRET}@",
    f"postgres://alice:{SECRET}@db.example.com/x",
])
def test_credentials_in_urls_are_refused_without_echo(url: str) -> None:
    with pytest.raises(ts.ConfigurationError, match="credentials") as info:
        open_backend(url)
    message = str(info.value)
    assert SECRET not in message and "***" in message
    assert SECRET not in repr(info.value.__cause__)


@pytest.mark.parametrize("url, shown", [
    (f"postgres://db.example.com/x?token={SECRET}", "token=***"),
    (f"nonsense?password={SECRET}&user=bob", "password=***&user=bob"),
    (f"sqlite://host/x.db?api_key={SECRET}", "api_key=***"),
    (f"bigtable://proj/inst/extra?credentials={SECRET}", "credentials=***"),
    (f"bigtable://proj/inst?access_token={SECRET}", "access_token=***"),
    (f"bigtable://alice:pa/ss{SECRET}@proj/inst", "bigtable://***@proj/inst"),
    (f"x://[?sig={SECRET}", "sig=***"),
])
def test_messages_redact_secret_looking_parts(url: str, shown: str) -> None:
    with pytest.raises(ts.ConfigurationError) as info:
        open_backend(url)
    assert SECRET not in str(info.value)
    assert shown in str(info.value)


@pytest.mark.parametrize("url, option, known", [
    ("bigtable://proj/inst?app_profle=typo", "app_profle", "app_profile"),
    ("bigtable-emulator://localhost:8086/p/i?timeout=5", "timeout", "app_profile"),
    ("bigtable://proj/inst?app_profile=a&flag", "flag", "app_profile"),
    ("sqlite:///data.db?mode=ro", "mode", "app_profile"),
])
def test_unknown_url_options_are_refused(url: str, option: str, known: str,
                                         tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ts.ConfigurationError) as info:
        open_backend(url)
    message = str(info.value)
    assert repr(option) in message and known in message
    assert not (tmp_path / "data.db").exists()  # refused before anything is opened


@pytest.mark.parametrize("url", ["x://[", "bigtable://[::1/p/i", "sqlite://[/x.db"])
def test_unparsable_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ts.ConfigurationError, match="cannot open") as info:
        ts.connect(url, default=False)
    assert isinstance(info.value, ValueError)


def test_backend_reprs_show_no_secrets(tmp_path: Path) -> None:
    from google.auth.credentials import AnonymousCredentials

    from tsmodel.backends.bigtable import BigtableBackend

    with ts.connect(f"sqlite:///{tmp_path}/x.db", default=False, cache=True) as conn:
        assert repr(conn.backend) == f"<CachingBackend EmbeddedBackend('{tmp_path}/x.db') " \
            "maxsize=10000 ttl=30.0>"
    credentials = AnonymousCredentials()
    backend = BigtableBackend("proj", "inst", emulator_host="localhost:1",
                              settings=ts.Settings(credentials=credentials, app_profile="prof"))
    try:
        shown = repr(backend) + repr(ts.Connection(backend))
        assert shown == "<BigtableBackend proj/inst on emulator localhost:1>" \
            "<Connection BigtableBackend>"
    finally:
        backend.close()


def test_connect_with_a_cache() -> None:
    with ts.connect("memory://", default=False, cache=True, cache_size=10,
                    cache_ttl=5.0) as conn:
        assert conn.cache is not None and conn.cache is conn.backend
    with ts.connect("memory://", default=False) as plain:
        assert plain.cache is None


@pytest.mark.parametrize("url, address", [
    ("bigtable-emulator://localhost/p/i", "'localhost'"),  # no port
    ("bigtable-emulator://localhost:/p/i", "'localhost:'"),
    ("bigtable-emulator://localhost:port/p/i", "'localhost:port'"),
    ("bigtable-emulator://localhost:99999/p/i", "'localhost:99999'"),
    ("bigtable-emulator://localhost:0/p/i", "'localhost:0'"),
    ("bigtable-emulator://:8086/p/i", "':8086'"),  # no host
])
def test_an_emulator_url_needs_host_and_port(url: str, address: str) -> None:
    with pytest.raises(ts.ConfigurationError, match="HOST:PORT") as info:
        ts.connect(url, default=False)
    message = str(info.value)
    assert repr(url) in message and address in message


def test_the_emulator_host_variable_needs_host_and_port(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", "localhost")
    with pytest.raises(ts.ConfigurationError, match="HOST:PORT") as info:
        ts.connect("bigtable://p/i", default=False)
    assert "BIGTABLE_EMULATOR_HOST" in str(info.value) and "'localhost'" in str(info.value)


@pytest.mark.parametrize("url", ["bigtable-emulator://localhost:8086/p/i",
                                 "bigtable-emulator://127.0.0.1:1/p/i",
                                 "bigtable-emulator://[::1]:65535/p/i"])
def test_emulator_addresses_accepted(url: str) -> None:
    with ts.connect(url, default=False) as conn:  # no call made: nothing needs to answer
        assert repr(conn.backend).endswith(url.split("/")[2] + ">")


def test_the_one_url_table_names_every_scheme_connect_opens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/backends.md's table is where the URL forms are documented: each
    scheme the code opens is in it, and each embedded form of it opens."""
    import re

    docs = Path(__file__).resolve().parents[2] / "docs" / "backends.md"
    table = docs.read_text(encoding="utf-8").split("| URL for `ts.connect(url)` |")[1]
    forms = re.findall(r'`"([a-z-]+://[^"]*)"`', table.split("\n\n")[0])
    assert {form.split("://")[0] for form in forms} == {
        "memory", "sqlite", "embedded", "bigtable", "bigtable-emulator"}
    monkeypatch.chdir(tmp_path)
    for form in forms:
        if form.startswith(("bigtable", "sqlite:////")):
            continue  # placeholders, an absolute path: their forms are tested above
        backend = open_backend(form.replace("/data/", "/"))  # a file here, in tmp_path
        try:
            assert isinstance(backend, EmbeddedBackend), form
        finally:
            backend.close()
