"""Lines are counted at ``\\n`` only in every dataset format (issue 31), through ``llmgate run``.

Python's ``str.splitlines`` and PyYAML also break lines at U+2028, U+2029, U+0085 and more; a
cell or a string may hold them, and GitHub does not show a new line there.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.unit.worker_support import git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, main

ECHO = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": str(example["input"])}, open(sys.argv[2], "w"))
"""


def write_repo(root: Path, dataset: str, text: str, columns: str = "") -> None:
    python = shlex.quote(sys.executable)
    (root / "evals").mkdir(parents=True)
    (root / "echo.py").write_text(ECHO)
    (root / dataset).write_bytes(text.encode("utf-8"))
    (root / ".llmgate.yml").write_text(f"""version: 1
suites:
  - name: s
    dataset: {dataset}
    target: {{command: "{python} echo.py {{input_file}} {{output_file}}"}}
{columns}    assertions: [{{type: equals}}]
    gate: {{pass_rate: {{min: 1.0}}}}
""")


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    monkeypatch.chdir(root)
    return root


def run(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = main(["run", "--format", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def failed_lines(report: dict) -> dict[str, int]:
    return {e["id"]: e["line"] for e in report["examples"]["s"]["head"] if not e["passed"]}


def test_a_csv_from_csv_writer_with_u2028_in_a_cell_is_read(repo, capsys):
    """Field case: "2 cells, but the header has 3" for a cell holding U+2028."""
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerows([["id", "input", "expected"], ["a", "one\u2028two", "one\u2028two"],
                      ["b", "three", "four"]])
    write_repo(repo, "evals/d.csv", out.getvalue())
    code, report, err = run(capsys)
    assert report["config_error"] is None, err
    assert code == EXIT_GATE_FAILED
    assert failed_lines(report) == {"b": 3}
    [passed] = [e for e in report["examples"]["s"]["head"] if e["passed"]]
    assert passed["output"] == "one\u2028two"


def test_a_yaml_dataset_names_the_line_github_shows_after_a_line_separator(repo, capsys):
    """Field case: after an input holding U+2028 and U+0085, the next example's annotation
    landed two lines low (PyYAML counts a line at each)."""
    write_repo(repo, "evals/d.yaml", '- id: a\n  input: "x\u2028y\x85z"\n  expected: '
               '"x\u2028y\x85z"\n- id: b\n  input: three\n  expected: four\n')
    code, report, err = run(capsys)
    assert code == EXIT_GATE_FAILED, err
    assert failed_lines(report) == {"b": 4}


def test_a_yaml_config_error_after_a_line_separator_names_its_line(repo, capsys):
    write_repo(repo, "evals/d.yaml", '- id: a\n  input: "x\u2028y\u2029z"\n- id: b\n'
               '  input: three\n  not_contains: 7\n')
    code, report, err = run(capsys)
    assert code == EXIT_CONFIG_ERROR
    assert (report["config_error"]["path"], report["config_error"]["line"]) == (
        "evals/d.yaml", 3)
    assert "evals/d.yaml:3" in err


def test_a_jsonl_dataset_with_raw_line_separators_keeps_its_lines(repo, capsys):
    rows = [{"id": "a", "input": "x\u2028y\x85z\x0cw", "expected": "x\u2028y\x85z\x0cw"},
            {"id": "b", "input": "three", "expected": "four"}]
    write_repo(repo, "evals/d.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                              for r in rows))
    code, report, err = run(capsys)
    assert code == EXIT_GATE_FAILED, err
    assert failed_lines(report) == {"b": 2}
