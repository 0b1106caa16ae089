"""``llmgate action --comment``: post the App's sticky comment with the workflow's token.

The comment is the one the App writes (``llmgate run --format comment``), created or edited in
place by the App's own `worker.github.comments.upsert_sticky_comment`, so a re-run of the job
edits the one comment. It is found again by its hidden marker and its author: the bot the
token comments as (``github-actions[bot]`` for a workflow's ``GITHUB_TOKEN``).

Posting never decides the job: every way it can fail (no token, a read-only token of a pull
request from a fork answering 403, GitHub unreachable) comes back as one line for a
``::warning`` and the job summary, and the exit code stays the gate's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: The environment variable the Action hands the token in (set only with ``comment: true``).
TOKEN_ENV = "LLMGATE_GITHUB_TOKEN"  # noqa: S105 - a variable name, not a secret
#: The login a workflow's ``GITHUB_TOKEN`` comments as.
DEFAULT_COMMENT_AUTHOR = "github-actions[bot]"
#: Seconds one HTTP request to GitHub may take (connect, send, answer).
HTTP_TIMEOUT_S = 30.0
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\Z")


@dataclass(frozen=True)
class CommentTarget:
    """Where the comment goes and as whom.

    Attributes:
        api_url: GitHub's REST root (``GITHUB_API_URL``; ``https://api.github.com``, or
            ``https://HOST/api/v3`` on GitHub Enterprise Server).
        owner / repo: the repository of the pull request (``GITHUB_REPOSITORY``).
        number: the pull request's number.
        author: the login the token comments as (only that bot's comment is edited).
    """

    api_url: str
    owner: str
    repo: str
    number: int
    author: str = DEFAULT_COMMENT_AUTHOR


def comment_target(environ: Mapping[str, str], number: int, author: str) -> CommentTarget:
    """Return where the comment of pull request ``number`` goes, read from the job's
    environment (``GITHUB_API_URL``, ``GITHUB_REPOSITORY``).

    Raises:
        ValueError: ``GITHUB_REPOSITORY`` is not ``owner/name``, or ``number`` is not positive.
    """
    from worker.runtime import DEFAULT_API_URL

    repository = environ.get("GITHUB_REPOSITORY", "")
    if not _REPOSITORY.match(repository):
        raise ValueError(f"GITHUB_REPOSITORY ({repository or 'unset'}) is not owner/name")
    if number <= 0:
        raise ValueError(f"the event names no pull request number ({number})")
    owner, repo = repository.split("/")
    return CommentTarget(environ.get("GITHUB_API_URL") or DEFAULT_API_URL, owner, repo, number,
                         author)


async def upsert_comment(target: CommentTarget, token: str, body: str) -> int:
    """Create or edit the sticky comment of ``target`` to ``body``; return the comment's id.

    Args:
        target: the pull request and the bot whose comment is edited.
        token: a token that may write the pull request's comments (``Authorization: token``;
            ``pull-requests: write`` or ``issues: write`` for a ``GITHUB_TOKEN``).
        body: the comment (``llmgate run --format comment``; the marker line is added when
            missing, and a body over 65535 bytes of UTF-8, GitHub's limit, is cut).

    Raises:
        GitHubAuthError: the token is empty.
        GitHubError: GitHub refused a request (``status_code`` 403 for a read-only token),
            or could not be reached through the client's retries (`GitHubUnavailable`).
        httpx.HTTPError, ValueError: ``api_url`` is not a usable URL.
    """
    import httpx

    from worker.github import FixedToken, GitHubClient, upsert_sticky_comment

    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as session:
        client = GitHubClient(session, target.api_url, None, FixedToken(token), 0)
        return await upsert_sticky_comment(client, target.owner, target.repo, target.number,
                                           body, bot_login=target.author)


def post_comment(target: CommentTarget, token: str, body: str) -> tuple[int | None, str]:
    """Post the comment (`upsert_comment`); return ``(comment id, "")``, or ``(None, why)``
    with one line saying why it was not posted (never the token). Raises nothing GitHub or
    the network can cause."""
    import asyncio  # the HTTP client's imports wait until a comment is posted (fast --help)

    import httpx

    from worker.github import GitHubAuthError, GitHubError

    if not token:
        return None, (f"no token: with `comment: true` the action passes `github-token` (by "
                      f"default the workflow's) as {TOKEN_ENV}")
    try:
        return asyncio.run(upsert_comment(target, token, body)), ""
    except GitHubError as err:
        hint = (" (a pull request from a fork gets a read-only token; otherwise give the job "
                "`permissions: pull-requests: write`)") if err.status_code == 403 else ""
        why = f"{err}{hint}"
    except (GitHubAuthError, httpx.HTTPError, ValueError) as err:
        why = f"{type(err).__name__}: {err}"
    return None, why.replace(token, "***")
