"""The dashboard's endpoints (issue 35): repositories, a repository, a run, an example, CSV.

Each endpoint asks the `Access` before it reads anything of a repository; a repository that is
refused, unknown or misspelt gets the one 404 answer (`not_found`), so a page never confirms
that a repository it hides exists. Every HTML page answers JSON (the records as the history's
readers return them) when the request's ``Accept`` prefers ``application/json``. Pages carry
no script and load nothing from another origin (`PAGE_HEADERS`); charts are inline SVG.

Every HTML page's nav offers "Sign in with GitHub" (``<root>/login?next=<this path>``) to a
signed-out visitor and "<login> · Sign out" to a signed-in one; sign-out comes back to
``/dashboard?signed_out=1``, which does not send to sign-in again (GitHub would sign an
authorized user back in at once). Links only: sign-out is a GET, as ``form-action 'none'``.

Reads go through worker/history_contract.py's readers on the queue's Redis, bounded by
`READ_TIMEOUT_S`; no Redis, or a Redis error, is a 503.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlencode

from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from app.dashboard import model
from app.dashboard.access_types import Access
from app.dashboard.pages import (
    PAGE_HEADERS,
    Missing,
    example_target,
    query_int,
    render,
    wants_json,
)
from app.dashboard.repository import RepositoryPage, history_stamp, repository_page, summary
from worker import history_contract as history

#: Bound on one page's reads from Redis, seconds.
READ_TIMEOUT_S = 5.0
#: Branch runs charted by default on a repository page (``?runs=`` up to the retention).
CHART_RUNS = 100
#: Branch runs and pull request gates an example's page shows.
EXAMPLE_RUNS = 100
#: Repository pages kept rendered, and for how long (seconds): a page is reused only while its
#: repository's newest branch run and newest gate (ids and counts) are unchanged, and for at
#: most this long (an acceptance, or a push's other config, adds to a run without a new id).
CACHED_PAGES = 32
CACHE_TTL_S = 30.0
#: GitHub's web root by default (``GITHUB_URL``, AuthSettings.github_url, for GitHub Enterprise
#: Server): the run page's commit link.
GITHUB_URL = "https://github.com"
#: A GitHub owner or repository name.
NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")

Endpoint = Callable[[Request], Awaitable[Response]]


def not_found(request: Request, signed_in: str | None = None) -> Response:
    """Return the dashboard's one 404: the same for an unknown repository, a refused one, an
    unknown run or example at the same path (HTML, or JSON when preferred); the nav as for
    ``signed_in`` (the user's login, None when signed out)."""
    headers = {**PAGE_HEADERS, "Cache-Control": "no-store"}
    if wants_json(request.headers.get("accept", "")):
        return JSONResponse({"error": "not found"}, 404, headers=headers)
    return HTMLResponse(render("not_found.html.j2", request, signed_in), 404, headers=headers)


def _unavailable(request: Request, signed_in: str | None, why: str) -> Response:
    headers = {**PAGE_HEADERS, "Cache-Control": "no-store"}
    if wants_json(request.headers.get("accept", "")):
        return JSONResponse({"error": "unavailable", "reason": why}, 503, headers=headers)
    return HTMLResponse(render("unavailable.html.j2", request, signed_in, why=why), 503,
                        headers=headers)


def _answer(request: Request, signed_in: str | None, template: str, data: Any,
            **context: Any) -> Response:
    """Return ``data`` as JSON when preferred, else ``template`` rendered with ``context``."""
    if wants_json(request.headers.get("accept", "")):
        return JSONResponse(data, headers=PAGE_HEADERS)
    return HTMLResponse(render(template, request, signed_in, **context), headers=PAGE_HEADERS)


class DashboardPages:
    """The dashboard's endpoints over the history in ``redis()``'s Redis (None outside the
    app's lifespan: 503), each asking ``access`` first."""

    def __init__(self, redis: Callable[[], Redis | None], access: Access, *,
                 chart_runs: int = CHART_RUNS, cached_pages: int = CACHED_PAGES,
                 github_url: str = GITHUB_URL) -> None:
        """Read through ``redis()``; chart ``chart_runs`` branch runs by default; keep
        ``cached_pages`` repository pages (0: none); link commits under ``github_url``
        (GitHub's web root, no trailing slash needed)."""
        self._redis, self._access, self.chart_runs = redis, access, chart_runs
        self.cached_pages = cached_pages
        self.github_url = github_url.rstrip("/")
        self._pages: OrderedDict[tuple[Any, ...], tuple[float, RepositoryPage, str]] = \
            OrderedDict()

    def guarded(self, endpoint: Callable[[Request, Redis], Awaitable[Response]]) -> Endpoint:
        """Return ``endpoint`` with Redis given, bounded in time and its failures answered:
        `Missing` 404, no Redis or a Redis error 503."""
        async def answer(request: Request) -> Response:
            redis = self._redis()
            if redis is None:
                return _unavailable(request, self._login(request), "Redis is not connected.")
            try:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    return await endpoint(request, redis)
            except Missing:
                return not_found(request, self._login(request))
            except (RedisError, TimeoutError):
                return _unavailable(request, self._login(request), "Redis does not answer.")
        return answer

    def _login(self, request: Request) -> str | None:
        """Return the signed-in user's login, None when signed out."""
        user = self._access.user(request)
        return None if user is None else user.login

    async def _repo(self, request: Request, redis: Redis) -> str:
        """Return the request's ``owner/name`` when its user may read it and it has history.

        Raises:
            Missing: a malformed name, refused by the access, or no history.
        """
        owner, name = request.path_params.get("owner", ""), request.path_params.get("repo", "")
        repo = f"{owner}/{name}"
        if not (NAME.fullmatch(owner) and NAME.fullmatch(name)):
            raise Missing(repo)
        if not await self._access.readable(request, repo):
            raise Missing(repo)
        if await redis.zscore(history.REPOS_KEY, repo) is None:
            raise Missing(repo)
        return repo

    async def index(self, request: Request, redis: Redis) -> Response:
        """``GET /dashboard``: the readable repositories, each with its latest branch run,
        headline metrics' sparklines and recent pull request gates.

        A signed-out visitor who may read none (no ``LLMGATE_DASHBOARD_PUBLIC``, or no public
        repository with history) is sent to sign in: a page is redirected (303, not stored) to
        ``<root>/login?next=<root>/dashboard``, except ``?signed_out=1`` (where sign-out lands:
        GitHub signs an authorized user back in at once) which shows the empty list; a JSON
        request is never redirected, it gets 401 ``{"error": "sign in"}``. A visitor who may
        read public repositories sees them (with the nav's sign-in link); a signed-in user
        who may read none sees the empty list.
        """
        known = await history.list_repositories(redis)
        readable = set(await self._access.readable_repos(request, [r["repo"] for r in known]))
        signed_in = self._login(request)  # after readable_repos: a refused token signs out
        if signed_in is None and not readable:
            refused = _sign_in_first(request)
            if refused is not None:
                return refused
        shown = [await summary(redis, r["repo"], r["last_s"]) for r in known
                 if r["repo"] in readable]
        data = {"repositories": [s.data for s in shown]}
        return _answer(request, signed_in, "index.html.j2", data, repos=shown,
                       signed_out="signed_out" in request.query_params)

    async def repository(self, request: Request, redis: Redis) -> Response:
        """``GET /dashboard/{owner}/{repo}``: trends per suite and metric, cost, flapping
        examples, pull request gates (``?runs=`` how many runs, ``?metrics=all`` charts
        every metric)."""
        repo = await self._repo(request, redis)
        runs = query_int(request, "runs", self.chart_runs, history.DEFAULT_BRANCH_RUNS)
        every = request.query_params.get("metrics") == "all"
        base = _base(request, repo)
        signed_in = self._login(request)  # in the key: the nav names the user
        key = (repo, await history_stamp(redis, repo), runs, every, base, signed_in)
        hit = self._pages.get(key)
        if hit is None or hit[0] < time.monotonic():
            page = await repository_page(redis, repo, runs, every, base=base)
            hit = (time.monotonic() + CACHE_TTL_S, page,
                   render("repository.html.j2", request, signed_in, page=page))
            self._remember(key, hit)
        if wants_json(request.headers.get("accept", "")):
            return JSONResponse(hit[1].data, headers=PAGE_HEADERS)
        return HTMLResponse(hit[2], headers=PAGE_HEADERS)

    def _remember(self, key: tuple[Any, ...], page: tuple[float, RepositoryPage, str]) -> None:
        if self.cached_pages <= 0:
            return
        self._pages[key] = page
        self._pages.move_to_end(key)
        while len(self._pages) > self.cached_pages:
            self._pages.popitem(last=False)

    async def run(self, request: Request, redis: Redis) -> Response:
        """``GET /dashboard/{owner}/{repo}/runs/{run_id}``: one run with its examples."""
        repo = await self._repo(request, redis)
        run = await history.get_run(redis, repo, str(request.path_params["run_id"]))
        if run is None:
            raise Missing(repo)
        return _answer(request, self._login(request), "run.html.j2", run, repo=repo, run=run,
                       totals=model.totals(run), base=_base(request, repo),
                       github_url=self.github_url)

    async def example(self, request: Request, redis: Redis) -> Response:
        """``GET /dashboard/{owner}/{repo}/examples/{suite}/{example_id}``: one example across
        the branch's runs and the pull requests' heads, and its base and head outputs in the
        pull request gates where it regressed, was fixed or failed (``outputs``, recorded
        redacted: worker/baselines/gate_records.py `output_records`)."""
        repo = await self._repo(request, redis)
        suite, example_id = example_target(request)
        branch = await history.example_history(redis, repo, suite, example_id,
                                                limit=EXAMPLE_RUNS)
        prs = await history.example_history(redis, repo, suite, example_id, side="head",
                                             kind="pull_request", limit=EXAMPLE_RUNS)
        outputs = await history.example_outputs(redis, repo, suite, example_id,
                                                limit=EXAMPLE_RUNS)
        if not branch and not prs and not outputs:
            raise Missing(repo)
        data = {"repo": repo, "suite": suite, "example_id": example_id, "branch": branch,
                "pull_requests": prs, "outputs": outputs}
        passes = [float(p["status"] == history.PASSED) for p in reversed(branch)]
        return _answer(request, self._login(request), "example.html.j2", data,
                       base=_base(request, repo), passes=passes,
                       max_output_chars=history.MAX_OUTPUT_CHARS, **data)

    async def history_csv(self, request: Request, redis: Redis) -> Response:
        """``GET /dashboard/{owner}/{repo}/history.csv``: every kept branch run, one row per
        run x suite x metric (`model.CSV_COLUMNS`), oldest first."""
        repo = await self._repo(request, redis)
        runs = await history.list_branch_runs(redis, repo, limit=history.DEFAULT_BRANCH_RUNS)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(model.CSV_COLUMNS)
        writer.writerows(model.csv_rows(runs))
        name = repo.replace("/", "-")
        return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers={
            **PAGE_HEADERS, "Content-Disposition": f'attachment; filename="{name}-history.csv"'})


def _sign_in_first(request: Request) -> Response | None:
    """The answer that sends a signed-out visitor of ``/dashboard`` to sign in: JSON 401, a
    page 303 to ``<root>/login?next=<root>/dashboard``; None for ``?signed_out``."""
    headers = {**PAGE_HEADERS, "Cache-Control": "no-store"}
    if wants_json(request.headers.get("accept", "")):
        return JSONResponse({"error": "sign in"}, 401, headers=headers)
    if "signed_out" in request.query_params:
        return None
    root = str(request.scope.get("root_path", ""))
    target = f"{root}/login?" + urlencode({"next": f"{root}/dashboard"})
    return RedirectResponse(target, status_code=303, headers=headers)


def _base(request: Request, repo: str) -> str:
    """Return the repository's dashboard path, under the app's root path."""
    return f"{request.scope.get('root_path', '')}/dashboard/{repo}"


def dashboard_routes(redis_getter: Callable[[], Redis | None], access: Access, *,
                     cached_pages: int = CACHED_PAGES,
                     github_url: str = GITHUB_URL) -> list[BaseRoute]:
    """Return the dashboard's routes (GET only) over the history in ``redis_getter()``'s
    Redis, every one asking ``access``; ``cached_pages`` repository pages kept rendered;
    commits linked under ``github_url`` (``GITHUB_URL``, AuthSettings.github_url)."""
    pages = DashboardPages(redis_getter, access, cached_pages=cached_pages,
                           github_url=github_url)
    repo = "/dashboard/{owner}/{repo}"
    routes: Sequence[tuple[str, Callable[[Request, Redis], Awaitable[Response]]]] = (
        ("/dashboard", pages.index),
        (repo, pages.repository),
        (repo + "/history.csv", pages.history_csv),
        (repo + "/runs/{run_id}", pages.run),
        (repo + "/examples/{target:path}", pages.example),
    )
    return [Route(path, pages.guarded(endpoint), methods=["GET"]) for path, endpoint in routes]

