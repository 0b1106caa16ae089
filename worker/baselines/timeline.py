"""Record the quality history: each default-branch push and each pull request gate, in Redis.

The dashboard (issue 35) reads what this module writes, through worker/history_contract.py
(the key layout, record shapes and readers, which the web process may import too). The records
are built by worker/baselines/timeline_records.py; this module writes them, one Lua script per
write, with the repository's retention applied in the same script:

- a push to the default branch (worker/jobs/push.py, per config) is a **branch run** at the
  pushed commit, ordered by the push time; a repository keeps its newest
  ``LLMGATE_HISTORY_RUNS`` (default 500) and drops its oldest first. Branch runs never expire.
- a pull request gate (worker/gate/history_record.py, once its check run is published) is a
  **pull request gate** with both sides and the rule verdicts, kept in its own index, never in
  the branch's. Its keys expire ``LLMGATE_HISTORY_PR_DAYS`` (default 90) days after it was
  recorded, and each write drops from the index the gates older than that (and beyond
  `MAX_PR_RUNS`), so no index grows without bound.

Writing history never fails a gate or a push: every error (Redis down, full or read-only; a
record that cannot be built) is logged as a WARNING with its text and counted in
``llmgate_history_write_errors_total``, and the write is bounded by `WRITE_TIMEOUT_S`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from redis.asyncio import Redis

from worker.baselines.gate_records import judge_records, output_fields, output_records
from worker.baselines.store import BaselineSettings
from worker.baselines.timeline_records import suite_fields
from worker.evals.types import (
    GateReport,
    RunResult,
)
from worker.history_contract import (
    HISTORY_PREFIX,
    HISTORY_VERSION,
    JUDGES_FIELD,
    MAX_PR_RUNS,
    REPOS_KEY,
    AcceptRecord,
    ConfigRecord,
    RunKind,
    RunMeta,
    Side,
    branch_key,
    dumps,
    examples_key,
    pr_run_id,
    prs_key,
    run_key,
)
from worker.runtime import METRICS, Family

log = logging.getLogger("llmgate.history")

#: Bound on one history write, seconds: a slow Redis must not hold a gate's job up.
WRITE_TIMEOUT_S = 2.0
HISTORY_ERRORS = Family("llmgate_history_write_errors", "counter",
                        "History records (issue 35) not written, by kind (branch, "
                        "pull_request, accept); the gate's conclusion is unchanged.", ("kind",))

#: KEYS: run hash, examples hash, index, repos. ARGV: [1] key prefix of the repository,
#: [2] run id, [3] its index score, [4] now (s), [5] repo, [6] runs kept by count,
#: [7] index score below which runs are dropped ('' none), [8] expire-at (s, 0 none),
#: [9] run-hash fields count n, then n field/value pairs of the run hash, then pairs of the
#: examples hash. Returns how many runs were dropped. A key of another type is refused before
#: anything is written (a script is not rolled back after a failed command).
_WRITE = """
local kinds = {'hash', 'hash', 'zset', 'zset'}
for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= kinds[i] and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. kind .. ', not a ' .. kinds[i])
  end
end
local prefix, id = ARGV[1], ARGV[2]
local function drop(ids)
  for _, old in ipairs(ids) do
    redis.call('DEL', prefix .. 'run:' .. old, prefix .. 'ex:' .. old)
  end
  return #ids
end
local n = tonumber(ARGV[9])
local run, ex = {}, {}
for i = 10, 9 + 2 * n do run[#run + 1] = ARGV[i] end
for i = 10 + 2 * n, #ARGV do ex[#ex + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(run))
if #ex > 0 then redis.call('HSET', KEYS[2], unpack(ex)) end
if tonumber(ARGV[8]) > 0 then
  redis.call('EXPIREAT', KEYS[1], ARGV[8])
  redis.call('EXPIREAT', KEYS[2], ARGV[8])
end
redis.call('ZADD', KEYS[3], ARGV[3], id)
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[5])
local dropped = 0
if ARGV[7] ~= '' then
  dropped = dropped + drop(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[7]))
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[7])
end
local keep = tonumber(ARGV[6])
local count = redis.call('ZCARD', KEYS[3])
if count > keep then
  dropped = dropped + drop(redis.call('ZRANGE', KEYS[3], 0, count - keep - 1))
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, count - keep - 1)
end
return dropped
"""
#: KEYS: a pull request gate's run hash. ARGV: the `AcceptRecord` JSON. 1 when recorded.
_ACCEPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'accept', ARGV[1])
return 1
"""


class Timeline:
    """Writes a repository's history (module docstring) into the queue's Redis.

    ``clock`` gives Unix seconds (injected by tests to age records without sleeping).
    """

    def __init__(self, redis: Redis, settings: BaselineSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.settings = settings or BaselineSettings()
        self.clock = clock

    async def write(self, meta: RunMeta, fields: Sequence[str], blobs: Sequence[str | bytes],
                    config: ConfigRecord) -> int:
        """Write one run (or one config's part of it) and apply the retention; return how
        many old runs were dropped.

        Raises:
            redis.exceptions.RedisError: Redis refused or failed (nothing is half written:
                one script).
        """
        repo, run_id, now = meta["repo"], meta["run_id"], meta["created_at"]
        branch = meta["kind"] == "branch"
        keep = self.settings.history_runs if branch else MAX_PR_RUNS
        window_s = self.settings.history_pr_days * 86400
        cut = "" if branch else repr(now - window_s)
        expire_at = 0 if branch else math.ceil(now + window_s)
        run_fields = ["meta", dumps(meta), f"c|{config['folder']}", dumps(config), *fields]
        dropped = await self.redis.eval(  # type: ignore[misc]  # redis-py: Awaitable | value
            _WRITE, 4, run_key(repo, run_id), examples_key(repo, run_id),
            branch_key(repo) if branch else prs_key(repo), REPOS_KEY,
            f"{HISTORY_PREFIX}{repo}:", run_id, repr(meta["order_s"]), repr(now), repo,
            str(keep), cut, str(expire_at), str(len(run_fields) // 2), *run_fields,
            *cast("list[str]", blobs))  # bytes are sent as they are; redis-py types str
        return int(dropped)

    def meta(self, kind: RunKind, repo: str, run_id: str, sha: str, **more: Any) -> RunMeta:
        """Return a run's `RunMeta` made now; ``more`` sets its other fields."""
        now = self.clock()
        meta = RunMeta(v=HISTORY_VERSION, kind=kind, repo=repo, run_id=run_id, sha=sha,
                       base_sha="", branch="", pr_number=0, created_at=now, order_s=now,
                       conclusion="", why="", base_source="", report_url="", report_id="",
                       check_run_id=0)
        meta.update(more)  # type: ignore[typeddict-item]  # the callers' keys are RunMeta's
        return meta

    async def push(self, *, repo: str, namespace: str, sha: str, branch: str, pushed_at: float,
                   run: RunResult, base_source: str, duration_s: float,
                   report_url: str = "") -> int:
        """Record one config's suites of a push to the default branch as the branch run at
        ``sha`` (``namespace`` is the config's baseline namespace: ``repo`` or
        ``repo/<folder>``; ``report_url`` the config's stored report,
        ``<public url>/reports/<id>``, or ""); return how many old runs were dropped (0 when
        the retention is 0). With several configs each writes the run's meta, which links the
        last config's report; each config's record keeps its own (`ConfigRecord`).

        Raises:
            redis.exceptions.RedisError: Redis refused or failed.
        """
        if self.settings.history_runs <= 0:
            return 0
        folder = namespace[len(repo) + 1:] if namespace.startswith(repo + "/") else ""
        meta = self.meta("branch", repo, sha, sha, branch=branch, conclusion="stored",
                         base_source=base_source, report_url=report_url,
                         report_id=report_id(report_url))
        meta["order_s"] = float(pushed_at) if pushed_at > 0 else meta["created_at"]
        fields, blobs = suite_fields(folder, "base", run, None)
        config = ConfigRecord(folder=folder, duration_s=round(duration_s, 3))
        if report_url:
            config["report_url"] = report_url
        return await self.write(meta, fields, blobs, config)

    async def gate(self, *, repo: str, pr_number: int, check_run_id: int, head_sha: str,
                   base_sha: str, base_ref: str, configs: Sequence[tuple[str, GateReport]],
                   conclusion: str, why: str, report_url: str, duration_s: float,
                   redact: Callable[[str], str] | None = None) -> int:
        """Record a pull request gate: both sides of every config's suites (suites of a
        folder's config named ``<folder>: <suite>``), the verdicts, ``conclusion`` and ``why``
        (as published), the report's link, the judges' agreement with people where the gate
        measured it (`judge_records`) and, with ``redact`` (the reports' redaction), the
        outputs of the examples that changed or fail (`output_records`; none without it);
        return how many runs were dropped.

        Raises:
            redis.exceptions.RedisError: Redis refused or failed.
        """
        if self.settings.history_pr_days <= 0:
            return 0
        fields: list[str] = []
        blobs: list[str | bytes] = []
        sources = []
        judges = []
        for folder, report in configs:
            sides: tuple[tuple[Side, RunResult | None], ...] = (("base", report.base),
                                                                 ("head", report.head))
            for side, run in sides:
                more, more_blobs = suite_fields(folder, side, run, report)
                fields += more
                blobs += more_blobs
            if redact is not None:
                blobs += output_fields(output_records(folder, report, redact))
            judges += judge_records(report, folder)
            if report.base_source:
                sources.append(report.base_source)
        if judges:
            fields += [JUDGES_FIELD, dumps(judges)]
        meta = self.meta("pull_request", repo, pr_run_id(pr_number, check_run_id), head_sha,
                         base_sha=base_sha, branch=base_ref, pr_number=pr_number,
                         conclusion=conclusion, why=why, base_source="; ".join(sources),
                         report_url=report_url or "", report_id=report_id(report_url),
                         check_run_id=check_run_id)
        return await self.write(meta, fields, blobs,
                                ConfigRecord(folder="", duration_s=round(duration_s, 3)))

    async def accepted(self, *, repo: str, pr_number: int, check_run_id: int, by: str,
                       at: float) -> bool:
        """Add who passed a blocked gate (Accept regression, Let through) to its record;
        False when the gate has no record (never recorded, or past its retention).

        Raises:
            redis.exceptions.RedisError: Redis refused or failed.
        """
        done = await self.redis.eval(  # type: ignore[misc]  # redis-py: Awaitable | value
            _ACCEPT, 1, run_key(repo, pr_run_id(pr_number, check_run_id)),
            dumps(AcceptRecord(by=by, at=at)))
        return bool(done)


async def safely(kind: str, what: str, write: Callable[[], Any]) -> bool:
    """Await ``write()`` within `WRITE_TIMEOUT_S`; return False, logged (WARNING, with the
    error's text) and counted (`HISTORY_ERRORS`), when it fails or takes too long.

    Never raises an ``Exception``: history must not change a gate's or a push's result.
    Cancellation (a ``BaseException``) still propagates.
    """
    try:
        async with asyncio.timeout(WRITE_TIMEOUT_S):
            await write()
    except Exception as err:  # noqa: BLE001 - history is best effort (module docstring)
        text = str(err) or type(err).__name__
        log.warning("history of %s not recorded (%s): %s", what, type(err).__name__, text)
        METRICS.inc(HISTORY_ERRORS, kind)
        return False
    return True


async def record_push(redis: Redis, settings: BaselineSettings, *, repo: str, namespace: str,
                      sha: str, branch: str, pushed_at: float, run: RunResult,
                      base_source: str, duration_s: float, report_url: str = "",
                      clock: Callable[[], float] = time.time) -> bool:
    """Record a push's config as a branch run (`Timeline.push`, ``report_url`` its stored
    report or ""); never raises (`safely`)."""
    timeline = Timeline(redis, settings, clock)
    return await safely("branch", f"{namespace}@{sha[:7]}", lambda: timeline.push(
        repo=repo, namespace=namespace, sha=sha, branch=branch, pushed_at=pushed_at, run=run,
        base_source=base_source, duration_s=duration_s, report_url=report_url))


def report_id(report_url: str | None) -> str:
    """Return the id of a stored report's URL (``<public url>/reports/<id>`` -> ``<id>``;
    "" for None or "")."""
    return (report_url or "").rstrip("/").rpartition("/")[2]


async def record_acceptance(redis: Redis, *, repo: str, pr_number: int, check_run_id: int,
                            by: str, at: float) -> bool:
    """Add an acceptance to a pull request gate's record (`Timeline.accepted`); return whether
    it was added (False: no such record, or the write failed). Never raises (`safely`)."""
    added: list[bool] = []

    async def write() -> None:
        added.append(await Timeline(redis).accepted(
            repo=repo, pr_number=pr_number, check_run_id=check_run_id, by=by, at=at))

    return await safely("accept", f"{repo}#{pr_number}", write) and added == [True]
