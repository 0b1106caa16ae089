"""``llmgate run --format`` with several values at once, through the real CLI on a real git
repository (`worker_support.build_tiny_repo`): JUnit validated against the published JUnit XSD,
SARIF against the official SARIF 2.1.0 schema, GitHub workflow commands and job summary, and
the plain-text terminal report.

One gate per branch writes every format at once (module fixtures), which is itself the point of
``--format NAME:PATH``; the tests read the files it wrote.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest
import xmlschema

from tests.unit.worker_support import ASSERTION_LINE, build_tiny_repo
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, main
from worker.report.github_actions import escape_data, escape_property
from worker.report.plain import one_line

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
JUNIT_XSD = FIXTURES / "junit" / "JUnit.xsd"
SARIF_SCHEMA = FIXTURES / "sarif" / "sarif-schema-2.1.0.json"
REPORT_SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "report-schema-v1.json"
FORMATS = ("junit", "sarif", "json", "markdown", "html", "comment")


@dataclass(frozen=True)
class Gated:
    """One ``llmgate run`` that wrote every format: its exit code, stdout, stderr, the files
    (format -> path) and the job summary."""

    code: int
    out: str
    err: str
    files: dict[str, Path]
    summary: Path

    def text(self, name: str) -> str:
        return self.files[name].read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tiny_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("formats") / "repo"
    return repo, build_tiny_repo(repo)


def gate_all(repo: Path, out_dir: Path, head: str) -> Gated:
    """Gate ``head`` against main writing every format to ``out_dir``, inside a simulated
    GitHub Actions job."""
    out_dir.mkdir()
    files = {name: out_dir / f"report.{name}" for name in FORMATS}
    summary = out_dir / "summary.md"
    summary.write_text("earlier step\n")
    argv = ["run", "--repo", str(repo), "--no-cache", "--base", "main", "--head", head,
            *(f"--format={name}:{path}" for name, path in files.items()), "--format", "github"]
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as env, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        env.setenv("GITHUB_ACTIONS", "true")
        env.setenv("GITHUB_STEP_SUMMARY", str(summary))
        code = main(argv)
    return Gated(code, out.getvalue(), err.getvalue(), files, summary)


@pytest.fixture(scope="module")
def dropped(tiny_repo: tuple[Path, dict[str, str]],
            tmp_path_factory: pytest.TempPathFactory) -> Gated:
    """``pr/drop``: bravo regresses, ``max_drop 0.05`` fails."""
    return gate_all(tiny_repo[0], tmp_path_factory.mktemp("drop") / "out", "pr/drop")


@pytest.fixture(scope="module")
def broken(tiny_repo: tuple[Path, dict[str, str]],
           tmp_path_factory: pytest.TempPathFactory) -> Gated:
    """``pr/broken``: the assertion type is misspelt at `ASSERTION_LINE` of .llmgate.yml."""
    return gate_all(tiny_repo[0], tmp_path_factory.mktemp("broken") / "out", "pr/broken")


def test_every_format_is_written_and_the_exit_code_is_the_gates(dropped, broken):
    assert (dropped.code, broken.code) == (EXIT_GATE_FAILED, EXIT_CONFIG_ERROR)
    for gated in (dropped, broken):
        assert all(path.stat().st_size > 0 for path in gated.files.values())
    assert json.loads(dropped.text("json"))["conclusion"] == "failure"
    assert "bravo" in dropped.text("markdown")


@pytest.mark.parametrize("which", ["dropped", "broken"])
def test_junit_validates_against_the_published_junit_schema(which, request):
    gated: Gated = request.getfixturevalue(which)
    xmlschema.XMLSchema(JUNIT_XSD).validate(gated.files["junit"])


def test_junit_has_a_testcase_per_example_and_rule_and_the_regression_fails(dropped):
    root = ET.parse(dropped.files["junit"]).getroot()  # noqa: S314 - our own output
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"echo", "llmgate rules"}
    cases = {c.get("name"): c for c in suites["echo"].findall("testcase")}
    assert sorted(cases) == ["alpha", "bravo", "charlie", "delta"]
    assert [n for n, c in cases.items() if c.find("failure") is not None] == ["bravo"]
    failure = cases["bravo"].find("failure")
    assert failure is not None and failure.text is not None
    assert "expected: bravo\nbase: bravo\nhead: " in failure.text
    assert (suites["echo"].get("tests"), suites["echo"].get("failures")) == ("4", "1")
    rules = {c.get("name"): c.find("failure") is not None
             for c in suites["llmgate rules"].findall("testcase")}
    assert rules == {"echo pass_rate min 0.50": False, "echo pass_rate max_drop 0.05": True}


def test_junit_of_a_config_error_is_one_error_at_the_line(broken):
    root = ET.parse(broken.files["junit"]).getroot()  # noqa: S314 - our own output
    [suite] = root.findall("testsuite")
    error = suite.find("testcase/error")
    assert error is not None
    assert error.get("message", "").startswith(f".llmgate.yml:{ASSERTION_LINE}: ")


@pytest.mark.parametrize("which", ["dropped", "broken"])
@pytest.mark.parametrize(("name", "schema_path", "validator"), [
    ("sarif", SARIF_SCHEMA, jsonschema.Draft4Validator),  # the official SARIF 2.1.0 schema
    ("json", REPORT_SCHEMA, jsonschema.Draft202012Validator),  # ours, versioned, in docs/
])
def test_json_reports_validate_against_their_schemas(which, name, schema_path, validator,
                                                     request):
    gated: Gated = request.getfixturevalue(which)
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    validator.check_schema(schema)
    validator(schema).validate(json.loads(gated.text(name)))


def test_sarif_puts_the_regression_on_its_dataset_line(dropped):
    [run] = json.loads(dropped.text("sarif"))["runs"]
    [result] = run["results"]
    location = result["locations"][0]["physicalLocation"]
    assert (result["ruleId"], location["artifactLocation"]["uri"],
            location["region"]["startLine"]) == ("llmgate/regression", "evals/echo.jsonl", 2)
    assert result["properties"] == {"suite": "echo", "example_id": "bravo"}


def test_sarif_puts_a_config_error_on_its_config_line(broken):
    [run] = json.loads(broken.text("sarif"))["runs"]
    [result] = run["results"]
    location = result["locations"][0]["physicalLocation"]
    assert (result["ruleId"], location["artifactLocation"]["uri"],
            location["region"]["startLine"]) == ("llmgate/config-error", ".llmgate.yml",
                                                  ASSERTION_LINE)


def test_github_prints_an_error_command_per_finding_and_appends_the_summary(dropped, broken):
    [command] = [line for line in dropped.out.splitlines() if line.startswith("::")]
    assert command.startswith("::error file=evals/echo.jsonl,line=2,title=echo%3A example bravo "
                              "regressed::expected: bravo%0A")
    [command] = [line for line in broken.out.splitlines() if line.startswith("::")]
    assert command.startswith(f"::error file=.llmgate.yml,line={ASSERTION_LINE},"
                              "title=llmgate%3A configuration error::")
    summary = dropped.summary.read_text(encoding="utf-8")
    assert summary.startswith("earlier step\n") and "bravo" in summary


def test_github_outside_actions_writes_nothing_and_says_so(tiny_repo, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code = main(["run", "--repo", str(tiny_repo[0]), "--no-cache", "--format", "github"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "::error" not in out and "not in GitHub Actions" in err


@pytest.mark.parametrize(("formats", "message"), [
    (["json", "markdown"], "--format json and markdown would both go to --output/stdout"),
    (["json:same.txt", "sarif:same.txt"], "two --format values name the same file"),
])
def test_clashing_formats_are_refused_before_anything_runs(tiny_repo, capsys, formats, message):
    code = main(["run", "--repo", str(tiny_repo[0]),
                 *(f"--format={f}" for f in formats)])
    assert code == EXIT_CONFIG_ERROR
    assert capsys.readouterr().err.startswith(f"llmgate: {message}")


def test_a_format_path_that_is_the_output_or_a_link_to_another_is_refused(tiny_repo, capsys,
                                                                         tmp_path):
    # field case (fresh-user tester): `--format json:P --output P` wrote the markdown to P and
    # then the JSON over it; two paths that are one file through a link were not refused
    same = tmp_path / "same"
    code = main(["run", "--repo", str(tiny_repo[0]), f"--format=json:{same}", "--output",
                 str(same)])
    assert (code, capsys.readouterr().err) == (
        EXIT_CONFIG_ERROR, f"llmgate: --output {same} is also a --format path: the two reports "
                           "would overwrite\n")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    code = main(["run", "--repo", str(tiny_repo[0]), f"--format=json:{tmp_path / 'real.json'}",
                 f"--format=sarif:{tmp_path / 'link.json'}"])
    assert (code, capsys.readouterr().err) == (
        EXIT_CONFIG_ERROR, "llmgate: two --format values name the same file\n")


def test_a_report_through_a_dangling_link_is_written_where_it_points(tiny_repo, capsys,
                                                                    tmp_path):
    # field case (fresh-user tester): the check before the run removed the link itself and left
    # an empty file at its target
    (tmp_path / "art").mkdir()
    link = tmp_path / "link.xml"
    link.symlink_to(tmp_path / "art" / "report.xml")
    code = main(["run", "--repo", str(tiny_repo[0]), "--no-cache", f"--format=junit:{link}"])
    capsys.readouterr()
    assert code == 0
    assert link.is_symlink()
    assert (tmp_path / "art" / "report.xml").read_text().startswith("<?xml")


@pytest.mark.parametrize("value", ["xml", "junit:", "github:out.txt"])
def test_a_bad_format_value_exits_2(capsys, value):
    with pytest.raises(SystemExit) as exited:
        main(["run", "--format", value])
    assert exited.value.code == 2
    assert "--format" in capsys.readouterr().err


def test_json_has_every_examples_result_per_side(dropped):
    examples = json.loads(dropped.text("json"))["examples"]["echo"]
    assert [e["id"] for e in examples["base"]] == ["alpha", "bravo", "charlie", "delta"]
    assert [e["id"] for e in examples["head"]] == ["alpha", "bravo", "charlie", "delta"]
    head = {e["id"]: e for e in examples["head"]}
    base = {e["id"]: e for e in examples["base"]}
    assert (base["bravo"]["passed"], head["bravo"]["passed"]) == (True, False)
    assert (base["bravo"]["output"], head["bravo"]["line"]) == ("bravo", 2)
    assert [(a["type"], a["score"]) for a in head["bravo"]["assertions"]] == [("equals", 0.0)]
    assert [(a["type"], a["score"]) for a in head["alpha"]["assertions"]] == [("equals", 1.0)]


@pytest.mark.slow
def test_on_a_terminal_the_report_is_plain_text_not_markdown(tiny_repo):
    """``llmgate run`` as a process whose stdout is a real pseudo-terminal."""
    primary, secondary = pty.openpty()
    with subprocess.Popen([sys.executable, "-m", "worker.cli", "run", "--no-cache", "--base",
                           "main", "--head", "pr/drop"], cwd=tiny_repo[0], stdin=subprocess.DEVNULL,
                          stdout=secondary, stderr=subprocess.PIPE) as process:
        os.close(secondary)
        chunks = []
        with contextlib.suppress(OSError):  # EIO once the process closed the terminal
            while chunk := os.read(primary, 65536):
                chunks.append(chunk)
        os.close(primary)
        code = process.wait(timeout=60)
    out = b"".join(chunks).decode().replace("\r\n", "\n")
    assert code == EXIT_GATE_FAILED
    assert out.splitlines()[0].startswith("llmgate: fail")
    assert "evals/echo.jsonl:2  echo/bravo: " in out
    assert re.search(r"^echo\s+pass_rate\s+max_drop 0\.05\s+1\.000\s+0\.750\s+-0\.250\s+fail$",
                     out, re.MULTILINE)
    for markup in ("\\$", "&lt;", "<table>", "<details>", "| ---", "**", "`"):
        assert markup not in out


def test_a_model_output_cannot_send_escape_sequences_to_the_terminal():
    text = "ok\x1b[2J\x1b]0;owned\x07 done\r\nnext"
    assert one_line(text, 80) == "ok\ufffd[2J\ufffd]0;owned\ufffd done next"


def test_a_bare_format_goes_to_stdout_beside_the_files(tiny_repo, tmp_path, capsys):
    code = main(["run", "--repo", str(tiny_repo[0]), "--no-cache", "--base", "main",
                 "--head", "pr/drop", "--format", "markdown",
                 "--format", f"junit:{tmp_path / 'r.xml'}"])
    out = capsys.readouterr().out
    assert code == EXIT_GATE_FAILED
    assert out.startswith("### ❌ llmgate: fail") and "| suite | metric |" in out
    xmlschema.XMLSchema(JUNIT_XSD).validate(tmp_path / "r.xml")


def test_the_html_report_of_a_config_error_names_the_file_and_line(broken):
    page = broken.text("html")
    assert f'id="config-error">Configuration error: .llmgate.yml:{ASSERTION_LINE}: ' in page


def test_a_value_cannot_start_a_workflow_command_of_its_own():
    hostile = "50% done\n::error file=x.py,line=1::forged\r\n"
    assert escape_data(hostile) == "50%25 done%0A::error file=x.py,line=1::forged%0A"
    assert escape_property("a:b,c%\nd") == "a%3Ab%2Cc%25%0Ad"


def test_comment_is_the_apps_sticky_comment_of_the_report(dropped):
    from worker.contract import COMMENT_MARKER, RERUN_COMMAND

    comment, markdown = dropped.text("comment"), dropped.text("markdown")
    assert comment.startswith(COMMENT_MARKER + "\n")  # found and edited by it
    assert f"Comment `{RERUN_COMMAND}` to run again." in comment.splitlines()[-1]
    assert COMMENT_MARKER not in markdown and RERUN_COMMAND not in markdown
    assert "bravo" in comment
