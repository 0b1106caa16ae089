"""``llmgate action``'s step outputs: what a later step of the workflow reads (pure but
`write_outputs`).

The Action (deploy/github-action/action.yml) declares them as its ``outputs:``, each the gate
step's output of the same name:

- ``conclusion``: the check-run conclusion of the gate (``success``, ``failure``,
  ``action_required``, ``neutral``, ...), "" when the run stopped before a report;
- ``exit-code``: ``llmgate run``'s exit code (0 pass, 1 failed, 2 configuration error,
  3 execution error, 4 undecided);
- ``why``: the decision in one sentence (the JSON report's ``why``, else its ``headline``);
  one line per config with several configs;
- ``report-json``, ``report-junit``, ``report-html``: the paths of the reports written (in
  ``RUNNER_TEMP``); ``report-comment``: the sticky comment's markdown, with ``comment: true``.

A step sets an output by appending to the file named by ``GITHUB_OUTPUT``. Every value is
written in the multi-line form ``NAME<<DELIMITER``, the value, ``DELIMITER`` (docs.github.com
"Workflow commands for GitHub Actions", "Multiline strings"), with a random delimiter that
occurs in no value, so no text of a pull request can end a value early or set another output.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The outputs every run of the gate step sets (the report paths only when written).
OUTPUT_NAMES = ("conclusion", "exit-code", "why", "report-json", "report-junit",
                "report-html", "report-comment")


def why_text(report: Mapping[str, Any]) -> str:
    """Return the Why sentence of a JSON report (``llmgate run --format json``): its ``why``,
    else its ``headline``; with several configs, one ``PATH: why`` line per config."""
    configs = report.get("configs")
    if isinstance(configs, list):
        return "\n".join(f"{c.get('path')}: {why_text(c.get('report') or {})}"
                         for c in configs)
    return str(report.get("why") or report.get("headline") or "")


def output_block(name: str, value: str, delimiter: str) -> str:
    """Return ``name=value`` in ``GITHUB_OUTPUT``'s multi-line form.

    Raises:
        ValueError: ``delimiter`` occurs in ``value`` or ``name`` (it would cut the value).
    """
    if delimiter in value or delimiter in name:
        raise ValueError(f"the delimiter occurs in output {name!r}")
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def write_outputs(path: str, outputs: Mapping[str, str]) -> None:
    """Append ``outputs`` (name -> value) to the ``GITHUB_OUTPUT`` file ``path``, each under a
    fresh random delimiter.

    Raises:
        OSError: the file cannot be appended to.
    """
    blocks = []
    for name, value in outputs.items():
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        blocks.append(output_block(name, value, delimiter))
    with Path(path).open("a", encoding="utf-8") as out:
        out.write("".join(blocks))
