"""The GitHub Action's gate step (deploy/github-action/gate.sh) under a simulated Actions
environment: a real ``pull_request`` payload (tests/fixtures/github/webhooks, its SHAs
pointed at the tiny repository), ``GITHUB_STEP_SUMMARY`` and the workflow commands.

With ``comment: true`` the step posts the sticky comment to the schema-checking fake GitHub
on loopback (``GITHUB_API_URL``) with a token the fake minted, as GitHub mints a workflow's
``GITHUB_TOKEN``; the App's own gate job, on the same fake, posts the comment it is compared
with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.fakes.fake_github import FakeGitHubServer, generate_app_keypair
from tests.unit import worker_support
from tests.unit.worker_support import (
    APP_ID,
    ECHO,
    INSTALLATION_ID,
    OWNER,
    REPO,
    build_tiny_repo,
    commit,
    fake_github_env,
    gate_payload,
)
from worker.cli.action import escape, workflow_annotations
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import GitHubClient

ROOT = Path(__file__).resolve().parents[3]
ACTION = ROOT / "deploy" / "github-action"
PAYLOAD = ROOT / "tests/fixtures/github/webhooks/pull_request.opened.json"
#: The pull request number of `PAYLOAD`.
PR_NUMBER = 2
#: Who a workflow's GITHUB_TOKEN comments as.
ACTIONS_BOT = "github-actions[bot]"
#: Seconds one gate.sh step may take before the test calls it hung (see `run_gate_step`).
STEP_TIMEOUT_S = 300


def dumping_target(dump: Path) -> str:
    """A head target that breaks ``bravo`` and appends its whole environment, as a JSON
    line, to ``dump``."""
    return ECHO.replace('BROKEN = ""', 'BROKEN = "bravo"') + (
        f"import os\nwith open({str(dump)!r}, 'a') as out:\n"
        "    out.write(json.dumps(dict(os.environ)) + '\\n')\n")


def test_workflow_command_escaping():
    assert escape("50%\nnext") == "50%25%0Anext"
    assert escape("a:b,c", prop=True) == "a%3Ab%2Cc"
    assert workflow_annotations({"config_error": {"path": ".llmgate.yml", "line": 7,
                                                  "message": "bad"}, "regressions": []}) == [
        "::error file=.llmgate.yml,line=7,title=llmgate configuration error::bad"]


def test_the_action_prints_what_github_shows_and_says_how_many_more():
    # field case (fresh-user tester): 44 ::error lines where GitHub shows 10 per step, the
    # other 34 dropped without a word (`--format github` says how many more)
    regressions = [{"suite": "s", "dataset": "evals/d.jsonl", "line": n, "example_id": f"e{n}",
                    "reason": "failed"} for n in range(1, 13)]
    lines = workflow_annotations({"regressions": regressions})
    assert lines[0] == "::error file=evals/d.jsonl,line=1,title=llmgate%3A s::e1: failed"
    assert len(lines) == 11 and all(line.startswith("::error ") for line in lines[:10])
    assert lines[10] == "::notice title=llmgate::2 more findings: see the job summary"


def test_the_action_declares_its_inputs_and_runs_the_script():
    action = yaml.safe_load((ACTION / "action.yml").read_text())
    assert set(action["inputs"]) == {"version", "baseline-store", "allow-undecided", "comment",
                                     "github-token", "comment-author"}
    assert action["inputs"]["comment"]["default"] == "false"
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    step = action["runs"]["steps"][-1]
    assert step["run"] == '"$GITHUB_ACTION_PATH/gate.sh"'
    # the workflow's token reaches the step only when the comment is asked for
    assert step["env"]["LLMGATE_GITHUB_TOKEN"] == (
        "${{ inputs.comment == 'true' && inputs.github-token || '' }}")
    assert os.access(ACTION / "gate.sh", os.X_OK)


def run_gate_step(tmp_path: Path, repo: Path, base_sha: str, head_sha: str,
                  **env: str) -> subprocess.CompletedProcess[str]:
    """Run gate.sh in ``repo`` as GitHub Actions runs it for the pull_request event `PAYLOAD`
    (its SHAs replaced); ``env``: the step's inputs and any other variables. The job summary
    is ``tmp_path / "summary.md"``, which starts with ``earlier step``."""
    event = json.loads(PAYLOAD.read_text())
    event["pull_request"]["base"]["sha"] = base_sha
    event["pull_request"]["head"]["sha"] = head_sha
    (tmp_path / "event.json").write_text(json.dumps(event))
    summary = tmp_path / "summary.md"
    if not summary.exists():
        summary.write_text("earlier step\n")
    llmgate = shutil.which("llmgate", path=str(Path(sys.executable).parent))
    step_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_ACTIONS": "true",
                "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
                "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(tmp_path),
                "LLMGATE": str(llmgate), "LLMGATE_CACHE_DIR": str(tmp_path / "cache"), **env}
    # One step is a few seconds alone; a 2-core CI machine running the suite's other worker
    # has taken over 120 s (TimeoutExpired), so the limit only catches a hang.
    return subprocess.run([str(ACTION / "gate.sh")], cwd=repo, env=step_env,
                          capture_output=True, text=True, timeout=STEP_TIMEOUT_S)


@pytest.mark.slow
def test_gate_step_writes_summary_and_annotations_and_fails_the_job(tmp_path: Path):
    repo = tmp_path / "repo"
    shas = build_tiny_repo(repo)
    summary = tmp_path / "summary.md"
    done = run_gate_step(tmp_path, repo, shas["main"], shas["pr/drop"],
                         LLMGATE_BASELINE_STORE=str(tmp_path / "baselines"))
    assert done.returncode == 1, done.stderr
    [annotation] = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert annotation.startswith("::error file=evals/echo.jsonl,line=2,title=llmgate%3A echo::"
                                 "bravo: ")
    text = summary.read_text()
    assert text.startswith("earlier step\n### llmgate: failure")
    assert "| echo | 1.00 | 0.75 |" in text
    assert list((tmp_path / "baselines").rglob("*.rec"))  # the base was stored for next time


def test_the_gitlab_example_runs_llmgate_in_merge_requests():
    job = yaml.safe_load((ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text())["llmgate"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert any(step.startswith("llmgate run --base") for step in job["script"])


def test_the_gitlab_cache_is_the_target_branchs_and_read_only_in_merge_requests():
    """Issue 30: the template kept the cache in the project folder under one key every merge
    request shared (``key: llmgate``, saved by each job), so a ``responses.sqlite3`` one
    merge request committed, or got uploaded once, answered later heads' calls."""
    template = yaml.safe_load((ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text())
    jobs = {name: job for name, job in template.items() if not name.startswith(".")}
    merge_request = jobs["llmgate"]["cache"]
    assert merge_request["key"] == "llmgate-$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
    assert merge_request["policy"] == "pull"  # GitLab's default pull-push saves it
    saving = {name: job for name, job in jobs.items() if job["cache"]["policy"] != "pull"}
    assert list(saving) == ["llmgate-baseline"]  # only the target branch's own pipeline
    assert saving["llmgate-baseline"]["rules"] == [
        {"if": "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH"}]
    assert saving["llmgate-baseline"]["cache"]["key"] == "llmgate-$CI_COMMIT_BRANCH"
    cache_dir = template[".llmgate"]["variables"]["LLMGATE_CACHE_DIR"]
    assert cache_dir.startswith("/tmp/") and "CI_PROJECT_DIR" not in cache_dir
    for job in jobs.values():  # llmgate reads nothing of the checkout's .llmgate-ci/
        assert not any(".llmgate-ci" in step for step in job["script"] if "llmgate " in step)


@pytest.mark.parametrize("committed", [True, False])
def test_the_gitlab_job_refuses_a_committed_cache_and_copies_a_restored_one_out(
        tmp_path: Path, committed: bool):
    """The template's ``before_script`` (but ``pip install``) in a real clone: GitLab restores
    ``.llmgate-ci/`` into the checkout, where a merge request could commit one instead."""
    template = yaml.safe_load((ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text())
    out = tmp_path / "out"
    steps = [step.replace("/tmp/llmgate", str(out))
             for step in template[".llmgate"]["before_script"] if not step.startswith("pip ")]
    repo = tmp_path / "project"
    repo.mkdir()
    worker_support.git(repo, "init", "-q", "-b", "main")
    cached = {".llmgate-ci/cache/responses.sqlite3": "answers"}
    commit(repo, "main", {"README.md": "x", **(cached if committed else {})})
    if not committed:  # restored by GitLab's cache, not in the merge request
        (repo / ".llmgate-ci/cache").mkdir(parents=True)
        (repo / ".llmgate-ci/cache/responses.sqlite3").write_text("answers")
    done = subprocess.run(["sh", "-ec", "\n".join(steps)], cwd=repo, capture_output=True,
                          text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    copied = out / "cache" / "responses.sqlite3"
    if committed:
        assert done.returncode == 3 and not copied.exists()
        assert "llmgate: .llmgate-ci/ is committed" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert copied.read_text() == "answers"


def test_init_writes_the_gitlab_template_word_for_word(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    from worker.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["init", "--ci", "gitlab"]) == 0
    assert (tmp_path / ".gitlab-ci.llmgate.yml").read_text() == (
        ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text()


@pytest.mark.slow
def test_the_action_keeps_the_cache_in_the_jobs_own_temporary_folder(tmp_path: Path):
    """Issue 30: ``~/.cache/llmgate`` outlives a job on a self-hosted runner, where the next
    pull request's job would read what this one wrote; ``RUNNER_TEMP`` is emptied between
    jobs."""
    repo = tmp_path / "repo"
    shas = build_tiny_repo(repo)
    done = run_gate_step(tmp_path, repo, shas["main"], shas["pr/docs"], LLMGATE_CACHE_DIR="")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "llmgate-cache" / "responses.sqlite3").is_file()
    assert not (tmp_path / ".cache").exists()  # HOME's


async def workflow_token(github: FakeGitHubServer, private_pem: str) -> str:
    """A token of installation `INSTALLATION_ID` minted by the fake, as GitHub mints a
    workflow's ``GITHUB_TOKEN`` (an installation token of the GitHub Actions app)."""
    creds = AppCredentials(APP_ID, private_pem)
    async with httpx.AsyncClient(timeout=10) as session:
        return await GitHubClient(session, github.url, creds, InstallationTokenCache(creds),
                                  INSTALLATION_ID).installation_token()


def comments_on(state: dict[str, Any], number: int) -> list[dict[str, Any]]:
    """The fake's comments on pull request ``number`` of the tiny repository, oldest first."""
    return [c for c in state["comments"] if (c["owner"], c["repo"], c["issue_number"]) == (
        OWNER, REPO, number)]


def baseline_line(body: str) -> str:
    """The comment's one ``**Baseline:**`` line."""
    [line] = [line for line in body.splitlines() if line.startswith("**Baseline:**")]
    return line


def without_baseline(body: str) -> str:
    """The comment without its ``**Baseline:**`` line."""
    return body.replace(baseline_line(body) + "\n", "")


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
