"""``settings.sequential: true`` through the real path: gate_trees, the runner, litellm over
HTTP to the fake provider (tests/fakes/fake_llm.py), the verdict (worker/pipeline/sequential.py).

Base's prompt echoes every input, so all 40 examples pass at base. A head prompt that answers
every "order" ticket wrongly breaks half of them: the gate fails at look 2 of 4, after 20 of
head's examples. A head that answers as base does passes at look 2 (no discordant example, so
the full run cannot fail). Without ``sequential`` (or with a rule besides ``regression`` for
the passing head) head answers all 40.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit.llm_support import llm, llm_server, model_config, write_repo
from worker.evals.types import GateReport
from worker.pipeline.trees import gate_trees

__all__ = ["llm", "llm_server"]

pytestmark = pytest.mark.slow

GOOD = "Customer says: {{ input }}"
BAD = "{% if 'order' in input %}Sorry.{% else %}Customer says: {{ input }}{% endif %}"
ROWS = [{"id": f"t{n}", "input": f"refund for {'order' if n % 2 else 'parcel'} {n}",
         "expected": f"echo: Customer says: refund for {'order' if n % 2 else 'parcel'} {n}"}
        for n in range(40)]
REGRESSION = "{pass_rate: {regression: {alpha: 0.05}}}"


def trees(tmp_path: Path, url: str, head_prompt: str, *, sequential: bool = True,
          gate: str = REGRESSION) -> tuple[Path, Path]:
    settings = "sequential: true" if sequential else ""
    config = model_config(url, settings=settings, assertions="      - type: equals\n",
                          gate=gate)
    base = write_repo(tmp_path / "base", config, ROWS, prompt=GOOD)
    head = write_repo(tmp_path / "head", config, ROWS, prompt=head_prompt)
    return base, head


def gate(llm: FakeLLMServer, base: Path, head: Path) -> tuple[GateReport, int]:
    """Gate head against base; return the report and the calls head's prompt made."""
    report = asyncio.run(gate_trees(head, base))
    return report, len(llm.calls("chat")) - len(ROWS)  # base answered every example


def stop_note(report: GateReport) -> str:
    return next((n for n in report.notes if n.startswith("sequential")), "")


def test_a_clear_regression_stops_at_the_look_that_fails(llm: FakeLLMServer,
                                                         tmp_path: Path) -> None:
    report, head_calls = gate(llm, *trees(tmp_path, llm.url, BAD))
    assert report.conclusion == "failure"
    assert head_calls == 20
    assert len(report.head.suites["s"].examples) == 20
    assert "stopped early after 20 of 40 examples (look 2 of 4): the gate fails" in \
        stop_note(report)
    rule = next(o for o in report.outcomes if o.rule.startswith("regression"))
    assert rule.status == "regression"
    assert json.dumps(report.notes)  # the report carries the note as plain text


def test_without_sequential_head_answers_every_example(llm: FakeLLMServer,
                                                       tmp_path: Path) -> None:
    report, head_calls = gate(llm, *trees(tmp_path, llm.url, BAD, sequential=False))
    assert report.conclusion == "failure"
    assert head_calls == 40
    assert stop_note(report) == ""


def test_an_unchanged_head_passes_at_half_the_examples(llm: FakeLLMServer,
                                                       tmp_path: Path) -> None:
    report, head_calls = gate(llm, *trees(tmp_path, llm.url, GOOD))
    assert report.conclusion == "success"
    assert head_calls == 20  # not before half: a sparse regression may not show at look 1
    assert "stopped early after 20 of 40 examples (look 2 of 4): the gate passes" in \
        stop_note(report)


def test_a_rule_besides_regression_needs_the_full_run_to_pass(llm: FakeLLMServer,
                                                              tmp_path: Path) -> None:
    gate_rules = "{pass_rate: {regression: {alpha: 0.05}, min: 0.5}}"
    report, head_calls = gate(llm, *trees(tmp_path, llm.url, GOOD, gate=gate_rules))
    assert report.conclusion == "success"
    assert head_calls == 40
    assert "ran all 40 examples" in stop_note(report)


def test_a_count_rule_that_failed_stops_at_the_first_look(llm: FakeLLMServer,
                                                          tmp_path: Path) -> None:
    gate_rules = "{pass_rate: {regression: {alpha: 0.05}, max_new_failures: 0}}"
    report, head_calls = gate(llm, *trees(tmp_path, llm.url, BAD, gate=gate_rules))
    assert report.conclusion == "failure"
    assert head_calls == 10
    assert "stopped early after 10 of 40 examples (look 1 of 4): the gate fails: a rule that " \
        "more examples cannot undo failed" in stop_note(report)


#: Breaks 3 of the 40 examples: too few discordant pairs for any sign-flip test to reject.
FEW = ("{% if input in ['refund for order 1', 'refund for order 3', 'refund for order 5'] %}"
       "Sorry.{% else %}Customer says: {{ input }}{% endif %}")


def test_a_last_look_that_cannot_reject_shows_its_planned_alpha(llm: FakeLLMServer,
                                                                 tmp_path: Path) -> None:
    """Field case (tester, issue 15): 3 broken examples with a margin rule ran the whole way
    and reported "regression alpha 5e-11" and "the last look decides at 0.0000". With 3
    discordant pairs the smallest sign-flip p-value is 1/8, above the last look's spend
    0.05 - 0.2 * 0.05 * 3/4 = 0.0425 (haybittle_peto), so the boundary is 0: the report shows
    the look's alpha 0.0425 and says why no test can reject."""
    gate_rules = "{pass_rate: {regression: {alpha: 0.05}, non_inferiority_margin: 0.03}}"
    report, head_calls = gate(llm, *trees(tmp_path, llm.url, FEW, gate=gate_rules))
    assert head_calls == 40
    rule = next(o for o in report.outcomes if o.rule.startswith("regression"))
    assert (rule.rule, rule.status) == ("regression alpha 0.0425", "pass")
    assert "no test can reject at the last look: with 3 of them differing between base and " \
        "head, the smallest p-value any sign pattern gives is 0.125, above the look's alpha " \
        "0.0425" in stop_note(report)
    assert "5e-11" not in json.dumps([o.rule for o in report.outcomes])


def test_few_discordant_pairs_without_a_margin_pass_early_at_the_full_alpha(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """The same 3 broken examples with only a regression rule pass, and the regression rule
    is shown at an alpha the run planned (0.05 after an early pass, the last look's 0.0425
    after a whole run), never a scaled-away one."""
    report, _ = gate(llm, *trees(tmp_path, llm.url, FEW))
    assert report.conclusion == "success"
    rule = next(o for o in report.outcomes if o.rule.startswith("regression"))
    assert rule.rule in ("regression alpha 0.05", "regression alpha 0.0425")
