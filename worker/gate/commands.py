"""Replies to ``/llmgate help`` and to unknown ``/llmgate`` commands, rate limited per PR.

The web process decides what a comment is (``app/routes/issue_comment.py``: the first line,
parsed strictly; bots are never answered); the worker posts the reply. At most
`MAX_REPLIES` replies per pull request every `REPLY_WINDOW_S` seconds (a Redis counter,
``llmgate:replies:<owner>/<repo>#<pr>``), so a bot loop or a flood of comments cannot make
llmgate post a flood of comments; the ones over the limit are only logged.
"""

from __future__ import annotations

from redis.asyncio import Redis

from worker.contract import APPROVE_COMMAND, HELP_COMMAND, RERUN_COMMAND

#: Replies allowed per pull request per window.
MAX_REPLIES = 3
#: The window of `MAX_REPLIES`, seconds.
REPLY_WINDOW_S = 3600

COMMANDS = (
    (RERUN_COMMAND, "gate the current head again (writers only)"),
    (f"{RERUN_COMMAND} --no-cache", "the same, without the response cache (every model call is "
                                    "sent again)"),
    (APPROVE_COMMAND, "let an untrusted head run once (writers only); "
                      f"`{APPROVE_COMMAND} <sha>` pins the commit"),
    (HELP_COMMAND, "this list"),
)


def reply_key(repo_key: str, pr_number: int) -> str:
    """Redis key counting replies on one pull request (``repo_key`` is ``owner/name``)."""
    return f"llmgate:replies:{repo_key}#{pr_number}"


def reply_body(kind: str, command: str) -> str:
    """Return the reply's markdown: for ``unknown``, which line was not understood, then the list.

    ``command`` must already be reduced to safe characters (the web process does it); it is
    quoted in a code span. The reply never starts with ``/llmgate`` and has no comment marker,
    so it is neither a command nor llmgate's sticky comment.
    """
    lines = []
    if kind == "unknown":
        lines.append(f"llmgate did not understand `{command}`: the command must be the "
                     "comment's first line, exactly as below.\n")
    lines.append("llmgate commands (the first line of a pull request comment):\n")
    lines += [f"- `{name}`: {what}" for name, what in COMMANDS]
    lines.append("\nThe check run's **Re-run** button (or GitHub's own Re-run) gates the commit "
                 "again; **Accept regression** on a failed check lets a writer pass it.")
    return "\n".join(lines)


async def allow_reply(redis: Redis, repo_key: str, pr_number: int,
                      limit: int = MAX_REPLIES, window_s: int = REPLY_WINDOW_S) -> bool:
    """Count one reply on the pull request; return whether it is within the limit.

    The window starts with the first reply and lasts ``window_s`` seconds.
    """
    key = reply_key(repo_key, pr_number)
    await redis.set(key, 0, ex=window_s, nx=True)  # INCR keeps this expiry
    count = int(await redis.incr(key))
    return count <= limit
