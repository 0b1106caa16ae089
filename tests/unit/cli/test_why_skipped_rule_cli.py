"""A rule that was not checked is never counted as passing in the Why sentence.

Fresh user of issue 33: in the repository `llmgate init` writes, run without ``--base``, the
rules are ``min`` (pass) and ``max_drop`` (skipped: no base), and the headline, ``why`` and the
markdown all said "all 2 rules pass." beside a list of the rules that were skipped. Through
``llmgate run`` on a real git repository.
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
    target:
      command: python3 t.py {input_file} {output_file}
    assertions:
      - type: equals
    gate:
      pass_rate:
        min: 0.5
        max_drop: 0.05
"""
ECHO = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
"""


def test_a_skipped_rule_is_not_counted_as_passing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "main", {".llmgate.yml": CONFIG, "t.py": ECHO,
                          "evals/echo.jsonl": '{"id": "a", "input": "x", "expected": "x"}\n'})
    monkeypatch.chdir(repo)
    code = main(["run", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["conclusion"]) == (EXIT_PASS, "success")
    assert report["headline"] == "1 of 2 rules pass, 1 skipped."  # before: "all 2 rules pass."
