"""Record a published pull request gate in the quality history (worker/baselines/timeline.py).

`gate_completed` is called by worker/gate/run.py once the ``llmgate`` check run is completed:
it records every config's base and head suites, the rule verdicts, this pull request's own
conclusion, the report's Why sentence (worker/report/decision.py) and the Details link. A merge
group's run (no pull request) is not recorded. Like every history write it never raises: an
error is logged and counted, and the gate's result is what it was.
"""

from __future__ import annotations

import time

from worker.baselines.timeline import Timeline, safely
from worker.evals.types import GateReport
from worker.gate.request import GateRequest
from worker.gate.services import Services
from worker.pipeline.multi import MultiReport
from worker.report.decision import decision_sentence


async def gate_completed(services: Services, request: GateRequest, multi: MultiReport,
                         report: GateReport, check_run_id: int, details_url: str | None,
                         started_s: float) -> bool:
    """Record the gate of ``request`` (``report`` is ``multi`` merged, as published;
    ``started_s`` the `time.monotonic` second the gate's job began on it). Return whether a
    record was written (False for a merge group, or when it failed: logged, counted)."""
    if not request.comment or request.pr_number <= 0:
        return False
    repo = f"{request.repo['owner']}/{request.repo['name']}"
    timeline = Timeline(services.redis, services.baselines)

    async def write() -> None:
        await timeline.gate(
            repo=repo, pr_number=request.pr_number, check_run_id=check_run_id,
            head_sha=request.head_sha, base_sha=report.base_sha or request.base_sha,
            base_ref=request.base_ref, configs=[(c.folder, c.report) for c in multi.configs],
            conclusion=report.conclusion, why=decision_sentence(report),
            report_url=details_url or "", duration_s=time.monotonic() - started_s)

    return await safely("pull_request", f"{repo}#{request.pr_number}", write)
