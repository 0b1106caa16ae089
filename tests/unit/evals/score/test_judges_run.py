"""LLM judges over real HTTP: fail closed on judge errors, quorum, traps, rubric versions."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, endpoint_yaml, model_config, write_repo
from worker.pipeline.trees import gate_trees
from worker.report import render as report

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

JUDGE = "openai/judge-model"
#: The model name as the provider receives it (litellm strips the provider prefix).
WIRE = "judge-model"
NOT_FOUND = {"error": {"message": "The model `judge-model` does not exist",
                       "type": "invalid_request_error", "code": "model_not_found"}}


def judged_config(url: str, settings: str = "", extra: str = "") -> str:
    return model_config(
        url, settings=f"judge: {endpoint_yaml(url, JUDGE)}" + (f", {settings}" if settings else ""),
        assertions="      - type: llm_judge\n        rubric: Answers the ticket.\n" + extra,
        gate="{pass_rate: {min: 0.5}}")


def ten_rows() -> list[dict[str, str]]:
    return [{"id": f"t{i:02d}", "input": f"ticket t{i:02d}"} for i in range(1, 11)]


async def test_judge_errors_fail_closed(llm: FakeLLMServer, tmp_path: Path) -> None:
    """Field case: 3 judge calls answer 404, one reply has no verdict: 4 judge errors."""
    llm.setup({
        "faults": [{"model": WIRE, "match": f"ticket t0{i}", "status": 404, "times": None,
                    "body": NOT_FOUND} for i in (1, 2, 3)],
        "rules": [{"model": WIRE, "match": "ticket t04", "reply": '{"reason": "looks fine"}'},
                  {"model": WIRE, "match": "", "reply": "VERDICT: PASS"}]})
    repo = write_repo(tmp_path, judged_config(llm.url), ten_rows())
    gate = await gate_trees(repo, None, evals=context())
    examples = gate.head.suites["s"].examples  # type: ignore[union-attr]
    errored = [e.id for e in examples if e.unscored]
    assert errored == ["t01", "t02", "t03", "t04"]
    assert not any(e.passed for e in examples if e.unscored)
    assert all(e.passed for e in examples if not e.unscored)
    judge = examples[0].assertions[0]
    assert judge.errored and "HTTP 404" in judge.message and "does not exist" in judge.message
    assert "no verdict or score" in examples[3].assertions[0].message
    assert gate.head.suites["s"].metrics["judge_error_rate"] == 0.4  # type: ignore[union-attr]
    assert gate.conclusion == "failure"
    summary, comment = report.check_summary(gate), report.comment_body(gate, head_sha="",
                                                                         base_sha=None)
    for text in (summary, comment, report.check_title(gate)):
        assert "4 judge errors" in text
    judge_calls = [c for c in llm.calls() if c["model"] == "judge-model"]
    assert sum(c["status"] == 404 for c in judge_calls) == 3  # a 404 is not retried


async def test_judge_errors_within_the_allowed_share_do_not_fail(llm: FakeLLMServer,
                                                                 tmp_path: Path) -> None:
    llm.setup({"rules": [{"model": WIRE, "match": "ticket t04", "reply": "I can't judge this"},
                         {"model": WIRE, "match": "", "reply": "PASS"}]})
    repo = write_repo(tmp_path, judged_config(llm.url, "max_judge_error_rate: 0.2"),
                      ten_rows())
    gate = await gate_trees(repo, None, evals=context())
    assert gate.conclusion == "success"
    assert gate.head.suites["s"].metrics["pass_rate"] == 1.0  # type: ignore[union-attr]
    assert any("1 judge error at head" in note for note in gate.notes)
    # the note quotes the first errored assertion, so a shared cause is visible at once
    assert any("the first: s/t04: llm_judge: judge error:" in note for note in gate.notes)


async def test_quorum_of_three_reports_disagreement(llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"faults": [{"model": WIRE, "match": "ticket t01", "status": 200,
                           "body": _completion("VERDICT: FAIL")}],
               "rules": [{"model": WIRE, "match": "", "reply": "VERDICT: PASS"}]})
    config = judged_config(llm.url, extra="        n: 3\n")
    repo = write_repo(tmp_path, config, ten_rows()[:2])
    gate = await gate_trees(repo, None, evals=context())
    first = gate.head.suites["s"].examples[0].assertions[0]  # type: ignore[union-attr]
    assert first.passed and sorted(first.details["votes"]) == [0.0, 1.0, 1.0]
    assert first.details["disagreement"] > 0
    assert len([c for c in llm.calls() if c["model"] == "judge-model"]) == 6
    assert "quorum disagreed on 1 judgements" in report.check_summary(gate)


async def test_traps_measure_the_judge(llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": [{"model": WIRE, "match": "wrong answer two", "reply": "VERDICT: PASS"},
                         {"model": WIRE, "match": "wrong answer", "reply": "VERDICT: FAIL"},
                         {"model": WIRE, "match": "", "reply": "VERDICT: PASS"}]})
    traps = ('{"id": "x1", "input": "q", "output": "wrong answer one"}\n'
             '{"id": "x2", "input": "q", "output": "wrong answer two"}\n')
    config = judged_config(llm.url) + "    traps: evals/traps.jsonl\n"
    config = config.replace("gate: {pass_rate: {min: 0.5}}",
                            "gate: {judge_trap_accuracy: {min: 1.0}}")
    repo = write_repo(tmp_path, config, ten_rows()[:1], files={"evals/traps.jsonl": traps})
    gate = await gate_trees(repo, None, evals=context())
    suite = gate.head.suites["s"]  # type: ignore[union-attr]
    assert suite.traps is not None and (suite.traps.caught, suite.traps.total) == (1, 2)
    assert suite.traps.missed_ids == ("x2",)
    assert suite.metrics["judge_trap_accuracy"] == 0.5
    assert gate.conclusion == "failure"
    assert "the judge caught 1 of 2 trap cases" in report.check_summary(gate)


def _completion(text: str) -> dict[str, object]:
    return {"id": "x", "object": "chat.completion", "created": 1, "model": "judge-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}
