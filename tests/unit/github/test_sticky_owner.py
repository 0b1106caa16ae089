"""The sticky comment is llmgate's own: only this App's bot user's marked comment is edited.

Field case: a repository with two llmgate Apps installed (production and a staging App, both
writing ``<!-- llmgate -->``) had each App overwrite the other's comment on every run. The gate
job runs in a real arq worker against the schema-checking fake GitHub, which answers
``GET /app`` with its slug (``llmgate``), so the App's bot is ``llmgate[bot]``.
"""

from __future__ import annotations

from tests.unit import worker_support
from tests.unit.events_support import run_burst
from tests.unit.github_fixtures import requests_for
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, WRITER, gate_payload, run_jobs
from worker.contract import COMMENT_MARKER

github, tiny_repo = worker_support.github, worker_support.tiny_repo  # fixtures

STAGING = f"{COMMENT_MARKER}\nllmgate (staging App): pass"


async def test_another_bots_marked_comment_is_never_edited(github, tiny_repo):
    repo, shas = tiny_repo
    github.setup({"comments": [
        {"owner": OWNER, "repo": REPO, "issue_number": n, "body": STAGING,
         "user_login": "llmgate-staging[bot]", "user_type": "Bot"} for n in (1, 2)]})
    payloads = [gate_payload(str(repo), shas["pr/drop"], shas["main"], number=1),
                gate_payload(str(repo), shas["pr/docs"], shas["main"], number=2)]
    await run_jobs(payloads)
    # A push to each PR: a new head, so a new body our comment is edited to (an identical body
    # is left alone, and whether round one ran base or reused the other PR's stored baseline
    # depends on timing, so the same heads again could leave a body unchanged).
    pushed = [gate_payload(str(repo), shas["pr/docs"], shas["main"], number=1),
              gate_payload(str(repo), shas["pr/drop"], shas["main"], number=2)]
    await run_jobs(pushed, job_suffix="again")
    state = github.state()
    by_author = {(c["issue_number"], c["user"]["login"]): c for c in state["comments"]}
    assert sorted(by_author) == [(1, "llmgate-staging[bot]"), (1, "llmgate[bot]"),
                                 (2, "llmgate-staging[bot]"), (2, "llmgate[bot]")]
    for number in (1, 2):
        assert by_author[(number, "llmgate-staging[bot]")]["history"] == [STAGING]
        ours = by_author[(number, "llmgate[bot]")]  # created, then edited by the second run
        assert ours["body"].startswith(COMMENT_MARKER) and len(ours["history"]) == 2
    # GET /app once per worker process (two workers ran: two requests), answered per schema
    assert len(requests_for(state, "apps/get-authenticated")) == 2
    assert state["violations"] == []



async def test_the_accept_audit_line_goes_to_our_comment_only(github, tiny_repo):
    repo, shas = tiny_repo
    github.setup({"comments": [{"owner": OWNER, "repo": REPO, "issue_number": 1,
                                "body": STAGING, "user_login": "llmgate-staging[bot]",
                                "user_type": "Bot"}],
                  "pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                             "head_sha": shas["pr/drop"], "base_sha": shas["main"]}]})
    await run_jobs([gate_payload(str(repo), shas["pr/drop"], shas["main"])])
    [run] = github.state()["check_runs"]
    accept = {"delivery_id": "a-1", "installation_id": INSTALLATION_ID,
              "repo": {"owner": OWNER, "name": REPO, "clone_url": str(repo)}, "pr_number": 1,
              "check_run_id": run["id"], "head_sha": run["head_sha"], "accepter": WRITER}
    [result] = (await run_burst([("accept_regression", accept, "accept-1")])).values()
    assert result == {"status": "accepted", "head_sha": shas["pr/drop"]}
    staging, ours = github.state()["comments"]
    assert staging["history"] == [STAGING]
    assert ours["user"]["login"] == "llmgate[bot]"
    assert ours["body"].startswith(f"{COMMENT_MARKER}\n> **Regression accepted** by `writer`")
