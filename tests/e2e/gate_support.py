"""What the gate's end-to-end tests share (tests/e2e/test_gate*_e2e.py).

The module fixture ``world`` (one stack: ``redis-server``, the web process and two workers as
processes, and the example repository; a test file imports `gate_world` to have it), the pull
request payloads of that repository, and git commits on a branch.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worker.cli.demo import Stack, build_example_repo, pull_request_payload

OWNER, REPO = "acme", "support-bot"


@pytest.fixture(scope="module", name="world")
def gate_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The fixture ``world``: one stack and one example repository for the module (processes
    are slow to start)."""
    work = tmp_path_factory.mktemp("e2e")
    repo_dir = work / "support-bot"
    shas = build_example_repo(repo_dir)
    call_log = work / "calls.log"
    call_log.write_text("")  # the target sandbox lets the bot append to it (it must exist)
    with Stack(work, workers=2, worker_env={"SUPPORT_BOT_CALL_LOG": str(call_log),
                                            "LLMGATE_SANDBOX_WRITE_PATHS": str(call_log)}) as stack:
        yield {"stack": stack, "shas": shas, "repo_dir": repo_dir, "call_log": call_log,
               "clone_url": repo_dir.as_uri(), "work": work}


def pr_payload(world: dict[str, Any], action: str, head: str, number: int = 1,
               base: str = "main") -> dict[str, Any]:
    """Open (or move) pull request ``number`` from branch or SHA ``head`` onto ``base`` on the fake
    GitHub; return the ``pull_request`` delivery of ``action``."""
    shas = world["shas"]
    head_sha = shas.get(head, head)
    world["stack"].github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": number, "head_sha": head_sha,
        "base_sha": shas[base], "base_ref": base, "head_ref": head,
        "clone_url": world["clone_url"]}]})
    return pull_request_payload(action, owner=OWNER, repo=REPO, clone_url=world["clone_url"],
                                number=number, head_sha=head_sha, base_sha=shas[base])


def comments(stack: Stack, number: int) -> list[dict[str, Any]]:
    return [c for c in stack.state()["comments"] if c["issue_number"] == number]


def no_violations(stack: Stack) -> None:
    """Assert the fake GitHub refused no request (GitHub's schemas)."""
    assert stack.state()["violations"] == []


def commit_files(repo_dir: Path, branch: str, files: dict[str, str], message: str) -> str:
    git = ["git", "-C", str(repo_dir), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "checkout", "-q", "-B", branch, "main"], check=True)
    for name, text in files.items():
        path = repo_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                         text=True).stdout.strip()
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    return sha
