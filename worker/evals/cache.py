"""Response cache in Redis for model, judge and embedding answers.

A key is ``llmgate:cache:v1:`` + the SHA-256 of the canonical JSON (sorted keys) of the
namespace (the repository, so one tenant never reads another's answers), the kind of call
(``chat``, ``judge``, ``embed``) and everything that decides the answer: the model, the
rendered messages or texts, the call parameters and the target or judge prompt version.
Values are JSON. Only answered calls are stored, never errors. Entries expire after
``ttl_s`` (30 days by default). A Redis failure is logged and treated as a miss: the cache
never fails a run.

Modes: ``use`` reads and writes; ``refresh`` (``--refresh-cache``) only writes, so every call
is sent again and the cache is renewed; ``off`` (``--no-cache``, ``settings.cache: false``)
neither reads nor writes.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.evals.llm_types import CacheMode

#: Prefix of every cache key; the version changes when the stored format does.
KEY_PREFIX = "llmgate:cache:v1:"
#: How long a cached answer is kept, seconds (30 days).
DEFAULT_TTL_S = 30 * 24 * 3600

log = logging.getLogger("llmgate.cache")


def cache_key(namespace: str, kind: str, payload: dict[str, Any]) -> str:
    """Return the Redis key of one call (pure; see the module docstring)."""
    text = json.dumps({"ns": namespace, "kind": kind, "call": payload}, sort_keys=True,
                      ensure_ascii=False, separators=(",", ":"), default=str)
    return KEY_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResponseCache:
    """Cached answers of one run: a Redis client, a namespace and a mode."""

    def __init__(self, redis: Redis | None, namespace: str, mode: CacheMode = "use",
                 ttl_s: int = DEFAULT_TTL_S) -> None:
        self.redis = redis
        self.namespace = namespace
        self.mode: CacheMode = mode if redis is not None else "off"
        self.ttl_s = ttl_s

    def key(self, kind: str, payload: dict[str, Any]) -> str:
        """Return the key of a call in this cache's namespace."""
        return cache_key(self.namespace, kind, payload)

    @property
    def reads(self) -> bool:
        """True when lookups may answer calls (mode ``use``)."""
        return self.mode == "use"

    async def get(self, key: str) -> dict[str, Any] | None:
        """Return the cached answer of ``key``, or None (a miss, mode not ``use``, an error)."""
        if not self.reads or self.redis is None:
            return None
        try:
            raw = await self.redis.get(key)
        except RedisError as err:
            log.warning("response cache read failed (treated as a miss): %s", err)
            return None
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    async def put(self, key: str, value: dict[str, Any]) -> None:
        """Store an answer (modes ``use`` and ``refresh``); errors are logged, not raised."""
        if self.mode == "off" or self.redis is None:
            return
        try:
            await self.redis.set(key, json.dumps(value, ensure_ascii=False), ex=self.ttl_s)
        except RedisError as err:
            log.warning("response cache write failed: %s", err)

    async def cached(self, keys: list[str]) -> list[bool]:
        """Return, for each key, whether it is cached (all False unless mode ``use``)."""
        if not self.reads or self.redis is None or not keys:
            return [False] * len(keys)
        try:
            found: list[bool] = []
            for start in range(0, len(keys), 500):
                async with self.redis.pipeline(transaction=False) as pipe:
                    for key in keys[start:start + 500]:
                        pipe.exists(key)
                    found.extend(bool(n) for n in await pipe.execute())
            return found
        except RedisError as err:
            log.warning("response cache lookup failed: %s", err)
            return [False] * len(keys)
