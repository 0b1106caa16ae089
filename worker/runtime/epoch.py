"""Detect a wiped queue Redis: an epoch key that only a Redis with its data still has.

``llmgate:epoch`` holds ``<random hex>:<Unix seconds it was made>`` and has no expiry (the
queue's Redis never evicts: `worker.contract.queue_redis_refusal`). A Redis restarted without
persistence, flushed or replaced by an empty one has no such key. `check_epoch` makes a new one
with ``SET NX``, so of all the processes that look after a wipe exactly one is told (True) and
logs it once with what it reconciled; the others see the new epoch and are told nothing.

A first start on a new Redis looks the same as a wipe (nothing there), and is reported once
too, which is harmless: the reconciler it prompts finds nothing missing.
"""

from __future__ import annotations

import secrets
import time

from redis.asyncio import Redis

#: The epoch key, in the queue's Redis.
EPOCH_KEY = "llmgate:epoch"


async def check_epoch(redis: Redis) -> bool:
    """Return True when the data of ``redis`` was wiped since the last check (or never had an
    epoch), and this caller is the one process that made the new epoch; False otherwise.

    One ``SET NX`` round trip.

    Raises:
        redis.exceptions.RedisError: Redis failed (nothing is known then).
    """
    made = f"{secrets.token_hex(8)}:{int(time.time())}"
    return bool(await redis.set(EPOCH_KEY, made, nx=True))
