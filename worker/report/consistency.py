"""The consistency part of a report: per consistency suite, metrics with bootstrap intervals,
the CAR curves of base and head, unparseable answers, and the questions that became
inconsistent at head (pure).

Shown on the check run's Details page and in ``llmgate run``'s markdown. The CAR curve is an
inline SVG (worker/report/car_svg.py) with its points as a table beside it (GitHub's markdown
drops inline SVG, so the table is what a check run shows). A question *became inconsistent*
when at base every variant named the same option and at head they do not; it is listed with
each variant's perturbation and the answers at base and head.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.evals.score import (
    Answer,
    Question,
    car_curve,
    consistency_metrics,
    intervals,
    is_consistency,
    questions,
)
from worker.evals.types import GateReport, SuiteResult
from worker.report.car_svg import car_svg
from worker.report.markdown import inline, safe

#: Questions listed per suite, and answers clipped to this many characters.
MAX_QUESTIONS, ANSWER_CHARS = 10, 80
_ROWS = ("original_accuracy", "rc_correct", "rc_agree", "mca", "core", "aga", "unparseable_rate")


def consistency_markdown(report: GateReport) -> str:
    """Return the consistency sections of ``report`` ("" when no suite is a consistency one)."""
    if report.head is None:
        return ""
    parts = []
    for name, head in report.head.suites.items():
        if not any(is_consistency(r) for r in head.examples):
            continue
        base = report.base.suites.get(name) if report.base is not None else None
        parts.append(suite_section(name, base, head))
    return "\n".join(parts)


def suite_section(name: str, base: SuiteResult | None, head: SuiteResult) -> str:
    """Return one consistency suite's section (markdown)."""
    at_head = questions(head.examples)
    at_base = questions(base.examples) if base is not None else []
    lines = [f"#### Consistency: {inline(name, 80)}", "",
             f"{len(at_head)} questions x their variants at head"
             + (f", {len(at_base)} at base" if base is not None else "") + ".", ""]
    lines += _metrics_table(base, head, at_base, at_head)
    lines += _car(at_base if base is not None else None, at_head)
    lines += _unparseable(at_head)
    lines += _inconsistent(at_base, at_head)
    return "\n".join(lines) + "\n"


def _metrics_table(base: SuiteResult | None, head: SuiteResult, at_base: list[Question],
                   at_head: list[Question]) -> list[str]:
    head_metrics = consistency_metrics(head.examples)
    base_metrics = consistency_metrics(base.examples) if base is not None else {}
    meta = next(r.metadata["consistency"] for r in head.examples if is_consistency(r))
    c, tau = float(meta["mca_threshold"]), float(meta["agreement"])
    head_ci = intervals(at_head, c, tau) if at_head else {}
    base_ci = intervals(at_base, c, tau) if at_base else {}
    rows = ["| metric | base | head | base 95% CI | head 95% CI |",
            "| --- | ---: | ---: | --- | --- |"]
    for metric in _ROWS:
        label = {"mca": f"mca (c = {c:g})", "aga": f"aga (tau = {tau:g})"}.get(metric, metric)
        rows.append(f"| {label} | {_num(base_metrics.get(metric))} | "
                    f"{_num(head_metrics.get(metric))} | {_ci(base_ci.get(metric))} | "
                    f"{_ci(head_ci.get(metric))} |")
    return [*rows, "", "95% CI: bootstrap percentile interval over questions (1000 "
            "resamples, fixed seed).", ""]


def _car(at_base: list[Question] | None, at_head: list[Question]) -> list[str]:
    head_curve = car_curve([q.rc_correct for q in at_head])
    curves = [("head", head_curve)]
    base_curve = None
    if at_base is not None:
        base_curve = car_curve([q.rc_correct for q in at_base])
        curves.insert(0, ("base", base_curve))
    header = "| c | " + " | ".join(f"{c:g}" for c, _ in head_curve) + " |"
    rows = [header, "| --- |" + " ---: |" * len(head_curve)]
    if base_curve is not None:
        rows.append("| MCA(c) base | " + " | ".join(f"{m:.2f}" for _, m in base_curve) + " |")
    rows.append("| MCA(c) head | " + " | ".join(f"{m:.2f}" for _, m in head_curve) + " |")
    return ["<details><summary>CAR curve (MCA at each consistency threshold c)</summary>", "",
            car_svg(curves), "", *rows, "", "</details>", ""]


def _unparseable(at_head: list[Question]) -> list[str]:
    found = [a for q in at_head for a in q.answers if a.option is None and not a.errored]
    if not found:
        return []
    lines = [f"**{len(found)} answers at head name no option** (counted wrong):", ""]
    lines += [f"- `{safe(a.id)}`: {inline(a.output, ANSWER_CHARS)}" for a in found[:20]]
    if len(found) > 20:
        lines.append(f"- ... {len(found) - 20} more")
    return [*lines, ""]


def _inconsistent(at_base: list[Question], at_head: list[Question]) -> list[str]:
    before = {(q.id, q.repeat): q for q in at_base}
    became = [(before[(q.id, q.repeat)], q) for q in at_head
              if (q.id, q.repeat) in before and before[(q.id, q.repeat)].rc_agree == 1.0
              and q.rc_agree < 1.0]
    if not became:
        return ["No question became inconsistent at head." if at_base else "", ""]
    lines = [f"<details><summary>{len(became)} questions became inconsistent at head (every "
             "variant agreed at base)</summary>", ""]
    for old, new in became[:MAX_QUESTIONS]:
        lines += [f"**{inline(new.id, 80)}**: RC_agree {old.rc_agree:.2f} → {new.rc_agree:.2f}, "
                  f"RC_correct {old.rc_correct:.2f} → {new.rc_correct:.2f}", "",
                  "| variant | perturbation | base answer | head answer |",
                  "| --- | --- | --- | --- |"]
        by_id = {a.id: a for a in old.answers}
        lines += [_variant_row(by_id.get(a.id), a) for a in new.answers]
        lines.append("")
    if len(became) > MAX_QUESTIONS:
        lines.append(f"... {len(became) - MAX_QUESTIONS} more questions")
    return [*lines, "</details>", ""]


def _variant_row(old: Answer | None, new: Answer) -> str:
    return f"| `{safe(new.id)}` | {inline(new.perturbation, 40)} | {_answer(old)} | " \
           f"{_answer(new)} |"


def _answer(answer: Answer | None) -> str:
    if answer is None:
        return "—"
    named = f"option {inline(answer.option, 20)}" if answer.option is not None else "no option"
    mark = "right" if answer.right else "wrong"
    return f"{inline(answer.output, ANSWER_CHARS)} ({named}, {mark})"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _ci(bounds: Sequence[float] | None) -> str:
    return "—" if bounds is None else f"[{bounds[0]:.3f}, {bounds[1]:.3f}]"
