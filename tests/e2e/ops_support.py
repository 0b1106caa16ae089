"""A small gated repository for the operations end-to-end tests, with a target that can be slow.

``main`` echoes its three examples (all pass); ``pr/quick`` only adds a file; ``pr/slow`` makes
the target sleep ``SLOW_S`` seconds per example, so a job is surely running when a test stops
its worker.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from worker.demo import Stack, pull_request_payload

OWNER, REPO = "acme", "ops"
EXAMPLES = ("alpha", "bravo", "charlie")
SLOW_S = 4
TARGET = """import json, sys, time
SLEEP_S = 0
example = json.load(open(sys.argv[1]))
time.sleep(SLEEP_S)
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
"""
CONFIG = """version: 1
settings:
  concurrency: 4
  timeout: 60
suites:
  - name: echo
    dataset: evals/echo.jsonl
    target:
      command: python3 target.py {input_file} {output_file}
    assertions:
      - type: equals
    gate:
      pass_rate:
        min: 0.5
"""


def _git(repo: Path, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(repo), "LANG": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


def _commit(repo: Path, branch: str, files: dict[str, str]) -> str:
    if branch != "main":
        _git(repo, "switch", "-q", "-C", branch, "main")
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", branch)
    sha = _git(repo, "rev-parse", "HEAD")
    _git(repo, "switch", "-q", "main")
    return sha


def build_repo(dest: Path) -> dict[str, str]:
    """Create the repository at ``dest``; return branch -> commit SHA."""
    dest.mkdir(parents=True)
    _git(dest, "init", "-q", "-b", "main")
    dataset = "".join(json.dumps({"id": w, "input": w, "expected": w}) + "\n" for w in EXAMPLES)
    shas = {"main": _commit(dest, "main", {".llmgate.yml": CONFIG, "target.py": TARGET,
                                           "evals/echo.jsonl": dataset})}
    shas["pr/quick"] = _commit(dest, "pr/quick", {"NOTES.md": "notes\n"})
    shas["pr/slow"] = _commit(dest, "pr/slow", {
        "target.py": TARGET.replace("SLEEP_S = 0", f"SLEEP_S = {SLOW_S}")})
    return shas


def open_pr(stack: Stack, shas: dict[str, str], clone_url: str, branch: str,
            number: int) -> dict[str, Any]:
    """Tell the fake GitHub about PR ``number`` (``branch`` into main); return its delivery."""
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": number, "head_sha": shas[branch],
        "base_sha": shas["main"], "base_ref": "main", "head_ref": branch,
        "clone_url": clone_url}]})
    return pull_request_payload("opened", owner=OWNER, repo=REPO, clone_url=clone_url,
                                number=number, head_sha=shas[branch], base_sha=shas["main"])


def check_runs(stack: Stack, head_sha: str) -> list[dict[str, Any]]:
    """Every check run on ``head_sha``, oldest first."""
    return [r for r in stack.state()["check_runs"] if r["head_sha"] == head_sha]
