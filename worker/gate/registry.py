"""The run registry: which check run each running gate job owns, kept in Redis.

A gate run registers its check run as soon as it exists and removes the entry once the check
run is concluded. While the entry lives, the check run is ``in_progress`` and owned by its arq
job: a retry of that job (a killed worker, a transient failure) finds it and updates the same
check run instead of creating a second one, and the sweeper (`worker.gate.sweeper`) concludes it
``timed_out`` when arq gave the job up.

Layout: one hash ``llmgate:run:<job id>|<PR>`` per run (a job may gate several pull requests;
a config's own check run in ``per_config`` mode is ``<job id>|<PR>|<folder>``,
worker/pipeline/plan.py) and the sorted set ``llmgate:runs`` of run ids scored by their last update
(Unix seconds). Entries expire after `RUN_TTL_S`, so nothing stays behind forever.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Literal, cast

from arq.constants import default_queue_name, in_progress_key_prefix
from redis.asyncio import Redis

#: Redis key prefix of one run's hash, and the index of all runs.
RUN_KEY_PREFIX = "llmgate:run:"
RUNS_INDEX = "llmgate:runs"
#: How long an entry may live, seconds: longer than any job with all its tries.
RUN_TTL_S = 7 * 24 * 3600

#: Where arq has a job: running (its in-progress key or lease lives), waiting in the queue
#: (for a worker, or deferred for a retry), or neither (finished, given up, or expired).
JobState = Literal["in_progress", "queued", "gone"]


@dataclass(frozen=True)
class RunEntry:
    """One gate run that owns an ``in_progress`` check run.

    Attributes:
        job_id: the arq job running it.
        check_run_id: GitHub's id of the ``llmgate`` check run.
        installation_id: the App installation that can update it.
        owner, name: the repository.
        pr_number: the pull request gated (0: none, e.g. a merge group).
        head_sha: the 40-hex commit the check run is on.
        attempt: the job's try that last worked on it (1-based).
        started_at, updated_at: Unix seconds of the first try and of the last update.
        conclusion, summary: set when the job ended but GitHub refused the conclusion for a
            while (rate limited, down): what the sweeper concludes the check run with ("":
            nothing pending).
        config: the config folder whose own check run this is (``llmgate: <folder>``), ""
            for the ``llmgate`` check run.
    """

    job_id: str
    check_run_id: int
    installation_id: int
    owner: str
    name: str
    pr_number: int
    head_sha: str
    attempt: int
    started_at: float
    updated_at: float
    conclusion: str = ""
    summary: str = ""
    config: str = ""

    @property
    def run_id(self) -> str:
        """The registry id: ``<job id>|<PR number>`` (``|<config folder>`` for a config's)."""
        return run_id(self.job_id, self.pr_number, self.config)


def run_id(job_id: str, pr_number: int, config: str = "") -> str:
    """Return the registry id of ``job_id``'s run for pull request ``pr_number`` (and the check
    run of the config in folder ``config``, when given)."""
    return f"{job_id}|{pr_number}|{config}" if config else f"{job_id}|{pr_number}"


_INT_FIELDS = frozenset({"check_run_id", "installation_id", "pr_number", "attempt"})
_FLOAT_FIELDS = frozenset({"started_at", "updated_at"})


def _decode(raw: dict[bytes, bytes]) -> RunEntry | None:
    values: dict[str, str | int | float] = {}
    try:
        for item in fields(RunEntry):
            value = raw.get(item.name.encode())
            if value is None:
                if item.default is MISSING:
                    return None
                continue
            text = value.decode()
            values[item.name] = (int(text) if item.name in _INT_FIELDS
                                 else float(text) if item.name in _FLOAT_FIELDS else text)
    except (ValueError, UnicodeDecodeError):
        return None
    return RunEntry(**values)  # type: ignore[arg-type]


class RunRegistry:
    """Register, find and remove gate runs in Redis (see the module docstring for the layout).

    Every method may raise ``redis.exceptions.RedisError`` (the caller decides: a gate run
    treats it as transient and retries).
    """

    def __init__(self, redis: Redis, ttl_s: int = RUN_TTL_S) -> None:
        """Keep entries in ``redis`` for at most ``ttl_s`` seconds."""
        self._redis = redis
        self._ttl_s = ttl_s

    @property
    def redis(self) -> Redis:
        """The Redis the entries are kept in."""
        return self._redis

    async def get(self, job_id: str, pr_number: int, config: str = "") -> RunEntry | None:
        """Return the entry of ``job_id``'s run for ``pr_number`` (and ``config``), or None."""
        return await self.get_run(run_id(job_id, pr_number, config))

    async def get_run(self, rid: str) -> RunEntry | None:
        """Return the entry with registry id ``rid``, or None (unknown, expired or damaged)."""
        raw = await cast("Awaitable[dict[bytes, bytes]]",
                         self._redis.hgetall(RUN_KEY_PREFIX + rid))  # redis-py's union type
        return _decode(raw) if raw else None

    async def put(self, entry: RunEntry) -> None:
        """Write ``entry`` (replacing an older one of the same run) and index it."""
        key = RUN_KEY_PREFIX + entry.run_id
        mapping = {name: str(value) for name, value in asdict(entry).items()}
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            pipe.hset(key, mapping=mapping)
            pipe.expire(key, self._ttl_s)
            pipe.zadd(RUNS_INDEX, {entry.run_id: entry.updated_at})
            await pipe.execute()

    async def mark_pending(self, rid: str, conclusion: str, summary: str) -> None:
        """Leave the conclusion of run ``rid`` to the sweeper: its job ended, GitHub refused."""
        key = RUN_KEY_PREFIX + rid
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"conclusion": conclusion, "summary": summary})
            pipe.expire(key, self._ttl_s)
            await pipe.execute()

    async def remove(self, rid: str) -> None:
        """Forget the run with registry id ``rid`` (its check run is concluded)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(RUN_KEY_PREFIX + rid)
            pipe.zrem(RUNS_INDEX, rid)
            await pipe.execute()

    async def run_ids(self, updated_before: float | None = None) -> list[str]:
        """Return the registry ids, oldest update first; only those updated before the given
        Unix time when ``updated_before`` is set."""
        top: float | str = "+inf" if updated_before is None else updated_before
        members = await self._redis.zrangebyscore(RUNS_INDEX, "-inf", top)
        return [m.decode() if isinstance(m, bytes) else str(m) for m in members]


def new_entry(job_id: str, check_run_id: int, installation_id: int, owner: str, name: str,
              pr_number: int, head_sha: str, attempt: int, config: str = "") -> RunEntry:
    """Return the entry of a run whose check run was just created (both times: now)."""
    now = time.time()
    return RunEntry(job_id, check_run_id, installation_id, owner, name, pr_number, head_sha,
                    attempt, now, now, config=config)


async def job_state(redis: Redis, job_id: str) -> JobState:
    """Return where arq has ``job_id`` (see `JobState`), read atomically.

    arq moves a job between these states in transactions (queue entry and in-progress key are
    changed together), so one MULTI read never sees a job in between.
    """
    async with redis.pipeline(transaction=True) as pipe:
        pipe.exists(in_progress_key_prefix + job_id)
        pipe.zscore(default_queue_name, job_id)
        running, score = await pipe.execute()
    if running:
        return "in_progress"
    return "queued" if score is not None else "gone"
