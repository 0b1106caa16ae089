"""Equal text compares equal (issue 31): text assertions normalise line endings and Unicode
(NFC) by default, with ``normalize: false`` as the way out, through ``llmgate run``."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.unit.worker_support import git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, main

#: The target answers each example with its ``vars.answer`` exactly (bytes as given).
ANSWER = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": example["vars"]["answer"]}, open(sys.argv[2], "w"))
"""
#: The same text as the references below, with CRLF line endings and in NFD.
CRLF_NFD = "Cafe\u0301 ouvert\r\nde\u0301s 8 h"
ROWS = [{"id": "eq", "input": "q", "expected": "Caf\u00e9 ouvert\nd\u00e9s 8 h",
         "vars": {"answer": CRLF_NFD},
         "assert": [{"type": "equals"}]},
        {"id": "contains", "input": "q", "vars": {"answer": CRLF_NFD},
         "assert": [{"type": "contains", "value": "Caf\u00e9 ouvert\nd\u00e9s"}]},
        {"id": "regex", "input": "q", "vars": {"answer": CRLF_NFD},
         "assert": [{"type": "regex", "pattern": "^Caf\u00e9 ouvert\nd\u00e9s \\d h$"}]},
        {"id": "starts", "input": "q", "vars": {"answer": CRLF_NFD},
         "assert": [{"type": "starts_with", "value": "Caf\u00e9 ouvert\nd\u00e9s"}]},
        {"id": "one_of", "input": "q", "vars": {"answer": CRLF_NFD},
         "assert": [{"type": "is_one_of", "values": ["Caf\u00e9 ouvert\nd\u00e9s 8 h"]}]},
        {"id": "label", "input": "q", "expected": "Caf\u00e9 ouvert\nd\u00e9s 8 h",
         "vars": {"answer": CRLF_NFD}, "assert": [{"type": "classification"}]}]
#: Every example's id, each with the same outcome.
IDS = ("eq", "contains", "regex", "starts", "one_of", "label")


def write_repo(root: Path, rows: list[dict], extra: str = "") -> None:
    python = shlex.quote(sys.executable)
    (root / "evals").mkdir(parents=True, exist_ok=True)
    (root / "answer.py").write_text(ANSWER)
    (root / "evals/d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / ".llmgate.yml").write_text(f"""version: 1
suites:
  - name: s
    dataset: evals/d.jsonl
    target: {{command: "{python} answer.py {{input_file}} {{output_file}}"}}
{extra}    gate: {{pass_rate: {{min: 1.0}}}}
""")


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    monkeypatch.chdir(root)
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    code = main(["run", "--format", "json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def passed(report: dict, side: str = "head") -> dict[str, bool]:
    return {e["id"]: e["passed"] for e in report["examples"]["s"][side]}


def test_crlf_and_nfd_output_equals_contains_and_matches_its_reference_base_and_head(
        repo, capsys):
    write_repo(repo, ROWS)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "suite")
    code, report, err = run(capsys, "--base", "HEAD", "--base-tip")
    assert code == EXIT_PASS, err
    assert passed(report) == passed(report, "base") == dict.fromkeys(IDS, True)


def test_normalize_false_compares_the_raw_text(repo, capsys):
    rows = [{**row, "assert": [{**row["assert"][0], "normalize": False}]} for row in ROWS]
    write_repo(repo, rows)
    code, report, err = run(capsys)
    assert code == EXIT_GATE_FAILED, err
    assert passed(report) == dict.fromkeys(IDS, False)


def test_a_normalize_that_is_not_a_boolean_is_a_config_error_on_its_line(repo, capsys):
    write_repo(repo, ROWS[:1], extra="    assertions:\n      - {type: contains, value: x,"
                                     " normalize: 'no'}\n")
    code, report, err = run(capsys)
    assert code == EXIT_CONFIG_ERROR
    assert report["config_error"] == {
        "path": ".llmgate.yml", "line": 7,
        "message": "assertion `contains`: `normalize` must be true or false"}
    assert ".llmgate.yml:7" in err
