"""The baseline store: one suite's results at one commit, kept in Redis for later pull requests.

A record holds the repository, the commit SHA, where it came from (a push to a branch or the
base run of a pull request), when, the key it is stored under and the `SuiteResult` with every
example's output, scores and assertions (worker/evals/serialize.py), as JSON, compressed with
zlib above `COMPRESS_OVER_BYTES`. A record larger than ``LLMGATE_BASELINE_MAX_BYTES`` is not
stored (the run says so); the run is simply done again next time.

Keys (``repo`` is ``owner/name``)::

    llmgate:baseline:<repo>:<sha>:<key digest>   one suite's record, expires after the TTL
    llmgate:baseline-latest:<repo>:<branch>      {"sha", "keys", "pushed_at", "created_at"}
    llmgate:baseline-runs:<repo>:<key digest>    sorted set: sha -> created_at, the commits
                                                 holding a record of that key (`runs`)

Retention: records expire ``LLMGATE_BASELINE_TTL_S`` seconds (default 30 days) after they were
made, except those of the latest push to each branch: `BaselineStore.mark_latest` removes
their expiry and gives the previous latest's records back theirs (counted from when that
push was stored), in one Lua script.

Only the base side of a pull request (the repository's own code) or a push to the default
branch is ever stored; nothing computed from a pull request's head.
"""

from __future__ import annotations

import json
import logging
import os
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from redis.asyncio import Redis

from worker.baselines.keys import BaselineKey
from worker.evals.serialize import (
    SerializeError,
    suite_result_from_json,
    suite_result_to_json,
    valid_text,
)
from worker.evals.types import SuiteResult
from worker.history_contract import DEFAULT_BRANCH_RUNS, DEFAULT_PR_DAYS, HistoryRetention
from worker.runtime import SettingsError

log = logging.getLogger("llmgate.baselines")

#: Version of the stored record; records of another version are ignored (run again).
RECORD_VERSION = 1
KEY_PREFIX = "llmgate:baseline:"
LATEST_PREFIX = "llmgate:baseline-latest:"
RUNS_PREFIX = "llmgate:baseline-runs:"
DEFAULT_TTL_S = 30 * 24 * 3600
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
#: JSON larger than this is stored zlib-compressed.
COMPRESS_OVER_BYTES = 4096
#: Upper bounds of the history's retention settings: a bigger number of runs is memory no one
#: planned for, and Redis refuses an expiry past about 1e11 days (a refused EXPIREAT in the
#: history's script, after its writes, would leave a key that never expires).
MAX_HISTORY_RUNS = 100_000
MAX_HISTORY_PR_DAYS = 36_500
_JSON, _ZLIB = b"j", b"z"

#: KEYS[1] latest pointer; ARGV[1] new pointer JSON, ARGV[2] its pushed_at (s), ARGV[3] TTL (s).
#: Returns 0 when a later push is already the latest (nothing changes), else 1.
_MARK_LATEST = """
local old = redis.call('GET', KEYS[1])
local new = cjson.decode(ARGV[1])
if old then
  local doc = cjson.decode(old)
  if tonumber(doc.pushed_at) > tonumber(ARGV[2]) then return 0 end
  for _, key in ipairs(doc.keys) do
    redis.call('EXPIREAT', key, math.floor(tonumber(doc.created_at) + tonumber(ARGV[3])))
  end
end
redis.call('SET', KEYS[1], ARGV[1])
for _, key in ipairs(new.keys) do redis.call('PERSIST', key) end
return 1
"""


@dataclass(frozen=True)
class BaselineSettings:
    """How long records live and how large one may be, and how much history is kept.

    Attributes:
        ttl_s: seconds a record lives (``LLMGATE_BASELINE_TTL_S``, default 30 days).
        max_bytes: largest stored record after compression (``LLMGATE_BASELINE_MAX_BYTES``,
            default 16 MiB; Redis allows 512 MB per value).
        history_runs: default-branch runs of the quality history kept per repository
            (``LLMGATE_HISTORY_RUNS``, default 500; 0 records none: worker/baselines/timeline.py).
        history_pr_days: days a pull request gate's history record is kept
            (``LLMGATE_HISTORY_PR_DAYS``, default 90; 0 records none).
    """

    ttl_s: int = DEFAULT_TTL_S
    max_bytes: int = DEFAULT_MAX_BYTES
    history_runs: int = DEFAULT_BRANCH_RUNS
    history_pr_days: int = DEFAULT_PR_DAYS

    @property
    def history(self) -> HistoryRetention:
        """The history's retention (worker/history_contract.py)."""
        return HistoryRetention(self.history_runs, self.history_pr_days)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> BaselineSettings:
        """Read ``LLMGATE_BASELINE_TTL_S``, ``LLMGATE_BASELINE_MAX_BYTES``,
        ``LLMGATE_HISTORY_RUNS`` and ``LLMGATE_HISTORY_PR_DAYS``.

        Raises:
            SettingsError: a value is not a whole number in range (one line naming it).
        """
        env = os.environ if environ is None else environ
        return cls(_whole(env, "LLMGATE_BASELINE_TTL_S", DEFAULT_TTL_S, 60),
                   _whole(env, "LLMGATE_BASELINE_MAX_BYTES", DEFAULT_MAX_BYTES, 1024),
                   _whole(env, "LLMGATE_HISTORY_RUNS", DEFAULT_BRANCH_RUNS, 0,
                          MAX_HISTORY_RUNS),
                   _whole(env, "LLMGATE_HISTORY_PR_DAYS", DEFAULT_PR_DAYS, 0,
                          MAX_HISTORY_PR_DAYS))


def _whole(env: Mapping[str, str], name: str, default: int, low: int,
           high: int | None = None) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < low or \
            (high is not None and int(raw) > high):
        bound = f"from {low} to {high:,}" if high is not None else f"at least {low}"
        raise SettingsError(f"{name} must be a whole number {bound}")
    return int(raw)


@dataclass(frozen=True)
class Baseline:
    """One suite's stored result at one commit.

    Attributes:
        repo: ``owner/name``.
        sha: the commit the suite ran at (40 hex).
        key: what the result depends on (`BaselineKey`).
        result: the suite's result.
        origin: ``push`` (a push to ``branch``) or ``pull_request`` (the base run of
            pull request ``pr_number``).
        branch: the pushed branch ("" for a pull request's base run).
        pr_number: the pull request whose base run made it (0 for a push).
        created_at: when the suite ran, Unix seconds.
    """

    repo: str
    sha: str
    key: BaselineKey
    result: SuiteResult
    origin: Literal["push", "pull_request"]
    branch: str = ""
    pr_number: int = 0
    created_at: float = 0.0


def record_key(repo: str, sha: str, key: BaselineKey) -> str:
    """Return the Redis key of one suite's record."""
    return f"{KEY_PREFIX}{repo}:{sha}:{key.digest}"


def runs_key(repo: str, key: BaselineKey) -> str:
    """Return the Redis key of the index of commits holding a record of ``key``."""
    return f"{RUNS_PREFIX}{repo}:{key.digest}"


def latest_key(repo: str, branch: str) -> str:
    """Return the Redis key of a branch's latest-push pointer."""
    return f"{LATEST_PREFIX}{repo}:{branch}"


def encode(baseline: Baseline) -> bytes:
    """Return the stored bytes of ``baseline``: a one-byte format mark, then JSON (zlib-
    compressed above `COMPRESS_OVER_BYTES`). Text that is not valid Unicode (a lone surrogate
    an older result still holds) is stored with U+FFFD in its place, never raised."""
    doc = {"version": RECORD_VERSION, "repo": baseline.repo, "sha": baseline.sha,
           "key": baseline.key.as_json(), "origin": baseline.origin, "branch": baseline.branch,
           "pr_number": baseline.pr_number, "created_at": baseline.created_at,
           "result": suite_result_to_json(baseline.result)}
    data = valid_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":"))).encode("utf-8")
    if len(data) > COMPRESS_OVER_BYTES:
        return _ZLIB + zlib.compress(data, 6)
    return _JSON + data


def decode(raw: bytes) -> Baseline:
    """Rebuild a `Baseline` from `encode`'s bytes.

    Raises:
        ValueError: the bytes are not a record of this version (corrupt, truncated, other).
    """
    mark, body = raw[:1], raw[1:]
    try:
        data = zlib.decompress(body) if mark == _ZLIB else body if mark == _JSON else b""
        doc: Any = json.loads(data)
    except (zlib.error, ValueError) as err:
        raise ValueError(f"unreadable baseline record: {err}") from None
    if not isinstance(doc, dict) or doc.get("version") != RECORD_VERSION:
        raise ValueError("not a baseline record of this version")
    try:
        return Baseline(str(doc["repo"]), str(doc["sha"]), BaselineKey.from_json(doc["key"]),
                        suite_result_from_json(doc["result"]), doc["origin"],
                        str(doc["branch"]), int(doc["pr_number"]), float(doc["created_at"]))
    except (KeyError, TypeError, SerializeError) as err:
        raise ValueError(f"malformed baseline record: {err}") from None


class BaselineStore:
    """Baselines of every repository in one Redis (see the module docstring)."""

    def __init__(self, redis: Redis, settings: BaselineSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.settings = settings or BaselineSettings()
        self.clock = clock

    async def get(self, repo: str, sha: str, key: BaselineKey) -> Baseline | None:
        """Return the record of ``key`` at ``sha``, or None (absent, expired or unreadable:
        an unreadable record is logged and treated as absent, so the suite runs again)."""
        raw = await self.redis.get(record_key(repo, sha, key))
        if raw is None:
            return None
        try:
            found = decode(raw)
        except ValueError as err:
            log.warning("ignoring baseline %s of %s@%s: %s", key.suite, repo, sha[:7], err)
            return None
        return found if found.key == key and found.sha == sha else None

    async def put(self, baseline: Baseline) -> str | None:
        """Store ``baseline`` with the TTL; return None, or why it was not stored (too large).

        Storing the same record again (a job run twice) rewrites it and restarts its TTL.
        """
        data = encode(baseline)
        if len(data) > self.settings.max_bytes:
            return (f"{len(data)} bytes compressed, over the cap of {self.settings.max_bytes} "
                    "(LLMGATE_BASELINE_MAX_BYTES)")
        index = runs_key(baseline.repo, baseline.key)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(record_key(baseline.repo, baseline.sha, baseline.key), data,
                     ex=self.settings.ttl_s)
            pipe.zadd(index, {baseline.sha: baseline.created_at})
            pipe.expire(index, self.settings.ttl_s)
            await pipe.execute()
        return None

    async def runs(self, repo: str, key: BaselineKey, limit: int) -> list[Baseline]:
        """Return up to ``limit`` records of ``key`` at any commit, newest first.

        Read from the index `put` keeps; a commit whose record expired or is unreadable is
        skipped (and dropped from the index). For the flakiness evidence of
        worker/baselines/history.py: runs of the same key are runs of unchanged examples.
        """
        index = runs_key(repo, key)
        shas = await self.redis.zrevrange(index, 0, max(limit, 1) * 2 - 1)
        found: list[Baseline] = []
        for raw_sha in shas:
            sha = raw_sha.decode() if isinstance(raw_sha, bytes) else str(raw_sha)
            record = await self.get(repo, sha, key)
            if record is None:
                await self.redis.zrem(index, raw_sha)
            elif len(found) < limit:
                found.append(record)
        return found

    async def mark_latest(self, repo: str, branch: str, sha: str, keys: Sequence[BaselineKey],
                          pushed_at: float) -> bool:
        """Make ``sha``'s records the latest of ``branch`` (kept without expiry).

        ``pushed_at`` (Unix seconds, the push event's ``repository.pushed_at``) orders pushes:
        a push older than the current latest changes nothing (returns False), so jobs that
        finish out of order cannot move the pointer back.
        """
        pointer = {"sha": sha, "keys": [record_key(repo, sha, k) for k in keys],
                   "pushed_at": pushed_at, "created_at": self.clock()}
        done = await self.redis.eval(  # type: ignore[misc]  # redis-py: Awaitable | value
            _MARK_LATEST, 1, latest_key(repo, branch), json.dumps(pointer), str(pushed_at),
            str(self.settings.ttl_s))
        return bool(done)

    async def latest(self, repo: str, branch: str) -> dict[str, Any] | None:
        """Return the latest-push pointer of ``branch`` (see the module docstring), or None."""
        raw = await self.redis.get(latest_key(repo, branch))
        pointer: dict[str, Any] | None = json.loads(raw) if raw is not None else None
        return pointer
