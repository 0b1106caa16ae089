"""Detect a wiped queue Redis: an epoch key that only a Redis with its data still has.

``llmgate:epoch`` holds ``<random hex>:<Unix seconds it was made>`` and has no expiry (the
queue's Redis never evicts: `worker.contract.queue_redis_refusal`). A Redis restarted without
persistence, flushed or replaced by an empty one has no such key. `EpochWatch.check` makes a new
one with ``SET NX``, so of all the processes that look after a wipe exactly one is told and logs
it once with what it reconciled; the others see the new epoch and are told nothing.

A Redis that never held llmgate's data (a first start) has no epoch either. What tells the two
apart is a memory of an epoch seen before: the watching process's own (every worker reads the
epoch at each reconciler tick, `EpochWatch.observe`) and a file in ``LLMGATE_WORKDIR``
(`EPOCH_FILE`, the last epoch any worker on this machine saw; it outlives a restart of every
process, as after a reboot with a Redis without persistence). No epoch and no memory of one is a
first start (`FIRST`); no epoch after one was seen is a wipe (`LOST`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Final, Literal

from redis.asyncio import Redis

log = logging.getLogger(__name__)

#: The epoch key, in the queue's Redis.
EPOCH_KEY = "llmgate:epoch"
#: The file in ``LLMGATE_WORKDIR`` holding the last epoch seen on this machine.
EPOCH_FILE = "redis-epoch"
#: What `EpochWatch.check` found: the epoch as before, none ever seen (made now), or a wipe.
KEPT: Final = "kept"
FIRST: Final = "first"
LOST: Final = "lost"
EpochState = Literal["kept", "first", "lost"]


class EpochWatch:
    """What one process knows of the queue Redis's epoch (see the module doc)."""

    def __init__(self, workdir: Path | None = None) -> None:
        """Remember epochs in ``workdir / EPOCH_FILE`` too (None: in this process only)."""
        self.path = None if workdir is None else workdir / EPOCH_FILE
        self.seen = ""

    async def observe(self, redis: Redis) -> None:
        """Remember the current epoch, if there is one (one ``GET``; nothing is made).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        value = await redis.get(EPOCH_KEY)
        if value:
            self._remember(value.decode() if isinstance(value, bytes) else str(value))

    async def check(self, redis: Redis) -> EpochState:
        """Return `LOST` when the data of ``redis`` was wiped since an epoch was seen and this
        caller made the new epoch, `FIRST` when it made the first epoch this process and this
        machine know of, `KEPT` otherwise (the epoch was there: another process may have made
        it after a wipe, and that one was told).

        One ``SET NX`` round trip, and a ``GET`` when the epoch was there.

        Raises:
            redis.exceptions.RedisError: Redis failed (nothing is known then).
        """
        made = f"{secrets.token_hex(8)}:{int(time.time())}"
        if await redis.set(EPOCH_KEY, made, nx=True):
            state: EpochState = LOST if self.seen or self._stored() else FIRST
            self._remember(made)
            return state
        await self.observe(redis)
        return KEPT

    def _stored(self) -> str:
        if self.path is None:
            return ""
        try:
            return self.path.read_text(encoding="ascii").strip()
        except (OSError, ValueError):
            return ""

    def _remember(self, value: str) -> None:
        """Keep ``value`` as the epoch seen last, here and in the file (atomically replaced;
        a file that cannot be written is logged at debug level: only the wording of a later
        log line depends on it)."""
        if value == self.seen:
            return
        self.seen = value
        if self.path is None:
            return
        temporary = self.path.with_name(f"{EPOCH_FILE}.{os.getpid()}.tmp")
        try:
            temporary.write_text(value, encoding="ascii")
            os.replace(temporary, self.path)
        except (OSError, ValueError) as err:
            log.debug("cannot record the Redis epoch in %s: %s", self.path, err)
            with contextlib.suppress(OSError):
                temporary.unlink()
