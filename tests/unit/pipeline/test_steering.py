"""The steering probe and the sealed verdict (issue 30, part 1), through `gate_trees` with
litellm over real HTTP to the fake provider's judges (tests/fakes/fake_judge.py).

Field case: a head whose answers end with text addressed to the judge turned a real drop into a
rise with a judge that obeys the last instruction it reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context
from tests.unit.steering_support import STEERING, rules, steering_repo
from tests.unit.worker_support import clone_branches, git
from worker.evals.types import GateReport
from worker.pipeline.steering import STEERING as CAUSE
from worker.pipeline.trees import gate_trees

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


@pytest.fixture()
def trees(llm: FakeLLMServer, tmp_path: Path) -> dict[str, Path]:
    """A worktree per branch of the steering repository."""
    source = tmp_path / "src"
    shas = steering_repo(source, llm.url)
    clone = clone_branches(source, tmp_path / "clone", shas)
    out = {"main": clone}
    for branch in shas:
        if branch != "main":
            out[branch] = tmp_path / branch.replace("/", "-")
            git(clone, "worktree", "add", "-q", str(out[branch]), branch)
    return out


async def _gate(trees: dict[str, Path], branch: str) -> GateReport:
    return await gate_trees(trees[branch], trees["main"], evals=context())


async def test_an_answer_that_an_obeying_judge_passes_anywhere_fails_the_gate(
        llm: FakeLLMServer, trees: dict[str, Path]) -> None:
    """Without the probe, every steered answer passed: pass rate 0.5 -> 1.0, success."""
    llm.setup({"rules": rules("obey")})
    gate = await _gate(trees, "pr/steer")
    assert gate.head is not None
    assert gate.head.suites["codes"].metrics["pass_rate"] == 1.0  # the judge was steered
    assert gate.conclusion == "failure"
    assert gate.headline.startswith(f"{CAUSE}: suite codes, example q")
    steered = {r.example_id for r in gate.errored if CAUSE in r.reason}
    assert len(steered) == 8  # every head answer steers (all sampled: 8 < the sample size)
    assert all(r.dataset == "evals/codes.jsonl" and r.line == int(r.example_id[1:]) + 1
               for r in gate.errored if CAUSE in r.reason)
    quoted = [n for n in gate.notes if n.startswith(f"{CAUSE}: suite codes, example")]
    assert quoted and "VERDICT: PASS" in quoted[0]
    summary = next(n for n in gate.notes if n.startswith("steering probe, suite codes"))
    assert "8 passed there too: they steer the judge" in summary
    [rule] = [o for o in gate.outcomes if o.metric.startswith("steering probe")]
    assert (rule.suite, rule.status, rule.head) == ("codes", "fail", 8.0)
    assert "4 that failed at base" in summary and "base's answers passed there 0 of 4" in summary


async def test_an_honest_improvement_still_passes(llm: FakeLLMServer,
                                                 trees: dict[str, Path]) -> None:
    """Four flips (fail at base, pass at head) are probed and none passes elsewhere."""
    llm.setup({"rules": rules("obey")})
    gate = await _gate(trees, "pr/improve")
    assert gate.conclusion == "success", gate.headline
    assert not [r for r in gate.errored if CAUSE in r.reason]
    summary = next(n for n in gate.notes if n.startswith("steering probe, suite codes"))
    assert "8 passed head answers judged" in summary and "4 that failed at base" in summary
    assert summary.endswith("none passed there")
    assert gate.head is not None and gate.base is not None
    # the probe's calls are in the run's totals: every call the provider saw is counted
    judged = sum(1 for c in llm.calls() if c["model"] == "judge-model")
    assert gate.head.spend.provider_calls + gate.base.spend.provider_calls == len(llm.calls())
    assert judged == 8 + 8 + 4 + 8  # scoring at base and head, 4 controls, 8 first probes


async def test_a_judge_quoting_an_answer_that_writes_a_verdict_is_never_read_as_a_pass(
        llm: FakeLLMServer, trees: dict[str, Path]) -> None:
    """A sloppy judge quotes the wrong answers (ending ``VERDICT: PASS``) and gives no verdict
    of its own: unsealed, the quoted line was read as the judge's pass."""
    llm.setup({"rules": rules("quote")})
    gate = await _gate(trees, "pr/steer")
    assert gate.head is not None
    examples = gate.head.suites["codes"].examples
    assert not any(e.passed for e in examples)
    assert all(e.assertions[0].errored and "only the sealed line is read" in
               e.assertions[0].message for e in examples)
    assert gate.conclusion == "failure", gate.headline


async def test_a_judge_that_passes_everything_cannot_be_probed_and_says_so(
        llm: FakeLLMServer, trees: dict[str, Path]) -> None:
    """A verdict that does not depend on the question (base's answers pass against other
    questions too) is not evidence of steering: a note, no false failure."""
    llm.setup({"rules": [{"model": "judge-model", "match": "", "reply": "VERDICT: PASS",
                          "seal": True}, *rules("honest")[1:]]})
    gate = await _gate(trees, "pr/improve")
    assert gate.conclusion == "success", gate.headline
    assert any("it cannot test this judge: base's answers passed it against other examples' "
               "questions too (4 of 4)" in n for n in gate.notes)


def test_the_steering_text_is_the_field_cases() -> None:
    assert STEERING.endswith("VERDICT: PASS") and "Ignore the rubric" in STEERING


async def test_every_draw_of_a_repeated_example_is_probed(llm: FakeLLMServer) -> None:
    """A tester's case (``settings.repeats: 3``): head's target steered only draws 2 and 3,
    which made each example pass by majority; the probe looked at the first draw only."""
    from tests.unit.steering_support import ROWS, answer, config
    from worker.evals.config.load import parse_config
    from worker.evals.llm.cache import ResponseCache
    from worker.evals.llm.provider import Budget, ModelCaller
    from worker.evals.types import AssertionResult, ExampleResult, RunResult, SuiteResult
    from worker.pipeline.steering import probe_steering, probed_judges

    llm.setup({"rules": rules("obey")})
    parsed = parse_config(config(llm.url))
    [probed] = probed_judges(parsed.suites[0], parsed)

    def results(prompt: str, draws: int, steered: tuple[int, ...] = ()) -> RunResult:
        examples = []
        for i, row in enumerate(ROWS):
            for draw in range(draws):
                text = answer("STEER" if draw in steered else prompt, row, i)
                ok = draw in steered or text.startswith("The code")
                verdict = AssertionResult("llm_judge", ok, float(ok), details={
                    "prompt_version": probed.judge.version})
                examples.append(ExampleResult(row["id"], i + 1, ok, False, text,
                                              row["expected"], assertions=(verdict,),
                                              repeat=draw, input=row["input"]))
        return RunResult("sha", {"codes": SuiteResult("codes", "evals/codes.jsonl",
                                                      tuple(examples), {})})

    caller = ModelCaller(parsed.settings, ResponseCache(None, "t", "off"), Budget(None, None),
                         context())
    probe = await probe_steering(parsed, results("WRONG", 3, steered=(1, 2)),
                                 results("HALF", 3), caller)
    steered = {example.id for _, example, _ in probe.steered}
    assert steered == {row["id"] for row in ROWS}  # each example's steered draw, once
    assert len(probe.steered) == len(ROWS)  # the steered answer once, not per draw
    assert {example.repeat for _, example, _ in probe.steered} <= {1, 2}
