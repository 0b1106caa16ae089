"""Reactions and short replies: courtesies that never stop a run, a rerun or an approval.

A reaction to a ``/llmgate`` command and a one-line reply are for the people in the
conversation; the work they announce must happen whether or not GitHub takes them. GitHub
refuses them on a locked conversation ("Reactions ... in a locked conversation are disabled for
all users"; an App's comment gets 403 "Unable to create comment because issue is locked.":
GitHub docs "Locking conversations"), on a deleted comment (404), or when it is down. Each
refusal is logged with GitHub's status and message (never a token: `GitHubError` messages hold
the method, the API path and GitHub's words only) and the caller goes on.
"""

from __future__ import annotations

import logging

from worker.github.client import GitHubClient
from worker.github.errors import GitHubError

log = logging.getLogger("llmgate.worker")


async def react(gh: GitHubClient, owner: str, repo: str, comment_id: int, content: str) -> bool:
    """Add the reaction ``content`` to issue comment ``comment_id``; False when GitHub refused
    it (logged).

    Raises:
        ValueError: ``content`` is not a reaction GitHub knows (`GitHubClient.add_reaction`).
    """
    try:
        await gh.add_reaction(owner, repo, comment_id, content)
    except GitHubError as err:
        log.warning("%s/%s: reaction %s to comment %d not added (%s)", owner, repo, content,
                    comment_id, err)
        return False
    return True


async def reply(gh: GitHubClient, owner: str, repo: str, number: int, body: str) -> int | None:
    """Post ``body`` as a comment on issue/PR ``number``; its id, or None when GitHub refused
    it (logged)."""
    try:
        return await gh.create_issue_comment(owner, repo, number, body)
    except GitHubError as err:
        log.warning("%s/%s#%d: reply not posted (%s)", owner, repo, number, err)
        return None
