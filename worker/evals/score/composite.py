"""``composite`` judges: weighted criteria, each with its own rubric, and a combined score.

Options of ``type: composite``: ``criteria``, a list of ``{name, rubric, weight?, scale?, n?}``
(``weight`` a number > 0, default 1; ``scale`` and ``n`` as for ``llm_judge``,
worker/evals/score/judges.py); ``threshold`` (fraction 0-1, default 0.75): the combined score
that passes; ``include_expected``; and the model fields of worker/evals/llm/endpoints.py (default:
``settings.judge``), shared by every criterion. Each criterion is judged as an ``llm_judge``
with its own rubric (its own prompt version and cache entries); the combined score is the
weighted mean sum(w_i * s_i) / sum(w_i) of the criteria's 0-1 scores. A criterion with a judge
error makes the composite errored (unscored, never a pass). The result's ``details["criteria"]``
holds each criterion's name, weight, score, verdict and the judge's reason, and a failure
message names every criterion's score.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from worker.errors import ConfigError
from worker.evals.llm import ENDPOINT_KEYS, parse_endpoint
from worker.evals.llm_types import Endpoint, ModelCalls, RunUsage
from worker.evals.score.judges import judge_spec, run_judge, validate_judge
from worker.evals.types import AssertionResult, AssertionSpec, Example

COMPOSITE_KEYS = ("criteria", "threshold", "include_expected", *ENDPOINT_KEYS)
CRITERION_KEYS = ("name", "rubric", "weight", "scale", "n")
DEFAULT_THRESHOLD = 0.75
Fail = Callable[[str], ConfigError]


def validate_composite(spec: AssertionSpec, fail: Fail) -> None:
    """Check a ``composite`` spec's options at config time.

    Raises:
        ConfigError: ``fail(message)`` for an unknown or malformed option or criterion.
    """
    p = spec.params
    for key in p:
        if key not in COMPOSITE_KEYS:
            raise fail(f"unknown option {key!r} (known options: {', '.join(COMPOSITE_KEYS)})")
    criteria = p.get("criteria")
    if not isinstance(criteria, list) or not criteria:
        raise fail("needs `criteria`: a list of {name, rubric, weight?, scale?, n?}")
    names: set[str] = set()
    for item in criteria:
        _validate_criterion(item, names, fail)
    threshold = p.get("threshold", DEFAULT_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
            or not 0 <= threshold <= 1:
        raise fail("`threshold` must be a number from 0 to 1 (the combined score that passes)")
    if "model" in p:
        parse_endpoint(p, fail)
    for sub in criterion_specs(spec):
        validate_judge(sub, fail, ("name",))


def _validate_criterion(item: Any, names: set[str], fail: Fail) -> None:
    if not isinstance(item, dict):
        raise fail("each criterion must be a mapping {name, rubric, weight?, scale?, n?}")
    for key in item:
        if key not in CRITERION_KEYS:
            raise fail(f"criterion: unknown option {key!r} "
                       f"(known options: {', '.join(CRITERION_KEYS)})")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail("each criterion needs a `name` (non-empty text)")
    if name in names:
        raise fail(f"duplicate criterion name {name!r}")
    names.add(name)
    weight = item.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
        raise fail(f"criterion {name!r}: `weight` must be a number > 0")


def criterion_specs(spec: AssertionSpec) -> list[AssertionSpec]:
    """Return each criterion as an ``llm_judge`` spec (with ``name``, the composite's model
    fields and ``include_expected``), at the composite's line."""
    shared = {k: v for k, v in spec.params.items() if k in (*ENDPOINT_KEYS, "include_expected")}
    found = []
    for item in spec.params.get("criteria") or ():
        if isinstance(item, dict):
            own = {k: v for k, v in item.items() if k != "weight"}
            found.append(AssertionSpec("llm_judge", {**shared, **own}, spec.line))
    return found


def weights(spec: AssertionSpec) -> list[float]:
    """Return each criterion's weight (default 1), in order."""
    return [float(item.get("weight", 1)) for item in spec.params.get("criteria") or ()]


async def run_composite(spec: AssertionSpec, default: Endpoint | None, caller: ModelCalls,
                        example: Example, output: Any, fail: Fail, *,
                        use_cache: bool = True) -> tuple[AssertionResult, RunUsage]:
    """Judge one answer on every criterion and combine them (the module doc's rules).

    Raises:
        ConfigError: ``fail(message)`` when no judge model is set.
    """
    subs = criterion_specs(spec)
    judged = await asyncio.gather(*(
        run_judge(judge_spec(sub, default, fail), caller, example, output, use_cache=use_cache)
        for sub in subs))
    spend = RunUsage()
    for _, used in judged:
        spend = spend + used
    names = [str(sub.params["name"]) for sub in subs]
    return combine_criteria(names, weights(spec), [r for r, _ in judged],
                            float(spec.params.get("threshold", DEFAULT_THRESHOLD))), spend


def combine_criteria(names: list[str], weighting: list[float], results: list[AssertionResult],
                     threshold: float) -> AssertionResult:
    """Combine the criteria's judge results into the composite's (pure)."""
    rows = [{"name": n, "weight": w, "score": r.score, "passed": r.passed,
             "errored": r.errored, "reason": r.details.get("reason", "") or r.message,
             "prompt_version": r.details.get("prompt_version", "")}
            for n, w, r in zip(names, weighting, results, strict=True)]
    details: dict[str, Any] = {"criteria": rows,
                               "judge_errors": sum(r.errored for r in results)}
    broken = [(n, r) for n, r in zip(names, results, strict=True) if r.errored]
    if broken:
        message = "; ".join(f"criterion {n}: {r.message}" for n, r in broken)
        return AssertionResult("composite", False, 0.0, message, errored=True, details=details)
    score = sum(w * r.score for w, r in zip(weighting, results, strict=True)) / sum(weighting)
    passed = score >= threshold - 1e-9
    shown = "; ".join(f"{row['name']} {row['score']:.2f} x{row['weight']:g}"
                      + (f" ({row['reason']})" if not row["passed"] and row["reason"] else "")
                      for row in rows)
    message = "" if passed else f"composite {score:.2f} < {threshold:g}: {shown}"
    return AssertionResult("composite", passed, score, message, details=details)
