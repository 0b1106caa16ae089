"""``llmgate run`` reads a judge that commits to one verdict in a decorated shape (issue 31).

A judge that writes ``✅ PASS``, ``<verdict>PASS</verdict>`` or ``PASS, though the tone could be
warmer`` instead of the sealed line was a judge error on every example: the run was undecided
for an honest pull request. A judge that names both verdicts stays a judge error. litellm over
real HTTP to the fake provider; a real git repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import endpoint_yaml, model_config, write_repo
from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_PASS, main

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)


def gate(llm: FakeLLMServer, root: Path, judge_reply: str, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any]]:
    """Run ``llmgate run`` on a two-commit repository whose judge always says ``judge_reply``."""
    llm.setup({"rules": [{"model": "judge-deco", "match": "", "reply": judge_reply},
                         {"match": "Customer says", "reply": "Refund sent."}]})
    judge = endpoint_yaml(llm.url, "openai/judge-deco")
    config = model_config(llm.url, settings=f"judge: {judge}",
                          assertions="      - type: llm_judge\n        rubric: Answers it.\n",
                          gate="{pass_rate: {min: 0.5}}")
    write_repo(root, config, [{"id": f"t{i}", "input": f"ticket {i}"} for i in range(3)])
    git(root, "init", "-q", "-b", "main")
    commit(root, "main", {})
    commit(root, "pr", {"README.md": "docs\n"})
    monkeypatch.chdir(root)
    code = main(["run", "--base", "main", "--head", "pr", "--format", "json", "--no-cache"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("reply", [
    "✅ PASS", "**PASS** 👍", "The reply answers the ticket.\n<verdict>PASS</verdict>",
    "PASS, though the tone could be warmer."])
def test_a_decorated_verdict_is_read(llm: FakeLLMServer, tmp_path: Path, reply: str,
                                     capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    code, report = gate(llm, tmp_path / "repo", reply, capsys, monkeypatch)
    assert (code, report["conclusion"]) == (EXIT_PASS, "success")
    for side in ("base", "head"):
        judged = [a for e in examples(report, side) for a in e["assertions"]]
        assert len(judged) == 3 and all(a["passed"] and not a["errored"] for a in judged)


def test_a_judge_naming_both_verdicts_is_still_a_judge_error(
        llm: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, report = gate(llm, tmp_path / "repo", "PASS, but FAIL on tone ✅", capsys, monkeypatch)
    assert code != EXIT_PASS and report["conclusion"] == "failure"
    judged = [a for e in examples(report, "head") for a in e["assertions"]]
    assert len(judged) == 3 and all(a["errored"] and not a["passed"] for a in judged)
    assert judged[0]["message"].startswith("judge error: the reply gives both verdicts")


def examples(report: dict[str, Any], side: str) -> list[dict[str, Any]]:
    """The examples of suite ``s`` on ``side`` (``base`` or ``head``) of a JSON report."""
    found: list[dict[str, Any]] = report["examples"]["s"][side]
    return found


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
