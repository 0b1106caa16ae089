"""Keep arq's poll loop alive when Redis drops a connection while a job is being claimed.

arq 0.28's ``Worker.start_jobs`` claims each job in a pipeline that WATCHes the job's
``arq:in-progress:`` key, then reads that key and the job's queue score before MULTI/EXEC. When
the connection is lost between WATCH and EXEC (a Redis restart), redis-py cannot repeat the
command on a new connection, since the watch is gone with the old one, and raises ``WatchError``
("A ConnectionError occurred on while watching one or more keys") from the read, outside the
``try`` arq keeps around EXEC only. The error ends the poll loop and the worker exits 1 (seen in
the soak, bench/soak.py, during a Redis restart), although it is only Redis blipping.

`guard_job_claims` wraps ``start_jobs`` once per process: such a ``WatchError`` gives back the
job slot arq took for that job (its counter and semaphore, as arq's own "started elsewhere"
path does) and ends this poll; the job stays in the queue and the next poll claims it again,
on a new connection. Nothing else changes: the claim is still one watched transaction.

It wraps ``run_cron`` too: arq enqueues a cron job in the same kind of watched transaction,
and a Redis restart at that moment ended the worker the same way (issue 32: the chaos e2e of
a Redis restart, 1 worker of 2 exited 1). That tick's cron jobs are not enqueued; arq has
already moved each to its next run, so the next tick enqueues them (the sweeper and the
reconciler run every minute and catch up on what one tick missed).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from arq.worker import Worker
from redis.exceptions import WatchError

log = logging.getLogger("llmgate.redis")

_GUARDED = "_llmgate_guarded"


def guard_job_claims(worker_class: type[Worker] = Worker) -> None:
    """Wrap ``worker_class.start_jobs`` as the module docstring says (idempotent)."""
    original: Callable[[Any, list[bytes]], Awaitable[None]] = worker_class.start_jobs
    if getattr(original, _GUARDED, False):
        return

    @functools.wraps(original)
    async def start_jobs(self: Worker, job_ids: list[bytes]) -> None:
        try:
            await original(self, job_ids)
        except WatchError as err:  # raised between WATCH and EXEC: the slot of that job
            self.job_counter -= 1
            self.sem.release()
            log.warning("Redis dropped the connection while a job was being claimed (%s); "
                        "it stays queued for the next poll", err)

    setattr(start_jobs, _GUARDED, True)
    worker_class.start_jobs = start_jobs  # type: ignore[method-assign]
    cron: Callable[..., Awaitable[None]] = worker_class.run_cron

    @functools.wraps(cron)
    async def run_cron(self: Worker, *args: Any, **kwargs: Any) -> None:
        try:
            await cron(self, *args, **kwargs)
        except WatchError as err:  # raised while enqueueing: this tick's cron jobs wait
            log.warning("Redis dropped the connection while cron jobs were being enqueued "
                        "(%s); they run at their next tick", err)

    worker_class.run_cron = run_cron  # type: ignore[method-assign]
