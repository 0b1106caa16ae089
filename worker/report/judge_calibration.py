"""Render ``llmgate judge calibrate``'s result: figures per criterion, matrices, disagreements.

Pure. Judge reasons and label ids are untrusted text (a model's words, a file's ids): every one
goes through worker/report/markdown.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from worker.evals.run import CriterionCalibration, JudgeCalibration
from worker.evals.score import Estimate
from worker.evals.types import RuleOutcome
from worker.report.markdown import inline, safe

#: Longest judge reason in a table cell, characters.
REASON_CHARS = 200


def render_markdown(calibration: JudgeCalibration, drift: Mapping[str, float],
                    outcomes: Sequence[RuleOutcome]) -> str:
    """Return the calibration as markdown.

    Args:
        calibration: the suite's judges against the labels.
        drift: criterion -> drop in agreement since the snapshot (fraction; > 0 is worse).
        outcomes: the suite's ``judge:`` rules checked (may be empty).
    """
    lines = [f"### llmgate judge calibrate: suite `{safe(calibration.suite)}` on "
             f"`{safe(calibration.labels)}`", "",
             "| criterion | judge | n | judge errors | agreement (95% CI) | kappa (95% CI) "
             "| weighted kappa | MAE | Pearson | Spearman | drift |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in calibration.criteria:
        lines.append(f"| {inline(c.name, 60)} | `{safe(c.model)}` | {c.n} | {c.judge_errors} | "
                     f"{_est(c.agreement)} | {_est(c.kappa)} | {_est(c.weighted_kappa)} | "
                     f"{_est(c.mae)} | {_est(c.pearson)} | {_est(c.spearman)} | "
                     f"{_drift(drift.get(c.name))} |")
    for c in calibration.criteria:
        lines += ["", *_matrix(c), *_disagreements(c)]
        if c.first_error:
            lines += ["", f"First judge error: {inline(c.first_error, REASON_CHARS)}"]
    if outcomes:
        lines += ["", "**Rules** (`judge:` of the suite):", ""]
        lines += [f"- {inline(o.metric, 80)} {o.rule}: **{o.status}**"
                  + (f" - {inline(o.reason, 300)}" if o.reason else "") for o in outcomes]
    return "\n".join(lines) + "\n"


def _matrix(c: CriterionCalibration) -> list[str]:
    names = [_rating(k, c.graded) for k in c.categories]
    lines = [f"**{inline(c.name, 60)}**: confusion matrix (rows: human, columns: judge)", "",
             "| human \\ judge | " + " | ".join(names) + " |",
             "|---|" + "---|" * len(names)]
    lines += [f"| {name} | " + " | ".join(str(v) for v in row) + " |"
              for name, row in zip(names, c.confusion, strict=True)]
    return lines


def _disagreements(c: CriterionCalibration) -> list[str]:
    if not c.disagreements:
        return ["", "No disagreements."]
    lines = ["", f"{len(c.disagreements)} disagreements:", "",
             "| id | human | judge | judge's reason |", "|---|---|---|---|"]
    lines += [f"| {inline(d.id, 60)} | {_rating(d.human, c.graded)} | "
              f"{_rating(d.judge, c.graded)} | {inline(d.reason or '(none)', REASON_CHARS)} |"
              for d in c.disagreements]
    return lines


def render_json(calibration: JudgeCalibration, drift: Mapping[str, float],
                outcomes: Sequence[RuleOutcome]) -> str:
    """Return the calibration as JSON (NaN as null): ``suite``, ``labels``, ``criteria`` (each
    with its figures as ``{value, low, high}``, ``confusion``, ``disagreements``, ``drift``)
    and ``rules``."""
    doc = {"suite": calibration.suite, "labels": calibration.labels,
           "criteria": [_criterion_json(c, drift.get(c.name)) for c in calibration.criteria],
           "rules": [{"criterion_metric": o.metric, "rule": o.rule, "status": o.status,
                      "reason": o.reason, "agreement": _num(o.head), "reference": _num(o.base)}
                     for o in outcomes]}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _criterion_json(c: CriterionCalibration, drift: float | None) -> dict[str, Any]:
    def est(value: Estimate | None) -> dict[str, float | None] | None:
        return None if value is None else {"value": _num(value.value), "low": _num(value.low),
                                           "high": _num(value.high)}

    return {"name": c.name, "model": c.model, "prompt_version": c.prompt_version,
            "graded": c.graded, "n": c.n, "judge_errors": c.judge_errors,
            "agreement": est(c.agreement), "kappa": est(c.kappa),
            "weighted_kappa": est(c.weighted_kappa), "mae": est(c.mae),
            "pearson": est(c.pearson), "spearman": est(c.spearman),
            "categories": list(c.categories), "confusion": c.confusion, "drift": _num(drift),
            "disagreements": [{"id": d.id, "human": d.human, "judge": d.judge,
                               "reason": d.reason} for d in c.disagreements]}


def _num(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _est(value: Estimate | None) -> str:
    if value is None or not math.isfinite(value.value):
        return "n/a"
    if not (math.isfinite(value.low) and math.isfinite(value.high)):
        return f"{value.value:.3f}"
    return f"{value.value:.3f} ({value.low:.3f} to {value.high:.3f})"


def _drift(value: float | None) -> str:
    return "n/a" if value is None else f"{-value:+.3f}"


def _rating(value: int, graded: bool) -> str:
    return str(value) if graded else ("pass" if value else "fail")
