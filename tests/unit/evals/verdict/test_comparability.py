"""Comparability of base and head: re-score base with head's judge over real HTTP, or say not.

The fake provider (tests/fakes/fake_llm.py) answers the target by echoing and judges by rule;
its recorded calls prove how many judge calls each step made and which came from the cache.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, endpoint_yaml, model_config, write_repo
from worker.evals.config.load import parse_config
from worker.evals.run.engine import run_config
from worker.evals.types import RunResult, RunUsage
from worker.evals.verdict.comparable import NO_OUTPUTS, compare_comparable, reconcile
from worker.pipeline.trees import gate_trees
from worker.report import render as report

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

WIRE = "judge-model"
ROWS = [{"id": f"t{i:02d}", "input": f"ticket t{i:02d}", "expected": f"echo: ticket t{i:02d}"}
        for i in range(1, 11)]


def judged(url: str, rubric: str, gate: str = "{pass_rate: {min: 0.5, max_drop: 0.0}}",
           judge: str = "openai/judge-model") -> str:
    return model_config(url, settings=f"judge: {endpoint_yaml(url, judge)}", gate=gate,
                        assertions=f"      - type: llm_judge\n        rubric: {rubric}\n")


def strict_judge(llm: FakeLLMServer) -> None:
    """The strict rubric fails t01; every other judgement passes."""
    llm.setup({"rules": [
        {"model": WIRE, "match": "Strict.\n\nInput:\n<input>\nticket t01\n", "reply": "FAIL"},
        {"model": WIRE, "match": "", "reply": "VERDICT: PASS"}]})


def judge_calls(llm: FakeLLMServer, rubric: str, *, probes: bool = False) -> int:
    """Judge calls with ``rubric`` that scored an answer (``probes``: that judged an answer
    against another example's input: the steering probe, worker/pipeline/steering.py)."""
    return sum(1 for c in llm.calls("chat") if c["model"] == WIRE
               and any(f"Rubric:\n{rubric}\n" in m["content"] for m in c["messages"])
               and _is_probe(c["messages"][-1]["content"]) == probes)


def _is_probe(prompt: str) -> bool:
    """The target echoes its input, so a scoring call's answer holds the input's ticket."""
    ticket = prompt.split("<input>\n", 1)[1].split("\n", 1)[0]
    return ticket not in prompt.split("<answer>\n", 1)[1]


def repos(tmp_path: Path, head: str, base: str,
          rows: list[dict[str, Any]] | None = None,
          base_rows: list[dict[str, Any]] | None = None) -> tuple[Path, Path]:
    return (write_repo(tmp_path / "head", head, rows or ROWS, prompt="{{ input }}"),
            write_repo(tmp_path / "base", base, base_rows or rows or ROWS, prompt="{{ input }}"))


async def test_a_stricter_rubric_at_head_rescores_base_beside_the_verdict_on_bases(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """The verdict scores head's answers with base's rubric; head's own rubric is shown
    beside it, base's outputs re-scored with it (worker/evals/verdict/contract.py)."""
    strict_judge(llm)
    head, base = repos(tmp_path, judged(llm.url, "Strict."), judged(llm.url, "Lenient."))
    gate = await gate_trees(head, base, evals=context())
    same, verdict = gate.comparability
    assert (same.suite, same.status) == ("s", "same")  # head's target, base's contract
    assert (verdict.suite, verdict.status) == ("s (head's contract)", "rescored")
    assert verdict.scoring_changes == ("assertions", "judge_prompts")
    assert verdict.output_changes == ()
    assert verdict.reason == ("the scoring changed (assertions, judge prompts (rubric, scale)): "
                              "base's outputs were re-scored with head's assertions and judges")
    assert gate.conclusion == "success" and gate.regressions == ()
    assert gate.base is not None and gate.head is not None
    assert gate.base.suites["s"].metrics["pass_rate"] == 1.0  # base's lenient rubric
    assert gate.head.suites["s"].metrics["pass_rate"] == 1.0
    [change] = gate.contract
    assert (change.changes, change.conclusion, change.regressions) == (
        ("assertions", "judge_prompts"), "success", 0)
    assert change.metrics["pass_rate"] == 0.9  # t01 fails under head's rubric, at base too
    # No cache: base judged 10 with its rubric, head 10 with base's and 10 with its own,
    # and re-scoring base 10 with head's.
    assert (judge_calls(llm, "Strict."), judge_calls(llm, "Lenient.")) == (20, 20)
    # and the steering probe's 4 controls with base's judge, which passes answers to other
    # questions too, so the probe says it cannot test it
    assert judge_calls(llm, "Lenient.", probes=True) == 4
    assert any("it cannot test this judge" in n for n in gate.notes)
    assert (verdict.spend.provider_calls, verdict.spend.cache_hits) == (10, 0)
    assert not any("judge prompt changed" in note for note in gate.notes)


async def test_the_judge_cache_makes_rescoring_free(llm: FakeLLMServer, redis: Redis,
                                                    tmp_path: Path) -> None:
    strict_judge(llm)
    head, base = repos(tmp_path, judged(llm.url, "Strict."), judged(llm.url, "Lenient."))
    gate = await gate_trees(head, base, evals=context(redis=redis, namespace="acme/bot"))
    _, verdict = gate.comparability
    # Base's outputs equal head's (same model and prompt): each judgement is made once.
    assert (verdict.status, verdict.spend.provider_calls, verdict.spend.cache_hits) == (
        "rescored", 0, 10)
    assert (judge_calls(llm, "Strict."), judge_calls(llm, "Lenient.")) == (10, 10)
    assert gate.conclusion == "success"
    summary = report.check_summary(gate)
    assert ("- s (head's contract): re-scored: the scoring changed (assertions, judge prompts "
            "(rubric, scale)): base's outputs were re-scored with head's assertions and judges "
            "(re-scoring: 0 live + 10 cached, \\$0.0000)") in summary


async def test_a_new_judge_model_at_head_judges_only_heads_own_contract(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": [
        {"model": "big-judge", "match": "ticket t03", "reply": "VERDICT: FAIL"},
        {"model": "big-judge", "match": "", "reply": "PASS"},
        {"model": WIRE, "match": "", "reply": "PASS"}]})
    head, base = repos(tmp_path, judged(llm.url, "Strict.", judge="openai/big-judge"),
                       judged(llm.url, "Strict."))
    gate = await gate_trees(head, base, evals=context())
    _, verdict = gate.comparability
    assert verdict.scoring_changes == ("judges",)
    assert sum(c["model"] == "big-judge" for c in llm.calls("chat")) == 20  # head + re-scoring
    assert judge_calls(llm, "Strict.") == 20  # base, and head's verdict
    assert judge_calls(llm, "Strict.", probes=True) == 4  # the steering probe's controls
    assert gate.conclusion == "success" and gate.regressions == ()
    assert [c.changes for c in gate.contract] == [("judges",)]


async def test_a_changed_expected_value_is_not_a_regression_of_the_model(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """The PR rewrites t02's label: the verdict checks head against base's label, and under
    head's own contract base is scored against the new label too (no calls)."""
    config = model_config(llm.url, gate="{pass_rate: {max_drop: 0.0, max_new_failures: 0}}",
                          assertions="      - type: equals\n")
    relabelled = [dict(r, expected="billing") if r["id"] == "t02" else r for r in ROWS]
    head, base = repos(tmp_path, config, config, rows=relabelled, base_rows=ROWS)
    gate = await gate_trees(head, base, evals=context())
    same, verdict = gate.comparability
    assert same.status == "same"
    assert (verdict.status, verdict.scoring_changes, verdict.spend) == (
        "rescored", ("expected",), RunUsage())
    assert verdict.output_changes == ()
    assert gate.regressions == () and gate.conclusion == "success"
    assert [(o.suite, o.status) for o in gate.outcomes] == [
        ("s", "pass"), ("s", "pass"), ("s (head's contract)", "pass"),
        ("s (head's contract)", "pass")]


async def test_unchanged_scoring_is_compared_as_is(llm: FakeLLMServer, tmp_path: Path) -> None:
    strict_judge(llm)
    head, base = repos(tmp_path, judged(llm.url, "Strict."), judged(llm.url, "Strict."))
    (base / "prompts" / "p.txt").write_text("Ticket: {{ input }}")  # the PR changed the prompt
    gate = await gate_trees(head, base, evals=context())
    (verdict,) = gate.comparability
    assert (verdict.status, verdict.scoring_changes, verdict.output_changes) == (
        "same", (), ("prompt",))
    assert judge_calls(llm, "Strict.") == 20  # head and base, nothing re-scored


async def _runs(llm: FakeLLMServer, tmp_path: Path,
                gate: str) -> tuple[Path, Any, RunResult, RunResult]:
    strict_judge(llm)
    head, base = repos(tmp_path, judged(llm.url, "Strict.", gate=gate),
                       judged(llm.url, "Lenient.", gate=gate))
    config = parse_config((head / ".llmgate.yml").read_text())
    base_config = parse_config((base / ".llmgate.yml").read_text())
    head_run = await run_config(config, head, "a" * 40, context())
    base_run = await run_config(base_config, base, "b" * 40, context())
    return head, config, head_run, base_run


async def test_a_base_without_outputs_is_not_comparable_and_undecided(llm: FakeLLMServer,
                                                                      tmp_path: Path) -> None:
    head, config, head_run, base_run = await _runs(
        llm, tmp_path, "{pass_rate: {min: 0.5, max_drop: 0.0}}")
    stored = replace(base_run, suites={"s": replace(base_run.suites["s"], examples=())})
    before = len(llm.calls())
    gate = await compare_comparable(config, head, head_run, stored, (), context())
    assert len(llm.calls()) == before  # nothing to re-score
    (verdict,) = gate.comparability
    reason = ("the scoring changed (assertions, judge prompts (rubric, scale)) and "
              f"{NO_OUTPUTS}")
    assert (verdict.status, verdict.reason) == ("not_comparable", reason)
    assert gate.conclusion == "action_required" and gate.regressions == ()  # undecided
    assert gate.headline == "s not comparable with base: relative rules not applied"
    assert [(o.rule, o.status, o.reason) for o in gate.outcomes] == [
        ("min 0.50", "pass", ""),
        ("max_drop 0.00", "skipped", f"not comparable with base: {reason}")]
    assert gate.base == stored  # the report still shows base's numbers
    body = report.comment_body(gate, head_sha="a" * 40, base_sha="b" * 40)
    assert "#### s · ⚪ not comparable with base" in body
    assert report.check_title(gate) == (
        "llmgate: action required - s not comparable with base: relative rules not applied")


async def test_absolute_rules_still_fail_a_not_comparable_suite(llm: FakeLLMServer,
                                                                tmp_path: Path) -> None:
    head, config, head_run, base_run = await _runs(
        llm, tmp_path, "{pass_rate: {min: 0.95, max_drop: 0.0}}")
    stored = replace(base_run, suites={"s": replace(base_run.suites["s"], examples=())})
    gate = await compare_comparable(config, head, head_run, stored, (), context())
    assert gate.conclusion == "failure"  # head's 0.9 is below min 0.95 whatever base did
    assert [o.status for o in gate.outcomes] == ["fail", "skipped"]
    assert gate.headline == ""
    body = report.comment_body(gate, head_sha="a" * 40, base_sha="b" * 40)
    assert "#### s · ❌ fail · not comparable with base" in body


async def test_unknown_base_scoring_is_rescored_and_broken_scoring_is_not_comparable(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    head, config, head_run, base_run = await _runs(
        llm, tmp_path, "{pass_rate: {max_drop: 0.0}}")
    old = replace(base_run, suites={"s": replace(base_run.suites["s"], fingerprint=None)})
    verdicts, rescored = await reconcile(config, head, head_run, old, context())
    assert [(v.status, v.reason) for v in verdicts] == [(
        "rescored", "base's result does not say how it was scored: base's outputs were "
        "re-scored with head's assertions and judges")]
    assert rescored.suites["s"].metrics["pass_rate"] == 0.9
    (head / "evals" / "d.jsonl").unlink()  # head's expected values are gone: cannot score
    verdicts, rescored = await reconcile(config, head, head_run, base_run, context())
    assert verdicts[0].status == "not_comparable"
    assert "head's assertions cannot score base's outputs: evals/d.jsonl: file not found" \
        in verdicts[0].reason
    assert rescored.suites["s"] is base_run.suites["s"]


async def test_rescoring_base_under_heads_contract_recomputes_custom_metrics(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """A per-example custom metric survives the re-scoring of base under head's own contract
    (the PR relabels t02), so its paired rule compares ten pairs, not none."""
    config = model_config(
        llm.url, gate="{custom.long: {max_example_drop: {by: 0.5, count: 0}}}",
        assertions="      - type: equals\n",
        suite_extra="    metrics:\n      - {name: long, type: python, "
                    "function: 'm.py:long', per_example: true}\n")
    relabelled = [dict(r, expected="billing") if r["id"] == "t02" else r for r in ROWS]
    head, base = repos(tmp_path, config, config, rows=relabelled, base_rows=ROWS)
    for root in (head, base):
        (root / "m.py").write_text("def long(result):\n    return len(result['output'] or '')\n")
    gate = await gate_trees(head, base, evals=context())
    assert gate.comparability[1].status == "rescored"
    assert [(o.suite, o.rule, o.status) for o in gate.outcomes] == [
        ("s", "max_example_drop 0.5 count 0", "pass"),
        ("s (head's contract)", "max_example_drop 0.5 count 0", "pass")]
    assert gate.conclusion == "success"
