"""Installation tokens shared by every worker process: encrypted in Redis, minted once.

`InstallationTokenCache` (``worker.github.auth``) keeps tokens in memory; with a
`SharedTokenStore` it also reads and writes them here, so N workers mint one token per
installation per hour instead of N, and a token GitHub refused (401) is dropped for all of them.

Values are Fernet-encrypted with ``LLMGATE_ENCRYPTION_KEYS``
(`worker.security.secretbox.EncryptedStore`, key ``llmgate:secret:installation-token:<id>``, rotated
by ``EncryptedStore.rotate_all`` like any other secret) and expire from Redis when they are due for
refresh. Without keys there is no shared store: a plaintext token in Redis would reach every dump
and replica, so each worker process keeps its own tokens in memory instead (`from_env` logs this
once).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress

from redis.asyncio import Redis
from redis.exceptions import LockError

from worker.security import EncryptedStore, SecretBox

log = logging.getLogger(__name__)

#: Seconds a mint may hold the per-installation lock before Redis frees it (a dead worker).
MINT_LOCK_TIMEOUT_S = 30.0
#: Seconds a worker waits for another one's mint before minting itself.
MINT_WAIT_S = 15.0


class SharedTokenStore:
    """Encrypted installation tokens in Redis, plus a lock so one worker mints at a time."""

    def __init__(self, redis: Redis, box: SecretBox) -> None:
        """Store in ``redis`` under ``llmgate:secret:``, encrypted by ``box``."""
        self._redis = redis
        self._store = EncryptedStore(redis, box)

    def __repr__(self) -> str:
        return "SharedTokenStore(encrypted)"

    @classmethod
    def from_env(cls, redis: Redis, environ: Mapping[str, str]) -> SharedTokenStore | None:
        """Return a store when ``LLMGATE_ENCRYPTION_KEYS`` is set, else None (logged once).

        Raises:
            worker.security.secretbox.SecretBoxError: a key in the variable is malformed.
        """
        box = SecretBox.from_env(environ)
        if box is None:
            log.info("installation tokens are cached in each worker process only; set "
                     "LLMGATE_ENCRYPTION_KEYS to share them (encrypted) between workers")
            return None
        return cls(redis, box)

    @staticmethod
    def _name(installation_id: int) -> str:
        return f"installation-token:{installation_id}"

    async def get(self, installation_id: int) -> tuple[str, float] | None:
        """Return ``(token, expires_at as Unix seconds)``, or None when none is stored."""
        raw = await self._store.get(self._name(installation_id))
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            return str(data["token"]), float(data["expires_at"])
        except (ValueError, KeyError, TypeError):
            await self._store.delete(self._name(installation_id))
            return None

    async def put(self, installation_id: int, token: str, expires_s: float,
                  keep_s: float) -> None:
        """Store ``token`` (expiring at Unix ``expires_s``) for ``keep_s`` seconds (> 0)."""
        await self._store.put(self._name(installation_id),
                              json.dumps({"token": token, "expires_at": expires_s}), keep_s)

    async def drop(self, installation_id: int, token: str | None = None) -> None:
        """Delete the stored token; with ``token``, only if it is that one (a 401's token)."""
        if token is not None:
            stored = await self.get(installation_id)
            if stored is None or stored[0] != token:
                return
        await self._store.delete(self._name(installation_id))

    @asynccontextmanager
    async def mint_lock(self, installation_id: int) -> AsyncIterator[None]:
        """Hold the installation's mint lock; after `MINT_WAIT_S` go on without it."""
        lock = self._redis.lock(f"llmgate:lock:token:{installation_id}",
                                timeout=MINT_LOCK_TIMEOUT_S, blocking_timeout=MINT_WAIT_S)
        acquired = await lock.acquire()
        try:
            yield
        finally:
            if acquired:
                with suppress(LockError):  # it expired meanwhile: nothing to release
                    await lock.release()
