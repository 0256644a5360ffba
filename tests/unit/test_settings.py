"""Connection settings: names and values checked, from keywords and URL options, documented."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

import tsmodel as ts
from tsmodel.backends import _bigtable_rpc as rpc
from tsmodel.settings import NAMES, URL_NAMES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def test_the_defaults_are_the_data_clients() -> None:
    # google-cloud-bigtable's data client: read 20 s / 600 s, mutate 60 s / 600 s,
    # back-off from 10 ms to 60 s, doubling.
    policies = rpc.Policies.of(ts.Settings())
    assert policies.read == rpc.RetryPolicy(20.0, 600.0, None, (0.01, 60.0, 2.0))
    assert policies.mutate == rpc.RetryPolicy(60.0, 600.0, None, (0.01, 60.0, 2.0))


def test_settings_make_the_retry_policies() -> None:
    settings = ts.Settings(read_attempt_timeout=1, read_operation_timeout=2,
                           mutate_attempt_timeout=3, mutate_operation_timeout=4,
                           retry_attempts=5, backoff_initial=0.5, backoff_maximum=6,
                           backoff_multiplier=1.5)
    policies = rpc.Policies.of(settings)
    assert policies.read == rpc.RetryPolicy(1, 2, 5, (0.5, 6, 1.5))
    assert policies.mutate == rpc.RetryPolicy(3, 4, 5, (0.5, 6, 1.5))


@pytest.mark.parametrize(("name", "value", "says"), [
    ("read_attempt_timeout", 0, "above 0"),
    ("mutate_operation_timeout", -1.0, "above 0"),
    ("read_operation_timeout", math.inf, "above 0"),
    ("read_attempt_timeout", "5", "number of seconds"),
    ("mutate_attempt_timeout", True, "number of seconds"),
    ("retry_attempts", 0, "at least 1"),
    ("retry_attempts", 2.5, "whole number"),
    ("backoff_multiplier", 0.5, "at least 1"),
    ("slow_call_threshold", -0.1, "at least 0"),
    ("telemetry", "yes", "True or False"),
    ("app_profile", "", "non-empty"),
    ("client_options", "endpoint", "dict"),
    ("credentials", "token", "google.auth credentials"),
])
def test_bad_values_are_refused_naming_the_setting(name: str, value: Any, says: str) -> None:
    with pytest.raises(ts.ConfigurationError) as info:
        ts.connect("memory://", default=False, **{name: value})
    message = str(info.value)
    assert repr(name) in message and repr(value) in message and says in message
    assert isinstance(info.value, ValueError)


def test_backoff_maximum_below_initial_is_refused() -> None:
    with pytest.raises(ts.ConfigurationError, match="'backoff_maximum'.*'backoff_initial'"):
        ts.Settings(backoff_initial=2.0, backoff_maximum=1.0)


def test_an_unknown_keyword_names_the_closest_setting_and_all() -> None:
    with pytest.raises(ts.ConfigurationError) as info:
        ts.connect("memory://", default=False, app_profle="batch")
    message = str(info.value)
    assert "unknown setting 'app_profle' (did you mean 'app_profile'?)" in message
    assert all(name in message for name in NAMES)


def test_an_unknown_keyword_far_from_any_gets_no_guess() -> None:
    with pytest.raises(ts.ConfigurationError) as info:
        ts.connect("memory://", default=False, zzz=1)
    assert "did you mean" not in str(info.value) and "'zzz'" in str(info.value)


def test_an_unknown_url_option_names_the_closest_url_option(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db?read_atempt_timeout=3"
    with pytest.raises(ts.ConfigurationError) as info:
        ts.connect(url, default=False)
    message = str(info.value)
    assert "(did you mean 'read_attempt_timeout'?)" in message
    assert message.endswith("the URL options are: " + ", ".join(URL_NAMES))
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("name", ["credentials", "client_options", "tracer_provider"])
def test_settings_that_are_objects_are_refused_in_urls(name: str) -> None:
    with pytest.raises(ts.ConfigurationError, match=f"setting '{name}' cannot be given in a URL"):
        ts.connect(f"memory:///?{name}=x", default=False)


@pytest.mark.parametrize(("query", "name", "says"), [
    ("retry_attempts=three", "retry_attempts", "a whole number"),
    ("read_attempt_timeout=soon", "read_attempt_timeout", "a number of seconds"),
    ("telemetry=maybe", "telemetry", "true or false"),
    ("read_attempt_timeout=-2", "read_attempt_timeout", "above 0"),
])
def test_url_values_that_do_not_parse_are_refused(query: str, name: str, says: str) -> None:
    with pytest.raises(ts.ConfigurationError) as info:
        ts.connect(f"sqlite:///:memory:?{query}", default=False)
    assert repr(name) in str(info.value) and says in str(info.value)


def test_url_options_are_parsed_and_keywords_win() -> None:
    url = ("sqlite:///:memory:?app_profile=batch&read_attempt_timeout=2.5&retry_attempts=3"
           "&slow_call_threshold=none&backoff_multiplier=1.5")
    with ts.connect(url, default=False, retry_attempts=7) as conn:
        expected = ts.Settings(app_profile="batch", read_attempt_timeout=2.5, retry_attempts=7,
                               slow_call_threshold=None, backoff_multiplier=1.5)
        assert conn.settings == expected


def test_the_repr_shows_changed_settings_but_never_credentials() -> None:
    from google.auth.credentials import AnonymousCredentials

    shown = repr(ts.Settings(credentials=AnonymousCredentials(), retry_attempts=2))
    assert shown == "Settings(credentials=<credentials>, retry_attempts=2)"


def test_every_setting_is_in_the_one_table_of_the_docs() -> None:
    """docs/operations.md has one table of settings: a row per setting, in order, its default."""
    text = DOCS.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| `([^`]*)` \|", text, flags=re.MULTILINE)
    assert [name for name, _, _ in rows] == list(NAMES)
    defaults = ts.Settings()
    for name, _, default in rows:
        assert default == repr(getattr(defaults, name)), name


def test_telemetry_without_opentelemetry_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.delitem(sys.modules, "tsmodel.run._otel", raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if not installed
    with pytest.raises(ts.ConfigurationError, match=r"pip install 'tsmodel-bigtable\[otel\]'"):
        ts.connect("memory://?telemetry=true", default=False)


@pytest.mark.parametrize(("options", "name", "value", "says"), [
    ({"batch_size": "10"}, "batch_size", "10", "whole number of at least 1"),
    ({"batch_size": 2.5}, "batch_size", 2.5, "whole number of at least 1"),
    ({"batch_size": True}, "batch_size", True, "whole number of at least 1"),
    ({"batch_size": 0}, "batch_size", 0, "whole number of at least 1"),
    ({"cache": "yes"}, "cache", "yes", "True or False"),
    ({"cache": 1}, "cache", 1, "True or False"),
    ({"cache": True, "cache_size": "10"}, "cache_size", "10", "whole number of at least 1"),
    ({"cache": True, "cache_size": 0}, "cache_size", 0, "whole number of at least 1"),
    ({"cache": True, "cache_ttl": "30"}, "cache_ttl", "30", "number of seconds above 0"),
    ({"cache": True, "cache_ttl": math.nan}, "cache_ttl", math.nan, "number of seconds"),
    ({"cache_ttl": -1}, "cache_ttl", -1, "number of seconds above 0"),
    ({"flow": "fast"}, "flow", "fast", "ts.WriteFlow"),
    ({"flow": {"batches": 2}}, "flow", {"batches": 2}, "ts.WriteFlow"),
    ({"default": "no"}, "default", "no", "True or False"),
])
def test_connect_options_of_the_wrong_type_are_refused_naming_them(
        options: dict[str, Any], name: str, value: Any, says: str) -> None:
    with pytest.raises(ts.ConfigurationError) as info:
        ts.connect("memory://", **options)
    message = str(info.value)
    assert repr(name) in message and repr(value) in message and says in message, message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("name", "value", "says"), [
    ("batches", "4", "whole number of at least 1"),
    ("batches", 0, "whole number of at least 1"),
    ("bytes", 1.5, "whole number of at least 1"),
    ("companions_with_main", "no", "True or False"),
    ("server_rate_limits", 1, "True or False"),
])
def test_write_flow_values_of_the_wrong_type_are_refused(name: str, value: Any,
                                                         says: str) -> None:
    with pytest.raises(ts.ConfigurationError) as info:
        ts.WriteFlow(**{name: value})
    message = str(info.value)
    assert repr(name) in message and repr(value) in message and says in message, message


def test_async_connect_options_are_checked_when_called() -> None:
    with pytest.raises(ts.ConfigurationError, match="'batch_size'.*'10'"):
        ts.connect_async("memory://", batch_size="10")


@pytest.mark.parametrize("name", ["create_tables", "save", "range", "latest"])
def test_a_connection_used_without_await_says_to_await_it(name: str) -> None:
    # `db = ts.connect_async(url)` without `await` gave "'_Connecting' object has
    # no attribute 'create_tables'", naming a private class and no fix.
    db = ts.connect_async("memory://")
    with pytest.raises(AttributeError) as info:
        getattr(db, name)
    message = str(info.value)
    assert name in message and "await ts.connect_async(" in message
    assert "async with ts.connect_async(" in message and "_Connecting" not in message
    with pytest.raises(AttributeError, match="no_such_thing"):
        db.no_such_thing  # noqa: B018


@pytest.mark.parametrize("text", ["yes", "no", "on", "off", "1", "0", "", "t"])
def test_a_bool_url_option_is_true_or_false_only(text: str) -> None:
    with pytest.raises(ts.ConfigurationError) as info:
        ts.connect(f"memory://?telemetry={text}", default=False)
    assert "'telemetry' must be true or false" in str(info.value)
    assert f"got {text!r}" in str(info.value)


@pytest.mark.parametrize(("text", "on"), [("false", False), ("False", False),
                                          ("FALSE", False)])
def test_a_bool_url_option_in_any_case(text: str, on: bool) -> None:
    with ts.connect(f"memory://?telemetry={text}", default=False) as conn:
        assert conn.settings.telemetry is on
