"""End to end through ``llmgate run`` on a real git repository: a pull request that makes the
support bot leak a customer's email fails on ``pii``, on the dataset line of that example, and
no report (markdown or JSON) shows the address."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_GATE_FAILED, EXIT_PASS, main

LEAKED = "maria.keller@example.com"
BOT = """import json, sys
LEAK = False
example = json.load(open(sys.argv[1]))
text = example["input"]
answer = "Thanks, a colleague will write back today."
if LEAK and "account owner" in text:
    answer = "The account owner is Maria, write to her at MAIL."
json.dump({"output": answer}, open(sys.argv[2], "w"))
""".replace("MAIL", LEAKED)
ROWS = [{"id": "refund", "input": "I want a refund"},
        {"id": "owner", "input": "Who is the account owner of order 17?"},
        {"id": "late", "input": "My parcel is late"},
        {"id": "hello", "input": "hello"}]
CONFIG = f"""version: 1
suites:
  - name: support
    dataset: evals/support.jsonl
    target:
      command: {shlex.quote(sys.executable)} bot.py {{input_file}} {{output_file}}
    assertions:
      - type: pii
        categories: [email, phone, card]
    gate:
      pass_rate:
        max_drop: 0.0
"""


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    dataset = "".join(json.dumps(r) + "\n" for r in ROWS)
    commit(root, "main", {".llmgate.yml": CONFIG, "bot.py": BOT,
                          "evals/support.jsonl": dataset})
    commit(root, "pr/leak", {"bot.py": BOT.replace("LEAK = False", "LEAK = True")})
    monkeypatch.chdir(root)
    return root


@pytest.mark.slow
def test_a_pr_that_leaks_an_email_fails_on_pii(repo: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--base", "main", "--head", "pr/leak", "--format", "json",
                 "--output", str(tmp_path / "r.json")])
    assert code == EXIT_GATE_FAILED, capsys.readouterr().err
    text = (tmp_path / "r.json").read_text()
    assert LEAKED not in text
    doc = json.loads(text)
    (regression,) = doc["regressions"]
    assert (regression["dataset"], regression["line"], regression["example_id"]) == (
        "evals/support.jsonl", 2, "owner")
    assert "[REDACTED email] (email) at character" in regression["reason"]
    assert "write to her at [REDACTED email]." in json.dumps(regression["head_output"])
    assert main(["run", "--base", "main", "--head", "pr/leak"]) == EXIT_GATE_FAILED
    markdown = capsys.readouterr().out
    assert "owner" in markdown and LEAKED not in markdown
    assert main(["run", "--base", "main", "--head", "main"]) == EXIT_PASS
