"""End to end (tests/e2e/test_gate_e2e.py's stack): 137 regressions are all annotated, in
check run updates of at most 50 annotations each (GitHub's limit per request).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.gate_support import (
    OWNER,
    commit_files,
    gate_world,  # noqa: F401 (the fixture world)
    no_violations,
)
from worker.cli.demo import pull_request_payload

pytestmark = pytest.mark.slow


def test_137_regressions_are_all_annotated_in_batches_of_50(world):
    stack = world["stack"]
    lines = [json.dumps({"id": f"e{i:03d}", "input": f"word{i}", "expected": f"word{i}"})
             for i in range(137)]
    echo = ("import json, sys\nexample = json.load(open(sys.argv[1]))\n"
            "json.dump({'output': example['input']}, open(sys.argv[2], 'w'))\n")
    config = ("version: 1\nsettings: {concurrency: 8}\nsuites:\n  - name: echo\n"
              "    dataset: evals/echo.jsonl\n"
              "    target:\n      command: python3 echo.py {input_file} {output_file}\n"
              "    assertions: [{type: equals}]\n    gate: {pass_rate: {max_drop: 0.05}}\n")
    files = {"big/.llmgate.yml": config, "big/echo.py": echo,
             "big/evals/echo.jsonl": "\n".join(lines) + "\n"}
    repo_dir = world["work"] / "big-repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo_dir)], check=True)
    for name, text in files.items():
        (repo_dir / name.removeprefix("big/")).parent.mkdir(parents=True, exist_ok=True)
        (repo_dir / name.removeprefix("big/")).write_text(text)
    git = ["git", "-C", str(repo_dir), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    base = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    broken = echo.replace("example['input']", "'nope'")
    head = commit_files(repo_dir, "pr/break", {"echo.py": broken}, "break")
    payload = pull_request_payload("opened", owner=OWNER, repo="big", clone_url=repo_dir.as_uri(),
                                   number=6, head_sha=head, base_sha=base.strip())
    stack.deliver("pull_request", payload)
    run = stack.wait_for_check(head, timeout_s=180)[-1]
    assert run["conclusion"] == "failure"
    assert len(run["annotations"]) == 137
    assert sorted(a["start_line"] for a in run["annotations"]) == list(range(1, 138))
    sizes = [len((req.get("body") or {}).get("output", {}).get("annotations", []))
             for req in stack.state()["requests"]
             if req["operation"] in ("checks/create", "checks/update")
             and req["path"].endswith(f"/check-runs/{run['id']}")]
    assert [s for s in sizes if s] == [50, 50, 37]
    no_violations(stack)
