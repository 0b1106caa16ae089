"""The one module that talks to GitHub's REST API, as one App installation.

Built on gidgethub's sans-I/O core (URL templates, pagination, error mapping) over an
``httpx.AsyncClient``. Paths are joined to ``api_url`` by hand so a GitHub Enterprise root such
as ``https://HOST/api/v3`` keeps its prefix. 5xx answers and connection errors are retried a
couple of times with a short backoff (POSTs too: GitHub's 5xx rarely hides a success, and a
duplicated sticky comment is still found and edited, oldest first); everything else becomes a
typed error at once. Tokens travel only in headers and never reach a log line or a ``repr``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import gidgethub
import gidgethub.abc
import httpx

from worker.contract import CHECK_NAME
from worker.github.auth import AppCredentials, InstallationTokenCache, api_url, app_jwt
from worker.metrics import record_github_response

log = logging.getLogger(__name__)

#: User-Agent of every request (GitHub requires one).
REQUESTER = "llmgate"
#: Sleep before each retry of a 5xx answer or a connection error, in seconds.
DEFAULT_RETRY_DELAYS_S: tuple[float, ...] = (0.5, 2.0)
#: Reaction ``content`` values the API accepts (GitHub docs "REST API endpoints for reactions").
REACTIONS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})


class GitHubError(Exception):
    """GitHub refused a request; ``status_code`` is the HTTP status (None without an answer)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class GitHubUnavailable(GitHubError):
    """GitHub kept answering 5xx, or could not be reached, through every retry (transient)."""


class GitHubRateLimited(GitHubError):
    """The installation is rate limited until ``reset_at`` (timezone-aware UTC).

    Source: GitHub docs "Rate limits for the REST API": a primary limit answers 403/429 with
    ``x-ratelimit-remaining: 0`` and ``x-ratelimit-reset`` (Unix seconds); a secondary limit
    sends ``retry-after`` (seconds).
    """

    def __init__(self, message: str, reset_at: datetime, status_code: int | None = None) -> None:
        super().__init__(f"{message} (rate limited until {reset_at.isoformat()})", status_code)
        self.reset_at = reset_at

    def retry_after_s(self, now: datetime | None = None) -> float:
        """Seconds from ``now`` (default: the current time) until the limit resets, >= 0."""
        return max(0.0, (self.reset_at - (now or datetime.now(UTC))).total_seconds())


def _rate_limit_reset(exc: gidgethub.HTTPException) -> datetime | None:
    """Return when a rate-limited answer may be retried, or None if it is not rate limiting."""
    if isinstance(exc, gidgethub.RateLimitExceeded) and exc.rate_limit is not None:
        reset: datetime = exc.rate_limit.reset_datetime
        return reset
    headers = getattr(exc, "headers", None) or {}
    status = int(exc.status_code)
    retry_after = headers.get("retry-after")
    if status in (403, 429) and retry_after is not None and retry_after.isdigit():
        return datetime.now(UTC) + timedelta(seconds=int(retry_after))
    reset_epoch = headers.get("x-ratelimit-reset")
    if status == 429 and reset_epoch is not None and reset_epoch.isdigit():
        return datetime.fromtimestamp(max(int(reset_epoch), time.time()), UTC)
    return None


def _as_github_error(what: str, exc: gidgethub.HTTPException) -> GitHubError:
    """Map a gidgethub exception to our typed errors; ``what`` names the call."""
    status = int(exc.status_code)
    reset_at = _rate_limit_reset(exc)
    if reset_at is not None:
        return GitHubRateLimited(what, reset_at, status)
    if isinstance(exc, gidgethub.GitHubBroken):
        return GitHubUnavailable(f"{what}: GitHub answered {status} after retries", status)
    return GitHubError(f"{what}: GitHub answered {status}: {exc}", status)


def _field(data: Any, key: str) -> Any:
    """Return ``data[key]`` from a GitHub JSON object, or raise GitHubError naming the key."""
    if not isinstance(data, dict) or data.get(key) is None:
        raise GitHubError(f"GitHub's answer lacks {key!r}; the API may have changed")
    return data[key]


@dataclass(frozen=True)
class PullInfo:
    """A pull request as the worker needs it.

    Attributes:
        head_sha / base_sha: 40-hex commit SHAs of the PR head and of the base branch tip.
        base_ref: the base branch name (e.g. ``main``).
        head_repo_full_name: ``owner/name`` of the head repository, None when the fork was deleted.
        clone_url: HTTPS clone URL of the base repository (both SHAs are fetchable from it,
            the head through ``refs/pull/N/head``).
        head_clone_url: HTTPS clone URL of the head repository, None when the fork was deleted.
        state: ``open`` or ``closed``.
        author_login: login of the pull request's author ("" if GitHub sent none).
    """

    head_sha: str
    base_sha: str
    base_ref: str
    head_repo_full_name: str | None
    clone_url: str
    state: str
    head_clone_url: str | None = None
    author_login: str = ""


@dataclass(frozen=True)
class IssueComment:
    """One issue or PR conversation comment: its id, Markdown body and author."""

    id: int
    body: str
    user_login: str
    user_type: str


@dataclass(frozen=True)
class AppInfo:
    """The App itself (``GET /app``): numeric id, slug and the login its bot comments with."""

    id: int
    slug: str

    @property
    def bot_login(self) -> str:
        """The login GitHub shows on the App's comments, ``<slug>[bot]``."""
        return f"{self.slug}[bot]"


class _RetryingHttpxAPI(gidgethub.abc.GitHubAPI):
    """gidgethub over ``httpx.AsyncClient``, retrying 5xx answers and connection errors."""

    def __init__(self, session: httpx.AsyncClient, api_root: str, delays_s: Sequence[float],
                 installation: str = "-"):
        super().__init__(REQUESTER, base_url=api_root)
        self._session = session
        self._delays_s = tuple(delays_s)
        self._installation = installation  # the metrics label of this client's calls

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        for attempt, delay_s in enumerate((*self._delays_s, None)):
            try:
                resp = await self._session.request(method, url, headers=dict(headers), content=body)
            except httpx.TransportError as exc:
                record_github_response(method, None, {}, self._installation)
                if delay_s is None:
                    raise GitHubUnavailable(f"{method} {url}: {type(exc).__name__}") from exc
                reason = type(exc).__name__
            else:
                record_github_response(method, resp.status_code, resp.headers, self._installation)
                if resp.status_code < 500 or delay_s is None:
                    return resp.status_code, resp.headers, resp.content
                reason = f"HTTP {resp.status_code}"
            log.warning("GitHub %s %s failed (%s), retry %d in %.1f s",
                        method, url, reason, attempt + 1, delay_s)
            await self.sleep(delay_s)
        raise AssertionError("unreachable")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class GitHubClient:
    """Typed calls to the GitHub REST API on behalf of one App installation.

    Every method raises ``GitHubRateLimited`` (with ``reset_at``) when rate limited,
    ``GitHubUnavailable`` after the retries of a 5xx answer or connection error, and
    ``GitHubError`` (with ``status_code``) for any other refusal.
    """

    def __init__(
        self,
        session: httpx.AsyncClient,
        api_url: str,
        creds: AppCredentials,
        cache: InstallationTokenCache,
        installation_id: int,
        *,
        retry_delays_s: Sequence[float] = DEFAULT_RETRY_DELAYS_S,
    ) -> None:
        """Bind a client to one installation.

        Args:
            session: the shared HTTP client (its timeouts apply to every request).
            api_url: the API root, ``https://api.github.com`` or ``https://HOST/api/v3``.
            creds: App credentials, used for the JWT of ``/app`` calls.
            cache: the process-wide installation token cache.
            installation_id: the installation this client acts as.
            retry_delays_s: sleeps before each retry; its length is the number of retries.
        """
        self._api_url = api_url.rstrip("/")
        self._creds = creds
        self._cache = cache
        self._installation_id = installation_id
        self._gh = _RetryingHttpxAPI(session, self._api_url, retry_delays_s, str(installation_id))

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self._api_url!r}, installation_id={self._installation_id})"

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except gidgethub.HTTPException as exc:
            if int(exc.status_code) == 401:
                self._cache.invalidate(self._installation_id)
            raise _as_github_error(what, exc) from exc

    async def installation_token(self) -> str:
        """Return the installation token (for ``git`` over HTTPS); never log or persist it."""
        with self._errors("minting an installation access token"):
            return await self._cache.get(self._gh, self._installation_id)

    async def _call(self, method: str, path: str, url_vars: Mapping[str, Any],
                    body: Any = None) -> Any:
        token = await self.installation_token()
        url = api_url(self._api_url, path)
        with self._errors(f"{method} {path}"):
            if method == "GET":
                return await self._gh.getitem(url, url_vars, oauth_token=token)
            if method == "POST":
                return await self._gh.post(url, url_vars, data=body, oauth_token=token)
            return await self._gh.patch(url, url_vars, data=body, oauth_token=token)

    async def get_app(self) -> AppInfo:
        """Return the authenticated App (``GET /app``, with an app JWT)."""
        with self._errors("GET /app"):
            data = await self._gh.getitem(api_url(self._api_url, "/app"), jwt=app_jwt(self._creds))
        return AppInfo(id=int(_field(data, "id")), slug=str(_field(data, "slug")))

    async def create_check_run(self, owner: str, repo: str, head_sha: str, *,
                               status: str = "in_progress",
                               output: Mapping[str, Any] | None = None) -> int:
        """Create the ``llmgate`` check run on ``head_sha``; return its id.

        Args:
            status: ``queued`` or ``in_progress``.
            output: optional ``{"title", "summary", "text"?}`` (title and summary required).
        """
        body: dict[str, Any] = {"name": CHECK_NAME, "head_sha": head_sha, "status": status}
        if output is not None:
            body["output"] = dict(output)
        data = await self._call("POST", "/repos/{owner}/{repo}/check-runs",
                                {"owner": owner, "repo": repo}, body)
        return int(_field(data, "id"))

    async def update_check_run(self, owner: str, repo: str, check_run_id: int,
                               body: Mapping[str, Any]) -> None:
        """PATCH a check run with ``body`` as documented by GitHub ("Update a check run")."""
        await self._call("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}",
                         {"owner": owner, "repo": repo, "check_run_id": check_run_id}, dict(body))

    async def get_pull(self, owner: str, repo: str, number: int) -> PullInfo:
        """Return the pull request ``number`` (``GET .../pulls/{number}``) as a ``PullInfo``."""
        data = await self._call("GET", "/repos/{owner}/{repo}/pulls/{number}",
                                {"owner": owner, "repo": repo, "number": number})
        head, base = _field(data, "head"), _field(data, "base")
        head_repo = head.get("repo") if isinstance(head, dict) else None
        return PullInfo(
            head_sha=str(_field(head, "sha")), base_sha=str(_field(base, "sha")),
            base_ref=str(_field(base, "ref")),
            head_repo_full_name=str(head_repo["full_name"]) if head_repo else None,
            clone_url=str(_field(_field(base, "repo"), "clone_url")),
            state=str(_field(data, "state")),
            head_clone_url=str(head_repo["clone_url"]) if head_repo else None,
            author_login=str((data.get("user") or {}).get("login") or ""),
        )

    async def get_permission(self, owner: str, repo: str, username: str) -> str:
        """Return ``username``'s legacy permission on the repository.

        One of ``admin``, ``write``, ``read`` or ``none``: GitHub reports the ``maintain`` role
        as ``write`` and ``triage`` as ``read`` in the ``permission`` field (the fine role is in
        ``role_name``). A user GitHub does not know (404) has ``none``.
        """
        try:
            data = await self._call("GET",
                                    "/repos/{owner}/{repo}/collaborators/{username}/permission",
                                    {"owner": owner, "repo": repo, "username": username})
        except GitHubError as exc:
            if exc.status_code == 404:
                return "none"
            raise
        return str(_field(data, "permission"))

    async def add_reaction(self, owner: str, repo: str, comment_id: int, content: str) -> None:
        """React to an issue comment; reacting twice is harmless (GitHub answers 200).

        Raises:
            ValueError: ``content`` is not one of ``REACTIONS``.
        """
        if content not in REACTIONS:
            raise ValueError(f"unknown reaction {content!r}; use one of {sorted(REACTIONS)}")
        await self._call("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
                         {"owner": owner, "repo": repo, "comment_id": comment_id},
                         {"content": content})

    async def list_issue_comments(self, owner: str, repo: str,
                                  number: int) -> AsyncIterator[IssueComment]:
        """Yield every comment of issue/PR ``number``, oldest first, following all pages."""
        token = await self.installation_token()
        url = api_url(self._api_url, "/repos/{owner}/{repo}/issues/{number}/comments?per_page=100")
        with self._errors(f"GET comments of {owner}/{repo}#{number}"):
            async for item in self._gh.getiter(url, {"owner": owner, "repo": repo,
                                                     "number": number}, oauth_token=token):
                user = item.get("user") or {}
                yield IssueComment(id=int(_field(item, "id")), body=str(item.get("body") or ""),
                                   user_login=str(user.get("login", "")),
                                   user_type=str(user.get("type", "")))

    async def create_issue_comment(self, owner: str, repo: str, number: int, body: str) -> int:
        """Post a comment on issue/PR ``number``; return the new comment's id."""
        data = await self._call("POST", "/repos/{owner}/{repo}/issues/{number}/comments",
                                {"owner": owner, "repo": repo, "number": number}, {"body": body})
        return int(_field(data, "id"))

    async def update_issue_comment(self, owner: str, repo: str, comment_id: int,
                                   body: str) -> None:
        """Replace the body of comment ``comment_id``."""
        await self._call("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}",
                         {"owner": owner, "repo": repo, "comment_id": comment_id}, {"body": body})
