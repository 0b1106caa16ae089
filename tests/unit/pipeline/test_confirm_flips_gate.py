"""``settings.statistics.confirm_flips`` through the real path: gate_trees, the runner, litellm
over HTTP to the fake provider (tests/fakes/fake_llm.py), worker/pipeline/confirm.py.

20 examples; base's prompt echoes them, so all pass at base. ``confirm_flips: 0.5`` buys
floor(0.5 * 20 / 2) = 5 examples one more draw at base and at head (10 calls).

- A deterministic head that breaks the 10 "order" tickets: 5 of them are answered again, with
  the same text, so every value, p-value and interval equals that of the run without confirm.
- A one-off wrong answer on 4 tickets (a fault the fake answers once; base runs first and gets
  it): the 4 examples flip, are re-run on both sides, base now passes them, and each counts
  half: base's paired pass rate is 0.9, not 0.8.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit.llm_support import llm, llm_server, model_config, write_repo
from tests.unit.pipeline.test_sequential_gate import BAD, GOOD
from worker.evals.types import GateReport, PairedComparison
from worker.pipeline.trees import gate_trees

__all__ = ["llm", "llm_server"]

pytestmark = pytest.mark.slow

ROWS = [{"id": f"t{n}", "input": f"refund for {'order' if n % 2 else 'parcel'} {n}.",
         "expected": f"echo: Customer says: refund for {'order' if n % 2 else 'parcel'} {n}."}
        for n in range(20)]
GATE = "{pass_rate: {regression: {alpha: 0.05}}}"


def gate(tmp_path: Path, url: str, head_prompt: str, confirm: float) -> GateReport:
    settings = f"statistics: {{confirm_flips: {confirm}}}" if confirm else ""
    config = model_config(url, settings=settings, assertions="      - type: equals\n",
                          gate=GATE)
    base = write_repo(tmp_path / "base", config, ROWS, prompt=GOOD)
    head = write_repo(tmp_path / "head", config, ROWS, prompt=head_prompt)
    return asyncio.run(gate_trees(head, base))


def suite_row(report: GateReport) -> PairedComparison:
    return next(c for c in report.comparisons if c.metric == "pass_rate" and not c.group)


def confirm_note(report: GateReport) -> str:
    return next((n for n in report.notes if n.startswith("confirm_flips")), "")


def test_deterministic_answers_leave_every_figure_as_it_was(llm: FakeLLMServer,
                                                            tmp_path: Path) -> None:
    plain = gate(tmp_path / "plain", llm.url, BAD, 0)
    assert len(llm.calls("chat")) == 40
    llm.reset()
    confirmed = gate(tmp_path / "confirmed", llm.url, BAD, 0.5)
    assert len(llm.calls("chat")) == 40 + 10
    assert confirm_note(confirmed).startswith(
        "confirm_flips 0.5: 5 discordant examples run once more at base and at head: 10 extra "
        "provider calls (0.50x one head run)")
    before, after = suite_row(plain), suite_row(confirmed)
    assert (after.base, after.head, after.ci_low, after.ci_high, after.p_value,
            after.p_adjusted, after.broken) == (before.base, before.head, before.ci_low,
                                                before.ci_high, before.p_value,
                                                before.p_adjusted, before.broken)
    assert after.repeats == 2 and before.repeats == 1
    assert confirmed.conclusion == plain.conclusion == "failure"
    assert confirmed.head.spend.provider_calls == 25  # head's 20 and its 5 re-runs


def one_off_faults(llm: FakeLLMServer) -> None:
    wrong = {"id": "chatcmpl-noise", "object": "chat.completion", "created": 1700000000,
             "model": "test-model", "choices": [{"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant",
                                                             "content": "noise"}}],
             "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}
    llm.setup({"faults": [{"match": f"parcel {n}.", "times": 1, "status": 200, "body": wrong}
                          for n in (2, 4, 6, 8)]})


def test_a_one_off_flip_counts_half_once_confirmed(llm: FakeLLMServer, tmp_path: Path) -> None:
    one_off_faults(llm)
    plain = gate(tmp_path / "plain", llm.url, GOOD, 0)
    assert (suite_row(plain).base, suite_row(plain).fixed) == (0.8, 4)
    llm.reset()
    one_off_faults(llm)
    confirmed = gate(tmp_path / "confirmed", llm.url, GOOD, 0.5)
    row = suite_row(confirmed)
    assert (row.base, row.head) == (pytest.approx(0.9), 1.0)
    assert "4 discordant examples" in confirm_note(confirmed)
    assert len(llm.calls("chat")) == 40 + 8
    assert confirmed.base.suites["s"].metrics["pass_rate"] == 0.8  # the first draw's mean
