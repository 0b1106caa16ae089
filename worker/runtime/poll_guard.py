"""Keep arq's poll loop alive through every fault of Redis: a restart, a full Redis.

arq 0.28's ``Worker.main`` runs ``_poll_iteration`` every ``poll_delay`` and ends, and the worker
with it (exit 1), on the first error any step raises. Each step talks to Redis:

1. ``_poll_iteration`` reads the due job ids (``ZRANGEBYSCORE``);
2. ``start_jobs`` claims each in a transaction that WATCHes the job's ``arq:in-progress:`` key
   (a connection lost between WATCH and EXEC cannot be retried: ``WatchError``; a full Redis
   refuses the claim's ``PSETEX``, which arq itself treats as "taken elsewhere");
3. ``_cancel_aborted_jobs`` reads and trims the abort set;
4. the ended tasks are reaped, and ``t.result()`` re-raises what ``run_job`` raised there (its
   own transactions: the try counter at the start, the result and queue entry at the end);
5. ``heart_beat``: ``record_health`` writes arq's health key (``OOM`` on a full Redis: every
   worker exited 1 at once, issue 32) and ``run_cron`` enqueues due cron jobs in a watched
   transaction (``WatchError`` on a restart: issue 32, 1 worker of 2 exited 1).

The pool retries a lost connection by itself (`worker.runtime.redis_checks.PatientRetry`); what
still escapes is a lost watch, a refused write (``OOM``, ``READONLY``, ``MISCONF``) and, with a
pool made otherwise, the connection errors (`redis_checks.redis_fault`). `guard_poll_loop`
wraps each step once per process so such an error ends that step only; the next poll tries
again. A refused write is logged once for the whole episode (`redis_checks.note_write_refused`),
any other fault as it happens. Configuration errors (a refused password) and bugs still end
the worker. What each step leaves behind:

- a claim that failed gives back the job slot arq took for it (its counter and semaphore, as
  arq's own "started elsewhere" path does); the job stays queued for the next poll;
- a cron tick that failed is skipped (arq has moved each job to its next run already; the
  sweeper and the reconciler catch up on one missed tick);
- a ``run_job`` that failed on Redis ends its task quietly (its slot is given back by arq's
  callback); its ``arq:in-progress:`` key is bounded by the job lease (``LLMGATE_JOB_LEASE_S``;
  a claim arq made lasts the job's timeout plus 10 s, an hour by default, and a full Redis
  refuses the start of a job right after its claim) and the job is run again once it expires,
  as after a killed worker;
- a health record that failed waits for arq's next one (hourly by default).

While Redis refuses this worker's writes (`redis_checks.refused_writes`: noted at the first
refused write, cleared by the next accepted heartbeat, within 10 s of memory being freed), the
worker claims no job: a full Redis near its limit still takes a few small writes (as keys
expire), and a claim that got through would start a job whose first write fails, spending one
of its tries for nothing. Jobs wait in the queue instead.

A job this worker runs already is never claimed again by it (`running_here`), even when its
lease lapsed while Redis was away: that try takes its lease back.

Only ``Worker.main``'s burst-mode ``ZCARD`` (not used by a serving worker) is left as it is.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from arq.constants import in_progress_key_prefix
from arq.worker import Worker
from redis.exceptions import RedisError

from worker.runtime.lease import CTX_KEY
from worker.runtime.redis_checks import (
    note_write_refused,
    redis_fault,
    refused_writes,
    reply_text,
)

log = logging.getLogger("llmgate.redis")

_GUARDED = "_llmgate_guarded"
_HELD = "_llmgate_held"
#: Each guarded step of arq's poll iteration, and what this module's log calls it.
STEPS: dict[str, str] = {
    "_poll_iteration": "reading the queue",
    "start_jobs": "claiming a job (it stays queued for the next poll)",
    "_cancel_aborted_jobs": "reading aborted jobs",
    "run_job": "starting or finishing a job (it runs again once its claim expires)",
    "record_health": "recording arq's health",
    "run_cron": "enqueueing cron jobs (they run at their next tick)",
}


#: What to do after a step failed, given the worker and the step's arguments.
OnFault = Callable[..., Awaitable[None]]


async def _give_back_slot(worker: Worker, *_: Any) -> None:
    """Undo ``start_jobs``' count of the job it was claiming (module docstring)."""
    worker.job_counter -= 1
    worker.sem.release()


async def _bound_claim(worker: Worker, job_id: str, *_: Any) -> None:
    """Bound the claim of a job whose ``run_job`` failed on Redis by the job lease (module
    docstring). PEXPIRE is allowed on a full Redis. Only a claim longer than the lease is
    shortened (a held lease is never longer than that). A failure is logged: the claim then
    lasts as arq set it."""
    lease_s = getattr(worker.ctx.get(CTX_KEY), "lease_s", 0)
    if not lease_s:
        return
    key, lease_ms = in_progress_key_prefix + job_id, int(lease_s * 1000)
    try:
        if await worker.pool.pttl(key) > lease_ms:
            await worker.pool.pexpire(key, lease_ms)
    except (RedisError, OSError) as err:
        log.warning("job %s: could not bound its claim by the lease (%s); it runs again when "
                    "arq's claim expires", job_id, type(err).__name__)


def _guard(worker_class: type[Worker], name: str, on_fault: OnFault | None = None) -> None:
    """Wrap ``worker_class.<name>`` so a Redis fault ends that call only (idempotent)."""
    original: Callable[..., Awaitable[Any]] = getattr(worker_class, name)
    if getattr(original, _GUARDED, False):
        return

    @functools.wraps(original)
    async def guarded(self: Worker, *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(self, *args, **kwargs)
        except (RedisError, OSError) as err:
            if not redis_fault(err):
                raise
            if on_fault is not None:
                await on_fault(self, *args, **kwargs)
            if not note_write_refused(err):  # a refused write is logged once per episode
                log.warning("Redis failed while %s (%s); the next poll tries again",
                            STEPS[name], reply_text(err))
            return None

    setattr(guarded, _GUARDED, True)
    setattr(worker_class, name, guarded)


def guard_poll_loop(worker_class: type[Worker] = Worker) -> None:
    """Guard every Redis step of ``worker_class``'s poll iteration (module docstring).

    Idempotent; a subclass of an already guarded class is left as it is.
    """
    on_fault: dict[str, OnFault] = {"start_jobs": _give_back_slot, "run_job": _bound_claim}
    for name in STEPS:
        _guard(worker_class, name, on_fault.get(name))
    _hold_claims(worker_class)


def running_here(worker: Worker, job_id: bytes) -> bool:
    """Whether ``worker`` runs a try of ``job_id`` now (arq's task of it has not ended).

    A lease that lapsed while Redis was away (a restart longer than the lease) let this same
    worker claim the job's next try beside the one it runs: arq keeps its tasks by job id
    alone, so the first try's end removed the second's entry and the second ended in a
    ``KeyError`` traceback, its result a failure (issue 32's fresh user). The try running here
    takes its lease back instead (`worker.runtime.fence`: no other try ran).
    """
    task = worker.tasks.get(job_id.decode())
    return task is not None and not task.done()


def _hold_claims(worker_class: type[Worker]) -> None:
    """Make ``start_jobs`` claim nothing while Redis refuses writes, and never a job this
    worker runs already (`running_here`; module docstring)."""
    original: Callable[[Any, list[bytes]], Awaitable[None]] = worker_class.start_jobs
    if getattr(original, _HELD, False):
        return

    @functools.wraps(original)
    async def start_jobs(self: Worker, job_ids: list[bytes]) -> None:
        if job_ids and refused_writes() is not None:
            return  # they stay queued until a write is accepted again
        await original(self, [job for job in job_ids if not running_here(self, job)])

    setattr(start_jobs, _GUARDED, True)
    setattr(start_jobs, _HELD, True)
    worker_class.start_jobs = start_jobs  # type: ignore[method-assign]
