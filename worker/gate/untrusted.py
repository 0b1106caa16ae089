"""The jobs' side of untrusted pull requests: look up trust, conclude waiting checks, approve.

The decisions are `worker.gate.trust`'s and `worker.gate.head_history`'s (pure); this module
makes the calls they need: the author's permission and the pull request (GitHub), the base
commit's ``untrusted`` policy (git), approvals and the heads each pull request had (Redis).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from worker.checkout import Checkouts, GitError
from worker.contract import ApprovePayload, GatePayload, RepoRef, pr_external_id
from worker.errors import ConfigError
from worker.evals.config import read_repo_file, safe_yaml
from worker.evals.types import CONFIG_FILENAME
from worker.gate.head_history import HeadAt, HeadHistory, bind_comment, github_time_s
from worker.gate.trust import (
    DEFAULT_POLICY,
    WRITE_PERMISSIONS,
    Approval,
    ApprovalStore,
    PullFacts,
    Verdict,
    evaluate,
    policy_from_config,
    waiting_output,
)
from worker.github import GitHubClient, PullInfo, courtesy

log = logging.getLogger(__name__)


def facts_from_payload(payload: GatePayload) -> PullFacts | None:
    """Return the trust facts a ``pull_request`` payload carries, or None (older web process)."""
    if "author" not in payload or "head_repo" not in payload:
        return None
    repo = payload["repo"]
    return PullFacts(f"{repo['owner']}/{repo['name']}", payload["head_repo"], payload["author"])


def facts_from_pull(repo: RepoRef, pull: PullInfo) -> PullFacts:
    """Return the trust facts of a pull request read from the API."""
    return PullFacts(f"{repo['owner']}/{repo['name']}", pull.head_repo_full_name,
                     pull.author_login)


async def read_base_policy(checkouts: Checkouts, repo: RepoRef, base_sha: str,
                           token: str | None) -> str:
    """Return the ``untrusted`` policy of ``.llmgate.yml`` at the base commit.

    The base commit is the repository's own code, so checking it out is safe. A config that
    is missing, unreadable or broken, or a git failure, gives `DEFAULT_POLICY` (``approve``).
    """
    key = f"{repo['owner']}/{repo['name']}"
    try:
        async with checkouts.worktree(key, repo["clone_url"], base_sha, token) as root:
            data = read_repo_file(root, CONFIG_FILENAME, safe_yaml.MAX_YAML_CHARS)
        return policy_from_config(data.decode("utf-8", "replace"))
    except (ConfigError, GitError, ValueError, OSError) as err:
        log.info("base config of %s@%s unreadable (%s): untrusted policy %s", key,
                 base_sha[:7], type(err).__name__, DEFAULT_POLICY)
        return DEFAULT_POLICY


async def verdict_for(gh: GitHubClient, checkouts: Checkouts, store: ApprovalStore,
                      repo: RepoRef, pr_number: int, head_sha: str, base_sha: str,
                      facts: PullFacts | None) -> Verdict:
    """Decide whether this head runs (see `evaluate`); facts come from the API when None.

    Raises:
        GitHubError: GitHub refused a lookup (the job concludes the check as failed).
    """
    owner, name = repo["owner"], repo["name"]
    if facts is None:
        facts = facts_from_pull(repo, await gh.get_pull(owner, name, pr_number))

    async def permission_of(login: str) -> str:
        return await gh.get_permission(owner, name, login)

    async def base_policy() -> str:
        return await read_base_policy(checkouts, repo, base_sha, await gh.installation_token())

    async def approval_of() -> Approval | None:
        return await store.get(f"{owner}/{name}", pr_number, head_sha)

    return await evaluate(facts, permission_of, base_policy, approval_of)


async def conclude_waiting(gh: GitHubClient, repo: RepoRef, check_run_id: int, pr_number: int,
                           head_sha: str, verdict: Verdict) -> None:
    """Conclude the check run ``action_required`` with the explanation and the button.

    ``external_id`` ``pr:<number>`` lets the button's ``requested_action`` name the pull
    request (GitHub leaves ``check_run.pull_requests`` empty for forks).
    """
    output, actions = waiting_output(verdict, head_sha)
    body: dict[str, Any] = {"status": "completed", "conclusion": "action_required",
                            "external_id": pr_external_id(pr_number), "output": output}
    if actions:
        body["actions"] = actions
    await gh.update_check_run(repo["owner"], repo["name"], check_run_id, body)


@dataclass(frozen=True)
class ApprovalOutcome:
    """What an approval came to.

    Attributes:
        status: ``approved`` (new, of the current head: the caller runs the gate), ``refused``
            (no write access), ``stale`` (not the head, or a comment written before the head
            was pushed) or ``duplicate`` (this head was approved before).
        pull: the pull request when ``approved``, else None.
        reply: for a ``stale`` comment, the reply saying which commit it approves and how to
            approve the head ("" for none).
    """

    status: str
    pull: PullInfo | None = None
    reply: str = ""


async def record_approval(gh: GitHubClient, store: ApprovalStore, heads: HeadHistory,
                          payload: ApprovePayload) -> ApprovalOutcome:
    """Check the approver may write, bind the approval to a head SHA, store the approval once.

    A button approves the SHA of the check run it sits on. A comment approves the head the pull
    request had when it was written (``comment_created_at`` against the heads recorded from
    the ``pull_request`` deliveries, `worker.gate.head_history`), or the full SHA it names;
    either only while it is still the head. The reaction to the command is a courtesy: GitHub
    refusing it (a locked conversation) is logged and changes none of this, so a stored
    approval always gets its run.

    Raises:
        GitHubError: GitHub refused the permission or pull request lookup.
        redis.exceptions.RedisError: Redis refused or could not be reached.
    """
    repo = payload["repo"]
    owner, name, approver = repo["owner"], repo["name"], payload["approver"]
    permission = await gh.get_permission(owner, name, approver)
    if permission not in WRITE_PERMISSIONS:
        log.info("approval refused: %s has %s permission", approver, permission)
        return ApprovalOutcome("refused")
    pull = await gh.get_pull(owner, name, payload["pr_number"])
    if payload["source"] == "comment":
        refusal = bind_comment(payload["head_sha"], pull.head_sha,
                               await _head_when_written(heads, payload))
    else:
        refusal = "" if payload["head_sha"] == pull.head_sha else "stale button"
    if refusal:
        if payload["comment_id"]:
            await courtesy.react(gh, owner, name, payload["comment_id"], "confused")
        log.info("approval of %s/%s#%d by %s does not cover the head %s", owner, name,
                 payload["pr_number"], approver, pull.head_sha[:7])
        return ApprovalOutcome("stale", None, refusal if payload["comment_id"] else "")
    new = await store.approve(f"{owner}/{name}", payload["pr_number"], pull.head_sha, approver,
                              payload["source"])
    if payload["comment_id"]:
        await courtesy.react(gh, owner, name, payload["comment_id"], "+1")
    return ApprovalOutcome("approved", pull) if new else ApprovalOutcome("duplicate")


async def _head_when_written(heads: HeadHistory, payload: ApprovePayload) -> HeadAt:
    """The head recorded as current when the approve comment was written."""
    written_s = github_time_s(payload.get("comment_created_at", ""))
    if written_s is None:
        return HeadAt("", "its delivery did not say when it was written")
    repo = payload["repo"]
    return await heads.head_at(f"{repo['owner']}/{repo['name']}", payload["pr_number"],
                               written_s)
