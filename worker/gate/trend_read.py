"""Read the default branch's history of a gate's gated metrics, for the trend lines (issue 35).

worker/gate/run.py calls `read_trends` once per gate, before it renders the sticky comment and
the check run, and passes the result to worker/report/multi.py, which draws one line per gated
metric (worker/report/trend.py), and to the check runs of configs that report on their own
(worker/gate/config_checks.py, ``checks: per_config``), so the gate reads once.
One read: the last `TREND_RUNS` default-branch runs
(`worker.history_contract.list_branch_runs`, one ``ZREVRANGE`` and one pipelined ``HGETALL``
per run), bounded by `READ_TIMEOUT_S`. The trend is a courtesy: no history, a slow or failed
Redis, a record of another shape all leave the lines out (logged with the error's text), never
change the gate.

The history is written by pushes to the default branch only (worker/jobs/push.py); nothing a
pull request's head computes is in it. Suite and metric names come from the base's config and
are escaped by the report.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Collection, Sequence

from redis.asyncio import Redis

from worker.history_contract import RunRecord, list_branch_runs
from worker.pipeline import MultiReport
from worker.report import TrendData, wanted

log = logging.getLogger("llmgate.history")

#: Default-branch runs read for a trend line (the newest).
TREND_RUNS = 20
#: Bound on the read, seconds: a slow Redis must not hold the gate's comment up.
READ_TIMEOUT_S = 1.0


def trend_data(runs: Sequence[RunRecord], keys: Collection[tuple[str, str]]) -> TrendData | None:
    """Return the values of ``keys`` ((suite as the history names it, metric)) at the base
    side of ``runs`` (newest first, as `list_branch_runs` returns them), oldest first; None
    when no run holds any of them. Values that are not finite numbers are skipped.

    Raises:
        KeyError, TypeError, AttributeError: a record not of the contract's shape (the caller
            leaves the lines out).
    """
    series: dict[tuple[str, str], list[float]] = {}
    for run in reversed(runs):
        for suite in run["suites"]:
            if suite.get("side") != "base":
                continue
            for metric, record in (suite.get("metrics") or {}).items():
                value = record.get("value") if isinstance(record, dict) else None
                key = (str(suite.get("suite")), str(metric))
                if key in keys and isinstance(value, int | float) \
                        and not isinstance(value, bool) and math.isfinite(value):
                    series.setdefault(key, []).append(float(value))
    if not series:
        return None
    return TrendData(str(runs[0].get("branch") or ""), {k: tuple(v) for k, v in series.items()})


async def read_trends(redis: Redis, repo: str, multi: MultiReport, *, runs: int = TREND_RUNS,
                      timeout_s: float = READ_TIMEOUT_S) -> TrendData | None:
    """Return the default branch's last ``runs`` values of every gated metric of ``multi``
    in repository ``repo`` (``owner/name``), or None: nothing gated, no history (logged at
    INFO), or the read failed or took over ``timeout_s`` seconds (logged at WARNING with the
    error's text).

    Never raises an ``Exception``; cancellation still propagates.
    """
    keys = wanted(multi)
    if not keys or runs <= 0:
        return None
    try:
        async with asyncio.timeout(timeout_s):
            found = await list_branch_runs(redis, repo, limit=runs)
        data = trend_data(found, keys) if found else None
    except Exception as err:  # noqa: BLE001 - the trend is best effort (module docstring)
        log.warning("trend of %s not shown (%s): %s", repo, type(err).__name__,
                    str(err) or "no detail")
        return None
    if data is None:
        log.info("trend of %s not shown: no default-branch history of its gated metrics", repo)
    return data
