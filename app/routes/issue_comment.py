"""``issue_comment`` events: ``/llmgate`` commands in pull request comments.

A command is the comment's **first line**, exactly (text may follow on later lines):

- ``/llmgate rerun`` gates the PR's current head afresh; ``/llmgate rerun --no-cache`` does it
  without the response cache. The worker checks the commenter may write.
- ``/llmgate approve [sha]`` lets an untrusted head run (`app.routes.approval`).
- ``/llmgate help`` (or a bare ``/llmgate``) gets a reply listing the commands.
- Any other first line starting with the word ``/llmgate`` (``/llmgate rerun please``,
  ``/llmgate rerunx``) is an unknown command: it runs nothing and gets the same reply, saying
  which line was not understood.

Only ``created`` comments count (editing an old comment re-triggers nothing), only on pull
requests, and never from a bot (no command, no reply), so the App's own comments that mention
the commands cannot trigger anything. The web process does no GitHub I/O: replies are posted,
and rate limited per pull request, by the worker (`worker.gate.commands`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gidgethub.routing import Router
from gidgethub.sansio import Event

from app.routes.approval import parse_approve, plan_comment_approval
from app.routes.decision import Decision
from app.routes.payload import NO_INSTALLATION, get_id, get_obj, get_str, installation_id, repo_ref
from worker.contract import (
    JOB_COMMAND_REPLY,
    JOB_RERUN_FROM_COMMENT,
    RERUN_COMMAND,
    CommandPayload,
    RerunPayload,
    event_job_id,
    rerun_job_id,
)

router = Router()
_COMMAND_WORD = re.compile(r"/llmgate(?=\s|$)")
_RERUN_LINE = re.compile(re.escape(RERUN_COMMAND) + r"( --no-cache)?")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9 ._:/-]")
#: Longest quote of an unknown command in the reply, characters.
MAX_QUOTED_CHARS = 60


@dataclass(frozen=True)
class Command:
    """A parsed ``/llmgate`` comment.

    Attributes:
        kind: ``rerun``, ``approve``, ``help`` or ``unknown``.
        no_cache: ``rerun --no-cache``.
        sha: for ``approve``, the pinned SHA prefix ("" for the current head).
        text: for ``unknown``, the first line reduced to safe characters (to quote it).
    """

    kind: str
    no_cache: bool = False
    sha: str = ""
    text: str = ""


def first_line(body: str) -> str:
    """Return the first line of a comment, stripped (``\\r\\n`` line ends too)."""
    return body.strip().splitlines()[0].strip() if body.strip() else ""


def quotable(line: str) -> str:
    """Return ``line`` reduced to letters, digits, spaces and ``._:/-``, at most 60 characters.

    Safe inside a markdown code span: no backtick, ``@`` mention, HTML or newline survives.
    """
    return _UNSAFE_CHARS.sub("", line)[:MAX_QUOTED_CHARS].strip()


def parse_command(body: str) -> Command | None:
    """Return the command a comment ``body`` gives, or None when it is not an llmgate command.

    ``"/llmgate rerun\\nthe judge timed out"`` is a rerun; ``"/llmgate rerun --no-cache"`` one
    without the cache; ``"/llmgate rerun please"`` and ``"/llmgate  rerun"`` are unknown;
    ``"please /llmgate rerun"``, ``"> /llmgate rerun"`` and ``"/llmgaterun"`` are None.
    """
    line = first_line(body)
    if not _COMMAND_WORD.match(line):
        return None
    if (sha := parse_approve(body)) is not None:
        return Command("approve", sha=sha)
    if (rerun := _RERUN_LINE.fullmatch(line)) is not None:
        return Command("rerun", no_cache=rerun.group(1) is not None)
    if line in ("/llmgate", "/llmgate help"):
        return Command("help")
    return Command("unknown", text=quotable(line))


def is_rerun_command(body: str) -> bool:
    """Return whether ``body`` is a ``/llmgate rerun`` command (with or without ``--no-cache``)."""
    command = parse_command(body)
    return command is not None and command.kind == "rerun"


def is_bot(user_type: str, login: str) -> bool:
    """Return whether a GitHub user is a bot: ``type`` ``"Bot"`` or a login ending in ``[bot]``."""
    return user_type == "Bot" or login.endswith("[bot]")


@router.register("issue_comment", action="created")
async def command_from_comment(event: Event, decision: Decision) -> None:
    """Plan the job of a human's ``/llmgate`` command on a pull request.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    command = parse_command(get_str(data, "comment.body"))
    if get_obj(data, "issue").get("pull_request") is None:
        decision.ignore("comment is on an issue, not a pull request")
    elif command is None:
        decision.ignore("comment is not an /llmgate command")
    elif is_bot(get_str(data, "comment.user.type"), get_str(data, "comment.user.login")):
        decision.ignore("comment is by a bot")
    elif command.kind == "approve":
        plan_comment_approval(event, decision, command.sha)
    elif (install_id := installation_id(data)) is None:
        decision.ignore(NO_INSTALLATION)
    elif command.kind == "rerun":
        repo = repo_ref(data)
        rerun = RerunPayload(
            delivery_id=event.delivery_id, installation_id=install_id, repo=repo,
            pr_number=get_id(data, "issue.number"), comment_id=get_id(data, "comment.id"),
            commenter=get_str(data, "comment.user.login"))
        if command.no_cache:
            rerun["no_cache"] = True
        decision.enqueue(JOB_RERUN_FROM_COMMENT, rerun, rerun_job_id(repo, rerun["comment_id"]))
    else:
        repo = repo_ref(data)
        reply = CommandPayload(
            delivery_id=event.delivery_id, installation_id=install_id, repo=repo,
            pr_number=get_id(data, "issue.number"), comment_id=get_id(data, "comment.id"),
            commenter=get_str(data, "comment.user.login"), command=command.text,
            kind=command.kind)
        decision.enqueue(JOB_COMMAND_REPLY, reply,
                         event_job_id("command", repo, f"comment:{reply['comment_id']}"))
