"""Keep a gate run's evaluated reports in Redis until they are published (issue 31).

A gate run pays for its model calls before it publishes anything. When publishing fails for a
while (GitHub answers 5xx while the check run is completed, Redis is away), arq runs the job
again (`worker.gate.check_run.retry_later`); before this store, that try evaluated base and head
once more and paid again (with the response cache off, every call twice). The reports are now
stored once evaluated (redacted, as they will be published) and a later try of the same job
only publishes them. They are forgotten once the check run is completed, and expire after
`RESULTS_TTL_S` otherwise (a job arq gave up).

The key names what was evaluated and by which job (`results_key`): the repository, the pull
request, the head and base SHAs and a digest of the run (the job id, whose suffix tells an
explicit re-run from the first, and the request's options that change an evaluation:
``no_cache``, ``trusted``). A re-run asked for (``/llmgate rerun``, re-run button) is another
job and evaluates afresh.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.errors import ConfigError
from worker.evals.serialize import SerializeError, from_jsonable, to_jsonable
from worker.evals.types import GateReport
from worker.gate.request import GateRequest
from worker.pipeline import CheckMode, ConfigReport, MultiReport

log = logging.getLogger("llmgate.worker")

#: How long evaluated reports wait for a later try of their job to publish them, seconds (a
#: job's tries span at most its backoffs and time limits: hours, never a day).
RESULTS_TTL_S = 24 * 3600
#: The stored format's version: a record of another version is not used (evaluated afresh).
VERSION = 1


def results_key(request: GateRequest, job_id: str) -> str:
    """Return the Redis key of the reports job ``job_id`` evaluated for ``request``."""
    run = json.dumps({"job": job_id, "no_cache": request.no_cache, "trusted": request.trusted},
                     sort_keys=True)
    digest = hashlib.sha256(run.encode("utf-8")).hexdigest()[:16]
    repo = f"{request.repo['owner']}/{request.repo['name']}"
    return (f"llmgate:gate-results:{repo}:{request.pr_number}:{request.head_sha}:"
            f"{request.base_sha}:{digest}")


def encode(multi: MultiReport) -> bytes:
    """Return ``multi`` as JSON bytes (each config error kept as path, line and message)."""
    configs = [{"path": c.path, "folder": c.folder,
                "report": to_jsonable(replace(c.report, config_error=None)),
                "config_error": _error_json(c.report.config_error)} for c in multi.configs]
    doc = {"version": VERSION, "configs": configs, "checks": multi.checks,
           "notes": list(multi.notes)}
    return json.dumps(doc, sort_keys=True).encode("utf-8")


def decode(raw: bytes) -> MultiReport:
    """Rebuild the reports `encode` stored.

    Raises:
        SerializeError: the record is not one this code wrote (another version, bad JSON or
            values that do not fit the report's types).
    """
    try:
        doc = json.loads(raw)
    except ValueError as err:
        raise SerializeError(f"not JSON: {err}") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise SerializeError("another version of stored gate results")
    configs = []
    for item in doc["configs"]:
        report = from_jsonable(GateReport, item["report"])
        configs.append(ConfigReport(str(item["path"]), str(item["folder"]), replace(
            report, config_error=_error_of(item["config_error"]))))
    checks: CheckMode = "per_config" if doc["checks"] == "per_config" else "combined"
    return MultiReport(tuple(configs), checks, tuple(str(n) for n in doc["notes"]))


async def store(redis: Redis, key: str, multi: MultiReport) -> None:
    """Keep ``multi`` under ``key`` for `RESULTS_TTL_S` seconds.

    Raises:
        redis.exceptions.RedisError: Redis failed (the job is retried: its next try evaluates
            again, as before this store).
    """
    await redis.set(key, encode(multi), ex=RESULTS_TTL_S)


async def load(redis: Redis, key: str) -> MultiReport | None:
    """Return the reports an earlier try of the job evaluated, or None (none, or a record this
    code cannot read: logged, and evaluated afresh).

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    raw = await redis.get(key)
    if raw is None:
        return None
    try:
        return decode(raw)
    except (SerializeError, KeyError, TypeError) as err:
        log.warning("stored gate results %s not used (%s): evaluating again", key, err)
        return None


async def forget(redis: Redis, key: str) -> None:
    """Drop the reports once published; a Redis failure is logged (the record expires after
    `RESULTS_TTL_S`), never raised: the check run is completed, the job is done."""
    try:
        await redis.delete(key)
    except RedisError as err:
        log.warning("stored gate results %s not dropped (%s): they expire", key,
                    type(err).__name__)


def _error_json(err: ConfigError | None) -> dict[str, Any] | None:
    return None if err is None else {"path": err.path, "line": err.line, "message": err.message}


def _error_of(data: Any) -> ConfigError | None:
    if not isinstance(data, dict):
        return None
    line = data.get("line")
    return ConfigError(str(data["path"]), line if isinstance(line, int) else None,
                       str(data["message"]))
