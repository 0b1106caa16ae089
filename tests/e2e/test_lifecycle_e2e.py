"""Run lifecycle with real processes: superseded and closed runs.

Everything is a real process on loopback (``worker.cli.demo.Stack``: redis-server, the fake GitHub,
the web process, arq workers); the repository's ``pr/slow`` target sleeps, so a push lands while
the run is busy.

- A push to the pull request cancels the running job of the older head: its check run ends
  ``cancelled`` with the reason, the new head's run completes, and the sticky comment only
  ever shows the new head. Closing a pull request cancels its running job the same way.

A SIGKILLed worker and tries running out are in test_lifecycle_kill_e2e.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.lifecycle_support import in_progress_run, run_summary
from tests.e2e.ops_support import OWNER, REPO, build_repo, check_runs, open_pr, wait_until
from worker.cli.demo import Stack, pull_request_payload

pytestmark = pytest.mark.slow


def test_a_push_or_a_close_cancels_the_running_job_of_the_older_head(tmp_path: Path) -> None:
    shas = build_repo(tmp_path / "repo")
    clone_url = (tmp_path / "repo").as_uri()
    slow, quick = shas["pr/slow"], shas["pr/quick"]
    with Stack(tmp_path, workers=1) as stack:
        assert stack.deliver("pull_request", open_pr(stack, shas, clone_url, "pr/slow", 1)
                             ).status_code == 202
        wait_until(lambda: in_progress_run(stack, slow), 60, "the slow run did not start")
        time.sleep(1)  # into the slow target
        pushed = time.time()
        stack.deliver("pull_request", open_pr(stack, shas, clone_url, "pr/quick", 1, "synchronize"))
        (new,) = stack.wait_for_check(quick, timeout_s=90)
        (old,) = stack.wait_for_check(slow, timeout_s=30)
        assert (old["conclusion"], run_summary(old)) == (
            "cancelled", f"Superseded by a push of {quick[:7]}.")
        assert old["output"]["title"] == "llmgate: cancelled"
        assert new["conclusion"] == "success"
        cancelled_at = max(r["at"] for r in stack.state()["requests"]
                           if r["operation"] == "checks/update"
                           and r["path"].endswith(f"/check-runs/{old['id']}"))
        assert cancelled_at - pushed < 10  # the watch polls every 2 s; the slow run needs 4+
        (comment,) = [c for c in stack.state()["comments"] if c["issue_number"] == 1]
        versions = [comment["body"], *comment.get("history", [])]  # every edit, oldest first
        assert quick[:7] in comment["body"]
        assert all(slow[:7] not in body for body in versions)

        stack.deliver("pull_request", open_pr(stack, shas, clone_url, "pr/slow", 2))
        wait_until(lambda: len(check_runs(stack, slow)) == 2 and in_progress_run(stack, slow), 60,
                   "the second slow run did not start")
        closed = pull_request_payload("closed", owner=OWNER, repo=REPO, clone_url=clone_url,
                                      number=2, head_sha=slow, base_sha=shas["main"])
        stack.github("POST", "/_fake/setup", {"pulls": [{
            "owner": OWNER, "repo": REPO, "number": 2, "head_sha": slow,
            "base_sha": shas["main"], "base_ref": "main", "head_ref": "pr/slow",
            "clone_url": clone_url, "state": "closed"}]})
        answer = stack.deliver("pull_request", closed)
        assert (answer.status_code, answer.json()) == (200, {"status": "recorded"})
        runs = stack.wait_for_check(slow, count=2, timeout_s=30)
        assert [(r["conclusion"], run_summary(r)) for r in runs][1] == (
            "cancelled", "The pull request was closed.")
        assert [c["issue_number"] for c in stack.state()["comments"]] == [1]
        assert stack.state()["violations"] == []
