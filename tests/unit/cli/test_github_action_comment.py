"""The GitHub Action's sticky comment (``comment: true``): posted to the schema-checking fake
GitHub with a token the fake minted, as GitHub mints a workflow's ``GITHUB_TOKEN``, and
compared with the comment the App's own gate job posts on the same fake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.fake_github import FakeGitHubServer, generate_app_keypair
from tests.unit import worker_support
from tests.unit.cli.action_support import (
    ACTIONS_BOT,
    PR_NUMBER,
    baseline_line,
    comments_on,
    dumping_target,
    run_gate_step,
    without_baseline,
    workflow_token,
)
from tests.unit.worker_support import (
    OWNER,
    REPO,
    build_tiny_repo,
    commit,
    fake_github_env,
    gate_payload,
)


@pytest.fixture()
def dump(tmp_path: Path) -> Path:
    """The file a `dumping_target` appends its environment to (writable by targets)."""
    path = tmp_path / "target-env.jsonl"
    path.write_text("")
    return path


@pytest.fixture()
def actions_github(monkeypatch: pytest.MonkeyPatch, redis_url: str, tmp_path: Path,
                   dump: Path) -> Iterator[tuple[FakeGitHubServer, str]]:
    """A fresh fake GitHub the App's worker (environment, Redis) points at; (it, App key)."""
    keys = generate_app_keypair()
    with fake_github_env(monkeypatch, redis_url, tmp_path / "work", keys=keys,
                         LLMGATE_SANDBOX_WRITE_PATHS=str(dump)) as server:
        yield server, keys[0]


@pytest.mark.slow
async def test_comment_is_posted_once_then_edited_and_is_the_apps_comment(
        actions_github, tmp_path: Path, dump: Path):
    github, private_pem = actions_github
    repo = tmp_path / "repo"
    shas = build_tiny_repo(repo)
    shas["pr/env"] = commit(repo, "pr/env", {"echo.py": dumping_target(dump)})
    # the App's own gate job comments on pull request 5 of the same repository and heads
    await worker_support.run_jobs([gate_payload(str(repo), shas["pr/env"], shas["main"],
                                                number=5)])
    [app_comment] = comments_on(github.state(), 5)
    dump.write_text("")  # what the App's run of the head wrote
    github.setup({"bot_login": ACTIONS_BOT})  # from here on, comments are the workflow's
    token = await workflow_token(github, private_pem)
    step = {"LLMGATE_COMMENT": "true", "LLMGATE_GITHUB_TOKEN": token, "GITHUB_TOKEN": token,
            "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": f"{OWNER}/{REPO}",
            "LLMGATE_SANDBOX_WRITE_PATHS": str(dump),
            "LLMGATE_BASELINE_STORE": str(tmp_path / "baselines")}  # as the App keeps its bases

    first = run_gate_step(tmp_path, repo, shas["main"], shas["pr/env"], **step)
    assert first.returncode == 1, first.stderr
    assert "::warning" not in first.stdout
    [posted] = comments_on(github.state(), PR_NUMBER)
    assert posted["user"] == {"login": ACTIONS_BOT, "type": "Bot"}
    # the App's comment, byte for byte, but for the one sentence `llmgate run` words its own
    # way (worker/cli/baseline.py: the base it was given is "the base")
    base = shas["main"][:7]
    assert without_baseline(posted["body"]) == without_baseline(app_comment["body"])
    assert baseline_line(app_comment["body"]) == (
        f"**Baseline:** compared with {base} (base run now, stored for later pull requests)")
    assert baseline_line(posted["body"]) == (
        f"**Baseline:** compared with {base}, the base (base run now, stored for later pull "
        "requests)")
    assert "bravo" in posted["body"]

    second = run_gate_step(tmp_path, repo, shas["main"], shas["pr/docs"], **step)  # a new push
    assert second.returncode == 0, second.stderr
    [edited] = comments_on(github.state(), PR_NUMBER)  # still one comment: edited in place
    assert edited["id"] == posted["id"]
    assert edited["history"] == [posted["body"], edited["body"]]
    assert edited["body"] != posted["body"] and "bravo" not in edited["body"]
    assert github.state()["violations"] == []

    seen = [json.loads(line) for line in dump.read_text().splitlines()]
    assert len(seen) == 4  # the head's target ran once per example, and wrote its environment
    for env in seen:
        assert not {"LLMGATE_GITHUB_TOKEN", "GITHUB_TOKEN"} & set(env)
        assert token not in json.dumps(env)


@pytest.mark.slow
async def test_a_refused_comment_is_a_warning_and_leaves_the_exit_code(actions_github,
                                                                        tmp_path: Path):
    github, private_pem = actions_github
    repo = tmp_path / "repo"
    shas = build_tiny_repo(repo)
    forbidden = "Resource not accessible by integration"  # a fork's read-only GITHUB_TOKEN
    github.setup({"faults": [{"operation": "issues/create-comment", "status": 403,
                              "body": {"message": forbidden,
                                       "documentation_url": "https://docs.github.com/rest"}}]})
    token = await workflow_token(github, private_pem)
    done = run_gate_step(tmp_path, repo, shas["main"], shas["pr/drop"], LLMGATE_COMMENT="true",
                         LLMGATE_GITHUB_TOKEN=token, GITHUB_API_URL=github.url,
                         GITHUB_REPOSITORY=f"{OWNER}/{REPO}")
    assert done.returncode == 1, done.stderr  # the gate's failure, as without the comment
    [warning] = [line for line in done.stdout.splitlines() if line.startswith("::warning")]
    assert warning.startswith("::warning title=llmgate comment::the pull request comment was "
                              "not posted: POST /repos/{owner}/{repo}/issues/{number}/comments: "
                              f"GitHub answered 403: {forbidden}")
    assert "pull-requests: write" in warning and token not in done.stdout + done.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("earlier step\n### llmgate: failure")
    assert summary.rstrip().endswith(f"llmgate could not post its pull request comment: POST "
                                     f"/repos/{{owner}}/{{repo}}/issues/{{number}}/comments: "
                                     f"GitHub answered 403: {forbidden} (a pull request from a "
                                     f"fork gets a read-only token; otherwise give the job "
                                     f"\\`permissions: pull-requests: write\\`)")
    assert comments_on(github.state(), PR_NUMBER) == []
