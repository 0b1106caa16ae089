"""The App: every call of a gate's head spends the one budget of base's config (issue 31),
through the gate job (real arq, Redis and git, the schema-checking fake GitHub, litellm over
real HTTP to the fake provider); the repository is tests/unit/budget_support.py's."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_github import FakeGitHubServer
from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import budget_support, events_support, llm_support
from tests.unit.budget_support import LONG_REPLY
from tests.unit.events_support import run_burst
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, gate_payload
from worker.contract import (
    MERGE_GROUP_DESTROYED,
    RepoRef,
    event_job_id,
    gate_job_id,
    merge_group_key,
    pr_closed_value,
    pr_head_key,
)
from worker.gate import check_run as gate_check
from worker.gate import installs
from worker.gate.supersede import DESTROYED_REASON

github = events_support.github  # fixtures
llm_server = llm_support.llm_server
llm = llm_support.llm
repo = budget_support.budget_repo


async def gate_pr(github: FakeGitHubServer, repo: tuple[Path, dict[str, str]],
                  base: str) -> dict[str, Any]:
    """Open a PR of ``pr/<base>`` against ``base``, run its gate job; return its check run."""
    path, shas = repo
    head = shas[f"pr/{base}"]
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1, "head_sha": head,
                                  "base_sha": shas[base], "author": "writer"}]})
    payload = gate_payload(path.as_uri(), head, shas[base])
    await run_burst([("gate_pull_request", payload, gate_job_id(payload["repo"], 1, head))])
    [check] = [r for r in github.state()["check_runs"] if r["head_sha"] == head]
    return check


def summary(check: dict[str, Any]) -> str:
    """The check run's summary without markdown's escapes of ``$``."""
    text: str = check["output"]["summary"]
    return text.replace("\\$", "$")


async def test_the_pairwise_step_spends_heads_budget(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer) -> None:
    """Field case: head's answers spent its budget, then its pairwise step sent 10 judge calls
    more on a budget of its own."""
    llm.setup({"batch": 5,  # each side's 5 calls are in flight before any is charged
               "rules": [{"model": "bot-model", "match": "", "reply": LONG_REPLY},
                         {"model": "judge-model", "match": "", "reply": "WINNER: A"}]})
    check = await gate_pr(github, repo, "pairwise")
    assert [c["model"] for c in llm.calls()] == ["bot-model"] * 10  # base's 5, head's 5
    assert check["conclusion"] == "action_required"
    assert check["output"]["title"] == (
        "llmgate: action required - over budget: budget exceeded: $0.0050 spent of "
        "max_cost_usd $0.0040 at… [clipped, 139 chars]")
    assert ("over budget: budget exceeded: $0.0050 spent of max_cost_usd $0.0040 at head "
            "(5 of 5 examples ran, $0.0050 spent)") in summary(check)
    assert github.state()["violations"] == []


async def test_a_command_targets_reported_cost_is_charged_to_the_budget(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer) -> None:
    """Field case: a command target reporting $0.001 an example ran every example under
    max_cost_usd $0.002."""
    check = await gate_pr(github, repo, "command")
    assert check["conclusion"] == "action_required"
    assert check["output"]["title"] == (
        "llmgate: action required - over budget: budget exceeded: $0.0020 spent of "
        "max_cost_usd $0.0020 at… [clipped, 139 chars]")
    assert ("over budget: budget exceeded: $0.0020 spent of max_cost_usd $0.0020 at head "
            "(2 of 5 examples ran, $0.0020 spent)") in summary(check)
    assert github.state()["violations"] == []



async def test_a_stopped_run_counts_its_unknown_cost_calls(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer) -> None:
    """Field case: answers without ``usage`` are charged at their worst case but their cost is
    unknown, so a run stopped by its time limit said "$0.0000 spent"."""
    llm.setup({"latency_ms": 400, "rules": [{"model": "bot-model", "match": "",
                                             "reply": "word", "usage": None}]})
    check = await gate_pr(github, repo, "slow")
    assert check["conclusion"] == "action_required"
    [why] = [line for line in summary(check).splitlines() if "over time:" in line]
    assert "$0.0000" not in why  # the spend lines below name the calls of unknown cost
    assert re.search(r"over time: time limit reached: \d s of max_duration 1 s at (head|base) "
                     r"\(([1-4]) of 5 examples ran, \2 calls? of unknown cost spent "
                     r"\(charged to the budget at their worst case\)\)", why)
    assert github.state()["violations"] == []


async def test_a_retry_after_a_failed_completion_only_publishes(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Field case: GitHub answered 5xx while the check run was completed (the client's own
    retries too); arq ran the job again and, with the response cache off, head's calls were
    sent again. Now the job's second try publishes what the first evaluated."""
    monkeypatch.setattr(gate_check, "BACKOFF_BASE_S", 0.1)
    github.fake.setup({"faults": [{"operation": "checks/update", "status": 502, "times": 4,
                                   "body_match": {"status": "completed"}}]})
    llm.setup({"default_reply": "question answered"})
    check = await gate_pr(github, repo, "plain")
    assert len(llm.calls()) == 10  # one evaluation: base's 5 and head's 5
    assert (check["status"], check["conclusion"]) == ("completed", "success")
    completions = [r for r in github.state()["requests"] if r["operation"] == "checks/update"
                   and (r["body"] or {}).get("status") == "completed"]
    assert [r["status"] for r in completions] == [502, 502, 502, 502, 200]
    assert github.state()["violations"] == []


async def after_calls(llm: FakeLLMServer, calls: int,
                      action: Callable[[], Awaitable[None]]) -> float:
    """Once the fake provider received ``calls`` calls, run ``action`` (what GitHub and the
    web process do when a gate's result will never be used); return when, on the fake's clock
    (``time.monotonic()``)."""
    while len(llm.calls()) < calls:
        await asyncio.sleep(0.05)
    await action()
    return time.monotonic()


async def gate_stopped_mid_run(github: FakeGitHubServer, repo: tuple[Path, dict[str, str]],
                               llm: FakeLLMServer, action: Callable[[], Awaitable[None]],
                               merge_group: bool = False) -> dict[str, Any]:
    """Gate ``pr/long`` against ``long`` (40 calls of 1 s, 2 at a time: 20 s), as a pull
    request or a merge group, running ``action`` after its 4th call; check that no call was
    sent more than 3 s after it (the watch polls every 2 s) and return the check run."""
    llm.setup({"default_reply": "question answered", "latency_ms": 1000})
    stopping = asyncio.ensure_future(after_calls(llm, 4, action))
    if merge_group:
        check = await gate_group(github, repo, "long")
    else:
        check = await gate_pr(github, repo, "long")
    stopped_at = await stopping
    assert [c for c in llm.calls() if c["t"] > stopped_at + 3] == []
    assert len(llm.calls()) < 12  # of the 40 a whole run sends
    assert check["status"] == "completed"
    assert github.state()["violations"] == []
    return check


async def gate_group(github: FakeGitHubServer, repo: tuple[Path, dict[str, str]],
                     base: str) -> dict[str, Any]:
    """Gate ``pr/<base>``'s commit as a merge group's on ``base``; return its check run."""
    path, shas = repo
    head = shas[f"pr/{base}"]
    ref = {"owner": OWNER, "name": REPO, "clone_url": path.as_uri()}
    payload = {"delivery_id": "mg-1", "installation_id": INSTALLATION_ID, "repo": ref,
               "head_sha": head, "base_sha": shas[base], "base_ref": "refs/heads/main",
               "head_ref": "refs/heads/gh-readonly-queue/main/pr-1-x"}
    await run_burst([("gate_merge_group", payload, event_job_id("merge_group", ref, head))])
    [check] = [r for r in github.state()["check_runs"] if r["head_sha"] == head]
    return check


def repo_ref(repo: tuple[Path, dict[str, str]]) -> RepoRef:
    """The job payloads' reference to the test repository."""
    return {"owner": OWNER, "name": REPO, "clone_url": repo[0].as_uri()}


async def test_a_pull_request_closed_mid_run_stops_its_calls(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer,
        redis: Any) -> None:
    """A pull request closed while its gate runs: its calls stop within seconds and the check
    run is concluded ``cancelled``, as a superseded run's (this held before issue 31: the
    watch of superseded runs cancels the run's task)."""
    shas = repo[1]

    async def close() -> None:  # as GitHub and the web process do
        github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                                      "state": "closed", "head_sha": shas["pr/long"],
                                      "base_sha": shas["long"], "author": "writer"}]})
        await redis.set(pr_head_key(repo_ref(repo), 1), pr_closed_value())

    check = await gate_stopped_mid_run(github, repo, llm, close)
    assert (check["conclusion"], check["output"]["title"], check["output"]["summary"]) == (
        "cancelled", "llmgate: cancelled", "The pull request was closed.")


async def test_a_merge_group_destroyed_mid_run_stops_its_calls(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer,
        redis: Any) -> None:
    """Field case: GitHub destroyed a merge group (dequeued) while its gate ran; the run went
    on to its end and spent (its result was never used)."""
    head = repo[1]["pr/long"]

    async def destroy() -> None:  # as the web process records ``destroyed``
        await redis.set(merge_group_key(repo_ref(repo), head), MERGE_GROUP_DESTROYED)

    check = await gate_stopped_mid_run(github, repo, llm, destroy, merge_group=True)
    assert (check["conclusion"], check["output"]["summary"]) == ("cancelled", DESTROYED_REASON)


async def test_an_installation_removed_mid_run_stops_its_calls(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer,
        redis: Any) -> None:
    """Field case: the App was uninstalled while a gate ran; the run went on to its end."""
    async def uninstall() -> None:  # as the installation_changed job records it
        await installs.record(redis, {"delivery_id": "i-1", "installation_id": INSTALLATION_ID,
                                      "event": "installation", "action": "deleted",
                                      "repos_added": [], "repos_removed": []})

    check = await gate_stopped_mid_run(github, repo, llm, uninstall)
    assert (check["conclusion"], check["output"]["summary"]) == (
        "cancelled", f"The run was stopped: installation {INSTALLATION_ID} was removed or "
                     "suspended.")
