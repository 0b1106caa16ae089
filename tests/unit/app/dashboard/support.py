"""History for the dashboard's tests, written through worker/baselines/timeline.py into the
test's real Redis, and a test double of the `Access` protocol (the real one, GitHub sign-in, is
app/dashboard/auth.py)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request

from app.dashboard.views import dashboard_routes
from tests.unit.history_support import WHY as WHY  # the gates' Why, read by the page tests
from tests.unit.history_support import example, gate_report, record_gate
from worker.baselines.store import BaselineSettings
from worker.baselines.timeline import Timeline, record_acceptance
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import RunResult, SuiteResult

REPO = "octo/widgets"
#: A repository with history that the access double refuses.
HIDDEN = "octo/secret"
NOW = time.time()
#: Push times: run i at T0 + i hours.
T0 = 1_700_000_000.0
RUNS = 200
#: An example id with markup and one with Unicode; a suite with markup, Unicode and a slash.
SCRIPT_ID = "<script>alert(1)</script>"
UNICODE_ID = "例-1 🙂\u200f"
ODD_SUITE = "<i>ü</i>/x"


def sha(i: int) -> str:
    """Return the commit id of branch run ``i``."""
    return hashlib.sha1(str(i).encode()).hexdigest()  # noqa: S324 - an id, not security


@dataclass(frozen=True)
class FixedUser:
    """A signed-in user of `FixedReposAccess`."""

    login: str


class FixedReposAccess:
    """Test double of app.dashboard.access_types.Access: allows a fixed set of repositories to
    every request, whoever sent it; the request's user is ``login`` (None: signed out)."""

    def __init__(self, allowed: Sequence[str], login: str | None = None) -> None:
        self.allowed = set(allowed)
        self.login = login
        self.asked: list[str] = []

    def user(self, request: Request) -> FixedUser | None:
        return None if self.login is None else FixedUser(self.login)

    async def readable(self, request: Request, repo: str) -> bool:
        self.asked.append(repo)
        return repo in self.allowed

    async def readable_repos(self, request: Request, repos: Sequence[str]) -> list[str]:
        self.asked.extend(repos)
        return [r for r in repos if r in self.allowed]


def suite(name: str, i: int, n: int = 12) -> SuiteResult:
    """Suite ``name`` of run ``i``: ``n`` examples, the first 4 + i % 6 pass, except
    `SCRIPT_ID` (example 0) which flips every run; `UNICODE_ID` always passes."""
    passing = 4 + i % 6
    ids = [SCRIPT_ID, UNICODE_ID, *(f"ex-{k:03d}" for k in range(2, n))]
    examples = tuple(example(ids[k], k + 1, (i % 2 == 0) if k == 0 else k < passing + 1,
                              0.2 + 0.6 * ((i + k) % 7) / 6) for k in range(n))
    return SuiteResult(name, f"evals/{name}.jsonl", examples, suite_metrics(examples))


async def write_history(redis: Redis, repo: str = REPO, runs: int = RUNS) -> None:
    """Write ``runs`` default-branch runs of suites ``tickets`` and `ODD_SUITE`, then two pull
    request gates (#7 failed then accepted, #8 passed), all through `Timeline`."""
    timeline = Timeline(redis, BaselineSettings(history_runs=500, history_pr_days=90),
                        lambda: NOW)
    for i in range(runs):
        run = RunResult(sha(i), {s.name: s for s in (suite("tickets", i), suite(ODD_SUITE, i))})
        await timeline.push(repo=repo, namespace=repo, sha=sha(i), branch="main",
                            pushed_at=T0 + 3600 * i, run=run, base_source="", duration_s=10 + i)
    for pr, check_run_id, conclusion in ((7, 555, "failure"), (8, 556, "success")):
        report = gate_report(suite("tickets", 0), suite("tickets", 1), conclusion)
        await record_gate(timeline, repo, pr, check_run_id, report)
    await record_acceptance(redis, repo=repo, pr_number=7, check_run_id=555, by="maintainer",
                            at=NOW + 60)


@asynccontextmanager
async def dashboard(redis: Redis | None, access: FixedReposAccess,
                    **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    """Yield an HTTP client of an app serving only the dashboard's routes over ``redis``
    (``options``: `dashboard_routes`' keywords)."""
    app = Starlette(routes=dashboard_routes(lambda: redis, access, **options))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dash.test") as client:
        yield client
