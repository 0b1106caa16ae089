"""End to end: a 403 secondary rate limit with Retry-After is honoured by every worker.

Real Redis, real git repositories, the schema-checking fake GitHub over loopback HTTP, and two
arq workers in this process, each with its own services (Redis connection, rate limiter, token
cache) as two worker processes would have: they share only Redis.

The fake answers the first ``POST .../check-runs`` with 403 and ``retry-after: 2`` once. From the
fake's own request times: no request of that installation reaches GitHub in the next 2 s, from
either worker, and then both gates complete. The second worker learns of the pause from Redis
alone (its job starts after the 403 was answered), and both share one installation token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from arq import create_pool
from arq.worker import Worker, create_worker

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.worker_support import (
    INSTALLATION_ID,
    build_tiny_repo,
    enqueue_gate,
    fake_github_env,
    gate_payload,
)
from worker.main import worker_settings
from worker.security.secretbox import SecretBox

pytestmark = pytest.mark.slow

RETRY_AFTER_S = 2
SECONDARY_LIMIT = {"message": "You have exceeded a secondary rate limit. Please wait a few "
                              "minutes before you try again.",
                   "documentation_url": "https://docs.github.com/rest/using-the-rest-api/"
                                        "rate-limits-for-the-rest-api#about-secondary-rate-limits"}


@pytest.fixture()
def github(monkeypatch: pytest.MonkeyPatch, redis_url: str,
           tmp_path: Path) -> Iterator[FakeGitHubServer]:
    """The fake GitHub, and the workers' environment (tokens shared, encrypted, in Redis)."""
    with fake_github_env(monkeypatch, redis_url, tmp_path / "work",
                         LLMGATE_ENCRYPTION_KEYS=SecretBox.generate_key()) as server:
        yield server


def installation_requests(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Requests made with the installation's token (App-JWT requests carry no installation)."""
    return [r for r in state["requests"] if r.get("installation_id") == INSTALLATION_ID]


async def test_a_403_secondary_rate_limit_with_retry_after_is_honoured(
        github: FakeGitHubServer, tmp_path: Path) -> None:
    shas = build_tiny_repo(tmp_path / "tiny")
    clone_url = str(tmp_path / "tiny")
    github.setup({"faults": [{"operation": "checks/create", "status": 403, "times": 1,
                              "headers": {"retry-after": str(RETRY_AFTER_S)},
                              "body": SECONDARY_LIMIT}]})
    settings = worker_settings()
    pool = await create_pool(settings.redis_settings)
    first: Worker = create_worker(settings, burst=True, poll_delay=0.05, handle_signals=False,
                                  max_jobs=1, cron_jobs=[])  # busy with PR 1 while PR 2 waits
    second: Worker = create_worker(settings, burst=True, poll_delay=0.05, handle_signals=False,
                                   cron_jobs=[])  # no sweeper cron: it would count as a job
    try:
        await enqueue_gate(pool, gate_payload(clone_url, shas["pr/drop"], shas["main"], number=1))
        running_first = asyncio.create_task(first.async_run())
        while not any(r["fault"] for r in github.state()["requests"]):
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # the 403 has been answered: the pause is in Redis
        await enqueue_gate(pool, gate_payload(clone_url, shas["pr/docs"], shas["main"], number=2))
        await asyncio.wait_for(asyncio.gather(running_first, second.async_run()), 120)
    finally:
        await pool.aclose()
        await first.close()
        await second.close()

    state = github.state()
    assert (first.jobs_complete, second.jobs_complete) == (1, 1)
    assert (first.jobs_failed, second.jobs_failed) == (0, 0)
    [limited] = [r for r in state["requests"] if r["fault"]]
    assert (limited["operation"], limited["status"]) == ("checks/create", 403)
    later = [r for r in installation_requests(state) if r["at"] > limited["at"]]
    assert later, "nothing reached GitHub after the rate limit"
    assert min(r["at"] for r in later) - limited["at"] >= RETRY_AFTER_S
    creates = [r for r in later if r["operation"] == "checks/create"]
    assert [r["status"] for r in creates] == [201, 201]  # PR 1's retry and PR 2's first try
    conclusions = {r["head_sha"]: (r["status"], r["conclusion"]) for r in state["check_runs"]}
    assert conclusions == {shas["pr/drop"]: ("completed", "failure"),
                           shas["pr/docs"]: ("completed", "success")}
    minted = [r for r in state["requests"]
              if r["operation"] == "apps/create-installation-access-token"]
    assert len(minted) == 1  # the second worker used the first one's token, from Redis
    assert state["violations"] == []
