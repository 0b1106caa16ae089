"""`SuiteResult` <-> JSON for the baseline store: exact round trips, refused misfits."""

from __future__ import annotations

import json
import math

import pytest

from worker.baselines.keys import BaselineKey
from worker.baselines.store import COMPRESS_OVER_BYTES, Baseline, decode, encode
from worker.evals.serialize import (
    SerializeError,
    from_jsonable,
    suite_result_from_json,
    suite_result_to_json,
)
from worker.evals.types import (
    AssertionResult,
    ExampleResult,
    PairwiseResult,
    RunUsage,
    SuiteFingerprint,
    SuiteResult,
    TokenUsage,
    TrapSummary,
)

KEY = BaselineKey("support", "c" * 64, "d" * 64, "f" * 64)


def rich_result(examples: int = 3) -> SuiteResult:
    """A suite result with every kind of field set (nested dataclasses, None, inf, Any)."""
    rows = tuple(ExampleResult(
        id=f"e{i}", line=i + 1, passed=i % 2 == 0, errored=i == 1,
        output={"text": f"answer {i}", "score": 0.5} if i != 1 else None,
        expected=["refund", i], error="timed out after 60 s" if i == 1 else None,
        assertions=(AssertionResult("equals", i % 2 == 0, float(i % 2 == 0), "differs"),
                    AssertionResult("llm_judge", True, 0.75, details={
                        "votes": ["PASS", "PASS"], "version": "j1"})),
        latency_ms=12.5 * i, cost_usd=None if i else 0.0012, tags=("must_pass",),
        metadata={"category": "billing"}, repeat=0,
        error_kind="timeout" if i == 1 else None, unscored=i == 1,
        usage={"input": 10, "output": 3}, spend=RunUsage(1, 0, TokenUsage(10, 3, 2), 0.0012),
        cached=i == 2, label="refund" if i == 0 else None, contexts=("passage",),
        retrieved_ids=("d1", "d2"), input={"ticket": f"order {i}"}, id_from_line=False)
        for i in range(examples))
    return SuiteResult(
        "support", "evals/tickets.jsonl", rows,
        {"pass_rate": 2 / 3, "latency_p99": math.inf, "cost_total": 0.0012},
        spend=RunUsage(3, 1, TokenUsage(30, 9, 0), 0.0036, 1),
        pairwise=(PairwiseResult("e0", 1.0, ("head", "head")),
                  PairwiseResult("e1", None, ("error", "base"), "judge failed")),
        traps=TrapSummary(4, 3, 1, ("t2",)), judge_versions=("j1",),
        stopped=None, fingerprint=SuiteFingerprint({"target": "a" * 64}, {"judges": "b" * 64},
                                                   "e" * 64))


def test_a_rich_suite_result_round_trips_exactly() -> None:
    result = rich_result()
    doc = suite_result_to_json(result)
    again = suite_result_from_json(json.loads(json.dumps(doc)))
    assert again == result
    assert again.examples[0].spend.tokens == TokenUsage(10, 3, 2)
    assert again.metrics["latency_p99"] == math.inf


@pytest.mark.parametrize("examples", [1, 400])
def test_records_round_trip_small_as_json_and_large_compressed(examples: int) -> None:
    baseline = Baseline("acme/bot", "b" * 40, KEY, rich_result(examples), "push", "main", 0,
                        1_700_000_000.5)
    data = encode(baseline)
    raw_json = len(json.dumps(suite_result_to_json(baseline.result)))
    assert data[:1] == (b"z" if raw_json > COMPRESS_OVER_BYTES else b"j")
    if examples == 400:
        assert data[:1] == b"z" and len(data) < raw_json / 5
    assert decode(data) == baseline


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(name=3), "$.name: expected str, got int"),
    (lambda d: d["examples"][0].update(passed="yes"), "$.examples[0].passed: expected bool"),
    (lambda d: d["examples"][0].update(colour="red"), "$.examples[0]: unknown field(s) colour"),
    (lambda d: d["examples"][1].pop("line"), "$.examples[1]: missing field line"),
    (lambda d: d["examples"][1].update(error_kind="oops"), "is not one of"),
    (lambda d: d["pairwise"][0].update(verdicts="head"), "$.pairwise[0].verdicts: expected a"),
    (lambda d: d.update(metrics=[1]), "$.metrics: expected an object"),
])
def test_misfits_are_refused_with_the_path(mutate, message) -> None:
    doc = json.loads(json.dumps(suite_result_to_json(rich_result())))
    mutate(doc)
    with pytest.raises(SerializeError) as caught:
        suite_result_from_json(doc)
    assert message in str(caught.value)


def test_defaults_fill_missing_optional_fields() -> None:
    doc = {"name": "s", "dataset": "d.jsonl", "examples": [], "metrics": {"pass_rate": 1}}
    result = from_jsonable(SuiteResult, doc)
    assert result == SuiteResult("s", "d.jsonl", (), {"pass_rate": 1.0})


@pytest.mark.parametrize("raw", [b"", b"x{}", b"j{not json", b"z\x00\x01",
                                 b'j{"version": 99}', b'j{"version": 1, "repo": "a"}'])
def test_unreadable_records_raise_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        decode(raw)
