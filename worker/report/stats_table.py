"""Rows and explanations of the paired-statistics table of a report (pure).

One row per compared suite, metric and group: n, base, head, delta, the 95% interval of the
delta, the test's p-value (Holm-adjusted when a ``regression`` rule covers it), the minimum
detectable drop and the verdict of the statistical rules. Untrusted names go through the
caller's ``inline`` escaper (worker/report/render.py), so the rows are safe markdown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from worker.evals.types import GateReport, PairedComparison, RuleOutcome
from worker.evals.verdict import DEFAULT_RESAMPLES, ZERO_METHOD, p_text
from worker.report.markdown import THRESHOLD_RULES

#: Comparison rows shown; the rest are counted ("... N more rows").
MAX_ROWS = 80
_VERDICT = {"regression": "❌ regression", "inconclusive": "❔ inconclusive", "pass": "✅ pass",
            "skipped": "⏭ skipped", "fail": "❌ fail"}
_ORDER = ("fail", "regression", "inconclusive", "pass", "skipped")

Inline = Callable[[Any, int], str]
Row = tuple[str, ...]


def comparison_rows(report: GateReport, inline: Inline) -> list[Row]:
    """Return one escaped table row per comparison of ``report``, in report order."""
    verdicts = _verdicts(report.outcomes)
    return [_row(c, verdicts.get((c.suite, c.metric, c.group)), inline)
            for c in report.comparisons]


def method_notes(report: GateReport) -> list[str]:
    """Return the lines that explain the table (tests, Holm, zero differences, inconclusive)."""
    if not report.comparisons:
        return []
    lines = [
        "p: one-sided p-value of a drop; exact McNemar test on the discordant pairs for "
        "pass/fail metrics, Wilcoxon signed-rank test for scores, with zero differences "
        f"(ties) dropped before ranking (zero_method={ZERO_METHOD}).",
        f"95% CI: paired bootstrap percentile interval of head - base ({DEFAULT_RESAMPLES} "
        "resamples, fixed seed, stratified by group). MDD: the smallest drop this many "
        "examples detect with 80% power at the gate's level; a larger MDD than the drops you "
        "care about means the set is too small to gate on.",
    ]
    family = any(c.p_family is not None for c in report.comparisons)
    if report.holm_tests and family:
        lines.append(f"The {report.holm_tests} `regression` tests (all metrics and groups) were "
                     "decided together: weighted step-down min-P over paired sign flips "
                     "(Westfall & Young 1993), which uses the dependence between a suite's and "
                     "its groups' tests, so the false-alarm rate of the whole gate stays at "
                     "alpha; raw: the test's own sign-flip p-value (examples weighted by their "
                     "flakiness in earlier runs when known).")
    elif report.holm_tests:
        lines.append(f"Holm's adjustment was applied over the {report.holm_tests} p-values of "
                     "`regression` rules (all metrics and groups), so the false-alarm rate of "
                     "the whole gate stays at alpha.")
    if any(o.status == "inconclusive" for o in report.outcomes):
        lines.append("inconclusive: the data cannot tell at this n and noise (the interval "
                     "straddles the margin, or the set cannot detect the required drop); "
                     "`on_inconclusive` (pass, neutral or fail) decides what it does to the "
                     "check.")
    return lines


def _verdicts(outcomes: Sequence[RuleOutcome]) -> dict[tuple[str, str, str], list[RuleOutcome]]:
    """Each comparison's statistical rules, each with its own verdict (never merged: a
    ``max_new_failures`` regression must not read as a significant drop beside p = 0.188)."""
    found: dict[tuple[str, str, str], list[RuleOutcome]] = {}
    for o in outcomes:
        if not o.rule.startswith(THRESHOLD_RULES):
            found.setdefault((o.suite, o.metric, o.group), []).append(o)
    return found


def _row(c: PairedComparison, rules: list[RuleOutcome] | None, inline: Inline) -> Row:
    metric = c.metric if not c.group else f"{c.metric} [{c.group}]"
    no_change = c.n > 0 and c.n_zero == c.n
    ordered = sorted(rules or [], key=lambda o: _ORDER.index(o.status))
    verdict = "; ".join(f"{_VERDICT[o.status]} ({inline(o.rule, 60)})" for o in ordered) or "—"
    if no_change:  # each rule's own verdict still shows: a threshold can fail with no change
        verdict = f"{verdict} · no change" if ordered else "✅ no change"
    return (inline(c.suite, 60), inline(metric, 100), str(c.n), _num(c.base), _num(c.head),
            _signed(c.delta), _interval(c), _p_value(c), _test(c), _mdd(c.mdd), verdict)


def _test(c: PairedComparison) -> str:
    if c.test == "mcnemar":
        text = f"McNemar, {c.broken} broken / {c.fixed} fixed"
    elif c.test == "wilcoxon":
        text = f"Wilcoxon, {c.n_zero} ties dropped"
    else:
        text = "none (no pairs)"
    if c.repeats > 1:
        noise = "n/a" if c.noise_sd is None else f"{c.noise_sd:.3f}"
        text += f"; {c.repeats} repeats, run-to-run SD {noise}"
    return text


def _p_value(c: PairedComparison) -> str:
    if c.p_value is None:
        return "n/a"
    if c.p_adjusted is None:
        return p_text(c.p_value)
    raw = c.p_value if c.p_family is None else c.p_family
    return f"{p_text(c.p_adjusted)} ({c.adjustment}; raw {p_text(raw)})"




def _interval(c: PairedComparison) -> str:
    if c.ci_low is None or c.ci_high is None:
        return "n/a"
    return f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]"


def _mdd(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else "∞ (n too small)"


def _num(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _signed(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:+.3f}"
