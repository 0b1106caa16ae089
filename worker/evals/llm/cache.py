"""Response cache in Redis for model, judge and embedding answers.

A key is ``llmgate:cache:v1:`` + the SHA-256 of the canonical JSON (sorted keys) of the
namespace (the repository, so one tenant never reads another's answers), the kind of call
(``chat``, ``judge``, ``embed``) and everything that decides the answer: the model, the
rendered messages or texts, the call parameters and the target or judge prompt version.
Values are JSON. Only answered calls are stored, never errors. Entries expire after
``ttl_s`` (30 days by default). A Redis failure is logged and treated as a miss: the cache
never fails a run.

Besides answers, the cache keeps the completion tokens of the last `LENGTH_SAMPLES` answers of
each family of calls (a list under ``llmgate:lengths:v1:`` + the SHA-256 of the namespace and
the family: a target's model and prompt file, a judge's model and prompt version), so the cost
estimate (worker/evals/run/estimate.py) can expect answers as long as that model's recent answers
to that prompt, not as long as ``max_tokens``.

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
from worker.evals.serialize import json_object, valid_text

#: Prefix of every cache key; the version changes when the stored format does.
KEY_PREFIX = "llmgate:cache:v1:"
#: How long a cached answer is kept, seconds (30 days).
DEFAULT_TTL_S = 30 * 24 * 3600
#: Completion-token counts kept per family of calls (the estimate uses their mean).
LENGTH_SAMPLES = 200
#: Prefix of the keys of those counts (a list per family, same expiry as answers).
LENGTHS_PREFIX = "llmgate:lengths:v1:"

log = logging.getLogger("llmgate.cache")


def cache_key(namespace: str, kind: str, payload: dict[str, Any]) -> str:
    """Return the Redis key of one call (pure; see the module docstring)."""
    text = json.dumps({"ns": namespace, "kind": kind, "call": payload}, sort_keys=True,
                      ensure_ascii=False, separators=(",", ":"), default=str)
    # surrogatepass: a lone surrogate in a prompt (a dataset's "\ud800") keys, never raises
    return KEY_PREFIX + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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

    def lengths_key(self, family: dict[str, Any]) -> str:
        """Return the key of a family's completion-token samples in this namespace."""
        return LENGTHS_PREFIX + cache_key(self.namespace, "lengths", family)[len(KEY_PREFIX):]

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
        return json_object(raw)

    async def put(self, key: str, value: dict[str, Any],
                  sample: tuple[str, int] | None = None) -> None:
        """Store an answer (modes ``use`` and ``refresh``); errors are logged, not raised.

        Args:
            key: the call's key.
            value: the answer (JSON-able).
            sample: ``(lengths key, completion tokens)`` to add to a family's samples, or None.
        """
        if self.mode == "off" or self.redis is None:
            return
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.set(key, valid_text(json.dumps(value, ensure_ascii=False)), ex=self.ttl_s)
                if sample is not None:
                    pipe.lpush(sample[0], sample[1])
                    pipe.ltrim(sample[0], 0, LENGTH_SAMPLES - 1)
                    pipe.expire(sample[0], self.ttl_s)
                await pipe.execute()
        except RedisError as err:
            log.warning("response cache write failed: %s", err)

    async def mean_length(self, key: str) -> float | None:
        """Return the mean of a family's completion-token samples, or None (none, mode not
        ``use``, an error)."""
        if not self.reads or self.redis is None:
            return None
        try:
            raw = await self.redis.lrange(key, 0, -1)  # type: ignore[misc]  # redis-py typing
        except RedisError as err:
            log.warning("response cache read failed: %s", err)
            return None
        texts = [n.decode() if isinstance(n, bytes) else str(n) for n in raw or []]
        counts = [int(n) for n in texts if n.isdigit()]
        return sum(counts) / len(counts) if counts else None

    async def lookup(self, keys: list[str]) -> list[dict[str, Any] | None]:
        """Return the cached value of each key (None: a miss), all None unless mode ``use``."""
        if not self.reads or self.redis is None or not keys:
            return [None] * len(keys)
        found: list[dict[str, Any] | None] = []
        try:
            for start in range(0, len(keys), 500):
                async with self.redis.pipeline(transaction=False) as pipe:
                    for key in keys[start:start + 500]:
                        pipe.get(key)
                    found.extend(json_object(raw) for raw in await pipe.execute())
        except RedisError as err:
            log.warning("response cache lookup failed: %s", err)
            return [None] * len(keys)
        return found

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
