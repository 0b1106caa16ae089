"""The reconciler: GitHub is the source of truth, Redis is not (issue 14).

Redis holds the queue, the run registry (`worker.gate.registry`) and each pull request's
newest head; a restart without persistence, an eviction or a flush loses them, and with them queued
gates and the entries the sweeper (`worker.gate.sweeper`) needs to conclude an abandoned check run.
Every ``LLMGATE_RECONCILE_S`` seconds (default 300, on the clock's multiples; one worker per tick,
by a Redis key) the reconciler asks GitHub instead: for each installation of the App (``GET
/app/installations``), each repository it may reach (``GET /installation/repositories``), each
open pull request (``GET .../pulls?state=open``), the ``llmgate`` check runs on its head
(external_id ``pr:<number>``). Every request goes through the installation's shared limiter
(`worker.github.ratelimit`), so the reconciler is paced like any job. It runs as a task of each
worker process (`start_reconciling`), not as an arq job: a cron job waits for a free job slot,
and when every slot runs a long gate (a burst, ``LLMGATE_MAX_JOBS=1``) the pass that would
re-queue the lost gates would wait behind them.

A head is *live* while arq has one of its gate jobs (``gate:owner/name#N@<head>``, with any
suffix) running or queued, or while a check run on it is registered to a job that is; a live
head is left to its job. For a head that is not:

- a check run not completed (its job was lost: a worker killed after Redis lost its data) is
  queued again once: its newest such check run is registered (`worker.gate.registry`) to a new
  gate job (``gate:...@<head>:requeued:<check run id>``), which reports to that check run as a
  retry would, and the re-queue is remembered in Redis (`REQUEUED_KEY`, by check run id). When
  it is found orphaned again (the re-queued run was lost too), or for any older check run of
  the head, it is concluded ``timed_out`` with the reason and a Re-run button. A second wipe
  forgets the memory: each loss of Redis's data gets its one re-queue;
- a head without any ``llmgate`` check run (its delivery's job was lost, or never queued) gets a
  gate job queued, as the delivery's would have been (the pull request's newest-head record is
  restored too, when Redis lost it);
- a head whose newest ``llmgate`` check run is completed but was gated against another base
  than the one the pull request has now (`worker.gate.regate.gated_base`; a retarget whose
  delivery was lost, or whose run saw a lagging GitHub: issue 30) gets a gate job queued
  against the current base. A check run whose base is unknown (made by an older llmgate, or
  lost with Redis's data) is left as it is.

Each decision is confirmed after `confirm_s` (a third of the job lease, plus a second): a live
job whose lease key went with the data takes it back within that time (`worker.runtime.lease`), so a
running job's check run is never concluded under it. Then GitHub is asked again for that head
(Redis first, GitHub second): a job that finished during the wait has concluded its check run,
which is never overwritten with ``timed_out``, and one that started has opened its own, so no
second gate is queued. A listing or a write GitHub refuses (a 5xx included) skips its item, not
the pass; the next pass looks at it again. Each worker checks Redis's epoch as it starts and
before each pass (`worker.runtime.epoch.EpochWatch`): a Redis that lost its data is logged once
as a warning (by the pass, with what it reconciled), a first start on a Redis that never held
llmgate's data once at info level.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arq.connections import ArqRedis
from arq.constants import default_queue_name, in_progress_key_prefix
from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.contract import (
    CHECK_NAME,
    JOB_GATE_PULL_REQUEST,
    PR_HEAD_TTL_S,
    GatePayload,
    RepoRef,
    gate_job_id,
    pr_head_key,
    pr_head_value,
)
from worker.gate import regate
from worker.gate.accept import RERUN_BUTTON
from worker.gate.check_run import conclusion_body
from worker.gate.registry import RUN_TTL_S, RunRegistry, job_state, new_entry, run_id
from worker.github import CheckRunInfo, GitHubClient, GitHubError, OpenPull
from worker.runtime import (
    CTX_KEY,
    FIRST,
    LOST,
    EpochWatch,
    JobLimits,
    SettingsError,
    note_write_refused,
    outage_s,
)

log = logging.getLogger(__name__)

#: The setting and its default, seconds between passes (divides 60, or whole minutes
#: dividing an hour, so passes fall on the same seconds of every worker's clock).
RECONCILE_ENV = "LLMGATE_RECONCILE_S"
DEFAULT_RECONCILE_S = 300
#: Time limit of one pass, seconds (GitHub reads per open pull request, one confirmation wait).
RECONCILE_TIMEOUT_S = 600
#: The prefix of each tick's claim.
TICK_KEY = "llmgate:reconcile:tick:"
_TASK = "reconciler_task"
#: The ``ctx`` key of this process's `EpochWatch`.
_WATCH = "epoch_watch"
#: Redis key prefix remembering that an orphaned check run was queued again (``<prefix><check
#: run id>`` -> the job id), for as long as a run registry entry lives.
REQUEUED_KEY = "llmgate:reconcile:requeued:"
#: Installation id -> a client acting as it (`worker.gate.services.Services.github`).
ClientFor = Callable[[int], GitHubClient]
ORPHAN_REASON = ("No llmgate job owns this check run any more: its job was lost (llmgate's "
                 "Redis lost its data, or the worker running it stopped and the job was not "
                 "queued again), so it was concluded by the reconciler.")
REQUEUE_FAILED_REASON = ("No llmgate job owns this check run any more: its job was lost (llmgate's "
                         "Redis lost its data and the worker running it stopped), the reconciler "
                         "queued it again once, and that run did not finish either, so it was "
                         "concluded by the reconciler.")


def reconcile_interval_s(environ: Mapping[str, str]) -> int:
    """Read ``LLMGATE_RECONCILE_S`` (unset or empty: `DEFAULT_RECONCILE_S`).

    Raises:
        SettingsError: not a whole number of seconds that divides 60 (e.g. 5, 15, 30) or whole
            minutes dividing an hour (60, 300, 600), one line naming the variable.
    """
    raw = environ.get(RECONCILE_ENV, "").strip()
    if not raw:
        return DEFAULT_RECONCILE_S
    value = int(raw) if raw.isascii() and raw.isdigit() else 0
    if value < 1 or not (60 % value == 0 if value < 60 else
                         value % 60 == 0 and 3600 % value == 0):
        raise SettingsError(f"{RECONCILE_ENV} must divide 60 (e.g. 5, 15, 30) or be whole "
                            f"minutes dividing an hour (60, 300, 600), got {raw[:20]!r}")
    return value


def start_reconciling(ctx: dict[str, Any], environ: Mapping[str, str] | None = None) -> None:
    """Start this worker's reconciler task (module docstring); ``ctx`` is arq's worker context
    after start-up (its ``redis`` and ``services``). Nothing starts without them.

    Raises:
        SettingsError: a malformed ``LLMGATE_RECONCILE_S`` (`reconcile_interval_s`).
    """
    interval_s = reconcile_interval_s(os.environ if environ is None else environ)
    if ctx.get("redis") is not None and ctx.get("services") is not None:
        ctx[_WATCH] = _watch_of(ctx)
        ctx[_TASK] = asyncio.create_task(_reconcile_forever(ctx, interval_s))


def _watch_of(ctx: dict[str, Any]) -> EpochWatch:
    """This process's `EpochWatch` (made on first use; its file in ``LLMGATE_WORKDIR``)."""
    watch = ctx.get(_WATCH)
    if isinstance(watch, EpochWatch):
        return watch
    workdir = getattr(getattr(ctx.get("services"), "config", None), "workdir", None)
    ctx[_WATCH] = watch = EpochWatch(workdir if isinstance(workdir, Path) else None)
    return watch


async def stop_reconciling(ctx: dict[str, Any]) -> None:
    """Stop the task `start_reconciling` started (a pass under way is cancelled)."""
    task: asyncio.Task[None] | None = ctx.pop(_TASK, None)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _reconcile_forever(ctx: dict[str, Any], interval_s: int) -> None:
    """Check the epoch once (`_check_at_start`); then on every multiple of ``interval_s`` of
    the clock, note the epoch (so that every worker knows one was there) and run a pass unless
    another worker took that tick (``SET NX`` of `TICK_KEY`); never let an error end the loop."""
    await _check_at_start(ctx)
    while True:
        await asyncio.sleep(interval_s - time.time() % interval_s)
        tick = int(time.time() // interval_s)
        try:
            await _watch_of(ctx).observe(ctx["redis"])
            if await ctx["redis"].set(f"{TICK_KEY}{tick}", b"1", nx=True, ex=2 * interval_s):
                async with asyncio.timeout(RECONCILE_TIMEOUT_S):
                    await reconcile_runs(ctx)
        except (RedisError, OSError, TimeoutError) as err:
            # A full Redis is told once per episode (`note_write_refused`), an outage by the
            # pool: a missed tick then says nothing new.
            told = note_write_refused(err) or outage_s() is not None
            log.log(logging.DEBUG if told else logging.WARNING,
                    "reconciler: no pass at this tick (%s)", type(err).__name__)
        except Exception:  # the loop outlives any one pass
            log.exception("reconciler: the pass failed")


async def _check_at_start(ctx: dict[str, Any]) -> None:
    """Make the epoch at the worker's start when there is none (so that a wipe before the first
    pass is known as one) and say what that means: a first start (info) or a Redis that lost
    its data while no worker ran (warning). A Redis error leaves it to the first pass."""
    try:
        epoch = await _watch_of(ctx).check(ctx["services"].redis)
    except (RedisError, OSError) as err:
        log.warning("reconciler: could not read the Redis epoch at start-up (%s); the first "
                    "pass does", type(err).__name__)
        return
    if epoch == FIRST:
        log.info("reconciler: first start on this Redis (no llmgate data in it before)")
    elif epoch == LOST:
        log.warning("reconciler: llmgate's Redis lost its data while no worker ran (restarted "
                    "without persistence, flushed or replaced); the next pass queues again what "
                    "GitHub shows missing")


@dataclass(frozen=True)
class Head:
    """One open pull request's head as GitHub shows it, and its ``llmgate`` check runs."""

    installation_id: int
    repo: RepoRef
    open_pull: OpenPull
    runs: tuple[CheckRunInfo, ...]
    #: The newest check run, when it is completed and was gated against another base than the
    #: pull request's current one (0: none, or its base is unknown).
    stale_run_id: int = 0

    @property
    def job_prefix(self) -> str:
        """What every gate job id of this head starts with (`worker.contract.gate_job_id`)."""
        return gate_job_id(self.repo, self.open_pull.number, self.open_pull.pull.head_sha)


@dataclass
class Counts:
    """What one pass found and did."""

    heads: int = 0
    live: int = 0
    concluded: int = 0
    queued: int = 0  # gates queued: a head without a check run, on a stale base, or orphaned
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        """The counts (errors counted), the cron job's result."""
        return {"heads": self.heads, "live": self.live, "concluded": self.concluded,
                "queued": self.queued, "errors": len(self.errors)}


async def _jobs_alive(redis: Redis) -> tuple[set[str], set[int]]:
    """Return arq's running and queued job ids, and the check run ids registered to them."""
    live = {m.decode() if isinstance(m, bytes) else str(m)
            for m in await redis.zrange(default_queue_name, 0, -1)}
    async for key in redis.scan_iter(match=f"{in_progress_key_prefix}*", count=500):
        text = key.decode() if isinstance(key, bytes) else str(key)
        live.add(text.removeprefix(in_progress_key_prefix))
    registry, owned = RunRegistry(redis), set()
    for rid in await registry.run_ids():
        entry = await registry.get_run(rid)
        if entry is not None and await job_state(redis, entry.job_id) != "gone":
            owned.add(entry.check_run_id)
    return live, owned


def _is_live(head: Head, jobs: set[str], owned: set[int]) -> bool:
    prefix = head.job_prefix
    return any(j == prefix or j.startswith(prefix + ":") for j in jobs) or any(
        r.id in owned for r in head.runs)


async def _runs_of(gh: GitHubClient, repo: RepoRef, open_pull: OpenPull,
                  ) -> tuple[CheckRunInfo, ...]:
    """The ``llmgate`` check runs of this pull request on its head (GitHub's listing)."""
    ours = f"pr:{open_pull.number}"
    return tuple([r async for r in gh.list_check_runs(
        repo["owner"], repo["name"], open_pull.pull.head_sha, CHECK_NAME)
        if r.external_id in (ours, "")])


async def open_heads(github: GitHubClient, client_for: ClientFor,
                     counts: Counts | None = None) -> list[Head]:
    """List every open pull request head of every installation, with its llmgate check runs.

    ``github`` asks App-level questions; ``client_for(installation_id)`` returns the client
    of an installation (`worker.gate.services.Services.github`). A listing GitHub refuses
    below the installations (an installation's repositories, a repository's pull requests, a
    head's check runs; transient 5xx included) is skipped and noted in ``counts.errors``: the
    rest of the pass goes on, and the next pass lists it again.

    Raises:
        GitHubError: GitHub refused the list of installations.
    """
    errors = [] if counts is None else counts.errors
    heads = []
    for installation_id in await github.list_installation_ids():
        gh = client_for(installation_id)
        try:
            repos = await gh.list_repositories()
        except GitHubError as err:
            errors.append(f"installation {installation_id}: {err}")
            continue
        for owner, name, clone_url in repos:
            repo = RepoRef(owner=owner, name=name, clone_url=clone_url)
            try:
                pulls = await gh.list_open_pulls(owner, name)
            except GitHubError as err:
                errors.append(f"{owner}/{name}: {err}")
                continue
            for open_pull in pulls:
                try:
                    runs = await _runs_of(gh, repo, open_pull)
                except GitHubError as err:
                    errors.append(f"{owner}/{name}#{open_pull.number}: {err}")
                    continue
                heads.append(Head(installation_id, repo, open_pull, runs))
    return heads


def gate_payload(head: Head) -> GatePayload:
    """The payload of the gate job a head without any check run gets (as its delivery's)."""
    pull = head.open_pull.pull
    return GatePayload(
        delivery_id=f"reconcile:{int(time.time())}", installation_id=head.installation_id,
        repo=head.repo, pr_number=head.open_pull.number, head_sha=pull.head_sha,
        base_sha=pull.base_sha, base_ref=pull.base_ref, head_repo=pull.head_repo_full_name,
        author=pull.author_login, draft=head.open_pull.draft)


async def _conclude_orphans(gh: GitHubClient, head: Head, counts: Counts,
                            reason: str = ORPHAN_REASON) -> None:
    """Conclude ``head.runs`` (the check runs found orphaned and still in progress)."""
    body = {**conclusion_body("timed_out", reason), "actions": [dict(RERUN_BUTTON)]}
    for run in head.runs:
        try:
            await gh.update_check_run(head.repo["owner"], head.repo["name"], run.id, body)
        except GitHubError as err:
            counts.errors.append(f"check run {run.id}: {err}")
            continue
        counts.concluded += 1
        log.info("reconciler: concluded check run %s of %s/%s#%s timed_out (no job owns it)",
                 run.id, head.repo["owner"], head.repo["name"], head.open_pull.number)


async def _with_stale_base(redis: Redis, head: Head) -> Head:
    """Return ``head`` with `Head.stale_run_id` set when its newest check run is completed and
    was gated against another base than the pull request's current one.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    newest = max(head.runs, key=lambda r: r.id, default=None)
    if newest is None or newest.status != "completed":
        return head
    base = await regate.gated_base(redis, head.repo, head.open_pull.number, newest.id)
    if base is None or base == head.open_pull.pull.base_ref:
        return head
    return dataclasses.replace(head, stale_run_id=newest.id)


async def _queue_gate(arq: ArqRedis, head: Head, counts: Counts) -> None:
    payload = gate_payload(head)
    await arq.set(pr_head_key(head.repo, payload["pr_number"]),
                  pr_head_value(payload["head_sha"], payload["base_ref"]), nx=True,
                  ex=PR_HEAD_TTL_S)
    job = await arq.enqueue_job(JOB_GATE_PULL_REQUEST, payload, _job_id=head.job_prefix)
    if job is None:
        if await job_state(arq, head.job_prefix) != "gone":
            return  # a job of this head came since the confirmation: it is live
        # only a result of an earlier run (say, dropped as superseded) holds the id
        job = await arq.enqueue_job(JOB_GATE_PULL_REQUEST, payload,
                                    _job_id=f"{head.job_prefix}:reconciled:{time.time_ns()}")
    counts.queued += job is not None
    why = (f"its newest llmgate check run was gated against another base than "
           f"{payload['base_ref']}" if head.stale_run_id else "no llmgate check run on it")
    log.info("reconciler: queued a gate of %s/%s#%s @%s (%s)", head.repo["owner"],
             head.repo["name"], payload["pr_number"], payload["head_sha"][:7], why)


async def _requeue(arq: ArqRedis, head: Head, run: CheckRunInfo, counts: Counts) -> bool:
    """Queue a gate of ``head`` that reports to its orphaned check run ``run``, unless ``run``
    was queued again once already; return whether it was queued now.

    The check run is registered to the new job first (`worker.gate.check_run.open_run` then
    takes it as a retry would, so the head keeps one check run), and the re-queue is
    remembered (`REQUEUED_KEY`) before either, so two passes never both queue it.

    Raises:
        redis.exceptions.RedisError: Redis failed (the memory of the re-queue is dropped
            again, best effort, so the next pass may queue it).
    """
    job_id = f"{head.job_prefix}:requeued:{run.id}"
    key = f"{REQUEUED_KEY}{run.id}"
    if not await arq.set(key, job_id, nx=True, ex=RUN_TTL_S):
        return False
    payload = gate_payload(head)
    try:
        await RunRegistry(arq).put(new_entry(
            job_id, run.id, head.installation_id, head.repo["owner"], head.repo["name"],
            payload["pr_number"], payload["head_sha"], 1))
        await arq.set(pr_head_key(head.repo, payload["pr_number"]),
                      pr_head_value(payload["head_sha"], payload["base_ref"]), nx=True,
                      ex=PR_HEAD_TTL_S)
        await arq.enqueue_job(JOB_GATE_PULL_REQUEST, payload, _job_id=job_id)
    except RedisError:
        with contextlib.suppress(RedisError):
            await arq.delete(key)
        raise
    counts.queued += 1
    log.info("reconciler: queued the gate of check run %s of %s/%s#%s @%s again (its job was "
             "lost); it is concluded timed_out if this run is lost too", run.id,
             head.repo["owner"], head.repo["name"], payload["pr_number"],
             payload["head_sha"][:7])
    return True


async def _settle_orphans(arq: ArqRedis, gh: GitHubClient, head: Head, counts: Counts) -> None:
    """Queue the newest of ``head.runs`` (orphaned, in progress) again once (`_requeue`);
    conclude the others, and it when it was queued again once already and that job is gone,
    ``timed_out``."""
    newest = max(head.runs, key=lambda r: r.id)
    rest = tuple(r for r in head.runs if r.id != newest.id)
    if not await _requeue(arq, head, newest, counts):
        raw = await arq.get(f"{REQUEUED_KEY}{newest.id}")
        job_id = raw.decode() if isinstance(raw, bytes) else str(raw or "")
        if not job_id or await job_state(arq, job_id) == "gone":  # else: queued meanwhile
            if job_id:  # its registry entry: this conclusion replaces the sweeper's
                await RunRegistry(arq).remove(run_id(job_id, head.open_pull.number))
            await _conclude_orphans(gh, dataclasses.replace(head, runs=(newest,)), counts,
                                    REQUEUE_FAILED_REASON)
    if rest:
        await _conclude_orphans(gh, dataclasses.replace(head, runs=rest), counts)


def _in_progress(head: Head) -> frozenset[int]:
    return frozenset(r.id for r in head.runs if r.status != "completed")


async def _confirmed(head: Head, gh: GitHubClient, counts: Counts) -> Head | None:
    """Look at ``head`` on GitHub again, after the confirmation wait found no live job of it:
    return it with what still needs the reconciler (no check run at all, or those of its check
    runs that were in progress at the first look and still are; none either when its newest
    check run is still the one on a stale base: a gate is queued), or None.

    A job that finished in between has concluded its check run (never overwritten with
    ``timed_out``); one that started in between has opened a new one (the head is left to it).
    A listing GitHub refuses is noted in ``counts.errors`` (the next pass looks again).
    """
    try:
        runs = await _runs_of(gh, head.repo, head.open_pull)
    except GitHubError as err:
        counts.errors.append(f"{head.repo['owner']}/{head.repo['name']}#"
                             f"{head.open_pull.number}: {err}")
        return None
    if head.stale_run_id:
        newest = max(runs, key=lambda r: r.id, default=None)
        same = newest is not None and newest.id == head.stale_run_id
        return dataclasses.replace(head, runs=()) if same else None
    if not head.runs:
        return None if runs else head
    still = _in_progress(head)
    orphans = tuple(r for r in runs if r.id in still and r.status != "completed")
    return dataclasses.replace(head, runs=orphans) if orphans else None


async def reconcile(arq: ArqRedis, github: GitHubClient, client_for: ClientFor,
                    confirm_s: float) -> Counts:
    """Run one pass (module docstring): queue orphaned check runs' gates again once (then
    conclude them), queue missing gates and gates of pull requests whose newest check run is
    about a base they left.

    A head found without a live job is looked at again after ``confirm_s``: Redis first (a
    job may have taken its lease back), then GitHub (`_confirmed`: a job may have finished or
    started meanwhile). One refused GitHub request skips its item, never the pass.

    Args:
        arq: the worker's arq Redis (the queue).
        github: a client for App-level requests; ``client_for``: installation id -> client.
        confirm_s: seconds between finding a head not live and acting on it, so that a job
            whose lease key Redis lost has taken it back (`worker.runtime.lease.hold_lease`).

    Raises:
        redis.exceptions.RedisError: Redis failed (the next pass starts over).
        GitHubError: GitHub refused the list of installations; any other refusal (transient
            ones included) is counted in ``errors`` and the pass goes on.
    """
    counts = Counts()
    heads = [await _with_stale_base(arq, h) for h in await open_heads(github, client_for, counts)]
    counts.heads = len(heads)
    jobs, owned = await _jobs_alive(arq)
    todo = [h for h in heads if not _is_live(h, jobs, owned) and (
        not h.runs or _in_progress(h) or h.stale_run_id)]
    if todo:
        await asyncio.sleep(confirm_s)
        jobs, owned = await _jobs_alive(arq)
    counts.live = sum(_is_live(h, jobs, owned) for h in heads)
    for head in todo:
        if _is_live(head, jobs, owned):
            continue
        confirmed = await _confirmed(head, client_for(head.installation_id), counts)
        if confirmed is None:
            continue
        if confirmed.runs:
            await _settle_orphans(arq, client_for(head.installation_id), confirmed, counts)
        else:
            await _queue_gate(arq, confirmed, counts)
    return counts


async def reconcile_runs(ctx: dict[str, Any]) -> dict[str, int]:
    """One pass: `reconcile` with the worker's services (arq's worker ``ctx``); logs a wiped
    Redis once as a warning, and a first pass on a Redis that never held llmgate's data at info
    level. Redis and GitHub errors end the pass with a warning."""
    services, arq = ctx["services"], ctx["redis"]
    limits = ctx.get(CTX_KEY)
    lease_s = (limits if isinstance(limits, JobLimits) else JobLimits()).lease_s
    epoch = ""
    try:
        epoch = await _watch_of(ctx).check(services.redis)
        counts = await reconcile(arq, services.github(0), services.github, lease_s / 3 + 1)
    except (RedisError, GitHubError) as err:  # GitHub: transient ones too
        log.warning("reconciler: the pass stopped (%s: %s)%s; the next one starts over",
                    type(err).__name__, err,
                    "; llmgate's Redis lost its data since it was last seen" if epoch == LOST
                    else "")
        return {"heads": 0, "live": 0, "concluded": 0, "queued": 0, "errors": 1}
    if epoch == LOST:
        log.warning("reconciler: llmgate's Redis lost its data since it was last seen; "
                    "reconciled %s", counts.as_dict())
    elif epoch == FIRST:
        log.info("reconciler: first pass on this Redis (no llmgate data in it before); "
                 "reconciled %s", counts.as_dict())
    for error in counts.errors:
        log.warning("reconciler: %s", error)
    return counts.as_dict()
