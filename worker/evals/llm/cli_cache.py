"""The eval context of ``llmgate run``: the response cache, its mode, a printer.

The cache is in Redis when ``REDIS_URL`` names a Redis server (the worker's, or a local one);
without it, in a SQLite file on this machine (worker/evals/llm/disk_cache.py). ``--no-cache``
turns it off, ``--refresh-cache`` sends every call again and stores the new answers. A cached
answer decides a verdict as a provider's would, so the file is never read from the checked-out
tree a pull request writes (issue 30: a ``responses.sqlite3`` committed where the GitLab
template kept the cache answered a regressing head's calls and it passed): a file inside the
repository (`refused_cache_file`, symbolic links followed) is not used, the run goes on without
a cache, saying why. The cost
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
from pathlib import Path

from redis.asyncio import Redis

from worker.evals.context import CacheContext, EvalContext, Observers
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


def checkout_top(folder: Path) -> Path:
    """Return the top of the git checkout holding ``folder`` (absolute): the nearest folder at
    or above it with a ``.git`` (a folder, or a worktree's or submodule's file), else
    ``folder`` itself (a run outside a repository gates the current folder)."""
    start = folder.absolute()
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), start)


def refused_cache_file(file: Path, repo: Path) -> str | None:
    """Return why the response cache ``file`` may not serve a run in ``repo``, else None.

    Refused: a file inside the checkout holding ``repo`` (`checkout_top`), symbolic links
    followed (``LLMGATE_CACHE_DIR``, ``XDG_CACHE_HOME`` or ``HOME`` leading into it), since a
    pull request can commit one there or have a CI cache restore one. Reads the file system
    only (no file is created).

    Returns:
        One line naming the file, the repository and the fix, or None.
    """
    top = checkout_top(repo)
    if not file.resolve().is_relative_to(top.resolve()):
        return None
    return (f"the response cache is off for this run: its file {file} is inside the "
            f"repository {top}, where a pull request could commit answers; set "
            "LLMGATE_CACHE_DIR to a folder outside it (default ~/.cache/llmgate)")


@asynccontextmanager
async def eval_context(args: argparse.Namespace, repo: Path) -> AsyncIterator[EvalContext]:
    """Yield the context of one ``llmgate`` command run in ``repo`` and close its Redis
    client afterwards; without Redis, a cache file inside ``repo`` is not used
    (`refused_cache_file`, said on stderr)."""
    mode = cache_mode(args)
    url = cache_url(os.environ)  # with --no-cache too: provider quotas are shared through it
    redis = Redis.from_url(url) if url else None
    file = default_path(os.environ) if mode != "off" else None
    refused = refused_cache_file(file, repo) if file is not None and redis is None else None
    if refused is not None:
        _stderr(refused)
        mode, file = "off", None
    try:
        yield EvalContext(cache=CacheContext(redis, "local", mode, file),
                          observers=Observers(say=_stderr))
    finally:
        if redis is not None:
            await redis.aclose()
