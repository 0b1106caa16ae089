"""A head target that gives no answer fails the gate when no base result could show it.

Case from the field (fresh-user hour of issue 30): a command target that crashes on every
example, in a suite with no gate rules, run with no base (``llmgate run`` without ``--base``,
or a pull request that adopts llmgate): exit 0, ``success``, and the report's ``errors`` and
``errored`` were empty; the crash was only inside each example. With a base, such examples
are regressions where base passed; without one, nothing could show them, so the head's own
target error fails the gate (fail closed) and its text is in the headline and ``errors``.
Through ``llmgate run`` on a real git repository and the App's gate job (real arq, Redis and
git, the schema-checking fake GitHub).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import worker_support
from tests.unit.worker_support import commit, gate_payload, git
from worker.cli.main import EXIT_GATE_FAILED, EXIT_PASS, main

github = worker_support.github  # fixture

CONFIG = """version: 1
suites:
  - name: echo
    dataset: evals/echo.jsonl
    target:
      command: python3 t.py {input_file} {output_file}
    assertions:
      - type: equals
"""
DATASET = ('{"id": "a", "input": "x", "expected": "x"}\n'
           '{"id": "b", "input": "y", "expected": "y"}\n')
CRASH = 'raise SystemExit("boom: no model")\n'
ECHO = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
"""
HEADLINE = ("caused by the head: echo's target gets no answer: the command exited with status 1; "
            "last output:\nboom: no model; 2 of 2 examples at head got no answer")


def build(dest: Path) -> dict[str, str]:
    """``main`` has no llmgate config; ``crash`` adopts it with a target that always exits 1,
    ``echo`` with one that answers."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    shas = {"main": commit(dest, "main", {"README.md": "bot\n"})}
    for branch, target in (("crash", CRASH), ("echo", ECHO)):
        shas[branch] = commit(dest, branch, {".llmgate.yml": CONFIG, "evals/echo.jsonl": DATASET,
                                             "t.py": target})
    return shas


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("targets") / "repo"
    return path, build(path)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", *args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_crashing_target_with_no_base_fails_and_is_quoted(
        repo: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path, shas = repo
    monkeypatch.chdir(path)
    code, report = _run(capsys, "--head", "crash")
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")  # before: 0, success
    assert report["headline"] == HEADLINE
    [error] = report["errors"]
    assert (error["side"], error["cause"], error["kind"], error["count"]) == (
        "head", "head", "target", 2)
    assert sorted(e["example_id"] for e in report["errored"]) == ["a", "b"]


def test_an_answering_target_with_no_base_still_passes(
        repo: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = repo
    monkeypatch.chdir(path)
    code, report = _run(capsys, "--head", "echo")
    assert (code, report["conclusion"], report["errors"]) == (EXIT_PASS, "success", [])


async def test_the_app_fails_a_pull_request_whose_new_suite_crashes(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]]) -> None:
    path, shas = repo
    await worker_support.run_jobs([gate_payload(str(path), shas["crash"], shas["main"])])
    [run] = github.state()["check_runs"]
    assert run["conclusion"] == "failure"  # before: success
    assert "boom: no model" in run["output"]["summary"]
