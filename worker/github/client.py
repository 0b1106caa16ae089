"""The one module that talks to GitHub's REST API, as one App installation.

Built on gidgethub's sans-I/O core (URL templates, pagination, error mapping) over
`worker.github.transport` (httpx, shared rate-limit pauses and write pacing per installation,
exponential full-jitter backoff for 5xx answers). Paths are joined to ``api_url`` by hand so a
GitHub Enterprise root such as ``https://HOST/api/v3`` keeps its prefix. Every refusal becomes a
typed error (`worker.github.errors`). Tokens travel only in headers and never reach a log line,
a ``repr`` or an exception.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import gidgethub
import httpx

from worker.contract import CHECK_NAME
from worker.github.auth import (
    AppClock,
    AppCredentials,
    GitHubAuthError,
    InstallationTokenCache,
    TokenSource,
    api_url,
    app_jwt,
)
from worker.github.errors import (
    GitHubError,
    GitHubOutcomeUnknown,
    GitHubRateLimited,
    GitHubUnavailable,
)
from worker.github.limits import (
    MAX_OUTPUT_BYTES,
    clip_bytes,
    fit_check_name,
    fit_check_run,
    fit_comment,
    utf8_size,
)
from worker.github.ratelimit import GitHubLimiter, backoff_s
from worker.github.transport import REQUESTER, LimitedHttpxAPI, single_try

log = logging.getLogger(__name__)

__all__ = ["REQUESTER", "AppInfo", "GitHubClient", "GitHubError", "GitHubOutcomeUnknown",
           "GitHubRateLimited", "GitHubUnavailable", "IssueComment", "PullInfo"]

#: Looks for what a create may have made; returns its id, or None when there is none.
Finder = Callable[[], Awaitable[int | None]]

#: Backoff ceilings of the retries of a 5xx answer or a connection error, seconds: retry ``i``
#: sleeps uniformly in ``[0, ceiling_i]`` (exponential backoff with full jitter).
DEFAULT_RETRY_DELAYS_S: tuple[float, ...] = (1.0, 2.0, 4.0)
#: Hidden line that marks a check run this client created (a random nonce per create), so a
#: create that may have been performed is found again by its own output (`GitHubClient`).
CREATE_MARK = "<!-- llmgate:create {nonce} -->"
#: Reaction ``content`` values the API accepts (GitHub docs "REST API endpoints for reactions").
REACTIONS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})


def _as_github_error(what: str, exc: gidgethub.HTTPException) -> GitHubError:
    """Map a gidgethub exception to our typed errors; ``what`` names the call.

    Rate limits never get here: the transport retries them or raises `GitHubRateLimited`.
    """
    status = int(exc.status_code)
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


def _pull_info(data: Any) -> PullInfo:
    """Read a ``pull-request`` (or ``pull-request-simple``) object of GitHub's."""
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


@dataclass(frozen=True)
class OpenPull:
    """One open pull request as listed: its number, `PullInfo` and whether it is a draft."""

    number: int
    pull: PullInfo
    draft: bool = False


@dataclass(frozen=True)
class IssueComment:
    """One issue or PR conversation comment: its id, Markdown body and author."""

    id: int
    body: str
    user_login: str
    user_type: str


@dataclass(frozen=True)
class CheckRunInfo:
    """One check run as listed for a commit: ids, state and output (texts "" when unset).

    ``conclusion`` is "" while the run is not completed.
    """

    id: int
    name: str
    head_sha: str
    external_id: str
    status: str
    conclusion: str
    title: str
    summary: str
    text: str


@dataclass(frozen=True)
class AppInfo:
    """The App itself (``GET /app``): numeric id, slug and the login its bot comments with."""

    id: int
    slug: str

    @property
    def bot_login(self) -> str:
        """The login GitHub shows on the App's comments, ``<slug>[bot]``."""
        return f"{self.slug}[bot]"


class GitHubClient:
    """Typed calls to the GitHub REST API on behalf of one App installation (or one token).

    Every method waits out short rate-limit pauses of the installation (shared by every worker)
    and retries 5xx answers; it raises ``GitHubRateLimited`` (with ``reset_at``) when the wait
    would be longer than ``LLMGATE_GITHUB_MAX_WAIT_S``, ``GitHubUnavailable`` after the retries
    of a 5xx answer or connection error, and ``GitHubError`` (with ``status_code``) for any
    other refusal (a 403 for a missing permission included: never retried).

    Creates are idempotent: a create (check run, comment) that failed where it may have been
    performed (a 5xx, a timeout: `GitHubOutcomeUnknown`) is sent again only after looking
    for what it may have created, which is adopted when found (issue 14: a gateway's 502
    after GitHub acted must not leave a second check run or comment).

    A refused credential is replaced once per request (`worker.github.transport`, step 4):
    an installation token GitHub answers 401 is dropped (for every worker) and minted again;
    an App JWT refused for its time is signed again at GitHub's time (`AppClock`).

    Without App credentials (a `FixedToken`, e.g. a workflow's ``GITHUB_TOKEN``) the calls
    that authenticate as the App itself (``get_app``, ``list_installation_ids``) raise
    `GitHubAuthError`; every other call works with the token's own permissions.
    """

    def __init__(
        self,
        session: httpx.AsyncClient,
        api_url: str,
        creds: AppCredentials | None,
        tokens: TokenSource,
        installation_id: int,
        *,
        retry_delays_s: Sequence[float] = DEFAULT_RETRY_DELAYS_S,
        limiter: GitHubLimiter | None = None,
        app_clock: AppClock | None = None,
    ) -> None:
        """Bind a client to one installation.

        Args:
            session: the shared HTTP client (its timeouts apply to every request).
            api_url: the API root, ``https://api.github.com`` or ``https://HOST/api/v3``.
            creds: App credentials, used for the JWT of ``/app`` calls; None for a client
                with a given token only (its ``/app`` calls raise `GitHubAuthError`).
            tokens: the token of every other call: the process-wide
                `InstallationTokenCache`, or a `FixedToken`.
            installation_id: the installation this client acts as (with a `FixedToken`,
                only the name of its rate-limit bucket).
            retry_delays_s: backoff ceilings, seconds, one per retry of a 5xx answer or a
                connection error (full jitter: each sleep is uniform in ``[0, ceiling]``).
            limiter: the worker's shared rate-limit state (`worker.github.ratelimit`, in
                Redis); default: one in memory for this client only.
            app_clock: the clock App JWTs are signed at; default: the `InstallationTokenCache`'s
                (one per worker process), else a new one.
        """
        self._api_url = api_url.rstrip("/")
        self._creds = creds
        self._tokens = tokens
        self._installation_id = installation_id
        self._gh = LimitedHttpxAPI(session, self._api_url, retry_delays_s, str(installation_id),
                                   limiter)
        self._delays_s = tuple(retry_delays_s)
        self._clock = app_clock or (tokens.app_clock if isinstance(tokens, InstallationTokenCache)
                                    else AppClock())
        self._gh.renewal = self  # replaces a refused token or JWT (`replace_token`, ...)

    @property
    def installation_id(self) -> int:
        """The App installation this client acts as."""
        return self._installation_id

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self._api_url!r}, installation_id={self._installation_id})"

    @asynccontextmanager
    async def _errors(self, what: str, token: str | None = None) -> AsyncIterator[None]:
        """Map gidgethub's exceptions; a 401 drops the token it was refused (everywhere)."""
        try:
            yield
        except gidgethub.HTTPException as exc:
            if int(exc.status_code) == 401:
                await self._tokens.invalidate(self._installation_id, token)
            raise _as_github_error(what, exc) from exc

    async def installation_token(self) -> str:
        """Return the installation token (for ``git`` over HTTPS); never log or persist it."""
        async with self._errors("minting an installation access token"):
            return await self._tokens.get(self._gh, self._installation_id)

    def _app_jwt(self, what: str) -> str:
        """Return an App JWT for the call ``what``.

        Raises:
            GitHubAuthError: this client has no App credentials, or the key is unusable.
        """
        if self._creds is None:
            raise GitHubAuthError(f"{what} authenticates as the GitHub App, but this client "
                                  "was given a token only, not the App id and private key")
        return app_jwt(self._creds, self._clock.now())

    async def replace_token(self, refused: str) -> str | None:
        """Drop the installation token ``refused`` (for every worker) and return a fresh one,
        or None when the token source has no other (`worker.github.transport.CredentialRenewal`).

        Raises:
            GitHubError, GitHubAuthError: minting the new one failed.
        """
        await self._tokens.invalidate(self._installation_id, refused)
        token = await self.installation_token()
        return None if token == refused else token

    def resign_jwt(self, server_date: str | None) -> str | None:
        """Correct the App clock by GitHub's ``server_date`` and return a JWT signed at it, or
        None without App credentials or a usable date (`CredentialRenewal`).

        Raises:
            GitHubAuthError: the App key is unusable.
        """
        if self._creds is None or not self._clock.correct(server_date):
            return None
        return app_jwt(self._creds, self._clock.now())

    async def _call(self, method: str, path: str, url_vars: Mapping[str, Any],
                    body: Any = None) -> Any:
        token = await self.installation_token()
        url = api_url(self._api_url, path)
        async with self._errors(f"{method} {path}", token):
            if method == "GET":
                return await self._gh.getitem(url, url_vars, oauth_token=token)
            if method == "POST":
                return await self._gh.post(url, url_vars, data=body, oauth_token=token)
            return await self._gh.patch(url, url_vars, data=body, oauth_token=token)

    async def _create(self, path: str, url_vars: Mapping[str, Any], body: Any, what: str,
                      find: Finder) -> int:
        """POST a create and return the new object's id; never make it twice.

        A failure that may hide a success (`GitHubOutcomeUnknown`) is followed by ``find``;
        what it finds is adopted, else the POST is sent again after a full-jitter backoff
        (the client's retry ceilings), as often as a 5xx of any other request; a
        ``retry-after`` is waited out by the limiter's pause before the next POST.

        Raises:
            GitHubOutcomeUnknown: still unknown after every retry, or GitHub asks to wait
                longer than ``LLMGATE_GITHUB_MAX_WAIT_S`` (``retry_at`` set), and nothing was
                found.
            GitHubError: any other refusal (see the class docstring).
        """
        for attempt in range(len(self._delays_s) + 1):
            try:
                with single_try():
                    data = await self._call("POST", path, url_vars, body)
                return int(_field(data, "id"))
            except GitHubOutcomeUnknown as err:
                found = await find()
                if found is not None:
                    log.warning("GitHub %s; adopted the %s it made (id %s)", err, what, found)
                    return found
                hinted_s = err.retry_after_s()
                if attempt == len(self._delays_s) or (
                        hinted_s is not None and hinted_s > self._gh.limiter.limits.max_wait_s):
                    raise
                if hinted_s is not None:  # every worker waits it out, this POST included
                    await self._gh.limiter.pause(self._gh.bucket, hinted_s)
                delay_s = backoff_s(self._delays_s[attempt])
                log.warning("GitHub %s, but made no %s: retry %d in %.1f s", err, what,
                            attempt + 1, delay_s)
                await self._gh.sleep(delay_s)
        raise AssertionError("unreachable")  # pragma: no cover

    async def get_app(self) -> AppInfo:
        """Return the authenticated App (``GET /app``, with an app JWT).

        Raises:
            GitHubAuthError: the client has no App credentials, or the key is unusable.
            GitHubError: GitHub refused the request.
        """
        async with self._errors("GET /app"):
            data = await self._gh.getitem(api_url(self._api_url, "/app"),
                                          jwt=self._app_jwt("GET /app"))
        return AppInfo(id=int(_field(data, "id")), slug=str(_field(data, "slug")))

    async def create_check_run(self, owner: str, repo: str, head_sha: str, *,
                               status: str = "in_progress",
                               output: Mapping[str, Any] | None = None,
                               external_id: str | None = None, name: str = CHECK_NAME) -> int:
        """Create the ``llmgate`` check run on ``head_sha``; return its id.

        Idempotent (class docstring): the run is looked for by name, head SHA and
        ``external_id`` among the commit's check runs, and told apart from another try's by
        a random nonce in a hidden line of its summary (`CREATE_MARK`); without ``output``,
        by being the newest such run not completed.

        Args:
            status: ``queued`` or ``in_progress``.
            output: optional ``{"title", "summary", "text"?}`` (title and summary required).
            external_id: optional reference kept on the run (llmgate: ``pr:<number>``).
            name: the check run's name (a config's own check run: ``llmgate: <folder>``).
        """
        name = fit_check_name(name)
        body: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": status}
        mark = CREATE_MARK.format(nonce=secrets.token_hex(8)) if output is not None else ""
        if output is not None:
            room = MAX_OUTPUT_BYTES - utf8_size(f"\n\n{mark}")  # the mark is never cut off
            summary = clip_bytes(str(output.get("summary", "")), room)
            body["output"] = {**output, "summary": f"{summary}\n\n{mark}"}
        if external_id:
            body["external_id"] = external_id
        body = fit_check_run(body)

        async def find() -> int | None:
            async for run in self.list_check_runs(owner, repo, head_sha, name):
                if run.external_id == (external_id or "") and (
                        mark in run.summary if mark else run.status != "completed"):
                    return run.id
            return None

        return await self._create("/repos/{owner}/{repo}/check-runs",
                                  {"owner": owner, "repo": repo}, body, "check run", find)

    async def update_check_run(self, owner: str, repo: str, check_run_id: int,
                               body: Mapping[str, Any]) -> None:
        """PATCH a check run with ``body`` as documented by GitHub ("Update a check run"), its
        name and output cut to GitHub's limits in UTF-8 bytes (`worker.github.limits`)."""
        await self._call("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}",
                         {"owner": owner, "repo": repo, "check_run_id": check_run_id},
                         fit_check_run(body))

    async def get_pull(self, owner: str, repo: str, number: int) -> PullInfo:
        """Return the pull request ``number`` (``GET .../pulls/{number}``) as a ``PullInfo``."""
        data = await self._call("GET", "/repos/{owner}/{repo}/pulls/{number}",
                                {"owner": owner, "repo": repo, "number": number})
        return _pull_info(data)

    async def list_open_pulls(self, owner: str, repo: str) -> list[OpenPull]:
        """Return every open pull request of the repository (``GET .../pulls?state=open``, 100
        per page, all pages), newest first."""
        token = await self.installation_token()
        url = api_url(self._api_url, "/repos/{owner}/{repo}/pulls?state=open&per_page=100")
        pulls = []
        async with self._errors(f"GET open pull requests of {owner}/{repo}", token):
            async for item in self._gh.getiter(url, {"owner": owner, "repo": repo},
                                               oauth_token=token):
                pulls.append(OpenPull(int(_field(item, "number")), _pull_info(item),
                                      item.get("draft") is True))
        return pulls

    async def list_installation_ids(self) -> list[int]:
        """Return the ids of every installation of the App (``GET /app/installations``, with
        an App JWT; 100 per page, all pages).

        Raises:
            GitHubAuthError: the client has no App credentials, or the key is unusable.
            GitHubError: GitHub refused the request.
        """
        url = api_url(self._api_url, "/app/installations?per_page=100")
        async with self._errors("GET /app/installations"):
            return [int(_field(item, "id")) async for item in
                    self._gh.getiter(url, jwt=self._app_jwt("GET /app/installations"))]

    async def list_repositories(self) -> list[tuple[str, str, str]]:
        """Return ``(owner, name, clone_url)`` of every repository this installation may
        reach (``GET /installation/repositories``, 100 per page, all pages)."""
        token = await self.installation_token()
        url = api_url(self._api_url, "/installation/repositories?per_page=100")
        async with self._errors("GET /installation/repositories", token):
            return [(str(_field(_field(item, "owner"), "login")), str(_field(item, "name")),
                     str(_field(item, "clone_url"))) async for item in self._gh.getiter(
                         url, oauth_token=token, iterable_key="repositories")]

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
        async with self._errors(f"GET comments of {owner}/{repo}#{number}", token):
            async for item in self._gh.getiter(url, {"owner": owner, "repo": repo,
                                                     "number": number}, oauth_token=token):
                user = item.get("user") or {}
                yield IssueComment(id=int(_field(item, "id")), body=str(item.get("body") or ""),
                                   user_login=str(user.get("login", "")),
                                   user_type=str(user.get("type", "")))

    async def list_check_runs(self, owner: str, repo: str, ref: str,
                              check_name: str = CHECK_NAME) -> AsyncIterator[CheckRunInfo]:
        """Yield every check run named ``check_name`` on commit ``ref``, newest first.

        ``filter=all`` (not only the latest per name), 100 per page, all pages. GitHub looks at
        the 1,000 most recent check suites of the ref ("List check runs for a Git reference").
        """
        token = await self.installation_token()
        url = api_url(self._api_url, "/repos/{owner}/{repo}/commits/{ref}/check-runs"
                                     "?check_name={check_name}&filter=all&per_page=100")
        async with self._errors(f"GET check runs of {owner}/{repo}@{ref[:12]}", token):
            async for item in self._gh.getiter(url, {"owner": owner, "repo": repo, "ref": ref,
                                                     "check_name": fit_check_name(check_name)},
                                               oauth_token=token, iterable_key="check_runs"):
                output = item.get("output") or {}
                yield CheckRunInfo(
                    id=int(_field(item, "id")), name=str(item.get("name") or ""),
                    head_sha=str(item.get("head_sha") or ""),
                    external_id=str(item.get("external_id") or ""),
                    status=str(item.get("status") or ""),
                    conclusion=str(item.get("conclusion") or ""),
                    title=str(output.get("title") or ""), summary=str(output.get("summary") or ""),
                    text=str(output.get("text") or ""))

    async def create_issue_comment(self, owner: str, repo: str, number: int, body: str, *,
                                   find: Finder | None = None) -> int:
        """Post a comment on issue/PR ``number``; return the new comment's id.

        Idempotent (class docstring): ``find`` looks for the comment a failed try may have
        made (the sticky comment: `worker.github.comments`); by default, the newest comment
        of a bot with exactly this body. The body is cut to GitHub's limit in UTF-8 bytes
        (`worker.github.limits.fit_comment`).
        """
        body = fit_comment(body)
        async def newest_same() -> int | None:
            found = None
            async for comment in self.list_issue_comments(owner, repo, number):
                if comment.user_type == "Bot" and comment.body == body:
                    found = comment.id
            return found

        return await self._create("/repos/{owner}/{repo}/issues/{number}/comments",
                                  {"owner": owner, "repo": repo, "number": number},
                                  {"body": body}, "comment", find or newest_same)

    async def update_issue_comment(self, owner: str, repo: str, comment_id: int,
                                   body: str) -> None:
        """Replace the body of comment ``comment_id`` (cut to GitHub's limit in UTF-8 bytes)."""
        await self._call("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}",
                         {"owner": owner, "repo": repo, "comment_id": comment_id},
                         {"body": fit_comment(body)})
