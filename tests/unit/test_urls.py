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


@pytest.mark.parametrize("url", ["sqlite://data.db", "postgres://x", "bigtable://onlyproject",
                                 "bigtable-emulator:///p/i", "nonsense"])
def test_bad_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ts.ConfigurationError, match="cannot open"):
        open_backend(url)


def test_connect_with_a_cache() -> None:
    with ts.connect("memory://", default=False, cache=True, cache_size=10,
                    cache_ttl=5.0) as conn:
        assert conn.cache is not None and conn.cache is conn.backend
    with ts.connect("memory://", default=False) as plain:
        assert plain.cache is None
