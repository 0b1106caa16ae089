"""``llmgate run --format junit``: the gate as JUnit XML, for CI systems' test tabs (pure).

The shape is the Apache Ant JUnit report as Windy Road's published XSD describes it
(github.com/windyroad/JUnit-Schema, ``JUnit.xsd``; tests/fixtures/junit/ holds a copy and
tests/unit/cli/test_report_formats_cli.py validates against it): ``<testsuites>`` holding
``<testsuite>`` elements with ``properties``, ``testcase``\\s, ``system-out`` and
``system-err``.

- one ``<testsuite>`` per suite (per config and suite with several configs), one
  ``<testcase>`` per example id (name: the id, classname: the suite, time: head's latency in
  seconds). Every example that fails at head is a ``<failure>`` whose ``type`` says which
  (worker/report/example_status.py): ``regression`` (passed at base), ``still_failing``
  (failed at base too) or ``failed`` (base has no result for it); its message carries the
  reason (failed assertions' messages) and its text the expected, base and head outputs. An
  example that got no answer at head is an ``<error type="no_answer">``, one a judge could
  not score an ``<error type="unscored">``. An example fixed at head (failed at base)
  passes, and the suite's ``<system-out>`` names it (the published XSD allows no output
  inside a ``<testcase>``).
- every ``<testsuite>`` has the property ``why``, the decision in one sentence
  (worker/report/decision.py), and its ``<system-out>`` starts with it.
- one ``<testsuite name="llmgate rules">`` with a ``<testcase>`` per gate rule: ``fail`` and
  ``regression`` are failures, ``inconclusive`` an error (the gate is undecided), ``skipped``
  skipped.
- a configuration error is one ``<testsuite name="llmgate config">`` whose testcase is an
  error naming the file and line.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET  # noqa: S405 - we write XML; nothing is parsed here
from datetime import datetime

from worker.evals.types import GateReport, RuleOutcome
from worker.pipeline import MultiReport
from worker.report.decision import headline_text
from worker.report.example_status import ExampleStatus, example_statuses, failure_reason
from worker.report.markdown import clip
from worker.report.plain import one_line, printable, reports, value_text

#: Characters of an output kept in a failure's text.
OUTPUT_CHARS = 4000


def render_junit(multi: MultiReport, *, timestamp: datetime, hostname: str) -> str:
    """Return the JUnit XML document for ``multi`` (UTF-8 text, XML declaration first).

    Args:
        multi: the reports of every config gated.
        timestamp: when the run started (the schema's ``timestamp``: seconds, no zone).
        hostname: the machine's name (the schema requires it).
    """
    root = ET.Element("testsuites")
    suites: list[tuple[ET.Element, list[str]]] = []
    for prefix, report in reports(multi):
        suites += _report_suites(prefix, report)
    for index, (suite, out) in enumerate(suites):
        suite.set("id", str(index))
        suite.set("package", suite.get("name", ""))
        suite.set("timestamp", timestamp.strftime("%Y-%m-%dT%H:%M:%S"))
        suite.set("hostname", one_line(hostname, 200) or "localhost")
        ET.SubElement(suite, "system-out").text = printable("\n".join(out))
        ET.SubElement(suite, "system-err")
        root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _report_suites(prefix: str, report: GateReport) -> list[tuple[ET.Element, list[str]]]:
    """The report's testsuites, each with the lines of its ``<system-out>``."""
    why = [f"llmgate: {report.conclusion}: {headline_text(report)}"]
    err = report.config_error
    if err is not None:
        suite = _suite(f"{prefix}llmgate config", report)
        case = _case(suite, err.path, "llmgate.config", 0.0)
        _problem(case, "error", "config_error", f"{err.path}:{err.line or 1}: {err.message}")
        return [(_counted(suite), why)]
    found = []
    statuses = example_statuses(report)
    for name in report.head.suites if report.head is not None else {}:
        suite = _suite(f"{prefix}{name}", report)
        out = list(why)
        for status in (s for s in statuses if s.suite == name):
            _example(suite, status)
            if status.status == "fixed":
                out.append(f"fixed at head: {status.example_id} (line {status.line}): failed "
                           f"at base ({_base_reason(status)}), passes at head")
        found.append((_counted(suite), out))
    rules = _suite(f"{prefix}llmgate rules", report)
    for outcome in report.outcomes:
        _rule(rules, outcome)
    return [*found, (_counted(rules), why)]


def _suite(name: str, report: GateReport) -> ET.Element:
    suite = ET.Element("testsuite", name=one_line(name, 500) or "suite")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="conclusion", value=report.conclusion)
    ET.SubElement(props, "property", name="why", value=one_line(headline_text(report), 2000))
    for side, run in (("head_sha", report.head), ("base_sha", report.base)):
        if run is not None and run.sha:
            ET.SubElement(props, "property", name=side, value=one_line(run.sha, 80))
    return suite


def _case(suite: ET.Element, name: str, classname: str, time_s: float) -> ET.Element:
    return ET.SubElement(suite, "testcase", name=one_line(name, 500) or "-",
                         classname=one_line(classname, 500) or "-", time=f"{time_s:.3f}")


#: How a failure's message starts, by `ExampleStatus.status`.
_SAID = {"regression": "regressed (passed at base, fails at head)",
         "still_failing": "still failing (failed at base too)",
         "failed": "fails at head (no base result)"}


def _example(suite: ET.Element, status: ExampleStatus) -> None:
    runs = status.head
    case = _case(suite, status.example_id, status.suite,
                 sum(r.latency_ms for r in runs) / 1000)
    where = f"line {status.line}: "
    if status.status == "errored":
        _problem(case, "error", "no_answer", where + status.reason)
    elif status.status == "unscored":
        _problem(case, "error", "unscored", where + f"not scored: {status.reason}")
    elif status.failing:
        failed = next((r for r in runs if not r.passed), runs[0])
        base = status.base[0].output if status.base else None
        _problem(case, "failure", status.status,
                 where + f"{_SAID[status.status]}: {status.reason}",
                 _outputs(failed.expected, base, failed.output))


def _base_reason(status: ExampleStatus) -> str:
    return failure_reason(status.base)


def _outputs(expected: object, base: object, head: object) -> str:
    parts = [f"expected: {clip(value_text(expected), OUTPUT_CHARS)}"]
    if base is not None:
        parts.append(f"base: {clip(value_text(base), OUTPUT_CHARS)}")
    parts.append(f"head: {clip(value_text(head), OUTPUT_CHARS)}")
    return "\n".join(parts)


def _rule(suite: ET.Element, outcome: RuleOutcome) -> None:
    scope = f" [{outcome.group}]" if outcome.group else ""
    case = _case(suite, f"{outcome.suite} {outcome.metric}{scope} {outcome.rule}",
                 "llmgate.rules", 0.0)
    numbers = f"base {_num(outcome.base)}, head {_num(outcome.head)}, delta {_num(outcome.delta)}"
    text = f"{outcome.status}: {numbers}" + (f"; {outcome.reason}" if outcome.reason else "")
    if outcome.status in ("fail", "regression"):
        _problem(case, "failure", outcome.status, text)
    elif outcome.status == "inconclusive":
        _problem(case, "error", "inconclusive", text)
    elif outcome.status == "skipped":
        ET.SubElement(case, "skipped", message=one_line(text, 2000))


def _problem(case: ET.Element, tag: str, kind: str, message: str, details: str = "") -> None:
    element = ET.SubElement(case, tag, message=one_line(message, 2000), type=kind)
    element.text = printable(f"{message}\n{details}".strip())


def _counted(suite: ET.Element) -> ET.Element:
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    suite.set("errors", str(sum(c.find("error") is not None for c in cases)))
    suite.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    suite.set("time", f"{sum(float(c.get('time', '0')) for c in cases):.3f}")
    return suite


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
