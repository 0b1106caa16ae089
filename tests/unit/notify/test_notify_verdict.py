"""A push compared with the previous push (`worker.notify.verdict.judge_push`) under provider
trouble, against a pull request's gate (`worker.pipeline.trees.gate_trees`) on the same runs.

The previous push is run for real against the fake provider (tests/fakes/fake_llm.py), and
answers every example; the new push gets 503s on some examples. Both comparisons take the
same base run (the pull request's through its ``base_runner``); the fault lasts for ever, so
head's run within `gate_trees` gets the same errors as the pushed run given to `judge_push`.
"""

from __future__ import annotations

from pathlib import Path

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, model_config, write_repo
from worker.evals.config.load import load_config
from worker.evals.context import EvalContext
from worker.evals.run.engine import run_config
from worker.evals.types import Config, GateReport, RunResult
from worker.notify.verdict import PreviousRun, PushVerdict, judge_push
from worker.pipeline.trees import BaseRun, gate_trees

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

PREVIOUS_SHA, PUSHED_SHA = "b" * 40, "a" * 40
ROWS = [{"id": f"e{i}", "input": f"question {i}", "expected": "echo"} for i in range(20)]
#: One in 20 counted as failed is within this rule; two (pass rate 0.90) are not.
GATE = "{pass_rate: {max_drop: 0.05}}"


def config_text(url: str) -> str:
    """Suite ``s``: 20 examples whose answers must contain ``echo`` (the fake's reply)."""
    return model_config(url, gate=GATE,
                        assertions="      - type: contains\n        value: echo\n")


def loaded(root: Path) -> Config:
    config = load_config(root)
    assert config is not None
    return config


async def compare_both(llm: FakeLLMServer, tmp_path: Path, failing: list[int],
                       ) -> tuple[PushVerdict, GateReport, RunResult]:
    """Run the previous push with every example answered, then the new push with a 503 on
    every call for the examples ``failing``; return the push verdict, the pull request's gate
    report on the same base run (and the same head errors) and the pushed run."""
    text = config_text(llm.url)
    previous_root = write_repo(tmp_path / "previous", text, ROWS, prompt="Q: {{ input }}")
    pushed_root = write_repo(tmp_path / "pushed", text, ROWS, prompt="Q: {{ input }}")
    previous_config, config = loaded(previous_root), loaded(pushed_root)
    base = await run_config(previous_config, previous_root, PREVIOUS_SHA, context())
    assert not any(e.errored for e in base.suites["s"].examples)
    # (one-digit ``failing`` other than 1: "Q: question 1" would match e10 to e19 too)
    llm.setup({"faults": [{"status": 503, "match": f"Q: question {i}", "times": None}
                          for i in failing]})
    run = await run_config(config, pushed_root, PUSHED_SHA, context())
    push = await judge_push(PreviousRun(PREVIOUS_SHA, dict(base.suites)), previous_config,
                            config, pushed_root, run, ("s",), context())

    async def stored_base(config: Config, root: Path, sha: str,
                          evals: EvalContext | None) -> BaseRun:
        """The previous push's run, as stored (`worker.pipeline.trees.BaseRunner`)."""
        return BaseRun(base)

    gate = await gate_trees(pushed_root, previous_root, head_sha=PUSHED_SHA,
                            base_sha=PREVIOUS_SHA, evals=context(), base_runner=stored_base)
    assert gate.head is not None
    assert sorted(e.id for e in gate.head.suites["s"].examples if e.errored) \
        == sorted(e.id for e in run.suites["s"].examples if e.errored)
    return push, gate, run


async def test_provider_errors_within_the_allowance_count_as_failed_as_in_a_pull_request(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """Two of 20 examples got no answer (503) at the push, where the previous push answered:
    within ``max_provider_error_rate`` (0.1), so the run is decided, and they count as failed
    (pass rate 0.90, a drop of 0.10 over ``max_drop`` 0.05). Left out, the push's pass rate
    read 1.0 and a regression hidden behind the errors passed (worker/evals/verdict/
    unanswered.py); the pull request's gate fails on the same runs."""
    push, gate, run = await compare_both(llm, tmp_path, [3, 7])
    assert [(e.id, e.error_kind, e.unscored) for e in run.suites["s"].examples if e.errored] \
        == [("e3", "provider", True), ("e7", "provider", True)]
    assert gate.conclusion == "failure"
    assert any(n.startswith("2 example results of head got no answer or no judge verdict "
                            "where base has one: counted as failed") for n in gate.notes)
    assert push.status == "regressed" and push.previous_sha == PREVIOUS_SHA
    [outcome] = push.failing
    assert (outcome.suite, outcome.metric, outcome.rule, outcome.status) \
        == ("s", "pass_rate", "max_drop 0.05", "fail")
    assert (outcome.base, outcome.head) == (1.0, 0.9)
    [gate_outcome] = [o for o in gate.outcomes if o.status == "fail"]
    assert (gate_outcome.base, gate_outcome.head) == (outcome.base, outcome.head)


async def test_provider_errors_above_the_allowance_are_an_outage_never_a_pass(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """Four of 20 examples without an answer (0.2, over ``max_provider_error_rate`` 0.1): an
    outage. Nothing is counted as failed and the push is undecided, as the pull request's
    gate on the same runs (``action_required``): never ``passed`` on the 16 answered."""
    push, gate, _ = await compare_both(llm, tmp_path, [2, 3, 5, 7])
    assert gate.conclusion == "action_required"
    assert push.status == "undecided" and push.previous_sha == PREVIOUS_SHA
    assert push.reason == gate.headline
    assert push.reason.startswith("undecided: provider errors: 4 of 20 examples got no answer")
    assert not any("counted as failed" in n for n in gate.notes)
