"""Worker configuration, read from the environment once at start-up."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_REDIS_URL = "redis://localhost:6379/0"
#: The variable naming the Redis of the response cache and reports (may evict).
CACHE_REDIS_VARIABLE = "LLMGATE_CACHE_REDIS_URL"
#: Jobs one worker process runs at once when ``LLMGATE_MAX_JOBS`` is unset.
DEFAULT_MAX_JOBS = 4


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
        max_jobs: jobs one worker process runs at once (``LLMGATE_MAX_JOBS``, default 4).
        cache_redis_url: ``LLMGATE_CACHE_REDIS_URL``, the Redis of the response cache, the
            learned answer lengths and the stored reports, which may evict (default:
            ``redis_url``). Queued jobs, leases, baselines and approvals stay on ``redis_url``.
    """

    app_id: str
    private_key: str = field(repr=False)
    api_url: str
    redis_url: str
    workdir: Path
    max_jobs: int = DEFAULT_MAX_JOBS
    cache_redis_url: str = ""

    def __post_init__(self) -> None:
        """Default ``cache_redis_url`` to the queue's Redis."""
        if not self.cache_redis_url:
            object.__setattr__(self, "cache_redis_url", self.redis_url)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkerConfig:
        """Read and validate the worker's settings.

        Variables: ``GITHUB_APP_ID``, ``GITHUB_APP_PRIVATE_KEY`` (PEM text) or
        ``GITHUB_APP_PRIVATE_KEY_FILE`` (path), ``GITHUB_API_URL``, ``REDIS_URL``,
        ``LLMGATE_WORKDIR`` (default ``~/.cache/llmgate``), ``LLMGATE_MAX_JOBS`` (default 4),
        ``LLMGATE_CACHE_REDIS_URL`` (default ``REDIS_URL``).

        Raises:
            SettingsError: one line naming the variable that is missing or malformed.
        """
        env = os.environ if environ is None else environ
        app_id = env.get("GITHUB_APP_ID", "").strip()
        if not (app_id.isascii() and app_id.isdigit()):
            raise SettingsError("GITHUB_APP_ID must be set to the App's numeric id")
        return cls(
            app_id=app_id,
            private_key=_private_key(env),
            api_url=_http_url(env.get("GITHUB_API_URL") or DEFAULT_API_URL, "GITHUB_API_URL"),
            redis_url=redis_url_from_env(env),
            workdir=Path(env.get("LLMGATE_WORKDIR") or Path.home() / ".cache" / "llmgate"),
            max_jobs=_max_jobs(env),
            cache_redis_url=redis_url_from_env(env, CACHE_REDIS_VARIABLE, default=""),
        )


def redis_url_from_env(env: Mapping[str, str], name: str = "REDIS_URL",
                       default: str = DEFAULT_REDIS_URL) -> str:
    """Return the Redis URL in variable ``name`` (else ``default``), checking its form.

    An empty ``default`` is returned as is (``LLMGATE_CACHE_REDIS_URL`` unset).

    Raises:
        SettingsError: the URL is not redis://, rediss:// or unix://, or its port or database
            number is malformed (the URL itself is never echoed: it may hold a password).
    """
    url = env.get(name, "").strip() or default
    if not url:
        return url
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise SettingsError(f"{name} must be a redis://, rediss:// or unix:// URL")
    _check_port(url, name)
    database = parts.path.lstrip("/") if parts.scheme != "unix" else ""
    if database and not (database.isascii() and database.isdigit()):
        raise SettingsError(f"{name} database (the path after the host) must be a number")
    return url


def whole_number(environ: Mapping[str, str], name: str, default: int, least: int) -> int:
    """Return the whole-number setting ``name`` of ``environ`` (``default`` when unset or blank).

    Raises:
        SettingsError: the value is not ASCII digits, or is below ``least``; the message
            quotes at most its first 20 characters.
    """
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < least:
        raise SettingsError(f"{name} must be a whole number >= {least}, got {raw[:20]!r}")
    return int(raw)


def _max_jobs(env: Mapping[str, str]) -> int:
    raw = env.get("LLMGATE_MAX_JOBS", "").strip()
    if not raw:
        return DEFAULT_MAX_JOBS
    if not (raw.isascii() and raw.isdigit() and int(raw) > 0):
        raise SettingsError("LLMGATE_MAX_JOBS must be a whole number of jobs, at least 1")
    return int(raw)


def _check_port(url: str, name: str) -> None:
    """Raise `SettingsError` when the URL's port is not a number in 0-65535 (never echo it)."""
    try:
        _ = urlsplit(url).port
    except ValueError:
        raise SettingsError(f"{name} has a malformed port (digits, 0-65535)") from None


def _private_key(env: Mapping[str, str]) -> str:
    pem = env.get("GITHUB_APP_PRIVATE_KEY", "")
    name = "GITHUB_APP_PRIVATE_KEY"
    if not pem and env.get("GITHUB_APP_PRIVATE_KEY_FILE"):
        name = "GITHUB_APP_PRIVATE_KEY_FILE"
        try:
            pem = Path(env["GITHUB_APP_PRIVATE_KEY_FILE"]).read_text(encoding="utf-8")
        except OSError as exc:
            raise SettingsError(f"{name} cannot be read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise SettingsError(f"{name} is not a PEM text file") from None
    if not pem:
        raise SettingsError(
            "GITHUB_APP_PRIVATE_KEY (PEM text) or GITHUB_APP_PRIVATE_KEY_FILE (path) must be set"
        )
    pem = pem.replace("\\n", "\n")
    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise SettingsError(f"{name} is not a PEM private key without a passphrase") from None
    if not isinstance(key, RSAPrivateKey):  # GitHub App JWTs are RS256
        raise SettingsError(f"{name} must be the GitHub App's RSA private key")
    return pem


def _http_url(url: str, name: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{name} must be an http(s) URL, e.g. {DEFAULT_API_URL}")
    _check_port(url, name)
    return url.rstrip("/")
