"""Connection URLs: split, checked, and shown without their secrets.

A connection URL ends up in logs, tracebacks and ``repr()``: it must not carry
credentials (Cloud Bigtable takes them from the environment, the emulator and
the embedded store need none), and a message that echoes one shows it
through `redact()`.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qs, quote, urlsplit

from tsmodel.errors import ConfigurationError

__all__ = ["redact", "split", "options", "with_app_profile"]

#: Query parameter names that look like they hold a secret.
_SECRET_NAME = re.compile(r"pass|pwd|secret|token|key|credential|auth|sig|session|cookie",
                          re.IGNORECASE)
#: User info: from ``//`` to the last ``@`` before the query (a password may hold ``/``).
_USERINFO = re.compile(r"//[^?#]*@")
#: A ``name=value`` parameter of the query or fragment.
_PARAM = re.compile(r"([?&;#])([^=&;#]*)=([^&;#]*)")

_NO_CREDENTIALS = (
    "credentials do not belong in a connection URL, which shows in logs and "
    "tracebacks: Cloud Bigtable takes Google's application default credentials "
    "(GOOGLE_APPLICATION_CREDENTIALS, a service account, or `gcloud auth "
    "application-default login`); the emulator and the embedded store need none"
)


def redact(url: str) -> str:
    """``url`` as it may be shown: user info and secret-looking parameter values as ``***``.

    Works on any text, including a URL that does not parse.
    """
    shown = _USERINFO.sub("//***@", url, count=1)
    return _PARAM.sub(_hide_value, shown)


def _hide_value(match: re.Match[str]) -> str:
    separator, name, value = match.groups()
    return f"{separator}{name}={'***' if _SECRET_NAME.search(name) else value}"


def split(url: str) -> SplitResult:
    """The parts of ``url``.

    Raises:
        ConfigurationError: ``url`` does not parse, or holds credentials
            (``user:password@`` or ``token@``); the message shows it redacted.
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        # The parser's message may quote the host part, user info included.
        reason = str(exc)
        found = _USERINFO.search(url)
        if found:
            reason = reason.replace(found.group()[2:-1], "***")
        raise ConfigurationError(
            f"cannot open {redact(url)!r}: it does not parse as a URL ({reason})") from None
    if "@" in parts.netloc:
        raise ConfigurationError(f"cannot open {redact(url)!r}: {_NO_CREDENTIALS}")
    return parts


def options(url: str, parts: SplitResult) -> dict[str, str]:
    """The query options of ``url``, each given once (their names are checked by
    `tsmodel.settings.resolve()`).

    Raises:
        ConfigurationError: an option is given twice; the message names it.
    """
    found = parse_qs(parts.query, keep_blank_values=True)
    for name, values in found.items():
        if len(values) > 1:
            raise ConfigurationError(f"cannot open {redact(url)!r}: option {name!r} is given "
                                     f"{len(values)} times")
    return {name: values[0] for name, values in found.items()}


def with_app_profile(url: str, app_profile: str | None) -> str:
    """``url`` with the query option ``app_profile=`` set (``url`` itself for ``None``).

    For those who open a store from a URL alone (Beam's workers): the app
    profile goes where every worker reads it.

    Raises:
        ConfigurationError: the URL names another app profile, or
            ``app_profile`` is empty or not a string.
    """
    if app_profile is None:
        return url
    if not isinstance(app_profile, str) or not app_profile:
        raise ConfigurationError(f"an app profile id must be a non-empty string, "
                                 f"got {app_profile!r}")
    given = options(url, split(url)).get("app_profile")
    if given is not None:
        if given == app_profile:
            return url
        raise ConfigurationError(
            f"{redact(url)!r} names the app profile {given!r}, and {app_profile!r} "
            "is asked for too: give it once")
    base, hash_, fragment = url.partition("#")
    joiner = "&" if "?" in base and not base.endswith(("?", "&")) else \
        ("" if base.endswith(("?", "&")) else "?")
    return f"{base}{joiner}app_profile={quote(app_profile, safe='')}{hash_}{fragment}"
