"""Superseded runs: a newer push to the pull request, or its close, makes a run unwanted.

The web process records each pull request's newest head SHA, or ``closed``, in Redis in the
same round trip that enqueues the job (`worker.contract.pr_head_key`). A run compares that
record with its own head: when it starts, every `POLL_INTERVAL_S` seconds while it runs, and
under the comment lock right before it writes the sticky comment, so an older head can never
overwrite a newer head's comment. GitHub does not promise to deliver webhooks in order, so a
record that names another head is confirmed with the API (``GET .../pulls/N``) before the run
gives up; a record GitHub contradicts is ignored from then on. Runs of the same head (a
``/llmgate rerun``) never supersede each other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.contract import PR_CLOSED, pr_head_key
from worker.gate_request import GateRequest
from worker.github.client import GitHubClient, GitHubError

log = logging.getLogger(__name__)

#: How often a running job looks at its pull request's newest head, seconds.
POLL_INTERVAL_S = 2.0
CLOSED_REASON = "The pull request was closed."

T = TypeVar("T")


class Superseded(Exception):
    """The run is no longer wanted; ``reason`` is the one line its check run shows."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def pushed_reason(head_sha: str) -> str:
    """Return the one-line reason of a run superseded by a push of ``head_sha``."""
    return f"Superseded by a push of {head_sha[:7]}."


class Supersede:
    """Decide whether one gate run is superseded (see the module docstring)."""

    def __init__(self, redis: Redis, gh: GitHubClient, request: GateRequest) -> None:
        """Watch ``request``'s pull request in ``redis``; confirm with ``gh``."""
        self._redis, self._gh, self._request = redis, gh, request
        self._contradicted: set[str] = set()
        self.found: str | None = None

    async def reason(self) -> str | None:
        """Return why the run is superseded (one line), or None while it is still wanted.

        Raises:
            redis.exceptions.RedisError: Redis failed.
            GitHubError: the confirming ``GET .../pulls/N`` failed.
        """
        request = self._request
        if request.pr_number <= 0:
            return None
        raw = await self._redis.get(pr_head_key(request.repo, request.pr_number))
        recorded = raw.decode() if isinstance(raw, bytes) else raw
        if recorded is None or recorded == request.head_sha or recorded in self._contradicted:
            return None
        pull = await self._gh.get_pull(request.repo["owner"], request.repo["name"],
                                       request.pr_number)
        if pull.state == "closed":
            return CLOSED_REASON
        if pull.head_sha != request.head_sha:
            return pushed_reason(pull.head_sha)
        log.info("PR #%s: recorded head %s is stale (GitHub: %s); not superseded",
                 request.pr_number, recorded if recorded == PR_CLOSED else recorded[:7],
                 pull.head_sha[:7])
        self._contradicted.add(recorded)
        return None

    async def watch(self, work: asyncio.Future[Any], interval_s: float = POLL_INTERVAL_S) -> None:
        """Every ``interval_s`` seconds, cancel ``work`` once the run is superseded.

        The reason is kept in ``found``. A failing Redis or GitHub is logged and asked again.
        """
        while not work.done():
            await asyncio.sleep(interval_s)
            try:
                reason = await self.reason()
            except (RedisError, GitHubError, OSError) as exc:
                log.warning("could not check whether the run is superseded (%s)",
                            type(exc).__name__)
                continue
            if reason is not None:
                self.found = reason
                work.cancel()
                return


async def supervise(coro: Coroutine[Any, Any, T], supersede: Supersede,
                    interval_s: float = POLL_INTERVAL_S) -> T:
    """Run ``coro`` while ``supersede`` watches it; return its result.

    Raises:
        Superseded: the watcher cancelled the work (the caller is not being cancelled).
        asyncio.CancelledError: the caller itself was cancelled (the work is cancelled too).
        Exception: whatever the work raised.
    """
    work = asyncio.ensure_future(coro)
    watcher = asyncio.create_task(supersede.watch(work, interval_s))
    try:
        return await work
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if supersede.found is not None and (task is None or task.cancelling() == 0):
            raise Superseded(supersede.found) from None
        raise
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
