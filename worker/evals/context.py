"""What an eval run needs beyond its config and checkout: Redis, cache mode, clocks, a logger.

`EvalContext` is made once per job (worker) or command (CLI) and passed down to the engine; its
clock, sleep and random source are parameters so tests control retries and budgets without
waiting. Without a context the engine runs with no response cache, real time and real sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from redis.asyncio import Redis

from worker.evals.llm_types import CacheMode

log = logging.getLogger("llmgate.evals")


def _log_info(message: str) -> None:
    log.info("%s", message)


@dataclass
class EvalContext:
    """Services of one gate job or ``llmgate run``.

    Attributes:
        redis: the Redis client of the response cache, or None (no cache).
        namespace: the cache namespace, the repository's ``owner/name`` ("local" for the CLI).
        cache_mode: ``use``, ``refresh`` or ``off`` (``--refresh-cache``, ``--no-cache``);
            ``settings.cache: false`` in a config turns it off for that config.
        sleep: awaited between retries with the wait in seconds.
        clock: monotonic seconds, for ``max_duration`` and latency.
        rng: the random source of retry jitter.
        say: prints progress lines (the cost estimate); the worker logs them.
    """

    redis: Redis | None = None
    namespace: str = "local"
    cache_mode: CacheMode = "use"
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    say: Callable[[str], None] = _log_info
