"""``llmgate run`` says that it does not apply ``on_paths`` (fresh user, issue 30).

A suite with ``on_paths`` that no changed file matches is skipped on the App; ``llmgate run``
knows no changed files and runs it, and said nothing, so a user took the local verdict for the
App's. The report now notes it. Through ``llmgate run`` on a real git repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_PASS, main

CONFIG = """version: 1
suites:
  - name: echo
    dataset: evals/echo.jsonl
    on_paths: ["prompts/**"]
    target:
      command: python3 t.py {input_file} {output_file}
    assertions:
      - type: equals
"""
ECHO = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
"""
NOTE = ("on_paths not applied: no changed files were given (llmgate run and a push gate every "
        "suite; a pull request's changed files decide on the App)")


def test_the_report_notes_that_on_paths_is_not_applied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "main", {".llmgate.yml": CONFIG, "t.py": ECHO,
                          "evals/echo.jsonl": '{"id": "a", "input": "x", "expected": "x"}\n'})
    head = commit(repo, "docs", {"README.md": "only docs\n"})
    monkeypatch.chdir(repo)
    code = main(["run", "--base", "main", "--head", head, "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["conclusion"]) == (EXIT_PASS, "success")
    assert NOTE in report["notes"]
