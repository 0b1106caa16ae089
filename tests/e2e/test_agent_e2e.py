"""End to end with an agent (examples/support-agent: a model target with two tools): webhook ->
worker -> litellm over real HTTP to the fake provider, which answers with tool calls -> the
tools' fixed tables -> check run and comment on the fake GitHub.

The pull request that makes the agent cancel an unhappy customer's order (the forbidden tool)
fails with one annotation on that example's dataset line; the pull request that fixes it
passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.agent_support import BROKEN_LINE, build_agent_repo, recorded_rules
from tests.e2e.model_support import KEY_ENV, open_pull_request
from tests.fakes.fake_llm import running_fake_llm
from worker.cli.demo import Stack

pytestmark = pytest.mark.slow

OWNER, REPO = "acme", "order-agent"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("agent-e2e")
    with running_fake_llm(recorded_rules()) as llm:
        repo = work / REPO
        shas = build_agent_repo(repo, llm.url)
        with Stack(work, workers=1, worker_env={KEY_ENV: "sk-e2e-fake"}) as stack:
            yield {"stack": stack, "llm": llm, "repo": repo, "shas": shas}


def open_pr(world: dict[str, Any], number: int, branch: str) -> dict[str, Any]:
    shas = world["shas"]
    return open_pull_request(world["stack"], world["repo"], (OWNER, REPO), number,
                             shas[branch], shas["main"], branch)


def test_the_agent_calling_a_forbidden_tool_fails_on_the_example_line(world):
    run = open_pr(world, 1, "pr/cancel")
    assert run["conclusion"] == "failure"
    [annotation] = run["annotations"]
    assert annotation["path"] == "evals/orders.jsonl"
    assert annotation["start_line"] == BROKEN_LINE
    assert "called forbidden tool cancel_order" in annotation["message"]
    assert "tools_not_called.pass_rate" in run["output"]["summary"]
    comment = [c for c in world["stack"].state()["comments"] if c["issue_number"] == 1]
    assert len(comment) == 1 and "late-c3" in comment[0]["body"]
    assert world["stack"].state()["violations"] == []


def test_the_pull_request_that_fixes_the_agent_passes(world):
    run = open_pr(world, 2, "pr/fix")
    assert run["conclusion"] == "success"
    assert run["annotations"] == []
    assert world["stack"].state()["violations"] == []
