"""Stop a worker promptly while Redis is away (the stop signal ends the wait for Redis).

arq 0.28 stops a worker on SIGTERM or SIGINT: it lets the running jobs finish for
``job_completion_wait`` seconds (``LLMGATE_SHUTDOWN_GRACE_S``), cancels what still runs (arq puts
a cancelled job back in the queue), and then ``Worker.close`` deletes arq's health key, runs
``on_shutdown`` and closes its pool. With Redis away, every step that talks to Redis waited for
it forever (`worker.runtime.redis_checks.PatientRetry`), so the worker waited until the platform
killed it. `guard_stopping` changes three things:

1. the stop signal is noted (`worker.runtime.redis_checks.note_stopping`) before arq handles it,
   so no Redis call of this process waits for Redis any more: it raises the lost connection;
2. the grace ends once Redis has been unreachable for
   `worker.runtime.redis_checks.STOP_PATIENCE_S` (`stopped_waiting`): a job cannot record its
   result without Redis, so it is cancelled then, as with a grace of 0.
   Its claim (``arq:in-progress:<id>``) stays in Redis and is bounded by the job lease
   (``LLMGATE_JOB_LEASE_S``): the job runs again once it expires, as after a killed worker, on
   the check run it opened (worker/gate/run.py leaves that ``in_progress`` for the next try);
3. ``Worker.close`` no longer fails on Redis: the health key it cannot delete expires by itself
   (``health_check_interval`` + 1 s), and ``on_shutdown`` still runs.

A signal arq sends itself (``SIGUSR1``, when a worker made without signal handlers is closed) is
not a stop signal here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
from collections.abc import Callable
from typing import Any

from arq.worker import Worker
from redis.exceptions import RedisError

from worker.runtime.redis_checks import (
    note_stopping,
    redis_fault,
    reply_text,
    stopped_waiting,
    stopping,
)

log = logging.getLogger("llmgate.redis")

_GUARDED = "_llmgate_stop_guarded"
#: The signals that stop a worker (arq handles these two).
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
#: How often the grace checks whether its jobs ended or Redis is away, seconds (arq's 0.1 s).
GRACE_POLL_S = 0.1
#: How long the grace waits for Redis to answer a PING before it takes Redis for away, seconds.
PING_TIMEOUT_S = 1.0


def _noting(handler: Callable[[Worker, signal.Signals], None],
            ) -> Callable[[Worker, signal.Signals], None]:
    """Wrap an arq signal handler so a stop signal is noted first (module docstring, 1)."""

    @functools.wraps(handler)
    def handle(self: Worker, signum: signal.Signals) -> None:
        if signum in STOP_SIGNALS:
            note_stopping(signal.Signals(signum).name)
        handler(self, signum)

    return handle


async def _sleep_until_tasks_complete(self: Worker) -> None:
    """arq's wait for the running jobs during the grace, ended early while Redis is
    unreachable (module docstring, 2): asked with a PING first, since the outage this process
    noted may have ended without a call of its own seeing it (a call cancelled meanwhile)."""
    while self.tasks and not (stopped_waiting() and not await _answers(self.pool)):
        await asyncio.sleep(GRACE_POLL_S)
    if self.tasks:
        log.warning("Redis is unreachable: the stopping worker cancels its %d running job(s) "
                    "now; each runs again once its lease expires", len(self.tasks))


async def _answers(pool: Any) -> bool:
    """Whether Redis answers a PING within `PING_TIMEOUT_S` (an answer ends the outage noted
    in worker/runtime/redis_checks.py)."""
    try:
        async with asyncio.timeout(PING_TIMEOUT_S):
            await pool.ping()
    except (RedisError, OSError, TimeoutError):
        return False
    return True


async def _close(self: Worker) -> None:
    """arq 0.28's ``Worker.close``, with a health key that cannot be deleted while stopping left
    to expire (module docstring, 3)."""
    if not self._handle_signals:
        self.handle_sig(signal.SIGUSR1)
    if not self._pool:
        return
    await asyncio.gather(*self.tasks.values())
    try:
        await self.pool.delete(self.health_check_key)
    except (RedisError, OSError) as err:
        if stopping() is None or not redis_fault(err):
            raise
        log.warning("Redis is unreachable while the worker stops (%s); arq's health key "
                    "expires by itself", reply_text(err))
    if self.on_shutdown:
        await self.on_shutdown(self.ctx)
    await self.pool.aclose(close_connection_pool=True)
    self._pool = None


def guard_stopping(worker_class: type[Worker] = Worker) -> None:
    """Make ``worker_class`` stop promptly while Redis is away (module docstring).

    Call before the worker is made: arq binds its signal handlers in ``Worker.__init__``.
    Idempotent.
    """
    if getattr(worker_class.close, _GUARDED, False):
        return
    replaced: dict[str, Callable[..., Any]] = {
        "handle_sig": _noting(worker_class.handle_sig),
        "handle_sig_wait_for_completion": _noting(worker_class.handle_sig_wait_for_completion),
        "_sleep_until_tasks_complete": _sleep_until_tasks_complete,
        "close": _close,
    }
    for name, method in replaced.items():
        setattr(worker_class, name, method)


setattr(_close, _GUARDED, True)  # noqa: B010 (a mark on the function guard_stopping installs)
