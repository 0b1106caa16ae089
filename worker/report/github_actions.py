"""``llmgate run --format github``: annotations and a job summary inside GitHub Actions (pure).

GitHub Actions reads *workflow commands* from a step's standard output: a line
``::error file=PATH,line=N,title=TITLE::MESSAGE`` becomes an annotation on that line of the
pull request's diff ("Workflow commands for GitHub Actions", docs.github.com/actions). Values
are escaped as the Actions runner unescapes them (its toolkit's ``escapeData`` and
``escapeProperty``): in the message ``%``, ``\\r`` and ``\\n`` become ``%25``, ``%0D`` and
``%0A``; in a property also ``:`` and ``,`` become ``%3A`` and ``%2C``. A line that begins with
``::`` is a command, so every value is escaped and nothing of a pull request can start one of
its own. The job summary is the markdown report, appended to the file named by
``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from worker.pipeline import MultiReport
from worker.report import render as report
from worker.report.plain import printable

#: Annotations GitHub shows per step and type ("Workflow commands": 10 errors per step); one
#: line more says how many were left out.
MAX_ANNOTATIONS = 10


def in_actions(environ: Mapping[str, str]) -> bool:
    """Return whether this process runs in a GitHub Actions job (``GITHUB_ACTIONS=true``)."""
    return environ.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """Escape a workflow command's message."""
    return printable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value (``file``, ``title``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_commands(multi: MultiReport) -> str:
    """Return one ``::error`` line per annotation of every config (as the check run's, on
    repository paths), at most `MAX_ANNOTATIONS` and a ``::notice`` saying how many more."""
    found = [a for c in multi.configs for a in report.annotations(c.report)]
    lines = [_command(a) for a in found[:MAX_ANNOTATIONS]]
    if len(found) > MAX_ANNOTATIONS:
        lines.append(f"::notice title=llmgate::{len(found) - MAX_ANNOTATIONS} more findings: "
                     "see the job summary")
    return "".join(f"{line}\n" for line in lines)


def _command(annotation: dict[str, Any]) -> str:
    props = (f"file={escape_property(annotation['path'])},"
             f"line={int(annotation['start_line'])},"
             f"title={escape_property(annotation['title'])}")
    return f"::error {props}::{escape_data(annotation['message'])}"
