"""Render a `MultiReport` (several configs) for GitHub and the CLI (pure, like
worker/report/render.py).

A single root config renders exactly as worker/report/render.py renders its report. With configs in
folders:

- the sticky comment (and ``llmgate run``'s markdown) starts with the overall verdict, the
  commits and one table row per config (its path, its check run in ``per_config`` mode, its
  verdict and headline numbers), then one section per config: that config's own comment
  (metric table, paired statistics, findings, suites), headed by its path;
- ``combined``: the ``llmgate`` check run's summary has the same table and one summary
  section per config, its text every config's regressed examples, and its annotations those
  of every config (on repository paths);
- ``per_config``: each config in a folder has its own check run ``llmgate: <folder>``
  (`config_output`, its own annotations); the ``llmgate`` check run keeps the table, the root
  config's section and annotations, and the worst conclusion, so branch protection that
  requires ``llmgate`` still guards every config.

Everything fits GitHub's limits (65535 bytes of UTF-8 of summary, text and comment: every
budget here is in bytes, `worker.github.limits`): when the
sections do not fit at full length, each gets a fair share of what is left (small sections
keep their full length, large ones are cut as worker/report/render.py cuts them), and a section that
does not fit even in its shortest form says to see its check run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from worker.contract import COMMENT_MARKER, RERUN_COMMAND
from worker.github import CheckOutput, utf8_size
from worker.pipeline import SEVERITY, ConfigReport, MultiReport
from worker.report import render as report
from worker.report.consistency import consistency_markdown
from worker.report.markdown import VERDICT, clip, inline, render_template, short_sha
from worker.report.render import CHECK_OUTPUT_MAX_BYTES, COMMENT_MAX_BYTES, TITLE_MAX_CHARS
from worker.report.trend import TrendData, trend_lines

#: Between two config sections.
SEPARATOR = "\n\n---\n\n"
#: Bytes kept free per section for its "see the check run" line when it does not fit.
SECTION_RESERVE_BYTES = 300
#: Bytes of the footer (re-run hint) kept free in a comment.
FOOTER_BYTES = 200


def check_output(multi: MultiReport, head_sha: str,
                 trends: TrendData | None = None) -> CheckOutput:
    """Return the ``llmgate`` check run's output (title, summary, text); ``trends``: the
    default branch's history of the gated metrics, one line each in the summary
    (worker/report/trend.py; none by default)."""
    merged = multi.merged()
    if not multi.several:
        return CheckOutput(report.check_title(merged),
                           report.check_summary(merged, trend_lines(merged, trends)),
                           report.check_text(merged))
    shown = _in_aggregate(multi)
    frame = _frame(multi, head=short_sha(head_sha), base=_base(multi, None), marker="",
                   elsewhere=True)
    sections = _fit(lambda c, k: report.summary_section(
        c.report, c.path, k, trend_lines(c.report, trends, c.folder)), shown,
                    CHECK_OUTPUT_MAX_BYTES - utf8_size(frame))
    return CheckOutput(title(multi), _join(frame, sections), _details(shown))


def check_annotations(multi: MultiReport) -> list[dict[str, Any]]:
    """Return the ``llmgate`` check run's annotations: every config's (combined) or the root
    config's (per_config), paths repository-relative, config order."""
    if not multi.several:
        return report.annotations(multi.merged())
    return [a for c in _in_aggregate(multi) for a in report.annotations(c.report)]


def separate_checks(multi: MultiReport) -> tuple[ConfigReport, ...]:
    """Return the configs that get a check run of their own (``per_config``: those in
    folders)."""
    if multi.checks != "per_config":
        return ()
    return tuple(c for c in multi.configs if c.folder)


def config_output(config: ConfigReport) -> CheckOutput:
    """Return the output of a config's own check run (``per_config``)."""
    return CheckOutput(report.check_title(config.report), report.check_summary(config.report),
                       report.check_text(config.report))


def title(multi: MultiReport) -> str:
    """Return the combined check title: the verdict, then each config's, worst first.

    E.g. ``llmgate: fail - services/a fail, 1 regression; services/b pass``.
    """
    ranked = sorted(multi.configs, key=lambda c: _rank(c.report.conclusion))
    parts = [f"{c.folder or 'root'} {VERDICT[c.report.conclusion][1]}" + (
        f", {_plural(len(c.report.regressions), 'regression')}" if c.report.regressions else "")
        for c in ranked]
    text = f"llmgate: {VERDICT[multi.conclusion][1]} - {'; '.join(parts)}"
    return clip(" ".join(text.split()), TITLE_MAX_CHARS)


def comment_body(multi: MultiReport, *, head_sha: str, base_sha: str | None,
                 trends: TrendData | None = None) -> str:
    """Return the sticky comment (markdown, at most 65535 bytes of UTF-8; first line the
    marker); ``trends`` as in `check_output`."""
    if not multi.several:
        merged = multi.merged()
        return report.comment_body(merged, head_sha=head_sha, base_sha=base_sha,
                                   trend=trend_lines(merged, trends))
    return _comment(multi, head_sha, base_sha, marker=True, trends=trends)


def render_markdown(multi: MultiReport, head_sha: str = "", base_sha: str | None = None) -> str:
    """Return the comment's content for ``llmgate run``: no marker and no re-run footer."""
    if not multi.several:
        return report.render_markdown(multi.merged(), head_sha, base_sha)
    text = _comment(multi, head_sha, base_sha, marker=False)
    extra = "\n".join(part for part in (consistency_markdown(c.report) for c in multi.configs)
                      if part)
    return f"{text}\n{extra}" if extra else text


def render_json(multi: MultiReport, head_sha: str = "", base_sha: str | None = None) -> str:
    """Return ``llmgate run --format json``'s document (``head_sha``, ``base_sha``: the
    commits compared, for reports whose runs do not name them: `worker.report.render.render_json`).

    A single root config gives `worker.report.render.render_json`'s document. Several give
    ``{"version": 1, "conclusion", "checks", "notes", "configs": [{"path", "folder",
    "report"}]}``, each ``report`` that document for one config (sorted keys, 2-space indent).
    """
    if not multi.several:
        return report.render_json(multi.merged(), head_sha, base_sha)
    doc = {"version": 1, "conclusion": multi.conclusion, "checks": multi.checks,
           "notes": list(multi.notes),
           "configs": [{"path": c.path, "folder": c.folder,
                        "report": json.loads(report.render_json(c.report, head_sha,
                                                                base_sha))}
                       for c in multi.configs]}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _comment(multi: MultiReport, head_sha: str, base_sha: str | None, *, marker: bool,
             trends: TrendData | None = None) -> str:
    head = short_sha(head_sha or _head_sha(multi))
    frame = _frame(multi, head=head, base=_base(multi, base_sha),
                   marker=COMMENT_MARKER if marker else "", elsewhere=False)
    footer = f"\n\n---\n<sub>Comment `{RERUN_COMMAND}` to run again.</sub>\n" if marker else ""
    sections = _fit(lambda c, k: report.comment_section(
        c.report, c.path, k, local=not marker, trend=trend_lines(c.report, trends, c.folder)),
                    multi.configs,
                    COMMENT_MAX_BYTES - utf8_size(frame) - max(utf8_size(footer), FOOTER_BYTES))
    return _join(frame, sections).rstrip("\n") + (footer or "\n")


def _frame(multi: MultiReport, *, head: str, base: str, marker: str, elsewhere: bool) -> str:
    """The verdict, commits, table of configs and notes (and, in the check run, where the
    configs with their own check run report)."""
    icon, verdict = VERDICT[multi.conclusion]
    per_config = multi.checks == "per_config"
    rows = [{"path": inline(c.path, 200), "check": inline(c.check_name, 220),
             "result": inline(_result(c), 300)} for c in multi.configs]
    others = ", ".join(f"`{inline(c.check_name, 220)}`" for c in separate_checks(multi))
    return render_template("multi.md.j2", marker=marker, icon=icon, verdict=verdict, head=head,
                           base=base, per_config=per_config, rows=rows,
                           notes=[inline(n, 600) for n in multi.notes[:50]],
                           elsewhere=others if elsewhere else "")


def _result(config: ConfigReport) -> str:
    icon = VERDICT[config.report.conclusion][0]
    return f"{icon} {report.check_title(config.report).removeprefix('llmgate: ')}"


def _in_aggregate(multi: MultiReport) -> tuple[ConfigReport, ...]:
    """The configs whose sections and annotations the ``llmgate`` check run carries."""
    own = {c.folder for c in separate_checks(multi)}
    return tuple(c for c in multi.configs if c.folder not in own)


def _details(configs: Sequence[ConfigReport]) -> str:
    """Every config's regressed examples, headed by its path, within GitHub's limit."""
    def render(config: ConfigReport, limit: int) -> str | None:
        head = f"## {inline(config.path, 200)}\n\n"
        return head + report.check_text(config.report, max(limit - utf8_size(head), 1)) \
            if limit > utf8_size(head) + 100 else None

    if not configs:
        return ""
    return _join("", _fit(render, configs, CHECK_OUTPUT_MAX_BYTES)).strip("\n") + "\n"


def _fit(render: Callable[[ConfigReport, int], str | None], configs: Sequence[ConfigReport],
         budget: int) -> list[str]:
    """Render each config's section within ``budget`` bytes of UTF-8 in all (module docstring).

    ``render(config, limit)`` returns the section in at most ``limit`` bytes, or None.
    """
    budget -= len(configs) * (len(SEPARATOR) + SECTION_RESERVE_BYTES)
    full = [render(c, budget) for c in configs]
    out = [""] * len(configs)
    remaining = budget
    sizes = [utf8_size(text) if text is not None else budget + 1 for text in full]
    for pos, i in enumerate(sorted(range(len(configs)), key=sizes.__getitem__)):
        share = max(remaining // (len(configs) - pos), 0)
        text = full[i] if sizes[i] <= share else render(configs[i], share) if share else None
        out[i] = text if text is not None else _too_long(configs[i])
        remaining -= utf8_size(text) if text is not None else 0
    return out


def _too_long(config: ConfigReport) -> str:
    icon, verdict = VERDICT[config.report.conclusion]
    return (f"### {icon} {inline(config.path, 200)}: {verdict}\n\nThis section does not fit "
            f"here: see the check run `{inline(config.check_name, 220)}`.\n")


def _join(frame: str, sections: list[str]) -> str:
    body = SEPARATOR.join(s.strip("\n") for s in sections)
    if not frame or not body:
        return (frame or body).rstrip("\n") + "\n"
    return f"{frame.rstrip()}{SEPARATOR}{body}\n"


def _base(multi: MultiReport, given: str | None) -> str:
    """The base commit compared, shortened (the first config's that names one, else
    ``given``); "" for none."""
    for config in multi.configs:
        found = config.report.base_sha or (config.report.base.sha if config.report.base else "")
        if found:
            return short_sha(found)
    return short_sha(given) if given else ""


def _head_sha(multi: MultiReport) -> str:
    return next((c.report.head.sha for c in multi.configs if c.report.head is not None), "")


def _rank(conclusion: str) -> int:
    return SEVERITY.index(conclusion) if conclusion in SEVERITY else len(SEVERITY)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
