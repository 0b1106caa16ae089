"""The figures of a judge calibration (pure data): how a suite's judges agree with people.

worker/evals/run/judge_calibration.py measures them (`JudgeCalibration`, one
`CriterionCalibration` per criterion); worker/evals/verdict/judge_trust.py checks a suite's
``judge:`` rules against them and worker/report/judge_calibration.py renders them. Kept apart
from the measuring, so reading the figures loads no part of the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worker.evals.llm_types import RunUsage
from worker.evals.score import agreement as stats


@dataclass(frozen=True)
class Disagreement:
    """A labelled answer the judge rated otherwise: ratings as in `LabelRow.rating`."""

    id: str
    human: int
    judge: int
    reason: str


@dataclass(frozen=True)
class CriterionCalibration:
    """One criterion's judge against the labels.

    Attributes:
        name: the criterion; model, prompt_version: its judge.
        graded: 1-5 scores (else pass/fail labels); n: rows compared (without judge errors).
        judge_errors: rows the judge could not rate; first_error: the first one's message.
        agreement, kappa: fractions / kappa with 95% bootstrap intervals.
        weighted_kappa, mae, pearson, spearman: for graded rows only (else None).
        categories, confusion: the scale and the matrix (row human, column judge).
        disagreements: in labels order.
    """

    name: str
    model: str
    prompt_version: str
    graded: bool
    n: int
    judge_errors: int
    agreement: stats.Estimate
    kappa: stats.Estimate
    weighted_kappa: stats.Estimate | None
    mae: stats.Estimate | None
    pearson: stats.Estimate | None
    spearman: stats.Estimate | None
    categories: tuple[int, ...]
    confusion: list[list[int]]
    disagreements: tuple[Disagreement, ...]
    first_error: str = ""

    @property
    def decided(self) -> bool:
        """Whether the judge rated more than half the rows (else the figures decide nothing)."""
        return self.n > self.judge_errors


@dataclass(frozen=True)
class JudgeCalibration:
    """A suite's judges against one labels file; spend: the judge calls'."""

    suite: str
    labels: str
    criteria: tuple[CriterionCalibration, ...]
    spend: RunUsage = field(default_factory=RunUsage)
