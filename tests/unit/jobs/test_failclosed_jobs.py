"""The App fails closed: issue 12's cases through the gate job (real arq, Redis and git, the
schema-checking fake GitHub, litellm over real HTTP to the fake provider), and Let through.

The repository is tests/unit/failclosed_support.py's; before issue 12 each of the four PR
branches below got a ``neutral`` check (which GitHub counts as passing) with 5 regressions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_github import FakeGitHubServer
from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import events_support, failclosed_support, llm_support
from tests.unit.events_support import run_burst
from tests.unit.failclosed_support import FOREIGN_BASE, LINES
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, gate_payload
from worker.contract import COMMENT_MARKER, gate_job_id
from worker.gate import accept
from worker.gate.accept import LET_THROUGH_BUTTON, RERUN_BUTTON

github = events_support.github  # fixtures
llm_server = llm_support.llm_server
llm = llm_support.llm


repo = failclosed_support.failclosed_repo


@pytest.fixture(autouse=True)
def no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "FAKE_LLM_KEY_TYPO", "LLMGATE_ALLOWED_API_BASES"):
        monkeypatch.delenv(name, raising=False)


async def gate_prs(github: FakeGitHubServer, repo: tuple[Path, dict[str, str]],
                   branches: list[str], base: str = "main") -> dict[str, dict[str, Any]]:
    """Open one PR per branch against ``base``, run their gate jobs; return branch -> check."""
    path, shas = repo
    pulls = [{"owner": OWNER, "repo": REPO, "number": n, "head_sha": shas[b],
              "base_sha": shas[base], "author": "writer"} for n, b in enumerate(branches, 1)]
    github.fake.setup({"pulls": pulls})
    jobs = []
    for number, branch in enumerate(branches, 1):
        payload = gate_payload(path.as_uri(), shas[branch], shas[base], number=number)
        jobs.append(("gate_pull_request", payload,
                     gate_job_id(payload["repo"], number, shas[branch])))
    await run_burst(jobs)
    runs = {r["head_sha"]: r for r in github.state()["check_runs"]}
    return {branch: runs[shas[branch]] for branch in branches}


def comment(github: FakeGitHubServer, number: int) -> str:
    [found] = [c for c in github.state()["comments"] if c["issue_number"] == number]
    body: str = found["body"]
    return body


async def test_a_head_whose_calls_cannot_be_made_fails_on_its_config_line(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer) -> None:
    """Issue 31: a head refused at configuration is refused before base sends a call (before,
    base's 5 calls were sent and head's examples then failed one by one)."""
    refused = ["pr/provider", "pr/keyenv", "pr/apibase"]
    checks = await gate_prs(github, repo, refused)
    assert llm.calls() == []  # base sent none of its calls
    for number, (branch, field, text) in enumerate([
            ("pr/provider", "model", "the worker has no ANTHROPIC_API_KEY"),
            ("pr/keyenv", "api_key_env", "the worker has no FAKE_LLM_KEY_TYPO"),
            ("pr/apibase", "api_base", f"api_base '{FOREIGN_BASE}' is not allowed on this "
                                       "worker")], 1):
        check = checks[branch]
        assert check["conclusion"] == "failure"
        assert check["output"]["title"] == \
            f"llmgate: configuration error in .llmgate.yml:{LINES[field]}"
        [on_config] = check["annotations"]
        assert (on_config["path"], on_config["start_line"], on_config["annotation_level"]) == \
            (".llmgate.yml", LINES[field], "failure")
        assert on_config["message"].startswith(f"the target: {text}")
        assert on_config["message"].endswith(
            ": no call to it can be made, so neither base nor head was run")
        assert text in check["output"]["summary"] and text in comment(github, number)
        actions = check["history"][-1]["body"]["actions"]
        assert [a["label"] for a in actions] == ["Re-run"]
    checks = await gate_prs(github, repo, ["pr/budget", "pr/timeout"])
    for branch in ("pr/budget", "pr/timeout"):  # head's own limits do not apply
        assert checks[branch]["conclusion"] == "failure"
        assert "head's run used base's settings" in checks[branch]["output"]["summary"]
        assert len([a for a in checks[branch]["annotations"]
                    if "regressed" in a["title"]]) == 5
    assert github.state()["violations"] == []


async def test_an_outage_blocks_and_a_writer_lets_it_through(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer,
        redis: Any) -> None:
    llm.setup({"faults": [{"status": 503, "times": None}]})
    check = (await gate_prs(github, repo, ["pr/regress"]))["pr/regress"]
    assert check["conclusion"] == "action_required"
    assert check["output"]["title"].startswith("llmgate: action required - undecided: "
                                               "provider errors: 5 of 5 examples got no")
    assert "(re-run, or a writer can let it through)" in check["output"]["summary"]
    assert check["history"][-1]["body"]["actions"] == [RERUN_BUTTON, LET_THROUGH_BUTTON]
    assert "provider error (HTTP 503)" in comment(github, 1)
    path, shas = repo

    def press(who: str) -> tuple[str, dict[str, Any], str]:
        payload = {"delivery_id": f"a-{who}", "installation_id": INSTALLATION_ID,
                   "repo": {"owner": OWNER, "name": REPO, "clone_url": path.as_uri()},
                   "pr_number": 1, "check_run_id": check["id"], "head_sha": check["head_sha"],
                   "accepter": who}
        return "accept_regression", payload, f"accept:{OWNER}/{REPO}:{check['id']}:{who}"

    refused = await run_burst([press("reader")])
    assert list(refused.values()) == [{"status": "refused", "permission": "read"}]
    passed = await run_burst([press("writer")])
    assert list(passed.values()) == [{"status": "accepted", "head_sha": shas["pr/regress"]}]
    [now] = github.state()["check_runs"]
    assert (now["conclusion"], now["output"]["title"]) == ("success",
                                                           "llmgate: pass (let through by writer)")
    record = json.loads(await redis.get(accept.acceptance_key(f"{OWNER}/{REPO}", 1,
                                                              shas["pr/regress"])))
    line = (f"**Undecided run let through** by `writer` on {accept.utc(record['at'])} for "
            f"`{shas['pr/regress'][:7]}`: `")
    assert now["output"]["summary"].startswith(line)
    assert comment(github, 1).startswith(f"{COMMENT_MARKER}\n> {line}")
    again = await run_burst([press("maintainer")])
    assert list(again.values()) == [{"status": "not_failed"}]  # it passes now
    assert github.state()["violations"] == []


async def test_a_cached_answer_never_stands_in_for_a_call_head_could_not_make(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer) -> None:
    """Issue 30: head renames only ``api_key_env`` to a variable the worker lacks, so its calls
    have base's cache keys; before, base's answers in Redis answered them and the check was
    ``success``. The same for a head dropping its model's price under base's budget."""
    checks = await gate_prs(github, repo, ["pr/keyenv-only"])
    check = checks["pr/keyenv-only"]
    assert check["conclusion"] == "failure"
    assert check["output"]["title"] == \
        f"llmgate: configuration error in .llmgate.yml:{LINES['api_key_env']}"
    [on_config] = check["annotations"]
    assert on_config["start_line"] == LINES["api_key_env"]
    assert "the worker has no FAKE_LLM_KEY_TYPO" in on_config["message"]
    assert llm.calls() == []  # issue 31: refused before base sent any call
    unpriced = (await gate_prs(github, repo, ["pr/unpriced"], base="priced"))["pr/unpriced"]
    assert unpriced["conclusion"] == "failure"
    assert "openai/bot-model has no known price" in unpriced["output"]["summary"]
    assert llm.calls() == []  # issue 31: base's calls come after head's config is checked
    assert github.state()["violations"] == []
