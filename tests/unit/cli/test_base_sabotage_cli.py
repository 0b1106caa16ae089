"""``llmgate run``: a base whose command target was made to crash does not pass a regression.

The security tester's case end to end on a real git repository: the pull request's command
target left a detached helper that lowered the file-size rlimit of base's target processes, so
every base example crashed (no output file) and counted as a base failure: base 0.000 against
head 0.750, exit 0, and with ``--baseline-store`` the sabotaged base was stored and a third run
(helper gone) passed by reusing it. Here ``SABOTAGE_BASE`` makes base's target lower its own
limit the same way (no process outlives the test); head's target regresses ``bravo``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_GATE_FAILED, EXIT_UNDECIDED, main

pytestmark = pytest.mark.slow  # git and target processes

BOT = """import json, os, resource, sys
if os.environ.get("SABOTAGE_BASE"):  # what the pull request's helper did to base's processes
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
example = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    out.write(json.dumps({"output": example["input"]}))
"""
#: Head's target: no hook of its own (the helper left head alone), and ``bravo`` regressed.
HEAD_BOT = """import json, sys
example = json.load(open(sys.argv[1]))
text = example["input"]
json.dump({"output": "nope" if text == "bravo" else text}, open(sys.argv[2], "w"))
"""
CONFIG = f"""version: 1
settings:
  env: [SABOTAGE_BASE]
suites:
  - name: tickets
    dataset: evals/t.jsonl
    target:
      command: {sys.executable} bot.py {{input_file}} {{output_file}}
    assertions:
      - type: equals
    gate:
      pass_rate: {{min: 0.5, max_drop: 0.05}}
"""
DATASET = "".join(json.dumps({"id": w, "input": w, "expected": w}) + "\n"
                  for w in ("alpha", "bravo", "charlie", "delta"))


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``main``: 4 of 4 pass; ``pr``: ``bravo`` regresses (0.75); the clone is the cwd."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "main", {".llmgate.yml": CONFIG, "bot.py": BOT, "evals/t.jsonl": DATASET})
    commit(root, "pr", {"bot.py": HEAD_BOT})
    monkeypatch.chdir(root)
    monkeypatch.delenv("REDIS_URL", raising=False)
    return root


def gate(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", "--base", "main", "--head", "pr", "--no-cache", "--format", "json",
                 *flags])
    return code, json.loads(capsys.readouterr().out)


def test_a_base_whose_target_was_made_to_crash_is_undecided_not_a_pass(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SABOTAGE_BASE", "1")
    code, report = gate(capsys)
    assert (code, report["conclusion"]) == (EXIT_UNDECIDED, "action_required")  # was 0
    assert report["headline"].startswith("undecided: base could not run: target errors")
    assert "4 of 4 examples got no answer at base (the first, tickets/alpha: " \
        in report["headline"]
    assert "never neutral" in report["headline"]
    [error] = [e for e in report["errors"] if e["side"] == "base"]
    assert (error["kind"], error["cause"], error["count"]) == ("target", "outside", 4)
    assert report["metrics"]["tickets"]["base"].get("pass_rate") is None  # not 0.0


def test_a_sabotaged_base_is_never_stored_so_a_later_run_gates_a_fresh_base(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(tmp_path / "store")
    monkeypatch.setenv("SABOTAGE_BASE", "1")
    code, report = gate(capsys, "--baseline-store", store)
    assert code == EXIT_UNDECIDED
    assert "base run now, not stored: tickets: 4 examples without an answer from the target" \
        in report["base_source"]
    monkeypatch.delenv("SABOTAGE_BASE")  # the helper is gone
    code, report = gate(capsys, "--baseline-store", store)  # before: reused, exit 0
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert "base run now, stored for later pull requests" in report["base_source"]
    assert [r["example_id"] for r in report["regressions"]] == ["bravo"]
    code, report = gate(capsys, "--baseline-store", store)  # the complete base is reused
    assert code == EXIT_GATE_FAILED
    assert "stored baseline from an earlier run's base" in report["base_source"]
