"""Metrics of LLM suites: scores, classification, latency, cost, tokens, judges (pure).

Over the scored results (``unscored`` ones, i.e. provider and judge errors, left out):

- ``mean_score``: mean over examples of the mean score of the example's scored assertions
  (0.0 for an example whose target errored); ``assertion.<type>.mean_score`` likewise for one
  assertion type.
- Classification, only for a suite whose ``expected`` values are labels (`is_classification`:
  it has a ``classification`` assertion, or every ``expected`` is a short label, at most
  `MAX_LABEL_WORDS` words and `MAX_LABEL_CHARS` characters on one line, with at most
  `MAX_LABELS` distinct labels and at least two examples per label on average; free-text
  references are not labels), over examples with a scalar ``expected`` label, predicting the
  ``classification`` assertion's label or else the output text (trimmed); an errored target
  predicts nothing: ``accuracy``; per label ``precision_<label>`` and ``recall_<label>``;
  ``precision_macro``, ``recall_macro``; ``f1_macro`` (unweighted mean of per-label F1),
  ``f1_weighted`` (weighted by each label's support), ``f1_micro`` (from the pooled counts;
  equal to accuracy when every example predicts one label). Definitions: scikit-learn's
  ``precision_recall_fscore_support``; a label never predicted has precision 0 (its "zero
  division" default).
- ``latency_p50``/``latency_p90``/``latency_p99`` (ms) over examples whose target answered:
  linear interpolation between order statistics (Hyndman and Fan's type 7, numpy's default).
- ``cost_total``/``cost_mean`` (USD) over examples with a known cost; ``tokens_in_mean``,
  ``tokens_out_mean`` over examples reporting usage.
- ``judge_error_rate``: examples with an errored judge (or other errored assertion) over all
  examples (errored targets included in the denominator).
- RAG (`RAG_METRICS`): ``recall_at_k``, ``precision_at_k``, ``hit_at_k``, ``mrr``,
  ``ndcg_at_k`` (worker/evals/score/retrieval.py) and ``faithfulness``, ``answer_relevance``,
  ``context_relevance``, ``context_recall`` (worker/evals/score/rag_judges.py): each the same
  value as ``assertion.<name>.mean_score``, the mean over scored examples of that assertion's
  score.

A metric that cannot be computed (no example it applies to) is absent: unavailable.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from worker.evals.types import ExampleResult

#: Fixed metric names this module computes.
LLM_METRICS: tuple[str, ...] = (
    "mean_score", "accuracy", "f1_macro", "f1_micro", "f1_weighted", "precision_macro",
    "recall_macro", "latency_p50", "latency_p90", "latency_p99", "cost_total", "cost_mean",
    "tokens_in_mean", "tokens_out_mean", "judge_error_rate", "win_rate", "judge_trap_accuracy")
#: Names of the RAG assertions' mean scores (module docstring).
RAG_METRICS: tuple[str, ...] = (
    "recall_at_k", "precision_at_k", "hit_at_k", "mrr", "ndcg_at_k", "faithfulness",
    "answer_relevance", "context_relevance", "context_recall")
#: Metrics that compare head with base: without a base a rule on them is skipped, not failed.
NEEDS_BASE: tuple[str, ...] = ("win_rate",)
#: What makes ``expected`` values labels (`is_classification`).
MAX_LABEL_WORDS = 3
MAX_LABEL_CHARS = 40
MAX_LABELS = 20
#: Metrics where lower is better: gate them with ``max`` and ``max_increase``.
LOWER_IS_BETTER: tuple[str, ...] = (
    "error_rate", "judge_error_rate", "latency_p50", "latency_p90", "latency_p99",
    "cost_total", "cost_mean", "tokens_in_mean", "tokens_out_mean", "unparseable_rate")
_PATTERN = re.compile(r"(precision|recall)_.+|assertion\..+\.mean_score\Z")


def is_llm_metric(name: str) -> bool:
    """Return True for a metric of this module, including ``precision_<label>`` names."""
    return name in LLM_METRICS or name in RAG_METRICS or _PATTERN.fullmatch(name) is not None


def lower_is_better(name: str) -> bool:
    """Return True for metrics where a higher value is worse (latency, cost, tokens, errors)."""
    return name in LOWER_IS_BETTER


def llm_metrics(results: Sequence[ExampleResult]) -> dict[str, float]:
    """Compute the metrics of the module docstring from a suite's example results."""
    metrics: dict[str, float] = {}
    if not results:
        return metrics
    metrics["judge_error_rate"] = sum(
        any(a.errored for a in r.assertions) for r in results) / len(results)
    scored = [r for r in results if not r.unscored]
    metrics.update(score_metrics(scored))
    metrics.update({name: metrics[f"assertion.{name}.mean_score"] for name in RAG_METRICS
                    if f"assertion.{name}.mean_score" in metrics})
    if is_classification(results):
        metrics.update(classification_metrics(scored))
    answered = [r.latency_ms for r in results if not r.errored]
    for q in (50, 90, 99):
        if answered:
            metrics[f"latency_p{q}"] = percentile(answered, q)
    costs = [r.cost_usd for r in results if r.cost_usd is not None and not r.errored]
    if costs:
        metrics["cost_total"] = round(math.fsum(costs), 12)
        metrics["cost_mean"] = round(math.fsum(costs) / len(costs), 12)
    for key, name in (("input", "tokens_in_mean"), ("output", "tokens_out_mean")):
        counts = [r.usage[key] for r in results if key in r.usage]
        if counts:
            metrics[name] = sum(counts) / len(counts)
    return metrics


def _example_score(result: ExampleResult, kind: str | None) -> float | None:
    chosen = [a for a in result.assertions if not a.errored and (kind is None or a.type == kind)]
    if not chosen:
        return None
    return 0.0 if result.errored else math.fsum(a.score for a in chosen) / len(chosen)


def score_metrics(scored: Sequence[ExampleResult]) -> dict[str, float]:
    """Return ``mean_score`` and ``assertion.<type>.mean_score`` over scored examples."""
    metrics: dict[str, float] = {}
    kinds = sorted({a.type for r in scored for a in r.assertions})
    for kind, name in [(None, "mean_score")] + [(k, f"assertion.{k}.mean_score") for k in kinds]:
        values = [v for r in scored if (v := _example_score(r, kind)) is not None]
        if values:
            metrics[name] = math.fsum(values) / len(values)
    return metrics


def _label(value: object) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        return None
    return str(value).strip()


def is_classification(results: Sequence[ExampleResult]) -> bool:
    """Return True when a suite's ``expected`` values are class labels (module docstring).

    Counted over first draws only, so repeats do not make free-text references look like
    labels.
    """
    if any(a.type == "classification" for r in results for a in r.assertions):
        return True
    labels = [_label(r.expected) for r in results if r.repeat == 0 and r.expected is not None]
    if not labels or any(not _short_label(label) for label in labels):
        return False
    distinct = len(set(labels))
    return distinct <= MAX_LABELS and distinct * 2 <= len(labels)


def _short_label(label: str | None) -> bool:
    return label is not None and 0 < len(label) <= MAX_LABEL_CHARS and "\n" not in label \
        and len(label.split()) <= MAX_LABEL_WORDS


def classification_metrics(scored: Sequence[ExampleResult]) -> dict[str, float]:
    """Return accuracy, precision, recall and F1 over examples with a scalar label."""
    pairs = [(truth, _prediction(r)) for r in scored if (truth := _label(r.expected))]
    if not pairs:
        return {}
    support = Counter(truth for truth, _ in pairs)
    predicted = Counter(p for _, p in pairs if p is not None)
    hits = Counter(truth for truth, p in pairs if truth == p)
    metrics = {"accuracy": sum(hits.values()) / len(pairs)}
    f1s: dict[str, float] = {}
    for label in sorted(support):
        precision = hits[label] / predicted[label] if predicted[label] else 0.0
        recall = hits[label] / support[label]
        metrics[f"precision_{label}"], metrics[f"recall_{label}"] = precision, recall
        f1s[label] = _f1(precision, recall)
    labels = sorted(support)
    metrics["precision_macro"] = sum(metrics[f"precision_{x}"] for x in labels) / len(labels)
    metrics["recall_macro"] = sum(metrics[f"recall_{x}"] for x in labels) / len(labels)
    metrics["f1_macro"] = sum(f1s.values()) / len(f1s)
    metrics["f1_weighted"] = sum(f1s[x] * support[x] for x in labels) / len(pairs)
    tp, fp = sum(hits.values()), sum(predicted.values()) - sum(hits.values())
    micro_p = tp / (tp + fp) if tp + fp else 0.0
    metrics["f1_micro"] = _f1(micro_p, tp / len(pairs))
    return metrics


def _prediction(result: ExampleResult) -> str | None:
    if result.errored:
        return None
    if result.label is not None:
        return result.label
    return _label(result.output)


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (0-100) by linear interpolation (Hyndman-Fan type 7)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
