"""Consistency metrics of a ``type: consistency`` suite, from its variants' results (pure).

Definitions (Cavalin et al., 2025, "CAT: A Metric-Driven Framework for Analyzing the
Consistency-Accuracy Relation of LLMs under Controlled Input Variations", arXiv:2512.23711,
as cited equation by equation by the llm-consistency package; llmgate's code is its own). For
question i with V_i answered variants (the original and its perturbations):

- ``RC_correct_i`` = (variants answered right) / V_i (the paper's response consistency).
- ``RC_agree_i`` = (variants giving the most common answer) / V_i, answers compared by the
  option named (its dataset label), whatever label the variant showed it under. Not in the
  paper: the package's second axis, defined the same way here. An unparseable answer agrees
  with no other answer (the package instead keys it by its raw text, so two identical
  unreadable replies would agree; llmgate does not let unreadable answers look consistent).
- ``MCA(c)`` = (1/N) * #{i : RC_correct_i >= c} (paper eq. 4).
- the CAR curve: (c, MCA(c)) at c = 0.0, 0.1, ..., 1.0 (eq. 5).
- ``CORE`` = AUCAR * normDTW (eq. 9): AUCAR the trapezoidal area under the CAR curve (eq. 6-7);
  normDTW = 1 - DTW(curve, ideal) / DTW(ideal, worst) (eq. 8), DTW with the absolute
  difference as cost, ideal = (1, ..., 1), worst = (1, 0, ..., 0).
- ``AGA(tau)`` = mean RC_correct of the questions with RC_agree >= tau, 0.0 when none (the
  package's extension, not in the paper).

Package and paper: for MCA, the CAR grid, AUCAR, normDTW and CORE the package's formulas are
the paper's equations as it cites them, and llmgate's values equal the package's to 1e-9 on the
same answers (tests/unit/evals/score/test_consistency_reference.py); no difference was found to
follow the paper over. Two deliberate differences from the package, neither in the paper: an
unparseable answer agrees with nothing (above), and the original question is asked too, as
variant 0 (the package asks only the perturbed variants), so every RC counts it.

Suite metrics (fractions 0-1): ``original_accuracy`` (questions whose original variant is
answered right), ``rc_correct`` and ``rc_agree`` (means over questions), ``mca`` (MCA at the
suite's ``mca_threshold``), ``core``, ``aga`` (at the suite's ``agreement``) and
``unparseable_rate`` (answers naming no option / answered variants). Variants without an answer
for a provider's reason (``unscored``) are left out of their question; a target error counts as
a wrong answer that agrees with nothing. With ``repeats``, each draw is its own set of questions.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from worker.evals.types import ExampleResult

#: The metrics of this module, and the ones with one value per question (paired rules).
CONSISTENCY_METRICS = ("original_accuracy", "rc_correct", "rc_agree", "mca", "core", "aga",
                       "unparseable_rate")
PER_QUESTION = ("original_accuracy", "rc_correct", "rc_agree")
#: The CAR curve's thresholds c_k (the paper's grid).
THRESHOLDS = tuple(k / 10 for k in range(11))
_CLASSIFICATION = re.compile(r"accuracy|(f1|precision|recall)_.+")


@dataclass(frozen=True)
class Answer:
    """One variant's answer: its example id, label shown, option named (None: unparseable or
    errored), whether right, and the raw output."""

    id: str
    perturbation: str
    shown: str | None
    option: str | None
    right: bool
    output: object
    errored: bool = False


@dataclass(frozen=True)
class Question:
    """One question's answered variants (original first) and its two consistencies."""

    id: str
    repeat: int
    answers: tuple[Answer, ...]
    rc_correct: float
    rc_agree: float


def is_classification_metric(name: str) -> bool:
    """Return True for the classification metrics a consistency suite does not have (its
    ``expected`` values are option labels, which the answers' free text is not compared with)."""
    return _CLASSIFICATION.fullmatch(name) is not None


def is_consistency(result: ExampleResult) -> bool:
    """Return True for a variant of a consistency suite's question."""
    return "consistency" in result.metadata


def rc(answers: Sequence[tuple[str | None, bool]]) -> tuple[float, float]:
    """Return ``(RC_correct, RC_agree)`` of one question's ``(option, right)`` answers.

    An option of None (unparseable) agrees with nothing. Raises ValueError when empty.
    """
    if not answers:
        raise ValueError("a question needs at least one answer")
    total = len(answers)
    named = Counter(option for option, _ in answers if option is not None)
    most = max(named.values()) if named else 1
    return sum(right for _, right in answers) / total, most / total


def questions(results: Sequence[ExampleResult]) -> list[Question]:
    """Group a consistency suite's results into questions, in order of first appearance."""
    grouped: dict[tuple[str, int], list[tuple[int, Answer]]] = {}
    for r in results:
        if not is_consistency(r) or r.unscored:
            continue
        meta = r.metadata["consistency"]
        detail = next((a.details for a in r.assertions if a.type == "mc_answer"), {})
        option = None if r.errored else detail.get("answer")
        answer = Answer(r.id, str(meta["perturbation"]), detail.get("shown"), option,
                        r.passed and not r.errored, r.output, r.errored)
        grouped.setdefault((str(meta["question"]), r.repeat), []).append(
            (int(meta["variant"]), answer))
    out = []
    for (qid, repeat), found in grouped.items():
        answers = tuple(a for _, a in sorted(found, key=lambda pair: pair[0]))
        correct, agree = rc([(a.option, a.right) for a in answers])
        out.append(Question(qid, repeat, answers, correct, agree))
    return out


def mca(rc_correct: Sequence[float], threshold: float) -> float:
    """MCA(c): the share of questions with RC_correct >= c (0.0 without questions)."""
    if not rc_correct:
        return 0.0
    return sum(value >= threshold for value in rc_correct) / len(rc_correct)


def car_curve(rc_correct: Sequence[float]) -> list[tuple[float, float]]:
    """The CAR curve: ``(c, MCA(c))`` at each of `THRESHOLDS`."""
    return [(c, mca(rc_correct, c)) for c in THRESHOLDS]


def dtw(a: Sequence[float], b: Sequence[float]) -> float:
    """Dynamic time warping distance of two sequences, cost |a_i - b_j| (0.0 if one is empty)."""
    if not a or not b:
        return 0.0
    inf = float("inf")
    previous = [0.0] + [inf] * len(b)
    for x in a:
        row = [inf]
        for j, y in enumerate(b, start=1):
            row.append(abs(x - y) + min(previous[j], row[j - 1], previous[j - 1]))
        previous = row
    return previous[-1]


def core(rc_correct: Sequence[float]) -> float:
    """The CORE index: AUCAR x normDTW over the CAR curve (module docstring); 0.0 if empty."""
    if not rc_correct:
        return 0.0
    curve = car_curve(rc_correct)
    xs, ys = [c for c, _ in curve], [m for _, m in curve]
    area = sum((ys[k] + ys[k + 1]) / 2 * (xs[k + 1] - xs[k]) for k in range(len(xs) - 1))
    ideal, worst = [1.0] * len(ys), [1.0] + [0.0] * (len(ys) - 1)
    return area * (1.0 - dtw(ys, ideal) / dtw(ideal, worst))


def aga(rc_correct: Sequence[float], rc_agree: Sequence[float], tau: float) -> float:
    """AGA(tau): mean RC_correct of questions with RC_agree >= tau; 0.0 when none qualifies."""
    kept = [c for c, a in zip(rc_correct, rc_agree, strict=True) if a >= tau]
    return sum(kept) / len(kept) if kept else 0.0


def consistency_metrics(results: Sequence[ExampleResult]) -> dict[str, float]:
    """Return the suite metrics of the module docstring; {} for a suite of another type."""
    found = questions(results)
    if not found:
        return {}
    meta = next(r.metadata["consistency"] for r in results if is_consistency(r))
    correct = [q.rc_correct for q in found]
    agree = [q.rc_agree for q in found]
    answers = [a for q in found for a in q.answers]
    originals = [q.answers[0].right for q in found if q.answers[0].id.endswith("#v0")]
    out = {"rc_correct": sum(correct) / len(correct), "rc_agree": sum(agree) / len(agree),
           "mca": mca(correct, float(meta["mca_threshold"])), "core": core(correct),
           "aga": aga(correct, agree, float(meta["agreement"])),
           "unparseable_rate": sum(a.option is None and not a.errored for a in answers)
           / len(answers)}
    if originals:
        out["original_accuracy"] = sum(originals) / len(originals)
    return out


def annotate(results: Sequence[ExampleResult]) -> list[ExampleResult]:
    """Return ``results`` with each question's RC_correct and RC_agree in its original
    variant's ``metadata.consistency`` (the per-question values the paired rules compare)."""
    values = {(q.id, q.repeat): q for q in questions(results)}
    out = []
    for r in results:
        meta = r.metadata.get("consistency")
        q = values.get((str(meta["question"]), r.repeat)) if meta else None
        if q is not None and meta is not None and meta["variant"] == 0:
            r = replace(r, metadata={**r.metadata, "consistency": {
                **meta, "rc_correct": q.rc_correct, "rc_agree": q.rc_agree}})
        out.append(r)
    return out


def question_value(result: ExampleResult, metric: str) -> float | None:
    """Return the per-question value of ``metric`` (`PER_QUESTION`) carried by an original
    variant, None on the other variants and for unscored questions."""
    meta = result.metadata.get("consistency")
    if not meta or meta.get("variant") != 0 or result.unscored:
        return None
    if metric == "original_accuracy":
        return float(result.passed and not result.errored)
    value = meta.get(metric)
    return float(value) if isinstance(value, int | float) else None


def core_closed(rc_correct: NDArray[np.float64]) -> NDArray[np.float64]:
    """CORE of each row of RC_correct values (shape (..., N)), normDTW in closed form (see
    `intervals`)."""
    grid = np.array(THRESHOLDS)
    ys = (rc_correct[..., None, :] >= grid[:, None]).mean(axis=-1)
    area = ((ys[..., 1:] + ys[..., :-1]) / 2 * np.diff(grid)).sum(axis=-1)
    return np.asarray(area * (1 - (1 - ys).sum(axis=-1) / (len(grid) - 1)))


_Array = NDArray[np.float64]
_Statistic = Callable[[_Array, _Array, _Array], _Array]


def _axis_last(statistic: _Statistic) -> Callable[..., _Array]:
    """scipy passes ``axis``; the statistics here always reduce the last axis."""
    def call(c: _Array, a: _Array, o: _Array, axis: int = -1) -> _Array:
        return statistic(*(np.moveaxis(x, axis, -1) for x in (c, a, o)))
    return call


def intervals(found: Sequence[Question], mca_threshold: float, agreement: float,
              seed: int = 0, resamples: int = 1000,
              level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Return the bootstrap percentile interval of each metric over questions resampled with
    replacement (Efron & Tibshirani, 1993; scipy.stats.bootstrap, seeded: reruns repeat).

    On a resample the CAR curve's normDTW is computed in closed form: against the constant
    ideal curve every alignment covers each point at least once and the diagonal covers each
    exactly once, so DTW(curve, ideal) = sum(1 - MCA(c_k)) and DTW(ideal, worst) = K - 1
    (`core` computes the DTW itself; the tests check the two agree).

    Returns:
        Metric name (``original_accuracy``, ``rc_correct``, ``rc_agree``, ``mca``, ``core``,
        ``aga``) -> (low, high); ``(value, value)`` with fewer than two questions.
    """
    from scipy import stats  # ~60 MB and ~1 s of import: only when used

    correct = np.array([q.rc_correct for q in found], dtype=np.float64)
    agree = np.array([q.rc_agree for q in found], dtype=np.float64)
    original = np.array([float(q.answers[0].right) for q in found], dtype=np.float64)

    def aga_of(c: _Array, a: _Array, o: _Array) -> _Array:
        kept = a >= agreement
        count = kept.sum(axis=-1)
        return np.where(count > 0, (c * kept).sum(axis=-1) / np.maximum(count, 1), 0.0)

    statistics: dict[str, _Statistic] = {
        "original_accuracy": lambda c, a, o: o.mean(axis=-1),
        "rc_correct": lambda c, a, o: c.mean(axis=-1),
        "rc_agree": lambda c, a, o: a.mean(axis=-1),
        "mca": lambda c, a, o: (c >= mca_threshold).mean(axis=-1),
        "core": lambda c, a, o: core_closed(c), "aga": aga_of}
    out = {}
    for name, statistic in statistics.items():
        value = float(statistic(correct, agree, original))
        if len(found) < 2:
            out[name] = (value, value)
            continue
        result = stats.bootstrap(
            (correct, agree, original), _axis_last(statistic), paired=True, vectorized=True,
            n_resamples=resamples, confidence_level=level, method="percentile", batch=100,
            random_state=np.random.default_rng(seed))
        low, high = result.confidence_interval
        out[name] = (value, value) if np.isnan(low) or np.isnan(high) \
            else (min(float(low), value), max(float(high), value))
    return out
