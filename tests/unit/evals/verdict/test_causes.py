"""Every run error put down to its cause, and what each cause does to the check (pure).

worker/evals/verdict/causes.py and worker/evals/verdict/health.py on hand-made runs: no provider, no
files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

import pytest

from worker.evals.score.metrics import suite_metrics
from worker.evals.types import (
    CommandTarget,
    Config,
    Endpoint,
    ExampleResult,
    GateReport,
    GateRule,
    ModelTarget,
    RunResult,
    Settings,
    SuiteConfig,
    SuiteResult,
)
from worker.evals.verdict.causes import Attribution
from worker.evals.verdict.comparison import compare
from worker.evals.verdict.health import finish_report
from worker.report import render as report

URL = "http://127.0.0.1:9/v1"
LINES = {"model": 8, "prompt": 9, "api_base": 10, "api_key_env": 11}
TRANSIENT = "provider error (HTTP 503): fake error 503"


def target(model: str = "openai/m", api_base: str | None = URL,
           key: str | None = "KEY") -> ModelTarget:
    return ModelTarget(Endpoint(model, {}, api_base, key), "p.txt", "", 7, dict(LINES))


def config(tgt: ModelTarget | CommandTarget | None = None, **settings: object) -> Config:
    suite = SuiteConfig("s", "d.jsonl", tgt or target(), (),
                        {"pass_rate": GateRule("pass_rate", max_drop=0.1)}, 5)
    return Config(1, (suite,), Settings(**settings))


def ok(i: int) -> ExampleResult:
    return ExampleResult(f"e{i}", i + 1, True, False, "refund", None)


def failed(i: int, kind: str = "provider", field: str = "",
           message: str = TRANSIENT) -> ExampleResult:
    return ExampleResult(f"e{i}", i + 1, False, True, None, None, error=message,
                         error_kind=kind, unscored=True, error_field=field)


def run(sha: str, examples: Sequence[ExampleResult], stopped: str | None = None) -> RunResult:
    results = tuple(examples)
    suite = SuiteResult("s", "d.jsonl", results, suite_metrics(results), stopped=stopped)
    return RunResult(sha, {"s": suite}, stopped=stopped)


@pytest.mark.parametrize(("head", "base", "error", "cause"), [
    # what head changed fails: head's, whatever the error
    (target(key="TYPO"), target(), failed(0, field="api_key_env"), "head"),
    (target(api_base="http://192.0.2.7/v1"), target(), failed(0, field="api_base"), "head"),
    (target("anthropic/c", key=None), target(), failed(0, field="model"), "head"),
    (target(api_base="http://127.0.0.1:1/v1"), target(), failed(0), "head"),  # refused
    # the same endpoint as base: the worker's or the provider's
    (target(), target(), failed(0, field="api_key_env"), "outside"),
    (target(), target(), failed(0, field="model"), "outside"),
    (target(), target(), failed(0, "rate_limited"), "outside"),
    (target(), target(), failed(0, "timeout"), "outside"),
    # a request the provider refuses on a shared endpoint: head's prompt, unless base too
    (target(), target(), failed(0, field="request"), "head"),
    (target(), target(), ExampleResult("e0", 1, False, True, None, None, error_kind="budget",
                                       unscored=True), "limit"),
])
def test_the_cause_of_a_head_error(head: ModelTarget, base: ModelTarget, error: ExampleResult,
                                   cause: str) -> None:
    found = Attribution(config(head), config(base), run("b", [ok(0)]))
    assert found.cause("head", "s", error) == cause


def test_base_errors_are_never_heads_and_command_failures_have_no_cause() -> None:
    found = Attribution(config(), config(), run("b", [failed(0, field="request")]))
    assert found.cause("base", "s", failed(0, field="api_key_env")) == "outside"
    assert found.cause("head", "s", failed(0, field="request")) == "outside"  # base too
    assert found.cause("head", "s", ok(0)) is None
    command = Attribution(config(CommandTarget("x")), None, run("b", [ok(0)]))
    assert command.cause("head", "s", failed(0, "target")) is None  # a failure at head
    alone = Attribution(config(CommandTarget("x")), None, None)  # nothing to compare with
    assert alone.cause("head", "s", failed(0, "target")) == "head"


def test_without_a_base_config_only_permanent_errors_are_heads() -> None:
    found = Attribution(config(), None, None)
    assert found.cause("head", "s", failed(0, field="model")) == "head"
    assert found.cause("head", "s", failed(0, "rate_limited")) == "outside"


def test_the_first_error_of_each_kind_per_side_keeps_its_text_and_line() -> None:
    head = run("h", [failed(0, field="api_key_env", message="the worker has no TYPO"),
                     failed(1, field="api_key_env", message="the worker has no TYPO"),
                     failed(2, "timeout", message="timed out: slow")])
    base = run("b", [ok(0), failed(1, "rate_limited", message="rate limited (HTTP 429): x"),
                     ok(2)])
    errors = Attribution(config(target(key="TYPO")), config(), base).errors(head, base)
    assert [(e.side, e.kind, e.permanent, e.cause, e.count, e.example_id, e.message, e.line,
             e.field) for e in errors] == [
        ("head", "provider", True, "head", 2, "e0", "the worker has no TYPO", 11,
         "api_key_env"),
        ("head", "timeout", False, "head", 1, "e2", "timed out: slow", 10, "api_base"),
        ("base", "rate_limited", False, "outside", 1, "e1", "rate limited (HTTP 429): x",
         None, "")]


def finish(head_config: Config, head: RunResult, base: RunResult | None,
           base_config: Config | None = None, problem: str | None = None) -> GateReport:
    return finish_report(compare(head_config, head, base), head_config,
                         base_config if base_config is not None else config(), problem)


def test_a_permanent_head_error_fails_and_lists_every_example() -> None:
    head = run("h", [failed(i, field="api_key_env", message="the worker has no TYPO")
                     for i in range(5)])
    gate = finish(config(target(key="TYPO")), head, run("b", [ok(i) for i in range(5)]))
    assert gate.conclusion == "failure"
    assert gate.headline == (
        "caused by the head: s's target gets no answer: the worker has no TYPO (api_key_env "
        "at .llmgate.yml:11); 5 of 5 examples at head got no answer")
    assert len(gate.errored) == len(gate.regressions) == 5
    annotations = report.annotations(gate)
    assert annotations[0]["path"] == ".llmgate.yml" and annotations[0]["start_line"] == 11
    assert "the worker has no TYPO" in report.check_summary(gate)


def test_one_head_error_fails_but_one_blip_on_a_shared_endpoint_does_not() -> None:
    """Up to max_provider_error_rate of examples without an answer are tolerated only when the
    cause is outside the PR: a server only head calls could otherwise hide that many failing
    examples behind 503s."""
    rows = [ok(i) for i in range(19)]
    base = run("b", [*rows, ok(19)])
    refused = finish(config(), run("h", [*rows, failed(19, field="request")]), base)
    assert refused.conclusion == "failure"
    own = finish(config(target(api_base="http://127.0.0.1:1/v1")),
                 run("h", [*rows, failed(19)]), base)
    assert own.conclusion == "failure"
    assert [r.example_id for r in own.errored] == [r.example_id for r in own.regressions] == [
        "e19"]
    blip = finish(config(), run("h", [*rows, failed(19)]), base)
    assert blip.conclusion == "success" and blip.errored == () and blip.regressions == ()
    assert blip.errors[0].cause == "outside"


@pytest.mark.parametrize("undecided", ["action_required", "neutral"])
def test_an_outage_on_a_shared_endpoint_is_undecided_as_base_says(undecided: str) -> None:
    head = run("h", [failed(i, "rate_limited", message="rate limited (HTTP 429): slow down")
                     for i in range(4)])
    base = run("b", [failed(i, "rate_limited") for i in range(4)])  # both sides: an outage
    gate = finish(config(undecided=undecided), head, base)
    assert gate.conclusion == undecided
    assert gate.headline.startswith(
        "undecided: rate limited: 4 of 4 examples got no answer at head (the first, s/e0: "
        "rate limited (HTTP 429): slow down)")
    assert gate.regressions == ()


def test_a_base_that_could_not_run_is_undecided() -> None:
    base = run("b", [failed(i, field="api_key_env") for i in range(4)])
    gate = finish(config(), run("h", [ok(i) for i in range(4)]), base)
    assert gate.conclusion == "action_required"
    assert gate.headline.startswith(
        "undecided: base could not run: provider errors: 4 of 4 examples got no answer at base")
    broken = finish(config(), run("h", [ok(0)]), None, problem="its config is invalid: x")
    assert broken.conclusion == "action_required"


@pytest.mark.parametrize("stopped", ["budget exceeded: $1.0000 spent of max_cost_usd $1.0000",
                                     "time limit reached: 61 s of max_duration 60 s"])
def test_over_budget_or_time_blocks_even_when_base_says_neutral(stopped: str) -> None:
    head = run("h", [ok(0), ExampleResult("e1", 2, False, True, None, None, error_kind="budget",
                                          unscored=True)], stopped=stopped)
    gate = finish(config(undecided="neutral"), head, run("b", [ok(0), ok(1)]))
    assert gate.conclusion == "action_required"
    name = "over time" if stopped.startswith("time") else "over budget"
    assert gate.headline.startswith(f"{name}: {stopped} at head")
    assert report.check_title(gate).startswith(
        f"llmgate: action required - {name}")


def test_an_inconclusive_rule_without_on_inconclusive_is_undecided() -> None:
    rule = GateRule("pass_rate", regression_alpha=0.05)
    cfg = replace(config(), suites=(replace(config().suites[0], gate={"pass_rate": rule}),))
    base = RunResult("b", {"s": SuiteResult("s", "d.jsonl", (ok(0),), {"pass_rate": 1.0})})
    renamed = ExampleResult("x0", 1, False, False, "no", None)
    head = RunResult("h", {"s": SuiteResult("s", "d.jsonl", (renamed,), {"pass_rate": 0.0})})
    gate = finish(cfg, head, base)
    assert gate.conclusion == "action_required"
    assert gate.headline.startswith(
        "undecided: s pass_rate regression alpha 0.05 is inconclusive (re-run")


def test_every_call_error_keeps_its_text_in_every_form_of_the_report() -> None:
    """No error is silent: one transient blip under the threshold leaves the check green, and
    the markdown, the JSON, the check summary and the comment still quote it."""
    rows = [ok(i) for i in range(19)]
    gate = finish(config(), run("h", [*rows, failed(19, "timeout", message="timed out: slow")]),
                  run("b", [*rows, ok(19)]))
    assert gate.conclusion == "success"
    line = ("Call errors at head in s: 1 example timed out, not caused by the pull request; "
            "the first, e19: timed out: slow")
    for text in (report.render_markdown(gate), report.check_summary(gate),
                 report.comment_body(gate, head_sha="a" * 40, base_sha="b" * 40)):
        assert line in text
    [error] = json.loads(report.render_json(gate))["errors"]
    assert (error["message"], error["cause"], error["kind"]) == ("timed out: slow", "outside",
                                                                 "timeout")


@pytest.mark.parametrize(("kind", "message"), [
    ("timeout", "timed out after 30 s"),
    ("provider", "provider error (HTTP 500): fake error 500"),
    ("rate_limited", "rate limited (HTTP 429): retry after 3600 s"),
    ("provider/api_key_env", "provider error (HTTP 401): invalid key"),
    ("provider/model", "provider error (HTTP 404): no such model"),
])
def test_head_only_provider_errors_where_base_was_answered_are_never_neutral(
        kind: str, message: str) -> None:
    """Case from the field (tester, issue 12, H2): head's reworded prompt made every call on
    base's endpoint time out (or answer 500 / 429) while base's 46 calls in the same run were
    answered; under base's `settings.undecided: neutral` the run ended neutral, exit 0."""
    kind, _, field = kind.partition("/")
    head = run("h", [failed(i, kind, field=field, message=message) for i in range(46)])
    base = run("b", [ok(i) for i in range(46)])
    attribution = Attribution(config(), config(), base, head)
    assert attribution.failing_for_head == {("openai/m", URL, "KEY")}
    gate = finish(config(undecided="neutral"), head, base, config(undecided="neutral"))
    assert gate.conclusion == "action_required"
    assert "only head's calls failed" in gate.headline and "never neutral" in gate.headline
    assert gate.headline.startswith("undecided: ")


def test_an_outage_on_both_sides_still_follows_base_undecided() -> None:
    head = run("h", [failed(i, "timeout", message="timed out") for i in range(10)])
    base = run("b", [*(failed(i, "timeout", message="timed out") for i in range(9)), ok(9)])
    assert Attribution(config(), config(), base, head).failing_for_head == set()
    gate = finish(config(undecided="neutral"), head, base, config(undecided="neutral"))
    assert gate.conclusion == "neutral"
