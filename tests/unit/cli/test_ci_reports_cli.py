"""What CI shows of a gate (issue 33): every example failing at head is a failed JUnit test case,
told apart by its ``type`` (``regression``, ``still_failing``, ``failed``); examples head fixed
are named; the Why sentence and each failure's reason are in JUnit and HTML; the JSON
report's ``headline`` is never empty; a run without a base names the examples that fail.

Through ``llmgate run --format junit:PATH --format html:PATH --format json:PATH`` on a real git
repository whose bot answers "nope" to a set of inputs: at base ``s1``, ``s2`` and ``fx``
fail; at head ``s1``, ``s2`` and ``rg`` (``s1``/``s2`` still fail, ``rg`` regressed, ``fx`` is
fixed). The only rule, ``pass_rate min 0.3``, passes.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import xmlschema

from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_PASS, main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REPORT_SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "report-schema-v1.json"
BOT = """import json, sys
BROKEN = {broken!r}
text = json.load(open(sys.argv[1]))["input"]
json.dump({{"output": "nope" if text in BROKEN else text}}, open(sys.argv[2], "w"))
"""
CONFIG = """version: 1
settings:
  concurrency: 4
suites:
  - name: echo
    dataset: evals/echo.jsonl
    target:
      command: python3 bot.py {input_file} {output_file}
    assertions:
      - type: equals
    gate:
      pass_rate:
        min: 0.3
"""
IDS = ("ok1", "s1", "s2", "fx", "rg", "ok2")
FORMATS = ("junit", "html", "json", "markdown")


@dataclass(frozen=True)
class Run:
    """One ``llmgate run``: its exit code and the reports it wrote (format -> text)."""

    code: int
    files: dict[str, str]

    def json(self) -> dict[str, Any]:
        return json.loads(self.files["json"])  # type: ignore[no-any-return]


def gate(repo: Path, out: Path, *base: str) -> Run:
    out.mkdir()
    paths = {name: out / f"report.{name}" for name in FORMATS}
    code = main(["run", "--repo", str(repo), "--no-cache", *base, "--head", "pr",
                 *(f"--format={name}:{path}" for name, path in paths.items())])
    return Run(code, {name: path.read_text(encoding="utf-8") for name, path in paths.items()})


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ci-reports") / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    data = "".join(json.dumps({"id": i, "input": i, "expected": i}) + "\n" for i in IDS)
    commit(path, "main", {".llmgate.yml": CONFIG, "evals/echo.jsonl": data,
                          "bot.py": BOT.format(broken=["s1", "s2", "fx"])})
    commit(path, "pr", {"bot.py": BOT.format(broken=["s1", "s2", "rg"])})
    return path


@pytest.fixture(scope="module")
def compared(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``pr`` against ``main``."""
    return gate(repo, tmp_path_factory.mktemp("compared") / "out", "--base", "main")


@pytest.fixture(scope="module")
def alone(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``pr`` without a base."""
    return gate(repo, tmp_path_factory.mktemp("alone") / "out")


def junit_cases(run: Run) -> dict[str, ET.Element]:
    root = ET.fromstring(run.files["junit"])  # noqa: S314 - our own output
    [suite] = [s for s in root.findall("testsuite") if s.get("name") == "echo"]
    return {c.get("name", ""): c for c in suite.findall("testcase")}


def test_every_example_failing_at_head_is_a_failed_test_case_of_its_kind(compared: Run):
    # field case: 5 failures shown where 7 of 40 examples failed at head (only regressions)
    assert compared.code == EXIT_PASS
    cases = junit_cases(compared)
    failures = {name: case.find("failure") for name, case in cases.items()}
    kinds = {name: f.get("type") for name, f in failures.items() if f is not None}
    assert kinds == {"s1": "still_failing", "s2": "still_failing", "rg": "regression"}
    s1, rg = failures["s1"], failures["rg"]
    assert s1 is not None and rg is not None
    assert s1.get("message") == ('line 2: still failing (failed at base too): expected "s1", '
                                 'got "nope"')
    assert rg.get("message", "").startswith("line 5: regressed (passed at base, fails at head): ")
    assert 'got "nope"' in rg.get("message", "")
    root = ET.fromstring(compared.files["junit"])  # noqa: S314 - our own output
    echo = next(s for s in root.findall("testsuite") if s.get("name") == "echo")
    assert echo.get("failures") == "3"
    xmlschema.XMLSchema(FIXTURES / "junit" / "JUnit.xsd").validate(compared.files["junit"])


def test_junit_carries_the_why_sentence_and_names_the_fixed_example(compared: Run):
    root = ET.fromstring(compared.files["junit"])  # noqa: S314 - our own output
    echo = next(s for s in root.findall("testsuite") if s.get("name") == "echo")
    props = {p.get("name"): p.get("value") for p in echo.iter("property")}
    assert props["why"] == "all 1 rules pass."
    out = echo.findtext("system-out") or ""
    assert out.splitlines()[0] == "llmgate: success: all 1 rules pass."
    assert ('fixed at head: fx (line 4): failed at base (expected "fx", got "nope"), passes at '
            "head") in out
    assert junit_cases(compared)["fx"].find("failure") is None  # fixed: it passes


def test_a_passing_runs_json_has_a_headline_and_names_fixed_and_failing(compared: Run):
    report = compared.json()
    assert (report["conclusion"], report["headline"]) == ("success", "all 1 rules pass.")
    assert [(e["example_id"], e["status"]) for e in report["failing_at_head"]] == [
        ("s1", "still_failing"), ("s2", "still_failing"), ("rg", "regression")]
    assert report["fixed_at_head"] == [{
        "suite": "echo", "dataset": "evals/echo.jsonl", "line": 4, "example_id": "fx",
        "status": "fixed", "reason": 'expected "fx", got "nope"'}]
    jsonschema.Draft202012Validator(json.loads(REPORT_SCHEMA.read_text())).validate(report)


def test_markdown_names_the_examples_head_fixed(compared: Run):
    assert ("- **Fixed at head** (failed at base, pass at head): 1 example: fx\n"
            in compared.files["markdown"])


def test_html_shows_why_and_each_examples_failure_reason(compared: Run):
    page = compared.files["html"]
    assert '<p id="why"><strong>Why:</strong> all 1 rules pass.</p>' in page
    assert "<th>why it fails</th>" in page
    assert "<td>expected &#34;s1&#34;, got &#34;nope&#34;</td>" in page
    assert "<td>fixed: failed at base: expected &#34;fx&#34;, got &#34;nope&#34;</td>" in page


def test_a_run_without_base_names_the_examples_that_fail(alone: Run):
    assert alone.code == EXIT_PASS
    assert ('**Failing at head** (no base result): 3 examples: s1 (line 2): expected "s1", got '
            '"nope"; s2 (line 3): ') in alone.files["markdown"]
    report = alone.json()
    assert [(e["example_id"], e["status"], e["line"]) for e in report["failing_at_head"]] == [
        ("s1", "failed", 2), ("s2", "failed", 3), ("rg", "failed", 5)]
    assert report["fixed_at_head"] == [] and report["headline"]
    kinds = {n: f.get("type") for n, c in junit_cases(alone).items()
             if (f := c.find("failure")) is not None}
    assert kinds == {"s1": "failed", "s2": "failed", "rg": "failed"}
