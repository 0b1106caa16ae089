"""``llmgate action``: the GitHub Action's step (deploy/github-action/action.yml).

Inside a GitHub Actions job of a ``pull_request`` event (``GITHUB_ACTIONS=true``), read the
event (``GITHUB_EVENT_PATH``: ``pull_request.base.sha``, ``pull_request.head.sha``), gate the
head against the merge base of base and head (as the App and ``llmgate run --base`` do), then:

- append the markdown report to ``GITHUB_STEP_SUMMARY`` (the job summary);
- print one ``::error`` workflow command per regressed example on its dataset line, and one on
  the ``.llmgate.yml`` line of a configuration error (GitHub shows them on the PR's diff);
- exit as ``llmgate run`` does (0 pass, 1 failed, 2 configuration error, 3 execution error,
  4 undecided).

Workflow commands: docs.github.com "Workflow commands for GitHub Actions" (``::error file=,
line=::message``, with ``%``, ``\\r``, ``\\n`` escaped as ``%25``, ``%0D``, ``%0A`` and, in
properties, ``:`` and ``,`` as ``%3A`` and ``%2C``). Not done: posting the App's sticky
comment with the workflow's token.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worker.cli.baseline import add_store_option

#: Most ``::error`` annotations printed (GitHub shows at most 10 errors per step anyway).
MAX_ANNOTATIONS = 50


def add_action_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``llmgate action`` (the GitHub Action's step)."""
    action = sub.add_parser("action", help="the GitHub Action's step (a pull_request job)",
                            description="Gate the pull request of GITHUB_EVENT_PATH against "
                                        "its merge base, write the job summary and the "
                                        "annotations. Exit codes as `llmgate run`.")
    add_store_option(action)
    action.add_argument("--allow-undecided", action="store_true",
                        help="exit 0, not 4, when the gate could not decide")
    action.set_defaults(func=cmd_action)


def escape(text: str, *, prop: bool = False) -> str:
    """Escape ``text`` for a workflow command's message (or, ``prop``, a property)."""
    out = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return out.replace(":", "%3A").replace(",", "%2C") if prop else out


def workflow_annotations(report: Mapping[str, Any]) -> list[str]:
    """Return the ``::error`` lines of a JSON report (``llmgate run --format json``; pure)."""
    lines = []
    error = report.get("config_error")
    if error:
        where = f"file={escape(str(error['path']), prop=True)}" + (
            f",line={int(error['line'])}" if error.get("line") else "")
        lines.append(f"::error {where},title=llmgate configuration error::"
                     f"{escape(str(error['message']))}")
    for reg in report.get("regressions", [])[:MAX_ANNOTATIONS]:
        title = escape(f"llmgate: {reg['suite']}", prop=True)
        lines.append(f"::error file={escape(str(reg['dataset']), prop=True)},"
                     f"line={int(reg['line'])},title={title}"
                     f"::{escape(str(reg['example_id']) + ': ' + str(reg['reason']))}")
    return lines


def _event(environ: Mapping[str, str]) -> tuple[str, str]:
    """Return (base SHA, head SHA) of the event's pull request.

    Raises:
        ValueError: not in GitHub Actions, no event file, or not a pull_request event.
    """
    if environ.get("GITHUB_ACTIONS") != "true":
        raise ValueError("llmgate action runs in GitHub Actions (GITHUB_ACTIONS=true)")
    path = environ.get("GITHUB_EVENT_PATH", "")
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
        pull = event["pull_request"]
        return str(pull["base"]["sha"]), str(pull["head"]["sha"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"GITHUB_EVENT_PATH ({path or 'unset'}) holds no pull_request "
                         f"event: {err}") from None


def cmd_action(args: argparse.Namespace) -> int:
    """Gate the event's pull request and write the summary and annotations (module doc)."""
    from worker.cli.main import main

    try:
        base, head = _event(os.environ)
    except ValueError as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return 3
    workdir = Path(os.environ.get("RUNNER_TEMP") or ".")
    report_path = workdir / "llmgate-report.json"
    store = ["--baseline-store", args.baseline_store] if args.baseline_store else []
    undecided = ["--allow-undecided"] if args.allow_undecided else []
    code = main(["run", "--base", base, "--head", head, "--format", "json",
                 "--output", str(report_path), *store, *undecided])
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return code  # the run failed before a report: its one line is on stderr
    for line in workflow_annotations(report):
        print(line)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(summary_markdown(report) + "\n")
    return code


def summary_markdown(report: Mapping[str, Any]) -> str:
    """Return the job summary of a JSON report: verdict, metrics per suite, regressions."""
    from worker.report.markdown import inline, safe

    lines = [f"### llmgate: {report.get('conclusion')}", ""]
    if report.get("headline"):
        lines += [inline(report["headline"], 500), ""]
    if report.get("config_error"):
        error = report["config_error"]
        lines += [f"Configuration error in `{safe(str(error['path']))}` line "
                  f"{error.get('line')}: {inline(error['message'], 500)}", ""]
    lines += ["| suite | base pass rate | head pass rate |", "| --- | ---: | ---: |"]
    for suite, sides in sorted(report.get("metrics", {}).items()):
        base = (sides.get("base") or {}).get("pass_rate")
        head = (sides.get("head") or {}).get("pass_rate")
        lines.append(f"| {inline(suite, 80)} | {_rate(base)} | {_rate(head)} |")
    for reg in report.get("regressions", [])[:MAX_ANNOTATIONS]:
        lines.append(f"- `{safe(str(reg['dataset']))}:{reg['line']}` "
                     f"{inline(reg['example_id'], 80)}: {inline(reg['reason'], 300)}")
    return "\n".join(lines)


def _rate(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "-"
