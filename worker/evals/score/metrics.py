"""Suite metrics: the rates that gate rules compare, computed from example results (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from worker.evals.score.assertions import KNOWN_ASSERTIONS
from worker.evals.score.consistency import (
    CONSISTENCY_METRICS,
    consistency_metrics,
    is_classification_metric,
)
from worker.evals.score.example_values import target_left_out
from worker.evals.score.metrics_agent import AGENT_METRICS, agent_metrics
from worker.evals.score.metrics_llm import LLM_METRICS, is_llm_metric, llm_metrics
from worker.evals.score.metrics_order import ORDER_METRICS, order_metrics
from worker.evals.score.rag_judges import CRITERIA
from worker.evals.types import ExampleResult

#: Every metric a gate rule may name: the two suite rates, one pass rate per assertion type and
#: the metrics of worker/evals/score/metrics_llm.py (plus ``precision_<label>``/``recall_<label>``
#: and ``assertion.<type>.mean_score``) and of worker/evals/score/metrics_order.py.
KNOWN_METRICS: tuple[str, ...] = ("pass_rate", "error_rate") + tuple(
    f"assertion.{name}.pass_rate" for name in KNOWN_ASSERTIONS
) + LLM_METRICS + CONSISTENCY_METRICS + tuple(f"assertion.{name}.pass_rate" for name in CRITERIA) \
    + ORDER_METRICS + AGENT_METRICS
__all__ = ["KNOWN_METRICS", "is_known_metric", "suite_metrics"]


def is_known_metric(name: str) -> bool:
    """Return True when ``name`` is one of `KNOWN_METRICS`, e.g. ``assertion.regex.pass_rate``."""
    return name in KNOWN_METRICS or is_llm_metric(name)


def suite_metrics(results: Sequence[ExampleResult]) -> dict[str, float]:
    """Compute a suite's metrics from its example results.

    Metrics (fractions 0-1):
        ``pass_rate``: examples passed / scored examples (``unscored`` ones, provider and
            judge errors, are neither passes nor failures).
        ``error_rate``: examples whose target errored / examples (those unscored because
            base's target gave no answer, `target_left_out`, are left out of both).
        ``assertion.<type>.pass_rate``: over the scored examples where an assertion of that
            type ran (and did not error), the fraction where every assertion of that type
            passed. An errored example counts as failed for each assertion type it carries.
        and those of `worker.evals.score.metrics_llm.llm_metrics` and
        `worker.evals.score.metrics_order.order_metrics` and
        `worker.evals.score.metrics_agent.agent_metrics`, and for a consistency suite those of
        `worker.evals.score.consistency.consistency_metrics`.

    Args:
        results: the suite's example results, in any order.

    Returns:
        Metric name -> value; empty for an empty suite (every metric is then unavailable), and
        no ``assertion.<type>`` entry for a type no example ran.
    """
    total = len(results)
    if total == 0:
        return {}
    scored = [r for r in results if not r.unscored]
    metrics = {"pass_rate": sum(r.passed for r in scored) / len(scored)} if scored else {}
    counted = [r for r in results if not target_left_out(r)]
    if counted:
        metrics["error_rate"] = sum(r.errored for r in counted) / len(counted)
    ran: dict[str, int] = {}
    passed: dict[str, int] = {}
    for result in results:
        if result.unscored and result.errored:  # no answer: a provider error, not a failure
            continue
        by_type: dict[str, bool] = {}
        for assertion in (a for a in result.assertions if not a.errored):
            ok = assertion.passed and not result.errored
            by_type[assertion.type] = by_type.get(assertion.type, True) and ok
        for name, ok in by_type.items():
            ran[name] = ran.get(name, 0) + 1
            passed[name] = passed.get(name, 0) + ok
    for name in sorted(ran):
        metrics[f"assertion.{name}.pass_rate"] = passed[name] / ran[name]
    metrics.update(llm_metrics(results))
    metrics.update(order_metrics(results))
    metrics.update(agent_metrics(results))
    consistency = consistency_metrics(results)
    if consistency:  # its expected labels are the options' labels, not classes
        metrics = {k: v for k, v in metrics.items() if not is_classification_metric(k)}
    metrics.update(consistency)
    return metrics
