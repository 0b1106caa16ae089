"""End to end with the RAG example (examples/rag-bot): retrieval and grounding regressions.

The example's repository is built with its judge pointed at the fake provider, which judges the
built-in RAG criteria by word overlap (tests/fakes/fake_rag_judge.py). ``llmgate run`` gates it
in-process on the real git repository; the App path runs the same branches through the web
process, Redis, a worker and the schema-validating fake GitHub.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer, running_fake_llm
from worker.cli.demo import Stack, pull_request_payload
from worker.cli.main import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
OWNER, REPO = "acme", "rag-bot"
KEY = {"OPENAI_API_KEY": "sk-e2e-fake"}
#: Dataset lines each breaking branch regresses, and what an annotation there must say.
RETRIEVAL_LINES = {5: "relevant not in the top 3: shipping", 6: "shipping",
                   7: "relevant not in the top 3: international", 8: "warranty",
                   11: "payments", 13: "payments"}
GROUNDING_LINES = {1: "unsupported claims: Refunds are paid by cheque within 90 days.",
                   2: "Refunds are paid by cheque", 3: "You can return any item within one year",
                   4: "You can return any item within one year", 14: "Refunds are paid by cheque"}


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    with running_fake_llm() as llm:
        llm.setup({"rules": [{"match": "Rubric (", "rag_judge": True, "reply": ""}]})
        yield llm


@pytest.fixture(scope="module")
def example(fake_llm: FakeLLMServer,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("rag") / REPO
    done = subprocess.run([sys.executable, str(ROOT / "examples/rag-bot/build_repo.py"),
                           str(repo), "--judge-api-base", fake_llm.url],
                          capture_output=True, text=True, check=True)
    return repo, json.loads(done.stdout)


def _cli(repo: Path, head: str, out: Path) -> tuple[int, dict[str, Any]]:
    code = main(["run", "--repo", str(repo), "--base", "main", "--head", head, "--no-cache",
                 "--format", "json", "--output", str(out)])
    report: dict[str, Any] = json.loads(out.read_text())
    return code, report


def _lines(items: list[dict[str, Any]], line_key: str, text_key: str) -> dict[int, str]:
    return {int(item[line_key]): str(item[text_key]) for item in items}


def test_llmgate_run_fails_the_grounding_pr_on_its_lines_and_passes_the_fix(
        example: tuple[Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _ = example
    monkeypatch.setenv("OPENAI_API_KEY", KEY["OPENAI_API_KEY"])
    code, report = _cli(repo, "pr/grounding", tmp_path / "grounding.json")
    assert code == 1 and report["conclusion"] == "failure"
    found = _lines(report["regressions"], "line", "reason")
    assert sorted(found) == sorted(GROUNDING_LINES)
    for line, text in GROUNDING_LINES.items():
        assert text in found[line] and found[line].startswith("faithfulness: ")
    head = report["metrics"]["answers"]["head"]
    assert head["faithfulness"] == pytest.approx(9 / 14) and head["recall_at_k"] == 1.0
    assert report["metrics"]["answers"]["base"]["faithfulness"] == 1.0

    code, report = _cli(repo, "pr/fix", tmp_path / "fix.json")
    assert (code, report["conclusion"], report["regressions"]) == (0, "success", [])


@pytest.fixture(scope="module")
def stack(example: tuple[Path, dict[str, str]],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(tmp_path_factory.mktemp("rag-app"), workers=1, worker_env=KEY) as running:
        yield running


def _open_pr(stack: Stack, repo: Path, shas: dict[str, str], number: int,
             head: str) -> dict[str, Any]:
    clone_url = repo.as_uri()
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": number, "head_sha": shas[head],
        "base_sha": shas["main"], "base_ref": "main", "head_ref": head,
        "clone_url": clone_url}]})
    payload = pull_request_payload("opened", owner=OWNER, repo=REPO, clone_url=clone_url,
                                   number=number, head_sha=shas[head], base_sha=shas["main"])
    assert stack.deliver("pull_request", payload).status_code < 300
    run: dict[str, Any] = stack.wait_for_check(shas[head], timeout_s=240)[-1]
    return run


def test_the_app_annotates_the_dataset_lines_and_passes_the_fix(
        example: tuple[Path, dict[str, str]], stack: Stack) -> None:
    repo, shas = example
    for number, head, expected in ((1, "pr/retrieval", RETRIEVAL_LINES),
                                   (2, "pr/grounding", GROUNDING_LINES)):
        run = _open_pr(stack, repo, shas, number, head)
        assert run["conclusion"] == "failure", head
        notes = [a for a in run["annotations"] if a["path"] == "evals/questions.jsonl"]
        found = _lines(notes, "start_line", "message")
        assert sorted(found) == sorted(expected), head
        for line, text in expected.items():
            assert text in found[line]
        if head == "pr/retrieval":
            assert all("recall@3 0.00 < 1.00" in found[line] for line in expected)
    fixed = _open_pr(stack, repo, shas, 3, "pr/fix")
    assert fixed["conclusion"] == "success" and fixed["annotations"] == []
    assert stack.state()["violations"] == []
