"""Per-suite sections of the sticky comment, and comparability lines of the check (pure).

Each suite run at head gets a section: its verdict, its examples (paired with base, added,
removed), its model calls (live and cached, USD) at head and base, what the pull request
changed and whether base was scored like head (worker/evals/verdict/comparable.py), the examples of
head that got no answer for a cause of the head (worker/evals/verdict/health.py), the examples
that fail at head when base has no result for the suite ("Failing at head") and those head
fixed ("Fixed at head": failed at base, pass at head), the examples that got worse with
their expected value and base and head outputs side by side (collapsed), and the ids of the
examples added and removed (collapsed).

Everything untrusted goes through the caller's escapers (worker/report/render.py): ``inline`` for
markdown, ``cell`` for the HTML table cells of the side-by-side outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from worker.evals.run import describe
from worker.evals.types import (
    GateReport,
    Regression,
    RuleOutcome,
    RunUsage,
    SuiteComparability,
    SuiteResult,
)
from worker.report.example_status import ExampleStatus, example_statuses
from worker.report.model_calls import usd

Escape = Callable[[Any, int], str]
#: Characters of an expected value or an output shown in a side-by-side cell.
CELL_CHARS = 600
#: Ids listed as added or removed per suite; the rest are counted.
MAX_IDS = 50
#: Ids listed as failing or fixed at head per suite; the rest are counted.
MAX_LISTED = 10
_ORDER = ("fail", "regression", "inconclusive", "pass", "skipped")
_VERDICT = {"fail": "❌ fail", "regression": "❌ regression", "inconclusive": "❔ inconclusive",
            "pass": "✅ pass", "skipped": "⏭ skipped"}


@dataclass(frozen=True)
class Section:
    """One suite's part of the comment; every string is escaped markdown (or safe HTML).

    Attributes:
        title: ``suite · verdict``.
        facts: bullet lines (examples, calls, changes, comparability).
        worse: one rendered block per example that got worse (shown ones only).
        worse_total: how many got worse in all.
        added, removed: the ids only at head / only at base, as one line each ("" if none).
    """

    title: str
    facts: tuple[str, ...]
    worse: tuple[str, ...]
    worse_total: int
    added: str = ""
    removed: str = ""

    @property
    def more_worse(self) -> int:
        """Examples that got worse and are not shown."""
        return self.worse_total - len(self.worse)


def sections(report: GateReport, inline: Escape, cell: Escape) -> list[Section]:
    """Return one section per suite run at head, in run order (see the module docstring)."""
    found = {v.suite: v for v in report.comparability}
    runs = report.head.suites if report.head is not None else {}
    names = dict.fromkeys([*runs, *(r.suite for r in report.regressions)])
    statuses = example_statuses(report)
    return [_section(name, runs.get(name), report, found.get(name), inline, cell,
                     [s for s in statuses if s.suite == name])
            for name in names]


def limit_worse(found: Sequence[Section], count: int) -> list[Section]:
    """Keep the first ``count`` worse examples over all sections, in order."""
    kept = []
    for section in found:
        shown = section.worse[:max(count, 0)]
        count -= len(shown)
        kept.append(replace(section, worse=shown))
    return kept


def comparability_lines(report: GateReport, inline: Escape) -> list[str]:
    """Return one escaped line per suite whose base was re-scored or is not comparable."""
    return [inline(f"{v.suite}: {_comparability(v)}", 900)
            for v in report.comparability if v.status != "same"]


def worse_item(r: Regression, inline: Escape, cell: Escape) -> str:
    """Return one example that got worse: its id, line and reason, then a one-line HTML table
    of its expected value and its base and head outputs side by side."""
    head = (f"**{inline(r.example_id, 80)}** · {inline(f'{r.dataset}:{r.line}', 200)} · "
            f"{inline(r.reason, 400)}")
    cells = "".join(f"<td>{cell(v, CELL_CHARS)}</td>"
                    for v in (r.expected, r.base_output, r.head_output))
    return (f"{head}\n\n<table><tr><th>expected</th><th>base output</th><th>head output</th>"
            f"</tr><tr>{cells}</tr></table>")


def _section(name: str, suite: SuiteResult | None, report: GateReport,
             verdict: SuiteComparability | None, inline: Escape, cell: Escape,
             statuses: Sequence[ExampleStatus]) -> Section:
    base = report.base.suites.get(name) if report.base is not None else None
    outcomes = [o for o in report.outcomes if o.suite == name]
    title = f"{inline(name, 100)} · {_suite_verdict(outcomes, verdict)}"
    added, removed, examples = _examples(suite, base)
    facts = [examples, _calls(suite, base, verdict)]
    if verdict is not None and verdict.output_changes:
        facts.append("Changed at head: " + inline(describe(verdict.output_changes), 300))
    if verdict is not None and verdict.status != "same":
        facts.append("Comparability: " + inline(_comparability(verdict, calls=False), 900))
    errored = [r.example_id for r in report.errored if r.suite == name]
    if errored:
        shown = ", ".join(errored[:10]) + (f" and {len(errored) - 10} more"
                                           if len(errored) > 10 else "")
        # no answer from the target, or a judge error (the answer steers the judge)
        facts.append(f"**Errors at head** (caused by the head): {len(errored)} "
                     f"example{'s' if len(errored) != 1 else ''}: " + inline(shown, 400))
    facts += _failing_and_fixed(statuses, base is None, inline)
    worse = [worse_item(r, inline, cell) for r in sorted(
        (r for r in report.regressions if r.suite == name), key=lambda r: (r.line, r.example_id))]
    return Section(title, tuple(f for f in facts if f), tuple(worse), len(worse),
                   _id_line(added, inline), _id_line(removed, inline))


def _failing_and_fixed(statuses: Sequence[ExampleStatus], no_base: bool,
                       inline: Escape) -> list[str]:
    """The "Failing at head" line (base has no result for the suite) and the "Fixed at
    head" line, each with its first `MAX_LISTED` ids and why they fail."""
    lines = []
    failing = [s for s in statuses if s.failing] if no_base else []
    if failing:
        shown = "; ".join(inline(f"{s.example_id} (line {s.line}): {s.reason}", 300)
                          for s in failing[:MAX_LISTED])
        lines.append(f"**Failing at head** (no base result): {_count(len(failing))}: {shown}"
                     + _more(len(failing)))
    fixed = [s for s in statuses if s.status == "fixed"]
    if fixed:
        shown = ", ".join(inline(s.example_id, 80) for s in fixed[:MAX_LISTED])
        lines.append(f"**Fixed at head** (failed at base, pass at head): "
                     f"{_count(len(fixed))}: {shown}" + _more(len(fixed)))
    return lines


def _count(count: int) -> str:
    return f"{count} example{'s' if count != 1 else ''}"


def _more(count: int) -> str:
    return f" and {count - MAX_LISTED} more" if count > MAX_LISTED else ""


def _suite_verdict(outcomes: Sequence[RuleOutcome], verdict: SuiteComparability | None) -> str:
    statuses = [o.status for o in outcomes]
    worst = min(statuses, key=_ORDER.index) if statuses else None
    blocked = verdict is not None and verdict.status == "not_comparable"
    if worst in ("fail", "regression"):
        return _VERDICT[worst] + (" · not comparable with base" if blocked else "")
    if blocked:
        return "⚪ not comparable with base"
    return "no gate rule" if worst is None else _VERDICT[worst]


def _examples(head: SuiteResult | None,
              base: SuiteResult | None) -> tuple[list[str], list[str], str]:
    if head is None:
        return [], [], "Examples: no result at head"
    head_ids = list(dict.fromkeys(e.id for e in head.examples))
    if base is None:
        return [], [], f"Examples: {len(head_ids)} at head; no base result"
    base_ids = list(dict.fromkeys(e.id for e in base.examples))
    at_base, at_head = set(base_ids), set(head_ids)
    added = [i for i in head_ids if i not in at_base]
    removed = [i for i in base_ids if i not in at_head]
    return added, removed, (f"Examples: {len(head_ids)} at head, "
                            f"{len(head_ids) - len(added)} paired with base, "
                            f"{len(added)} added, {len(removed)} removed")


def _calls(head: SuiteResult | None, base: SuiteResult | None,
           verdict: SuiteComparability | None) -> str:
    parts = [f"{side} {_spend(suite.spend)}" for side, suite in (("head", head), ("base", base))
             if suite is not None and (suite.spend.provider_calls or suite.spend.cache_hits)]
    if verdict is not None and (verdict.spend.provider_calls or verdict.spend.cache_hits):
        parts.append(f"re-scoring base {_spend(verdict.spend)}")
    return "Model calls: " + "; ".join(parts) if parts else ""


def _spend(spend: RunUsage) -> str:
    return f"{spend.provider_calls} live + {spend.cache_hits} cached, {usd(spend.cost_usd)}"


def _comparability(verdict: SuiteComparability, *, calls: bool = True) -> str:
    if verdict.status == "rescored":
        spent = verdict.spend.provider_calls or verdict.spend.cache_hits
        calls_text = f" (re-scoring: {_spend(verdict.spend)})" if calls and spent else ""
        return f"re-scored: {verdict.reason}{calls_text}"
    return (f"not comparable: {verdict.reason}; its relative rules were not applied (absolute "
            "rules at head were)")


def _id_line(ids: Sequence[str], inline: Escape) -> str:
    shown = ", ".join(inline(i, 80) for i in ids[:MAX_IDS])
    return shown + (f" and {len(ids) - MAX_IDS} more" if len(ids) > MAX_IDS else "")
