"""The job contract between the web process and the workers.

This is the only module of ``worker`` that ``app`` imports: job names, payload shapes and how job
ids are made. Payloads are plain JSON values (TypedDicts), so an old worker and a new web process
can overlap during a deploy.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

#: The check run name; branch protection requires it, so it never changes.
CHECK_NAME = "llmgate"
#: Hidden marker line that identifies llmgate's sticky PR comment.
COMMENT_MARKER = "<!-- llmgate -->"
#: The comment command that asks for a fresh run.
RERUN_COMMAND = "/llmgate rerun"
#: The comment command by which a writer lets an untrusted head run (see worker/trust.py).
APPROVE_COMMAND = "/llmgate approve"
#: ``identifier`` of the check run's "Approve and run" button (GitHub allows 20 characters).
APPROVE_ACTION = "approve"

#: arq function names.
JOB_GATE_PULL_REQUEST = "gate_pull_request"
JOB_RERUN_FROM_COMMENT = "rerun_from_comment"
JOB_APPROVE = "approve_pull_request"

#: Redis key prefix for delivery de-duplication, and how long a delivery id is remembered.
DELIVERY_KEY_PREFIX = "llmgate:delivery:"
DELIVERY_TTL_S = 7 * 24 * 3600


class RepoRef(TypedDict):
    """The repository a job works on: ``owner``/``name`` and where to clone it from."""

    owner: str
    name: str
    clone_url: str


class GatePayload(TypedDict):
    """Gate one pull request head against its base.

    ``head_sha``/``base_sha`` are 40-hex commit SHAs; ``installation_id`` is the App installation.
    """

    delivery_id: str
    installation_id: int
    repo: RepoRef
    pr_number: int
    head_sha: str
    base_sha: str
    base_ref: str
    #: ``owner/name`` of the head repository (None: a deleted fork) and the PR's author; what
    #: trust is decided on. Absent from an older web process: the worker then asks GitHub.
    head_repo: NotRequired[str | None]
    author: NotRequired[str]


class RerunPayload(TypedDict):
    """A ``/llmgate rerun`` comment: the worker checks the commenter's permission first."""

    delivery_id: str
    installation_id: int
    repo: RepoRef
    pr_number: int
    comment_id: int
    commenter: str


class ApprovePayload(TypedDict):
    """A writer approves an untrusted PR head, by ``/llmgate approve`` or the check's button.

    ``source`` is ``comment`` or ``button``. ``head_sha`` is the check run's full SHA for a
    button, and for a comment the SHA (or a 7+ hex prefix) it named, or "" for the current
    head. ``comment_id`` is 0 for a button. The worker checks ``approver``'s permission first.
    """

    delivery_id: str
    installation_id: int
    repo: RepoRef
    pr_number: int
    approver: str
    source: str
    head_sha: str
    comment_id: int


def gate_job_id(repo: RepoRef, pr_number: int, head_sha: str, suffix: str = "") -> str:
    """Return the deterministic arq job id of a gate run.

    Two deliveries for the same PR head (``opened`` and ``synchronize`` racing) map to one id, so
    arq starts one job; an explicit re-run passes a ``suffix`` (e.g. the comment id) to get a
    fresh one.
    """
    base = f"gate:{repo['owner']}/{repo['name']}#{pr_number}@{head_sha}"
    return f"{base}:{suffix}" if suffix else base


def rerun_job_id(repo: RepoRef, comment_id: int) -> str:
    """Return the deterministic arq job id of the job handling one rerun comment."""
    return f"rerun:{repo['owner']}/{repo['name']}:comment:{comment_id}"


def approve_job_id(repo: RepoRef, pr_number: int, *, comment_id: int = 0, head_sha: str = "",
                   approver: str = "") -> str:
    """Return the arq job id of an approval: per comment, or per (head SHA, approver) button.

    Two clicks of one writer on one check run make one job; a refused click by a reader does
    not block a writer's.
    """
    base = f"approve:{repo['owner']}/{repo['name']}#{pr_number}"
    return f"{base}:comment:{comment_id}" if comment_id else f"{base}@{head_sha}:{approver}"
