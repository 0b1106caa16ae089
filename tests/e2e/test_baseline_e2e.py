"""End to end: a push to main stores a baseline; a PR on that commit then makes zero base calls.

Real processes (redis-server, the web process, an arq worker, the fake GitHub), real git, and
the fake OpenAI-compatible provider in this process, which counts every call. The config turns
the response cache off, so the only thing that can spare the base side its calls is the stored
baseline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.e2e.model_support import KEY_ENV, build_support_repo, support_config
from tests.fakes.fake_llm import running_fake_llm
from tests.timing import scaled
from tests.unit.worker_support import commit
from worker.cli.demo import FIXTURES, INSTALLATION_ID, Stack, pull_request_payload

pytestmark = pytest.mark.slow

OWNER, REPO = "acme", "baseline-bot"
TICKETS = ["refund for order 1", "refund for order 2", "refund for order 3"]


def config(url: str) -> str:
    return support_config(url, settings="  cache: false\n",
                          rubric="The reply mentions the refund.")


def push_payload(clone_url: str, sha: str) -> dict[str, Any]:
    """GitHub's example ``push`` delivery, moved to this repository's ``main``."""
    data: dict[str, Any] = json.loads((FIXTURES / "push.json").read_text())
    data.update(ref="refs/heads/main", after=sha, before="0" * 40)
    data["installation"] = {"id": INSTALLATION_ID, "node_id": "MDIz"}
    repository = data["repository"]
    repository.update(name=REPO, full_name=f"{OWNER}/{REPO}", clone_url=clone_url,
                      default_branch="main", master_branch="main", pushed_at=int(time.time()))
    repository["owner"]["login"] = OWNER
    return data


def wait_for_latest(redis_url: str, sha: str, timeout_s: float = 120) -> dict[str, Any]:
    """Wait until main's latest baseline is ``sha``; return the pointer."""
    client = redis.Redis.from_url(redis_url)
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            raw = client.get(f"llmgate:baseline-latest:{OWNER}/{REPO}:main")
            if raw is not None and json.loads(raw)["sha"] == sha:
                pointer: dict[str, Any] = json.loads(raw)
                return pointer
            time.sleep(0.2)
    finally:
        client.close()
    raise TimeoutError(f"no baseline of {sha[:7]} after {timeout_s} s")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("baseline-e2e")
    with running_fake_llm({"rules": [{"model": "judge-model", "match": "",
                                      "reply": "PASS"}]}) as llm:
        repo = work / REPO
        base = build_support_repo(repo, config(llm.url), "Base prompt. Ticket: {{ input }}",
                                  TICKETS)
        head = commit(repo, "pr/prompt", {"prompts/support.txt": "Head prompt. {{ input }}"})
        with Stack(work, workers=1, worker_env={KEY_ENV: "sk-e2e-fake"}) as stack:
            yield {"stack": stack, "llm": llm, "repo": repo, "base": base, "head": head}


def test_a_pr_on_a_pushed_commit_makes_zero_base_calls(world):
    stack, llm, base, head = world["stack"], world["llm"], world["base"], world["head"]
    clone_url = world["repo"].as_uri()
    answer = stack.deliver("push", push_payload(clone_url, base))
    assert (answer.status_code, answer.json()) == (202, {"status": "queued"})
    pointer = wait_for_latest(stack.redis_url, base)
    assert len(pointer["keys"]) == 1
    pushed = llm.calls()
    assert len(pushed) == 2 * len(TICKETS)  # the push ran base: one answer, one judge each
    assert all("Base prompt." in json.dumps(c["messages"]) for c in pushed
               if c["model"] == "bot-model")
    assert stack.state()["check_runs"] == []  # the push job creates no check run

    llm.reset()
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": 1, "head_sha": head, "base_sha": base,
        "base_ref": "main", "head_ref": "pr/prompt", "clone_url": clone_url}]})
    payload = pull_request_payload("opened", owner=OWNER, repo=REPO, clone_url=clone_url,
                                   number=1, head_sha=head, base_sha=base)
    assert stack.deliver("pull_request", payload).status_code == 202
    run = stack.wait_for_check(head, timeout_s=240)[-1]
    assert run["conclusion"] == "success"

    calls = llm.calls()
    bot_calls = [c for c in calls if c["model"] == "bot-model"]
    # head only, and the steering probe's controls (worker/pipeline/steering.py): base's 3
    # stored answers judged against other tickets; this judge passes anything, so it stops there
    assert len(bot_calls) == len(TICKETS) and len(calls) == 3 * len(TICKETS)
    assert "it cannot test this judge" in run["output"]["summary"]
    # base's target never ran (its stored answers are what the probe's judge calls quote)
    assert not any("Base prompt." in json.dumps(c["messages"]) for c in bot_calls)
    [comment] = [c for c in stack.state()["comments"] if c["issue_number"] == 1]
    assert f"compared with {base[:7]} (stored baseline from the push to main, " \
        in comment["body"]
    assert "Model calls at base" not in run["output"]["summary"]
    assert stack.state()["violations"] == []
