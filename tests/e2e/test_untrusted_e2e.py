"""End to end: a fork's pull request waits for a writer's approval, and its code finds nothing.

Real processes (redis-server, the web process, a worker, the schema-checking fake GitHub), real
git. The fork's head replaces the repository's target with a probe that tries to read the
worker's environment and memory, the App's private key file, the base checkout and the git
mirror, to reach Redis, and echoes a provider key it was given. The test asserts on what the
probe wrote (it ends up in the check run, as the regressed example's output).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.worker_support import files_containing
from worker.cli.demo import Stack, issue_comment_payload, pull_request_payload
from worker.security import landlock

pytestmark = pytest.mark.slow

OWNER, REPO, NUMBER = "acme", "guarded", 21
FORK = "mallory/guarded"
PROBE_KEY = "sk-e2e-probe-key-3f9a7c1e55"  # given to the suite: the probe echoes it
HIDDEN_KEY = "sk-e2e-hidden-key-0b7d2e9a41"  # in the worker's environment, never the suite's
BASE_MARKER = "base-checkout-marker-7731"
CONFIG = """version: 1
settings: {env: [PROBE_KEY], timeout: 30}
suites:
  - name: probe
    dataset: evals/probe.jsonl
    target: {command: "python3 probe.py {input_file} {output_file}"}
    assertions: [{type: equals}]
    gate: {pass_rate: {min: 1.0}}
"""
BASE_PROBE = ("import json, sys\n"
              "json.dump({'output': 'clean'}, open(sys.argv[2], 'w'))\n")
ATTACK = """import glob, json, os, socket, sys
found = {}
def attempt(name, fn):
    try:
        found[name] = fn()
    except OSError as exc:
        found[name] = 'denied' if isinstance(exc, PermissionError) else type(exc).__name__
def read(path):
    with open(path, 'rb') as f:
        data = f.read()
    return 'LEAK' if data else 'empty'
def connect(port):
    socket.create_connection(('127.0.0.1', port), timeout=5).close()
    return 'LEAK'
found['env'] = ','.join(sorted(os.environ))
attempt('parent_environ', lambda: read('/proc/%d/environ' % os.getppid()))
attempt('parent_mem', lambda: read('/proc/%d/mem' % os.getppid()))
attempt('key_file', lambda: read(KEY_FILE))
attempt('worktrees', lambda: 'LEAK %d' % len(os.listdir(WORKTREES)))
attempt('base', lambda: 'LEAK' if glob.glob(WORKTREES + '/*/BASE_MARKER.txt') else 'none')
attempt('mirror', lambda: read(MIRROR + '/config'))
attempt('redis', lambda: connect(REDIS_PORT))
found['probe_key'] = os.environ.get('PROBE_KEY', '')
json.dump({'output': ';'.join(f'{k}={v}' for k, v in found.items())}, open(sys.argv[2], 'w'))
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=T", "-c",
                           "user.email=t@example.com", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _fork_commit(repo: Path, parent: str, files: dict[str, str], message: str) -> str:
    """Commit ``files`` on top of ``parent`` on no branch; publish it as refs/pull/N/head."""
    _git(repo, "checkout", "-q", "--detach", parent)
    for name, text in files.items():
        (repo / name).write_text(text)
    _git(repo, "commit", "-q", "-am", message)
    sha = _git(repo, "rev-parse", "HEAD")
    _git(repo, "update-ref", f"refs/pull/{NUMBER}/head", sha)
    _git(repo, "checkout", "-q", "main")
    return sha


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("untrusted")
    repo = work / "guarded"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "evals").mkdir()
    files = {".llmgate.yml": CONFIG, "probe.py": BASE_PROBE, "BASE_MARKER.txt": BASE_MARKER,
             "evals/probe.jsonl": json.dumps({"id": "p1", "input": "x", "expected": "clean"})}
    for name, text in files.items():
        (repo / name).write_text(text + "\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD")
    env = {"PROBE_KEY": PROBE_KEY, "OPENAI_API_KEY": HIDDEN_KEY}
    with Stack(work, workers=1, worker_env=env) as stack:
        checkouts = work / "checkouts"
        attack = (f"KEY_FILE = {str(work / 'app-private-key.pem')!r}\n"
                  f"WORKTREES = {str(checkouts / 'worktrees')!r}\n"
                  f"MIRROR = {str(checkouts / 'mirrors' / 'acme__guarded.git')!r}\n"
                  f"REDIS_PORT = {int(stack.redis_url.rsplit(':', 1)[1].split('/')[0])}\n"
                  + ATTACK)
        stack.github("POST", "/_fake/setup", {"collaborators": {"maintainer": "write",
                                                                "reader": "read"}})
        yield {"stack": stack, "repo": repo, "base": base, "attack": attack, "work": work}


_MINUTES = itertools.count()


def _tick() -> str:
    """A GitHub time one minute after the last one this module made: what the fake's
    deliveries carry as ``updated_at`` and ``created_at`` (an approve comment approves the
    head pushed before it was written)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1796032800 + 60 * next(_MINUTES)))


def _open_fork_pr(world: dict[str, Any], head: str, action: str,
                  updated_at: str | None = None) -> None:
    stack, repo = world["stack"], world["repo"]
    clone_url = repo.as_uri()
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": NUMBER, "head_sha": head,
        "base_sha": world["base"], "clone_url": clone_url, "head_repo_full_name": FORK,
        "author": "mallory"}]})
    payload = pull_request_payload(action, owner=OWNER, repo=REPO, clone_url=clone_url,
                                   number=NUMBER, head_sha=head, base_sha=world["base"])
    fork = json.loads(json.dumps(payload["repository"]))
    fork.update(full_name=FORK, clone_url=f"https://github.com/{FORK}.git")
    fork["owner"]["login"] = "mallory"
    payload["pull_request"]["head"]["repo"] = fork
    payload["pull_request"]["user"]["login"] = "mallory"
    payload["pull_request"]["updated_at"] = updated_at or _tick()
    assert stack.deliver("pull_request", payload).status_code == 202


def _comment(world: dict[str, Any], body: str, login: str, comment_id: int,
             created_at: str | None = None) -> None:
    payload = issue_comment_payload(owner=OWNER, repo=REPO, clone_url=world["repo"].as_uri(),
                                    number=NUMBER, body=body, login=login, comment_id=comment_id)
    payload["comment"]["created_at"] = created_at or _tick()
    assert world["stack"].deliver("issue_comment", payload).status_code == 202


def _press_button(world: dict[str, Any], run: dict[str, Any], login: str) -> None:
    fixture = Path(__file__).parents[1] / "fixtures" / "github" / "webhooks"
    data = json.loads((fixture / "check_run.rerequested.json").read_text())
    data["action"] = "requested_action"
    data["requested_action"] = {"identifier": "approve"}
    data["check_run"].update(id=run["id"], name=run["name"], head_sha=run["head_sha"],
                             external_id=run["external_id"])
    data["repository"].update(name=REPO, full_name=f"{OWNER}/{REPO}",
                              clone_url=world["repo"].as_uri())
    data["repository"]["owner"]["login"] = OWNER
    data["installation"] = {"id": 1, "node_id": "MDIz"}
    data["sender"].update(login=login, type="User")
    assert world["stack"].deliver("check_run", data).status_code == 202


def _runs(stack: Stack, head: str) -> list[dict[str, Any]]:
    return [r for r in stack.state()["check_runs"] if r["head_sha"] == head]


def _assert_waiting(run: dict[str, Any], head: str) -> None:
    assert (run["status"], run["conclusion"]) == ("completed", "action_required")
    assert run["output"]["title"] == f"llmgate: approval needed to run {head[:7]}"
    assert run["output"]["summary"].split("\n")[0] == (
        f"Not run: it comes from the fork `{FORK}`, so its code is untrusted.")
    assert run["external_id"] == f"pr:{NUMBER}" and run["annotations"] == []
    last = run["history"][-1]["body"]
    assert [a["identifier"] for a in last["actions"]] == ["approve"]


def _mirror_has(world: dict[str, Any], sha: str) -> bool:
    mirror = world["work"] / "checkouts" / "mirrors" / "acme__guarded.git"
    return subprocess.run(["git", "-C", str(mirror), "cat-file", "-e", f"{sha}^{{commit}}"],
                          capture_output=True).returncode == 0


def test_fork_waits_for_a_writer_runs_once_and_its_code_finds_nothing(world):
    stack, repo = world["stack"], world["repo"]
    head = _fork_commit(repo, world["base"], {"probe.py": world["attack"]}, "probe")
    _open_fork_pr(world, head, "opened")
    [waiting] = stack.wait_for_check(head)
    _assert_waiting(waiting, head)
    assert not _mirror_has(world, head)  # nothing of the head was even fetched
    assert stack.state()["comments"] == []

    _comment(world, "/llmgate approve", "reader", comment_id=501)  # no write access
    time.sleep(4)
    assert len(_runs(stack, head)) == 1 and stack.state()["reactions"] == []

    _comment(world, f"/llmgate approve {head[:7]}\nreviewed the probe", "maintainer", 502)
    runs = stack.wait_for_check(head, count=2)
    ran = max(runs, key=lambda r: r["id"])
    assert ran["conclusion"] == "failure"  # the probe's output is not "clean"
    [note] = ran["annotations"]
    findings = dict(item.split("=", 1) for item in
                    note["message"].split("actual: ", 1)[1].split("\n")[0].split(";"))
    assert set(findings["env"].split(",")) <= {"HOME", "LANG", "LC_ALL", "PATH", "PROBE_KEY",
                                               "PYTHONDONTWRITEBYTECODE", "TMPDIR"}
    denied = ("parent_environ", "parent_mem", "key_file", "worktrees", "mirror")
    assert {k: findings[k] for k in denied} == dict.fromkeys(denied, "denied")
    assert findings["base"] == "none"  # glob() finds nothing where it may not look
    assert findings["redis"] == ("denied" if landlock.abi_version() >= 4 else "LEAK")
    assert findings["probe_key"] == "[redacted]"  # echoed back, redacted before publishing
    assert [r["comment_id"] for r in stack.state()["reactions"]] == [502]

    _press_button(world, waiting, "maintainer")  # a second approval of the same head
    time.sleep(4)
    assert len(_runs(stack, head)) == 2

    state_text = json.dumps(stack.state())
    for secret in (PROBE_KEY, HIDDEN_KEY, (world["work"] / "app-private-key.pem").read_text()):
        assert secret not in state_text
    tokens = [t["token"] for t in stack.state()["tokens"]]
    assert tokens and files_containing(world["work"] / "checkouts", tokens) == []
    assert stack.state()["violations"] == []


def test_a_later_push_needs_a_new_approval_given_by_the_button(world):
    stack, repo = world["stack"], world["repo"]
    head = _fork_commit(repo, world["base"], {"probe.py": BASE_PROBE}, "harmless now")
    _open_fork_pr(world, head, "synchronize")
    [waiting] = stack.wait_for_check(head)
    _assert_waiting(waiting, head)
    _press_button(world, waiting, "reader")
    time.sleep(4)
    assert len(_runs(stack, head)) == 1
    _press_button(world, waiting, "maintainer")
    runs = stack.wait_for_check(head, count=2)
    assert max(runs, key=lambda r: r["id"])["conclusion"] == "success"
    assert stack.state()["violations"] == []


def test_a_push_after_the_approve_comment_is_not_run_on_it(world):
    """Issue 30, part 5: the writer comments ``/llmgate approve`` at T (head: harmless), the
    fork pushes its probe at T+1, the worker handles the comment at T+2 (its delivery came late):
    the probe is not even fetched, and the reply says which commit the comment approves."""
    stack, repo = world["stack"], world["repo"]
    reviewed = _fork_commit(repo, world["base"], {"probe.py": BASE_PROBE}, "reviewed")
    _open_fork_pr(world, reviewed, "synchronize")
    stack.wait_for_check(reviewed)
    written = _tick()  # the writer reviews `reviewed` and writes the approval now
    pushed = _fork_commit(repo, reviewed, {"probe.py": world["attack"]}, "after the review")
    _open_fork_pr(world, pushed, "synchronize")
    [waiting] = stack.wait_for_check(pushed)
    _assert_waiting(waiting, pushed)

    _comment(world, "/llmgate approve", "maintainer", 601, created_at=written)
    deadline = time.time() + 60
    while not (replies := [c for c in stack.state()["comments"]
                           if c["body"].startswith("`/llmgate approve`")]):
        assert time.time() < deadline, "no reply to the stale approval"
        time.sleep(0.2)
    assert replies[0]["body"].startswith(
        f"`/llmgate approve` was written when the head was `{reviewed[:7]}`, so it approves "
        f"only that commit. The head is now `{pushed[:7]}`, pushed after the comment")
    assert [r["conclusion"] for r in _runs(stack, pushed)] == ["action_required"]
    assert not _mirror_has(world, pushed)  # nothing of the new head was fetched
    assert (601, "confused") in [(r["comment_id"], r["content"])
                                 for r in stack.state()["reactions"]]

    _comment(world, "/llmgate approve", "maintainer", 602)  # reviewed it: approve it again
    runs = stack.wait_for_check(pushed, count=2)
    assert max(runs, key=lambda r: r["id"])["conclusion"] == "failure"  # the probe ran
    assert stack.state()["violations"] == []
