"""Issue 31, parts 2 and 3: credentials GitHub refuses are replaced, and the gate goes on.

Field cases, each from a signed ``pull_request`` delivery through the App and an in-process
worker against the fake GitHub:

- Clock skew: a worker whose clock ran ahead had every App JWT refused ("'iat' is not yet
  valid") and made no check run at all, though the JWT is backdated 60 s. GitHub's refusal
  carries its own time (``Date``): the worker adopts the offset, logs it once and signs again.
- A refused installation token: GitHub answered 401 "Bad credentials" to a token it had just
  issued, and the gate ended with a ``failure`` check beside a passing comment, or with no
  check run. The token is now minted again and the request sent again, once, wherever it
  happens in the gate: creating the check run, listing comments, completing it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_github import EXP_PASSED, IAT_IN_FUTURE, FakeGitHubServer
from tests.unit import events_support
from tests.unit.github_real_support import (
    TicketsPullRequest,
    only_run,
    only_sticky,
    refusals,
)
from worker.github import auth

github = events_support.github  # fixture

MINT = "apps/create-installation-access-token"
ROWS = [{"id": word, "input": word, "expected": word} for word in ("alpha", "bravo", "charlie")]
#: The head changes no answer: the gate passes.
PASSING = {"README.md": "A ticket bot.\n"}
#: Where a fault refuses the installation token of the request once (and for good).
REFUSED_AT: dict[str, dict[str, Any]] = {
    "create": {"operation": "checks/create", "revoke_token": True},
    "comments": {"operation": "issues/list-comments", "revoke_token": True},
    "complete": {"operation": "checks/update", "body_match": {"status": "completed"},
                 "revoke_token": True},
}


@pytest.mark.parametrize(("skew_s", "refusal"), [(300, IAT_IN_FUTURE), (-900, EXP_PASSED)],
                         ids=["5-minutes-ahead", "15-minutes-behind"])
async def test_a_worker_whose_clock_is_off_still_gates(
        github: FakeGitHubServer, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, skew_s: int, refusal: str) -> None:
    monkeypatch.setattr(auth, "machine_time", lambda: time.time() + skew_s)
    caplog.set_level(logging.INFO)
    pull = TicketsPullRequest(tmp_path, ROWS, PASSING)
    state = await pull.gate(github, redis_url)

    run = only_run(state)
    assert (run["head_sha"], run["status"], run["conclusion"]) == (
        pull.head_sha, "completed", "success")
    assert "llmgate: pass" in only_sticky(state)["body"]
    # one JWT refused, then every JWT is signed at GitHub's time
    assert refusals(state) == [(MINT, 401)]
    assert [(v["kind"], v["detail"]) for v in state["violations"]] == [("auth", refusal)]
    skew = [r.getMessage() for r in caplog.records if "GitHub refused an App JWT" in
            r.getMessage()]
    side = "ahead" if skew_s > 0 else "behind"
    assert len(skew) == 1 and f"s {side} of GitHub's" in skew[0], skew
    assert abs(int(skew[0].split("clock is ")[1].split(" s ")[0]) - abs(skew_s)) <= 2


@pytest.mark.parametrize("where", [*REFUSED_AT, "all"])
async def test_a_refused_token_is_minted_again_wherever_the_gate_is(
        github: FakeGitHubServer, redis_url: str, tmp_path: Path, where: str) -> None:
    refused = list(REFUSED_AT) if where == "all" else [where]
    github.setup({"faults": [REFUSED_AT[w] for w in refused]})
    pull = TicketsPullRequest(tmp_path, ROWS, PASSING)
    state = await pull.gate(github, redis_url)

    run = only_run(state)  # never none, never a second one
    assert (run["head_sha"], run["status"], run["conclusion"]) == (
        pull.head_sha, "completed", "success")
    assert run["output"]["title"].startswith("llmgate: pass")
    assert "llmgate: pass" in only_sticky(state)["body"]  # the comment says what the check says
    assert refusals(state) == [(REFUSED_AT[w]["operation"], 401) for w in refused]
    tokens = state["tokens"]
    assert [bool(t.get("revoked")) for t in tokens] == [True] * len(refused) + [False]
    assert [r["operation"] for r in state["requests"]].count(MINT) == len(refused) + 1
    assert state["violations"] == []  # a refused token is never sent again
