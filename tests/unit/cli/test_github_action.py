"""The GitHub Action's gate step (deploy/github-action/gate.sh) under a simulated Actions
environment: a real ``pull_request`` payload (tests/fixtures/github/webhooks, its SHAs
pointed at the tiny repository), ``GITHUB_STEP_SUMMARY`` and the workflow commands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.unit.worker_support import build_tiny_repo
from worker.cli.action import escape, workflow_annotations

ROOT = Path(__file__).resolve().parents[3]
ACTION = ROOT / "deploy" / "github-action"
PAYLOAD = ROOT / "tests/fixtures/github/webhooks/pull_request.opened.json"


def test_workflow_command_escaping():
    assert escape("50%\nnext") == "50%25%0Anext"
    assert escape("a:b,c", prop=True) == "a%3Ab%2Cc"
    assert workflow_annotations({"config_error": {"path": ".llmgate.yml", "line": 7,
                                                  "message": "bad"}, "regressions": []}) == [
        "::error file=.llmgate.yml,line=7,title=llmgate configuration error::bad"]


def test_the_action_declares_its_inputs_and_runs_the_script():
    action = yaml.safe_load((ACTION / "action.yml").read_text())
    assert set(action["inputs"]) == {"version", "baseline-store", "allow-undecided"}
    assert action["runs"]["steps"][-1]["run"] == '"$GITHUB_ACTION_PATH/gate.sh"'
    assert os.access(ACTION / "gate.sh", os.X_OK)


@pytest.mark.slow
def test_gate_step_writes_summary_and_annotations_and_fails_the_job(tmp_path: Path):
    repo = tmp_path / "repo"
    shas = build_tiny_repo(repo)
    event = json.loads(PAYLOAD.read_text())
    event["pull_request"]["base"]["sha"] = shas["main"]
    event["pull_request"]["head"]["sha"] = shas["pr/drop"]
    (tmp_path / "event.json").write_text(json.dumps(event))
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    llmgate = shutil.which("llmgate", path=str(Path(sys.executable).parent))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_ACTIONS": "true",
           "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
           "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(tmp_path),
           "LLMGATE": str(llmgate), "LLMGATE_CACHE_DIR": str(tmp_path / "cache"),
           "LLMGATE_BASELINE_STORE": str(tmp_path / "baselines")}
    done = subprocess.run([str(ACTION / "gate.sh")], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    [annotation] = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert annotation.startswith("::error file=evals/echo.jsonl,line=2,title=llmgate%3A echo::"
                                 "bravo: ")
    text = summary.read_text()
    assert text.startswith("earlier step\n### llmgate: failure")
    assert "| echo | 1.00 | 0.75 |" in text
    assert list((tmp_path / "baselines").rglob("*.rec"))  # the base was stored for next time


def test_the_gitlab_example_runs_llmgate_in_merge_requests():
    job = yaml.safe_load((ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text())["llmgate"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert any(step.startswith("llmgate run --base") for step in job["script"])
