"""End to end with multi-turn conversations (examples/travel-chat, a command target): webhook ->
worker -> the bot called turn by turn in the sandbox -> check run and comment on the fake GitHub.
The pull request that makes the bot forget the earlier turns fails with one annotation per
broken conversation, on its dataset line, naming turn 2; the one that mends it passes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.model_support import open_pull_request
from tests.e2e.travel_support import BROKEN, build_travel_repo
from worker.cli.demo import Stack

pytestmark = pytest.mark.slow
OWNER, REPO = "acme", "travel-chat"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("travel-e2e")
    repo = work / REPO
    shas = build_travel_repo(repo)
    with Stack(work, workers=1) as stack:
        yield {"stack": stack, "repo": repo, "shas": shas}


def open_pr(world: dict[str, Any], number: int, branch: str) -> dict[str, Any]:
    shas = world["shas"]
    return open_pull_request(world["stack"], world["repo"], (OWNER, REPO), number,
                             shas[branch], shas["main"], branch)


def test_a_bot_that_forgets_the_history_fails_at_turn_two_on_each_line(world):
    run = open_pr(world, 1, "pr/forget")
    assert run["conclusion"] == "failure"
    lines = {a["start_line"] for a in run["annotations"]}
    assert lines == {line for _, line in BROKEN}
    for annotation in run["annotations"]:
        assert annotation["path"] == "evals/trips.jsonl"
        assert "turn 2: " in annotation["message"]
    assert world["stack"].state()["violations"] == []


def test_the_bot_that_reads_the_history_again_passes(world):
    run = open_pr(world, 2, "pr/fix")
    assert (run["conclusion"], run["annotations"]) == ("success", [])
    assert world["stack"].state()["violations"] == []
