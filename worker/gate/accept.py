"""Check run buttons, "Accept regression" and "Let through": a writer passes a blocked gate.

A finished ``llmgate`` check run of a pull request carries a **Re-run** button and, when the
gate failed on its rules (not on a configuration error or a crashed run), an **Accept
regression** button; when the run was undecided (``action_required``: over budget or time,
provider errors outside the pull request, base could not run, an inconclusive rule; see
worker/evals/verdict/health.py) a **Let through** button instead. Both buttons are the same action
(``accept``) and are checked again in the worker, never trusted from the payload: the presser
must have write access (GitHub's ``admin``/``write``; ``maintain`` is reported as ``write``),
the run must be one llmgate recorded as a failed or undecided gate, its conclusion must still
be the recorded one (``failure`` or ``action_required``), no newer llmgate run of the same
pull request may exist on that commit, and the commit must still be the pull request's head.
Then the run is concluded ``success`` and an audit line (who, when, which rules or why it was
undecided) is put first in its summary and in the sticky comment.

Redis (30 days): ``llmgate:failed:<owner>/<repo>#<check_run_id>`` holds the failed rules of a
gate run; ``llmgate:accepted:<owner>/<repo>#<check_run_id>`` makes one acceptance per run (a
second click changes nothing); ``llmgate:acceptance:<owner>/<repo>#<pr>@<head_sha>`` is the
last acceptance of that head. **A later run of an accepted head is a fresh verdict**: when it
fails again it stays failed, with a note saying who accepted this head before and which rules,
and the button to accept again (an acceptance covers one check run, never future ones).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from worker.baselines import record_acceptance
from worker.contract import ACCEPT_ACTION, COMMENT_MARKER, RERUN_ACTION, AcceptPayload
from worker.evals.serialize import json_object
from worker.evals.types import GateReport, RuleOutcome
from worker.gate import shared_head
from worker.gate.request import GateRequest
from worker.gate.trust import WRITE_PERMISSIONS
from worker.github import (
    CheckOutput,
    CheckRunInfo,
    GitHubClient,
    GitHubError,
    find_sticky_comment,
    with_marker,
)
from worker.report import safe
from worker.runtime import locks

log = logging.getLogger("llmgate.worker")

#: How long failure records and acceptances are kept, seconds (30 days).
ACCEPT_TTL_S = 30 * 24 * 3600
#: The buttons (GitHub: label <= 20, description <= 40, identifier <= 20 characters).
RERUN_BUTTON = {"label": "Re-run", "description": "Run the evals again on this commit",
                "identifier": RERUN_ACTION}
ACCEPT_BUTTON = {"label": "Accept regression",
                 "description": "Pass this failed gate (writers only)",
                 "identifier": ACCEPT_ACTION}
LET_THROUGH_BUTTON = {"label": "Let through",
                      "description": "Pass this undecided run (writers only)",
                      "identifier": ACCEPT_ACTION}
#: The conclusions a writer may pass, with the button that does it.
BUTTONS = {"failure": ACCEPT_BUTTON, "action_required": LET_THROUGH_BUTTON}
#: Rules named in one audit line; more are counted.
MAX_RULES_SHOWN = 10


def failed_key(repo_key: str, check_run_id: int) -> str:
    """Redis key of a failed gate run's record (``repo_key`` is ``owner/name``)."""
    return f"llmgate:failed:{repo_key}#{check_run_id}"


def accepted_key(repo_key: str, check_run_id: int) -> str:
    """Redis key that makes one acceptance per check run."""
    return f"llmgate:accepted:{repo_key}#{check_run_id}"


def acceptance_key(repo_key: str, pr_number: int, head_sha: str) -> str:
    """Redis key of the last acceptance of one pull request head."""
    return f"llmgate:acceptance:{repo_key}#{pr_number}@{head_sha}"


def is_acceptable(report: GateReport) -> bool:
    """Return whether a writer may pass a report: it failed on its rules or was undecided
    (``action_required``), and its config was valid."""
    return report.conclusion in BUTTONS and report.config_error is None


def check_actions(request: GateRequest, report: GateReport) -> list[dict[str, str]]:
    """Return the buttons of a finished gate run: Re-run, plus Accept regression for an
    acceptable failure or Let through for an undecided run.

    A merge-group run (no pull request comment) gets Re-run only.
    """
    if request.comment and is_acceptable(report):
        return [dict(RERUN_BUTTON), dict(BUTTONS[report.conclusion])]
    return [dict(RERUN_BUTTON)]




def failed_rules(report: GateReport) -> list[str]:
    """Return the rules that failed the gate, e.g. ``tickets pass_rate max_drop 0.05``.

    Failed threshold rules, regressions and inconclusive rules whose effect is ``failure``;
    a failure decided by the headline alone (e.g. judge errors) gives ``[headline]``.
    """
    def failing(o: RuleOutcome) -> bool:
        return o.status in ("fail", "regression") or (
            o.status == "inconclusive" and o.effect == "failure")

    rules = [" ".join(part for part in (o.suite, o.metric + (f" [{o.group}]" if o.group else ""),
                                        o.rule) if part)
             for o in report.outcomes if failing(o)]
    if report.conclusion == "action_required" and report.headline:
        rules = [report.headline]  # undecided: why, not rules (none failed)
    if not rules and report.headline:
        rules = [report.headline]
    return list(dict.fromkeys(safe(r) for r in rules))


def rules_text(rules: list[str]) -> str:
    """Return rules as code spans joined by commas, at most `MAX_RULES_SHOWN` then a count."""
    shown = ", ".join(f"`{r}`" for r in rules[:MAX_RULES_SHOWN])
    more = len(rules) - MAX_RULES_SHOWN
    return (f"{shown} and {more} more" if more > 0 else shown) or "the gate's rules"


def utc(epoch_s: float) -> str:
    """Return ``2026-12-01 10:00 UTC`` for Unix seconds."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch_s))


def audit_line(accepter: str, at_s: float, head_sha: str, rules: list[str],
               conclusion: str = "failure") -> str:
    """Return the audit line of an acceptance (markdown; logins in code spans: no mention).

    ``conclusion`` is the recorded one: ``failure`` (Accept regression) or
    ``action_required`` (Let through: ``rules`` is then why the run was undecided).
    """
    if conclusion == "action_required":
        return (f"**Undecided run let through** by `{safe(accepter, 100)}` on {utc(at_s)} "
                f"for `{head_sha[:7]}`: {rules_text(rules)}. The gate could not decide and a "
                "collaborator with write access let this check run pass.")
    return (f"**Regression accepted** by `{safe(accepter, 100)}` on {utc(at_s)} for "
            f"`{head_sha[:7]}`: {rules_text(rules)}. The gate failed on these rules and a "
            "collaborator with write access accepted them for this check run.")


async def prepare_report(redis: Redis, request: GateRequest, check_run_id: int,
                         report: GateReport) -> GateReport:
    """Before a gate run completes: remember an acceptable failure and note a past acceptance.

    Returns ``report``, with one more note when this head of this pull request was accepted
    before and fails again ("accepted before by ..."). Merge-group runs are returned unchanged.
    """
    if not request.comment or not is_acceptable(report):
        return report
    repo_key = f"{request.repo['owner']}/{request.repo['name']}"
    record = {"pr_number": request.pr_number, "head_sha": request.head_sha,
              "base_sha": request.base_sha, "rules": failed_rules(report),
              "conclusion": report.conclusion}
    await redis.set(failed_key(repo_key, check_run_id), json.dumps(record), ex=ACCEPT_TTL_S)
    raw = await redis.get(acceptance_key(repo_key, request.pr_number, request.head_sha))
    previous = json_object(raw)
    if previous is None:
        return report
    rules = "; ".join(safe(str(r)) for r in list(previous["rules"])[:MAX_RULES_SHOWN])
    note = (f"This commit's regression was accepted before by {safe(str(previous['by']), 100)} "
            f"on {utc(float(previous['at']))} ({rules or 'the gate rules'}); this run is a "
            "fresh verdict: a writer can press Accept regression again.")  # the report escapes
    return dataclasses.replace(report, notes=(*report.notes, note))


async def failure_record(redis: Redis, repo_key: str, check_run_id: int) -> dict[str, Any] | None:
    """Return the failed or undecided gate run's record (``pr_number``, ``head_sha``,
    ``base_sha``, ``rules``, ``conclusion``: ``failure`` when absent, as records written before
    undecided runs were), or None when llmgate recorded none for that check run."""
    return json_object(await redis.get(failed_key(repo_key, check_run_id)))


async def claim_acceptance(redis: Redis, repo_key: str, check_run_id: int, accepter: str,
                           at_s: float) -> bool:
    """Record that ``accepter`` accepts this check run; False when it was accepted already."""
    stored = await redis.set(accepted_key(repo_key, check_run_id),
                             json.dumps({"by": accepter, "at": at_s}), nx=True, ex=ACCEPT_TTL_S)
    return bool(stored)


async def remember_acceptance(redis: Redis, repo_key: str, pr_number: int, head_sha: str,
                              accepter: str, at_s: float, rules: list[str],
                              check_run_id: int) -> None:
    """Keep the last acceptance of this head (what a later failing run's note names)."""
    value = {"by": accepter, "at": at_s, "rules": rules, "check_run_id": check_run_id}
    await redis.set(acceptance_key(repo_key, pr_number, head_sha), json.dumps(value),
                    ex=ACCEPT_TTL_S)


async def release_acceptance(redis: Redis, repo_key: str, check_run_id: int) -> None:
    """Undo `claim_acceptance` when the check run could not be updated (so it can be retried)."""
    await redis.delete(accepted_key(repo_key, check_run_id))


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

    The button's job (`worker.jobs.events.accept_regression`) calls this; nothing of the payload
    is trusted. Every refusal changes nothing on GitHub and returns a status saying why:
    ``refused`` (no write access), ``not_acceptable`` (not a failed or undecided gate llmgate
    recorded for this pull request and commit), ``stale`` (the pull request's head moved on, or
    it is closed), ``not_failed`` (the run's conclusion is no longer the recorded ``failure`` or
    ``action_required``), ``superseded`` (a newer llmgate run of this pull request exists on the
    commit) or ``duplicate`` (accepted already); else ``accepted``.

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
    record = await failure_record(redis, repo_key, run_id)
    if record is None or (record.get("pr_number"), record.get("head_sha")) != (
            payload["pr_number"], head_sha):
        return {"status": "not_acceptable"}
    pull = await gh.get_pull(owner, name, payload["pr_number"])
    if pull.head_sha != head_sha or pull.state != "open":
        return {"status": "stale"}
    run, newer = await _current_run(gh, owner, name, head_sha, run_id)
    recorded = str(record.get("conclusion") or "failure")
    if run is None or recorded not in BUTTONS or run.conclusion != recorded:
        return {"status": "not_failed"}
    if newer:
        return {"status": "superseded"}
    now, rules = time.time(), [str(r) for r in record.get("rules") or []]
    if not await claim_acceptance(redis, repo_key, run_id, who, now):
        return {"status": "duplicate"}
    line = audit_line(who, now, head_sha, rules, recorded)
    what = "let through" if recorded == "action_required" else "regression accepted"
    await _pass_run(redis, gh, payload, CheckOutput(
        f"llmgate: pass ({what} by {safe(who, 100)})", f"{line}\n\n---\n\n{run.summary}",
        run.text))
    await remember_acceptance(redis, repo_key, payload["pr_number"], head_sha, who, now,
                                     rules, run_id)
    await record_acceptance(redis, repo=repo_key, pr_number=payload["pr_number"],
                            check_run_id=run_id, by=who, at=now)  # history; never raises
    await _audit_comment(redis, gh, payload, line, bot_login)
    log.info("%s of %s#%d@%s by %s", what, repo_key, payload["pr_number"], head_sha[:7], who)
    return {"status": "accepted", "head_sha": head_sha}


async def _pass_run(redis: Redis, gh: GitHubClient, payload: AcceptPayload,
                    output: CheckOutput) -> None:
    """Conclude the accepted check run with ``output`` (first the other pull requests of its
    head have their say, `worker.gate.shared_head.accepted`); undo the acceptance when that
    fails.

    Raises:
        GitHubError: GitHub refused the update.
    """
    repo, run_id, head_sha = payload["repo"], payload["check_run_id"], payload["head_sha"]
    try:
        async with shared_head.held(redis, repo, head_sha):  # other PRs of this head
            conclusion, output = await shared_head.accepted(redis, gh, repo, head_sha,
                                                            payload["pr_number"], run_id, output)
            await gh.update_check_run(repo["owner"], repo["name"], run_id, {
                "status": "completed", "conclusion": conclusion, "output": output.to_json(),
                "actions": [dict(RERUN_BUTTON)]})
    except BaseException:
        await release_acceptance(redis, f"{repo['owner']}/{repo['name']}", run_id)
        raise


async def _audit_comment(redis: Redis, gh: GitHubClient, payload: AcceptPayload, line: str,
                         bot_login: Callable[[], Awaitable[str]]) -> None:
    """Add the audit ``line`` to the pull request's sticky comment; a refusal (e.g. a locked
    conversation) is logged: the check run carries the line already."""
    repo = payload["repo"]
    try:  # the check run carries the audit line already: the comment's copy is a courtesy
        await add_audit_to_comment(redis, gh, repo["owner"], repo["name"], payload["pr_number"],
                                   line, await bot_login())
    except GitHubError as err:  # e.g. a locked conversation
        log.warning("%s#%d: the audit line was not added to the comment (%s)",
                    f"{repo['owner']}/{repo['name']}", payload["pr_number"], err)
