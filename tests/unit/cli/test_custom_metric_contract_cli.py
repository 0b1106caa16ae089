"""A head that breaks its custom metric must not pass (tester16's hole 1): head's metrics
(their config and their code) are part of its evaluation contract, so a changed metric runs as
head's own contract beside base's and its error fails the run."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_PASS, main

BOT = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": "a" + example["input"][1:]}, open(sys.argv[2], "w"))
"""
METRICS = """def brevity(result):
    if result["errored"]:
        return None
    return max(0.0, min(1.0, (1000 - len(result["output"])) / 800))
"""


def config(function: str) -> str:
    python = shlex.quote(sys.executable)
    return f"""\
version: 1
suites:
  - name: answers
    dataset: evals/answers.jsonl
    target: {{command: "{python} bot.py {{input_file}} {{output_file}}"}}
    assertions:
      - type: equals
    metrics:
      - name: brevity
        type: python
        function: {function}
        per_example: true
    gate:
      custom.brevity:
        max_example_drop: {{by: 0.2, count: 0}}
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("metric-contract")
    git(root, "init", "-q", "-b", "main")
    rows = "".join(json.dumps({"id": f"e{i}", "input": f"q{i}", "expected": f"a{i}"}) + "\n"
                   for i in range(6))
    commit(root, "main", {".llmgate.yml": config("evals/metrics.py:brevity"), "bot.py": BOT,
                          "evals/answers.jsonl": rows, "evals/metrics.py": METRICS}, "base")
    commit(root, "pr-missing", {".llmgate.yml": config("evals/nope.py:brevity")}, "missing")
    git(root, "checkout", "-q", "main")
    commit(root, "pr-raises", {"evals/metrics.py": METRICS.replace('result["errored"]', "1/0")},
           "raises")
    git(root, "checkout", "-q", "main")
    return root


@pytest.mark.parametrize(("branch", "says"), [("pr-missing", "evals/nope.py"),
                                              ("pr-raises", "ZeroDivisionError")])
def test_a_head_that_breaks_its_custom_metric_does_not_pass(repo, capsys, monkeypatch, branch,
                                                            says):
    monkeypatch.chdir(repo)
    code = main(["run", "--base", "main", "--head", branch, "--no-cache"])
    shown = capsys.readouterr()
    assert code != EXIT_PASS
    assert says in shown.out + shown.err


def test_an_unchanged_metric_still_passes(repo, capsys, monkeypatch):
    monkeypatch.chdir(repo)
    assert main(["run", "--base", "main", "--head", "main", "--no-cache"]) == EXIT_PASS
