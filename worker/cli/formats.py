"""``llmgate run --format``: which reports to write, and where (several at once).

``--format NAME`` writes that report to ``--output`` (or stdout); ``--format NAME:PATH`` to
PATH; the option repeats (``--format junit:report.xml --format html:report.html``). With no
``--format``, the report goes to ``--output`` as markdown, or to stdout: plain text on a
terminal (worker/report/terminal.py), markdown when stdout is a file or a pipe. ``github``
takes no path: it prints workflow commands and appends the job summary to
``$GITHUB_STEP_SUMMARY``, and only inside GitHub Actions (``GITHUB_ACTIONS=true``).
``comment`` is the App's sticky pull request comment, byte for byte what the App posts for
the same report (`worker.report.multi.comment_body`: the hidden marker line first, the re-run
footer last); ``llmgate action --comment`` posts it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.pipeline import MultiReport

#: Every report ``--format`` names.
FORMATS = ("markdown", "json", "junit", "sarif", "html", "github", "comment")


@dataclass(frozen=True)
class FormatSpec:
    """One ``--format`` value.

    Attributes:
        name: one of `FORMATS`.
        path: where to write it; None for ``--output`` or stdout.
    """

    name: str
    path: Path | None = None


def parse_format(value: str) -> FormatSpec:
    """Parse ``NAME`` or ``NAME:PATH`` (argparse ``type``).

    Raises:
        argparse.ArgumentTypeError: an unknown name, an empty path, or a path for ``github``.
    """
    name, colon, path = value.partition(":")
    if name not in FORMATS:
        raise argparse.ArgumentTypeError(f"unknown format {name!r}: choose from "
                                         f"{', '.join(FORMATS)} (NAME or NAME:PATH)")
    if colon and not path:
        raise argparse.ArgumentTypeError(f"{value!r}: the path after ':' is empty")
    if name == "github" and colon:
        raise argparse.ArgumentTypeError("github takes no path: it prints workflow commands "
                                         "and appends to $GITHUB_STEP_SUMMARY")
    return FormatSpec(name, Path(path) if colon else None)


def format_paths(specs: Sequence[FormatSpec] | None, output: Path | None) -> list[Path]:
    """Return every file the reports will be written to (to check before anything runs)."""
    paths = [s.path for s in specs or () if s.path is not None]
    return [*paths, output] if output is not None else paths


def format_refusal(specs: Sequence[FormatSpec] | None, output: Path | None = None) -> str | None:
    """Return why ``specs`` cannot all be written (one line), or None.

    Two reports to the same place (``--output``/stdout, or one file, also through a symbolic
    link) would overwrite each other; ``--output`` always receives a report (a format without
    a path, or the default one), so no ``--format NAME:PATH`` may name it either.
    """
    bare = [s.name for s in specs or () if s.path is None and s.name != "github"]
    if len(bare) > 1:
        return (f"--format {' and '.join(bare)} would both go to --output/stdout: give all but "
                "one a path (NAME:PATH)")
    paths = [s.path.resolve() for s in specs or () if s.path is not None]
    if len(set(paths)) < len(paths):
        return "two --format values name the same file"
    if output is not None and output.resolve() in paths:
        return f"--output {output} is also a --format path: the two reports would overwrite"
    return None


def write_reports(specs: Sequence[FormatSpec] | None, multi: MultiReport, *, head_sha: str,
                  base_sha: str | None, output: Path | None,
                  environ: Mapping[str, str]) -> str | None:
    """Render and write every report ``specs`` ask for; return an error line, or None.

    A report without a path goes to ``output``, else stdout. When no format goes there, the
    default report does: markdown, or plain text when stdout is a terminal and there is no
    ``output``. Every file is written even when one fails.
    """
    chosen = list(specs or ())
    if not any(s.path is None and s.name != "github" for s in chosen):
        terminal = output is None and sys.stdout.isatty()
        chosen.insert(0, FormatSpec("terminal" if terminal else "markdown"))
    problems = []
    for spec in chosen:
        if spec.name == "github":
            problems.append(_github(multi, head_sha, base_sha, environ))
            continue
        text = render(spec.name, multi, head_sha, base_sha)
        problems.append(_write(text, spec.path or output))
    found = [p for p in problems if p]
    return "; ".join(found) if found else None


def render(name: str, multi: MultiReport, head_sha: str, base_sha: str | None) -> str:
    """Return the report ``name`` (a `FORMATS` name, or ``terminal``) of ``multi``."""
    from worker.report import multi as report_multi

    if name == "json":
        return report_multi.render_json(multi, head_sha, base_sha)
    if name == "junit":
        import platform

        from worker.report import render_junit

        return render_junit(multi, timestamp=datetime.now(UTC), hostname=platform.node())
    if name == "sarif":
        from worker.report import render_sarif
        from worker.version import VERSION

        return render_sarif(multi, VERSION)
    if name == "html":
        from worker.report import render_html

        return render_html(multi, head_sha, base_sha or "")
    if name == "comment":
        return report_multi.comment_body(multi, head_sha=head_sha, base_sha=base_sha)
    if name == "terminal":
        from worker.report import render_terminal

        return render_terminal(multi, head_sha, base_sha)
    return report_multi.render_markdown(multi, head_sha, base_sha)


def _write(text: str, path: Path | None) -> str | None:
    from worker.evals.serialize import valid_text  # not at import: --help stays light

    text = valid_text(text)  # a lone surrogate of an older result: U+FFFD, never a traceback
    if path is None:
        try:
            print(text, flush=True)
        except BrokenPipeError:  # the reader left (`llmgate run | head`): the verdict's exit
            # code still stands; what Python would flush at exit goes nowhere, not to a traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return None
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        return f"cannot write {path}: {err.strerror}"
    return None


def _github(multi: MultiReport, head_sha: str, base_sha: str | None,
            environ: Mapping[str, str]) -> str | None:
    from worker.evals.serialize import valid_text
    from worker.report import in_actions, workflow_commands
    from worker.report import multi as report_multi

    if not in_actions(environ):
        print("llmgate: --format github: not in GitHub Actions (GITHUB_ACTIONS is not true); "
              "no annotations written", file=sys.stderr)
        return None
    print(valid_text(workflow_commands(multi)), end="")
    summary = environ.get("GITHUB_STEP_SUMMARY", "")
    if not summary:
        return "--format github: GITHUB_STEP_SUMMARY is not set; no job summary written"
    try:
        with open(summary, "a", encoding="utf-8") as file:
            file.write(valid_text(report_multi.render_markdown(multi, head_sha, base_sha))
                       + "\n")
    except OSError as err:
        return f"cannot append the job summary to {summary}: {err.strerror}"
    return None
