"""Where notifications go and how hard they are tried: the worker's ``LLMGATE_NOTIFY_*``.

The webhook URLs carry their own credentials (a Slack incoming webhook's path is its secret),
so they live only in the worker's environment, never in a repository's config, and are never
logged, shown in a report or put in a job payload: the delivery job names a channel (``slack``,
``webhook``) and reads its URL here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from worker.runtime import SettingsError, whole_number

#: The arq ``ctx`` key where the worker's start-up keeps its `NotifySettings` (worker/main.py).
CTX_NOTIFY = "notify"
Channel = Literal["slack", "webhook"]
CHANNELS: tuple[Channel, ...] = ("slack", "webhook")
#: Tries of one delivery (the first included), unless ``LLMGATE_NOTIFY_MAX_TRIES`` says otherwise.
DEFAULT_MAX_TRIES = 6
#: First wait between tries, seconds; it doubles each try up to `MAX_BACKOFF_S`
#: (``LLMGATE_NOTIFY_BACKOFF_S``).
DEFAULT_BACKOFF_S = 2
MAX_BACKOFF_S = 300.0
#: Longest ``Retry-After`` honoured, seconds: a receiver asking for more is tried after this.
MAX_RETRY_AFTER_S = 900.0
#: Bound on each step of one POST (connect, each write, each read), seconds (httpx's timeout).
POST_TIMEOUT_S = 10.0
#: Bound on one whole POST, seconds: a receiver dripping its answer byte by byte under the
#: per-read timeout is cut off here and retried as a timeout.
POST_TOTAL_S = 30.0
#: Shortest URL path and query redacted on their own, characters (a short path such as ``/``
#: would hide text everywhere in the logs; a webhook's secret path is far longer).
MIN_SECRET_PART = 8


@dataclass(frozen=True)
class NotifySettings:
    """The operator's notification settings (all secrets masked in repr).

    Attributes:
        slack_url: a Slack incoming webhook (``LLMGATE_NOTIFY_SLACK_URL``), "" for none.
        webhook_url: a JSON webhook (``LLMGATE_NOTIFY_WEBHOOK_URL``), "" for none.
        webhook_secret: key of the JSON body's HMAC-SHA256 signature, sent as
            ``X-Llmgate-Signature-256: sha256=<hex>`` (``LLMGATE_NOTIFY_WEBHOOK_SECRET``), ""
            for unsigned.
        max_tries: tries of one delivery, >= 1 (``LLMGATE_NOTIFY_MAX_TRIES``, default 6).
        backoff_s: wait before the second try, seconds; doubled each later try, at most
            `MAX_BACKOFF_S` (``LLMGATE_NOTIFY_BACKOFF_S``, whole seconds, default 2).
    """

    slack_url: str = field(default="", repr=False)
    webhook_url: str = field(default="", repr=False)
    webhook_secret: str = field(default="", repr=False)
    max_tries: int = DEFAULT_MAX_TRIES
    backoff_s: float = DEFAULT_BACKOFF_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NotifySettings:
        """Read the ``LLMGATE_NOTIFY_*`` settings (unset or blank: no notifications).

        Raises:
            SettingsError: a URL is not http(s) with a host, a secret is set without
                ``LLMGATE_NOTIFY_WEBHOOK_URL``, or a number is malformed (one line naming the
                variable, never its value).
        """
        env = os.environ if environ is None else environ
        slack = _url(env, "LLMGATE_NOTIFY_SLACK_URL")
        webhook = _url(env, "LLMGATE_NOTIFY_WEBHOOK_URL")
        secret = env.get("LLMGATE_NOTIFY_WEBHOOK_SECRET", "").strip()
        if secret and not webhook:
            raise SettingsError("LLMGATE_NOTIFY_WEBHOOK_SECRET is set but "
                                "LLMGATE_NOTIFY_WEBHOOK_URL is not")
        return cls(slack, webhook, secret,
                   whole_number(env, "LLMGATE_NOTIFY_MAX_TRIES", DEFAULT_MAX_TRIES, 1),
                   whole_number(env, "LLMGATE_NOTIFY_BACKOFF_S", DEFAULT_BACKOFF_S, 0))

    @property
    def channels(self) -> tuple[Channel, ...]:
        """The channels with a URL, in `CHANNELS` order (empty: notifications are off)."""
        return tuple(c for c in CHANNELS if self.url(c))

    def url(self, channel: Channel) -> str:
        """Return ``channel``'s URL ("" when not set). Never log it."""
        return self.slack_url if channel == "slack" else self.webhook_url

    def secrets(self) -> tuple[str, ...]:
        """The values the log redactor must hide: the URLs, each URL's path and query (its
        secret part, however a library normalises the scheme, host or port in a log line,
        e.g. httpx's request lines), and the signing secret."""
        found = [self.slack_url, self.webhook_url, self.webhook_secret]
        for url in (self.slack_url, self.webhook_url):
            if url:
                parts = urlsplit(url)
                target = parts.path + (f"?{parts.query}" if parts.query else "")
                found.append(target if len(target) >= MIN_SECRET_PART else "")
        return tuple(dict.fromkeys(s for s in found if s))

    def delay_s(self, tries: int, retry_after_s: float | None = None) -> float:
        """Return seconds to wait after ``tries`` failed tries (>= 1): ``backoff_s * 2 **
        (tries - 1)``, at most `MAX_BACKOFF_S`, or the receiver's ``Retry-After`` when it
        asks for longer (at most `MAX_RETRY_AFTER_S`)."""
        backoff = min(MAX_BACKOFF_S, self.backoff_s * 2.0 ** max(0, tries - 1))
        asked = min(MAX_RETRY_AFTER_S, retry_after_s) if retry_after_s is not None else 0.0
        return max(backoff, asked)


def _url(env: Mapping[str, str], name: str) -> str:
    """Return the URL in ``env[name]`` ("" unset): http(s), a host, a valid port, printable
    ASCII only (a URL with spaces, control or non-ASCII characters is sent percent-encoded, a
    form the log redactor would not know) and no ``.``/``..`` path segments (normalised away
    likewise).

    Raises:
        SettingsError: anything else (the value is not shown: it is a secret).
    """
    raw = env.get(name, "").strip()
    if not raw:
        return ""
    try:
        parts = urlsplit(raw)
        segments = parts.path.split("/")
        ok = (parts.scheme in ("http", "https") and bool(parts.hostname)
              and (parts.port is None or parts.port > 0)
              and all("!" <= c <= "~" for c in raw) and "." not in segments
              and ".." not in segments)
    except ValueError:  # e.g. a port that is not a number
        ok = False
    if not ok:
        raise SettingsError(f"{name} must be an http(s) URL with a host, of printable ASCII "
                            "characters (percent-encode others) and without . or .. path "
                            "segments (its value is not shown: it is a secret)")
    return raw
