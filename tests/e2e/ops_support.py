"""A small gated repository for the operations end-to-end tests, with a target that can be slow.

``main`` echoes its three examples (all pass); ``pr/quick`` only adds a file; ``pr/slow`` makes
the target sleep ``SLOW_S`` seconds per example, so a job is surely running when a test stops
its worker.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.timing import scaled
from tests.unit.worker_support import commit, git
from worker.cli.demo import Stack, pull_request_payload

T = TypeVar("T")

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


def build_repo(dest: Path) -> dict[str, str]:
    """Create the repository at ``dest``; return branch -> commit SHA."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    dataset = "".join(json.dumps({"id": w, "input": w, "expected": w}) + "\n" for w in EXAMPLES)
    shas = {"main": commit(dest, "main", {".llmgate.yml": CONFIG, "target.py": TARGET,
                                           "evals/echo.jsonl": dataset})}
    shas["pr/quick"] = commit(dest, "pr/quick", {"NOTES.md": "notes\n"})
    shas["pr/slow"] = commit(dest, "pr/slow", {
        "target.py": TARGET.replace("SLEEP_S = 0", f"SLEEP_S = {SLOW_S}")})
    return shas


def open_pr(stack: Stack, shas: dict[str, str], clone_url: str, branch: str,
            number: int, action: str = "opened") -> dict[str, Any]:
    """Tell the fake GitHub about PR ``number`` (``branch`` into main); return its
    ``pull_request`` delivery with ``action`` (``opened``, ``synchronize``, ...)."""
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": number, "head_sha": shas[branch],
        "base_sha": shas["main"], "base_ref": "main", "head_ref": branch,
        "clone_url": clone_url}]})
    return pull_request_payload(action, owner=OWNER, repo=REPO, clone_url=clone_url,
                                number=number, head_sha=shas[branch], base_sha=shas["main"])


def check_runs(stack: Stack, head_sha: str) -> list[dict[str, Any]]:
    """Every check run on ``head_sha``, oldest first."""
    return [r for r in stack.state()["check_runs"] if r["head_sha"] == head_sha]


def wait_until(predicate: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll ``predicate`` every 0.1 s until it returns something true; return that.

    Raises:
        TimeoutError: ``"{what} within {timeout_s} s"`` when it never did.
    """
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    raise TimeoutError(f"{what} within {timeout_s:g} s")
