"""``issue_comment`` events: a human's ``/llmgate rerun`` comment on a PR asks for a fresh run.

A ``/llmgate approve`` comment lets an untrusted head run (parsed strictly: `app.routes.approval`).

Only ``created`` comments count (editing an old comment re-triggers nothing), only on pull
requests, and never from a bot, so the App's own comment that mentions the command cannot
trigger it. Whether the commenter may re-run is checked by the worker, which can call GitHub.
"""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from app.routes.approval import parse_approve, plan_comment_approval
from app.routes.decision import Decision
from app.routes.payload import get_id, get_obj, get_str, installation_id, repo_ref
from worker.contract import JOB_RERUN_FROM_COMMENT, RERUN_COMMAND, RerunPayload, rerun_job_id

router = Router()


def is_rerun_command(body: str) -> bool:
    """Return whether a comment ``body``, stripped, starts with ``/llmgate rerun`` as a word.

    ``"/llmgate rerun"`` and ``"/llmgate rerun\\nthe judge timed out"`` match;
    ``"/llmgate rerunx"`` and ``"please /llmgate rerun"`` do not.
    """
    text = body.strip()
    if not text.startswith(RERUN_COMMAND):
        return False
    rest = text[len(RERUN_COMMAND):]
    return not rest or rest[0].isspace()


def is_bot(user_type: str, login: str) -> bool:
    """Return whether a GitHub user is a bot: ``type`` ``"Bot"`` or a login ending in ``[bot]``."""
    return user_type == "Bot" or login.endswith("[bot]")


@router.register("issue_comment", action="created")
async def rerun_from_comment(event: Event, decision: Decision) -> None:
    """Plan a re-run (or an approval) when a human comments ``/llmgate rerun`` on a pull request.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    if get_obj(data, "issue").get("pull_request") is None:
        decision.ignore("comment is on an issue, not a pull request")
    elif (approve_sha := parse_approve(get_str(data, "comment.body"))) is None \
            and not is_rerun_command(get_str(data, "comment.body")):
        decision.ignore("comment is not a rerun or approve command")
    elif is_bot(get_str(data, "comment.user.type"), get_str(data, "comment.user.login")):
        decision.ignore("comment is by a bot")
    elif approve_sha is not None:
        plan_comment_approval(event, decision, approve_sha)
    elif (install_id := installation_id(data)) is None:
        decision.ignore("payload has no installation.id, so the App cannot authenticate")
    else:
        repo = repo_ref(data)
        rerun = RerunPayload(
            delivery_id=event.delivery_id,
            installation_id=install_id,
            repo=repo,
            pr_number=get_id(data, "issue.number"),
            comment_id=get_id(data, "comment.id"),
            commenter=get_str(data, "comment.user.login"),
        )
        decision.enqueue(JOB_RERUN_FROM_COMMENT, rerun, rerun_job_id(repo, rerun["comment_id"]))
