"""Through the App: a pull request that swaps the judge for one that disagrees with the labels
gets a ``failure`` check showing the agreement drop (real arq, Redis and git, the
schema-checking fake GitHub, litellm over real HTTP to the fake provider)."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.fake_github import FakeGitHubServer
from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import events_support, llm_support
from tests.unit.events_support import run_burst
from tests.unit.pipeline.judge_trust_support import GOOD, LAX, RULES, judged, repo
from tests.unit.worker_support import OWNER, REPO, commit, gate_payload, git
from worker.contract import gate_job_id

github = events_support.github  # fixtures
llm_server = llm_support.llm_server
llm = llm_support.llm


async def test_a_pull_request_with_a_lax_judge_is_not_trusted(
        github: FakeGitHubServer, llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": RULES})
    root = repo(tmp_path / "repo", llm.url, GOOD)
    git(root, "init", "-q", "-b", "main")
    base = commit(root, "main", {})
    head = commit(root, "pr", {".llmgate.yml": judged(llm.url, LAX)})
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1, "head_sha": head,
                                  "base_sha": base, "author": "writer"}]})
    payload = gate_payload(root.as_uri(), head, base, number=1)
    await run_burst([("gate_pull_request", payload,
                      gate_job_id(payload["repo"], 1, head))])
    [check] = [r for r in github.state()["check_runs"] if r["head_sha"] == head]
    assert check["conclusion"] == "failure"
    assert check["output"]["title"].startswith("llmgate: fail - judge not trusted: s judge "
                                               "agreement (llm_judge)"), check["output"]["title"]
    summary = check["output"]["summary"]
    assert "judge agreement (llm_judge)" in summary and "min_agreement 0.80" in summary
    assert "| s | judge agreement (llm_judge) | 1.000 | 0.500 | -0.500 |" in summary
    assert "agreement 100% -&gt; 50%" in summary  # the note, escaped for GitHub's markdown
    assert "b0: human fail, judge pass (Looks fine to me.)" in summary
    [body] = [c["body"] for c in github.state()["comments"] if c["issue_number"] == 1]
    assert "judge agreement (llm_judge)" in body
    assert github.state()["violations"] == []
