"""End to end (tests/e2e/test_gate_e2e.py's stack): duplicate and racing deliveries start one
run; a ``/llmgate rerun`` comment runs again when a writer posts it, and a reader's, a bot's or
an edited one does not.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from tests.e2e.gate_support import (
    OWNER,
    REPO,
    comments,
    commit_files,
    gate_world,  # noqa: F401 (the fixture world)
    no_violations,
    pr_payload,
)
from worker.cli.demo import issue_comment_payload

pytestmark = pytest.mark.slow


def test_duplicate_delivery_and_racing_opened_synchronize_start_one_run(world):
    stack, call_log = world["stack"], world["call_log"]
    head = commit_files(world["repo_dir"], "pr/dupe", {"README.md": "docs only\n"}, "docs")
    call_log.write_text("")
    client = redis.Redis.from_url(stack.redis_url)  # forget the baselines earlier PRs stored,
    client.delete(*client.keys("llmgate:baseline*") or ["none"])  # so base runs here too
    client.close()
    payload = pr_payload(world, "synchronize", head, number=2)
    assert stack.deliver("pull_request", payload, delivery_id="dup-1").status_code < 300
    assert stack.deliver("pull_request", payload, delivery_id="dup-1").status_code < 300
    opened = pr_payload(world, "opened", head, number=2)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda p: stack.deliver("pull_request", p).status_code,
                                [opened, payload, opened, payload]))
    assert all(code < 300 for code in answers)
    stack.wait_for_check(head)
    time.sleep(3)  # a second run, if one had started, would show up by now
    runs = [r for r in stack.state()["check_runs"] if r["head_sha"] == head]
    assert len(runs) == 1
    examples = len((world["repo_dir"] / "evals" / "tickets.jsonl").read_text().splitlines())
    assert len(call_log.read_text().splitlines()) == 2 * examples  # base + head, once each
    assert len(comments(stack, 2)) == 1


def test_rerun_comment_by_writer_runs_by_reader_not(world):
    stack = world["stack"]
    head = commit_files(world["repo_dir"], "pr/rerun", {"NOTES.md": "n\n"}, "notes")
    stack.deliver("pull_request", pr_payload(world, "opened", head, number=3))
    stack.wait_for_check(head)
    stack.github("POST", "/_fake/setup", {"collaborators": {"writer": "write", "reader": "read"}})
    common = {"owner": OWNER, "repo": REPO, "clone_url": world["clone_url"], "number": 3}
    reader = issue_comment_payload(**common, body="/llmgate rerun", login="reader", comment_id=31)
    stack.deliver("issue_comment", reader)
    bot = issue_comment_payload(**common, body="comment `/llmgate rerun` to retry",
                                login="llmgate-demo[bot]", user_type="Bot", comment_id=32)
    stack.deliver("issue_comment", bot)
    edited = issue_comment_payload(**common, body="/llmgate rerun", login="writer",
                                   action="edited", comment_id=33)
    stack.deliver("issue_comment", edited)
    writer = issue_comment_payload(**common, body="/llmgate rerun", login="writer", comment_id=34)
    stack.deliver("issue_comment", writer)
    stack.deliver("issue_comment", writer)  # same comment, new delivery id: one run all the same
    runs = stack.wait_for_check(head, count=2)
    time.sleep(3)
    runs = [r for r in stack.state()["check_runs"] if r["head_sha"] == head]
    assert len(runs) == 2
    reactions = stack.state()["reactions"]
    assert [r["comment_id"] for r in reactions if r["comment_id"] in (31, 32, 33, 34)] == [34]
    no_violations(stack)
