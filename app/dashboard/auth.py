"""Sign in with GitHub, and who may read which repository (issue 35, "Who sees what").

The one place the web process talks to GitHub, and only with what a signed-in user brings: the
App's user authorization (OAuth web flow, ``state`` bound to the browser, PKCE S256) gives a
user-to-server token, kept encrypted in the session cookie (`app.dashboard.session`). Never the
App's private key. A user reads a repository only where GitHub lists it for them:
``GET /user/installations`` then ``GET /user/installations/{id}/repositories``
(docs.github.com/rest/apps/installations), cached `USER_CACHE_TTL_S` per user. Public
repositories open without sign-in only with ``LLMGATE_DASHBOARD_PUBLIC`` (unauthenticated
``GET /repos/{owner}/{repo}``, ``private`` false; cached `PUBLIC_CACHE_TTL_S`). Any GitHub
error or timeout refuses (fail closed) and logs a WARNING with the status, never a token.

Routes (`SignIn.routes`): ``GET /login``, ``GET /auth/callback``, ``GET|POST /logout``.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import httpx
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.dashboard.session import (
    FLOW_COOKIE,
    FLOW_COOKIE_PATH,
    FLOW_TTL_S,
    SESSION_COOKIE,
    SESSION_TTL_S,
    AuthSettings,
    SessionCodec,
    SessionUser,
    code_challenge,
    new_flow,
    safe_next,
)

log = logging.getLogger(__name__)

#: How long GitHub's answer "these are the user's repositories" is trusted, seconds.
USER_CACHE_TTL_S = 60.0
#: How long "this repository is public (or not)" is trusted, seconds. Unauthenticated REST
#: requests are limited to 60 an hour per IP address (docs.github.com/rest/using-the-rest-api/
#: rate-limits-for-the-rest-api), so the answer is kept longer than the user's list.
PUBLIC_CACHE_TTL_S = 300.0
#: Most users (and repositories) remembered; the least recently used is forgotten first.
MAX_CACHED = 1024
#: Bound on each request to GitHub, seconds.
GITHUB_TIMEOUT_S = 5.0
#: Most pages followed per list (100 items each).
MAX_PAGES = 50
#: ``request.state`` attribute set when GitHub refused the session's token (`ClearRefusedSession`).
REFUSED_FLAG = "llmgate_session_refused"
_API_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "llmgate"}


class GitHubRefused(Exception):
    """GitHub answered ``status`` (0: no answer) where a success was needed."""

    def __init__(self, what: str, status: int) -> None:
        """Name the request (never its token) and the status."""
        super().__init__(f"{what}: status {status}")
        self.status = status


class _Cache:
    """A bounded LRU of values that expire ``ttl_s`` after they were put."""

    def __init__(self, ttl_s: float, size: int = MAX_CACHED) -> None:
        self._ttl_s, self._size = ttl_s, size
        self._items: OrderedDict[Any, tuple[float, Any]] = OrderedDict()

    def get(self, key: Any) -> Any:
        hit = self._items.get(key)
        if hit is None or hit[0] <= time.monotonic():
            self._items.pop(key, None)
            return None
        self._items.move_to_end(key)
        return hit[1]

    def put(self, key: Any, value: Any, ttl_s: float | None = None) -> None:
        self._items[key] = (time.monotonic() + (self._ttl_s if ttl_s is None else ttl_s), value)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


class GitHubAccess:
    """`app.dashboard.access_types.Access` answered by GitHub for the signed-in user.

    Args:
        settings: the sign-in settings (`AuthSettings.from_env`).
        client: the HTTP client to GitHub; one with `GITHUB_TIMEOUT_S` when None. Close it
            with `aclose` at the end of the app's lifespan.
    """

    def __init__(self, settings: AuthSettings, client: httpx.AsyncClient | None = None, *,
                 user_ttl_s: float = USER_CACHE_TTL_S,
                 public_ttl_s: float = PUBLIC_CACHE_TTL_S) -> None:
        """Keep the settings, the cookie codec, an HTTP client and two empty caches."""
        self.settings = settings
        self.codec = SessionCodec(settings.session_secret)
        self.client = client or httpx.AsyncClient(timeout=GITHUB_TIMEOUT_S,
                                                  follow_redirects=False)
        self._user_repos = _Cache(user_ttl_s)
        self._public = _Cache(public_ttl_s)
        self._ended = _Cache(SESSION_TTL_S, 16 * MAX_CACHED)  # sid -> True: signed out/refused

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()

    def user(self, request: Request) -> SessionUser | None:
        """Return the request's signed-in user, or None (no, bad, expired or ended session)."""
        user = self.codec.open_session(request.cookies.get(SESSION_COOKIE))
        return None if user is None or self._ended.get(user.sid) else user

    def end_session(self, user: SessionUser) -> None:
        """Refuse ``user``'s session cookie from now on in this process (signed out)."""
        self._ended.put(user.sid, True)

    async def readable(self, request: Request, repo: str) -> bool:
        """Return whether the request's user may read ``repo`` (``owner/name``): listed for
        the signed-in user by GitHub, or public with ``LLMGATE_DASHBOARD_PUBLIC`` on."""
        return bool(await self.readable_repos(request, [repo]))

    async def readable_repos(self, request: Request, repos: Sequence[str]) -> list[str]:
        """Return those of ``repos`` the request's user may read, in the order given."""
        mine = await self.user_repos(request)
        allowed = [r for r in repos if r.lower() in mine]
        if self.settings.dashboard_public:
            user = self.user(request)
            token = None if user is None else user.token
            allowed = [r for r in repos if r in allowed or await self.is_public(r, token)]
        return allowed

    async def readable_by_user(self, request: Request, repo: str) -> bool:
        """Return whether GitHub lists ``repo`` for the signed-in user (public or not)."""
        return repo.lower() in await self.user_repos(request)

    async def user_repos(self, request: Request) -> frozenset[str]:
        """Return the lower-cased ``owner/name`` of every repository of this App's
        installations the signed-in user can read; empty when signed out or on any error."""
        user = self.user(request)
        if user is None:
            return frozenset()
        cached: frozenset[str] | None = self._user_repos.get(user.user_id)
        if cached is not None:
            return cached
        try:
            names = await self._fetch_user_repos(user.token)
        except GitHubRefused as err:
            log.warning("GitHub refused the repositories of %s (%s): nothing is readable",
                        user.login, err)
            if err.status == 401:
                self.end_session(user)
                setattr(request.state, REFUSED_FLAG, True)
            return frozenset()
        self._user_repos.put(user.user_id, names)
        return names

    async def is_public(self, repo: str, token: str | None = None) -> bool:
        """Return whether GitHub says ``repo`` is public (``GET /repos/{owner}/{repo}``,
        unauthenticated, or with a signed-in user's ``token``, which GitHub allows 5,000
        requests an hour instead of 60 per IP); False when private, unknown, malformed or on
        any error."""
        owner, _, name = repo.partition("/")
        if not owner or not name or "/" in name:
            return False
        key = repo.lower()
        cached: bool | None = self._public.get(key)
        if cached is not None:
            return cached
        try:
            data = await self.get_json(f"/repos/{owner}/{name}", token, "the repository")
        except GitHubRefused as err:
            if err.status != 404:
                log.warning("GitHub did not say whether %s is public (%s): treated as private",
                            repo[:200], err)
                return False
            data = {"private": True}  # GitHub hides a private repository as 404
        public = isinstance(data, dict) and data.get("private") is False
        self._public.put(key, public)
        return public

    async def _fetch_user_repos(self, token: str) -> frozenset[str]:
        names: set[str] = set()
        try:
            for inst in await self._pages("/user/installations", token, "installations"):
                path = f"/user/installations/{int(inst['id'])}/repositories"
                for repo in await self._pages(path, token, "repositories"):
                    names.add(str(repo["full_name"]).lower())
        except (KeyError, TypeError, ValueError, AttributeError):
            raise GitHubRefused("a list of unexpected shape", 200) from None
        return frozenset(names)

    async def _pages(self, path: str, token: str, key: str) -> list[dict[str, Any]]:
        """GET every page of a ``{total_count, <key>: [...]}`` list (Link ``rel="next"``,
        followed only on the API's own origin so the token never leaves it)."""
        items: list[dict[str, Any]] = []
        url: str | None = f"{self.settings.api_url}{path}?per_page=100"
        for _ in range(MAX_PAGES):
            if url is None:
                return items
            response = await self._get(url, token, key)
            items += list(response.json().get(key) or [])
            url = response.links.get("next", {}).get("url")
            if url is not None and not url.startswith(self.settings.api_url + "/"):
                raise GitHubRefused(f"a next page of {key} on another origin", 0)
        return items

    async def get_json(self, path: str, token: str | None, what: str) -> Any:
        """GET ``path`` of the API (with ``token`` when given) and return its JSON.

        Raises:
            GitHubRefused: any status but 200, no answer within the client's timeout, or not
                JSON; ``what`` names the request in the message (never the token).
        """
        return (await self._get(self.settings.api_url + path, token, what)).json()

    async def _get(self, url: str, token: str | None, what: str) -> httpx.Response:
        headers = dict(_API_HEADERS)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        try:
            response = await self.client.get(url, headers=headers)
        except httpx.HTTPError as exc:
            raise GitHubRefused(f"GET {what} ({type(exc).__name__})", 0) from None
        if response.status_code != 200:
            raise GitHubRefused(f"GET {what}", response.status_code)
        try:
            response.json()
        except ValueError:
            raise GitHubRefused(f"GET {what} (not JSON)", response.status_code) from None
        return response


class SignIn:
    """The sign-in routes over a `GitHubAccess` (its settings, codec and HTTP client)."""

    def __init__(self, access: GitHubAccess) -> None:
        """Sign users in for ``access``."""
        self.access = access
        self.settings = access.settings

    def routes(self) -> list[Route]:
        """Return ``GET /login``, ``GET /auth/callback`` and ``GET|POST /logout``."""
        return [Route("/login", self.login, methods=["GET"]),
                Route("/auth/callback", self.callback, methods=["GET"]),
                Route("/logout", self.logout, methods=["GET", "POST"])]

    async def login(self, request: Request) -> Response:
        """Redirect to GitHub's authorization page with a fresh ``state`` and PKCE challenge;
        the sign-in cookie remembers both for `FLOW_TTL_S`."""
        flow = new_flow(safe_next(request.query_params.get("next"), "/dashboard"))
        query = urlencode({"client_id": self.settings.client_id,
                           "redirect_uri": self._callback_url(request), "state": flow.state,
                           "code_challenge": code_challenge(flow.verifier),
                           "code_challenge_method": "S256", "allow_signup": "false"})
        response = RedirectResponse(f"{self.settings.github_url}/login/oauth/authorize?{query}",
                                    status_code=302, headers=_NO_STORE)
        response.set_cookie(FLOW_COOKIE, self.access.codec.seal_flow(flow), max_age=FLOW_TTL_S,
                            path=FLOW_COOKIE_PATH, secure=True, httponly=True, samesite="lax")
        return response

    async def callback(self, request: Request) -> Response:
        """Check ``state`` against the sign-in cookie (constant time), exchange ``code`` and
        the PKCE verifier for a user token, read the user, set the session, go ``next``.

        Answers 400 (no session) on a missing, expired or mismatched ``state``, a refusal by
        the user or a missing ``code``; 502 when GitHub refuses the code or does not answer.
        """
        flow = self.access.codec.open_flow(request.cookies.get(FLOW_COOKIE))
        state = request.query_params.get("state", "")
        if flow is None or not hmac.compare_digest(flow.state.encode(), state.encode()):
            return self._fail(400, "This sign-in has expired or was not started here: "
                                   "sign in again.")
        code = request.query_params.get("code", "")
        if not code:
            return self._fail(400, "GitHub did not authorize the sign-in.")
        try:
            token, ttl_s = await self._exchange(code, flow.verifier, request)
            user = await self.access.get_json("/user", token, "the user")
            user_id, login = int(user["id"]), str(user["login"])
        except (GitHubRefused, KeyError, TypeError, ValueError) as err:
            log.warning("sign-in failed: GitHub refused %s", err)
            return self._fail(502, "GitHub refused the sign-in: try again.")
        response = RedirectResponse(flow.next_path, status_code=303, headers=_NO_STORE)
        cookie = self.access.codec.seal_session(user_id, login, token, ttl_s)
        response.set_cookie(SESSION_COOKIE, cookie, max_age=ttl_s, path="/", secure=True,
                            httponly=True, samesite="lax")
        _forget_flow(response)
        log.info("signed in: %s", login)
        return response

    async def logout(self, request: Request) -> Response:
        """Clear the session (and end it in this process) and go to ``next``, else
        ``/dashboard?signed_out=1`` (never sent on to sign in again)."""
        user = self.access.user(request)
        if user is not None:
            self.access.end_session(user)
        response = RedirectResponse(safe_next(request.query_params.get("next"),
                                              "/dashboard?signed_out=1"),
                                    status_code=303, headers=_NO_STORE)
        clear_session(response)
        return response

    async def _exchange(self, code: str, verifier: str, request: Request) -> tuple[str, int]:
        """POST the code to ``/login/oauth/access_token``; return the token and how long the
        session may last (GitHub's ``expires_in`` when the token expires sooner)."""
        form = {"client_id": self.settings.client_id,
                "client_secret": self.settings.client_secret, "code": code,
                "redirect_uri": self._callback_url(request), "code_verifier": verifier}
        url = f"{self.settings.github_url}/login/oauth/access_token"
        try:
            response = await self.access.client.post(
                url, data=form, headers={"Accept": "application/json", "User-Agent": "llmgate"})
        except httpx.HTTPError as exc:
            raise GitHubRefused(f"the code ({type(exc).__name__})", 0) from None
        try:
            body = response.json() if response.status_code == 200 else {}
        except ValueError:
            body = {}
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            error = body.get("error", "no token") if isinstance(body, dict) else "no token"
            raise GitHubRefused(f"the code ({str(error)[:60]})", response.status_code)
        expires_in = body.get("expires_in")
        ttl_s = min(SESSION_TTL_S, int(expires_in)) if isinstance(expires_in, int) and \
            expires_in > 0 else SESSION_TTL_S
        return token, ttl_s

    def _callback_url(self, request: Request) -> str:
        root = self.settings.public_url or str(request.base_url).rstrip("/")
        return f"{root}/auth/callback"

    @staticmethod
    def _fail(status: int, message: str) -> Response:
        response = PlainTextResponse(message + "\n", status_code=status, headers=_NO_STORE)
        _forget_flow(response)
        return response


async def report_allowed(access: GitHubAccess, request: Request, repo: str | None) -> bool:
    """Return whether ``/reports/<id>`` of ``repo`` may be served to this request.

    Always with ``LLMGATE_REPORTS_REQUIRE_LOGIN`` off (today's unguessable links). With it on:
    when GitHub says the repository is public, or lists it for the signed-in user; never when
    the report's repository is unknown (``None``) or on any GitHub error (fail closed).
    """
    if not access.settings.reports_require_login:
        return True
    if repo is None:
        return False
    return await access.readable_by_user(request, repo) or await access.is_public(repo)


def clear_session(response: Response) -> None:
    """Make ``response`` delete the session cookie."""
    response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True,
                           samesite="lax")


class ClearRefusedSession:
    """ASGI middleware: delete the session cookie on a response to a request whose token
    GitHub refused (401) while it was handled (`REFUSED_FLAG`)."""

    def __init__(self, app: ASGIApp) -> None:
        """Wrap ``app``."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the deleting ``Set-Cookie`` when the flag is set."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start" and \
                    scope.get("state", {}).get(REFUSED_FLAG):
                deleting = Response()
                clear_session(deleting)
                MutableHeaders(scope=message).append(
                    "set-cookie", deleting.headers["set-cookie"])
            await send(message)

        await self.app(scope, receive, send_wrapper)


_NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def _forget_flow(response: Response) -> None:
    response.delete_cookie(FLOW_COOKIE, path=FLOW_COOKIE_PATH, secure=True, httponly=True,
                           samesite="lax")
