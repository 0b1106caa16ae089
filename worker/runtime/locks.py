"""Redis locks that stay held for as long as their holder works under them.

A run holds a lock while it opens its check run (`open_lock_key`) and while it finds and edits
the sticky comment (`comment_lock_key`). The work under such a lock is a few GitHub requests, but
one of them may wait much longer than usual: a rate-limit pause (up to
``LLMGATE_GITHUB_MAX_WAIT_S``, 60 s by default), an HTTP timeout, retried 5xx answers. A lock
with a fixed expiry would lapse meanwhile: another run would take it (and the order the lock
exists for would be lost), and redis-py's release would then raise ``LockNotOwnedError`` in
place of the work's own result. `held` renews the expiry every third of it while the body runs
(as `worker.runtime.lease.hold_lease` does for a job), so only a holder that died lets the lock
lapse, after at most ``ttl_s`` seconds, and it never raises once the body has run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis
from redis.asyncio.lock import Lock
from redis.exceptions import LockError, RedisError

log = logging.getLogger("llmgate.worker")

#: Expiry of a pull request's sticky-comment lock (`comment_lock_key`), seconds; renewed while
#: held, so it only bounds how long a killed holder keeps others waiting.
COMMENT_LOCK_TTL_S = 60
#: Expiry of a head commit's open lock (`open_lock_key`), seconds; renewed while held, like
#: `COMMENT_LOCK_TTL_S`.
OPEN_LOCK_TTL_S = 30


def comment_lock_key(owner: str, name: str, pr_number: int) -> str:
    """Return the lock held while a pull request's sticky comment is found and edited (a gate
    run writing its report, an acceptance adding its audit line), so edits never interleave:
    ``llmgate:lock:comment:<owner>/<name>#<pr_number>``."""
    return f"llmgate:lock:comment:{owner}/{name}#{pr_number}"


def open_lock_key(owner: str, name: str, head_sha: str) -> str:
    """Return the lock a gate run holds while it asks whether it is still wanted and opens its
    check run: ``llmgate:lock:check:<owner>/<name>@<head_sha>``, one per head commit.

    GitHub shows the newest check run of a name on a commit. Two runs of one commit (a pull
    request retargeted while its run was starting) must therefore open their check runs in the
    order of their supersede checks: a run that passed its check cannot create its check run
    after that of a run queued later, which would put the older run (soon ``cancelled``) in
    front of the newer one.
    """
    return f"llmgate:lock:check:{owner}/{name}@{head_sha}"


@asynccontextmanager
async def held(redis: Redis, name: str, ttl_s: float) -> AsyncIterator[None]:
    """Hold the Redis lock ``name`` for the body: wait until it is free, keep it while the body
    runs, release it after.

    Args:
        redis: the worker's client.
        name: the lock's key, e.g. ``llmgate:lock:comment:acme/bot#7``.
        ttl_s: the lock's expiry, seconds; renewed every ``ttl_s / 3`` seconds while the body
            runs, so it only lapses when the holder stops (killed, or its loop stalled).

    A renewal or release that finds the lock gone, or that Redis fails, is logged and never
    raised: the body's own result or error stands.

    Raises:
        redis.exceptions.RedisError: acquiring failed (Redis unreachable).
    """
    lock = redis.lock(name, timeout=ttl_s)
    await lock.acquire()
    renewal = asyncio.create_task(_renew(lock, name, ttl_s))
    try:
        yield
    finally:
        renewal.cancel()
        try:  # wait() never raises the renewal's CancelledError, only a cancel of our own task
            await asyncio.wait([renewal])
        finally:
            try:
                await lock.release()
            except (LockError, RedisError) as err:  # lapsed, or Redis failed: it expires
                log.warning("lock %s was not released (%s)", name, type(err).__name__)


async def _renew(lock: Lock, name: str, ttl_s: float) -> None:
    """Reset ``lock``'s expiry to ``ttl_s`` every ``ttl_s / 3`` seconds until cancelled or the
    lock is found to belong to someone else."""
    while True:
        await asyncio.sleep(ttl_s / 3)
        try:
            await lock.reacquire()
        except LockError:  # it lapsed and another holder may have it: nothing to keep
            log.warning("lock %s lapsed while held", name)
            return
        except RedisError as err:
            log.warning("lock %s could not be renewed (%s)", name, type(err).__name__)
