"""``llmgate action``: the GitHub Action's step (deploy/github-action/action.yml).

Inside a GitHub Actions job of a ``pull_request`` event (``GITHUB_ACTIONS=true``), read the
event (``GITHUB_EVENT_PATH``: ``pull_request.base.sha``, ``pull_request.head.sha``), gate the
head as the App and ``llmgate run --base`` do (a head behind the base merged into it, against
the base; a conflicting head against the merge base), then:

- append the job summary to ``GITHUB_STEP_SUMMARY``: the verdict, then the Why sentence (the
  decision in one sentence), the pass rates and the regressions;
- write the JSON, JUnit and HTML reports to ``RUNNER_TEMP`` and set the step's outputs in
  ``GITHUB_OUTPUT`` (``conclusion``, ``exit-code``, ``why`` and the reports' paths:
  `worker.cli.action_outputs`), which the Action declares as its own;
- print one ``::error`` workflow command per regressed example on its dataset line, and one on
  the ``.llmgate.yml`` line of a configuration error (GitHub shows them on the PR's diff);
- with ``--comment``, post the App's sticky comment on the pull request with the token in
  ``LLMGATE_GITHUB_TOKEN`` (`worker.cli.action_comment`; edited in place on re-runs); a post
  GitHub refuses (403 for a fork's read-only token) or that cannot reach GitHub is one
  ``::warning`` line and one line of the job summary, never another exit code;
- exit as ``llmgate run`` does (0 pass, 1 failed, 2 configuration error, 3 execution error,
  4 undecided).

``LLMGATE_GITHUB_TOKEN`` is removed from the environment before anything runs, whether or not
``--comment`` is given, so no target command or custom metric started by the run inherits it
(targets get a scrubbed environment anyway: `worker.security.process.build_env`).

Workflow commands: docs.github.com "Workflow commands for GitHub Actions" (``::error file=,
line=::message``, with ``%``, ``\\r``, ``\\n`` escaped as ``%25``, ``%0D``, ``%0A`` and, in
properties, ``:`` and ``,`` as ``%3A`` and ``%2C``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from worker.cli.action_comment import DEFAULT_COMMENT_AUTHOR, TOKEN_ENV
from worker.cli.baseline import add_store_option

#: Most regressions listed in the job summary (the ``::error`` lines are at most
#: worker/report/github_actions.py's `MAX_ANNOTATIONS`, what GitHub shows per step).
MAX_ANNOTATIONS = 50

#: The whole command line (worker/cli/main.py `main`): arguments -> exit code. Passed in by
#: main.py, which imports this module, so this module does not import it back.
RunCli = Callable[[Sequence[str]], int]


def add_action_command(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                       run_cli: RunCli) -> None:
    """Add ``llmgate action`` (the GitHub Action's step), which gates by calling ``run_cli``
    with ``llmgate run``'s arguments."""
    action = sub.add_parser("action", help="the GitHub Action's step (a pull_request job)",
                            description="Gate the pull request of GITHUB_EVENT_PATH as the "
                                        "App does (merged into its base when behind it), "
                                        "write the job summary and the annotations. Exit "
                                        "codes as `llmgate run`.")
    add_store_option(action)
    action.add_argument("--allow-undecided", action="store_true",
                        help="exit 0, not 4, when the gate could not decide")
    action.add_argument("--comment", action="store_true",
                        help=f"also post the App's sticky comment on the pull request with the "
                             f"token in ${TOKEN_ENV}, edited in place on re-runs; a refused "
                             f"post is a warning and leaves the exit code alone")
    action.add_argument("--comment-author", default=DEFAULT_COMMENT_AUTHOR, metavar="LOGIN",
                        help="the bot the token comments as, whose comment is edited (default "
                             f"{DEFAULT_COMMENT_AUTHOR}; a GitHub App's token: SLUG[bot])")
    action.set_defaults(func=partial(cmd_action, run_cli=run_cli))


def escape(text: str, *, prop: bool = False) -> str:
    """Escape ``text`` for a workflow command's message (or, ``prop``, a property), as
    ``--format github`` does (worker/report/github_actions.py)."""
    from worker.report import escape_data, escape_property

    return escape_property(text) if prop else escape_data(text)


def workflow_annotations(report: Mapping[str, Any]) -> list[str]:
    """Return the ``::error`` lines of a JSON report (``llmgate run --format json``; pure): the
    configuration error, then at most ``--format github``'s `MAX_ANNOTATIONS` regressions (what
    GitHub shows per step) and a ``::notice`` saying how many more the job summary lists."""
    from worker.report import MAX_ANNOTATIONS as SHOWN

    lines = []
    error = report.get("config_error")
    if error:
        where = f"file={escape(str(error['path']), prop=True)}" + (
            f",line={int(error['line'])}" if error.get("line") else "")
        lines.append(f"::error {where},title=llmgate configuration error::"
                     f"{escape(str(error['message']))}")
    regressions = report.get("regressions", [])
    for reg in regressions[:SHOWN]:
        title = escape(f"llmgate: {reg['suite']}", prop=True)
        lines.append(f"::error file={escape(str(reg['dataset']), prop=True)},"
                     f"line={int(reg['line'])},title={title}"
                     f"::{escape(str(reg['example_id']) + ': ' + str(reg['reason']))}")
    if len(regressions) > SHOWN:
        lines.append(f"::notice title=llmgate::{len(regressions) - SHOWN} more findings: see "
                     "the job summary")
    return lines


@dataclass(frozen=True)
class PullEvent:
    """The pull request of a ``pull_request`` event: base and head SHAs and its number."""

    base_sha: str
    head_sha: str
    number: int


def _event(environ: Mapping[str, str]) -> PullEvent:
    """Return the event's pull request.

    Raises:
        ValueError: not in GitHub Actions, no event file, or not a pull_request event.
    """
    if environ.get("GITHUB_ACTIONS") != "true":
        raise ValueError("llmgate action runs in GitHub Actions (GITHUB_ACTIONS=true)")
    path = environ.get("GITHUB_EVENT_PATH", "")
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
        pull = event["pull_request"]
        return PullEvent(str(pull["base"]["sha"]), str(pull["head"]["sha"]),
                         int(pull.get("number") or 0))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"GITHUB_EVENT_PATH ({path or 'unset'}) holds no pull_request "
                         f"event: {err}") from None


def cmd_action(args: argparse.Namespace, *, run_cli: RunCli) -> int:
    """Gate the event's pull request with ``run_cli`` (``llmgate run``), write the summary and
    annotations and, with ``--comment``, post the sticky comment (module doc); return
    ``llmgate run``'s exit code."""
    token = os.environ.pop(TOKEN_ENV, "")  # before anything runs: nothing started inherits it
    try:
        pull = _event(os.environ)
    except ValueError as err:
        print(f"llmgate: {err}", file=sys.stderr)
        _outputs(3, None, {}, why=str(err))
        return 3
    workdir = Path(os.environ.get("RUNNER_TEMP") or ".")
    paths = {"report-json": workdir / "llmgate-report.json",
             "report-junit": workdir / "llmgate-junit.xml",
             "report-html": workdir / "llmgate-report.html"}
    comment_path = workdir / "llmgate-comment.md"
    if args.comment:
        paths["report-comment"] = comment_path
    for stale in (*paths.values(), comment_path):  # an earlier step's must not be taken for ours
        stale.unlink(missing_ok=True)
    store = ["--baseline-store", args.baseline_store] if args.baseline_store else []
    undecided = ["--allow-undecided"] if args.allow_undecided else []
    comment = ["--format", f"comment:{comment_path}"] if args.comment else []
    code = run_cli(["run", "--base", pull.base_sha, "--head", pull.head_sha, "--format", "json",
                    "--output", str(paths["report-json"]),
                    "--format", f"junit:{paths['report-junit']}",
                    "--format", f"html:{paths['report-html']}", *comment, *store, *undecided])
    try:
        report = json.loads(paths["report-json"].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        # the run failed before a report: its one line is on stderr
        _outputs(code, None, paths, why=f"llmgate stopped before a report (exit code {code}): "
                                        "see the step's log")
        return code
    for line in workflow_annotations(report):
        print(line)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(summary_markdown(report) + "\n")
    if args.comment:
        _comment(pull.number, args.comment_author, token, comment_path, summary)
    _outputs(code, report, paths)
    return code


def _outputs(code: int, report: Mapping[str, Any] | None, paths: Mapping[str, Path], *,
             why: str = "") -> None:
    """Set the step's outputs (`worker.cli.action_outputs`) when ``GITHUB_OUTPUT`` is set; a
    file that cannot be written is a ``::warning``, never another exit code."""
    from worker.cli.action_outputs import why_text, write_outputs

    target = os.environ.get("GITHUB_OUTPUT")
    if not target:
        return
    values = {"conclusion": str(report.get("conclusion") or "") if report else "",
              "exit-code": str(code), "why": why_text(report) if report else why,
              **{name: str(path) for name, path in paths.items() if path.is_file()}}
    try:
        write_outputs(target, values)
    except OSError as err:
        print(f"::warning title=llmgate outputs::cannot write GITHUB_OUTPUT: "
              f"{escape(str(err))}")


def _comment(number: int, author: str, token: str, body_path: Path,
             summary: str | None) -> None:
    """Post the comment at ``body_path``; say why not as a ``::warning`` and in the summary."""
    from worker.cli.action_comment import comment_target, post_comment
    from worker.report import inline

    try:
        target = comment_target(os.environ, number, author)
        body = body_path.read_text(encoding="utf-8")
    except (ValueError, OSError) as err:
        why = str(err)
    else:
        comment_id, why = post_comment(target, token, body)
        if comment_id is not None:
            print(f"llmgate: pull request #{number}'s comment is up to date (comment "
                  f"{comment_id})", file=sys.stderr)
            return
    print(f"::warning title=llmgate comment::the pull request comment was not posted: "
          f"{escape(why)}")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(f"\n> :warning: llmgate could not post its pull request comment: "
                      f"{inline(why, 500)}\n")


def summary_markdown(report: Mapping[str, Any]) -> str:
    """Return the job summary of a JSON report: the verdict, the Why sentence (one line per
    config with several), the headline when it says more, the configuration error, the pass
    rates per suite and the regressions."""
    from worker.cli.action_outputs import why_text
    from worker.report import inline

    lines = [f"### llmgate: {report.get('conclusion')}", ""]
    why = why_text(report)
    lines += [f"**Why:** {inline(line, 600)}" for line in why.splitlines() or [""]] + [""]
    singles = [(f"{c.get('path')}: ", c.get("report") or {}) for c in report["configs"]] \
        if isinstance(report.get("configs"), list) else [("", report)]
    for prefix, single in singles:
        headline = str(single.get("headline") or "")
        if headline and headline.rstrip(".") != str(single.get("why") or "").rstrip("."):
            lines += [inline(prefix + headline, 600), ""]
    lines += _config_errors(singles)
    lines += ["| suite | base pass rate | head pass rate |", "| --- | ---: | ---: |"]
    for prefix, single in singles:
        for suite, sides in sorted(single.get("metrics", {}).items()):
            base = (sides.get("base") or {}).get("pass_rate")
            head = (sides.get("head") or {}).get("pass_rate")
            lines.append(f"| {inline(prefix + suite, 80)} | {_rate(base)} | {_rate(head)} |")
    regressions = [reg for _, single in singles for reg in single.get("regressions", [])]
    for reg in regressions[:MAX_ANNOTATIONS]:
        lines.append(f"- `{_safe(str(reg['dataset']))}:{reg['line']}` "
                     f"{inline(reg['example_id'], 80)}: {inline(reg['reason'], 300)}")
    return "\n".join(lines)


def _config_errors(singles: list[tuple[str, Mapping[str, Any]]]) -> list[str]:
    from worker.report import inline

    lines = []
    for _, single in singles:
        error = single.get("config_error")
        if error:
            lines += [f"Configuration error in `{_safe(str(error['path']))}` line "
                      f"{error.get('line')}: {inline(error['message'], 500)}", ""]
    return lines


def _safe(text: str) -> str:
    from worker.report import safe

    return safe(text)


def _rate(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "-"
