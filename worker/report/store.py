"""Keep each gate's full report in Redis for the check run's "Details" link (``details_url``).

Opt-in: only when ``LLMGATE_PUBLIC_URL`` is set (the web process's public root, e.g.
``https://llmgate.example.com``). The worker renders the report once, as a small HTML page whose
every piece of text is escaped (the Markdown is shown as written, in a ``<pre>``, never
interpreted), and stores it under ``llmgate:report:<id>`` with a 128-bit random id for
``LLMGATE_REPORT_TTL_S`` seconds (default 30 days). The web process serves the stored bytes as
they are at ``GET /reports/<id>`` (``app.reports``). Anyone with the link can read the report,
also for a private repository: the id is the only protection.
"""

from __future__ import annotations

import html
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.contract import REPORT_KEY_PREFIX, REPORT_REPO_SUFFIX
from worker.evals.serialize import valid_text
from worker.github import CheckOutput, clip_text
from worker.runtime import SettingsError

log = logging.getLogger(__name__)

#: How long a report stays readable when ``LLMGATE_REPORT_TTL_S`` is unset: 30 days, seconds.
DEFAULT_REPORT_TTL_S = 30 * 24 * 3600
#: Bounds of ``LLMGATE_REPORT_TTL_S``: one minute to one year, seconds.
MIN_REPORT_TTL_S, MAX_REPORT_TTL_S = 60, 365 * 24 * 3600
#: Longest report text kept, characters (a larger one is cut, ending in an ellipsis).
MAX_REPORT_CHARS = 2_000_000
#: Random bytes of a report id (128 bits, shown as 32 hex characters).
REPORT_ID_BYTES = 16

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>{title}</title>
<style>body{{font:15px/1.5 system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem}}
pre{{white-space:pre-wrap;word-wrap:break-word;font:13px/1.45 ui-monospace,monospace;
background:#f6f8fa;padding:1rem;border-radius:6px}}small{{color:#59636e}}</style>
</head><body>
<h1>{title}</h1>
<p><small>{note}</small></p>
<pre>{body}</pre>
</body></html>
"""


@dataclass(frozen=True)
class ReportSettings:
    """Where reports are linked from and how long they live.

    Attributes:
        public_url: ``LLMGATE_PUBLIC_URL`` without a trailing slash, an http(s) URL.
        ttl_s: ``LLMGATE_REPORT_TTL_S``, seconds a report stays readable.
    """

    public_url: str
    ttl_s: int = DEFAULT_REPORT_TTL_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ReportSettings | None:
        """Return the settings, or None when ``LLMGATE_PUBLIC_URL`` is unset (no reports).

        Raises:
            SettingsError: the URL is not http(s) with a host, or the TTL is not a whole number
                of seconds from 60 to 31536000 (one line naming the variable).
        """
        url = environ.get("LLMGATE_PUBLIC_URL", "").strip()
        if not url:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            raise SettingsError("LLMGATE_PUBLIC_URL must be the web process's public http(s) "
                                "root, e.g. https://llmgate.example.com")
        raw_ttl = environ.get("LLMGATE_REPORT_TTL_S", "").strip()
        ttl_s = int(raw_ttl) if raw_ttl.isascii() and raw_ttl.isdigit() else -1
        if raw_ttl and not MIN_REPORT_TTL_S <= ttl_s <= MAX_REPORT_TTL_S:
            raise SettingsError(f"LLMGATE_REPORT_TTL_S must be a whole number of seconds from "
                                f"{MIN_REPORT_TTL_S} to {MAX_REPORT_TTL_S}")
        return cls(url.rstrip("/"), ttl_s if raw_ttl else DEFAULT_REPORT_TTL_S)


def render_page(output: CheckOutput, created: datetime, ttl_s: int) -> str:
    """Return the report page: ``output``'s title, summary and text, all escaped.

    ``created`` is timezone-aware; ``ttl_s`` (seconds) is only shown. The text is cut at
    `MAX_REPORT_CHARS`.
    """
    body = output.summary + (f"\n\n{output.text}" if output.text else "")
    note = (f"llmgate report, made {created.astimezone(UTC):%Y-%m-%d %H:%M} UTC; "
            f"the link works for {max(1, round(ttl_s / 86400))} day(s).")
    return _PAGE.format(title=html.escape(output.title), note=html.escape(note),
                        body=html.escape(clip_text(body, MAX_REPORT_CHARS)))


class ReportStore:
    """Store rendered reports in Redis and return their public URLs."""

    def __init__(self, redis: Redis, settings: ReportSettings) -> None:
        """Store in ``redis`` with ``settings``."""
        self._redis = redis
        self.settings = settings

    def __repr__(self) -> str:
        return f"ReportStore({self.settings!r})"

    async def store(self, output: CheckOutput, html_page: Callable[[], str] | None = None,
                    repo: str | None = None) -> str:
        """Store a page; return ``<public_url>/reports/<32 hex>``.

        The page is ``html_page()`` (the HTML report, worker/report/html_report.py, the same as
        ``llmgate run --format html``) when given and at most `MAX_REPORT_CHARS` long, else
        ``output`` as `render_page` shows it.

        ``repo`` (``owner/name``) is stored beside the page with the same expiry
        (`REPORT_REPO_SUFFIX`): the web process serves a private repository's report only to
        its readers when ``LLMGATE_REPORTS_REQUIRE_LOGIN`` is on.

        Raises:
            redis.exceptions.RedisError: Redis refused or could not be reached.
        """
        report_id = secrets.token_hex(REPORT_ID_BYTES)
        page = html_page() if html_page is not None else ""
        if not page or len(page) > MAX_REPORT_CHARS:
            page = render_page(output, datetime.now(UTC), self.settings.ttl_s)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(REPORT_KEY_PREFIX + report_id, valid_text(page).encode("utf-8"),
                     ex=self.settings.ttl_s)
            if repo is not None:
                pipe.set(REPORT_KEY_PREFIX + report_id + REPORT_REPO_SUFFIX, repo,
                         ex=self.settings.ttl_s)
            await pipe.execute()
        return f"{self.settings.public_url}/reports/{report_id}"


async def store_report(reports: ReportStore | None, output: CheckOutput,
                       html_page: Callable[[], str] | None = None,
                       repo: str | None = None) -> str | None:
    """Return the ``details_url`` for ``output`` (its page: `ReportStore.store`, ``html_page``
    rendered only when there is a store), or None without a store or when Redis fails.

    A report that cannot be stored costs only the link (a warning is logged): the check run
    itself still carries the summary and text.
    """
    if reports is None:
        return None
    try:
        return await reports.store(output, html_page, repo)
    except RedisError as err:
        log.warning("could not store the report for its details link: %s", type(err).__name__)
        return None
