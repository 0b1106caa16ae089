"""``llmgate run --format html``: the whole gate as one self-contained HTML page (pure).

One file with no network access: styles, the charts (inline SVG, worker/report/html_charts.py
and the consistency suites' CAR curves, worker/report/car_svg.py) and a small script that
filters the table of examples are all inside it. It shows the verdict and why (the decision
in one sentence, worker/report/decision.py), the rules, the paired statistics, per suite the
metric chart and the distribution of per-example score changes, the consistency sections,
and every example with base and head side by side and why it fails
(worker/report/example_status.py).

Every string of a pull request goes through Jinja's autoescaping; the SVGs are built from
escaped text. `SCRIPT` is the page's only script, a constant (no data inside it), so a page
server can allow exactly it by its hash (`SCRIPT_SHA256`).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

import jinja2
from markupsafe import Markup

from worker.evals.score import car_curve, consistency_metrics, is_consistency, questions
from worker.evals.types import ExampleResult, GateReport, SuiteResult
from worker.pipeline import MultiReport
from worker.report import multi as report_multi
from worker.report import render
from worker.report.car_svg import car_svg
from worker.report.decision import headline_text
from worker.report.example_status import example_statuses, failure_reason
from worker.report.html_charts import change_histogram, metric_bars
from worker.report.markdown import VERDICT, clip
from worker.report.plain import first_per_id, regressed, reports, run_sha, value_text

#: Characters of an input or output shown per cell.
CELL_CHARS = 2000
#: The page's script: filters the examples table by the search box and the "changed" box.
SCRIPT = """
const box = document.getElementById("search"), changed = document.getElementById("changed");
function filter() {
  const words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
  let shown = 0;
  for (const row of document.querySelectorAll("#examples tbody tr")) {
    const text = row.textContent.toLowerCase();
    const ok = words.every(w => text.includes(w)) &&
      (!changed.checked || row.dataset.status !== "same");
    row.hidden = !ok;
    shown += ok ? 1 : 0;
  }
  document.getElementById("shown").textContent = String(shown);
}
box.addEventListener("input", filter);
changed.addEventListener("change", filter);
filter();
"""
#: ``'sha256-...'`` of `SCRIPT`, for a Content-Security-Policy ``script-src`` (CSP Level 3).
SCRIPT_SHA256 = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()

_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                          autoescape=True, trim_blocks=True, lstrip_blocks=True)


@dataclass(frozen=True)
class ExampleRow:
    """One example of one suite, base and head side by side (text already clipped)."""

    config: str
    suite: str
    id: str
    line: int
    input: str
    expected: str
    base: str
    head: str
    base_passed: bool | None
    head_passed: bool
    status: str
    reason: str = ""


def render_html(multi: MultiReport, head_sha: str = "", base_sha: str | None = None) -> str:
    """Return the HTML page of ``multi`` (UTF-8 text)."""
    title = report_multi.title(multi) if multi.several else render.check_title(multi.merged())
    icon, verdict = VERDICT[multi.conclusion]
    sections = [_section(prefix.strip(), report) for prefix, report in reports(multi)]
    rows = [row for s in sections for row in s["rows"]]
    return _ENV.get_template("report.html.j2").render(
        title=title, icon=icon, verdict=verdict, conclusion=multi.conclusion,
        why=headline_text(multi.merged()),
        head=head_sha or run_sha(multi, "head"), base=base_sha or run_sha(multi, "base"),
        notes=list(multi.notes), sections=sections, rows=rows, script=Markup(SCRIPT))  # noqa: S704


def _section(name: str, report: GateReport) -> dict[str, Any]:
    err = report.config_error
    suites = []
    if report.head is not None:
        for suite, head in report.head.suites.items():
            base = report.base.suites.get(suite) if report.base is not None else None
            suites.append(_suite(report, suite, base, head))
    return {"name": name, "conclusion": report.conclusion,
            "verdict": VERDICT[report.conclusion][1], "why": headline_text(report),
            "notes": list(report.notes),
            "config_error": None if err is None else f"{err.path}:{err.line or 1}: {err.message}",
            "outcomes": report.outcomes, "comparisons": report.comparisons, "suites": suites,
            "rows": _rows(name, report)}


def _suite(report: GateReport, name: str, base: SuiteResult | None,
           head: SuiteResult) -> dict[str, Any]:
    cis = {c.metric: (c.ci_low, c.ci_high) for c in report.comparisons
           if c.suite == name and not c.group and c.ci_low is not None and c.ci_high is not None}
    gated = {o.metric for o in report.outcomes if o.suite == name}
    metrics = sorted(gated or {*head.metrics, *(base.metrics if base else {})})
    bars = [(m, base.metrics.get(m) if base else None, head.metrics.get(m), cis.get(m))
            for m in metrics]
    changes = _changes(base, head) if base is not None else []
    return {"name": name,
            "metrics": Markup(metric_bars(bars, f"{name}: base and head"))  # noqa: S704
            if bars else "",
            "changes": Markup(change_histogram(changes, f"{name}: score changes"))  # noqa: S704
            if changes else "",
            "consistency": _consistency(name, base, head)}


def _consistency(name: str, base: SuiteResult | None, head: SuiteResult) -> dict[str, Any] | None:
    if not any(is_consistency(r) for r in head.examples):
        return None
    at_head = questions(head.examples)
    curves = [("head", car_curve([q.rc_correct for q in at_head]))]
    at_base = questions(base.examples) if base is not None else []
    if base is not None:
        curves.insert(0, ("base", car_curve([q.rc_correct for q in at_base])))
    head_m = consistency_metrics(head.examples)
    base_m = consistency_metrics(base.examples) if base is not None else {}
    return {"car": Markup(car_svg(curves, f"{name}: CAR curve")),  # noqa: S704 - escaped inside
            "metrics": [(m, base_m.get(m), head_m.get(m)) for m in sorted(head_m)],
            "questions": (len(at_base), len(at_head))}


def _score(runs: list[ExampleResult]) -> float:
    return fmean(fmean([a.score for a in r.assertions]) if r.assertions else float(r.passed)
                 for r in runs)


def _changes(base: SuiteResult, head: SuiteResult) -> list[float]:
    at_base = first_per_id(base.examples)
    return [_score(runs) - _score(at_base[i]) for i, runs in first_per_id(head.examples).items()
            if i in at_base]


def _rows(name: str, report: GateReport) -> list[ExampleRow]:
    if report.head is None:
        return []
    worse = regressed(report)
    reasons = {(s.suite, s.example_id): s.reason if s.status != "fixed" else
               f"fixed: failed at base: {failure_reason(s.base)}"
               for s in example_statuses(report)}
    rows = []
    for suite, head in report.head.suites.items():
        base = report.base.suites.get(suite) if report.base is not None else None
        at_base = first_per_id(base.examples) if base is not None else {}
        for example_id, runs in first_per_id(head.examples).items():
            old = at_base.get(example_id)
            head_passed = all(r.passed for r in runs)
            base_passed = None if old is None else all(r.passed for r in old)
            status = ("regressed" if (suite, example_id) in worse
                      else "fixed" if base_passed is False and head_passed
                      else "new" if old is None else "same")
            rows.append(ExampleRow(name, suite, example_id, runs[0].line, _cell(runs[0].input),
                                   _cell(runs[0].expected),
                                   _cell(old[0].output) if old else "", _cell(runs[0].output),
                                   base_passed, head_passed, status,
                                   _cell(reasons.get((suite, example_id), ""))))
    return rows


def _cell(value: Any) -> str:
    return clip(value_text(value), CELL_CHARS)

