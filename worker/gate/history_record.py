"""Record a published pull request gate in the quality history (worker/baselines/timeline.py).

`gate_completed` is called by worker/gate/run.py once the ``llmgate`` check run is completed:
it records every config's base and head suites, the rule verdicts, what the check run was
published with (`Published`: its conclusion, and the Why sentence or, when another pull
request with the same head decided, its title), the Details link, the judges' agreement with
people where the gate calibrated one, and the outputs of the examples that changed or fail
(redacted again by the process's `Redactor`). A merge group's run (no pull request) is not
recorded. Like every history write it never raises: an error is logged and counted, and the
gate's result is what it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from worker.baselines import Timeline, safely
from worker.evals.types import GateReport
from worker.gate.request import GateRequest
from worker.gate.services import Services
from worker.pipeline import MultiReport
from worker.report import decision_sentence

#: The start of a check title that names the pull request with this head which decided
#: (worker/gate/shared_head.py `shared_output`).
_PREFIX = "llmgate: "


@dataclass(frozen=True)
class Published:
    """What the ``llmgate`` check run was completed with.

    Attributes:
        check_run_id: the check run.
        conclusion: its conclusion, as sent to GitHub: the most blocking verdict among the
            open pull requests of the head (worker/gate/shared_head.py), not always this pull
            request's own.
        own_title: the title this pull request's own verdict gave.
        title: the title sent (another pull request's when it decided).
        details_url: the stored report's link, or None.
    """

    check_run_id: int
    conclusion: str
    own_title: str
    title: str
    details_url: str | None = None


def published_why(report: GateReport, published: Published) -> str:
    """Return the Why of what was published: the report's Why sentence (the summary's
    `decision_sentence`) when the check run shows this pull request's own verdict, else the
    title that names the pull request with the same head which decided."""
    if published.title != published.own_title:
        return published.title.removeprefix(_PREFIX)
    return decision_sentence(report)


async def gate_completed(services: Services, request: GateRequest, multi: MultiReport,
                         report: GateReport, published: Published, started_s: float) -> bool:
    """Record the gate of ``request`` as ``published`` (``report`` is ``multi`` merged, as
    published; ``started_s`` the `time.monotonic` second the gate's job began on it). Return
    whether a record was written (False for a merge group, or when it failed: logged,
    counted)."""
    if not request.comment or request.pr_number <= 0:
        return False
    repo = f"{request.repo['owner']}/{request.repo['name']}"
    timeline = Timeline(services.redis, services.baselines)

    async def write() -> None:
        await timeline.gate(
            repo=repo, pr_number=request.pr_number, check_run_id=published.check_run_id,
            head_sha=request.head_sha, base_sha=report.base_sha or request.base_sha,
            base_ref=request.base_ref, configs=[(c.folder, c.report) for c in multi.configs],
            conclusion=published.conclusion, why=published_why(report, published),
            report_url=published.details_url or "", duration_s=time.monotonic() - started_s,
            redact=services.redactor.redact)

    return await safely("pull_request", f"{repo}#{request.pr_number}", write)
