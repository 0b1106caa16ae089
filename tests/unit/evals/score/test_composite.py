"""``composite`` judges over real HTTP: weighted criteria, each shown, fail closed on errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, endpoint_yaml, model_config, write_repo
from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.pipeline.trees import gate_trees
from worker.report import render as report

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

JUDGE = "openai/judge-model"
COMPOSITE = ("      - type: composite\n        threshold: 0.7\n        criteria:\n"
             "          - {name: accuracy, rubric: States the refund amount., weight: 2,"
             " scale: 1-5}\n"
             "          - {name: tone, rubric: Is polite.}\n")


def config(url: str) -> str:
    return model_config(url, settings=f"judge: {endpoint_yaml(url, JUDGE)}",
                        assertions=COMPOSITE, gate="{pass_rate: {min: 0.5}}")


async def test_weighted_criteria_combine_and_the_report_shows_each(llm: FakeLLMServer,
                                                                  tmp_path: Path) -> None:
    llm.setup({"rules": [
        {"match": ["refund amount", "No refund", "ticket t01"], "reply": "Wrong amount.\nSCORE: 2"},
        {"match": ["Is polite", "No refund", "ticket t02"], "reply": "Rude.\nVERDICT: FAIL"},
        {"match": "refund amount", "reply": "SCORE: 5"},
        {"match": "Is polite", "reply": "VERDICT: PASS"},
        {"match": "Customer says", "reply": "Refund of 10 USD."},
        {"match": "Client says", "reply": "No refund."}]})
    rows = [{"id": "t01", "input": "ticket t01"}, {"id": "t02", "input": "ticket t02"}]
    base = write_repo(tmp_path / "base", config(llm.url), rows)
    head = write_repo(tmp_path / "head", config(llm.url), rows, prompt="Client says: {{ input }}")
    gate = await gate_trees(head, base, evals=context())
    t01, t02 = gate.head.suites["s"].examples  # type: ignore[union-attr]
    first = t01.assertions[0]
    # (2 * 0.25 + 1 * 1.0) / 3 = 0.5 < 0.7
    assert first.score == pytest.approx(0.5) and not first.passed
    assert first.message == "composite 0.50 < 0.7: accuracy 0.25 x2 (Wrong amount.); tone 1.00 x1"
    assert [c["name"] for c in first.details["criteria"]] == ["accuracy", "tone"]
    second = t02.assertions[0]  # (2 * 1.0 + 0) / 3 = 0.667 < 0.7
    assert second.score == pytest.approx(2 / 3) and "tone 0.00 x1 (Rude.)" in second.message
    assert all(e.passed for e in gate.base.suites["s"].examples)  # type: ignore[union-attr]
    text = report.comment_body(gate, head_sha="", base_sha=None)
    assert "accuracy 0.25 x2" in text and "tone 0.00 x1" in text


async def test_a_criterion_judge_error_leaves_the_example_unscored(llm: FakeLLMServer,
                                                                  tmp_path: Path) -> None:
    llm.setup({"rules": [{"match": "refund amount", "reply": "I cannot tell."},
                         {"match": "Is polite", "reply": "VERDICT: PASS"},
                         {"match": "Customer says", "reply": "Refund of 10 USD."}]})
    repo = write_repo(tmp_path, config(llm.url), [{"id": "t01", "input": "ticket t01"}])
    gate = await gate_trees(repo, None, evals=context())
    example = gate.head.suites["s"].examples[0]  # type: ignore[union-attr]
    assert example.unscored and not example.passed
    assert example.assertions[0].message.startswith("criterion accuracy: judge error:")
    assert gate.conclusion != "success"
    estimate = gate.head.estimate  # type: ignore[union-attr]
    assert estimate is not None and estimate.calls == 3  # the target, then each criterion


@pytest.mark.parametrize(("criteria", "error"), [
    ("[]", "needs `criteria`"),
    ("[{name: a, rubric: x}, {name: a, rubric: y}]", "duplicate criterion name 'a'"),
    ("[{name: a, rubric: x, weight: 0}]", "`weight` must be a number > 0"),
    ("[{name: a, rubric: x, colour: red}]", "unknown option 'colour'"),
    ("[{name: a}]", "needs exactly one of `rubric`"),
])
def test_bad_composites_are_config_errors_at_their_line(criteria: str, error: str) -> None:
    text = ("version: 1\nsettings: {judge: {model: openai/j}}\nsuites:\n  - name: s\n"
            "    dataset: d.jsonl\n    target: {command: 'x {input_file} {output_file}'}\n"
            f"    assertions:\n      - type: composite\n        criteria: {criteria}\n")
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert error in caught.value.message and caught.value.line == 8
