"""``llmgate run`` on the support-agent example (a model target with two tools, served by the
fake provider over real HTTP through litellm): the pull request that makes the agent call the
forbidden tool fails on its dataset line, the one that fixes it passes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.agent_support import BROKEN_LINE, build_agent_repo, recorded_rules
from tests.e2e.model_support import KEY_ENV
from tests.fakes.fake_llm import running_fake_llm
from worker.cli.main import EXIT_GATE_FAILED, EXIT_PASS, main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def agent_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    with running_fake_llm(recorded_rules()) as llm:
        repo = tmp_path_factory.mktemp("agent") / "repo"
        build_agent_repo(repo, llm.url)
        yield repo, llm


def run(agent_repo: tuple[Path, Any], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, head: str) -> tuple[int, dict[str, Any]]:
    repo, llm = agent_repo
    llm.reset()
    monkeypatch.setenv(KEY_ENV, "sk-fake")
    monkeypatch.chdir(repo)
    code = main(["run", "--base", "main", "--head", head, "--no-cache", "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_agent_calling_the_forbidden_tool_fails_on_that_example_line(
        agent_repo, capsys, monkeypatch):
    code, report = run(agent_repo, capsys, monkeypatch, "pr/cancel")
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    [regression] = report["regressions"]
    assert (regression["example_id"], regression["line"]) == ("late-c3", BROKEN_LINE)
    assert "called forbidden tool cancel_order" in regression["reason"]
    metrics = report["metrics"]["orders"]
    assert metrics["base"]["mean_tool_calls"] == 1.0
    assert metrics["head"]["mean_tool_calls"] == pytest.approx(4 / 3)  # C3: lookup + cancel
    assert metrics["head"]["mean_steps"] == pytest.approx(7 / 3)       # C3 took 3 steps
    assert metrics["head"]["tool_success_rate"] == 1.0
    assert metrics["head"]["assertion.tools_not_called.pass_rate"] == pytest.approx(2 / 3)
    chats = agent_repo[1].calls("chat")
    assert len(chats) == 13  # base: 3 x 2 steps; head: 2 x 2 + 3 for C3
    offered = [t["function"]["name"] for t in chats[0]["params"]["tools"]]
    assert offered == ["lookup_order", "cancel_order"]
    tool_message = next(m for c in chats for m in c["messages"] if m["role"] == "tool")
    assert json.loads(tool_message["content"])["status"] in ("shipped", "packing", "delayed")


def test_the_pull_request_that_forbids_cancelling_passes(agent_repo, capsys, monkeypatch):
    code, report = run(agent_repo, capsys, monkeypatch, "pr/fix")
    assert (code, report["conclusion"]) == (EXIT_PASS, "success")
    assert report["regressions"] == []
    assert report["metrics"]["orders"]["head"]["mean_tool_calls"] == 1.0
