"""Run a suite's judges on human-labelled answers and measure how well they agree with people.

A suite's *criteria* are its judges: each suite-level ``llm_judge`` (named by its ``name``
option, default ``llm_judge``) and each criterion of a ``composite`` (its ``name``). A labels
row (worker/evals/config/labels.py) rates one criterion: its ``criterion``, or the suite's only
one. Each row's answer is judged as a dataset example's would be; the judge's verdict is 0/1
(pass/fail) for a ``label`` and its 1-5 score (the quorum's median, rounded) for a ``score``.
Rows with a judge error are counted and left out of the statistics. Per criterion
(worker/evals/score/agreement.py, each with a 95% bootstrap interval): agreement and Cohen's
kappa; for 1-5 scores also quadratic weighted kappa, MAE (scale points) and Pearson's and
Spearman's correlations; the confusion matrix and every disagreement (id, human, judge, the
judge's reason).

A *snapshot* (`snapshot_path`: ``labels.jsonl`` -> ``labels.snapshot.json``, committed next to
the labels) keeps each criterion's judge (model, prompt version) and figures, so a later
calibration or a gate whose judge changed reports the change in agreement (`drift`).
"""

from __future__ import annotations

import asyncio
import json
import math
import posixpath
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.config import LabelRow, decode_utf8, load_labels, read_repo_file
from worker.evals.config import snapshot_path as snapshot_path
from worker.evals.context import EvalContext
from worker.evals.llm import ModelCaller
from worker.evals.run.estimate import Judging, ModelUse
from worker.evals.run.judge_calibration_types import (
    CriterionCalibration,
    Disagreement,
    JudgeCalibration,
)
from worker.evals.run.runner import RunState, difference
from worker.evals.score import JudgeSpec, criterion_specs, judge_spec, run_judge
from worker.evals.score import agreement as stats
from worker.evals.types import CONFIG_FILENAME, AssertionResult, Example, Settings, SuiteConfig

#: Format version of a snapshot file.
SNAPSHOT_VERSION = 1
#: Largest snapshot file read, bytes.
MAX_SNAPSHOT_BYTES = 1 << 20
PASS_FAIL, GRADED = (0, 1), (1, 2, 3, 4, 5)


def suite_criteria(suite: SuiteConfig, settings: Settings,
                   path: str = CONFIG_FILENAME) -> dict[str, JudgeSpec]:
    """Return criterion name -> judge for the suite's ``llm_judge``s and ``composite`` criteria.

    Raises:
        ConfigError: no judge, two criteria of one name, or a judge without a model.
    """
    found: dict[str, JudgeSpec] = {}
    for spec in suite.assertions:
        subs = [spec] if spec.type == "llm_judge" else \
            criterion_specs(spec) if spec.type == "composite" else []
        for sub in subs:
            name = str(sub.params.get("name", "llm_judge"))

            def fail(message: str, line: int | None = sub.line, name: str = name) -> ConfigError:
                return ConfigError(path, line, f"judge {name!r}: {message}")

            if name in found:
                raise fail("two judges of the suite have this name: give each `llm_judge` "
                           "its own `name`")
            found[name] = judge_spec(sub, settings.judge, fail)
    if not found:
        raise ConfigError(path, suite.line, f"suite {suite.name!r} has no `llm_judge` or "
                          "`composite` judge to calibrate")
    return found


def identity(judges: dict[str, JudgeSpec]) -> dict[str, tuple[Any, ...]]:
    """What makes each criterion's judge itself: endpoint, prompt version, quorum, threshold."""
    return {name: (js.endpoint.model, js.endpoint.api_base, json.dumps(js.endpoint.params,
                                                                       sort_keys=True),
                   js.version, js.n, js.threshold, js.include_expected)
            for name, js in judges.items()}


async def calibrate_suite(suite: SuiteConfig, settings: Settings, root: Path, labels: str,
                          ctx: EvalContext | None = None, *, use_cache: bool = True,
                          path: str = CONFIG_FILENAME,
                          caller: ModelCaller | None = None) -> JudgeCalibration:
    """Judge every labelled answer with the suite's judges and compare (module doc).

    Args:
        suite, settings: the suite and the settings its judges resolve against.
        root: the checkout holding ``labels`` (relative POSIX path).
        ctx: the response cache, clocks and printer; use_cache: read and write the cache.
        caller: the call path to spend on (a gate's run, so its budget bounds these calls
            too); None: a new one with ``settings``' budget. ``spend`` is this call's only.

    Raises:
        ConfigError: a bad labels file, a row naming no criterion of the suite, or a
            criterion with both labels and scores, or scores for a pass/fail judge.
    """
    judges = suite_criteria(suite, settings, path)
    rows = load_labels(root, labels)
    grouped = _group(rows, judges, labels)
    caller = caller or RunState(settings, ctx).caller
    before = caller.total
    outcomes = await asyncio.gather(*(
        run_judge(judges[name], caller, Example(row.id, row.line, row.input, row.expected),
                  row.output, use_cache=use_cache)
        for name, group in grouped.items() for row in group))
    results = iter(outcomes)
    criteria = tuple(_criterion(name, judges[name], group,
                                [next(results)[0] for _ in group])
                     for name, group in grouped.items())
    return JudgeCalibration(suite.name, labels, criteria, difference(caller.total, before))


def planned_judgings(suite: SuiteConfig, settings: Settings, root: Path, labels: str,
                     path: str = CONFIG_FILENAME) -> list[Judging]:
    """The judge calls `calibrate_suite` will make, for a run's estimate
    (worker/evals/run/estimate.py `Judging`): one per labelled row, of its criterion's judge.

    Raises:
        ConfigError: as `calibrate_suite`.
    """
    judges = suite_criteria(suite, settings, path)
    grouped = _group(load_labels(root, labels), judges, labels)
    lines = {str(spec.params.get("name", "llm_judge")): spec.line for spec in suite.assertions}
    return [Judging(judges[name], Example(row.id, row.line, row.input, row.expected),
                    row.output, ModelUse(judges[name].endpoint.model, path,
                                         lines.get(name, suite.line),
                                         f"the judge {name!r} (calibrated on {labels})"))
            for name, group in grouped.items() for row in group]


def _group(rows: tuple[LabelRow, ...], judges: dict[str, JudgeSpec],
           labels: str) -> dict[str, list[LabelRow]]:
    only = next(iter(judges)) if len(judges) == 1 else None
    grouped: dict[str, list[LabelRow]] = {}
    for row in rows:
        name = row.criterion or only
        if name is None or name not in judges:
            raise ConfigError(labels, row.line, f"`criterion` must name one of the suite's "
                              f"judges: {', '.join(judges)}" if row.criterion else
                              f"the suite has several judges ({', '.join(judges)}): set "
                              "`criterion`")
        group = grouped.setdefault(name, [])
        if group and group[0].graded != row.graded:
            raise ConfigError(labels, row.line, f"criterion {name!r} mixes `label` and "
                              "`score` rows: rate it one way")
        if row.graded and judges[name].scale != "1-5":
            raise ConfigError(labels, row.line, f"criterion {name!r} judges pass/fail: label "
                              "it with `label`, not `score`")
        group.append(row)
    return grouped


def judge_rating(result: AssertionResult, graded: bool) -> int:
    """The judge's rating on the labels' scale: 0/1 (its verdict), or 1-5 (its score)."""
    if not graded:
        return int(result.passed)
    return int(math.floor(result.score * 4 + 1 + 0.5))


def _criterion(name: str, js: JudgeSpec, rows: list[LabelRow],
               results: list[AssertionResult]) -> CriterionCalibration:
    human: list[int] = []
    judge: list[int] = []
    errors = [r for r in results if r.errored]
    disagreements = []
    graded = rows[0].graded
    for row, result in zip(rows, results, strict=True):
        if result.errored:
            continue
        rating = judge_rating(result, graded)
        human.append(row.rating)
        judge.append(rating)
        if rating != row.rating:
            disagreements.append(Disagreement(row.id, row.rating, rating,
                                              str(result.details.get("reason", ""))))
    categories = GRADED if graded else PASS_FAIL

    def kappa(h: stats.Ratings, j: stats.Ratings) -> float:
        return stats.kappa(h, j, categories)

    def weighted(h: stats.Ratings, j: stats.Ratings) -> float:
        return stats.kappa(h, j, categories, "quadratic")

    def graded_only(statistic: stats.Statistic) -> stats.Estimate | None:
        return stats.bootstrap(human, judge, statistic) if graded else None

    return CriterionCalibration(
        name, js.endpoint.model, js.version, graded, len(human), len(errors),
        stats.bootstrap(human, judge, stats.agreement), stats.bootstrap(human, judge, kappa),
        graded_only(weighted), graded_only(stats.mae), graded_only(stats.pearson),
        graded_only(stats.spearman), categories, stats.confusion(human, judge, categories),
        tuple(disagreements), errors[0].message if errors else "")


def to_snapshot(calibration: JudgeCalibration) -> dict[str, Any]:
    """The snapshot document of a calibration (JSON; NaN written as null)."""
    def number(value: float | None) -> float | None:
        return value if value is not None and math.isfinite(value) else None

    def est(value: stats.Estimate | None) -> float | None:
        return number(value.value) if value is not None else None

    return {"llmgate_judge_snapshot": SNAPSHOT_VERSION, "suite": calibration.suite,
            "labels": posixpath.basename(calibration.labels),
            "criteria": {c.name: {"model": c.model, "prompt_version": c.prompt_version,
                                  "n": c.n, "judge_errors": c.judge_errors,
                                  "agreement": est(c.agreement), "kappa": est(c.kappa),
                                  "weighted_kappa": est(c.weighted_kappa), "mae": est(c.mae),
                                  "pearson": est(c.pearson), "spearman": est(c.spearman)}
                         for c in calibration.criteria}}


def write_snapshot(root: Path, calibration: JudgeCalibration) -> Path:
    """Write the snapshot next to the labels under ``root``; return its path.

    Raises:
        OSError: the file cannot be written.
    """
    target = root / snapshot_path(calibration.labels)
    target.write_text(json.dumps(to_snapshot(calibration), indent=2, sort_keys=True) + "\n",
                      encoding="utf-8")
    return target


def load_snapshot(root: Path, labels: str) -> dict[str, dict[str, Any]] | None:
    """Read the snapshot of ``labels`` at ``root``: criterion -> figures; None when absent.

    Raises:
        ConfigError: the file is not a snapshot this version wrote.
    """
    rel = snapshot_path(labels)
    if not (root / rel).is_file():
        return None
    text = decode_utf8(read_repo_file(root, rel, MAX_SNAPSHOT_BYTES), rel)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError(rel, None, f"not a judge snapshot (invalid JSON: {exc})") from None
    criteria = doc.get("criteria") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("llmgate_judge_snapshot") != SNAPSHOT_VERSION \
            or not isinstance(criteria, dict) or not all(isinstance(v, dict)
                                                         for v in criteria.values()):
        raise ConfigError(rel, None, "not a judge snapshot of this llmgate version: write it "
                          "again with `llmgate judge calibrate --save-snapshot`")
    return criteria


def drift(calibration: JudgeCalibration,
          snapshot: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Criterion -> drop in agreement since the snapshot (snapshot - now; > 0 is worse), for
    the criteria both hold with a number."""
    found: dict[str, float] = {}
    for c in calibration.criteria:
        before = snapshot.get(c.name, {}).get("agreement")
        if isinstance(before, int | float) and math.isfinite(c.agreement.value):
            found[c.name] = float(before) - c.agreement.value
    return found
