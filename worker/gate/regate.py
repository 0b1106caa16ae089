"""The base each check run was gated against, and gating a head again on the base it has now.

A pull request retargeted back and forth (``main`` -> ``loose`` -> ``main``) whose deliveries
arrive out of order, or whose API answers lag them, can end with the newest ``llmgate`` check
run of its head gated against a base it no longer targets (issue 30). GitHub shows that newest
check run, so the verdict must be about the current base. Two places repair it:

- a run superseded because GitHub shows its head on another base (`Supersede.same_head`) calls
  `ensure_gated` once its own check run, if any, is concluded;
- the reconciler (`worker.gate.reconcile`) compares, for each open pull request, the base its
  newest completed ``llmgate`` check run was gated against with the current one.

Both read which base a check run was gated against from `gated_key`: the hash
``llmgate:pr:<owner>/<name>#<number>:gated`` maps a check run id to the base branch name its run
was asked for (`remember`, written by `worker.gate.check_run.open_run` when it creates one),
kept `PR_HEAD_TTL_S` after the pull request's last new check run (one field per check run). A
check run missing there (made before this record existed, or lost with Redis's data) has an
unknown base: neither place acts on it.
"""

from __future__ import annotations

import logging
import time

from arq.connections import ArqRedis
from arq.constants import default_queue_name, in_progress_key_prefix, job_key_prefix
from arq.jobs import DeserializationError, deserialize_job
from redis.asyncio import Redis

from worker.contract import (
    CHECK_NAME,
    JOB_GATE_PULL_REQUEST,
    PR_HEAD_TTL_S,
    GatePayload,
    RepoRef,
    external_target,
    gate_job_id,
)
from worker.gate.registry import job_state
from worker.gate.request import GateRequest
from worker.github import CheckRunInfo, GitHubClient, PullInfo

log = logging.getLogger("llmgate.worker")

#: Characters a Redis glob pattern treats specially (escaped in `_glob`).
_GLOB_SPECIAL = frozenset("*?[]\\")


def gated_key(repo: RepoRef, pr_number: int) -> str:
    """Return the hash of a pull request's check runs and their bases:
    ``llmgate:pr:<owner>/<name>#<number>:gated`` (check run id -> base branch name)."""
    return f"llmgate:pr:{repo['owner']}/{repo['name']}#{pr_number}:gated"


async def remember(redis: Redis, repo: RepoRef, pr_number: int, check_run_id: int,
                   base_ref: str) -> None:
    """Record that check run ``check_run_id`` gates pull request ``pr_number`` against branch
    ``base_ref``; nothing for a run without a pull request or a base (a merge group).

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    if pr_number <= 0 or not base_ref:
        return
    key = gated_key(repo, pr_number)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hset(key, str(check_run_id), base_ref)
        pipe.expire(key, PR_HEAD_TTL_S)
        await pipe.execute()


async def gated_base(redis: Redis, repo: RepoRef, pr_number: int,
                     check_run_id: int) -> str | None:
    """Return the base branch check run ``check_run_id`` was gated against, or None when
    unknown (see the module docstring).

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    raw = await redis.hget(gated_key(repo, pr_number), str(check_run_id))  # type: ignore[misc]
    if raw is None:
        return None
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _glob(text: str) -> str:
    """``text`` with Redis glob specials escaped, to match it literally in ``SCAN MATCH``."""
    return "".join(f"\\{c}" if c in _GLOB_SPECIAL else c for c in text)


async def live_bases(redis: Redis, repo: RepoRef, pr_number: int, head_sha: str,
                     except_job_id: str = "") -> set[str]:
    """Return the base branches that queued or running gate jobs of this pull request's head
    (``gate:owner/name#N@<head>`` with any suffix, but ``except_job_id``) were asked for.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    prefix = gate_job_id(repo, pr_number, head_sha)
    ids = {m.decode() if isinstance(m, bytes) else str(m)
           for m in await redis.zrange(default_queue_name, 0, -1)}
    async for key in redis.scan_iter(match=_glob(in_progress_key_prefix + prefix) + "*",
                                     count=500):
        text = key.decode() if isinstance(key, bytes) else str(key)
        ids.add(text.removeprefix(in_progress_key_prefix))
    bases = set()
    for job_id in ids:
        if job_id == except_job_id or not (job_id == prefix or job_id.startswith(prefix + ":")):
            continue
        raw = await redis.get(job_key_prefix + job_id)
        try:
            args = deserialize_job(raw).args if raw is not None else ()
        except DeserializationError:
            continue
        if args and isinstance(args[0], dict):
            bases.add(str(args[0].get("base_ref", "")))
    return bases


async def pr_check_runs(gh: GitHubClient, repo: RepoRef, pr_number: int,
                        head_sha: str) -> list[CheckRunInfo]:
    """Return the ``llmgate`` check runs on ``head_sha`` of pull request ``pr_number`` (its
    ``external_id`` ``pr:<number>``, or none at all: a check run of an older llmgate).

    Raises:
        GitHubError: GitHub refused the listing.
    """
    return [r async for r in gh.list_check_runs(repo["owner"], repo["name"], head_sha,
                                                CHECK_NAME)
            if not r.external_id or external_target(r.external_id)[0] == pr_number]


async def ensure_gated(redis: Redis, gh: GitHubClient, request: GateRequest, pull: PullInfo,
                       except_job_id: str = "") -> str | None:
    """Queue a gate of ``request``'s head against the base GitHub shows now (``pull``), unless
    one is already there or coming; return the job id queued, or None.

    Nothing is queued when the pull request is closed or has another head (its own delivery
    gates that), when a queued or running gate job of the head other than ``except_job_id``
    (the caller's) is for that base, or unless the pull request's newest ``llmgate`` check run
    on the head was gated against another base, a known one: without any check run, the
    delivery of the retarget queued the gate (or the reconciler queues the lost one). The
    job id is ``gate:...@<head>:regate:<newest check run id>``, so two runs superseded at once
    queue one gate; when that id has a result already (an earlier re-gate that GitHub's state
    then dropped before it opened a check run), a fresh one with the time in nanoseconds.

    Args:
        redis: the queue's Redis (arq's).
        gh: a client of the pull request's installation.
        request: the superseded run's request (repository, pull request, head, draft).
        pull: GitHub's ``GET .../pulls/N`` answer that superseded it.
        except_job_id: the caller's own job id ("" outside an arq job).

    Raises:
        redis.exceptions.RedisError: Redis failed.
        GitHubError: GitHub refused the check-run listing.
    """
    repo, number, head_sha = request.repo, request.pr_number, request.head_sha
    if number <= 0 or pull.state != "open" or pull.head_sha != head_sha:
        return None
    if pull.base_ref in await live_bases(redis, repo, number, head_sha, except_job_id):
        return None
    runs = await pr_check_runs(gh, repo, number, head_sha)
    newest = max(runs, key=lambda r: r.id, default=None)
    if newest is None or await gated_base(redis, repo, number, newest.id) in (
            None, pull.base_ref):
        return None
    payload = GatePayload(
        delivery_id=f"regate:{newest.id}", installation_id=gh.installation_id, repo=repo,
        pr_number=number, head_sha=head_sha, base_sha=pull.base_sha, base_ref=pull.base_ref,
        head_repo=pull.head_repo_full_name, author=pull.author_login, draft=request.draft)
    queue = ArqRedis(connection_pool=redis.connection_pool)
    job_id = gate_job_id(repo, number, head_sha, f"regate:{newest.id}")
    job = await queue.enqueue_job(JOB_GATE_PULL_REQUEST, payload, _job_id=job_id)
    if job is None and await job_state(redis, job_id) == "gone":
        job = await queue.enqueue_job(JOB_GATE_PULL_REQUEST, payload,
                                      _job_id=f"{job_id}:{time.time_ns()}")
    if job is None:
        return None
    log.info("PR #%s @%s: queued a gate against %s, the base it has now (its newest llmgate "
             "check run was gated against another)", number, head_sha[:7], pull.base_ref)
    return job.job_id
