"""One gate over many workers: a suite's examples answered in shards by any worker.

A gate's job hands its run a `GateSide.shards` (`RedisShards`). When a suite's draw has more
than ``LLMGATE_SHARD_EXAMPLES`` examples still to answer, they are cut into contiguous slices of
that size (dataset order). Each slice's work (target, settings, examples, commit, config folder,
and the eval data paths its commands may not read: worker/evals/run/views.py) is written to
Redis under the gate's key and an ``answer_shard`` job (`answer_shard`, worker/jobs/shard.py)
is enqueued for it; any worker takes it, checks the commit out, answers
the examples and writes the outputs once (``SET NX`` on the shard's result key: a shard answered
twice, by a worker that was thought dead and one that took over, counts once). The gate's job
polls the result keys, merges the outputs in example order and goes on scoring, comparing and
concluding the check run itself: shard jobs never write to GitHub.

Leases: a shard job is an arq job under the worker's job lease (worker/runtime/lease.py), so a
shard whose worker died (SIGKILL) is started again by another worker within
``LLMGATE_JOB_LEASE_S`` plus one poll, counted as its next try (tests/e2e/test_shard_e2e.py
kills one: 2.5-3.3 s to the redo with a lease of 3 s). Every try appends who took it to
``<shard>:taken`` (`record_taken`), for operators and the tests. A gate's job that dies itself
is tried again with a new `RedisShards`, so a new ``gate_id``: its shards are enqueued and read
under new keys, and what the old try's shards wrote is never merged (it expires with
`SHARD_TTL_S`). Fail closed: a shard arq gave up, a result
that is garbled or does not name the shard's examples, or an error a shard reports fails the
run with `ExecutionError` (its text reaches the check run); a shard still missing at the job's
time limit ends the gate ``timed_out`` (worker/gate/run.py). Nothing missing ever counts as an
answer.

No deadlock: the gate's job holds a job slot while it waits. When no slot is free anywhere (one
worker with ``LLMGATE_MAX_JOBS=1``, or every slot held by gates waiting for their shards), a
shard still queued after ``LLMGATE_SHARD_WAIT_S`` is taken back from arq's queue (``ZREM``;
when it returns 0 a worker claimed it first, and the gate waits on) and answered by the gate's
job itself, one at a time: never slower than not sharding, plus that wait once. Chosen over
sharding only with ``LLMGATE_MAX_JOBS >= 2`` because a busy fleet of such workers deadlocks
the same way. A worker claiming the shard in the same instant only repeats the work: the
result is still written once.

Fairness: arq's queue is first in, first out. A gate keeps at most
``LLMGATE_SHARD_OUTSTANDING`` of its shards queued or running at once and enqueues the next as
one ends, so a small pull request's gate waits behind a few shards of a huge one, not all.

Budget: each shard gets the share of ``max_cost_usd`` of its examples (so the shards together
never spend more than the run may); the run's estimate was checked before any shard started.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from arq.connections import ArqRedis
from arq.jobs import Job, JobStatus
from redis.asyncio import Redis

from worker.contract import JOB_ANSWER_SHARD, RepoRef, ShardPayload
from worker.errors import ConfigError, ExecutionError
from worker.evals.context import CacheContext, EvalContext, Observers, ShardWork
from worker.evals.llm_types import CacheMode
from worker.evals.run import TargetViews, runner
from worker.evals.serialize import SerializeError, from_jsonable, json_object, to_jsonable
from worker.evals.types import CommandTarget, Example, ModelTarget, Settings, TargetOutput
from worker.gate.services import Services
from worker.runtime import ShardSettings, current_job, record_call

log = logging.getLogger("llmgate.worker")

#: How long a gate's shard keys live in Redis (seconds): past any job time limit.
SHARD_TTL_S = 6 * 3600
#: How often the gate's job looks for its shards' results (seconds).
POLL_S = 0.1


def slices(count: int, size: int) -> list[range]:
    """Return the contiguous index ranges of ``count`` examples in shards of ``size``."""
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def shard_key(gate_id: str, number: int) -> str:
    """Return the Redis key prefix of one shard of a gate (``:work``, ``:result`` follow)."""
    return f"llmgate:shard:{gate_id}:{number}"


@dataclass
class RedisShards:
    """`worker.evals.context.AnswerShards` over arq and Redis for one gate run.

    Attributes:
        redis: the queue's Redis.
        settings: shard size and outstanding shards per gate.
        repo, installation_id: the repository the shards check out, and its installation.
        tops: each checkout's top directory -> its commit SHA (head's, base's).
        cache_mode: the response cache mode of the run (``use``, ``off``).
        gate_id: the key of this gate run's shards (unique per run, and per try of its job).
        services: the gate job's clients, to answer a shard no worker takes (None: never).
    """

    redis: Redis
    settings: ShardSettings
    repo: RepoRef
    installation_id: int
    tops: Mapping[Path, str]
    cache_mode: CacheMode = "use"
    gate_id: str = ""
    services: Services | None = None
    _next: int = 0
    _outstanding: int = 0  # this gate's shards queued or running, over all its suites and sides

    def __post_init__(self) -> None:
        self.gate_id = self.gate_id or uuid.uuid4().hex

    async def answer(self, work: ShardWork) -> list[TargetOutput] | None:
        """Answer ``work`` in shards (module docstring); None when it is small enough or its
        checkout is not one of `tops` (then the gate's job answers it).

        Raises:
            ExecutionError: a shard failed, was given up, or its result is garbled.
        """
        if self.settings.examples < 1:  # sharding is off (LLMGATE_SHARD_EXAMPLES=0)
            return None
        parts = slices(len(work.examples), self.settings.examples)
        found = next(((top, sha) for top, sha in self.tops.items()
                      if work.root.is_relative_to(top) and sha == work.sha), None)
        if len(parts) < 2 or found is None:
            return None
        folder = work.root.relative_to(found[0]).as_posix()
        keys = []
        for part in parts:
            keys.append(shard_key(self.gate_id, self._next))
            self._next += 1
            await self.redis.set(keys[-1] + ":work", json.dumps(
                _work_json(work, part, len(work.examples), folder, self)), ex=SHARD_TTL_S)
        outputs = await self._run(keys, [[work.examples[i].id for i in p] for p in parts])
        return [output for part in outputs for output in part]

    async def _run(self, keys: Sequence[str], ids: Sequence[list[str]]
                   ) -> list[list[TargetOutput]]:
        """Enqueue the shards while the gate has fewer than `ShardSettings.outstanding` queued
        or running (counted over every `answer` of the gate: base's and head's run at once);
        wait for all.

        Raises:
            ExecutionError: as `answer`. Any error of a shard this job answers itself.
        """
        done: dict[int, list[TargetOutput]] = {}
        running: dict[int, _Outstanding] = {}
        queue = ArqRedis(connection_pool=self.redis.connection_pool)
        waiting = list(range(len(keys)))
        try:
            while len(done) < len(keys):
                while waiting and self._outstanding < self.settings.outstanding:
                    number = waiting.pop(0)
                    # Counted before the await: the other side's loop runs during it and must
                    # see this shard (counting after let both sides pass the cap, CI stop 38).
                    self._outstanding += 1
                    try:
                        running[number] = await self._enqueue(queue, keys[number], ids[number])
                    except BaseException:
                        self._outstanding -= 1
                        raise
                for number, shard in list(running.items()):
                    outputs = await self._poll(shard, running.values())
                    if outputs is not None:
                        done[number] = outputs
                        del running[number]
                        self._outstanding -= 1
                if len(done) < len(keys):
                    await asyncio.sleep(POLL_S)
        finally:  # an error: answers of our own are not needed (their worktrees go)
            self._outstanding -= len(running)
            ours = [shard.here for shard in running.values() if shard.here is not None]
            for task in ours:
                task.cancel()
            await asyncio.gather(*ours, return_exceptions=True)
        return [done[n] for n in range(len(keys))]

    async def _enqueue(self, queue: ArqRedis, key: str, ids: list[str]) -> _Outstanding:
        """Enqueue shard ``key``'s job (once: its id is the key's) and start watching it."""
        payload = ShardPayload(shard_key=key, installation_id=self.installation_id)
        job = await queue.enqueue_job(JOB_ANSWER_SHARD, payload, _job_id=f"{key}:job")
        return _Outstanding(key, ids, payload, job or Job(f"{key}:job", queue),
                            queue.default_queue_name)

    async def _poll(self, shard: _Outstanding, others: Iterable[_Outstanding]
                    ) -> list[TargetOutput] | None:
        """Return a shard's outputs once written; None while it is queued or running.

        A shard left in the queue `ShardSettings.wait_s` seconds that this job can take back
        from the queue (``ZREM``: no worker claimed it) is answered here, one at a time
        (module docstring, "No deadlock").

        Raises:
            ExecutionError: as `_collect`; or this job's own answer of it wrote no result.
        """
        if shard.here is not None:
            if not shard.here.done():
                return None
            shard.here.result()  # re-raises what answering it here raised (transient)
            raw = await self.redis.get(shard.key + ":result")
            if raw is None:
                raise ExecutionError(f"shard {shard.key.rsplit(':', 1)[-1]} was not answered")
            return parse_result(raw, shard.ids, shard.key)
        outputs, status = await _collect(self.redis, shard.key, shard.ids, shard.job)
        if outputs is not None or self.services is None:
            return outputs
        now = time.monotonic()
        if status not in (JobStatus.queued, JobStatus.deferred):
            shard.queued_since = None  # a worker has it (again)
        elif shard.queued_since is None:
            shard.queued_since = now
        elif now - shard.queued_since >= self.settings.wait_s and \
                not any(o.here is not None and not o.here.done() for o in others) and \
                await self.redis.zrem(shard.queue_name, shard.job.job_id):
            log.info("shard %s: no worker took it in %d s; the gate's job answers it",
                     shard.key, self.settings.wait_s)
            shard.here = asyncio.create_task(answer_shard(self.services, shard.payload,
                                                          by="gate"))
        return None


@dataclass
class _Outstanding:
    """One shard a gate has enqueued and waits for.

    Attributes:
        key, ids: the shard's key prefix and its examples' ids, in order.
        payload, job: its job's payload and arq job.
        queue_name: arq's queue it waits in (a sorted set of job ids).
        queued_since: ``time.monotonic()`` since when it has been seen queued, untaken.
        here: this gate's own answer of it, once it took it back from the queue.
    """

    key: str
    ids: list[str]
    payload: ShardPayload
    job: Job
    queue_name: str
    queued_since: float | None = None
    here: asyncio.Task[dict[str, str]] | None = None


def _work_json(work: ShardWork, part: range, total: int, folder: str,
               shards: RedisShards) -> dict[str, Any]:
    """Return one shard's work as JSON (module docstring: the share of ``max_cost_usd``)."""
    limit = work.settings.max_cost_usd
    settings = work.settings if limit is None else replace(
        work.settings, max_cost_usd=limit * len(part) / total)
    return {"target": to_jsonable(work.target),
            "target_kind": "command" if isinstance(work.target, CommandTarget) else "model",
            "examples": [to_jsonable(work.examples[i]) for i in part],
            "settings": to_jsonable(settings), "sha": work.sha, "folder": folder,
            "use_cache": work.use_cache, "foreign": work.foreign, "hidden": list(work.hidden),
            "repo": dict(shards.repo), "cache_mode": shards.cache_mode}


async def _collect(redis: Redis, key: str, ids: list[str], job: Job
                   ) -> tuple[list[TargetOutput] | None, JobStatus | None]:
    """Return a shard's outputs once written (else None) and its job's status (None when the
    result was there).

    Raises:
        ExecutionError: the shard reported an error, arq gave it up without a result, or its
            result is garbled or names other examples (fail closed: never a pass).
    """
    raw = await redis.get(key + ":result")
    if raw is not None:
        return parse_result(raw, ids, key), None
    status = await job.status()
    if status not in (JobStatus.complete, JobStatus.not_found):
        return None, status
    raw = await redis.get(key + ":result")  # written just before the job ended?
    if raw is None:
        info = await job.result_info()
        why = "its job is gone" if info is None else f"its job failed: {info.result!r}"
        raise ExecutionError(f"shard {key.rsplit(':', 1)[-1]} was not answered: {why}")
    return parse_result(raw, ids, key), status


async def record_taken(redis: Redis, key: str, by: str = "shard") -> None:
    """Append who takes this try of a shard to ``<key>:taken`` (ops, and the kill tests).

    Each entry is JSON ``{"worker": "<host>:<pid>", "by": "shard" (its own job) or "gate"
    (the gate's job answered it), "job": the arq job id, "try": that job's try (1-based),
    "at": Unix seconds}``, oldest first; the list lives as long as the shard's other keys.
    """
    job = current_job()
    entry = {"worker": f"{socket.gethostname()}:{os.getpid()}", "by": by,
             "job": job.job_id if job else "", "try": job.attempt if job else 1,
             "at": time.time()}
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(key + ":taken", json.dumps(entry))
        pipe.expire(key + ":taken", SHARD_TTL_S)
        await pipe.execute()


def parse_result(raw: str | bytes, ids: list[str], key: str = "") -> list[TargetOutput]:
    """Return the outputs of a stored shard result for the examples ``ids``, in order.

    Raises:
        ExecutionError: the result is an error the shard reported, unreadable, or does not
            hold exactly one output per example of ``ids`` in order.
    """
    data = json_object(raw)
    where = f"shard {key.rsplit(':', 1)[-1]}" if key else "a shard"
    if data is not None and isinstance(data.get("error"), str):
        raise ExecutionError(f"{where} failed: {data['error']}")
    if data is None or data.get("ids") != ids or not isinstance(data.get("outputs"), list):
        raise ExecutionError(f"{where} has a garbled result (not counted)")
    try:
        outputs = [from_jsonable(TargetOutput, o) for o in data["outputs"]]
    except SerializeError as err:
        raise ExecutionError(f"{where} has a garbled result (not counted): {err}") from None
    if len(outputs) != len(ids):
        raise ExecutionError(f"{where} has {len(outputs)} outputs for {len(ids)} examples")
    return outputs


async def answer_shard(services: Services, payload: ShardPayload, by: str = "shard"
                       ) -> dict[str, str]:
    """Answer one shard's examples and write its result once (module docstring).

    ``by`` is who answers it, for `record_taken`: ``shard`` (its own job) or ``gate``.

    Returns:
        ``{"status": ...}``: ``answered``, ``duplicate`` (another try wrote it first),
        ``done`` (already written), ``gone`` (its gate's keys expired) or ``failed``.

    Raises:
        GitHubError, redis.exceptions.RedisError, GitError: transient (arq tries again).
    """
    key = payload["shard_key"]
    work = json_object(await services.redis.get(key + ":work"))
    if work is None:
        return {"status": "gone"}
    if await services.redis.exists(key + ":result"):
        return {"status": "done"}
    await record_taken(services.redis, key, by)
    try:
        result: dict[str, Any] = await _answer_work(services, payload["installation_id"], work)
    except (ConfigError, ExecutionError, SerializeError, KeyError, TypeError) as err:
        result = {"error": services.redactor.redact(str(err))}
    written = await services.redis.set(key + ":result", json.dumps(result), nx=True,
                                       ex=SHARD_TTL_S)
    status = "failed" if "error" in result else "answered" if written else "duplicate"
    log.info("shard %s: %s", key, status)
    return {"status": status}


async def _answer_work(services: Services, installation_id: int,
                       work: dict[str, Any]) -> dict[str, Any]:
    """Check the shard's commit out and answer its examples; return its result JSON."""
    kind: type[CommandTarget] | type[ModelTarget] = \
        CommandTarget if work["target_kind"] == "command" else ModelTarget
    target = from_jsonable(kind, work["target"])
    settings = from_jsonable(Settings, work["settings"])
    examples = tuple(from_jsonable(Example, e) for e in work["examples"])
    repo = work["repo"]
    key = f"{repo['owner']}/{repo['name']}"
    token = await services.github(installation_id).installation_token()
    services.redactor.add(token)
    async with services.checkouts.worktree(key, repo["clone_url"], work["sha"], token) as top:
        root = top / work["folder"] if work["folder"] not in ("", ".") else top
        state = runner.RunState(settings, EvalContext(
            cache=CacheContext(services.cache, key, work["cache_mode"]),
            observers=Observers(on_call=record_call)))
        state.budget.start()
        state.sha = work["sha"]
        state.views = TargetViews([str(p) for p in work.get("hidden", ())])
        try:
            outputs = await runner.answer_examples(target, examples, root, settings, state,
                                                   bool(work["use_cache"]),
                                                   foreign=bool(work["foreign"]))
        finally:
            state.views.close()  # the view of the gate's eval data, before the worktree
    return {"ids": [e.id for e in examples], "outputs": [to_jsonable(o) for o in outputs]}
