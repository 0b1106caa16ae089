"""The response cache of ``llmgate run`` without a server: one SQLite file on this machine.

Same keys, values, modes and expiry as the Redis cache (worker/evals/llm/cache.py, whose
`ResponseCache` this extends); only where entries live differs. SQLite comes with Python (no
dependency, no server, a file format kept by the SQLite project and safe with several processes
at once through its own locking), which is why it is used rather than diskcache, whose store
is SQLite too. Tables: ``answers(key, value, expires_at)`` and ``lengths(key, tokens, at)``.

The file is ``$LLMGATE_CACHE_DIR/responses.sqlite3`` (default ``$XDG_CACHE_HOME/llmgate`` or
``~/.cache/llmgate``; `default_path`), never one inside the repository of the run
(worker/evals/llm/cli_cache.py, `refused_cache_file`). Like the Redis cache it never fails a run: an
unreadable or locked file is logged and treated as a miss. Each operation opens the file,
works in one transaction and closes it (a few milliseconds next to a model call).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Protocol

from redis.asyncio import Redis

from worker.evals.llm.cache import (
    DEFAULT_TTL_S,
    LENGTH_SAMPLES,
    ResponseCache,  # the same JSON values as the Redis cache
)
from worker.evals.llm_types import CacheMode
from worker.evals.serialize import json_object, valid_text

log = logging.getLogger("llmgate.cache")

#: Seconds a connection waits for another process's write lock before the call is a miss.
LOCK_WAIT_S = 10.0
_SCHEMA = ("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
           "expires_at REAL NOT NULL)",
           "CREATE TABLE IF NOT EXISTS lengths (key TEXT NOT NULL, tokens INTEGER NOT NULL, "
           "at REAL NOT NULL)",
           "CREATE INDEX IF NOT EXISTS lengths_key ON lengths (key, at)")


class _CacheContext(Protocol):
    """What `context_cache` reads of a run's cache part (worker/evals/context.py
    `CacheContext`)."""

    @property
    def redis(self) -> Redis | None: ...
    @property
    def file(self) -> Path | None: ...
    @property
    def namespace(self) -> str: ...


def default_path(environ: Mapping[str, str]) -> Path:
    """Return the cache file: ``LLMGATE_CACHE_DIR``, else ``XDG_CACHE_HOME/llmgate``, else
    ``~/.cache/llmgate``, each with ``responses.sqlite3``."""
    folder = environ.get("LLMGATE_CACHE_DIR") or (
        str(Path(environ["XDG_CACHE_HOME"]) / "llmgate") if environ.get("XDG_CACHE_HOME")
        else str(Path(environ.get("HOME") or Path.home()) / ".cache" / "llmgate"))
    return Path(folder) / "responses.sqlite3"


class DiskCache(ResponseCache):
    """A `ResponseCache` in a SQLite file (see the module docstring)."""

    def __init__(self, path: Path, namespace: str, mode: CacheMode = "use",
                 ttl_s: int = DEFAULT_TTL_S, clock: Callable[[], float] = time.time) -> None:
        super().__init__(None, namespace, mode, ttl_s)
        self.mode = mode
        self.path = path
        self.clock = clock

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=LOCK_WAIT_S)) as db, db:
            for statement in _SCHEMA:
                db.execute(statement)
            yield db

    def _values(self, keys: list[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        try:
            with self._db() as db:
                now = self.clock()
                for key in keys:  # one indexed lookup each: microseconds in one transaction
                    row = db.execute("SELECT value FROM answers WHERE key = ? AND "
                                     "expires_at > ?", (key, now)).fetchone()
                    if row is not None:
                        found[key] = row[0]
        except (sqlite3.Error, OSError) as err:
            log.warning("response cache read failed (treated as a miss): %s", err)
        return found

    async def get(self, key: str) -> dict[str, Any] | None:
        """Return the cached answer of ``key``, or None (a miss, mode not ``use``, an error)."""
        return (await self.lookup([key]))[0]

    async def lookup(self, keys: list[str]) -> list[dict[str, Any] | None]:
        """Return the cached value of each key (None: a miss), all None unless mode ``use``."""
        if not self.reads or not keys:
            return [None] * len(keys)
        found = self._values(keys)
        return [json_object(found.get(k)) for k in keys]

    async def cached(self, keys: list[str]) -> list[bool]:
        """Return, for each key, whether it is cached (all False unless mode ``use``)."""
        return [v is not None for v in await self.lookup(keys)]

    async def put(self, key: str, value: dict[str, Any],
                  sample: tuple[str, int] | None = None) -> None:
        """Store an answer (modes ``use`` and ``refresh``) and keep the last `LENGTH_SAMPLES`
        samples of its family; errors are logged, not raised."""
        if self.mode == "off":
            return
        now = self.clock()
        try:
            with self._db() as db:
                db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?)",
                           (key, valid_text(json.dumps(value, ensure_ascii=False)),
                            now + self.ttl_s))
                if sample is not None:
                    db.execute("INSERT INTO lengths VALUES (?, ?, ?)", (*sample, now))
                    db.execute("DELETE FROM lengths WHERE key = ? AND rowid NOT IN (SELECT "
                               "rowid FROM lengths WHERE key = ? ORDER BY at DESC, rowid DESC "
                               "LIMIT ?)", (sample[0], sample[0], LENGTH_SAMPLES))
                db.execute("DELETE FROM answers WHERE expires_at <= ?", (now,))
        except (sqlite3.Error, OSError) as err:
            log.warning("response cache write failed: %s", err)

    async def mean_length(self, key: str) -> float | None:
        """Return the mean of a family's completion-token samples, or None."""
        if not self.reads:
            return None
        try:
            with self._db() as db:
                row = db.execute("SELECT AVG(tokens) FROM lengths WHERE key = ? AND at > ?",
                                 (key, self.clock() - self.ttl_s)).fetchone()
        except (sqlite3.Error, OSError) as err:
            log.warning("response cache read failed: %s", err)
            return None
        return float(row[0]) if row and row[0] is not None else None


def context_cache(cache: _CacheContext, mode: CacheMode) -> ResponseCache:
    """Return the response cache a run's `CacheContext` names: its Redis, else its SQLite file,
    else none (a `ResponseCache` that is always off), in ``mode``."""
    if cache.redis is None and cache.file is not None:
        return DiskCache(cache.file, cache.namespace, mode)
    return ResponseCache(cache.redis, cache.namespace, mode)
