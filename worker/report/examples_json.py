"""Every example's result per side, for ``llmgate run --format json`` (pure).

The ``examples`` member of the JSON report (docs/report-schema-v1.json describes it): suite ->
``{"base": [...] | null, "head": [...] | null}``, each list one entry per example and repeat in
dataset order, not only the regressions, so a script can compare any example's outputs and
scores.
"""

from __future__ import annotations

from typing import Any

from worker.evals.types import ExampleResult, GateReport, RunResult


def examples_json(report: GateReport) -> dict[str, dict[str, list[dict[str, Any]] | None]]:
    """Return suite -> side -> the examples' results (`example_json`), None for a side that
    did not run the suite."""
    names = [*(report.head.suites if report.head else {}),
             *(report.base.suites if report.base else {})]
    return {name: {"base": _side(report.base, name), "head": _side(report.head, name)}
            for name in dict.fromkeys(names)}


def example_json(result: ExampleResult) -> dict[str, Any]:
    """Return one example's result: ``id``, ``line`` (1-based, in its dataset), ``repeat``,
    ``passed``, ``errored``, ``error``, ``output``, ``expected``, ``assertions`` (each
    ``type``, ``passed``, ``score`` 0-1, ``errored``, ``message``), ``latency_ms``,
    ``cost_usd`` (USD or null) and ``cached``; and ``notes`` when the example has some (invalid
    Unicode of its output replaced, `worker.evals.types.TargetOutput.notes`)."""
    return {"id": result.id, "line": result.line, "repeat": result.repeat,
            "passed": result.passed, "errored": result.errored, "error": result.error,
            "output": result.output, "expected": result.expected,
            "assertions": [{"type": a.type, "passed": a.passed, "score": a.score,
                            "errored": a.errored, "message": a.message}
                           for a in result.assertions],
            "latency_ms": result.latency_ms, "cost_usd": result.cost_usd,
            "cached": result.cached, **({"notes": list(result.notes)} if result.notes else {})}


def _side(run: RunResult | None, name: str) -> list[dict[str, Any]] | None:
    if run is None or name not in run.suites:
        return None
    return [example_json(r) for r in run.suites[name].examples]
