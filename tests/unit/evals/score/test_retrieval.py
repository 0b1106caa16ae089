"""Retrieval assertions: hand-computed values, trec_eval (pytrec_eval) on the same data."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from worker.errors import ConfigError
from worker.evals.config.dataset import parse_dataset
from worker.evals.score import retrieval
from worker.evals.score.assertions import validate_spec
from worker.evals.score.example_values import example_value
from worker.evals.score.metrics import is_known_metric, suite_metrics
from worker.evals.types import AssertionSpec, Example, ExampleResult

BINARY = {"d1": 1.0, "d3": 1.0, "d7": 1.0}
GRADED = {"d1": 3.0, "d2": 2.0, "d3": 1.0, "d9": 0.0}
L2 = math.log2

#: (metric, retrieved, qrels, k, value computed by hand).
CASES: list[tuple[str, list[str], dict[str, float], int | None, float]] = [
    # R = {d1, d3, d7}; retrieved d3 (hit, rank 1), d2, d1 (hit, rank 3), d4, d7 (hit, rank 5)
    ("recall_at_k", ["d3", "d2", "d1", "d4", "d7"], BINARY, 3, 2 / 3),
    ("recall_at_k", ["d3", "d2", "d1", "d4", "d7"], BINARY, 5, 1.0),
    ("recall_at_k", ["d2", "d4"], BINARY, 5, 0.0),
    ("recall_at_k", [], BINARY, 5, 0.0),
    ("precision_at_k", ["d3", "d2", "d1", "d4", "d7"], BINARY, 3, 2 / 3),
    ("precision_at_k", ["d3", "d2", "d1", "d4", "d7"], BINARY, 5, 3 / 5),
    ("precision_at_k", ["d3"], BINARY, 4, 1 / 4),  # fewer than k retrieved: misses
    ("precision_at_k", ["d3", "d3", "d3"], BINARY, 3, 1 / 3),  # a repeat counts once
    ("hit_at_k", ["d2", "d4", "d1"], BINARY, 2, 0.0),
    ("hit_at_k", ["d2", "d4", "d1"], BINARY, 3, 1.0),
    ("mrr", ["d2", "d4", "d1"], BINARY, None, 1 / 3),
    ("mrr", ["d1"], BINARY, None, 1.0),
    ("mrr", ["d2", "d4", "d1"], BINARY, 2, 0.0),
    ("mrr", ["d2", "d2", "d1"], BINARY, None, 1 / 2),  # the repeat is dropped: d1 at rank 2
    ("mrr", [], BINARY, None, 0.0),
    # binary: DCG@3 = 1/log2(2) + 1/log2(4) = 1.5; IDCG@3 = 1 + 1/log2(3) + 1/2
    ("ndcg_at_k", ["d3", "d2", "d1"], BINARY, 3, 1.5 / (1 + 1 / L2(3) + 0.5)),
    ("ndcg_at_k", ["d1", "d3", "d7"], BINARY, 3, 1.0),
    # graded: DCG@3 of d3, d9, d1 = 1/1 + 0 + 3/2 = 2.5; IDCG@3 of 3, 2, 1 = 3 + 2/log2(3) + 1/2
    ("ndcg_at_k", ["d3", "d9", "d1"], GRADED, 3, 2.5 / (3 + 2 / L2(3) + 0.5)),
    # k = 1: DCG = 2 (d2); IDCG = 3 (d1)
    ("ndcg_at_k", ["d2", "d1"], GRADED, 1, 2 / 3),
    ("ndcg_at_k", ["x", "y"], GRADED, 2, 0.0),
]


@pytest.mark.parametrize(("kind", "retrieved", "qrels", "k", "value"), CASES)
def test_metric_matches_the_hand_computed_value(kind: str, retrieved: list[str],
                                                qrels: dict[str, float], k: int | None,
                                                value: float) -> None:
    assert retrieval.metric_value(kind, retrieved, qrels, k) == pytest.approx(value, abs=1e-12)


#: pytrec_eval's measure of each metric (trec_eval's names).
TREC = {"recall_at_k": "recall_{k}", "precision_at_k": "P_{k}", "ndcg_at_k": "ndcg_cut_{k}",
        "mrr": "recip_rank"}


@pytest.mark.parametrize(("kind", "retrieved", "qrels", "k", "value"),
                         [c for c in CASES if c[0] in TREC and c[1]
                          and len(set(c[1])) == len(c[1]) and (c[0] != "mrr" or c[3] is None)
                          and c[3] in (None, 5, 10, 15, 20, 30)])
def test_metric_agrees_with_trec_eval(kind: str, retrieved: list[str], qrels: dict[str, float],
                                      k: int | None, value: float) -> None:
    """The same data through trec_eval (pytrec_eval-terrier), the reference implementation.

    trec_eval ranks by score (distinct, descending here) and has cut-offs 5, 10, 15, 20, 30...
    """
    pytrec_eval = pytest.importorskip("pytrec_eval")
    measure = TREC[kind].format(k=k)
    evaluator = pytrec_eval.RelevanceEvaluator(
        {"q": {d: int(g) for d, g in qrels.items()}}, {measure.rsplit("_", 1)[0]
                                                      if k else measure})
    run = {"q": {d: float(len(retrieved) - i) for i, d in enumerate(retrieved)}}
    ours = retrieval.metric_value(kind, retrieved, qrels, k)
    assert ours == pytest.approx(evaluator.evaluate(run)["q"][measure], abs=1e-9)


def test_random_rankings_agree_with_trec_eval() -> None:
    """200 seeded random rankings and graded judgments: every metric, k = 5 and 10."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    import random
    rng = random.Random(16)
    docs = [f"d{i}" for i in range(30)]
    for trial in range(200):
        qrels = {d: rng.choice([0, 1, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 8))}
        if not any(qrels.values()):
            continue
        retrieved = rng.sample(docs, rng.randint(0, 15))
        if not retrieved:
            continue
        evaluator = pytrec_eval.RelevanceEvaluator(
            {"q": qrels}, {"P", "recall", "ndcg_cut", "recip_rank"})
        run = {"q": {d: float(100 - i) for i, d in enumerate(retrieved)}}
        trec = evaluator.evaluate(run)["q"]
        gains = {d: float(g) for d, g in qrels.items()}
        for k in (5, 10):
            for kind in ("recall_at_k", "precision_at_k", "ndcg_at_k"):
                measure = TREC[kind].format(k=k)
                ours = retrieval.metric_value(kind, retrieved, gains, k)
                assert ours == pytest.approx(trec[measure], abs=1e-9), (trial, kind, k)
        assert retrieval.metric_value("mrr", retrieved, gains, None) == pytest.approx(
            trec["recip_rank"], abs=1e-9)


def _spec(kind: str, **params: Any) -> AssertionSpec:
    return AssertionSpec(kind, params, line=7)


@pytest.mark.parametrize(("kind", "params", "error"), [
    ("recall_at_k", {}, "needs `k`"),
    ("recall_at_k", {"k": 0}, "`k` must be an integer from 1 to 1000"),
    ("ndcg_at_k", {"k": True}, "`k` must be an integer"),
    ("hit_at_k", {"k": 3, "min": 1.5}, "`min` must be a number from 0 to 1"),
    ("precision_at_k", {"k": 3, "top": 2}, "unknown option 'top'"),
])
def test_bad_options_are_config_errors_on_their_line(kind: str, params: dict[str, Any],
                                                     error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_spec(_spec(kind, **params), ".llmgate.yml")
    assert caught.value.line == 7 and error in caught.value.message


def test_mrr_needs_no_k() -> None:
    validate_spec(_spec("mrr"), ".llmgate.yml")


def _example(relevant: dict[str, float] | None) -> Example:
    return Example("q1", 3, "When are refunds paid?", relevant_ids=relevant)


def test_a_failure_names_the_missing_and_the_irrelevant_ids() -> None:
    result = retrieval.check_retrieval(_spec("recall_at_k", k=2), ["d3", "d4", "d1"],
                                       _example(BINARY))
    assert not result.passed and result.score == pytest.approx(1 / 3)
    assert result.message == ("recall@2 0.33 < 1.00; relevant not in the top 2: d1, d7; "
                              "not relevant in the top 2: d4; retrieved: d3, d4")
    assert result.details["missing"] == ["d1", "d7"]


def test_precision_passes_by_default_at_the_best_reachable_value() -> None:
    """Two relevant documents and k = 4: 2/4 is perfect retrieval, and passes."""
    two = {"d1": 1.0, "d2": 1.0}
    spec = _spec("precision_at_k", k=4)
    assert retrieval.check_retrieval(spec, ["d1", "d2", "x", "y"], _example(two)).passed
    worse = retrieval.check_retrieval(spec, ["d1", "x", "y", "z"], _example(two))
    assert not worse.passed and worse.message.startswith("precision@4 0.25 < 0.50")


def test_min_loosens_and_no_retrieved_ids_is_said() -> None:
    loose = _spec("ndcg_at_k", k=3, min=0.5)
    assert retrieval.check_retrieval(loose, ["d3", "d2", "d1"], _example(BINARY)).passed
    none = retrieval.check_retrieval(loose, [], _example(BINARY))
    assert not none.passed and "the target reported no `retrieved_ids`" in none.message


def test_an_example_without_relevant_ids_fails_saying_so() -> None:
    for relevant in (None, {}, {"d1": 0.0}):
        result = retrieval.check_retrieval(_spec("hit_at_k", k=3), ["d1"], _example(relevant))
        assert not result.passed and "has no `relevant_ids`" in result.message


def test_dataset_reads_relevant_ids_as_a_list_or_graded() -> None:
    text = ('{"id": "a", "input": "x", "relevant_ids": ["d1", 7]}\n'
            '{"id": "b", "input": "y", "relevant_ids": {"d1": 2, "d2": 0.5}}\n'
            '{"id": "c", "input": "z"}\n')
    a, b, c = parse_dataset(text, "evals/rag.jsonl")
    assert a.relevant_ids == {"d1": 1.0, "7": 1.0}
    assert b.relevant_ids == {"d1": 2.0, "d2": 0.5}
    assert c.relevant_ids is None


@pytest.mark.parametrize("value", ['"d1"', '[true]', '{"d1": -1}', '{"d1": "high"}', '[["d1"]]'])
def test_dataset_refuses_malformed_relevant_ids_on_their_line(value: str) -> None:
    text = '{"id": "a", "input": "x"}\n{"id": "b", "input": "y", "relevant_ids": ' + value + "}\n"
    with pytest.raises(ConfigError) as caught:
        parse_dataset(text, "evals/rag.jsonl")
    assert caught.value.line == 2 and "`relevant_ids` must be" in caught.value.message


def _result(scores: list[float]) -> ExampleResult:
    from worker.evals.types import AssertionResult
    return ExampleResult("q", 1, all(s == 1.0 for s in scores), False, "answer", None,
                         assertions=tuple(AssertionResult("recall_at_k", s == 1.0, s)
                                          for s in scores))


def test_the_metric_is_the_mean_score_per_example_and_over_the_suite() -> None:
    results = [_result([0.5]), _result([1.0]), _result([0.0])]
    assert [example_value(r, "recall_at_k") for r in results] == [0.5, 1.0, 0.0]
    metrics = suite_metrics(results)
    assert metrics["recall_at_k"] == metrics["assertion.recall_at_k.mean_score"] == 0.5
    assert is_known_metric("ndcg_at_k") and is_known_metric("assertion.mrr.pass_rate")
    assert is_known_metric("faithfulness") and is_known_metric(
        "assertion.faithfulness.pass_rate")


_NFC, _NFD = "caf\u00e9", "cafe\u0301"  # the same id, precomposed and with a combining accent


@pytest.mark.parametrize(("relevant", "retrieved", "score", "irrelevant"), [
    ([_NFC], [_NFD, "x"], 1.0, ["x"]),  # the tester's case: NFC in the dataset, NFD retrieved
    ([_NFD], [_NFC, "x"], 1.0, ["x"]),
    (["\u212b"], ["\u00c5"], 1.0, []),  # ANGSTROM SIGN is NFC's LATIN CAPITAL A WITH RING
    # two spellings of one id in one line are refused: test_an_empty_or_repeated_relevant_id_...
    ([_NFC], ["cafe"], 0.0, ["cafe"]),  # no accent is another id
])
def test_ids_compare_in_unicode_nfc_on_both_sides(relevant: Any, retrieved: list[str],
                                                  score: float, irrelevant: list[str]) -> None:
    line = {"id": "a", "input": "x", "relevant_ids": relevant}
    (example,) = parse_dataset(json.dumps(line, ensure_ascii=False) + "\n", "evals/rag.jsonl")
    result = retrieval.check_retrieval(_spec("ndcg_at_k", k=3), retrieved, example)
    assert result.score == pytest.approx(score) and result.passed == (score == 1.0)
    assert result.details["irrelevant"] == irrelevant
    assert result.details["missing"] == ([] if score == 1.0 else [_NFC])


@pytest.mark.parametrize(("relevant", "message"), [
    (["d1", ""], "`relevant_ids` holds an empty id '': each id names a document"),
    ({" ": 1, "d1": 2}, "`relevant_ids` holds an empty id ' ': each id names a document"),
    (["caf\u00e9", "cafe\u0301"], "`relevant_ids` gives the id 'caf\u00e9' twice ('caf\u00e9' "
     "and 'cafe\u0301' are equal in Unicode NFC): give each document once"),
    ({"caf\u00e9": 1, "cafe\u0301": 3}, "`relevant_ids` gives the id 'caf\u00e9' twice "
     "('caf\u00e9' and 'cafe\u0301' are equal in Unicode NFC): give each document once"),
    (["d1", "d1"], "`relevant_ids` gives the id 'd1' twice ('d1' and 'd1' are equal in Unicode "
     "NFC): give each document once"),
])
def test_an_empty_or_repeated_relevant_id_is_a_dataset_error_on_its_line(
        relevant: Any, message: str) -> None:
    text = '{"id": "a", "input": "q"}\n' + json.dumps({"id": "b", "input": "q",
                                                        "relevant_ids": relevant}) + "\n"
    with pytest.raises(ConfigError) as caught:
        parse_dataset(text, "evals/r.jsonl")
    assert (caught.value.path, caught.value.line, caught.value.message) == (
        "evals/r.jsonl", 2, message)
