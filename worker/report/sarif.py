"""``llmgate run --format sarif``: the gate's findings as a SARIF 2.1.0 log (pure).

SARIF is OASIS's Static Analysis Results Interchange Format, version 2.1.0 (OASIS Standard,
docs.oasis-open.org/sarif/sarif/v2.1.0); code-scanning tools (GitHub code scanning among them)
show its results on the lines they name. tests/fixtures/sarif/ holds the official JSON schema
and tests/unit/cli/test_report_formats_cli.py validates every log against it.

One run (tool ``llmgate``) whose results are, each at the file and 1-based line it concerns:

- ``llmgate/regression``: an example that passed at base and fails at head, at its dataset line;
- ``llmgate/no-answer``: an example that got no answer at head for a cause of the head;
- ``llmgate/endpoint``: a head-caused model-call error, at the config line that set what failed;
- ``llmgate/config-error``: a broken ``.llmgate.yml`` or dataset, at the offending line.

Every result is ``level: error``: each of them fails the gate.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from worker.evals.types import GateReport
from worker.pipeline import MultiReport
from worker.report.markdown import clip
from worker.report.model_calls import error_line
from worker.report.plain import printable, reports, value_text

#: The schema this log follows: the OASIS Standard with Errata 01 (the schema's own ``id``).
SCHEMA_URI = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
              "sarif-schema-2.1.0.json")
#: The rules a result can name: id -> one-line description.
RULES = {"llmgate/regression": "An example that passed at base fails at head.",
         "llmgate/no-answer": "An example got no answer at head, for a cause of the head.",
         "llmgate/endpoint": "The head's target endpoint gets no answer.",
         "llmgate/config-error": "The llmgate configuration or a dataset is invalid."}
#: Characters of an output kept in a message.
OUTPUT_CHARS = 2000


def render_sarif(multi: MultiReport, version: str) -> str:
    """Return the SARIF 2.1.0 log of ``multi`` (JSON text, 2-space indent).

    ``version`` is llmgate's version, the tool driver's ``version``.
    """
    results = [r for _, report in reports(multi) for r in _results(report)]
    driver = {"name": "llmgate", "version": version,
              "rules": [{"id": rule, "shortDescription": {"text": text}}
                        for rule, text in RULES.items()]}
    log = {"$schema": SCHEMA_URI, "version": "2.1.0",
           "runs": [{"tool": {"driver": driver}, "results": results,
                     "columnKind": "unicodeCodePoints"}]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _results(report: GateReport) -> list[dict[str, Any]]:
    err = report.config_error
    if err is not None:
        return [_result("llmgate/config-error", err.message, err.path, err.line)]
    found = [_result("llmgate/endpoint", error_line(e), e.path, e.line)
             for e in report.errors if e.cause == "head" and e.line is not None]
    for r in report.regressions:
        text = (f"{r.suite}: example {r.example_id} regressed: {r.reason}\n"
                f"expected: {clip(value_text(r.expected), OUTPUT_CHARS)}\n"
                f"base: {clip(value_text(r.base_output), OUTPUT_CHARS)}\n"
                f"head: {clip(value_text(r.head_output), OUTPUT_CHARS)}")
        found.append(_result("llmgate/regression", text, r.dataset, r.line,
                             {"suite": r.suite, "example_id": r.example_id}))
    worse = {(r.suite, r.example_id) for r in report.regressions}
    for r in report.errored:
        if (r.suite, r.example_id) not in worse:
            found.append(_result("llmgate/no-answer",
                                 f"{r.suite}: example {r.example_id} got no answer at head: "
                                 f"{r.reason}", r.dataset, r.line,
                                 {"suite": r.suite, "example_id": r.example_id}))
    return found


def _result(rule: str, text: str, path: str, line: int | None,
            properties: dict[str, str] | None = None) -> dict[str, Any]:
    location = {"physicalLocation": {"artifactLocation": {"uri": quote(path)},
                                     "region": {"startLine": max(line or 1, 1)}}}
    result: dict[str, Any] = {"ruleId": rule, "level": "error",
                              "message": {"text": printable(clip(text, 8000))},
                              "locations": [location]}
    if properties:
        result["properties"] = properties
    return result
