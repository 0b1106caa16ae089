"""End to end: signed webhook -> web process -> Redis -> arq worker -> git -> evals -> GitHub.

Everything is real but GitHub: ``redis-server``, the web process and two workers as separate
processes, git repositories built in a temp dir, and the schema-validating fake GitHub (which
records every request and fails on any that GitHub's REST description would refuse).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis

from worker.cli.demo import Stack, build_example_repo, issue_comment_payload, pull_request_payload

pytestmark = pytest.mark.slow

OWNER, REPO = "acme", "support-bot"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One stack and one example repository for the module (processes are slow to start)."""
    work = tmp_path_factory.mktemp("e2e")
    repo_dir = work / "support-bot"
    shas = build_example_repo(repo_dir)
    call_log = work / "calls.log"
    call_log.write_text("")  # the target sandbox lets the bot append to it (it must exist)
    with Stack(work, workers=2, worker_env={"SUPPORT_BOT_CALL_LOG": str(call_log),
                                            "LLMGATE_SANDBOX_WRITE_PATHS": str(call_log)}) as stack:
        yield {"stack": stack, "shas": shas, "repo_dir": repo_dir, "call_log": call_log,
               "clone_url": repo_dir.as_uri(), "work": work}


def _pr(world: dict[str, Any], action: str, head: str, number: int = 1,
        base: str = "main") -> dict[str, Any]:
    shas = world["shas"]
    head_sha = shas.get(head, head)
    world["stack"].github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": number, "head_sha": head_sha,
        "base_sha": shas[base], "base_ref": base, "head_ref": head,
        "clone_url": world["clone_url"]}]})
    return pull_request_payload(action, owner=OWNER, repo=REPO, clone_url=world["clone_url"],
                                number=number, head_sha=head_sha, base_sha=shas[base])


def _comments(stack: Stack, number: int) -> list[dict[str, Any]]:
    return [c for c in stack.state()["comments"] if c["issue_number"] == number]


def _no_violations(stack: Stack) -> None:
    assert stack.state()["violations"] == []


def _commit(repo_dir: Path, branch: str, files: dict[str, str], message: str) -> str:
    git = ["git", "-C", str(repo_dir), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "checkout", "-q", "-B", branch, "main"], check=True)
    for name, text in files.items():
        path = repo_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                         text=True).stdout.strip()
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    return sha


def test_regressing_pr_fails_with_annotations_then_fix_passes_and_edits_comment(world):
    stack = world["stack"]
    resp = stack.deliver("pull_request", _pr(world, "opened", "pr/regress"))
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
    first = _comments(stack, 1)
    assert len(first) == 1 and first[0]["body"].startswith("<!-- llmgate -->")

    stack.deliver("pull_request", _pr(world, "synchronize", "pr/fix"))
    fixed = stack.wait_for_check(world["shas"]["pr/fix"])[-1]
    assert fixed["conclusion"] == "success"
    after = _comments(stack, 1)
    assert len(after) == 1 and after[0]["id"] == first[0]["id"]
    assert after[0]["body"] != first[0]["body"]
    assert world["shas"]["pr/fix"][:7] in after[0]["body"]
    _no_violations(stack)


def test_duplicate_delivery_and_racing_opened_synchronize_start_one_run(world):
    stack, call_log = world["stack"], world["call_log"]
    head = _commit(world["repo_dir"], "pr/dupe", {"README.md": "docs only\n"}, "docs")
    call_log.write_text("")
    client = redis.Redis.from_url(stack.redis_url)  # forget the baselines earlier PRs stored,
    client.delete(*client.keys("llmgate:baseline*") or ["none"])  # so base runs here too
    client.close()
    payload = _pr(world, "synchronize", head, number=2)
    assert stack.deliver("pull_request", payload, delivery_id="dup-1").status_code < 300
    assert stack.deliver("pull_request", payload, delivery_id="dup-1").status_code < 300
    opened = _pr(world, "opened", head, number=2)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda p: stack.deliver("pull_request", p).status_code,
                                [opened, payload, opened, payload]))
    assert all(code < 300 for code in answers)
    stack.wait_for_check(head)
    time.sleep(3)  # a second run, if one had started, would show up by now
    runs = [r for r in stack.state()["check_runs"] if r["head_sha"] == head]
    assert len(runs) == 1
    examples = len((world["repo_dir"] / "evals" / "tickets.jsonl").read_text().splitlines())
    assert len(call_log.read_text().splitlines()) == 2 * examples  # base + head, once each
    assert len(_comments(stack, 2)) == 1


def test_rerun_comment_by_writer_runs_by_reader_not(world):
    stack = world["stack"]
    head = _commit(world["repo_dir"], "pr/rerun", {"NOTES.md": "n\n"}, "notes")
    stack.deliver("pull_request", _pr(world, "opened", head, number=3))
    stack.wait_for_check(head)
    stack.github("POST", "/_fake/setup", {"collaborators": {"writer": "write", "reader": "read"}})
    common = {"owner": OWNER, "repo": REPO, "clone_url": world["clone_url"], "number": 3}
    reader = issue_comment_payload(**common, body="/llmgate rerun", login="reader", comment_id=31)
    stack.deliver("issue_comment", reader)
    bot = issue_comment_payload(**common, body="comment `/llmgate rerun` to retry",
                                login="llmgate-demo[bot]", user_type="Bot", comment_id=32)
    stack.deliver("issue_comment", bot)
    edited = issue_comment_payload(**common, body="/llmgate rerun", login="writer",
                                   action="edited", comment_id=33)
    stack.deliver("issue_comment", edited)
    writer = issue_comment_payload(**common, body="/llmgate rerun", login="writer", comment_id=34)
    stack.deliver("issue_comment", writer)
    stack.deliver("issue_comment", writer)  # same comment, new delivery id: one run all the same
    runs = stack.wait_for_check(head, count=2)
    time.sleep(3)
    runs = [r for r in stack.state()["check_runs"] if r["head_sha"] == head]
    assert len(runs) == 2
    reactions = stack.state()["reactions"]
    assert [r["comment_id"] for r in reactions if r["comment_id"] in (31, 32, 33, 34)] == [34]
    _no_violations(stack)


def test_bad_signature_is_rejected_and_starts_nothing(world):
    stack = world["stack"]
    head = _commit(world["repo_dir"], "pr/unsigned", {"X.md": "x\n"}, "x")
    resp = stack.deliver("pull_request", _pr(world, "opened", head, number=4), secret="wrong")
    assert resp.status_code == 401
    time.sleep(2)
    assert [r for r in stack.state()["check_runs"] if r["head_sha"] == head] == []


def test_broken_config_at_head_fails_check_pointing_at_bad_line(world):
    stack = world["stack"]
    config = (world["repo_dir"] / ".llmgate.yml").read_text()
    broken = config.replace("type: equals", "type: equalz")
    bad_line = broken.splitlines().index("      - type: equalz") + 1
    head = _commit(world["repo_dir"], "pr/broken", {".llmgate.yml": broken}, "typo")
    stack.deliver("pull_request", _pr(world, "opened", head, number=5))
    run = stack.wait_for_check(head)[-1]
    assert run["conclusion"] == "failure"
    assert [(a["path"], a["start_line"]) for a in run["annotations"]] == [
        (".llmgate.yml", bad_line)]
    assert "equalz" in run["annotations"][0]["message"]
    _no_violations(stack)


def test_137_regressions_are_all_annotated_in_batches_of_50(world):
    stack = world["stack"]
    lines = [json.dumps({"id": f"e{i:03d}", "input": f"word{i}", "expected": f"word{i}"})
             for i in range(137)]
    echo = ("import json, sys\nexample = json.load(open(sys.argv[1]))\n"
            "json.dump({'output': example['input']}, open(sys.argv[2], 'w'))\n")
    config = ("version: 1\nsettings: {concurrency: 8}\nsuites:\n  - name: echo\n"
              "    dataset: evals/echo.jsonl\n"
              "    target:\n      command: python3 echo.py {input_file} {output_file}\n"
              "    assertions: [{type: equals}]\n    gate: {pass_rate: {max_drop: 0.05}}\n")
    files = {"big/.llmgate.yml": config, "big/echo.py": echo,
             "big/evals/echo.jsonl": "\n".join(lines) + "\n"}
    repo_dir = world["work"] / "big-repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo_dir)], check=True)
    for name, text in files.items():
        (repo_dir / name.removeprefix("big/")).parent.mkdir(parents=True, exist_ok=True)
        (repo_dir / name.removeprefix("big/")).write_text(text)
    git = ["git", "-C", str(repo_dir), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    base = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    broken = echo.replace("example['input']", "'nope'")
    head = _commit(repo_dir, "pr/break", {"echo.py": broken}, "break")
    payload = pull_request_payload("opened", owner=OWNER, repo="big", clone_url=repo_dir.as_uri(),
                                   number=6, head_sha=head, base_sha=base.strip())
    stack.deliver("pull_request", payload)
    run = stack.wait_for_check(head, timeout_s=180)[-1]
    assert run["conclusion"] == "failure"
    assert len(run["annotations"]) == 137
    assert sorted(a["start_line"] for a in run["annotations"]) == list(range(1, 138))
    sizes = [len((req.get("body") or {}).get("output", {}).get("annotations", []))
             for req in stack.state()["requests"]
             if req["operation"] in ("checks/create", "checks/update")
             and req["path"].endswith(f"/check-runs/{run['id']}")]
    assert [s for s in sizes if s] == [50, 50, 37]
    _no_violations(stack)
