"""Worker lifecycle: instrumented jobs, metrics publishing, heartbeat and graceful stop.

`observed` wraps an arq job function (``WorkerSettings.functions = instrument_all([...])``) so it
is timed, counted and its log lines carry its ids; `start_publishing` / `stop_publishing` run
from the worker's start-up and shutdown hooks; `shutdown_grace_s` is how long a stopping worker
lets its running jobs finish (arq's ``job_completion_wait``) before it cancels them, which makes
arq put them back in the queue for another worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arq.worker import Retry
from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.runtime.fence import LeaseLost, stand_down
from worker.runtime.lease import job_scope
from worker.runtime.logs import bind_job, unbind_job
from worker.runtime.metrics import FLUSH_INTERVAL_S, FLUSH_TIMEOUT_S, METRICS, record_job
from worker.runtime.redis_checks import (
    note_write_accepted,
    note_write_refused,
    outage_s,
    refused_writes,
)
from worker.runtime.settings import SettingsError

log = logging.getLogger(__name__)

#: An arq job: ``async def job(ctx, payload)``.
JobFunction = Callable[[dict[str, Any], Any], Awaitable[Any]]
_FLUSHER = "llmgate_metrics_flusher"
#: Default of ``LLMGATE_SHUTDOWN_GRACE_S``: 30 s less than the 300 s a platform is told to wait
#: (Fly's ``kill_timeout`` maximum on shared CPUs, the Kubernetes and compose settings in
#: ``deploy/``), leaving time to cancel, re-queue and exit.
DEFAULT_SHUTDOWN_GRACE_S = 270


def shutdown_grace_s(environ: Mapping[str, str] = os.environ) -> int:
    """Return ``LLMGATE_SHUTDOWN_GRACE_S``: seconds a stopping worker waits for its jobs.

    0 cancels running jobs at once (arq re-queues them). Unset or empty: 270.

    Raises:
        SettingsError: not a whole number of seconds.
    """
    raw = environ.get("LLMGATE_SHUTDOWN_GRACE_S", "").strip()
    if not raw:
        return DEFAULT_SHUTDOWN_GRACE_S
    if not (raw.isascii() and raw.isdigit()):
        raise SettingsError(f"LLMGATE_SHUTDOWN_GRACE_S must be a whole number of seconds, "
                            f"got {raw[:20]!r}")
    return int(raw)


def observed(fn: JobFunction) -> JobFunction:
    """Wrap a job so it is timed and counted, logs carry its ids and it holds a lease
    (`worker.runtime.lease.job_scope`); arq sees the same name.

    Outcomes: ``completed``; ``failed`` (it raised); ``retried`` (it raised arq's ``Retry``);
    ``cancelled`` (a stopping worker cancelled it, and arq re-queues it, or it hit the job
    timeout); ``lease_lost`` (another try took its lease: `worker.runtime.fence.LeaseLost`; the
    try returns ``{"status": "lease_lost", "reason"}`` and arq leaves the job's keys to that
    try, `worker.runtime.fence.fence_finished_jobs`). Metrics are flushed when the job starts
    and when it ends.
    """

    @functools.wraps(fn)
    async def job(ctx: dict[str, Any], payload: Any) -> Any:
        redis: Redis | None = ctx.get("redis")
        token = bind_job(ctx.get("job_id"), payload)
        started = time.monotonic()
        outcome = "failed"
        METRICS.running += 1
        try:
            await flush_quietly(redis)
            async with job_scope(ctx, payload):  # lease: a dead worker's job is taken over soon
                result = await fn(ctx, payload)
            outcome = "completed"
            return result
        except LeaseLost as lost:  # another try holds the job now: it publishes, not this one
            outcome = "lease_lost"
            stand_down(lost.job_id)
            log.warning("job %s: try %d stopped, its lease lost: %s; it sent nothing more to "
                        "GitHub and leaves the job to the try that holds the lease", lost.job_id,
                        lost.attempt, lost.reason)
            return {"status": "lease_lost", "reason": lost.reason}
        except Retry:
            outcome = "retried"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            METRICS.running -= 1
            record_job(fn.__name__, outcome, time.monotonic() - started)
            unbind_job(token)
            await flush_quietly(redis)

    return job


def instrument_all(functions: Sequence[JobFunction]) -> list[JobFunction]:
    """Return ``functions`` each wrapped by `observed`."""
    return [observed(fn) for fn in functions]


async def flush_quietly(redis: Redis | None) -> bool:
    """Flush this worker's metrics within ``FLUSH_TIMEOUT_S``; return whether it worked.

    A failure is logged and the increments wait for the next flush: metrics never fail a job.
    During an outage the pool has logged already (its start once, its end once:
    `worker.runtime.redis_checks`), a failed flush is logged at debug level only.
    A Redis that refuses writes (full) is logged once, until a flush is accepted again: the
    flush always writes this worker's heartbeat, so it is the write that ends the state
    (`worker.runtime.redis_checks.note_write_accepted`).
    """
    if redis is None:
        return False
    try:
        async with asyncio.timeout(FLUSH_TIMEOUT_S):
            await METRICS.flush(redis)
    except (RedisError, OSError, TimeoutError) as exc:
        if not note_write_refused(exc):  # an outage already told (its start and end) is not
            log.log(logging.DEBUG if outage_s() is not None else logging.WARNING,  # told again
                    "could not publish metrics to Redis (%s); will retry", type(exc).__name__)
        return False
    note_write_accepted()
    return True


def heartbeat_file(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Return ``LLMGATE_HEARTBEAT_FILE`` as a path, or None when unset (no heartbeat file)."""
    value = environ.get("LLMGATE_HEARTBEAT_FILE", "").strip()
    return Path(value) if value else None


def heartbeat_note() -> str:
    """What the heartbeat file says besides its age: ``redis-outage-s=<seconds>`` while this
    worker cannot reach Redis (`worker.runtime.redis_checks.outage_s`), and
    ``redis-refuses-writes=<why>`` with ``redis-refuses-writes-s=<seconds>`` while Redis refuses
    its writes (`worker.runtime.redis_checks.refused_writes`); else nothing."""
    lost_s, refused = outage_s(), refused_writes()
    note = "" if lost_s is None else f"redis-outage-s={lost_s:.0f}\n"
    if refused is not None:
        why, refused_s = refused
        note += f"redis-refuses-writes={why}\nredis-refuses-writes-s={refused_s:.0f}\n"
    return note


async def _publish_forever(redis: Redis, heartbeat: Path | None, interval_s: float) -> None:
    while True:
        await flush_quietly(redis)
        if heartbeat is not None:
            try:
                heartbeat.write_text(heartbeat_note())
            except OSError as exc:
                log.warning("cannot touch heartbeat file %s: %s", heartbeat, exc.strerror)
        await asyncio.sleep(interval_s)


def start_publishing(ctx: dict[str, Any], interval_s: float = FLUSH_INTERVAL_S) -> None:
    """Start flushing metrics (and touching the heartbeat file) every ``interval_s`` seconds.

    ``ctx`` is arq's worker context; its ``redis`` is the worker's own Redis pool.
    """
    redis: Redis | None = ctx.get("redis")
    if redis is not None:
        ctx[_FLUSHER] = asyncio.create_task(_publish_forever(redis, heartbeat_file(), interval_s))


async def stop_publishing(ctx: dict[str, Any]) -> None:
    """Stop the periodic flush, publish the last counts and remove this worker's heartbeat."""
    task: asyncio.Task[None] | None = ctx.pop(_FLUSHER, None)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    redis: Redis | None = ctx.get("redis")
    if redis is not None and await flush_quietly(redis):
        with contextlib.suppress(RedisError, OSError):
            await METRICS.forget(redis)
