"""Superseded runs: a newer push to the pull request, a new base branch, or its close.

The web process records each pull request's newest head SHA and base branch,
``<head_sha>@<base_ref>``, or ``closed``, in Redis in the same round trip that enqueues the job
(`worker.contract.pr_head_key`, `worker.contract.pr_head_value`). A run compares that record
with its own head and base (`names_run`): when it starts, every `POLL_INTERVAL_S` seconds
while it runs, and under the comment lock right before it writes the sticky comment, so a run
of an older head, or of the same head against the base the pull request was retargeted away
from, can never overwrite the newer run's comment. GitHub does not promise to deliver webhooks
in order, so a record that names another head or base is confirmed with the API
(``GET .../pulls/N``: ``state``, ``head.sha``, ``base.ref``) before the run gives up
(`confirmed_reason`); a record GitHub contradicts is ignored for `CONTRADICTED_TTL_S`. A record
the web process could not order by its one-second ``updated_at`` stamp (`is_ambiguous`: two
retargets of one second delivered swapped) is confirmed the same way even when it names the
run, once per record. There GitHub's answer decides: should GitHub's API lag within that same
second, the newest run could be cancelled (``/llmgate rerun`` runs it again). Runs of the same
head and base (a ``/llmgate rerun``) never supersede each other.

GitHub's answers are remembered for the polls only. Right before a run publishes (its sticky
comment, its check runs' conclusions) it asks afresh (``reason(fresh=True)``): a record that
does not name it unmarked is confirmed with GitHub again, whatever GitHub said earlier in the
run. Issue 30: a run on ``loose`` whose start GitHub's lagging API confirmed (the pull request
had gone back to ``main``) published ``success`` a few seconds later, and that was the newest
``llmgate`` check of a pull request into ``main``.

Two cases compare the heads only: a bare head SHA recorded by an older web process (a rolling
deploy), and a run that knows no base branch (`GateRequest.base_ref` "").

Issue 31: two more records say GitHub will never use a run's result, for a merge group's run
too (it has no pull request): the installation or the repository removed
(`worker.gate.installs.removal`) and the merge group destroyed (`worker.contract.merge_group_key`,
set by the web process). Both are asked first and need no confirmation. While a run watches
(`supervise`), what it found also stops its engine's calls at once (`stopping`: the budget's
check before every provider call and command, `worker.evals.llm.cost.Budget.check`), before
the cancelled work has ended.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.contract import PR_CLOSED, is_ambiguous, merge_group_key, pr_head_key, split_pr_head
from worker.evals.llm import stopping
from worker.gate import installs
from worker.gate.request import GateRequest
from worker.github import GitHubClient, GitHubError, PullInfo

log = logging.getLogger(__name__)

#: How often a running job looks at its pull request's newest head, seconds.
POLL_INTERVAL_S = 2.0
#: How long a record GitHub contradicted is believed stale before GitHub is asked again, s
#: (GitHub's own view can lag a delivery: the record may turn out right a moment later).
CONTRADICTED_TTL_S = 10.0
CLOSED_REASON = "The pull request was closed."
#: The reason of a merge group's run whose group GitHub destroyed.
DESTROYED_REASON = "The merge group was destroyed (merged, dequeued or invalidated)."

T = TypeVar("T")


class Superseded(Exception):
    """The run is no longer wanted; ``reason`` is the one line its check run shows."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def pushed_reason(head_sha: str) -> str:
    """Return the one-line reason of a run superseded by a push of ``head_sha``."""
    return f"Superseded by a push of {head_sha[:7]}."


def base_changed_reason(base_ref: str) -> str:
    """Return the one-line reason of a run superseded by a retarget to branch ``base_ref``."""
    return f"Superseded: the pull request's base changed to {base_ref}."


def names_run(recorded: str, head_sha: str, base_ref: str) -> bool:
    """Return whether the recorded newest head names this run's own head and base.

    Args:
        recorded: the `pr_head_key` value: ``<head_sha>@<base_ref>``, a bare head SHA (an
            older web process) or ``closed``.
        head_sha: the run's 40-hex head SHA.
        base_ref: the run's base branch name, or "" when the run knows none.

    A bare SHA, or a run without a base, compares the heads only; ``closed`` names no run.
    """
    recorded_head, recorded_base = split_pr_head(recorded)
    if recorded_head == PR_CLOSED:
        return False
    return recorded_head == head_sha and (
        not recorded_base or not base_ref or recorded_base == base_ref)


def confirmed_reason(pull: PullInfo, head_sha: str, base_ref: str) -> str | None:
    """Return why GitHub's view of the pull request supersedes the run, or None if it does not.

    Args:
        pull: ``GET .../pulls/N`` (its ``state``, ``head.sha`` and ``base.ref``).
        head_sha: the run's 40-hex head SHA.
        base_ref: the run's base branch name, or "" to compare the heads only.
    """
    if pull.state == "closed":
        return CLOSED_REASON
    if pull.head_sha != head_sha:
        return pushed_reason(pull.head_sha)
    if base_ref and pull.base_ref != base_ref:
        return base_changed_reason(pull.base_ref)
    return None


def _shown(recorded: str) -> str:
    """The record as a log shows it: ``closed``, or the short head SHA and the base."""
    head_sha, base_ref = split_pr_head(recorded)
    return PR_CLOSED if head_sha == PR_CLOSED else f"{head_sha[:7]}@{base_ref}".rstrip("@")


class Supersede:
    """Decide whether one gate run is superseded (see the module docstring)."""

    def __init__(self, redis: Redis, gh: GitHubClient, request: GateRequest) -> None:
        """Watch ``request``'s pull request in ``redis``; confirm with ``gh``."""
        self._redis, self._gh, self._request = redis, gh, request
        #: record naming another head or base -> when GitHub last said this run is current
        self._confirmed: dict[str, float] = {}
        #: records that name this run but could not be ordered (`is_ambiguous`), confirmed by
        #: GitHub: one question per record, not one per poll
        self._agreed: set[str] = set()
        self.found: str | None = None
        #: The reason found is a new base of the run's own head: the newer run gates this
        #: same commit, so a check run this run would create now would hide the newer one's.
        self.same_head = False
        #: GitHub's answer that superseded the run (None: not superseded, or not by GitHub).
        self.pull: PullInfo | None = None

    async def reason(self, *, fresh: bool = False) -> str | None:
        """Return why the run is superseded (one line), or None while it is still wanted.

        Args:
            fresh: forget what GitHub said earlier in this run (a record it contradicted, an
                unordered record it confirmed): ask it again unless the record names the run
                unmarked. A run asks so right before it publishes (module docstring).

        Raises:
            redis.exceptions.RedisError: Redis failed.
            GitHubError: the confirming ``GET .../pulls/N`` failed.
        """
        request = self._request
        gone = await self._gone()
        if gone is not None or request.pr_number <= 0:
            return gone
        raw = await self._redis.get(pr_head_key(request.repo, request.pr_number))
        recorded = raw.decode() if isinstance(raw, bytes) else raw
        if recorded is None or not fresh and (
                recorded in self._agreed or self._recently_confirmed(recorded)):
            return None
        named = names_run(recorded, request.head_sha, request.base_ref)
        if named and not is_ambiguous(recorded):
            return None
        pull = await self._gh.get_pull(request.repo["owner"], request.repo["name"],
                                       request.pr_number)
        reason = confirmed_reason(pull, request.head_sha, request.base_ref)
        if reason is not None:
            self.same_head = pull.state != "closed" and pull.head_sha == request.head_sha
            self.pull = pull
            return reason
        if named:  # GitHub agrees with the record: until the record changes, it stands
            self._agreed.add(recorded)
            return None
        log.info("PR #%s: recorded head %s is stale (GitHub: %s@%s); not superseded",
                 request.pr_number, _shown(recorded), pull.head_sha[:7], pull.base_ref)
        self._confirmed[recorded] = time.monotonic()
        return None

    async def _gone(self) -> str | None:
        """Why GitHub will never use the run's result though no newer run replaces it: its
        installation or repository removed, or (a merge group's run) its group destroyed.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        request = self._request
        full_name = f"{request.repo['owner']}/{request.repo['name']}"
        removed = await installs.removal(self._redis, self._gh.installation_id, full_name)
        if removed is not None:
            return f"The run was stopped: {removed}."
        if request.pr_number <= 0 and await self._redis.get(
                merge_group_key(request.repo, request.head_sha)) is not None:
            return DESTROYED_REASON
        return None

    def _recently_confirmed(self, recorded: str) -> bool:
        """GitHub said this run is current while Redis held ``recorded`` (naming another head
        or base), less than `CONTRADICTED_TTL_S` ago."""
        when = self._confirmed.get(recorded)
        return when is not None and time.monotonic() - when < CONTRADICTED_TTL_S

    async def watch(self, work: asyncio.Future[Any], interval_s: float | None = None) -> None:
        """Every ``interval_s`` seconds (default `POLL_INTERVAL_S`), cancel ``work`` once the
        run is superseded.

        The reason is kept in ``found``. A failing Redis or GitHub is logged and asked again.
        """
        interval_s = POLL_INTERVAL_S if interval_s is None else interval_s
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
                    interval_s: float | None = None) -> T:
    """Run ``coro`` while ``supersede`` watches it every ``interval_s`` seconds (default
    `POLL_INTERVAL_S`, read at the call); return its result.

    Raises:
        Superseded: the watcher cancelled the work (the caller is not being cancelled).
        asyncio.CancelledError: the caller itself was cancelled (the work is cancelled too).
        Exception: whatever the work raised.
    """
    with stopping(lambda: supersede.found):  # the work's context: its calls stop at once
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
