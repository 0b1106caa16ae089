"""Keep exactly one llmgate comment per pull request, edited in place on every run.

The comment is found by the hidden ``contract.COMMENT_MARKER`` line, as Python core's bots find
theirs; only comments written by this App's own bot user (``<slug>[bot]``, from ``GET /app``)
are considered, so neither a person quoting the marker nor another bot (a second llmgate App,
a bot that copies comments) is ever edited. GitHub refuses long comment bodies (its 422 says
"Body is too long (maximum is 65536 characters)"; the REST description states no limit); a body
is cut to `worker.github.limits.MAX_COMMENT_BYTES` (65535) bytes of UTF-8, which fits every
reading of that limit, on a character boundary.
"""

from __future__ import annotations

from worker.contract import COMMENT_MARKER
from worker.github.client import GitHubClient, IssueComment
from worker.github.limits import MAX_COMMENT_BYTES, clip_bytes


def with_marker(body: str) -> str:
    """Return ``body`` containing the marker (prepended as a line if missing), cut to at most
    `MAX_COMMENT_BYTES` bytes of UTF-8 on a character boundary."""
    if COMMENT_MARKER not in body:
        body = f"{COMMENT_MARKER}\n{body}"
    clipped = clip_bytes(body, MAX_COMMENT_BYTES)
    if COMMENT_MARKER not in clipped:
        clipped = clip_bytes(f"{COMMENT_MARKER}\n{body}", MAX_COMMENT_BYTES)
    return clipped


def is_sticky(comment: IssueComment, bot_login: str) -> bool:
    """Return whether ``comment`` is llmgate's sticky comment: this App's bot wrote it and it
    carries the marker.

    Args:
        comment: a comment as listed by ``GitHubClient.list_issue_comments``.
        bot_login: this App's bot login (``AppInfo.bot_login``, e.g. ``llmgate[bot]``).
    """
    return (comment.user_type == "Bot" and comment.user_login == bot_login
            and COMMENT_MARKER in comment.body)


async def find_sticky_comment(client: GitHubClient, owner: str, repo: str, number: int,
                              bot_login: str) -> IssueComment | None:
    """Return the oldest sticky comment on issue/PR ``number`` across all pages, or None."""
    async for comment in client.list_issue_comments(owner, repo, number):
        if is_sticky(comment, bot_login):
            return comment
    return None


async def upsert_sticky_comment(client: GitHubClient, owner: str, repo: str, number: int,
                                body: str, *, bot_login: str) -> int:
    """Edit llmgate's comment on PR ``number`` to ``body``, or create it; return its id.

    ``bot_login`` is this App's bot login (`is_sticky`).

    The body gets the marker as its first line when it lacks one. An existing comment whose body
    is already identical is left alone (no request). A create that failed but may have been
    performed (a 502 after GitHub acted) adopts the sticky comment it made instead of posting a
    second one (`GitHubClient.create_issue_comment`).

    Raises:
        GitHubError: GitHub refused a request (see ``GitHubClient``).
    """
    body = with_marker(body)
    existing = await find_sticky_comment(client, owner, repo, number, bot_login)
    if existing is None:
        async def made() -> int | None:  # a create that failed but may have been performed
            found = await find_sticky_comment(client, owner, repo, number, bot_login)
            return None if found is None else found.id

        return await client.create_issue_comment(owner, repo, number, body, find=made)
    if existing.body != body:
        await client.update_issue_comment(owner, repo, existing.id, body)
    return existing.id
