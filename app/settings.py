"""Configuration of the web process, read once from the environment and checked strictly.

The web process needs only the webhook secret (and, while it is being rotated, the previous
one), where Redis is, and a body size cap: never the App's private key or any provider key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

#: Used when ``REDIS_URL`` is unset or empty.
DEFAULT_REDIS_URL = "redis://localhost:6379/0"
#: GitHub caps webhook payloads at 25 MB and does not deliver larger ones
#: (docs.github.com/en/webhooks/webhook-events-and-payloads#payload-cap).
DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024
_REDIS_SCHEMES = ("redis", "rediss", "unix")
_MASK = "**********"


class SettingsError(ValueError):
    """A variable is missing or malformed; the message is one line that names it."""


@dataclass(frozen=True, repr=False)
class WebSettings:
    """Settings of the web process (the webhook receiver).

    Attributes:
        webhook_secret: ``GITHUB_WEBHOOK_SECRET``, the secret set on the GitHub App's webhook;
            never shown by ``repr``.
        previous_webhook_secret: ``GITHUB_WEBHOOK_SECRET_PREVIOUS``, the secret it replaces,
            accepted as well while a rotation is under way ("" when unset); never shown by
            ``repr``.
        redis_url: ``REDIS_URL``, a ``redis://``, ``rediss://`` or ``unix://`` URL; its password,
            if any, is masked by ``repr``.
        max_body_bytes: ``LLMGATE_MAX_BODY_BYTES``, the largest request body accepted, in bytes.
        cache_redis_url: ``LLMGATE_CACHE_REDIS_URL``, the Redis the workers keep the stored
            reports in (with the response cache; it may evict); "" when unset: ``redis_url``.
            Its password, if any, is masked by ``repr``.

    Raises:
        SettingsError: on construction, when a value is empty or malformed.
    """

    webhook_secret: str
    redis_url: str = DEFAULT_REDIS_URL
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    previous_webhook_secret: str = ""
    cache_redis_url: str = ""

    @property
    def reports_redis_url(self) -> str:
        """Where the stored reports are: ``cache_redis_url``, else ``redis_url``."""
        return self.cache_redis_url or self.redis_url

    @property
    def webhook_secrets(self) -> tuple[str, ...]:
        """The secrets a delivery may be signed with: the current one, then the previous one
        when it is set and differs."""
        previous = self.previous_webhook_secret
        if previous and previous != self.webhook_secret:
            return (self.webhook_secret, previous)
        return (self.webhook_secret,)

    def __post_init__(self) -> None:
        """Check every field; raise ``SettingsError`` naming the variable at fault."""
        if not self.webhook_secret.strip():
            raise SettingsError(
                "GITHUB_WEBHOOK_SECRET is not set or empty: "
                "set it to the GitHub App's webhook secret"
            )
        if self.previous_webhook_secret and not self.previous_webhook_secret.strip():
            raise SettingsError("GITHUB_WEBHOOK_SECRET_PREVIOUS is only blanks: set it to the "
                                "webhook secret being rotated out, or unset it")
        _check_redis_url(self.redis_url)
        if self.cache_redis_url:
            _check_redis_url(self.cache_redis_url, "LLMGATE_CACHE_REDIS_URL")
        if self.max_body_bytes <= 0:
            raise SettingsError("LLMGATE_MAX_BODY_BYTES must be a positive number of bytes")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> WebSettings:
        """Read the settings from ``environ`` (default: the process environment).

        An optional variable that is set but empty counts as unset.

        Raises:
            SettingsError: a required variable is missing, or a value is malformed.
        """
        raw_max = environ.get("LLMGATE_MAX_BODY_BYTES", "").strip()
        if raw_max and not (raw_max.isascii() and raw_max.isdigit()):
            raise SettingsError(
                f"LLMGATE_MAX_BODY_BYTES must be a whole number of bytes, got {raw_max[:40]!r}"
            )
        return cls(
            webhook_secret=environ.get("GITHUB_WEBHOOK_SECRET", ""),
            redis_url=environ.get("REDIS_URL", "").strip() or DEFAULT_REDIS_URL,
            max_body_bytes=int(raw_max) if raw_max else DEFAULT_MAX_BODY_BYTES,
            previous_webhook_secret=environ.get("GITHUB_WEBHOOK_SECRET_PREVIOUS", ""),
            cache_redis_url=environ.get("LLMGATE_CACHE_REDIS_URL", "").strip(),
        )

    def __repr__(self) -> str:
        """Show the settings with the secrets and any Redis password masked."""
        previous = _MASK if self.previous_webhook_secret else ""
        return (
            f"WebSettings(webhook_secret={_MASK!r}, redis_url={masked_url(self.redis_url)!r}, "
            f"max_body_bytes={self.max_body_bytes}, previous_webhook_secret={previous!r}, "
            f"cache_redis_url={masked_url(self.cache_redis_url)!r})"
        )


def masked_url(url: str) -> str:
    """Return ``url`` with its password (if any) replaced by asterisks, for logs and reprs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.partition(":")[0]
    return parts._replace(netloc=f"{name}:{_MASK}@{host}").geturl()


def _check_redis_url(url: str, name: str = "REDIS_URL") -> None:
    """Raise ``SettingsError`` unless ``url`` (variable ``name``) is a Redis URL that arq and
    redis-py accept.

    The URL itself is never echoed: it may hold a password.
    """
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError on a non-numeric or out-of-range port
    except ValueError as exc:
        raise SettingsError(f"{name} is not a valid URL ({exc})") from None
    if parts.scheme not in _REDIS_SCHEMES:
        got = f"got {parts.scheme}://" if parts.scheme else "it has no scheme"
        raise SettingsError(f"{name} must start with redis://, rediss:// or unix:// ({got})")
    if parts.scheme == "unix":
        if not parts.path:
            raise SettingsError(f"{name} unix:// needs a socket path, e.g. unix:///run/redis.sock")
        return
    database = parts.path.lstrip("/")
    if database and not (database.isascii() and database.isdigit()):
        raise SettingsError(f"{name} database (the path after the host) must be a number")
