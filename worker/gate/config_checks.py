"""The check runs of configs that report on their own (``settings.checks: per_config``).

After a gate run with configs in folders, each of them gets a check run ``llmgate: <folder>``
on the head SHA with its own conclusion, output and annotations, and a Re-run button (which
re-runs the whole pull request). The ``llmgate`` check run stays the one branch protection
requires: it concludes with the worst of all configs and carries the Accept regression button.

Each check run is registered (`worker.gate.registry`, run id ``<job>|<PR>|<folder>``) from its
creation until it is concluded, so a retry of the job updates it instead of creating a second one
and the sweeper concludes it should the job be lost. A failure while completing one concludes it
``failure`` (``cancelled`` when the run is stopped) before the error goes on, unless arq will try
the job again (then the next try completes it).

Each config's check run shows, under its metric table, the trend of its gated metrics on the
default branch (issue 35: worker/report/trend.py), as the ``llmgate`` check run does, from the
trends the gate read once (worker/gate/run.py, `worker.gate.trend_read.read_trends`); without
history there are no lines.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from redis.exceptions import RedisError

from worker.contract import pr_external_id
from worker.gate.accept import RERUN_BUTTON
from worker.gate.check_run import (
    TRANSIENT_ERRORS,
    OpenRun,
    conclude,
    finish,
    forget,
    redis_failed,
)
from worker.gate.registry import RunRegistry, new_entry
from worker.gate.request import GateRequest
from worker.github import CheckOutput, GitHubClient, complete_check_run
from worker.pipeline import ConfigReport, MultiReport
from worker.report import ReportStore, TrendData, render_html, store_report, trend_lines
from worker.report import multi as report_multi
from worker.report import render as report
from worker.runtime import JobRef


async def publish_config_checks(registry: RunRegistry, gh: GitHubClient, request: GateRequest,
                                job: JobRef | None, multi: MultiReport,
                                reports: ReportStore | None = None,
                                trends: TrendData | None = None) -> list[int]:
    """Create and complete the check run of every config `report_multi.separate_checks` names.

    Args:
        trends: the default branch's history of the gated metrics, as the gate read it for
            the ``llmgate`` check run (`worker.gate.trend_read.read_trends`); each config's
            check run shows its lines under its metric table. None: no lines.

    Returns:
        Their check run ids, in config order.

    Raises:
        GitHubError, redis.exceptions.RedisError: creating, registering or completing failed
            (the check run is concluded first, unless arq tries the job again).
    """
    ids = []
    for config in report_multi.separate_checks(multi):
        run = await _open(registry, gh, request, job, config)
        try:
            await _complete(gh, request, config, run.check_run_id, reports, trends)
        except BaseException as err:
            if isinstance(err, TRANSIENT_ERRORS) and job is not None and not job.last_try:
                raise  # the next try completes the same check run
            stopped = isinstance(err, asyncio.CancelledError)
            await finish(registry, gh, request.repo["owner"], request.repo["name"], run,
                         "cancelled" if stopped else "failure",
                         "The run was stopped." if stopped else
                         f"The check run could not be completed ({type(err).__name__}).")
            raise
        await forget(registry, run)
        ids.append(run.check_run_id)
    return ids


async def _open(registry: RunRegistry, gh: GitHubClient, request: GateRequest,
                job: JobRef | None, config: ConfigReport) -> OpenRun:
    """Return the config's check run: the one an earlier try registered, or a new one."""
    owner, name, head_sha = request.repo["owner"], request.repo["name"], request.head_sha
    external_id = request.external_id or pr_external_id(request.pr_number)
    output = {"title": "llmgate: running", "summary": f"Completing `{config.path}`."}
    if job is not None:
        entry = await registry.get(job.job_id, request.pr_number, config.folder)
        if entry is not None and (entry.owner, entry.name, entry.head_sha) == (owner, name,
                                                                               head_sha):
            await registry.put(dataclasses.replace(entry, attempt=job.attempt,
                                                   updated_at=time.time()))
            return OpenRun(entry.check_run_id, entry.run_id)
    check_run_id = await gh.create_check_run(owner, name, head_sha, status="in_progress",
                                             output=output, external_id=external_id,
                                             name=config.check_name)
    if job is None:
        return OpenRun(check_run_id)
    entry = new_entry(job.job_id, check_run_id, job.installation_id, owner, name,
                      request.pr_number, head_sha, job.attempt, config=config.folder)
    try:
        await registry.put(entry)
    except RedisError as err:  # never leave an unregistered check run in progress
        await conclude(gh, owner, name, check_run_id, "cancelled", redis_failed(err))
        raise
    return OpenRun(check_run_id, entry.run_id)


def config_output(config: ConfigReport, trends: TrendData | None) -> CheckOutput:
    """Return the output of ``config``'s own check run (`report_multi.config_output`) with the
    trend lines of its gated metrics in ``trends`` under its metric table (none: as before)."""
    output = report_multi.config_output(config)
    trend = trend_lines(config.report, trends, config.folder)
    if not trend:
        return output
    return dataclasses.replace(output, summary=report.check_summary(config.report, trend))


async def _complete(gh: GitHubClient, request: GateRequest, config: ConfigReport,
                    check_run_id: int, reports: ReportStore | None,
                    trends: TrendData | None) -> None:
    """Complete one config's check run with its report (and its trend lines)."""
    output = config_output(config, trends)
    await complete_check_run(gh, request.repo["owner"], request.repo["name"], check_run_id,
                             config.report.conclusion, output, report.annotations(config.report),
                             [dict(RERUN_BUTTON)],
                             details_url=await store_report(
                                 reports, output, lambda: render_html(MultiReport((config,))),
                                 f"{request.repo['owner']}/{request.repo['name']}"))
