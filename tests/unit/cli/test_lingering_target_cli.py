"""``llmgate run``: a command target that exits 0 but leaves a child holding its output pipe.

Issue 31's field case: the target printed its answer, started ``( sleep 600 ) &`` without
redirecting it (the child kept the target's stdout and stderr open) and exited 0. llmgate read
the output pipe to its end, so every example was reported "timed out" after the target timeout.
Now the answer is read when the target exits; what it left behind is ended with its process
group after `worker.security.process.EXIT_GRACE_S` and the report says so. Where the kernel
gives targets a PID namespace (worker/security/pidns.py), the namespace ends the child at once.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.security.test_process_exit import own_sandbox
from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_PASS, main
from worker.security.process import LEFT_RUNNING_NOTE

pytestmark = pytest.mark.slow  # git and target processes

#: The target's wall-clock limit, seconds: before the fix each example waited all of it.
TIMEOUT_S = 45
BOT = """#!/bin/sh
# $1 input file, $2 output file, $3 the sleep's length (its digits mark it in /proc)
python3 -c 'import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
print("answered", example["input"])' "$1" "$2"
( sleep "$3"; : ) &
exit 0
"""
DATASET = "".join(json.dumps({"id": w, "input": w, "expected": w}) + "\n"
                  for w in ("alpha", "bravo", "charlie"))


def config(sleep_s: str) -> str:
    return f"""version: 1
settings: {{timeout: {TIMEOUT_S}}}
suites:
  - name: tickets
    dataset: evals/t.jsonl
    target:
      command: sh bot.sh {{input_file}} {{output_file}} {sleep_s}
    assertions:
      - type: equals
    gate:
      pass_rate: {{min: 1.0, max_drop: 0}}
"""


@pytest.fixture(params=[False, True], ids=["no-pid-namespace", "pid-namespace"])
def pid_namespace(request: pytest.FixtureRequest) -> Iterator[bool]:
    """The sandbox of the run, with or without PID namespaces (the field case had none)."""
    with own_sandbox(request.param):
        yield request.param


def marked(mark: str) -> list[int]:
    """The pids of the processes whose command line holds ``mark``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_target_that_exits_is_finished_and_its_leftovers_are_ended(
        pid_namespace: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    sleep_s = f"600.{secrets.randbelow(10**9):09d}"  # 600 s; the digits mark its processes
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "main", {".llmgate.yml": config(sleep_s), "bot.sh": BOT,
                          "evals/t.jsonl": DATASET})
    commit(root, "pr", {"README.md": "docs\n"})
    monkeypatch.chdir(root)
    monkeypatch.delenv("REDIS_URL", raising=False)
    try:
        started = time.monotonic()
        code = main(["run", "--base", "main", "--head", "pr", "--no-cache", "--format", "json"])
        elapsed = time.monotonic() - started
        report: dict[str, Any] = json.loads(capsys.readouterr().out)
        survivors = marked(sleep_s)
    finally:
        for pid in marked(sleep_s):  # never leave them behind, whatever the outcome
            os.kill(pid, 9)
    assert (code, report["conclusion"]) == (EXIT_PASS, "success"), report["headline"]
    assert report["metrics"]["tickets"]["head"]["pass_rate"] == 1.0
    assert report["metrics"]["tickets"]["base"]["pass_rate"] == 1.0
    assert not any("timed out" in str(e["error"]) for side in ("base", "head")
                   for e in report["examples"]["tickets"][side])
    assert elapsed < TIMEOUT_S  # before: each example waited the whole timeout
    assert survivors == []
    left = [n for n in report["notes"] if "left processes running" in n]
    if pid_namespace:  # the kernel ended them with the namespace: nothing was left to end
        assert left == []
    else:
        assert left == ["tickets: the target left processes running after it exited on 3 of 3 "
                        "examples at head and 3 of 3 at base; they were ended"]
    notes = [e.get("notes", []) for side in ("base", "head")
             for e in report["examples"]["tickets"][side]]
    assert notes == [[] if pid_namespace else [LEFT_RUNNING_NOTE]] * 6
