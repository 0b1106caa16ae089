"""Which way a metric gets worse: the metrics where lower is better (pure).

Most metrics drop when a change makes things worse; latency, cost, tokens, error rates and an
agent's steps and tool calls rise instead. The gate rules' keys (``max``/``max_increase`` for
these, worker/evals/config/gate_rules.py), the sign of the paired tests
(worker/evals/verdict/comparisons.py, signflip.py) and the reports' wording follow this list.
"""

from __future__ import annotations

from worker.evals.score.metrics_agent import AGENT_LOWER_IS_BETTER
from worker.evals.score.metrics_llm import LOWER_IS_BETTER as LLM_LOWER_IS_BETTER

#: Metrics where lower is better: gate them with ``max`` and ``max_increase``.
LOWER_IS_BETTER = LLM_LOWER_IS_BETTER + AGENT_LOWER_IS_BETTER


def lower_is_better(metric: str) -> bool:
    """Return True for metrics where a higher value is worse (errors, cost, tokens, latency)."""
    return metric in LOWER_IS_BETTER
