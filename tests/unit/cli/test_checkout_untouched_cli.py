"""``llmgate run`` leaves no file in the user's checkout (issue 33): no ``__pycache__`` of a
target's local module or of a Python metric, nothing else. Through `main` on a real repository
whose command target imports a module of the repository and whose suite has a ``type: python``
metric importing one too; `git status --porcelain --ignored` is the same before and after.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_PASS, main

CONFIG = """version: 1
suites:
  - name: echo
    dataset: evals/echo.jsonl
    target:
      command: python3 t.py {input_file} {output_file}
    assertions:
      - type: equals
    metrics:
      - name: share
        type: python
        function: evals/metrics.py:share
    gate: {pass_rate: {min: 0.5}, custom.share: {min: 0.5}}
"""
TARGET = """import json, sys
import helper
example = json.load(open(sys.argv[1]))
json.dump({"output": helper.echo(example["input"])}, open(sys.argv[2], "w"))
"""
METRICS = """from evals import scoring

def share(results):
    return scoring.passed(results)
"""
SCORING = """def passed(results):
    return sum(r["passed"] for r in results) / len(results)
"""


def status(repo: Path) -> str:
    """``git status --porcelain --ignored``: every file git sees as new, changed or ignored."""
    return subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--ignored"],
                          capture_output=True, text=True, check=True).stdout


def test_a_run_leaves_the_checkout_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "main", {".llmgate.yml": CONFIG, "t.py": TARGET,
                          "helper.py": "def echo(text):\n    return text\n",
                          "evals/__init__.py": "", "evals/metrics.py": METRICS,
                          "evals/scoring.py": SCORING,
                          "evals/echo.jsonl": '{"id": "a", "input": "x", "expected": "x"}\n'})
    (repo / "helper.py").write_text("def echo(text):\n    return text  # changed\n")
    before = status(repo)
    monkeypatch.chdir(repo)
    for args in ([], ["--base", "main"]):  # the working tree alone, and against a base
        assert main(["run", *args, "--format", "json", "--no-cache"]) == EXIT_PASS
        assert '"custom.share"' in capsys.readouterr().out  # the metric ran
        assert status(repo) == before
    assert not list(repo.rglob("__pycache__"))
