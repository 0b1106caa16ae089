"""The "Accept regression" / "Let through" button's job: check everything again, then pass.

The rules are in `worker.accept`'s docstring. Every refusal changes nothing on GitHub and
returns a status saying why: ``refused`` (no write access), ``not_acceptable`` (not a failed
or undecided gate llmgate recorded for this pull request and commit), ``stale`` (the pull
request's head moved on, or it is closed), ``not_failed`` (the run's conclusion is no longer
the recorded ``failure`` or ``action_required``),
``superseded`` (a newer llmgate run of this pull request exists on the commit) or
``duplicate`` (accepted already).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from worker import accept, locks, shared_head
from worker.contract import COMMENT_MARKER, AcceptPayload
from worker.github.checks import CheckOutput
from worker.github.client import CheckRunInfo, GitHubClient, GitHubError
from worker.github.comments import find_sticky_comment, with_marker
from worker.trust import WRITE_PERMISSIONS

log = logging.getLogger("llmgate.worker")


async def _current_run(gh: GitHubClient, owner: str, name: str, head_sha: str,
                       check_run_id: int) -> tuple[CheckRunInfo | None, bool]:
    """Return the check run as GitHub has it now, and whether a newer run of its PR exists."""
    runs = [run async for run in gh.list_check_runs(owner, name, head_sha)]
    run = next((r for r in runs if r.id == check_run_id), None)
    newer = run is not None and any(
        r.id > run.id and r.external_id == run.external_id for r in runs)
    return run, newer


async def add_audit_to_comment(redis: Redis, gh: GitHubClient, owner: str, name: str,
                               pr_number: int, line: str, bot_login: str) -> bool:
    """Put ``line`` right under the marker of the PR's sticky comment (this App's, written by
    ``bot_login``); False when there is none."""
    async with locks.held(redis, locks.comment_lock_key(owner, name, pr_number),
                          locks.COMMENT_LOCK_TTL_S):
        comment = await find_sticky_comment(gh, owner, name, pr_number, bot_login)
        if comment is None:
            return False
        body = comment.body.replace(COMMENT_MARKER, f"{COMMENT_MARKER}\n> {line}\n", 1)
        await gh.update_issue_comment(owner, name, comment.id, with_marker(body))
        return True


async def accept_regression(redis: Redis, gh: GitHubClient, payload: AcceptPayload,
                            bot_login: Callable[[], Awaitable[str]]) -> dict[str, str]:
    """Accept a failed gate run if every check passes (module docstring); return the status.

    ``bot_login`` gives this App's bot user (asked only once the run is accepted), whose
    sticky comment gets the audit line.

    Raises:
        GitHubError: GitHub refused a lookup or the update (the acceptance is then undone).
    """
    repo = payload["repo"]
    owner, name, who = repo["owner"], repo["name"], payload["accepter"]
    repo_key, run_id, head_sha = f"{owner}/{name}", payload["check_run_id"], payload["head_sha"]
    permission = await gh.get_permission(owner, name, who)
    if permission not in WRITE_PERMISSIONS:
        log.info("accept refused: %s has %s permission", who, permission)
        return {"status": "refused", "permission": permission}
    record = await accept.failure_record(redis, repo_key, run_id)
    if record is None or (record.get("pr_number"), record.get("head_sha")) != (
            payload["pr_number"], head_sha):
        return {"status": "not_acceptable"}
    pull = await gh.get_pull(owner, name, payload["pr_number"])
    if pull.head_sha != head_sha or pull.state != "open":
        return {"status": "stale"}
    run, newer = await _current_run(gh, owner, name, head_sha, run_id)
    recorded = str(record.get("conclusion") or "failure")
    if run is None or recorded not in accept.BUTTONS or run.conclusion != recorded:
        return {"status": "not_failed"}
    if newer:
        return {"status": "superseded"}
    now, rules = time.time(), [str(r) for r in record.get("rules") or []]
    if not await accept.claim_acceptance(redis, repo_key, run_id, who, now):
        return {"status": "duplicate"}
    line = accept.audit_line(who, now, head_sha, rules, recorded)
    what = "let through" if recorded == "action_required" else "regression accepted"
    output = CheckOutput(f"llmgate: pass ({what} by {accept.safe(who, 100)})",
                         f"{line}\n\n---\n\n{run.summary}", run.text)
    try:
        async with shared_head.held(redis, repo, head_sha):  # other PRs of this head
            conclusion, output = await shared_head.accepted(redis, gh, repo, head_sha,
                                                            payload["pr_number"], run_id, output)
            await gh.update_check_run(owner, name, run_id, {
                "status": "completed", "conclusion": conclusion, "output": output.to_json(),
                "actions": [dict(accept.RERUN_BUTTON)]})
    except BaseException:
        await accept.release_acceptance(redis, repo_key, run_id)
        raise
    await accept.remember_acceptance(redis, repo_key, payload["pr_number"], head_sha, who, now,
                                     rules, run_id)
    try:  # the check run carries the audit line already: the comment's copy is a courtesy
        await add_audit_to_comment(redis, gh, owner, name, payload["pr_number"], line,
                                   await bot_login())
    except GitHubError as err:  # e.g. a locked conversation
        log.warning("%s#%d: the audit line was not added to the comment (%s)", repo_key,
                    payload["pr_number"], err)
    log.info("%s of %s#%d@%s by %s", what, repo_key, payload["pr_number"], head_sha[:7], who)
    return {"status": "accepted", "head_sha": head_sha}
