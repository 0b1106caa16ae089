"""End to end through ``llmgate run`` on a real git repository: a pull request that makes the
support bot leak a customer's email fails on ``pii``, on the dataset line of that example, and
no report (markdown or JSON) shows the address."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.safety_support import LEAKED, build_leak_repo
from worker.cli.main import EXIT_GATE_FAILED, EXIT_PASS, main


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    build_leak_repo(root)
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
