"""Completing the check run: clipping, annotation batches of 50, and the fake's 422 on 51."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import HEAD_SHA, OWNER, REPO, requests_for
from worker.github.checks import (
    MAX_ANNOTATION_BYTES,
    CheckOutput,
    clip_bytes,
    clip_text,
    complete_check_run,
    completion_bodies,
)
from worker.github.client import GitHubClient, GitHubError

app_keys, creds, session, client = fx.app_keys, fx.creds, fx.session, fx.client
fake_gh_server, fake_gh = fx.fake_gh_server, fx.fake_gh


def _annotation(i: int) -> dict[str, object]:
    return {"path": "evals/qa.jsonl", "start_line": i + 1, "end_line": i + 1,
            "annotation_level": "warning", "message": f"example {i} regressed",
            "title": f"qa #{i}"}


def test_clip_text() -> None:
    assert clip_text("abc", 3) == "abc"
    assert clip_text("abcd", 3) == "ab\u2026"
    with pytest.raises(ValueError, match="max_chars"):
        clip_text("abc", 0)


def test_clip_bytes_never_splits_a_character() -> None:
    s = "a" + "\U0001f600" * 3  # 1 + 3*4 bytes
    assert clip_bytes(s, 13) == s
    assert clip_bytes(s, 12) == "a\U0001f600\U0001f600\u2026"  # 1 + 4 + 4 + 3 bytes
    assert clip_bytes(s, 11) == "a\U0001f600\u2026"  # 8 bytes: half an emoji is dropped
    with pytest.raises(ValueError, match="max_bytes"):
        clip_bytes("abc", 2)


@given(st.text(), st.integers(min_value=3, max_value=64))
def test_clip_bytes_fits_and_keeps_a_prefix(s: str, max_bytes: int) -> None:
    out = clip_bytes(s, max_bytes)
    assert len(out.encode("utf-8")) <= max_bytes
    assert out == s or (out.endswith("\u2026") and s.startswith(out[:-1]))


@given(st.text(), st.integers(min_value=1, max_value=64))
def test_clip_text_fits_and_keeps_a_prefix(s: str, max_chars: int) -> None:
    out = clip_text(s, max_chars)
    assert len(out) <= max_chars
    assert out == s or (out.endswith("\u2026") and s.startswith(out[:-1]))


def test_137_annotations_make_three_bodies() -> None:
    bodies = completion_bodies("failure", CheckOutput("t", "s", "x"),
                               [_annotation(i) for i in range(137)])
    assert [len(b["output"]["annotations"]) for b in bodies] == [50, 50, 37]
    # completed only with the last batch: never seen completed with part of its annotations
    assert (bodies[-1]["status"], bodies[-1]["conclusion"]) == ("completed", "failure")
    assert all("status" not in b and "conclusion" not in b for b in bodies[:-1])
    assert all(b["output"]["title"] == "t" and b["output"]["summary"] == "s" for b in bodies)


def test_no_annotations_make_one_body() -> None:
    assert completion_bodies("success", CheckOutput("t", "s"), []) == [
        {"status": "completed", "conclusion": "success",
         "output": {"title": "t", "summary": "s"}}]


@pytest.mark.parametrize("conclusion", ["stale", "passed", ""])
def test_conclusions_an_app_may_not_set_are_refused(conclusion: str) -> None:
    with pytest.raises(ValueError, match="conclusion"):
        completion_bodies(conclusion, CheckOutput("t", "s"), [])


async def test_complete_with_137_annotations_sends_50_50_37(client: GitHubClient,
                                                            fake_gh: FakeGitHubServer) -> None:
    check_run_id = await client.create_check_run(OWNER, REPO, HEAD_SHA)
    await complete_check_run(client, OWNER, REPO, check_run_id, "failure",
                             CheckOutput("2 regressions", "summary", "details"),
                             [_annotation(i) for i in range(137)])
    state = fake_gh.state()
    patches = requests_for(state, "checks/update")
    assert [len(r["body"]["output"]["annotations"]) for r in patches] == [50, 50, 37]
    assert [r["status"] for r in patches] == [200, 200, 200]
    run = state["check_runs"][0]
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert [a["start_line"] for a in run["annotations"]] == list(range(1, 138))
    assert run["output"] == {"title": "2 regressions", "summary": "summary", "text": "details"}
    assert state["violations"] == []


async def test_the_fake_refuses_51_annotations_in_one_request(client: GitHubClient,
                                                              fake_gh: FakeGitHubServer) -> None:
    check_run_id = await client.create_check_run(OWNER, REPO, HEAD_SHA)
    body = {"output": {"title": "t", "summary": "s",
                       "annotations": [_annotation(i) for i in range(51)]}}
    with pytest.raises(GitHubError) as info:
        await client.update_check_run(OWNER, REPO, check_run_id, body)
    assert info.value.status_code == 422
    violation, = fake_gh.state()["violations"]
    assert violation["kind"] == "invalid_request"
    assert "more than the maximum of 50" in violation["detail"][0]
    assert fake_gh.state()["check_runs"][0]["annotations"] == []


async def test_oversized_fields_are_clipped_so_github_accepts_them(
        client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    check_run_id = await client.create_check_run(OWNER, REPO, HEAD_SHA)
    huge = {**_annotation(0), "title": "T" * 300, "message": "\u00e9" * 40_000,
            "raw_details": "x" * 70_000}
    await complete_check_run(client, OWNER, REPO, check_run_id, "neutral",
                             CheckOutput("t" * 400, "s" * 70_000, "d" * 70_000), [huge])
    state = fake_gh.state()
    assert state["violations"] == []
    run = state["check_runs"][0]
    stored = run["annotations"][0]
    assert len(stored["title"].encode()) == 255  # GitHub's limits are bytes of UTF-8
    assert len(stored["message"].encode()) <= MAX_ANNOTATION_BYTES < 80_000
    assert len(stored["raw_details"].encode()) <= MAX_ANNOTATION_BYTES
    assert len(run["output"]["summary"].encode()) == 65535
    assert len(run["output"]["text"].encode()) == 65535
