"""The eval context of ``llmgate run``: the response cache, its mode, a printer.

The cache is in Redis when ``REDIS_URL`` names a Redis server (the worker's, or a local one);
without it, in a SQLite file on this machine (worker/evals/llm/disk_cache.py). ``--no-cache``
turns it off, ``--refresh-cache`` sends every call again and stores the new answers. The cost
estimate is printed to stderr. With ``REDIS_URL``, the providers' quotas are learned and paced
through that Redis too (worker/evals/llm/pace.py), ``--no-cache`` or not, so runs on several
machines sharing an API key stay within its quota together.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from redis.asyncio import Redis

from worker.evals.context import EvalContext
from worker.evals.llm.disk_cache import default_path
from worker.evals.llm_types import CacheMode


def cache_mode(args: argparse.Namespace) -> CacheMode:
    """Return the cache mode the flags ask for (``use`` by default)."""
    if getattr(args, "no_cache", False):
        return "off"
    return "refresh" if getattr(args, "refresh_cache", False) else "use"


def cache_url(environ: Mapping[str, str]) -> str | None:
    """Return the Redis URL of the cache from the environment (``REDIS_URL``), or None."""
    return environ.get("REDIS_URL") or None


def _stderr(message: str) -> None:
    print(f"llmgate: {message}", file=sys.stderr)


@asynccontextmanager
async def eval_context(args: argparse.Namespace) -> AsyncIterator[EvalContext]:
    """Yield the context of one ``llmgate run`` and close its Redis client afterwards."""
    mode = cache_mode(args)
    url = cache_url(os.environ)  # with --no-cache too: provider quotas are shared through it
    redis = Redis.from_url(url) if url else None
    try:
        yield EvalContext(redis=redis, namespace="local", cache_mode=mode, say=_stderr,
                          cache_file=default_path(os.environ) if mode != "off" else None)
    finally:
        if redis is not None:
            await redis.aclose()
