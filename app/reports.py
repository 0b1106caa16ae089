"""``GET /reports/<id>``: serve a gate's full report, the check run's "Details" link.

The worker renders and stores each report (``worker.report.store``, only when
``LLMGATE_PUBLIC_URL`` is set); this endpoint only reads ``llmgate:report:<id>`` from Redis and
answers the stored bytes, so the web process stays light (no rendering, no model or stats
libraries). The id is 128 random bits: anything but 32 lowercase hex characters is a 404
without touching Redis. The page is served with a Content-Security-Policy that allows no script
but the HTML report's own (by its hash), no frame and no external resource, and is never
indexed or cached by shared caches.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from app.dashboard import GitHubAccess, report_allowed
from worker.contract import REPORT_KEY_PREFIX, REPORT_REPO_SUFFIX

#: A report id: 128 bits as lowercase hex.
REPORT_ID = re.compile(r"[0-9a-f]{32}")
#: Bound on reading one report from Redis, seconds.
READ_TIMEOUT_S = 2.0
#: The one script a report may run: the HTML report's table filter, allowed by its SHA-256 (CSP
#: Level 3 hash source; worker.report.html_report.SCRIPT_SHA256, a test keeps them equal). No
#: other script, not one a pull request could put in a page, can run.
REPORT_SCRIPT_HASH = "sha256-hQDjuK+2XMyN016RF4NaQgUv3nEssJRrGR5DzGEvTt8="
#: Headers of every answer: no script but that one, no frame or external resource; not
#: indexed; private.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               f"script-src '{REPORT_SCRIPT_HASH}'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex, nofollow",
    "Cache-Control": "private, max-age=300",
}


class ReportPages:
    """The ``GET /reports/{report_id}`` endpoint; ``redis`` returns the app's client or None.

    With ``access`` (sign-in configured) and ``LLMGATE_REPORTS_REQUIRE_LOGIN`` on, a report is
    served only when `app.dashboard.auth.report_allowed` says so (its repository is public, or
    GitHub lists it for the signed-in user): a signed-out visitor is sent to ``/login`` and
    back, anyone else gets the 404 of an unknown report. A report stored without its
    repository (by a worker before this check existed) is refused (fail closed).
    """

    def __init__(self, redis: Callable[[], Redis | None],
                 access: GitHubAccess | None = None) -> None:
        """Read reports through ``redis()`` (None outside the app's lifespan: 503)."""
        self._redis = redis
        self._access = access

    async def page(self, request: Request) -> Response:
        """Answer 200 with the stored page, 404 for an unknown or expired id, 503 without Redis."""
        report_id = str(request.path_params.get("report_id", ""))
        if not REPORT_ID.fullmatch(report_id):
            return _text(404, "No such report.")
        redis = self._redis()
        if redis is None:
            return _text(503, "Reports are unavailable: Redis is not connected.")
        try:
            page = await asyncio.wait_for(redis.get(REPORT_KEY_PREFIX + report_id),
                                          READ_TIMEOUT_S)
        except (RedisError, TimeoutError):
            return _text(503, "Reports are unavailable: Redis does not answer.")
        if page is None:
            return _text(404, "No such report: it never existed or has expired.")
        refused = await self._refused(request, redis, report_id)
        if refused is not None:
            return refused
        return Response(page, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    async def _refused(self, request: Request, redis: Redis, report_id: str) -> Response | None:
        """The answer to a request the report's readers do not include, else None."""
        access = self._access
        if access is None or not access.settings.reports_require_login:
            return None
        try:
            raw = await asyncio.wait_for(
                redis.get(REPORT_KEY_PREFIX + report_id + REPORT_REPO_SUFFIX), READ_TIMEOUT_S)
        except (RedisError, TimeoutError):
            return _text(503, "Reports are unavailable: Redis does not answer.")
        repo = raw.decode("utf-8", "replace") if raw else None
        if await report_allowed(access, request, repo):
            return None
        if access.user(request) is None:
            return RedirectResponse(f"/login?next=/reports/{report_id}", status_code=303,
                                    headers={"Cache-Control": "no-store"})
        return _text(404, "No such report: it never existed or has expired.")


def _text(status: int, message: str) -> Response:
    return PlainTextResponse(message + "\n", status_code=status,
                             headers={**PAGE_HEADERS, "Cache-Control": "no-store"})
