"""Decide whether a pull request's head may run, and remember writers' approvals per head SHA.

A pull request is **untrusted** when its head repository is not the base repository (a fork;
also a deleted fork) or when its author lacks write access to the base repository (GitHub's
``permission`` ``admin`` or ``write``; ``maintain`` is reported as ``write``). Untrusted code
could read whatever the worker can, so what happens to it is the repository's policy, read
from ``untrusted:`` in ``.llmgate.yml`` **at the base commit** (the pull request cannot change
it; an unreadable or absent base config means the default):

- ``approve`` (default): nothing from the head runs; the check concludes ``action_required``
  with an **Approve and run** button, and a writer's click or ``/llmgate approve`` comment
  approves exactly that head SHA and runs it once (a second approval of it runs nothing; a
  writer's ``/llmgate rerun`` or a reopen of the same SHA may run it again). A later push is a
  new SHA and needs a new approval, also when it comes after a comment the worker has not
  handled yet: a comment approves the head the pull request had when it was written
  (``worker/gate/head_history.py``).
- ``never``: nothing from an untrusted head ever runs (``action_required``, no button).
- ``run``: untrusted heads run like trusted ones (still inside the target sandbox).

Approvals live in Redis under ``llmgate:approval:<owner>/<repo>#<pr>@<sha>`` for 30 days.
This module decides (pure) and stores approvals; ``worker/gate/untrusted.py`` does the GitHub, git
and Redis calls for the jobs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from redis.asyncio import Redis
from yaml.nodes import MappingNode, ScalarNode

from worker.contract import APPROVE_ACTION, APPROVE_COMMAND
from worker.errors import ConfigError
from worker.evals.config import UNTRUSTED_POLICIES, safe_yaml

#: Permissions that make an author trusted and that may approve (GitHub's legacy values).
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
#: The policy when the base config does not say.
DEFAULT_POLICY = "approve"
#: The check run button's text (GitHub allows 20 characters) and description (40).
APPROVE_LABEL = "Approve and run"
APPROVE_DESCRIPTION = "Run this head once (writers only)"
#: How long an approval is kept, seconds (30 days).
APPROVAL_TTL_S = 30 * 24 * 3600
APPROVAL_PREFIX = "llmgate:approval:"

Decision = Literal["run", "wait", "refuse"]


@dataclass(frozen=True)
class PullFacts:
    """What trust depends on, from the webhook payload or ``GET .../pulls/{n}``.

    Attributes:
        base_repo: ``owner/name`` of the base repository.
        head_repo: ``owner/name`` of the head repository, None when the fork was deleted.
        author: login of the pull request's author.
    """

    base_repo: str
    head_repo: str | None
    author: str


@dataclass(frozen=True)
class Approval:
    """A writer's approval of one head SHA: who, how (``comment`` or ``button``), when (Unix s)."""

    approver: str
    source: str
    approved_at: float


@dataclass(frozen=True)
class Verdict:
    """What to do with a pull request head.

    Attributes:
        decision: ``run``, ``wait`` (for an approval) or ``refuse`` (policy ``never``).
        trusted: whether the head is trusted at all.
        reason: one line on why it is untrusted ("" when trusted).
        policy: the repository's ``untrusted`` policy ("" when trusted: not read).
        approval: the approval that lets an untrusted head run, if any.
    """

    decision: Decision
    trusted: bool
    reason: str = ""
    policy: str = ""
    approval: Approval | None = None


def untrusted_reason(facts: PullFacts, author_permission: str | None) -> str:
    """Return why a pull request is untrusted, or "" when it is trusted (pure).

    Args:
        facts: the repositories and author.
        author_permission: the author's permission on the base repository, or None when not
            looked up (a fork is untrusted whatever it is).
    """
    if facts.head_repo is None:
        return "its head repository (a fork) has been deleted"
    if facts.head_repo.lower() != facts.base_repo.lower():
        return f"it comes from the fork `{facts.head_repo}`"
    if author_permission not in WRITE_PERMISSIONS:
        return (f"its author `{facts.author}` does not have write access "
                f"(permission: {author_permission or 'none'})")
    return ""


def decide(reason: str, policy: str, approval: Approval | None) -> Verdict:
    """Combine trust, the repository's policy and any approval into a `Verdict` (pure)."""
    if not reason:
        return Verdict("run", True)
    if policy == "run":
        return Verdict("run", False, reason, policy)
    if policy == "never":
        return Verdict("refuse", False, reason, policy)
    return Verdict("run" if approval else "wait", False, reason, policy, approval)


async def evaluate(
    facts: PullFacts,
    permission_of: Callable[[str], Awaitable[str]],
    base_policy: Callable[[], Awaitable[str]],
    approval_of: Callable[[], Awaitable[Approval | None]],
) -> Verdict:
    """Decide whether a head may run, calling GitHub, git and Redis only as far as needed.

    Args:
        facts: from the payload or the API.
        permission_of: returns a login's permission on the base repository (GitHub API).
        base_policy: returns the ``untrusted`` policy of the base commit's config.
        approval_of: returns the approval of this exact head SHA, if any (Redis).

    Raises:
        Whatever the callables raise (e.g. ``GitHubError``); the job concludes the check.
    """
    same_repo = facts.head_repo is not None and facts.head_repo.lower() == facts.base_repo.lower()
    permission = await permission_of(facts.author) if same_repo else None
    reason = untrusted_reason(facts, permission)
    if not reason:
        return Verdict("run", True)
    policy = await base_policy()
    approval = await approval_of() if policy == "approve" else None
    return decide(reason, policy, approval)


def policy_from_config(text: str | None) -> str:
    """Return the ``untrusted:`` value of a config text, or `DEFAULT_POLICY` (pure).

    Anything unreadable (no file, bad YAML, a YAML bomb, an unknown value) gives the default,
    which is the safe choice: nothing runs without an approval.
    """
    if not text:
        return DEFAULT_POLICY
    try:
        root = safe_yaml.compose(text, "base config")
    except (ConfigError, yaml.YAMLError):
        return DEFAULT_POLICY
    if not isinstance(root, MappingNode):
        return DEFAULT_POLICY
    for key, value in root.value:
        if isinstance(key, ScalarNode) and key.value == "untrusted" \
                and isinstance(value, ScalarNode) and value.value in UNTRUSTED_POLICIES:
            return str(value.value)
    return DEFAULT_POLICY


class ApprovalStore:
    """Writers' approvals per (repository, pull request, head SHA) in Redis."""

    def __init__(self, redis: Redis, ttl_s: int = APPROVAL_TTL_S) -> None:
        """Keep approvals in ``redis`` for ``ttl_s`` seconds."""
        self._redis = redis
        self._ttl_s = ttl_s

    @staticmethod
    def key(repo_key: str, pr_number: int, head_sha: str) -> str:
        """Return the Redis key of one approval."""
        return f"{APPROVAL_PREFIX}{repo_key}#{pr_number}@{head_sha}"

    async def approve(self, repo_key: str, pr_number: int, head_sha: str, approver: str,
                      source: str) -> bool:
        """Record that ``approver`` (a writer, checked by the caller) approved ``head_sha``.

        Returns:
            True when this is the head's first approval, False when it had one already (the
            first is kept: one approval, one run).
        """
        approval = Approval(approver, source, time.time())
        stored = await self._redis.set(self.key(repo_key, pr_number, head_sha),
                                       json.dumps(approval.__dict__), ex=self._ttl_s, nx=True)
        return bool(stored)

    async def get(self, repo_key: str, pr_number: int, head_sha: str) -> Approval | None:
        """Return the approval of exactly this head SHA, or None."""
        raw = await self._redis.get(self.key(repo_key, pr_number, head_sha))
        if raw is None:
            return None
        try:
            data: dict[str, Any] = json.loads(raw)
            return Approval(str(data["approver"]), str(data["source"]),
                            float(data["approved_at"]))
        except (ValueError, KeyError, TypeError):
            return None


def waiting_output(verdict: Verdict, head_sha: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Return the check run ``output`` and ``actions`` for a head that did not run (pure).

    The title is one line; the summary says why, what runs on approval, and how to approve.
    Names in it match GitHub's login and repository patterns and are put in code spans, so
    they cannot carry markdown, mentions or links.
    """
    short = head_sha[:7]
    if verdict.decision == "refuse":
        return {"title": "llmgate: not run (untrusted pull request)",
                "summary": f"Not run: {verdict.reason}, and this repository's `.llmgate.yml` "
                           "(base branch) says `untrusted: never`.\n\nA maintainer can push the "
                           "branch to this repository to gate it."}, []
    summary = (f"Not run: {verdict.reason}, so its code is untrusted.\n\n"
               f"A collaborator with write access can run the evals once for `{short}`: "
               f"press **{APPROVE_LABEL}** above, or comment `{APPROVE_COMMAND}` (or "
               f"`{APPROVE_COMMAND} {short}` to pin the commit). A later push needs a new "
               "approval. Review the diff first: the suites run this commit's code and "
               "prompts with the repository's eval settings.")
    action = {"label": APPROVE_LABEL, "description": APPROVE_DESCRIPTION,
              "identifier": APPROVE_ACTION}
    return {"title": f"llmgate: approval needed to run {short}", "summary": summary}, [action]

