"""``llmgate run`` on YAML (inline assertions), JSON and CSV datasets, through the real CLI."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.unit.worker_support import git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, main

ECHO = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": str(example["input"])}, open(sys.argv[2], "w"))
"""
YAML = """- id: refund
  input: Where is my refund?
  contains_any: [refund, billing]
- id: hello
  input: hello there
  not_contains: sorry
"""
JSON_DS = json.dumps({"examples": [{"id": "a", "input": "alpha", "expected": "alpha"}]})
CSV = "ticket,question,label\nt1,bravo,bravo\nt2,charlie,charlie\n"


def write_repo(root: Path, yaml_text: str = YAML) -> None:
    python = shlex.quote(sys.executable)
    target = f'target: {{command: "{python} echo.py {{input_file}} {{output_file}}"}}'
    files = {"echo.py": ECHO, "evals/inline.yaml": yaml_text, "evals/d.json": JSON_DS,
             "evals/d.csv": CSV, ".llmgate.yml": f"""version: 1
suites:
  - name: inline
    dataset: evals/inline.yaml
    {target}
    gate: {{pass_rate: {{min: 1.0}}}}
  - name: json
    dataset: evals/d.json
    {target}
    assertions: [{{type: equals}}]
    gate: {{pass_rate: {{min: 1.0}}}}
  - name: csv
    dataset: evals/d.csv
    columns: {{id: ticket, input: question, expected: label}}
    {target}
    assertions: [{{type: equals}}]
    gate: {{pass_rate: {{min: 1.0}}}}
"""}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_repo(root)
    monkeypatch.chdir(root)
    return root


def run(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = main(["run", "--format", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_yaml_json_and_csv_suites_run_and_inline_assertions_decide(repo, capsys):
    code, report, err = run(capsys)
    assert (code, report["conclusion"]) == (EXIT_PASS, "success"), err
    assert {s: m["head"]["pass_rate"] for s, m in report["metrics"].items()} == {
        "inline": 1.0, "json": 1.0, "csv": 1.0}
    (repo / "evals/inline.yaml").write_text(YAML.replace("[refund, billing]", "[billing]"))
    code, report, _ = run(capsys)
    assert (code, report["metrics"]["inline"]["head"]["pass_rate"]) == (EXIT_GATE_FAILED, 0.5)


def test_a_bad_yaml_dataset_exits_2_naming_its_line(repo, capsys):
    (repo / "evals/inline.yaml").write_text(YAML.replace("not_contains: sorry",
                                                         "not_contains: 7"))
    code, report, err = run(capsys)
    assert code == EXIT_CONFIG_ERROR
    assert report["config_error"]["path"] == "evals/inline.yaml"
    assert report["config_error"]["line"] == 4
    assert "evals/inline.yaml:4" in err
