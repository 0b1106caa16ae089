"""``llmgate run --base X --head Y`` fails closed: issue 12's cases end to end on a real git
repository, litellm over real HTTP to the fake provider (tests/unit/failclosed_support.py).

Before issue 12 each of the first four branches exited 0 (``neutral``) with 5 regressions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import failclosed_support, llm_support
from tests.unit.failclosed_support import FOREIGN_BASE, LINES
from tests.unit.worker_support import clone_branches
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, EXIT_UNDECIDED, main

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


failclosed_repo = failclosed_support.failclosed_repo


@pytest.fixture()
def repo(failclosed_repo: tuple[Path, dict[str, str]], tmp_path: Path, llm: FakeLLMServer,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clone with every branch, as the current folder; no response cache, no real keys."""
    source, shas = failclosed_repo
    clone = clone_branches(source, tmp_path / "repo", shas)
    for name in ("REDIS_URL", "ANTHROPIC_API_KEY", "FAKE_LLM_KEY_TYPO",
                 "LLMGATE_ALLOWED_API_BASES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(clone)
    return clone


def gate(capsys: pytest.CaptureFixture[str], head: str, base: str = "main",
         *flags: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", "--base", base, "--head", head, "--format", "json", *flags])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


@pytest.mark.parametrize(("branch", "field", "message"), [
    ("pr/provider", "model", "the worker has no ANTHROPIC_API_KEY, which "
                             "anthropic/claude-3-5-haiku-20241022 needs"),
    ("pr/keyenv", "api_key_env", "the worker has no FAKE_LLM_KEY_TYPO (api_key_env names"),
    ("pr/apibase", "api_base", f"api_base '{FOREIGN_BASE}' is not allowed on this worker"),
])
def test_a_head_whose_calls_cannot_be_made_fails_naming_the_cause_and_line(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str], branch: str,
        field: str, message: str) -> None:
    """Issue 31: head is refused at configuration before base sends any call (before, base's
    5 calls were sent first and head's 5 examples then failed one by one)."""
    code, report = gate(capsys, branch)
    assert (code, report["conclusion"]) == (EXIT_CONFIG_ERROR, "failure")
    error = report["config_error"]
    assert (error["path"], error["line"]) == (".llmgate.yml", LINES[field])
    assert error["message"].startswith(f"the target: {message}")
    assert error["message"].endswith(
        ": no call to it can be made, so neither base nor head was run")
    assert report["regressions"] == [] and report["errored"] == []
    assert llm.calls() == []  # base sent none of its calls


def test_a_head_unpriced_under_base_budget_is_refused_before_base_runs(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31: under base's ``max_cost_usd`` the sides run one after the other, so head's
    model without a price was refused only after base's 5 calls were sent."""
    code, report = gate(capsys, "pr/unpriced", "priced")
    assert (code, report["conclusion"]) == (EXIT_CONFIG_ERROR, "failure")
    error = report["config_error"]
    assert (error["path"], error["line"]) == (".llmgate.yml", LINES["model"] + 1)  # +settings
    assert error["message"].startswith("the target: openai/bot-model has no known price")
    assert llm.calls() == []


@pytest.mark.parametrize(("branch", "setting"), [
    ("pr/budget", "settings.max_cost_usd 1e-06 -> none"),
    ("pr/timeout", "settings.timeout 0.001 -> 60"),
])
def test_a_head_cannot_stop_its_own_run_with_its_own_limits(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str], branch: str,
        setting: str) -> None:
    llm.setup({"latency_ms": 20})  # so a 1 ms timeout would time every call out
    code, report = gate(capsys, branch)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert len(report["regressions"]) == 5 and report["errors"] == []
    [note] = [n for n in report["notes"] if n.startswith("head's run used base's settings")]
    assert setting in note


def test_connection_refused_at_an_endpoint_head_introduced_is_heads(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = gate(capsys, "pr/refused")
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    (error,) = [e for e in report["errors"] if e["side"] == "head"]
    assert (error["cause"], error["permanent"], error["line"]) == ("head", False,
                                                                   LINES["api_base"])
    assert "Connection error" in error["message"]
    assert len(report["errored"]) == 5


def test_an_outage_on_both_sides_is_undecided_exit_4_unless_allowed(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    llm.setup({"faults": [{"status": 503, "times": None}]})
    code, report = gate(capsys, "pr/regress")
    assert (code, report["conclusion"]) == (EXIT_UNDECIDED, "action_required")
    assert report["headline"].startswith("undecided: provider errors: 5 of 5 examples got "
                                         "no answer at head (the first, tickets/t1: provider "
                                         "error (HTTP 503): ")
    assert {(e["side"], e["cause"]) for e in report["errors"]} == {("head", "outside"),
                                                                   ("base", "outside")}
    allowed, _ = gate(capsys, "pr/regress", "main", "--allow-undecided")
    assert allowed == EXIT_PASS


def test_only_the_base_config_may_make_an_undecided_run_neutral(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    llm.setup({"faults": [{"status": 503, "times": None}]})
    code, report = gate(capsys, "pr/head-neutral")
    assert (code, report["conclusion"]) == (EXIT_UNDECIDED, "action_required")
    code, report = gate(capsys, "pr/on-neutral", "undecided-neutral")
    assert (code, report["conclusion"]) == (EXIT_PASS, "neutral")
    assert report["headline"].startswith("undecided: provider errors: 5 of 5 examples")
    assert report["headline"].endswith("(neutral, as base's settings.undecided says)")


def test_over_base_budget_is_blocked_and_a_head_raising_it_is_too(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = gate(capsys, "pr/raise-budget", "low-budget")
    assert (code, report["conclusion"]) == (EXIT_UNDECIDED, "action_required")
    assert report["headline"].startswith("over budget: not started: the estimate $")
    assert "exceeds max_cost_usd $0.0001" in report["headline"]
    assert llm.calls() == []
