"""Render a `GateReport` for GitHub (check run, annotations, sticky comment) and for the CLI.

Pure: the only I/O is jinja2 reading ``worker/report/templates``. Everything a pull request controls
(model outputs, expected values, example ids, suite and metric names, error messages) is
untrusted. In markdown it goes through `inline` (markdown and HTML escaped, whitespace collapsed,
``@mentions`` broken with a zero-width joiner), `fenced` (a code block whose fence is longer
than any backtick run inside it, mentions broken too) or `cell` (an HTML table cell on one
source line, every ``<``, ``>``, ``&`` and quote an entity); view models hold only such strings,
so the templates never see raw text. Per-suite sections of the comment: worker/report/suites.py.

Limits are GitHub's (`worker.github.limits`), measured as GitHub measures them, in UTF-8 bytes:
``output.summary`` and ``output.text`` at most 65535 (the REST docs say characters, GitHub
counts bytes: github/docs#35252), an annotation ``title`` at most 255 characters and
``message`` at most 64 KB, an issue comment body at most 65535 bytes. A report rich in CJK or
emoji takes 3-4 bytes a character, so every budget here is in bytes. Row-shaped content that
does not fit is cut to whole rows and ends with "... N more" lines.
"""

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from typing import Any

from worker.contract import COMMENT_MARKER, RERUN_COMMAND
from worker.evals.types import GateReport, Regression, RuleOutcome, RunResult
from worker.evals.verdict import contract_line
from worker.github import MAX_COMMENT_BYTES, MAX_OUTPUT_BYTES, clip_bytes, utf8_size
from worker.report import model_calls as report_llm
from worker.report import stats_table as report_stats
from worker.report import suites as report_suites
from worker.report.consistency import consistency_markdown
from worker.report.decision import decision_sentence, headline_text
from worker.report.example_status import status_lists_json
from worker.report.examples_json import examples_json
from worker.report.markdown import (
    VERDICT,
    as_text,
    cell,
    clip,
    fenced,
    inline,
    render_template,
    short_sha,
)

#: GitHub's limit on check-run ``output.summary`` and ``output.text``, UTF-8 bytes.
CHECK_OUTPUT_MAX_BYTES = MAX_OUTPUT_BYTES
#: The limit an issue comment body is held to, UTF-8 bytes (`worker.github.limits`).
COMMENT_MAX_BYTES = MAX_COMMENT_BYTES
#: Check-run title kept short enough to read in the checks list, characters.
TITLE_MAX_CHARS = 119
#: GitHub's limit on an annotation title, characters.
ANNOTATION_TITLE_MAX_CHARS = 255
#: Expected and actual outputs are clipped to this in an annotation message, characters.
ANNOTATION_OUTPUT_CHARS = 500
#: Examples that got worse shown in the PR comment (all suites); the check run lists them all.
COMMENT_MAX_REGRESSIONS = 20
#: Examples that got worse kept in a comment too large for all, before metric rows go.
COMMENT_MIN_REGRESSIONS = 3
#: Suite sections in the PR comment; the metric table still has a row for every suite.
COMMENT_MAX_SECTIONS = 30

_STATUS = {"pass": "✅ pass", "fail": "❌ fail", "skipped": "⏭ skipped",
           "regression": "❌ regression", "inconclusive": "❔ inconclusive"}
_STATUS_ORDER = ("fail", "regression", "inconclusive", "pass", "skipped")
_Row = tuple[str, ...]


def check_title(report: GateReport) -> str:
    """Return the check-run title: the verdict and the headline numbers, under 120 characters.

    E.g. ``llmgate: fail, 2 regressions - tickets pass_rate 0.775 (-0.150)``.
    """
    err = report.config_error
    if err is not None:
        where = err.path if err.line is None else f"{err.path}:{err.line}"
        return clip(" ".join(f"llmgate: configuration error in {where}".split()),
                    TITLE_MAX_CHARS)
    title = f"llmgate: {VERDICT[report.conclusion][1]}"
    if report.regressions:
        title += f", {_plural(len(report.regressions), 'regression')}"
    if report.headline:  # the rules did not decide (budget, rate limits, judge errors)
        return clip(" ".join(f"{title} - {report.headline}".split()), TITLE_MAX_CHARS)
    lead = next((o for o in report.outcomes if o.status in ("fail", "regression")),
                next((o for o in report.outcomes if o.head is not None), None))
    if lead is not None:
        title += f" - {clip(lead.suite, 40)} {clip(lead.metric, 40)} {_num(lead.head)}"
        title += f" ({_delta(lead.delta)})" if lead.delta is not None else ""
    elif report.notes:
        title += f" - {report.notes[0]}"
    return clip(" ".join(title.split()), TITLE_MAX_CHARS)


def check_summary(report: GateReport, trend: Sequence[str] = ()) -> str:
    """Return the check-run summary (markdown, at most 65535 bytes of UTF-8).

    Holds the verdict, the short head and base SHAs compared and which baseline was used, one
    table row per suite and metric (base, head, delta as fractions with 3 decimals, the rules
    and a status), the suites whose evaluation contract head changes (with head's verdict
    under its own), why rules failed, the count of regressed examples, the suites whose base
    was re-scored or is not comparable, and the notes; or, for a configuration error, the file,
    line and message. ``trend``: the lines of worker/report/trend.py shown under the metric
    table (none by default).
    """
    rows = _metric_rows(report.outcomes)
    head = short_sha(report.head.sha) if report.head is not None else ""
    base = _compared_base(report, None)
    return _fit_rows(lambda k: render_template("summary.md.j2",
                                               **_common(report, rows, k, trend=trend),
                                               head=head, base=short_sha(base) if base else ""),
                     len(rows), CHECK_OUTPUT_MAX_BYTES)


def check_text(report: GateReport, limit: int = CHECK_OUTPUT_MAX_BYTES) -> str:
    """Return the check-run text (markdown, at most ``limit`` bytes of UTF-8, by default
    GitHub's 65535): every regressed example.

    Each shows the suite, id, ``dataset:line``, the reason and the expected value and base and
    head outputs in code blocks (clipped to 2000 characters each).
    """
    items = [_detail_item(r) for r in (*_ordered(report), *_errored_only(report))]
    consistency = consistency_markdown(report)  # bounded: a few questions per suite
    consistency = consistency + "\n" if consistency and utf8_size(consistency) < limit // 2 \
        else ""

    def render(k: int) -> str:
        return render_template("details.md.j2", config_error=_config_error_block(report),
                               items=items[:k], more=len(items) - k)

    return consistency + _fit_rows(render, len(items), limit - utf8_size(consistency))


def summary_section(report: GateReport, name: str, limit: int,
                    trend: Sequence[str] = ()) -> str | None:
    """Return ``report``'s check summary headed ``name`` (no commits line), for a repository
    with several configs (worker/report/multi.py): at most ``limit`` bytes of UTF-8, metric rows
    cut first; None when even no row fits. ``trend`` as in `check_summary`."""
    rows = _metric_rows(report.outcomes)
    return _largest(lambda k: render_template("summary.md.j2",
                                              **_common(report, rows, k, name, trend=trend),
                                              head="", base=""), len(rows), limit)


def comment_section(report: GateReport, name: str, limit: int, *,
                    local: bool = False, trend: Sequence[str] = ()) -> str | None:
    """Return ``report``'s comment content headed ``name``, without marker, commits line and
    footer, for a comment of several configs (worker/report/multi.py): at most ``limit``
    bytes of UTF-8, cut as `comment_body` cuts; None when even the shortest form is longer.
    ``local``: for ``llmgate run`` (a configuration error says to run it again, not to push);
    ``trend`` as in `check_summary`."""
    return _comment(report, "", None, None, marker=False, name=name, limit=limit, local=local,
                    trend=trend)


def annotations(report: GateReport) -> list[dict[str, Any]]:
    """Return check-run annotations: one per regression, per example of head that got no
    answer for a cause of the head, and per head-caused run error on the config line that
    set what failed; or one for a configuration error.

    Each is ``{"path", "start_line", "end_line", "annotation_level": "failure", "title",
    "message", "raw_details"}`` with a 1-based line, a title of at most 255 characters and a
    message of a few KB (outputs clipped to 500 characters), far under GitHub's 64 KB. Ordered by
    suite (config order), then line. GitHub takes at most 50 per request: the caller batches.
    """
    err = report.config_error
    if err is not None:
        return [{"path": err.path, "start_line": err.line or 1, "end_line": err.line or 1,
                 "annotation_level": "failure", "title": "llmgate: configuration error",
                 "message": clip(err.message, 4000)}]
    regressed = [{"path": r.dataset, "start_line": max(r.line, 1), "end_line": max(r.line, 1),
                  "annotation_level": "failure",
                  "title": clip(f"{r.suite}: example {r.example_id} regressed",
                                 ANNOTATION_TITLE_MAX_CHARS),
                  "message": (f"expected: {clip(as_text(r.expected), ANNOTATION_OUTPUT_CHARS)}\n"
                              f"actual: {clip(as_text(r.head_output), ANNOTATION_OUTPUT_CHARS)}\n"
                              f"{clip(r.reason, 2000)}"),
                  "raw_details": f"base output: {clip(as_text(r.base_output), 2000)}"}
                 for r in _ordered(report)]
    errored = [{"path": r.dataset, "start_line": max(r.line, 1), "end_line": max(r.line, 1),
                "annotation_level": "failure",
                "title": clip(f"{r.suite}: example {r.example_id} got no answer at head",
                               ANNOTATION_TITLE_MAX_CHARS),
                "message": clip(r.reason, 2000)} for r in _errored_only(report)]
    causes = [{"path": e.path, "start_line": e.line, "end_line": e.line,
               "annotation_level": "failure",
               "title": clip(f"llmgate: {e.suite}: the target's {e.field or 'endpoint'} "
                              "gets no answer", ANNOTATION_TITLE_MAX_CHARS),
               "message": clip(report_llm.error_line(e), 4000)}
              for e in report.errors if e.cause == "head" and e.line is not None]
    return [*causes, *regressed, *errored]


def comment_body(report: GateReport, *, head_sha: str, base_sha: str | None,
                 check_url: str | None = None, trend: Sequence[str] = ()) -> str:
    """Return the sticky PR comment (markdown, at most 65535 bytes of UTF-8).

    The first line is exactly `COMMENT_MARKER`, so the comment can be found and edited. Shows the
    verdict, the short head and base SHAs compared (base: the base run's commit when there is
    one, else ``base_sha``) and which baseline was used, the metric and paired-comparison
    tables, then one section per suite (worker/report/suites.py): verdict, examples paired,
    added and removed, model calls live and cached with USD, comparability, up to 20 examples
    that got worse (over all suites) with expected, base and head outputs side by side, and the
    ids added and removed, both collapsed. Ends with a link to ``check_url`` (http(s) only) and
    how to re-run. When it would exceed GitHub's limit, examples, then metric rows, then suite
    sections are left out (counted) and a note says the comment was shortened. ``trend``: the
    lines of worker/report/trend.py shown under the metric table (none by default).
    """
    return _comment(report, head_sha, base_sha, check_url, marker=True, trend=trend) or ""


def render_markdown(report: GateReport, head_sha: str = "", base_sha: str | None = None) -> str:
    """Return the comment's content for the CLI: no marker and no re-run footer."""
    if not head_sha and report.head is not None:
        head_sha = report.head.sha
    if base_sha is None and report.base is not None:
        base_sha = report.base.sha
    text = _comment(report, head_sha, base_sha, None, marker=False, local=True) or ""
    consistency = consistency_markdown(report)
    return f"{text}\n{consistency}" if consistency else text


def render_json(report: GateReport, head_sha: str = "", base_sha: str | None = None) -> str:
    """Return the report as a stable JSON document (sorted keys, 2-space indent).

    ``head_sha`` and ``base_sha`` (``llmgate run``'s commits) name the commits when the
    report's runs do not, e.g. after a configuration error at head.

    Keys: ``version`` (1), ``conclusion``, ``config_error`` (``{path, line, message}`` or null),
    ``notes``, ``outcomes``, ``regressions`` (ordered as `annotations`), ``head_sha``,
    ``base_sha`` (the base compared), ``base_source`` (which baseline, or null),
    ``metrics`` (suite -> ``{"base": {metric: value} | null, "head": ...}``),
    ``comparisons`` (the paired statistics, see `PairedComparison`), ``holm_tests``,
    ``headline`` (never empty: `headline_text`), ``why`` (`decision_sentence`: the rule that
    decided, its effect and interval, and the examples that would decide an inconclusive
    one), ``usage`` (model calls, tokens, USD, estimate per side:
    `worker.report.model_calls.usage_json`) and ``comparability`` (per suite: ``suite``, ``status``
    ``same``/``rescored``/``not_comparable``, ``scoring_changes``, ``output_changes``,
    ``reason``, ``spend``; see `SuiteComparability`), ``errors`` (the first call error of
    each kind per suite and side: ``side``, ``suite``, ``kind``, ``permanent``, ``cause``
    ``head``/``outside``/``limit``, ``count``, ``example_id``, ``message``, ``path``, ``line``,
    ``field``; see `RunError`) and ``errored`` (head's examples without an answer caused by
    the head, shaped as ``regressions``) and ``contract`` (per suite whose evaluation contract
    head changes: ``suite``, ``changes``, ``added``, ``removed``, and head's verdict under its
    own contract: ``conclusion``, ``headline``, ``metrics``, ``regressions``; see
    `ContractChange`), ``examples`` (suite -> ``{"base", "head"}``: every example's result
    at that side, `worker.report.examples_json.example_json`; docs/report-schema-v1.json),
    ``failing_at_head`` and ``fixed_at_head`` (the examples that fail at head, with their
    status and reason, and those head fixed: `worker.report.example_status.status_lists_json`).
    Non-finite numbers become null; values JSON cannot hold become strings.
    """
    err = report.config_error
    suites = [*(report.head.suites if report.head else {}),
              *(report.base.suites if report.base else {})]
    doc = {"version": 1, "conclusion": report.conclusion, "notes": list(report.notes),
           "config_error": None if err is None else
           {"path": err.path, "line": err.line, "message": err.message},
           "outcomes": [asdict(o) for o in report.outcomes],
           "regressions": [asdict(r) for r in _ordered(report)],
           "head_sha": report.head.sha if report.head else head_sha or None,
           "base_sha": _compared_base(report, base_sha) or None,
           "base_source": report.base_source,
           "comparability": [asdict(v) for v in report.comparability],
           "comparisons": [asdict(c) for c in report.comparisons],
           "holm_tests": report.holm_tests,
           "headline": headline_text(report), "why": decision_sentence(report),
           **status_lists_json(report),
           "usage": report_llm.usage_json(report),
           "errors": [asdict(e) for e in report.errors],
           "errored": [asdict(r) for r in report.errored],
           "contract": [asdict(c) for c in report.contract],
           "examples": examples_json(report),
           "metrics": {name: {"base": _suite_metrics(report.base, name),
                              "head": _suite_metrics(report.head, name)} for name in suites}}
    return json.dumps(_jsonable(doc), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _comment(report: GateReport, head_sha: str, base_sha: str | None, check_url: str | None,
             *, marker: bool, name: str = "", limit: int = COMMENT_MAX_BYTES,
             local: bool = False, trend: Sequence[str] = ()) -> str | None:
    """The comment, or with ``name`` a section of one (None when it cannot fit ``limit``);
    ``local``: for ``llmgate run``; ``trend``: the trend lines (worker/report/trend.py)."""
    rows = _metric_rows(report.outcomes)
    found = report_suites.sections(report, inline, cell)
    worse = sum(s.worse_total for s in found)
    url = check_url if check_url and re.match(r"https?://[^\s()<>]+$", check_url) else None
    base = _compared_base(report, base_sha)
    sections, shown = min(len(found), COMMENT_MAX_SECTIONS), min(worse, COMMENT_MAX_REGRESSIONS)

    def render(k_rows: int, k_worse: int, k_sections: int) -> str:
        clipped = k_rows < len(rows) or k_worse < shown or k_sections < sections
        return render_template("comment.md.j2",
                               **_common(report, rows, k_rows, name or "llmgate", local=local,
                                         trend=trend),
                               marker=COMMENT_MARKER if marker else "", rerun=RERUN_COMMAND,
                               head="" if name else short_sha(head_sha),
                               base=short_sha(base) if base and not name else "", check_url=url,
                               sections=report_suites.limit_worse(found[:k_sections], k_worse),
                               more_sections=len(found) - k_sections, clipped=clipped)

    full = _largest(lambda k: render(len(rows), k, sections), shown, limit)
    if full is not None:
        return full
    def with_items(items: int) -> Callable[[int], str]:
        return lambda k: render(k, items, sections)

    for items in dict.fromkeys((min(shown, COMMENT_MIN_REGRESSIONS), 0)):  # then fewer rows
        k_rows = _best(with_items(items), len(rows), limit)
        if k_rows is not None:
            return render(k_rows, items, sections)
    if name:
        return _largest(lambda k: render(0, 0, k), sections, limit)
    return _fit_rows(lambda k: render(0, 0, k), sections, limit)


def _compared_base(report: GateReport, given: str | None) -> str:
    """The base commit compared: the one the report names, its base run's, else ``given``."""
    if report.base_sha:
        return report.base_sha
    if report.base is not None and report.base.sha:
        return report.base.sha
    return given or ""


def _common(report: GateReport, rows: list[_Row], k: int,
            name: str = "llmgate", *, local: bool = False,
            trend: Sequence[str] = ()) -> dict[str, Any]:
    icon, verdict = VERDICT[report.conclusion]
    verdict = "configuration error" if report.config_error is not None else verdict
    why = [inline(f"{o.suite} {_scoped(o.metric, o.group)}: {o.rule}: {o.reason}", 600)
           for o in report.outcomes if o.status != "pass" and o.reason]
    stat_rows = report_stats.comparison_rows(report, inline)
    decision = decision_sentence(report)
    said = bool(report.headline) and decision == report.headline.rstrip(".") + "."
    return {"icon": icon, "verdict": verdict, "rows": rows[:k], "more_rows": len(rows) - k,
            "name": inline(name, 200),
            "config_error": _config_error_block(report, local=local), "why": why[:50],
            "regression_count": len(report.regressions),
            "notes": [inline(n, 600) for n in report.notes[:50] if n != report.base_source],
            "base_source": inline(report.base_source, 600) if report.base_source else "",
            "comparability": report_suites.comparability_lines(report, inline),
            "contract": [inline(contract_line(c), 1200) for c in report.contract[:50]],
            "stat_rows": stat_rows[:report_stats.MAX_ROWS],
            "more_stat_rows": max(len(stat_rows) - report_stats.MAX_ROWS, 0),
            "headline": inline(report.headline, 600) if report.headline and not said else "",
            "run_lines": report_llm.run_lines(report, inline),
            "method": report_stats.method_notes(report),
            "decision": inline(decision, 600), "trend": list(trend)}


def _metric_rows(outcomes: Iterable[RuleOutcome]) -> list[_Row]:
    groups: dict[tuple[str, str], list[RuleOutcome]] = {}
    for outcome in outcomes:
        groups.setdefault((outcome.suite, _scoped(outcome.metric, outcome.group)),
                          []).append(outcome)
    order = _STATUS_ORDER
    return [(inline(suite, 100), inline(metric, 100),
             _num(next((o.base for o in group if o.base is not None), None)),
             _num(next((o.head for o in group if o.head is not None), None)),
             _delta(next((o.delta for o in group if o.delta is not None), None)),
             inline("; ".join(o.rule for o in group), 200),
             _STATUS[min((o.status for o in group), key=order.index)])
            for (suite, metric), group in groups.items()]


def _scoped(metric: str, group: str) -> str:
    return f"{metric} [{group}]" if group else metric


def _detail_item(r: Regression) -> dict[str, str]:
    return {"title": inline(f"{r.suite}: example {r.example_id}", 200),
            "where": inline(f"{r.dataset}:{r.line}", 300), "reason": inline(r.reason, 1000),
            "expected": fenced(r.expected, 2000), "base": fenced(r.base_output, 2000),
            "head": fenced(r.head_output, 2000)}


def _config_error_block(report: GateReport, *, local: bool = False) -> str:
    err = report.config_error
    if err is None:
        return ""
    where = err.path if err.line is None else f"{err.path}:{err.line}"
    return (f"**Configuration error** in {inline(where, 300)}\n\n"
            f"{fenced(f'{where}: {err.message}', 4000)}\n\n"
            + ("Fix the file and run `llmgate run` again." if local else
               "Fix the file in this pull request and push; llmgate runs again on the new "
               "commit."))


def _errored_only(report: GateReport) -> list[Regression]:
    """Head's examples without an answer (caused by the head) not listed as regressions."""
    listed = {(r.suite, r.example_id) for r in report.regressions}
    return [r for r in report.errored if (r.suite, r.example_id) not in listed]


def _ordered(report: GateReport) -> list[Regression]:
    suites = [*(report.head.suites if report.head else {}), *(o.suite for o in report.outcomes),
              *(r.suite for r in report.regressions)]
    rank = {name: i for i, name in reversed(list(enumerate(suites)))}
    return sorted(report.regressions, key=lambda r: (rank[r.suite], r.line, r.example_id))


def _suite_metrics(run: RunResult | None, name: str) -> dict[str, float] | None:
    suite = run.suites.get(name) if run is not None else None
    return dict(suite.metrics) if suite is not None else None


def _largest(render: Callable[[int], str], count: int, limit: int) -> str | None:
    """Return render(k) for the largest k <= count within limit, or None if even k=0 is over."""
    k = _best(render, count, limit)
    return None if k is None else render(k)


def _best(render: Callable[[int], str], count: int, limit: int) -> int | None:
    """Return the largest k <= count whose render(k) takes at most ``limit`` bytes of UTF-8
    (binary search), or None."""
    if utf8_size(render(count)) <= limit:
        return count
    best, low, high = None, 0, count - 1
    while low <= high:
        mid = (low + high) // 2
        if utf8_size(render(mid)) <= limit:
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best


def _fit_rows(render: Callable[[int], str], count: int, limit: int) -> str:
    """render(k) for the most rows within ``limit`` bytes, else render(0) cut to ``limit``."""
    return _largest(render, count, limit) or clip_bytes(render(0), max(limit, 3))


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" if math.isfinite(value) else "n/a"


def _delta(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" if math.isfinite(value) else "n/a"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)
