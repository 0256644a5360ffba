"""Connection settings: timeouts, retries, credentials, app profile, logging and telemetry.

One frozen `Settings` holds everything a connection can be told, from
keyword arguments (``ts.connect(url, read_attempt_timeout=5)``) or the URL's
query options (``bigtable://p/i?app_profile=batch&retry_attempts=3``).
Every name and value is checked when the connection opens: a misspelt name
raises `ConfigurationError` naming it, the closest
valid name and the list of valid ones; a value out of range names the
setting, the value and what it must be.

The settings of Cloud Bigtable (timeouts, retries, credentials, client
options, app profile) are accepted by every URL, so that one configuration
works on the embedded store in tests and on Cloud Bigtable in production:
the embedded store has no network and ignores them. docs/operations.md
shows every setting in one table.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from tsmodel.errors import ConfigurationError

__all__ = ["Settings", "DEFAULT_SETTINGS", "resolve", "check_seconds", "check_whole",
           "check_flag"]


# -- checks of one value: every setting and option of a connection goes through these ------


def check_seconds(name: str, value: Any, *, optional: bool = False, zero: bool = False,
                  what: str = "setting") -> None:
    """Refuse anything but a finite number of seconds above 0 (at least 0 with
    ``zero``; or ``None`` with ``optional``); the message names ``what name``.

    Raises:
        ConfigurationError: naming the setting and the value.
    """
    if value is None and optional:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and (value >= 0 if zero else value > 0)
    if not ok:
        bound = "at least 0" if zero else "above 0"
        none = " or None" if optional else ""
        raise ConfigurationError(f"{what} {name!r} must be a number of seconds "
                                 f"{bound}{none}, got {value!r}")


def check_whole(name: str, value: Any, *, minimum: int = 1, optional: str = "",
                what: str = "setting") -> None:
    """Refuse anything but an ``int`` (not a bool) of at least ``minimum``; ``None``
    too when ``optional`` says what it means.

    Raises:
        ConfigurationError: naming the setting and the value.
    """
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        none = f" or None ({optional})" if optional else ""
        raise ConfigurationError(f"{what} {name!r} must be a whole number of at least "
                                 f"{minimum}{none}, got {value!r}")


def check_flag(name: str, value: Any, *, what: str = "setting") -> None:
    """Refuse anything but ``True`` or ``False`` (not ``1``, not ``"yes"``).

    Raises:
        ConfigurationError: naming the setting and the value.
    """
    if not isinstance(value, bool):
        raise ConfigurationError(f"{what} {name!r} must be True or False, got {value!r}")


def _check_seconds(optional: bool = False, zero: bool = False) -> Callable[..., None]:
    """A validator: a finite number of seconds above 0 (or at least 0; or ``None``)."""
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_seconds(attribute.name, value, optional=optional, zero=zero)
    return check


def _check_number(minimum: float) -> Callable[..., None]:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and value >= minimum):
            raise ConfigurationError(f"setting {attribute.name!r} must be a number of at "
                                     f"least {minimum:g}, got {value!r}")
    return check


def _check_attempts(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_whole(attribute.name, value, optional="until the operation timeout")


def _check_app_profile(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigurationError(f"setting {attribute.name!r} must be an app profile id "
                                 f"(a non-empty string) or None, got {value!r}")


def _check_flag(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_flag(attribute.name, value)


def _check_client_options(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    # A mapping, or google.api_core's ClientOptions (not imported here: the core stays SDK-free).
    if value is not None and not isinstance(value, Mapping) \
            and not hasattr(value, "api_endpoint"):
        raise ConfigurationError(
            f"setting {attribute.name!r} must be a dict or a "
            f"google.api_core.client_options.ClientOptions, got {value!r}")


def _check_credentials(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(getattr(value, "refresh", None)):
        raise ConfigurationError(
            f"setting {attribute.name!r} must be google.auth credentials (with a "
            f"refresh() method) or None for the application default, got {value!r}")


# -- parsing URL query options -----------------------------------------------------


def _seconds(text: str) -> float | None:
    if text.lower() == "none":
        return None
    return float(text)


def _count(text: str) -> int | None:
    if text.lower() == "none":
        return None
    return int(text)


def _flag(text: str) -> bool:
    """``true`` or ``false``, in any case: what docs/operations.md says, and no more."""
    if text.lower() == "true":
        return True
    if text.lower() == "false":
        return False
    raise ValueError(text)


def _text(text: str) -> str:
    return text


def _setting(default: Any, validator: Callable[..., None],
             url: Callable[[str], Any] | None, expects: str = "") -> Any:
    """A field of `Settings`: how a URL option spells it (``url=None``: keyword only)."""
    return attrs.field(default=default, validator=validator, kw_only=True,
                       metadata={"url": url, "expects": expects})


@attrs.frozen
class Settings:
    """The settings of a connection (see docs/operations.md for the table).

    Give them to `tsmodel.connect()` (or `tsmodel.connect_async()`)
    as keyword arguments, or as query options of the URL; keywords win over
    the URL. Every setting of Cloud Bigtable is accepted by the embedded
    store, which ignores it.

    Attributes:
        app_profile: the app profile id of data requests (``None``: the
            instance's default profile).
        credentials: ``google.auth`` credentials for Cloud Bigtable
            (``None``: the application default); ignored on the emulator.
            Keyword only.
        client_options: ``client_options`` of google-cloud-bigtable's data
            and admin clients (a dict or a ``ClientOptions``: ``api_endpoint``,
            ``quota_project_id``...); ignored on the emulator. Keyword only.
        read_attempt_timeout: seconds one ``ReadRows`` call may take before
            it is retried (resumed after the last row).
        read_operation_timeout: seconds a read may go on retrying without
            progress; each row returned starts a fresh budget.
        mutate_attempt_timeout: seconds one ``MutateRows`` call may take
            before its entries are retried.
        mutate_operation_timeout: seconds a write may go on retrying; then
            its entries not applied are reported FAILED or UNKNOWN.
        retry_attempts: the most calls of one operation (a read: without
            progress between them); ``None``: until the operation timeout.
        backoff_initial: seconds before the first retry.
        backoff_maximum: the longest wait between two attempts.
        backoff_multiplier: how much each wait grows (waits are jittered).
        slow_call_threshold: a backend call (a write of one table, a read)
            waiting longer than this many seconds is logged as a warning
            on ``tsmodel.calls``; ``None``: never.
        telemetry: emit OpenTelemetry spans and metrics through the global
            tracer and meter providers (needs ``tsmodel-bigtable[otel]``).
        tracer_provider: an OpenTelemetry tracer provider to use instead of
            the global one; giving one turns telemetry on. Keyword only.
        meter_provider: an OpenTelemetry meter provider to use instead of
            the global one; giving one turns telemetry on. Keyword only.
    """

    app_profile: str | None = _setting(None, _check_app_profile, _text)
    credentials: Any = _setting(None, _check_credentials, None)
    client_options: Any = _setting(None, _check_client_options, None)
    read_attempt_timeout: float = _setting(20.0, _check_seconds(), _seconds)
    read_operation_timeout: float = _setting(600.0, _check_seconds(), _seconds)
    mutate_attempt_timeout: float = _setting(60.0, _check_seconds(), _seconds)
    mutate_operation_timeout: float = _setting(600.0, _check_seconds(), _seconds)
    retry_attempts: int | None = _setting(None, _check_attempts, _count, "a whole number")
    backoff_initial: float = _setting(0.01, _check_seconds(), _seconds)
    backoff_maximum: float = _setting(60.0, _check_seconds(), _seconds)
    backoff_multiplier: float = _setting(2.0, _check_number(1.0), float, "a number")
    slow_call_threshold: float | None = _setting(5.0, _check_seconds(optional=True, zero=True),
                                                 _seconds)
    telemetry: bool = _setting(False, _check_flag, _flag, "true or false")
    tracer_provider: Any = _setting(None, lambda *_: None, None)
    meter_provider: Any = _setting(None, lambda *_: None, None)

    def __attrs_post_init__(self) -> None:
        if self.backoff_maximum < self.backoff_initial:
            raise ConfigurationError(
                f"setting 'backoff_maximum' ({self.backoff_maximum!r}) must be at least "
                f"'backoff_initial' ({self.backoff_initial!r})")

    @property
    def observed(self) -> bool:
        """Whether OpenTelemetry is on (``telemetry``, or a provider given)."""
        return self.telemetry or self.tracer_provider is not None \
            or self.meter_provider is not None

    def __repr__(self) -> str:
        # Only what differs from the defaults, and never the credentials themselves.
        changed = [f"{a.name}={'<credentials>' if a.name == 'credentials' else repr(v)}"
                   for a, v in ((a, getattr(self, a.name)) for a in attrs.fields(Settings))
                   if v != a.default]
        return f"Settings({', '.join(changed)})"


DEFAULT_SETTINGS = Settings()
#: Every setting's name, in the order of the docs' table.
NAMES = tuple(a.name for a in attrs.fields(Settings))
#: The settings a URL's query may give (not credentials, client options, providers).
URL_NAMES = tuple(a.name for a in attrs.fields(Settings) if a.metadata["url"] is not None)


def resolve(query: Mapping[str, str], options: Mapping[str, Any], *,
            where: str = "connect()") -> Settings:
    """The settings of a URL's query options, then keyword options over them.

    Args:
        query: the URL's query options, as text.
        options: keyword settings (win over ``query``).
        where: what to name in errors (the redacted URL).

    Raises:
        ConfigurationError: an unknown name (with the closest valid one), a
            keyword-only setting in a URL, a value that does not parse or
            is out of range.
    """
    fields = attrs.fields_dict(Settings)
    _refuse_unknown(query, f"cannot open {where}: unknown option", "URL options", URL_NAMES)
    _refuse_unknown(options, "unknown setting", "settings", NAMES)
    values: dict[str, Any] = {}
    for name, text in query.items():
        parse = fields[name].metadata["url"]
        if parse is None:
            raise ConfigurationError(
                f"cannot open {where}: setting {name!r} cannot be given in a URL (which "
                f"shows in logs); pass it as a keyword argument: connect(url, {name}=...)")
        try:
            values[name] = parse(text)
        except ValueError:
            expects = fields[name].metadata["expects"] or "a number of seconds"
            raise ConfigurationError(
                f"cannot open {where}: option {name!r} must be {expects}, "
                f"got {text!r}") from None
    values.update(options)
    return Settings(**values)


def _refuse_unknown(given: Iterable[str], what: str, kinds: str,
                    valid: tuple[str, ...]) -> None:
    """Raise for the first name of ``given`` that is no setting, with the closest of ``valid``."""
    unknown = [name for name in given if name not in NAMES]
    if not unknown:
        return
    name = unknown[0]
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigurationError(f"{what} {name!r}{hint}; the {kinds} are: {', '.join(valid)}")
