"""What a handler decided about one delivery: enqueue a job, answer, or ignore with a reason.

Handlers only decide; ``app.webhooks`` does the Redis work (de-duplication, then the enqueue) in
one place, so a delivery that fails validation is never marked as seen.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.contract import (
    AcceptPayload,
    ApprovePayload,
    CommandPayload,
    GatePayload,
    InstallationPayload,
    MergeGroupPayload,
    PushPayload,
    RecheckPayload,
    RerunPayload,
)

#: What a job's single positional argument may be.
Payload = (GatePayload | RerunPayload | ApprovePayload | PushPayload | RecheckPayload
           | AcceptPayload | MergeGroupPayload | CommandPayload | InstallationPayload)


@dataclass(frozen=True, slots=True)
class PlannedJob:
    """An arq job to enqueue: ``function`` (a ``worker.contract.JOB_*`` name), its single
    positional ``payload`` and the deterministic ``job_id`` that makes it run once."""

    function: str
    payload: Payload
    job_id: str
    #: A second job id to use when ``job_id`` was queued before and the PR's newest head (the
    #: ``head_record`` key) has since moved to another SHA: the head came back (a force-push
    #: to an older commit), which needs a fresh run. Only the head SHAs of the record and of
    #: the new value are compared, not their base branches (`app.enqueue`). "" for none.
    returned_job_id: str = ""


@dataclass(slots=True)
class Decision:
    """The outcome of routing one delivery; starts as "ignored" (no handler matched).

    Attributes:
        status: short word for the JSON answer, e.g. ``"ignored"``, ``"pong"``, ``"queued"``.
        reason: why it was ignored (empty otherwise).
        job: the job to enqueue, or ``None``.
        head_record: ``(key, value)`` to SET with the enqueue, or ``None``: a pull request's
            newest head and base, ``<head_sha>@<base_ref>`` (`worker.contract.pr_head_value`),
            or ``closed`` (`worker.contract.pr_head_key`).
    """

    status: str = "ignored"
    reason: str = "no handler for this event and action"
    job: PlannedJob | None = None
    head_record: tuple[str, str] | None = None

    def enqueue(self, function: str, payload: Payload, job_id: str,
                returned_job_id: str = "") -> None:
        """Plan ``function(payload)`` under ``job_id`` (see `PlannedJob.returned_job_id`)."""
        self.status, self.reason = "queued", ""
        self.job = PlannedJob(function, payload, job_id, returned_job_id)

    def record_head(self, key: str, value: str) -> None:
        """Also SET ``key`` to ``value`` (a PR's newest head) in the enqueue's round trip."""
        self.head_record = (key, value)

    def ignore(self, reason: str) -> None:
        """Do nothing for this delivery, and say why in the answer and the log."""
        self.status, self.reason, self.job = "ignored", reason, None

    def answer(self, status: str) -> None:
        """Answer with ``status`` and enqueue nothing (e.g. ``"pong"``)."""
        self.status, self.reason, self.job = status, "", None

    def as_json(self) -> dict[str, str]:
        """Return the JSON answer body: ``{"status": ...}`` plus ``"reason"`` when there is one."""
        if self.reason:
            return {"status": self.status, "reason": self.reason}
        return {"status": self.status}
