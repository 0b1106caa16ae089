"""Gate runs across their lifecycle in a real arq worker: superseded, drafts, retries, limits.

The worker runs in this process (arq burst mode) on a real Redis; repositories are real git
repositories; GitHub is the schema-checking fake. A run that finishes must leave nothing in the
run registry, and a retry must update the check run of its first try, never create a second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from arq.jobs import Job
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.runs_support import COMMENT_HINT, PRIVATE_PEM, PUBLIC_PEM, github_client
from tests.unit.worker_support import (
    CONFIG,
    ECHO,
    OWNER,
    REPO,
    WRITER,
    build_tiny_repo,
    fake_github_env,
    gate_payload,
    git,
    run_jobs,
)
from worker.contract import RepoRef, gate_job_id, pr_head_key, pr_head_value
from worker.gate import check_run as gate_check
from worker.gate import supersede
from worker.gate.drafts import SKIPPED_TITLE
from worker.gate.registry import RunRegistry, new_entry
from worker.gate.sweeper import sweep
from worker.runtime import lease, locks
from worker.runtime.lease import JobLimits

pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")


def _wait_file(repo: Path) -> Path:
    """The file the ``waitbase`` target waits for (at most 60 s) before it answers."""
    return repo.parent / "release-gate"


@pytest.fixture(scope="module")
def tiny_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The tiny repository, plus ``skipdrafts``: main with ``settings.drafts: skip``;
    ``waitbase``: main whose target answers only once `_wait_file` exists; ``pr/onwait``:
    waitbase with main's target again (a head whose merge base with waitbase waits, and with
    main does not)."""
    repo = tmp_path_factory.mktemp("runs") / "tiny"
    shas = build_tiny_repo(repo)
    (repo / ".llmgate.yml").write_text(CONFIG.replace("  concurrency: 4\n",
                                                      "  concurrency: 4\n  drafts: skip\n"))
    git(repo, "switch", "-q", "-c", "skipdrafts")
    git(repo, "commit", "-q", "-am", "skip drafts")
    shas["skipdrafts"] = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "-c", "waitbase", "main")
    (repo / "echo.py").write_text(
        f"import os, time\nend = time.monotonic() + 60\n"
        f"while not os.path.exists({str(_wait_file(repo))!r}) and time.monotonic() < end:\n"
        f"    time.sleep(0.05)\n" + ECHO)
    git(repo, "commit", "-q", "-am", "wait for the test")
    shas["waitbase"] = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "-c", "pr/onwait")
    (repo / "echo.py").write_text(ECHO)
    git(repo, "commit", "-q", "-am", "answer at once")
    shas["pr/onwait"] = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "main")
    return repo, shas


@pytest.fixture()
def github(monkeypatch: pytest.MonkeyPatch, redis_url: str,
           tmp_path: Path) -> Iterator[FakeGitHubServer]:
    """A fresh fake GitHub and the worker's environment (GitHub rate limits are not slept)."""
    with fake_github_env(monkeypatch, redis_url, tmp_path / "work", keys=(PRIVATE_PEM, PUBLIC_PEM),
                         LLMGATE_GITHUB_MAX_WAIT_S="0") as server:
        yield server


async def _record(redis_url: str, repo: RepoRef, value: str) -> None:
    redis = Redis.from_url(redis_url)
    await redis.set(pr_head_key(repo, 1), value)
    await redis.aclose()


async def _registered(redis_url: str) -> list[str]:
    redis = Redis.from_url(redis_url)
    try:
        return await RunRegistry(redis).run_ids()
    finally:
        await redis.aclose()


def _pull(shas: dict[str, str], clone_url: str, head: str, state: str = "open") -> dict[str, Any]:
    return {"owner": OWNER, "repo": REPO, "number": 1, "head_sha": shas[head],
            "base_sha": shas["main"], "base_ref": "main", "head_ref": head,
            "clone_url": clone_url, "state": state, "author": WRITER}


def _title_summary(run: dict[str, Any]) -> dict[str, str]:
    return {"title": run["output"]["title"], "summary": run["output"]["summary"]}


def _runs(server: FakeGitHubServer, head_sha: str) -> list[dict[str, Any]]:
    return [r for r in server.state()["check_runs"] if r["head_sha"] == head_sha]


@pytest.mark.parametrize(("recorded", "state", "reason"), [
    ("pr/docs", "open", "Superseded by a push of {docs}."),
    ("closed", "closed", "The pull request was closed."),
])
async def test_a_queued_job_of_an_older_head_is_dropped_without_a_check_run(
        github, tiny_repo, redis_url, recorded, state, reason):
    """Issue 14 (a burst of pushes): a head superseded before its job starts costs no check
    run write at all; GitHub shows the newest head's check."""
    repo, shas = tiny_repo
    payload = gate_payload(repo.as_uri(), shas["pr/drop"], shas["main"])
    github.setup({"pulls": [_pull(shas, repo.as_uri(), "pr/docs", state)]})
    await _record(redis_url, payload["repo"], shas.get(recorded, recorded))
    worker = await run_jobs([payload])
    state_now = github.state()
    assert state_now["check_runs"] == [] and state_now["comments"] == []
    assert [r["operation"] for r in state_now["requests"]] == [
        "apps/create-installation-access-token", "pulls/get"]
    assert await _result(redis_url, gate_job_id(payload["repo"], 1, shas["pr/drop"])) == {
        "conclusion": "cancelled", "head_sha": shas["pr/drop"],
        "reason": reason.format(docs=shas["pr/docs"][:7])}
    assert worker.jobs_complete == 1 and await _registered(redis_url) == []
    assert state_now["violations"] == []


async def test_a_retried_job_of_an_older_head_concludes_the_check_run_it_opened(
        github, tiny_repo, redis_url):
    """The check run an earlier try registered is concluded ``cancelled``, nothing created."""
    repo, shas = tiny_repo
    payload = gate_payload(repo.as_uri(), shas["pr/drop"], shas["main"])
    github.setup({"pulls": [_pull(shas, repo.as_uri(), "pr/docs")]})
    job_id = gate_job_id(payload["repo"], 1, shas["pr/drop"])
    async with github_client(github) as gh:
        check_run_id = await gh.create_check_run(OWNER, REPO, shas["pr/drop"])
    redis = Redis.from_url(redis_url)
    await RunRegistry(redis).put(new_entry(job_id, check_run_id, 7, OWNER, REPO, 1,
                                           shas["pr/drop"], 1))
    await redis.aclose()
    await _record(redis_url, payload["repo"], pr_head_value(shas["pr/docs"], "main"))
    await run_jobs([payload])
    [run] = github.state()["check_runs"]
    assert (run["id"], run["status"], run["conclusion"]) == (check_run_id, "completed",
                                                              "cancelled")
    assert _title_summary(run) == {"title": "llmgate: cancelled",
                                   "summary": f"Superseded by a push of {shas['pr/docs'][:7]}."}
    assert await _registered(redis_url) == []


async def test_a_stale_record_github_contradicts_does_not_stop_the_run(
        github, tiny_repo, redis_url):
    repo, shas = tiny_repo
    github.setup({"pulls": [_pull(shas, repo.as_uri(), "pr/docs")]})
    await _record(redis_url, gate_payload(repo.as_uri(), "", "")["repo"], "closed")
    await run_jobs([gate_payload(repo.as_uri(), shas["pr/docs"], shas["main"])])
    [run] = _runs(github, shas["pr/docs"])
    assert (run["status"], run["conclusion"]) == ("completed", "success")
    assert len(github.state()["comments"]) == 1
    assert await _registered(redis_url) == []


async def _until(predicate: Callable[[], Any], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout_s} s")
        await asyncio.sleep(0.05)


async def _result(redis_url: str, job_id: str) -> Any:
    redis = Redis.from_url(redis_url)
    try:
        return (await Job(job_id, redis).result_info()).result  # type: ignore[arg-type, union-attr]
    finally:
        await redis.aclose()


BASE_CHANGED = "Superseded: the pull request's base changed to release."


@pytest.mark.parametrize("poll_interval_s", [0.05, 3600.0], ids=["poll", "comment-lock"])
async def test_a_run_on_the_old_base_is_superseded_by_the_retargeted_run(
        github, tiny_repo, redis_url, monkeypatch, poll_interval_s):
    """Field case: a PR was retargeted from main to release while its run on main was busy.
    Both runs have the same head; the run on main finished last and overwrote the release
    run's comment. Now the record names head and base, so the run on main ends ``cancelled``
    (found by the poll, or under the comment lock when no poll comes first) and never writes
    the comment, which stays the release run's."""
    monkeypatch.setattr(supersede, "POLL_INTERVAL_S", poll_interval_s)
    repo, shas = tiny_repo
    _wait_file(repo).unlink(missing_ok=True)
    head = shas["pr/onwait"]
    on_main = gate_payload(repo.as_uri(), head, shas["waitbase"])  # busy until the wait file
    on_release = gate_payload(repo.as_uri(), head, shas["main"])  # ("main" plays release)
    on_release["base_ref"] = "release"
    github.setup({"pulls": [_pull(shas, repo.as_uri(), "pr/onwait")]})
    await _record(redis_url, on_main["repo"], pr_head_value(head, "main"))
    old = asyncio.create_task(run_jobs([on_main]))
    await _until(lambda: _runs(github, head), "the run on main started")
    # the retarget: GitHub and the web process's record (the `edited` delivery) say release
    github.setup({"pulls": [_pull(shas, repo.as_uri(), "pr/onwait") | {"base_ref": "release"}]})
    await _record(redis_url, on_main["repo"], pr_head_value(head, "release"))
    # a burst worker ends with an empty queue, and arq keeps a running job in it: both
    # workers end once the run on main ends
    new = asyncio.create_task(run_jobs([on_release], job_suffix="edited:d-2"))
    await _until(lambda: [r for r in _runs(github, head) if r["conclusion"] == "success"],
                 "the run on release finished")
    assert len(github.state()["comments"]) == 1  # the release run's comment stands ...
    _wait_file(repo).touch()  # ... before the run on main can reach its comment
    await asyncio.gather(old, new)
    old_run, new_run = sorted(_runs(github, head), key=lambda r: r["id"])
    assert (old_run["status"], old_run["conclusion"]) == ("completed", "cancelled")
    assert _title_summary(old_run) == {"title": "llmgate: cancelled", "summary": BASE_CHANGED}
    assert (new_run["status"], new_run["conclusion"]) == ("completed", "success")
    state = github.state()
    [comment] = state["comments"]
    assert comment["history"] == [comment["body"]]  # written once, never edited
    assert shas["main"][:7] in comment["body"] and shas["waitbase"][:7] not in comment["body"]
    operations = [r["operation"] for r in state["requests"]]
    assert operations.count("issues/create-comment") == 1
    if poll_interval_s > 60:  # no poll: GitHub was asked under the comment lock, afterwards
        assert operations[operations.index("issues/create-comment"):].count("pulls/get") == 1
    assert await _result(redis_url, gate_job_id(on_main["repo"], 1, head)) == {
        "conclusion": "cancelled", "head_sha": head, "reason": BASE_CHANGED}
    assert await _registered(redis_url) == []
    assert state["violations"] == []


async def test_a_queued_run_on_the_old_base_ends_without_a_check_run_in_front_of_the_new(
        github, tiny_repo, redis_url):
    """The run on main starts only after the retarget was recorded: it is dropped at once, and
    creates no ``cancelled`` check run on the head, since GitHub shows the newest check run of
    a name and the release run's check run is on the same commit."""
    repo, shas = tiny_repo
    head = shas["pr/docs"]
    on_main = gate_payload(repo.as_uri(), head, shas["main"])
    github.setup({"pulls": [_pull(shas, repo.as_uri(), "pr/docs") | {"base_ref": "release"}]})
    await _record(redis_url, on_main["repo"], pr_head_value(head, "release"))
    worker = await run_jobs([on_main])
    state = github.state()
    assert _runs(github, head) == [] and state["comments"] == []
    # no write; the one listing makes sure release is gated (issue 30): with no llmgate check
    # run on the head at all, that is left to the retarget's own job (or the reconciler)
    assert [r["operation"] for r in state["requests"]] == [
        "apps/create-installation-access-token", "pulls/get", "checks/list-for-ref"]
    assert await _result(redis_url, gate_job_id(on_main["repo"], 1, head)) == {
        "conclusion": "cancelled", "head_sha": head, "reason": BASE_CHANGED}
    assert worker.jobs_complete == 1 and await _registered(redis_url) == []


async def test_a_run_waiting_to_open_its_check_run_asks_again_after_a_retarget(
        github, tiny_repo, redis_url):
    """Field case (retarget race): a run on main passed its supersede check, the pull request
    was retargeted to release, the release run opened its check run, and only then did the
    run on main create its own: the newest check run on the commit, which GitHub shows, was
    the old run's, soon ``cancelled``. Now the check and the opening hold one lock per head
    commit. Here the test holds it (as a run of the same commit opening its check run would),
    the retarget lands meanwhile, and the run on main, once it has the lock, sees it: no
    check run, no comment."""
    repo, shas = tiny_repo
    head = shas["pr/docs"]
    on_main = gate_payload(repo.as_uri(), head, shas["main"])
    github.setup({"pulls": [_pull(shas, repo.as_uri(), "pr/docs")]})
    await _record(redis_url, on_main["repo"], pr_head_value(head, "main"))
    redis = Redis.from_url(redis_url)
    lock = redis.lock(locks.open_lock_key(OWNER, REPO, head), timeout=30)
    try:
        assert await lock.acquire()
        old = asyncio.create_task(run_jobs([on_main]))
        job_id = gate_job_id(on_main["repo"], 1, head)
        in_progress = False
        for _ in range(200):  # the job started; it waits for the lock
            if in_progress := bool(await redis.exists(f"arq:in-progress:{job_id}")):
                break
            await asyncio.sleep(0.05)
        assert in_progress
        await asyncio.sleep(0.3)
        assert github.state()["requests"] == []  # it did not get as far as GitHub
        github.setup({"pulls": [_pull(shas, repo.as_uri(), "pr/docs") | {"base_ref": "release"}]})
        await _record(redis_url, on_main["repo"], pr_head_value(head, "release"))
        await lock.release()
        worker = await old
    finally:
        await redis.aclose()
    state = github.state()
    assert _runs(github, head) == [] and state["comments"] == []
    assert await _result(redis_url, job_id) == {
        "conclusion": "cancelled", "head_sha": head, "reason": BASE_CHANGED}
    assert worker.jobs_complete == 1 and await _registered(redis_url) == []


@pytest.mark.parametrize(("base", "draft", "conclusion"), [
    ("skipdrafts", True, "skipped"),
    ("skipdrafts", False, "success"),
    ("main", True, "success"),  # no `settings.drafts` at base: drafts run
])
async def test_drafts_follow_the_base_config(github, tiny_repo, redis_url, base, draft,
                                             conclusion):
    repo, shas = tiny_repo
    payload = gate_payload(repo.as_uri(), shas["pr/docs"], shas[base])
    payload["draft"] = draft
    await run_jobs([payload])
    [run] = _runs(github, shas["pr/docs"])
    assert (run["status"], run["conclusion"]) == ("completed", conclusion)
    comments = github.state()["comments"]
    if conclusion == "skipped":
        assert _title_summary(run) == {"title": SKIPPED_TITLE, "summary": (
            f"This pull request is a draft, and `.llmgate.yml` at the base commit "
            f"(`{shas['skipdrafts'][:7]}`) sets `settings.drafts: skip`, so no suite ran. Mark "
            "it ready for review to run them, or comment `/llmgate rerun` to run them now.")}
        assert comments == []
    else:
        assert len(comments) == 1
    assert await _registered(redis_url) == []


RATE_LIMITED = {"operation": "issues/list-comments", "status": 429, "times": 1,
                "headers": {"retry-after": "1"}, "body": {"message": "secondary rate limit"}}


async def test_a_transient_failure_retries_and_reuses_the_check_run(
        github, tiny_repo, redis_url, monkeypatch):
    monkeypatch.setattr(gate_check, "BACKOFF_BASE_S", 0.1)
    repo, shas = tiny_repo
    github.setup({"faults": [RATE_LIMITED]})
    worker = await run_jobs([gate_payload(repo.as_uri(), shas["pr/docs"], shas["main"])])
    [run] = _runs(github, shas["pr/docs"])  # one check run for both tries
    assert (run["status"], run["conclusion"]) == ("completed", "success")
    history = [(h["body"].get("status"), h["body"].get("output", {}).get("title"))
               for h in run["history"]]
    assert history == [("in_progress", "llmgate: running"),
                       ("in_progress", "llmgate: running (try 2 of 3)"),
                       ("completed", run["output"]["title"])]
    assert len(github.state()["comments"]) == 1
    assert (worker.jobs_retried, worker.jobs_complete) == (1, 1)
    assert await _registered(redis_url) == []
    assert github.state()["violations"] == []


async def test_the_open_lock_outlives_a_rate_limit_pause_longer_than_its_expiry(
        github, tiny_repo, redis_url, monkeypatch):
    """Field case (tester): GitHub paused check-run creation longer than the open lock's 30 s
    expiry; releasing the lapsed lock raised ``LockNotOwnedError``, and the run, whose check
    run had opened fine, was retried (or, on its last try, left ``in_progress``). Here the
    expiry is 0.3 s and the pause 1 s: the lock is renewed and the run goes on at once."""
    monkeypatch.setattr(locks, "OPEN_LOCK_TTL_S", 0.3)
    monkeypatch.setenv("LLMGATE_GITHUB_MAX_WAIT_S", "5")  # the pause is slept, not a retry
    repo, shas = tiny_repo
    github.setup({"faults": [RATE_LIMITED | {"operation": "checks/create"}]})
    worker = await run_jobs([gate_payload(repo.as_uri(), shas["pr/docs"], shas["main"])])
    [run] = _runs(github, shas["pr/docs"])
    assert (run["status"], run["conclusion"]) == ("completed", "success")
    assert [r["status"] for r in github.state()["requests"]
            if r["operation"] == "checks/create"] == [429, 201]
    assert (worker.jobs_retried, worker.jobs_complete) == (0, 1)
    assert await _registered(redis_url) == []


async def test_a_transient_failure_on_the_last_try_concludes_failure_via_the_sweeper(
        github, tiny_repo, redis_url, monkeypatch):
    """GitHub rate limits the comment, then the conclusion too: the sweeper concludes later."""
    monkeypatch.setenv("LLMGATE_JOB_MAX_TRIES", "1")
    repo, shas = tiny_repo
    github.setup({"faults": [RATE_LIMITED]})
    worker = await run_jobs([gate_payload(repo.as_uri(), shas["pr/docs"], shas["main"])])
    [run] = _runs(github, shas["pr/docs"])
    assert run["status"] == "in_progress"  # the installation is paused: GitHub refused it
    assert (worker.jobs_retried, worker.jobs_failed) == (0, 1)
    redis = Redis.from_url(redis_url)
    try:
        async with github_client(github) as gh:
            counts = await sweep(redis, lambda installation_id: gh, JobLimits())
    finally:
        await redis.aclose()
    assert counts == {"concluded": 1, "forgotten": 0, "alive": 0}
    [run] = _runs(github, shas["pr/docs"])
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert _title_summary(run) == {"title": "llmgate: the run failed", "summary": (
        "The run could not finish: GitHub or Redis kept failing (GitHubRateLimited)."
        + COMMENT_HINT)}
    assert await _registered(redis_url) == []


async def test_a_run_past_the_time_limit_concludes_timed_out(github, tiny_repo, redis_url,
                                                             monkeypatch):
    monkeypatch.setenv("LLMGATE_JOB_TIMEOUT_S", "30")
    monkeypatch.setattr(lease, "TIMEOUT_MARGIN_S", 29.9)  # 0.1 s for the whole run
    repo, shas = tiny_repo
    worker = await run_jobs([gate_payload(repo.as_uri(), shas["pr/docs"], shas["main"])])
    [run] = _runs(github, shas["pr/docs"])
    assert (run["status"], run["conclusion"]) == ("completed", "timed_out")
    assert _title_summary(run) == {"title": "llmgate: the run timed out", "summary": (
        "The run took longer than the job time limit (30 s, `LLMGATE_JOB_TIMEOUT_S` of the "
        "worker)." + COMMENT_HINT)}
    assert github.state()["comments"] == []
    assert worker.jobs_complete == 1 and await _registered(redis_url) == []
