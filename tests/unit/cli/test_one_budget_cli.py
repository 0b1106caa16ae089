"""``llmgate run``: every call of a gate's head spends the one budget of base's config, and a
stopped run says what it spent (issue 31; the repository is tests/unit/budget_support.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import budget_support, llm_support
from tests.unit.budget_support import LONG_REPLY
from tests.unit.worker_support import clone_branches
from worker.cli.main import EXIT_UNDECIDED, main

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm
budget_repo = budget_support.budget_repo


@pytest.fixture()
def repo(budget_repo: tuple[Path, dict[str, str]], tmp_path: Path, llm: FakeLLMServer,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clone with every branch, as the current folder; no response cache."""
    source, shas = budget_repo
    clone = clone_branches(source, tmp_path / "repo", shas)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.chdir(clone)
    return clone


def gate(capsys: pytest.CaptureFixture[str], base: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", "--base", base, "--head", f"pr/{base}", "--format", "json",
                 "--no-cache"])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def test_the_pairwise_step_spends_heads_budget(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Field case: head's 5 answers spent $0.005 of max_cost_usd $0.004, then its pairwise
    step sent 10 judge calls more on a budget of its own."""
    llm.setup({"batch": 5,  # each side's 5 calls are in flight before any is charged
               "rules": [{"model": "bot-model", "match": "", "reply": LONG_REPLY},
                         {"model": "judge-model", "match": "", "reply": "WINNER: A"}]})
    code, report = gate(capsys, "pairwise")
    assert [c["model"] for c in llm.calls()] == ["bot-model"] * 10  # base's 5, head's 5
    head = report["usage"]["head"]
    assert (head["spend"]["provider_calls"], head["spend"]["cost_usd"]) == (5, 0.005)
    assert head["stopped"] == "budget exceeded: $0.0050 spent of max_cost_usd $0.0040"
    assert (code, report["conclusion"]) == (EXIT_UNDECIDED, "action_required")
    assert report["headline"] == ("over budget: budget exceeded: $0.0050 spent of max_cost_usd "
                                  "$0.0040 at head (5 of 5 examples ran, $0.0050 spent)")


def test_a_command_targets_reported_cost_is_charged_to_the_budget(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Field case: a command target reporting $0.001 an example ran all 5 examples under
    max_cost_usd $0.002 (its cost was reported, never charged)."""
    code, report = gate(capsys, "command")
    assert (code, report["conclusion"]) == (EXIT_UNDECIDED, "action_required")
    assert report["headline"] == ("over budget: budget exceeded: $0.0020 spent of max_cost_usd "
                                  "$0.0020 at head (2 of 5 examples ran, $0.0020 spent)")


def test_a_stopped_run_counts_its_unknown_cost_calls(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Field case: answers without ``usage`` are charged at their worst case but their cost is
    unknown, so a run stopped by its time limit said "$0.0000 spent"."""
    llm.setup({"latency_ms": 400, "rules": [{"model": "bot-model", "match": "",
                                             "reply": "word", "usage": None}]})
    code, report = gate(capsys, "slow")
    assert (code, report["conclusion"]) == (EXIT_UNDECIDED, "action_required")
    assert "$0.0000" not in report["headline"]
    assert re.fullmatch(r"over time: time limit reached: \d s of max_duration 1 s at (head|base) "
                        r"\(([1-4]) of 5 examples ran, \2 calls? of unknown cost spent "
                        r"\(charged to the budget at their worst case\)\)", report["headline"])
