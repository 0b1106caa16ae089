"""Deliveries accepted while Redis was away, kept in memory until it answers again.

GitHub does not redeliver by itself, so a delivery answered 503 during a Redis restart is a
gate nobody runs unless a person redelivers it. Instead the receiver keeps such a verified,
routed delivery here (at most `SPOOL_MAX` of them), answers 202 ``spooled``, and one
background task marks and enqueues them, oldest first, as soon as Redis answers (the same
atomic script as any delivery, `app.enqueue.mark_and_enqueue`: a delivery seen meanwhile is a
duplicate and enqueues nothing). A full spool answers 503 as before. The spool lives in the
web process's memory: a process that stops with deliveries in it logs their ids (to redeliver
from the App's settings), and the worker's reconciler re-queues any gate still missing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass

from redis.exceptions import RedisError

from app.enqueue import mark_and_enqueue
from app.redis_pipe import RedisPipe
from app.routes import PlannedJob

log = logging.getLogger(__name__)

#: Failures of Redis (unreachable, slow, refusing): wait and try again.
_FAILURES = (RedisError, OSError, asyncio.TimeoutError)
#: Deliveries kept at most while Redis is away (beyond: 503, as before the spool).
SPOOL_MAX = 10_000
#: Pauses between two attempts to reach Redis, seconds: doubled from the first to the last.
RETRY_FIRST_S, RETRY_CAP_S = 0.1, 2.0


@dataclass(frozen=True)
class SpooledDelivery:
    """What `mark_and_enqueue` needs to settle one delivery later."""

    delivery_id: str
    body_sha256: str
    job: PlannedJob | None
    head_record: tuple[str, str] | None


class DeliverySpool:
    """The deliveries waiting for Redis, and the task that settles them (module docstring)."""

    def __init__(self, capacity: int = SPOOL_MAX) -> None:
        """Start empty; the drain task starts with the first delivery kept."""
        self._waiting: deque[SpooledDelivery] = deque()
        self._capacity = capacity
        self._drain: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        """Deliveries waiting now."""
        return len(self._waiting)

    def keep(self, pipe: RedisPipe, delivery: SpooledDelivery) -> bool:
        """Keep ``delivery`` to settle through ``pipe`` once Redis answers; False when full."""
        if len(self._waiting) >= self._capacity:
            return False
        if not self._waiting:
            log.warning("Redis is unavailable: keeping deliveries in memory and enqueueing "
                        "them when it answers (at most %d)", self._capacity)
        self._waiting.append(delivery)
        if self._drain is None or self._drain.done():
            self._drain = asyncio.get_running_loop().create_task(self._settle_all(pipe))
        return True

    async def _settle_all(self, pipe: RedisPipe) -> None:
        """Settle the waiting deliveries oldest first, retrying with backoff while Redis fails."""
        pause_s, settled = RETRY_FIRST_S, 0
        while self._waiting:
            first = self._waiting[0]
            try:
                await mark_and_enqueue(pipe, first.delivery_id, first.body_sha256, first.job,
                                       first.head_record)
            except _FAILURES:
                await asyncio.sleep(pause_s)
                pause_s = min(RETRY_CAP_S, pause_s * 2)
                continue
            self._waiting.popleft()
            settled, pause_s = settled + 1, RETRY_FIRST_S
        log.warning("Redis answers again: %d kept deliveries enqueued", settled)

    async def close(self) -> None:
        """Stop the drain task; log the ids of deliveries still waiting (to redeliver)."""
        if self._drain is not None:
            self._drain.cancel()
            await asyncio.gather(self._drain, return_exceptions=True)
        if self._waiting:
            log.error("stopping with %d deliveries Redis never took; redeliver them from the "
                      "App's advanced settings: %s", len(self._waiting),
                      " ".join(d.delivery_id for d in self._waiting))
