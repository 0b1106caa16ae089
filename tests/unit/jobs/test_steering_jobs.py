"""Issue 30, part 1 through the App: a pull request whose answers steer an obeying judge gets a
``failure`` check naming the cause, with an annotation on each steered example's dataset line
(real arq, Redis and git, the schema-checking fake GitHub, litellm over real HTTP to the fake
provider)."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.fake_github import FakeGitHubServer
from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import events_support, llm_support
from tests.unit.events_support import run_burst
from tests.unit.steering_support import rules, steering_repo
from tests.unit.worker_support import OWNER, REPO, gate_payload
from worker.contract import gate_job_id
from worker.pipeline.steering import STEERING

github = events_support.github  # fixtures
llm_server = llm_support.llm_server
llm = llm_support.llm


async def test_a_pull_request_that_steers_the_judge_fails(
        github: FakeGitHubServer, llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": rules("obey")})
    root = tmp_path / "repo"
    shas = steering_repo(root, llm.url)
    head, base = shas["pr/steer"], shas["main"]
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1, "head_sha": head,
                                  "base_sha": base, "author": "writer"}]})
    payload = gate_payload(root.as_uri(), head, base, number=1)
    await run_burst([("gate_pull_request", payload, gate_job_id(payload["repo"], 1, head))])
    [check] = [r for r in github.state()["check_runs"] if r["head_sha"] == head]
    assert check["conclusion"] == "failure"
    assert check["output"]["title"].startswith(f"llmgate: fail - {STEERING}: suite codes"), \
        check["output"]["title"]
    annotated = {a["start_line"] for a in check["annotations"]
                 if a["path"] == "evals/codes.jsonl" and "got no answer" in a["title"]
                 and STEERING in a["message"]}
    assert annotated == set(range(1, 9))
    assert github.state()["violations"] == []
