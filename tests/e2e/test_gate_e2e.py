"""End to end: signed webhook -> web process -> Redis -> arq worker -> git -> evals -> GitHub.

Everything is real but GitHub: ``redis-server``, the web process and two workers as separate
processes, git repositories built in a temp dir, and the schema-validating fake GitHub (which
records every request and fails on any that GitHub's REST description would refuse).

The example repository's pull requests here; duplicate deliveries and rerun comments in
test_gate_rerun_e2e.py, a report of 137 regressions in test_gate_annotations_e2e.py (what
they share: tests/e2e/gate_support.py).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.gate_support import (
    comments,
    commit_files,
    gate_world,  # noqa: F401 (the fixture world)
    no_violations,
    pr_payload,
)

pytestmark = pytest.mark.slow


def test_regressing_pr_fails_with_annotations_then_fix_passes_and_edits_comment(world):
    stack = world["stack"]
    resp = stack.deliver("pull_request", pr_payload(world, "opened", "pr/regress"))
    assert resp.status_code in (200, 202)
    run = stack.wait_for_check(world["shas"]["pr/regress"])[-1]
    assert run["name"] == "llmgate"
    assert run["conclusion"] == "failure"
    notes = run["annotations"]
    assert len(notes) == 11  # the example's regressing branch breaks 11 tickets
    dataset = (world["repo_dir"] / "evals" / "tickets.jsonl").read_text().splitlines()
    for note in notes:
        assert note["path"] == "evals/tickets.jsonl"
        assert note["start_line"] == note["end_line"]
        assert note["annotation_level"] == "failure"
        line = json.loads(dataset[note["start_line"] - 1])
        assert line["id"] in note["title"]
        assert line["expected"] in note["message"]
    first = comments(stack, 1)
    assert len(first) == 1 and first[0]["body"].startswith("<!-- llmgate -->")

    stack.deliver("pull_request", pr_payload(world, "synchronize", "pr/fix"))
    fixed = stack.wait_for_check(world["shas"]["pr/fix"])[-1]
    assert fixed["conclusion"] == "success"
    after = comments(stack, 1)
    assert len(after) == 1 and after[0]["id"] == first[0]["id"]
    assert after[0]["body"] != first[0]["body"]
    assert world["shas"]["pr/fix"][:7] in after[0]["body"]
    no_violations(stack)


def test_bad_signature_is_rejected_and_starts_nothing(world):
    stack = world["stack"]
    head = commit_files(world["repo_dir"], "pr/unsigned", {"X.md": "x\n"}, "x")
    resp = stack.deliver("pull_request", pr_payload(world, "opened", head, number=4),
                         secret="wrong")
    assert resp.status_code == 401
    time.sleep(2)
    assert [r for r in stack.state()["check_runs"] if r["head_sha"] == head] == []


def test_broken_config_at_head_fails_check_pointing_at_bad_line(world):
    stack = world["stack"]
    config = (world["repo_dir"] / ".llmgate.yml").read_text()
    broken = config.replace("type: equals", "type: equalz")
    bad_line = broken.splitlines().index("      - type: equalz") + 1
    head = commit_files(world["repo_dir"], "pr/broken", {".llmgate.yml": broken}, "typo")
    stack.deliver("pull_request", pr_payload(world, "opened", head, number=5))
    run = stack.wait_for_check(head)[-1]
    assert run["conclusion"] == "failure"
    assert [(a["path"], a["start_line"]) for a in run["annotations"]] == [
        (".llmgate.yml", bad_line)]
    assert "equalz" in run["annotations"][0]["message"]
    no_violations(stack)
