"""``llmgate run`` on the travel-chat example (multi-turn conversations answered by a command
target): the pull request whose bot stops reading the earlier turns fails at turn 2 of each
conversation, on its dataset line; the one that reads them again passes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.travel_support import BROKEN, build_travel_repo
from worker.cli.main import EXIT_GATE_FAILED, EXIT_PASS, main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("travel") / "repo"
    build_travel_repo(root)
    yield root


def run(repo: Path, head: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any]]:
    monkeypatch.chdir(repo)
    code = main(["run", "--base", "main", "--head", head, "--no-cache", "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_forgetting_the_earlier_turns_fails_at_turn_two_on_each_conversations_line(
        repo, capsys, monkeypatch):
    code, report = run(repo, "pr/forget", capsys, monkeypatch)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    found = {(r["example_id"], r["line"]) for r in report["regressions"]}
    assert found == BROKEN  # "paris" (one input, line 4) still passes
    for regression in report["regressions"]:
        assert "turn 2: " in regression["reason"] and "turn 1" not in regression["reason"]
    [oslo] = [e for e in report["examples"]["trips"]["head"] if e["id"] == "oslo"]
    assert oslo["output"] == ["Flight to Oslo: which day would you like?",
                              "Booked None on Monday.",
                              "Upgraded your None trip to business class."]
    assert report["metrics"]["trips"]["head"]["pass_rate"] == 0.25


def test_reading_the_history_again_passes(repo, capsys, monkeypatch):
    code, report = run(repo, "pr/fix", capsys, monkeypatch)
    assert (code, report["conclusion"], report["regressions"]) == (EXIT_PASS, "success", [])
    assert report["metrics"]["trips"]["head"]["pass_rate"] == 1.0
