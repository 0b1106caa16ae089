"""End to end through the App: the consistency example's pull requests on the fake GitHub.

webhook -> worker process -> litellm over real HTTP to the fake provider (in this process) ->
check run with annotations and the Details page's consistency section on the fake GitHub.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import running_fake_llm
from tests.unit.examples.test_example_quiz_consistency import EXAMPLE, _builder
from worker.cli.demo import Stack, pull_request_payload

pytestmark = pytest.mark.slow

OWNER, REPO = "acme", "quiz"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("consistency-e2e")
    with running_fake_llm(_builder().fake_setup()) as llm:
        repo = work / REPO
        done = subprocess.run([sys.executable, str(EXAMPLE / "build_repo.py"), str(repo),
                               "--api-base", llm.url], check=True, capture_output=True,
                              text=True)
        with Stack(work, workers=1, worker_env={"QUIZ_API_KEY": "sk-e2e-fake"}) as stack:
            yield {"stack": stack, "repo": repo, "shas": json.loads(done.stdout)}


def _gate(world: dict[str, Any], number: int, branch: str) -> dict[str, Any]:
    stack, shas, clone_url = world["stack"], world["shas"], Path(world["repo"]).as_uri()
    head, base = shas[branch], shas["main"]
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": number, "head_sha": head, "base_sha": base,
        "base_ref": "main", "head_ref": branch, "clone_url": clone_url}]})
    payload = pull_request_payload("opened", owner=OWNER, repo=REPO, clone_url=clone_url,
                                   number=number, head_sha=head, base_sha=base)
    assert stack.deliver("pull_request", payload).status_code < 300
    run: dict[str, Any] = stack.wait_for_check(head, timeout_s=240)[-1]
    return run


def test_order_dependent_answers_fail_the_check(world):
    """pr/fix's pass is checked through `llmgate run` (tests/unit/examples/), which runs the
    same engine; one App gate keeps this test to the App's own part."""
    run = _gate(world, 1, "pr/order")
    assert run["conclusion"] == "failure"
    summary, text = run["output"]["summary"], run["output"]["text"]
    assert "| quiz | original_accuracy | 1.000 | 1.000 |" in summary
    assert "| quiz | rc_agree | 1.000 | 0.583 |" in summary
    assert text.startswith("#### Consistency: quiz")
    assert "12 questions became inconsistent at head" in text
    assert "| MCA(c) head | 1.00 |" in text
    assert {a["path"] for a in run["annotations"]} == {"evals/quiz.jsonl"}
    assert world["stack"].state()["violations"] == []
