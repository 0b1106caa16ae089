"""The report ``llmgate run`` prints to a terminal: plain text, not markdown (pure).

Markdown is written for GitHub: on a terminal its escapes (``\\$``, ``&lt;``), tables of pipes
and ``<details>`` tags are noise. This shows the verdict, the commits, one aligned row per rule,
the regressed examples with their dataset lines, and the notes. Every untrusted string is made
`worker.report.plain.printable` and put on one line, so no model output can move the cursor
or recolour the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.evals.types import GateReport
from worker.pipeline import MultiReport
from worker.report import multi as report_multi
from worker.report import render
from worker.report.decision import decision_sentence
from worker.report.markdown import VERDICT
from worker.report.plain import one_line, reports, run_sha

#: Regressed examples listed per config.
MAX_REGRESSIONS = 20


def render_terminal(multi: MultiReport, head_sha: str = "", base_sha: str | None = None) -> str:
    """Return the plain-text report of ``multi`` (lines end in ``\\n``)."""
    head = head_sha or run_sha(multi, "head")
    base = base_sha or run_sha(multi, "base")
    title = report_multi.title(multi) if multi.several else render.check_title(multi.merged())
    lines = [one_line(title, 300), f"head {_sha(head)}, base {_sha(base) if base else '(none)'}"]
    for prefix, report in reports(multi):
        lines += ["", *_section(prefix.strip(), report)]
    notes = [*multi.notes, *(n for _, r in reports(multi) for n in r.notes)]
    if notes:
        lines += ["", "Notes:", *(f"  - {one_line(n, 400)}" for n in notes)]
    return "\n".join(lines) + "\n"


def _section(name: str, report: GateReport) -> list[str]:
    verdict = VERDICT[report.conclusion][1]
    lines = [f"== {one_line(name, 200)}: {verdict}" if name else f"== {verdict}"]
    err = report.config_error
    if err is not None:
        return [*lines, f"configuration error at {one_line(err.path, 200)}:{err.line or 1}: "
                        f"{one_line(err.message, 2000)}"]
    why = decision_sentence(report) or report.headline
    if why:
        lines.append(f"why: {one_line(why, 600)}")
    rows = [("suite", "metric", "rule", "base", "head", "delta", "status")]
    rows += [(o.suite, o.metric + (f" [{o.group}]" if o.group else ""), o.rule, _num(o.base),
              _num(o.head), _num(o.delta, signed=True), o.status) for o in report.outcomes]
    lines += _table(rows)
    worse = report.regressions
    if worse:
        lines += ["", f"{len(worse)} regressed (passed at base, fail at head):"]
        lines += [f"  {one_line(r.dataset, 200)}:{r.line}  {one_line(r.suite, 60)}/"
                  f"{one_line(r.example_id, 80)}: {one_line(r.reason, 200)}"
                  for r in worse[:MAX_REGRESSIONS]]
        if len(worse) > MAX_REGRESSIONS:
            lines.append(f"  ... and {len(worse) - MAX_REGRESSIONS} more (--format json lists "
                         "them all)")
    return lines


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    cells = [[one_line(c, 60) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in cells]


def _num(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _sha(sha: str) -> str:
    return one_line(sha[:7], 40) if sha else "working tree"

