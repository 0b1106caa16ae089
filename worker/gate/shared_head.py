"""One head commit in several open pull requests: every ``llmgate`` check run shows the worst.

A check run belongs to a commit, not to a pull request, and GitHub's required check reads the
newest check run of a name on the commit. Two pull requests with the same head (PR 1 into
``main``, PR 2 into a branch at the regressing commit) would each put their own verdict there,
and the one concluded last would decide for both. So each run of a pull request records its
own verdict for the head (`Entry`), and publishes the worst verdict among the open pull
requests of that head (`RANK`), its title naming the pull request that decided it and its
summary listing every pull request's own verdict (`shared_output`). The other pull requests'
completed check runs on the commit are brought to the same verdict at once (`settle`), so
whichever of them GitHub takes for the newest, it blocks when any of them blocks.

Redis: the hash ``llmgate:shared-head:<owner>/<name>@<head_sha>`` maps a pull request number
to its `Entry` (JSON), kept `SHARED_HEAD_TTL_S`. A run writes ``pending`` when it opens its
check run (blocking until it concludes) and its conclusion when it publishes; an Accept
regression or Let through writes ``success``. An entry counts while the web process's record
of that pull request (`worker.contract.pr_head_key`) names this head and the entry's base, or
is absent; a record naming another head or base, or ``closed``, is confirmed with GitHub
(`worker.gate.supersede.confirmed_reason`) and the entry is then deleted. A Redis failure raises:
the job fails as on any Redis failure (fail closed).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from redis.asyncio import Redis

from worker.contract import RepoRef, is_ambiguous, pr_head_key
from worker.gate.supersede import confirmed_reason, names_run
from worker.github import CheckOutput, GitHubClient
from worker.report import safe
from worker.runtime import locks

log = logging.getLogger("llmgate.worker")

#: How long a head's record is kept, seconds (as failure records and acceptances: 30 days).
SHARED_HEAD_TTL_S = 30 * 24 * 3600  # as Accept regression's records (worker.gate.accept)
#: The verdict of a run that has not concluded yet (never sent to GitHub as such).
PENDING = "pending"
#: How much a verdict blocks: the highest among the open pull requests of a head is shown.
#: Any other value (an unreadable entry) counts as ``failure``.
RANK = {"success": 0, "skipped": 1, "neutral": 1, "cancelled": 2, PENDING: 2,
        "action_required": 2, "timed_out": 2, "failure": 3}
#: What the title says of the pull request that decided.
_WHICH = {"failure": "which failed", "action_required": "which is undecided",
          "timed_out": "which timed out", "cancelled": "whose run was cancelled",
          PENDING: "whose run has not finished", "neutral": "which was neutral",
          "skipped": "which was skipped"}
_BEGIN, _END = "<!-- llmgate:shared-head -->", "<!-- /llmgate:shared-head -->"
_SECTION = re.compile(re.escape(_BEGIN) + r".*?" + re.escape(_END) + r"\n*", re.S)
_LOCK_TTL_S = 60
#: Delete a hash field only if it still holds the value read (KEYS[1], ARGV: field, value).
_DELETE_IF_SAME = """if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0"""


@dataclass(frozen=True)
class Entry:
    """One open pull request's own verdict on a head commit.

    Attributes:
        pr_number: the pull request.
        conclusion: its own conclusion, or `PENDING` while its run has not concluded.
        base_ref: its base branch (``main``); "" when unknown.
        title: its own check run title.
        check_run_id: its ``llmgate`` check run on the head (0 before one exists).
    """

    pr_number: int
    conclusion: str
    base_ref: str = ""
    title: str = ""
    check_run_id: int = 0

    @property
    def rank(self) -> int:
        """How much this verdict blocks (`RANK`; unknown values as ``failure``)."""
        return RANK.get(self.conclusion, RANK["failure"])


def head_key(repo: RepoRef, head_sha: str) -> str:
    """Return the Redis hash of a head commit: ``llmgate:shared-head:<owner>/<name>@<sha>``."""
    return f"llmgate:shared-head:{repo['owner']}/{repo['name']}@{head_sha}"


@asynccontextmanager
async def held(redis: Redis, repo: RepoRef, head_sha: str) -> AsyncIterator[None]:
    """Hold the head's lock while its entries are written and its check runs published, so
    two pull requests concluding at once never publish a verdict that misses the other's."""
    async with locks.held(redis, f"llmgate:lock:{head_key(repo, head_sha)}", _LOCK_TTL_S):
        yield


async def record(redis: Redis, repo: RepoRef, head_sha: str, entry: Entry) -> None:
    """Write ``entry`` as its pull request's verdict on ``head_sha``.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    key = head_key(repo, head_sha)
    value = json.dumps({"conclusion": entry.conclusion, "base_ref": entry.base_ref,
                        "title": entry.title, "check_run_id": entry.check_run_id})
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hset(key, str(entry.pr_number), value)
        pipe.expire(key, SHARED_HEAD_TTL_S)
        await pipe.execute()


def _parse(field: bytes | str, raw: bytes | str) -> Entry:
    """Read one stored entry; an unreadable one counts as a failure (fail closed)."""
    number = int(field)
    try:
        data = json.loads(raw)
        return Entry(number, str(data["conclusion"]), str(data.get("base_ref") or ""),
                     str(data.get("title") or ""), int(data.get("check_run_id") or 0))
    except (ValueError, KeyError, TypeError):
        return Entry(number, "failure", title="its llmgate record is unreadable")


async def entries(redis: Redis, gh: GitHubClient, repo: RepoRef, head_sha: str) -> list[Entry]:
    """Return the verdicts of the open pull requests whose head is ``head_sha``, by number.

    Raises:
        redis.exceptions.RedisError: Redis failed (the caller's job fails: fail closed).
        GitHubError: confirming a pull request's move or close failed.
    """
    key = head_key(repo, head_sha)
    stored = await redis.hgetall(key)  # type: ignore[misc]  # redis-py: Awaitable | value
    kept = []
    for field, raw in sorted(stored.items(), key=lambda item: int(item[0])):
        entry = _parse(field, raw)
        if await _still_open(redis, gh, repo, head_sha, entry):
            kept.append(entry)
        else:  # unless a newer run of that PR wrote its entry meanwhile
            await redis.eval(_DELETE_IF_SAME, 1, key, field, raw)  # type: ignore[misc]
    return kept


async def _still_open(redis: Redis, gh: GitHubClient, repo: RepoRef, head_sha: str,
                      entry: Entry) -> bool:
    """Whether the entry's pull request is still open at this head and base (module doc)."""
    raw = await redis.get(pr_head_key(repo, entry.pr_number))
    recorded = raw.decode() if isinstance(raw, bytes) else raw
    if recorded is None or (names_run(recorded, head_sha, entry.base_ref)
                            and not is_ambiguous(recorded)):
        return True
    pull = await gh.get_pull(repo["owner"], repo["name"], entry.pr_number)
    return confirmed_reason(pull, head_sha, entry.base_ref) is None


def decider(own: Entry, all_entries: list[Entry]) -> Entry:
    """Return the entry whose verdict ``own``'s check run shows: the most blocking one, own
    first among equals, then the lowest pull request number."""
    others = [e for e in all_entries if e.pr_number != own.pr_number]
    return max([own, *others], key=lambda e: e.rank)  # max keeps the first of equals


def shown_conclusion(entry: Entry) -> str:
    """Return the GitHub conclusion a verdict is shown as: `PENDING` blocks as
    ``action_required``, a value not in `RANK` as ``failure``."""
    if entry.conclusion == PENDING:
        return "action_required"
    return entry.conclusion if entry.conclusion in RANK else "failure"


def shared_output(own: Entry, all_entries: list[Entry],
                  output: CheckOutput) -> tuple[str, CheckOutput]:
    """Return the conclusion and output of ``own``'s check run given every open pull
    request's verdict on the head (module docstring).

    ``output`` is ``own``'s own output; a section listing each pull request's own verdict is
    put first in its summary (replacing an earlier one) when the head is in several.
    """
    others = [e for e in all_entries if e.pr_number != own.pr_number]
    summary = _SECTION.sub("", output.summary)
    if not others:
        return shown_conclusion(own), dataclasses.replace(output, summary=summary)
    top = decider(own, all_entries)
    title = output.title
    if top is not own:
        base = f" into {safe(top.base_ref, 100)}" if top.base_ref else ""
        title = (f"llmgate: blocked: this commit is also the head of #{top.pr_number}{base}, "
                 f"{_WHICH.get(top.conclusion, 'which failed')}")
    rows = "\n".join(f"| #{e.pr_number} | `{safe(e.base_ref) or '?'}` | {safe(e.conclusion, 20)} | "
                     f"{safe(e.title, 120)} |"
                     for e in sorted([own, *others], key=lambda e: e.pr_number))
    section = (f"{_BEGIN}\n**This commit is the head of {len(others) + 1} open pull requests.** "
               "GitHub shows one `llmgate` check per commit, so every one of them shows the "
               "most blocking verdict:\n\n| Pull request | Base | Own verdict | Title |\n"
               f"|---|---|---|---|\n{rows}\n{_END}\n\n")
    return shown_conclusion(top), CheckOutput(title, section + summary, output.text)


async def settle(redis: Redis, gh: GitHubClient, repo: RepoRef, head_sha: str,
                 own: Entry, output: CheckOutput) -> tuple[str, CheckOutput]:
    """Record ``own``, bring the other pull requests' completed check runs on the head to the
    shared verdict, and return the conclusion and output ``own``'s check run must get.

    Call it under `held`, and complete ``own``'s check run before leaving it.

    Raises:
        redis.exceptions.RedisError: Redis failed.
        GitHubError: GitHub refused a lookup or an update.
    """
    await record(redis, repo, head_sha, own)
    current = await entries(redis, gh, repo, head_sha)
    others = [e for e in current if e.pr_number != own.pr_number and e.check_run_id]
    if others:
        await _republish(gh, repo, head_sha, others, current)
    return shared_output(own, current, output)


async def _republish(gh: GitHubClient, repo: RepoRef, head_sha: str, others: list[Entry],
                     current: list[Entry]) -> None:
    """Update each completed check run of ``others`` whose shown verdict changes."""
    owner, name = repo["owner"], repo["name"]
    runs = {r.id: r async for r in gh.list_check_runs(owner, name, head_sha)}
    for entry in others:
        run = runs.get(entry.check_run_id)
        if run is None or run.status != "completed":
            continue  # still running: it settles when it concludes
        conclusion, output = shared_output(entry, current, CheckOutput(
            entry.title or run.title, run.summary, run.text))
        if (conclusion, output.title, output.summary) != (run.conclusion, run.title,
                                                          run.summary):
            await gh.update_check_run(owner, name, run.id, {
                "status": "completed", "conclusion": conclusion, "output": output.to_json()})
            log.info("%s/%s@%s: check run %s of #%s now %s (shared head)", owner, name,
                     head_sha[:7], run.id, entry.pr_number, conclusion)



async def accepted(redis: Redis, gh: GitHubClient, repo: RepoRef, head_sha: str,
                   pr_number: int, check_run_id: int,
                   output: CheckOutput) -> tuple[str, CheckOutput]:
    """`settle` a pull request whose failed or undecided run a writer passed (Accept
    regression, Let through): its own verdict counts as ``success`` from now on. Returns what
    its check run must show (``success`` unless another open pull request of the head blocks).

    Call it under `held`. Raises as `settle`.
    """
    raw = await redis.hget(head_key(repo, head_sha), str(pr_number))  # type: ignore[misc]
    before = None if raw is None else _parse(str(pr_number), raw)
    own = Entry(pr_number, "success", before.base_ref if before else "", output.title,
                check_run_id)
    return await settle(redis, gh, repo, head_sha, own, output)
