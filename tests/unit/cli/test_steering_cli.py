"""Issue 30, part 1 through the real CLI: ``llmgate run`` on a pull request branch whose
answers steer an obeying judge exits 1 (it exited 0: pass rate 0.5 -> 1.0), and an honest
improvement exits 0. A real git repository; litellm over real HTTP to the fake provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.steering_support import rules, steering_repo
from tests.unit.worker_support import clone_branches
from worker.cli.main import EXIT_GATE_FAILED, main
from worker.pipeline.steering import STEERING

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


@pytest.fixture()
def repo(llm: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shas = steering_repo(tmp_path / "src", llm.url)
    clone = clone_branches(tmp_path / "src", tmp_path / "repo", shas)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("LLMGATE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(clone)
    llm.setup({"rules": rules("obey")})
    return clone


def test_a_steering_branch_exits_1_with_the_cause(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--base", "main", "--head", "pr/steer", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert report["headline"].startswith(f"{STEERING}: suite codes, example q")
    assert len([r for r in report["errored"] if STEERING in r["reason"]]) == 8


def test_an_honest_improvement_exits_0(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--base", "main", "--head", "pr/improve", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["conclusion"]) == (0, "success"), report["headline"]
    assert any(n.startswith("steering probe, suite codes") and n.endswith("none passed there")
               for n in report["notes"])
