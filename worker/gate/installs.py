"""Installations that go away: remember it, and let their jobs end quietly.

``installation`` ``deleted``/``suspend`` and ``installation_repositories`` ``removed`` are
recorded in Redis (``created``/``unsuspend``/``added`` clear the record), for 30 days:
``llmgate:uninstalled:<installation_id>`` and
``llmgate:repo-removed:<installation_id>:<owner/name>``.

Every job is wrapped by `quiet_when_uninstalled`: a job of a removed installation or repository
that is still queued ends at once without calling GitHub; a running one whose GitHub calls
then fail with 401/403/404 (or whose git fetch fails) ends with one log line and a normal
result, never a traceback or an arq retry. When Redis has no record yet (the event's own job
may still be queued behind), the worker asks GitHub for a fresh installation token: GitHub's
403/404 to that means the installation is gone (deleted, or suspended: "Create an
installation access token for an app"). A 401 there is not: that endpoint is called with the
App's own JWT, so GitHub refused the App itself (a wrong ``GITHUB_APP_ID`` or private key, a
rotated key, the clock): the job fails loudly, with an error log naming the settings, instead
of ending quietly on every pull request.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from worker.contract import InstallationPayload
from worker.errors import ExecutionError
from worker.github import GitHubError, GitHubRateLimited

log = logging.getLogger("llmgate.worker")

#: How long a removal is remembered, seconds (30 days).
REMOVED_TTL_S = 30 * 24 * 3600
#: HTTP statuses GitHub answers for a token or repository the App lost.
GONE_STATUSES = frozenset({401, 403, 404})
#: Actions that end / restore an installation's access.
_INSTALLATION_GONE = frozenset({"deleted", "suspend"})
_INSTALLATION_BACK = frozenset({"created", "unsuspend"})

Job = Callable[[dict[str, Any], Any], Awaitable[Any]]


def installation_key(installation_id: int) -> str:
    """Redis key marking an installation as deleted or suspended."""
    return f"llmgate:uninstalled:{installation_id}"


def repository_key(installation_id: int, full_name: str) -> str:
    """Redis key marking a repository as removed from an installation (name lower-cased)."""
    return f"llmgate:repo-removed:{installation_id}:{full_name.lower()}"


async def record(redis: Redis, payload: InstallationPayload) -> str:
    """Record an ``installation``/``installation_repositories`` event; return what was done.

    Returns ``"removed"``, ``"restored"``, ``"repositories"`` or ``"nothing"`` (an action
    that changes no access, e.g. ``new_permissions_accepted``).
    """
    installation_id, action = payload["installation_id"], payload["action"]
    stamp = f"{payload['event']}.{action} {int(time.time())}"
    if payload["event"] == "installation" and action in _INSTALLATION_GONE:
        await redis.set(installation_key(installation_id), stamp, ex=REMOVED_TTL_S)
        return "removed"
    if payload["event"] == "installation" and action in _INSTALLATION_BACK:
        await redis.delete(installation_key(installation_id))
        return "restored"
    if payload["event"] != "installation_repositories":
        return "nothing"
    for name in payload["repos_removed"]:
        await redis.set(repository_key(installation_id, name), stamp, ex=REMOVED_TTL_S)
    for name in payload["repos_added"]:
        await redis.delete(repository_key(installation_id, name))
    return "repositories"


async def removal(redis: Redis, installation_id: int, full_name: str | None) -> str | None:
    """Return why a job of this installation (and repository) cannot reach GitHub, or None."""
    if await redis.exists(installation_key(installation_id)):
        return f"installation {installation_id} was removed or suspended"
    if full_name and await redis.exists(repository_key(installation_id, full_name)):
        return f"repository {full_name} was removed from installation {installation_id}"
    return None


def _ids(payload: Any) -> tuple[int | None, str | None]:
    """Return a job payload's installation id and ``owner/name`` (None when absent)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("installation_id"), int):
        return None, None
    repo = payload.get("repo")
    full_name = f"{repo['owner']}/{repo['name']}" if isinstance(repo, dict) else None
    return payload["installation_id"], full_name


def _is_gone_error(err: Exception) -> bool:
    """Whether an error may come from a lost installation (not a rate limit)."""
    if isinstance(err, GitHubRateLimited):
        return False
    return isinstance(err, ExecutionError) or (
        isinstance(err, GitHubError) and err.status_code in GONE_STATUSES)


async def probe(ctx: dict[str, Any], installation_id: int) -> str | None:
    """Ask GitHub for the installation's token; return why it is gone, or None if it works."""
    try:
        await ctx["services"].github(installation_id).installation_token()
    except GitHubError as err:
        if err.status_code == 401:  # the App's JWT was refused: llmgate's setup, not a removal
            log.error("GitHub refused the App's own credentials (401 on the installation token "
                      "of %s): check GITHUB_APP_ID, the private key and the clock",
                      installation_id)
            return None
        if err.status_code in GONE_STATUSES and not isinstance(err, GitHubRateLimited):
            return f"installation {installation_id} is gone (GitHub answered {err.status_code})"
    return None


def quiet_when_uninstalled(fn: Job) -> Job:
    """Wrap a job so a removed installation or repository ends it quietly (module docstring).

    The wrapped job returns ``{"status": "uninstalled", "reason": ...}`` in that case; any
    other error is raised unchanged. arq sees the same function name.
    """

    @functools.wraps(fn)
    async def job(ctx: dict[str, Any], payload: Any) -> Any:
        installation_id, full_name = _ids(payload)
        services = ctx.get("services")
        if installation_id is None or services is None:
            return await fn(ctx, payload)
        reason = await removal(services.redis, installation_id, full_name)
        if reason is not None:
            log.info("job not run: %s", reason)
            return {"status": "uninstalled", "reason": reason}
        try:
            result = await fn(ctx, payload)
        except (GitHubError, ExecutionError) as err:
            if not _is_gone_error(err):
                raise
            reason = (await removal(services.redis, installation_id, full_name)
                      or await probe(ctx, installation_id))
            if reason is None:
                raise
            log.info("job ended quietly: %s (%s)", reason, type(err).__name__)
            return {"status": "uninstalled", "reason": reason}
        if isinstance(result, dict) and result.get("conclusion") == "cancelled":
            reason = await removal(services.redis, installation_id, full_name)
            if reason is not None:  # stopped mid-run by the removal (worker/gate/supersede.py)
                log.info("job ended quietly: %s (stopped mid-run)", reason)
                return {"status": "uninstalled", "reason": reason}
        return result

    return job
