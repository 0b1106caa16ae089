"""``max`` and ``max_increase`` for lower-is-better metrics (latency, cost, tokens)."""

from __future__ import annotations

from pathlib import Path

from worker.evals.types import GateRule, SuiteResult
from worker.evals.verdict.upper_rules import check_upper
from worker.pipeline.trees import gate_trees


def suite(**metrics: float) -> SuiteResult:
    return SuiteResult("s", "d.jsonl", (), dict(metrics))


def test_max_and_max_increase() -> None:
    rule = GateRule("latency_p90", max=1500.0, max_increase=200.0)
    ok = check_upper("s", rule, suite(latency_p90=1400.0), suite(latency_p90=1250.0))
    assert [(o.rule, o.status) for o in ok] == [("max 1500", "pass"), ("max_increase 200", "pass")]
    bad = check_upper("s", rule, suite(latency_p90=1600.0), suite(latency_p90=1300.0))
    assert [o.status for o in bad] == ["fail", "fail"]
    assert bad[0].reason == "1600 is above the maximum 1500"
    assert bad[1].reason == "rose 300 from base 1300 (allowed 200)" and bad[1].delta == 300.0


def test_cost_rule_at_the_boundary_passes_despite_float_noise() -> None:
    rule = GateRule("cost_total", max_increase=0.0001)
    outcome = check_upper("s", rule, suite(cost_total=0.0007), suite(cost_total=0.0006))
    assert outcome[0].status == "pass"


def test_missing_values() -> None:
    rule = GateRule("cost_mean", max=0.01, max_increase=0.001)
    no_base = check_upper("s", rule, suite(cost_mean=0.002), None)
    assert [o.status for o in no_base] == ["pass", "skipped"]
    unavailable = check_upper("s", rule, suite(), suite(cost_mean=0.002))
    assert [o.status for o in unavailable] == ["fail", "fail"]
    assert "unavailable at head" in unavailable[0].reason
    assert check_upper("s", GateRule("cost_mean"), suite(), None) == []


async def test_a_cost_ceiling_gates_a_run_end_to_end(tmp_path: Path) -> None:
    # The latency scored is never below the command's wall time (worker/evals/score/outputs.py),
    # and a Python start on a loaded machine can take over a second: the reported 9 s and the
    # 10 s ceiling leave the wall time room, the cost ceiling alone decides.
    (tmp_path / "bot.py").write_text(
        "import json, sys\njson.dump({'output': 'ok', 'cost': 0.0015, 'latency_ms': 9000},"
        " open(sys.argv[2], 'w'))\n")
    (tmp_path / "d.jsonl").write_text('{"input": 1}\n{"input": 2}\n')
    (tmp_path / ".llmgate.yml").write_text(
        "version: 1\nsuites:\n  - name: s\n    dataset: d.jsonl\n"
        "    target: {command: 'python3 bot.py {input_file} {output_file}'}\n"
        "    gate:\n      cost_total: {max: 0.002}\n      latency_p90: {max: 10000}\n")
    gate = await gate_trees(tmp_path, None)
    outcomes = {(o.metric, o.rule): o.status for o in gate.outcomes}
    assert outcomes == {("cost_total", "max 0.002"): "fail", ("latency_p90", "max 10000"): "pass"}
    assert gate.conclusion == "failure"
