"""Worker configuration, read from the environment once at start-up."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.serialization import load_pem_private_key

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_REDIS_URL = "redis://localhost:6379/0"


class SettingsError(Exception):
    """A required setting is missing or malformed; the message is one line naming the variable."""


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process needs to reach GitHub, Redis and its disk.

    Attributes:
        app_id: the GitHub App id (digits, as a string: JWT ``iss``).
        private_key: the App's PEM private key (masked in repr).
        api_url: GitHub's REST root without a trailing slash, e.g. ``https://api.github.com`` or
            ``https://HOST/api/v3`` for GitHub Enterprise Server.
        redis_url: ``redis://``, ``rediss://`` or ``unix://`` URL of the queue.
        workdir: where mirrors and worktrees go.
    """

    app_id: str
    private_key: str = field(repr=False)
    api_url: str
    redis_url: str
    workdir: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkerConfig:
        """Read and validate the worker's settings.

        Variables: ``GITHUB_APP_ID``, ``GITHUB_APP_PRIVATE_KEY`` (PEM text) or
        ``GITHUB_APP_PRIVATE_KEY_FILE`` (path), ``GITHUB_API_URL``, ``REDIS_URL``,
        ``LLMGATE_WORKDIR`` (default ``~/.cache/llmgate``).

        Raises:
            SettingsError: one line naming the variable that is missing or malformed.
        """
        env = os.environ if environ is None else environ
        app_id = env.get("GITHUB_APP_ID", "").strip()
        if not app_id.isdigit():
            raise SettingsError("GITHUB_APP_ID must be set to the App's numeric id")
        return cls(
            app_id=app_id,
            private_key=_private_key(env),
            api_url=_http_url(env.get("GITHUB_API_URL", DEFAULT_API_URL), "GITHUB_API_URL"),
            redis_url=redis_url_from_env(env),
            workdir=Path(env.get("LLMGATE_WORKDIR") or Path.home() / ".cache" / "llmgate"),
        )


def redis_url_from_env(env: Mapping[str, str]) -> str:
    """Return ``REDIS_URL`` (default ``redis://localhost:6379/0``), checking its scheme.

    Raises:
        SettingsError: the URL is not redis://, rediss:// or unix://.
    """
    url = env.get("REDIS_URL") or DEFAULT_REDIS_URL
    if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise SettingsError("REDIS_URL must be a redis://, rediss:// or unix:// URL")
    return url


def _private_key(env: Mapping[str, str]) -> str:
    pem = env.get("GITHUB_APP_PRIVATE_KEY", "")
    name = "GITHUB_APP_PRIVATE_KEY"
    if not pem and env.get("GITHUB_APP_PRIVATE_KEY_FILE"):
        name = "GITHUB_APP_PRIVATE_KEY_FILE"
        try:
            pem = Path(env["GITHUB_APP_PRIVATE_KEY_FILE"]).read_text()
        except OSError as exc:
            raise SettingsError(f"{name} cannot be read: {exc.strerror}") from None
    if not pem:
        raise SettingsError(
            "GITHUB_APP_PRIVATE_KEY (PEM text) or GITHUB_APP_PRIVATE_KEY_FILE (path) must be set"
        )
    pem = pem.replace("\\n", "\n")
    try:
        load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise SettingsError(f"{name} is not a PEM private key without a passphrase") from None
    return pem


def _http_url(url: str, name: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SettingsError(f"{name} must be an http(s) URL, e.g. {DEFAULT_API_URL}")
    return url.rstrip("/")
