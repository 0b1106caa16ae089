"""A pull request that swaps the judge for one that disagrees with the labels is not trusted."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context
from tests.unit.pipeline.judge_trust_support import GOOD, LAX, RULES, repo
from worker.pipeline.trees import gate_trees
from worker.report import render as report

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

METRIC = "judge agreement (llm_judge)"


def _label_calls(llm: FakeLLMServer, model: str) -> int:
    return sum(1 for c in llm.calls() if c["model"] == model
               and "answer " in str(c["messages"]) and "ticket" not in str(c["messages"]))


async def test_a_lax_judge_fails_the_gate_and_shows_the_agreement_drop(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": RULES})
    base = repo(tmp_path / "base", llm.url, GOOD)
    head = repo(tmp_path / "head", llm.url, LAX)
    gate = await gate_trees(head, base, evals=context())
    assert gate.conclusion == "failure"
    rows = {o.rule: o for o in gate.outcomes if o.metric == METRIC}
    low, drift = rows["min_agreement 0.80"], rows["max_drift 0.05"]
    assert (low.status, low.head, low.base) == ("fail", 0.5, 1.0)  # base's judge measured now
    assert drift.status == "fail" and drift.delta == -0.5
    assert gate.headline.startswith("judge not trusted: s judge agreement (llm_judge)")
    note = next(n for n in gate.notes if "head changes the judge" in n)
    assert "judge-good -> openai/judge-lax" in note and "agreement 100% -> 50%" in note
    assert "base's judge, measured now" in note
    assert note.endswith("(judge calibration: 16 provider calls, 0 cache hits, $0.0000, "
                         "16 of unknown cost)")
    listed = next(n for n in gate.notes if n.startswith("judge disagreements"))
    assert "b0: human fail, judge pass (Looks fine to me.)" in listed
    text = report.comment_body(gate, head_sha="", base_sha=None)
    assert METRIC in text and "judge not trusted" in report.check_title(gate)
    assert _label_calls(llm, "judge-lax") == 8 and _label_calls(llm, "judge-good") == 8


async def test_the_snapshot_at_base_is_the_reference(llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": RULES})
    snapshot = {"llmgate_judge_snapshot": 1, "suite": "s", "labels": "labels.jsonl",
                "criteria": {"llm_judge": {"model": GOOD, "agreement": 0.875}}}
    base = repo(tmp_path / "base", llm.url, GOOD, snapshot=snapshot,
                rules="{labels: evals/labels.jsonl, max_drift: 0.05}")
    head = repo(tmp_path / "head", llm.url, LAX)  # head's own looser rules count for nothing
    gate = await gate_trees(head, base, evals=context())
    (drift,) = [o for o in gate.outcomes if o.metric == METRIC]
    assert (drift.rule, drift.status, drift.base, drift.head) == ("max_drift 0.05", "fail",
                                                                  0.875, 0.5)
    assert gate.conclusion == "failure"
    assert _label_calls(llm, "judge-good") == 0  # the snapshot, not a new measurement


async def test_an_unchanged_judge_is_not_recalibrated(llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": RULES})
    gate = await gate_trees(repo(tmp_path / "head", llm.url, GOOD),
                            repo(tmp_path / "base", llm.url, GOOD), evals=context())
    assert gate.conclusion == "success"
    assert not [o for o in gate.outcomes if o.metric == METRIC]
    assert _label_calls(llm, "judge-good") == 0


async def test_a_judge_that_agrees_is_trusted(llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": [{"model": "judge-lax", "match": "bad answer", "reply": "FAIL"},
                         *RULES]})
    gate = await gate_trees(repo(tmp_path / "head", llm.url, LAX),
                            repo(tmp_path / "base", llm.url, GOOD), evals=context())
    assert gate.conclusion == "success"
    assert {o.status for o in gate.outcomes if o.metric == METRIC} == {"pass"}


async def test_a_judge_that_cannot_rate_the_labels_leaves_the_gate_undecided(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": [*({"model": "judge-lax", "match": f"{kind} answer", "reply": "no idea"}
                           for kind in ("good", "bad")), *RULES]})
    gate = await gate_trees(repo(tmp_path / "head", llm.url, LAX),
                            repo(tmp_path / "base", llm.url, GOOD), evals=context())
    assert gate.conclusion == "action_required"
    unknown = [o for o in gate.outcomes if o.metric == METRIC]
    assert unknown and all(o.status == "inconclusive" for o in unknown)
    assert "rated 0 of 8 labelled answers" in unknown[0].reason
    assert gate.headline.startswith("judge not trusted yet")


async def test_labels_missing_at_base_leave_the_gate_undecided(llm: FakeLLMServer,
                                                               tmp_path: Path) -> None:
    llm.setup({"rules": RULES})
    base = repo(tmp_path / "base", llm.url, GOOD)
    (base / "evals" / "labels.jsonl").unlink()
    gate = await gate_trees(repo(tmp_path / "head", llm.url, LAX), base, evals=context())
    assert gate.conclusion == "action_required"
    assert "the labelled set cannot be used" in gate.headline
