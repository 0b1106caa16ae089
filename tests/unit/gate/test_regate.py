"""Gating a head again on the base its pull request has now (issue 30), with a real Redis and
arq queue and the schema-checking fake GitHub (`worker.gate.regate`)."""

from __future__ import annotations

from typing import Any

import pytest
from arq.connections import ArqRedis
from arq.constants import default_queue_name
from arq.jobs import Job, JobStatus
from redis.asyncio import Redis

from tests.unit import runs_support
from tests.unit.runs_support import BASE_SHA, HEAD_SHA, NEW_SHA
from tests.unit.worker_support import OWNER, REPO
from worker.contract import RepoRef, gate_job_id
from worker.gate import regate
from worker.gate.request import GateRequest
from worker.github.client import GitHubClient, PullInfo

fake_gh, gh = runs_support.fake_gh, runs_support.gh
REF = RepoRef(owner=OWNER, name=REPO, clone_url="https://example.test/acme/tiny.git")
ON_LOOSE = GateRequest(REF, 1, HEAD_SHA, BASE_SHA, base_ref="loose")


def _on(base_ref: str, *, head_sha: str = HEAD_SHA, state: str = "open") -> PullInfo:
    """GitHub's answer: pull request #1 at ``head_sha`` into ``base_ref``."""
    return PullInfo(head_sha, BASE_SHA, base_ref, f"{OWNER}/{REPO}", REF["clone_url"], state,
                    author_login="writer")


async def _check_run(redis: Redis, gh: GitHubClient, base_ref: str | None) -> int:
    """A completed ``llmgate`` check run of #1 on the head, gated against ``base_ref`` (None:
    not recorded, as one of an older llmgate)."""
    check_run_id = await gh.create_check_run(
        OWNER, REPO, HEAD_SHA, output={"title": "llmgate: pass", "summary": "..."},
        external_id="pr:1")
    await gh.update_check_run(OWNER, REPO, check_run_id,
                              {"status": "completed", "conclusion": "success"})
    if base_ref is not None:
        await regate.remember(redis, REF, 1, check_run_id, base_ref)
    return check_run_id


async def _queued(redis: Redis) -> list[str]:
    return [m.decode() for m in await redis.zrange(default_queue_name, 0, -1)]


async def test_a_newest_check_run_on_the_left_base_gets_one_gate_of_the_current_base(
        redis: Redis, gh: GitHubClient) -> None:
    await _check_run(redis, gh, "main")
    newest = await _check_run(redis, gh, "loose")
    assert await regate.gated_base(redis, REF, 1, newest) == "loose"
    job_id = await regate.ensure_gated(redis, gh, ON_LOOSE, _on("main"), "the-callers-job")
    assert job_id == gate_job_id(REF, 1, HEAD_SHA, f"regate:{newest}")
    job = await Job(job_id, ArqRedis(connection_pool=redis.connection_pool)).info()
    assert job is not None
    payload: dict[str, Any] = job.args[0]
    assert {k: payload[k] for k in ("pr_number", "head_sha", "base_sha", "base_ref", "repo",
                                    "author", "draft")} == {
        "pr_number": 1, "head_sha": HEAD_SHA, "base_sha": BASE_SHA, "base_ref": "main",
        "repo": REF, "author": "writer", "draft": False}
    # a second run superseded the same way finds the gate queued: nothing more
    assert await regate.ensure_gated(redis, gh, ON_LOOSE, _on("main"), "another-job") is None
    assert await _queued(redis) == [job_id]
    assert await regate.live_bases(redis, REF, 1, HEAD_SHA) == {"main"}
    assert await regate.live_bases(redis, REF, 1, HEAD_SHA, job_id) == set()


@pytest.mark.parametrize(("bases", "pull"), [
    ((), _on("main")),  # no check run: the retarget's own delivery queued its gate
    (("loose", "main"), _on("main")),  # the newest is about main already
    (("main", None), _on("main")),  # the newest's base is unknown (an older llmgate's)
    (("loose",), _on("main", state="closed")),
    (("loose",), _on("main", head_sha=NEW_SHA)),  # pushed: that push's delivery gates it
])
async def test_nothing_is_queued_when_the_current_base_is_gated_or_unknown(
        redis: Redis, gh: GitHubClient, bases: tuple[str | None, ...], pull: PullInfo) -> None:
    for base in bases:
        await _check_run(redis, gh, base)
    assert await regate.ensure_gated(redis, gh, ON_LOOSE, pull) is None
    assert await _queued(redis) == []


async def test_a_queued_gate_of_the_current_base_is_left_to_run(
        redis: Redis, gh: GitHubClient) -> None:
    """The retarget's own job waits for a worker: it opens the newest check run soon."""
    await _check_run(redis, gh, "loose")
    queue = ArqRedis(connection_pool=redis.connection_pool)
    edited = gate_job_id(REF, 1, HEAD_SHA, "edited:d-2")
    await queue.enqueue_job("gate_pull_request", {"base_ref": "main"}, _job_id=edited)
    assert await regate.ensure_gated(redis, gh, ON_LOOSE, _on("main")) is None
    assert await _queued(redis) == [edited]
    assert await Job(edited, queue).status() == JobStatus.queued
