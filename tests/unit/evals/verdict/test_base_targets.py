"""Base's target errors have no verdict at base, and their cause is outside the PR (pure).

worker/evals/verdict/base_targets.py, causes.py and health.py on hand-made runs. The security
tester's case: a pull request's leftover process made base's command target crash on every
example, those counted as base failures (base 0.000, head 0.750) and the regression passed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace

import pytest

from worker.evals.score.example_values import extractor
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import (
    CommandTarget,
    Config,
    ExampleResult,
    GateOptions,
    GateRule,
    RunResult,
    Settings,
    SuiteConfig,
    SuiteResult,
)
from worker.evals.verdict.base_targets import count, unscore
from worker.evals.verdict.causes import Attribution
from worker.evals.verdict.comparison import compare
from worker.evals.verdict.health import finish_report
from worker.report import render as report

CRASH = "the command exited with status 1; last output:\nOSError: [Errno 27] File too large"


def config(**settings: object) -> Config:
    suite = SuiteConfig("s", "d.jsonl", CommandTarget("python3 bot.py {input_file} "
                                                      "{output_file}"), (),
                        {"pass_rate": GateRule("pass_rate", min=0.5, max_drop=0.05)}, 5)
    return Config(1, (suite,), Settings(**settings))


def ok(i: int) -> ExampleResult:
    return ExampleResult(f"e{i}", i + 1, True, False, "x", "x")


def wrong(i: int) -> ExampleResult:
    return ExampleResult(f"e{i}", i + 1, False, False, "no", "x")


def crashed(i: int) -> ExampleResult:
    return ExampleResult(f"e{i}", i + 1, False, True, None, "x", error=CRASH,
                         error_kind="target")


def run(sha: str, examples: Sequence[ExampleResult]) -> RunResult:
    rows = tuple(examples)
    return RunResult(sha, {"s": SuiteResult("s", "d.jsonl", rows, suite_metrics(rows))})


def finish(cfg: Config, head: RunResult, base: RunResult):
    base = unscore(base)  # as worker/evals/verdict/comparable.py does
    return finish_report(compare(cfg, head, base), cfg, cfg)


def test_a_base_target_error_is_outside_a_head_one_has_no_cause() -> None:
    found = Attribution(config(), config(), run("b", [ok(0)]))
    assert found.cause("base", "s", crashed(0)) == "outside"
    assert found.cause("head", "s", crashed(0)) is None  # scored as head's failure
    assert found.cause("base", "s", wrong(0)) is None
    # no base result of the suite could show it as a regression: head's (issue 30 fresh user)
    assert Attribution(config(), config(), None).cause("head", "s", crashed(0)) == "head"
    assert Attribution(config(), config(), run("b", [])).cause("head", "new", crashed(0)) == \
        "head"


def test_unscore_leaves_base_target_errors_out_of_rates_and_pairs() -> None:
    base = run("b", [ok(0), ok(1), ok(2), crashed(3)])
    assert base.suites["s"].metrics["pass_rate"] == 0.75  # before: counted as a failure
    done = unscore(base)
    suite = done.suites["s"]
    assert suite.metrics["pass_rate"] == 1.0 and suite.metrics["error_rate"] == 0.0
    assert suite.examples[3].unscored and suite.examples[3].error == CRASH
    assert unscore(done) is done  # idempotent
    assert math.isnan(extractor("pass_rate")(suite.examples[3], ({}, set())))
    assert math.isnan(extractor("error_rate")(suite.examples[3], ({}, set())))
    assert count(done) == (1, 4, f"s/e3: {CRASH}")
    everything = unscore(run("b", [crashed(i) for i in range(4)])).suites["s"]
    assert "pass_rate" not in everything.metrics and "error_rate" not in everything.metrics


@pytest.mark.parametrize("undecided", ["action_required", "neutral"])
def test_a_base_that_crashed_everywhere_is_undecided_and_never_neutral(undecided: str) -> None:
    head = run("h", [ok(0), wrong(1), ok(2), ok(3)])  # 0.75: a regression of base's 1.0
    gate = finish(config(undecided=undecided), head, run("b", [crashed(i) for i in range(4)]))
    assert gate.conclusion == "action_required"
    assert gate.headline == (
        "undecided: base could not run: target errors (base's target crashed, exited "
        "non-zero, timed out or wrote no valid output): 4 of 4 examples got no answer at base "
        f"(the first, s/e0: {CRASH}); base's target errors can be brought about by a process "
        "of the pull request's, so this is never neutral (re-run, or a writer can let it "
        "through)")
    [error] = gate.errors
    assert (error.side, error.kind, error.cause, error.count) == ("base", "target", "outside", 4)
    line = ("Target errors at base in s: 4 examples without an answer from the target (it "
            "crashed, exited non-zero, timed out or wrote no valid output), not caused by the "
            "pull request; the first, e0: ")
    assert line in report.render_markdown(gate)
    assert json.loads(report.render_json(gate))["errors"][0]["kind"] == "target"


def test_base_provider_and_target_errors_count_together_against_the_allowance() -> None:
    provider = ExampleResult("e9", 10, False, True, None, "x", error="provider error (HTTP "
                             "503)", error_kind="provider", unscored=True)
    base = run("b", [*(ok(i) for i in range(8)), crashed(8), provider])  # 2 of 10 > 10%
    gate = finish(config(), run("h", [ok(i) for i in range(10)]), base)
    assert gate.conclusion == "action_required"
    assert "base could not run: target errors" in gate.headline
    assert "2 of 10 examples got no answer at base" in gate.headline


def test_a_few_base_target_errors_are_noted_not_counted_as_base_failures() -> None:
    rows = [ok(i) for i in range(19)]
    gate = finish(config(), run("h", [*rows, ok(19)]), run("b", [*rows, crashed(19)]))
    assert gate.conclusion == "success" and gate.regressions == ()
    [note] = [n for n in gate.notes if "got no answer from base's target" in n]
    assert note == (
        "1 of 20 example result at base got no answer from base's target (it crashed, exited "
        f"non-zero, timed out or wrote no valid output; the first, s/e19: {CRASH}): base has no "
        "verdict for them, so they are left out of the comparison, not counted as base "
        "failures; above 10% of base's examples (max_provider_error_rate, with base's provider "
        "errors) the run is undecided")


@pytest.mark.parametrize("undecided", ["action_required", "neutral"])
def test_the_allowance_cannot_hide_an_example_head_fails_where_base_gave_no_answer(
        undecided: str) -> None:
    """A pull request that can make base's target fail could do so on exactly the examples it
    regresses, under the allowance: the gate cannot tell, so it does not pass."""
    rows = [ok(i) for i in range(19)]
    head, base = run("h", [*rows, wrong(19)]), run("b", [*rows, crashed(19)])
    gate = finish(config(undecided=undecided), head, base)
    assert gate.conclusion == "action_required" and gate.regressions == ()
    assert gate.headline.startswith("undecided: base's target gave no answer for 1 example "
                                    "that fails at head (s/e19): the gate cannot tell whether "
                                    "head regressed it")
    assert "never neutral" in gate.headline
    assert any("got no answer from base's target" in n for n in gate.notes)


def test_an_example_in_bases_quarantine_is_not_held_against_head() -> None:
    rows = [ok(i) for i in range(19)]
    cfg = config()
    quarantined = replace(cfg, suites=(replace(
        cfg.suites[0], gate_options=GateOptions(quarantine=("e19",))),))
    head, base = run("h", [*rows, wrong(19)]), unscore(run("b", [*rows, crashed(19)]))
    gate = finish_report(compare(cfg, head, base), cfg, quarantined)
    assert gate.conclusion == "success"
