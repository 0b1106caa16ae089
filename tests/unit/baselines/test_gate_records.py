"""What a pull request gate records besides its suites (pure): its judges' agreement with people,
and which outputs, in which order, within which bounds."""

from __future__ import annotations

from worker.baselines.gate_records import judge_records, output_records
from worker.evals.types import (
    ExampleResult,
    GateReport,
    JudgeAgreement,
    RuleOutcome,
    RunResult,
    SuiteResult,
)
from worker.gate import results
from worker.history_contract import (
    ERRORED,
    FAILED,
    MAX_OUTPUT_CHARS,
    MAX_OUTPUT_EXAMPLES,
    PASSED,
    decode_output,
    encode_examples,
)
from worker.pipeline.report_values import ConfigReport, MultiReport
from worker.security.redact import Redactor


def _suite(rows: list[tuple[str, bool, str | None]]) -> SuiteResult:
    """A suite of (id, passed, output); None: the target errored."""
    return SuiteResult("s", "evals/s.jsonl", tuple(
        ExampleResult(i, n + 1, passed, output is None, output, "x",
                      error="exit 1" if output is None else None)
        for n, (i, passed, output) in enumerate(rows)), {})


def _report(base: SuiteResult, head: SuiteResult) -> GateReport:
    return GateReport("failure", (), (), RunResult("h", {"s": head}), RunResult("b", {"s": base}))


def test_changed_and_failing_examples_are_recorded_regressed_first_then_failing_then_fixed():
    base = _suite([("same", True, "a"), ("fixed", False, "old"), ("both", False, "x"),
                   ("broke", True, "fine"), ("errs", True, "ok")])
    head = _suite([("same", True, "a"), ("fixed", True, "new"), ("both", False, "y"),
                   ("broke", False, "bad"), ("errs", False, None), ("new", False, "n")])
    found = output_records("svc", _report(base, head), Redactor().redact)
    assert [(r["example_id"], r["change"], r["base_status"], r["head_status"], r["base"],
             r["head"]) for r in found] == [
        ("broke", "regressed", PASSED, FAILED, "fine", "bad"),
        ("errs", "regressed", PASSED, ERRORED, "ok", "error: exit 1"),
        ("both", "failing", FAILED, FAILED, "x", "y"),
        ("new", "failing", None, FAILED, "", "n"),
        ("fixed", "fixed", FAILED, PASSED, "old", "new")]
    assert {r["suite"] for r in found} == {"svc: s"}


def test_each_output_is_redacted_then_cut_and_a_suite_keeps_at_most_the_bound():
    token = "ghp_" + "Z9" * 15
    long = token + " " + "é" * (3 * MAX_OUTPUT_CHARS)
    ids = [f"e{i:03d}" for i in range(MAX_OUTPUT_EXAMPLES + 20)]
    base = _suite([(i, True, "ok") for i in ids])
    head = _suite([(i, False, long) for i in ids])
    found = output_records("", _report(base, head), Redactor().redact)
    assert len(found) == MAX_OUTPUT_EXAMPLES
    assert [r["example_id"] for r in found] == ids[:MAX_OUTPUT_EXAMPLES]  # dataset order
    first = found[0]
    assert first["head"].startswith("[redacted] éé") and token not in first["head"]
    assert (len(first["head"]), first["head_chars"]) == (MAX_OUTPUT_CHARS,
                                                         len("[redacted] ") + 3 * MAX_OUTPUT_CHARS)
    assert decode_output(encode_examples(first)) == first  # stored compressed, read back whole
    assert decode_output(b"jnot json") is None


def test_without_a_head_nothing_is_recorded():
    assert output_records("", GateReport("failure", (), (), None, None), str) == []


def _judged(notes: tuple[str, ...], measured: tuple[JudgeAgreement, ...]) -> GateReport:
    """A report whose judge rules ran on criterion ``tone`` of suite ``s`` (as
    worker/pipeline/judge_trust.py writes them), with these notes and measured figures."""
    outcomes = (RuleOutcome("s", "judge agreement (tone)", "min_agreement 0.80", 0.9, 0.7,
                            -0.2, "fail", "below"),
                RuleOutcome("s", "judge agreement (tone)", "max_drift 0.05", 0.9, 0.7, -0.2,
                            "fail", "dropped"))
    return GateReport("failure", outcomes, (), None, None, notes=notes, judge_agreement=measured)


def test_kappa_and_n_come_from_the_measured_figures_whatever_the_note_says():
    measured = (JudgeAgreement("s", "tone", "openai/b", "evals/l.jsonl", 0.7, 0.9, 0.41, 20),
                JudgeAgreement("other", "tone", "openai/b", "evals/l.jsonl", 1.0, 1.0, 1.0, 5))
    reworded = ("Suite s changed its judge. Tone now agrees 70 percent of the time "
                "(Cohen's kappa: 0.99; 99 labels).",)
    for notes in ((), reworded):
        assert judge_records(_judged(notes, measured), "svc") == [{
            "suite": "svc: s", "criterion": "tone", "agreement": 0.7, "reference": 0.9,
            "kappa": 0.41, "n": 20, "status": "fail"}]


def test_a_note_alone_gives_no_kappa_and_an_undefined_kappa_is_none():
    old_note = ("suite s: head changes the judge; on evals/l.jsonl (reference: the snapshot at "
                "base): tone (openai/a -> openai/b): agreement 90% -> 70%, kappa 0.41, n 20",)
    [record] = judge_records(_judged(old_note, ()))
    assert (record["kappa"], record["n"], record["agreement"]) == (None, None, 0.7)
    undefined = (JudgeAgreement("s", "tone", "openai/b", "l.jsonl", 0.7, None, float("nan"), 8),)
    [record] = judge_records(_judged((), undefined))
    assert (record["kappa"], record["n"]) == (None, 8)


def test_the_figures_survive_the_stored_results_of_a_gate_that_publishes_later():
    measured = (JudgeAgreement("s", "tone", "openai/b", "evals/l.jsonl", 0.7, 0.9, 0.41, 20, 1),)
    multi = MultiReport((ConfigReport("svc/.llmgate.yml", "svc", _judged((), measured)),),
                        "combined")
    [config] = results.decode(results.encode(multi)).configs  # worker/gate/results.py
    assert config.report.judge_agreement == measured
    assert [(r["kappa"], r["n"]) for r in judge_records(config.report, "svc")] == [(0.41, 20)]
