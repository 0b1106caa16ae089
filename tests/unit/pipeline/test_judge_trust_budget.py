"""A gate's judge calibration spends the run's one budget: in its estimate, limit and totals."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, endpoint_yaml, model_config, write_repo
from tests.unit.pipeline.judge_trust_support import GOOD, JUDGE_RULES, LABELS, LAX, RULES
from worker.pipeline.trees import gate_trees

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

PRICE = "pricing: {input: 1000, output: 1000}"  # USD per million tokens


def _repo(root: Path, url: str, judge: str, limit: str) -> Path:
    """The judge-trust repository with priced models and a ``max_cost_usd`` (or none)."""
    settings = f"judge: {endpoint_yaml(url, judge, PRICE)}" + (
        f", max_cost_usd: {limit}" if limit else "")
    config = model_config(url, settings=settings, target_extra=f", {PRICE}",
                          assertions="      - type: llm_judge\n        rubric: Answers it.\n",
                          gate="{pass_rate: {min: 0.5}}", suite_extra=f"    judge: {JUDGE_RULES}\n")
    return write_repo(root, config, [{"id": f"t{i}", "input": f"ticket {i}"} for i in range(3)],
                      files={"evals/labels.jsonl": "".join(json.dumps(r) + "\n"
                                                           for r in LABELS)})


def _label_calls(llm: FakeLLMServer) -> int:
    return sum(1 for c in llm.calls() if "answer " in str(c["messages"])
               and "ticket" not in str(c["messages"]))


async def test_the_calibration_is_in_the_estimate_and_the_totals(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": RULES})
    gate = await gate_trees(_repo(tmp_path / "head", llm.url, LAX, ""),
                            _repo(tmp_path / "base", llm.url, GOOD, ""), evals=context())
    assert gate.head is not None and gate.base is not None and gate.head.estimate is not None
    assert _label_calls(llm) == 16  # head's judge and base's (no snapshot) on 8 labels
    # head's run: 3 answers, judged by base's judge and by head's (its own contract), the
    # 16 calibration calls, 3 of the steering probe (worker/pipeline/steering.py) and 3 more
    # re-scoring base's answers with head's judge (issue 31: on its own budget, they were in
    # neither), in the estimate and in the totals alike
    assert gate.head.estimate.calls == gate.head.spend.provider_calls == 3 + 3 + 3 + 16 + 3 + 3
    assert "judge calibration: 16 provider calls" in next(
        n for n in gate.notes if "head changes the judge" in n)


async def test_a_calibration_over_the_runs_budget_is_not_sent(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": RULES})
    probe = await gate_trees(_repo(tmp_path / "h0", llm.url, LAX, ""),
                             _repo(tmp_path / "b0", llm.url, GOOD, ""), evals=context())
    assert probe.head is not None and probe.head.estimate is not None
    assert probe.head.estimate.cost_usd is not None
    whole, labelled = probe.head.estimate.cost_usd, _label_calls(llm)
    llm.reset()
    llm.setup({"rules": RULES})
    limit = f"{whole * 0.9:.6f}"  # the run alone fits; with the calibration it does not
    gate = await gate_trees(_repo(tmp_path / "head", llm.url, LAX, limit),
                            _repo(tmp_path / "base", llm.url, GOOD, limit), evals=context())
    assert gate.head is not None and gate.head.stopped is not None
    assert gate.head.stopped.startswith("not started: the estimate")
    assert _label_calls(llm) == 0 < labelled
    assert gate.conclusion not in ("success", "neutral", "skipped")
