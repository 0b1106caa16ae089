"""``llmgate run`` scores head's target on base's evaluation contract: a pull request that
regresses 5 examples cannot pass by changing how they are scored (issue 12, second part).

Real git repository and litellm over real HTTP to the fake provider
(tests/unit/contract_support.py). Before this, each branch below exited 0 (``success``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import contract_support, llm_support
from tests.unit.contract_support import BAD_ANSWER, REGRESSED
from tests.unit.worker_support import clone_branches
from worker.cli.main import EXIT_GATE_FAILED, EXIT_PASS, main

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm
contract_repo = contract_support.contract_repo


@pytest.fixture()
def repo(contract_repo: tuple[Path, dict[str, str]], tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clone with every branch, as the current folder; no response cache."""
    source, shas = contract_repo
    clone = clone_branches(source, tmp_path / "repo", shas)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.chdir(clone)
    return clone


def gate(capsys: pytest.CaptureFixture[str], head: str,
         base: str = "main") -> tuple[int, dict[str, Any]]:
    """Run the gate without the response cache (the tests count provider calls); return the
    exit code and the JSON report."""
    code = main(["run", "--base", base, "--head", head, "--format", "json", "--no-cache"])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def markdown(capsys: pytest.CaptureFixture[str], head: str, base: str) -> str:
    main(["run", "--base", base, "--head", head])
    out, _ = capsys.readouterr()
    return out


def regressed(report: dict[str, Any]) -> list[str]:
    return sorted(r["example_id"] for r in report["regressions"])


@pytest.mark.parametrize(("branch", "base", "changes"), [
    ("pr/expected", "main", ["expected"]),
    ("pr/delete", "main", ["dataset_inputs", "expected", "labels"]),
    ("pr/loosen", "contains", ["assertions"]),
    ("pr/lenient", "judged", ["judges"]),
])
def test_a_regression_cannot_pass_by_changing_its_own_scoring(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str], branch: str,
        base: str, changes: list[str]) -> None:
    contract_support.judges(llm)
    code, report = gate(capsys, branch, base)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert regressed(report) == REGRESSED  # base's examples, scored by base's contract
    [change] = report["contract"]
    assert (change["suite"], change["changes"]) == ("tickets", changes)
    assert change["conclusion"] == "success" and change["regressions"] == 0  # head's own
    assert report["headline"].startswith(
        "passes only under head's changed evaluation contract (tickets: ")
    assert report["headline"].endswith("base's contract decides until the change is merged; "
                                       "a writer can accept the regression")
    text = markdown(capsys, branch, base)
    assert "**Evaluation contract changed at head**" in text
    assert "- tickets: head changes the evaluation contract (" in text
    own = [o for o in report["outcomes"] if o["suite"] == "tickets (head's contract)"]
    assert [(o["rule"], o["status"]) for o in own] == [("max_drop 0.10", "pass")]


def test_deleted_examples_still_run_and_are_annotated_as_deleted(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = gate(capsys, "pr/delete")
    assert code == EXIT_GATE_FAILED
    [change] = report["contract"]
    assert (change["added"], change["removed"]) == ([], REGRESSED)
    assert change["metrics"]["pass_rate"] == 1.0  # the 5 parcels left at head all pass
    assert report["metrics"]["tickets"]["head"]["pass_rate"] == 0.5  # base's 10 examples
    first = next(r for r in report["regressions"] if r["example_id"] == "t1")
    assert first["head_output"] == BAD_ANSWER
    assert first["reason"].endswith("(the example is deleted at head; line 1 of base's dataset)")


def test_edited_expected_values_are_annotated_on_heads_lines(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    _, report = gate(capsys, "pr/expected")
    assert [(r["dataset"], r["line"], r["expected"]) for r in report["regressions"]] == [
        ("evals/tickets.jsonl", n, f"echo: Customer says: refund for order {n}")
        for n in range(1, 6)]  # base's expected value: the one the gate checked


def test_a_contract_change_that_passes_both_contracts_passes(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = gate(capsys, "pr/fixed")
    assert (code, report["conclusion"], report["regressions"]) == (EXIT_PASS, "success", [])
    [change] = report["contract"]
    assert (change["changes"], change["added"], change["conclusion"]) == (
        ["dataset_inputs", "expected", "labels"], ["t11"], "success")
    assert len(llm.calls("chat")) == 21  # base's 10; head's 10 once for both contracts, + t11
    head = report["usage"]["head"]
    assert (head["estimate"]["calls"], head["spend"]["provider_calls"]) == (11, 11)


@pytest.mark.parametrize(("branch", "base", "what"), [
    ("pr/timeouts", "tolerant", "timed out"),
    ("pr/no-verdict", "judged-tolerant", "judge"),
])
def test_examples_hidden_under_base_allowances_count_as_failed(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str], branch: str,
        base: str, what: str) -> None:
    """Base allows 50% of examples without an answer or a verdict; head makes exactly its
    5 regressed examples get none, and they fail instead of dropping out."""
    contract_support.judges(llm)
    if branch == "pr/timeouts":
        contract_support.stall_regressed(llm)
    code, report = gate(capsys, branch, base)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert regressed(report) == REGRESSED
    assert all("counted as failed: base has a verdict for this example" in r["reason"]
               for r in report["regressions"])
    assert what in report["regressions"][0]["reason"]
    assert any(n.startswith("5 example results of head got no answer or no judge verdict "
                            "where base has one") for n in report["notes"])
    assert report["contract"] == []  # nothing but the prompt changed
