"""End to end: one gate over many workers (worker/gate/shards.py).

The same pull request is gated twice against the deterministic fake provider: once by one
worker with the default shard size (nothing sharded) and once by two worker processes with
``LLMGATE_SHARD_EXAMPLES=5`` (each side's 20 examples in 4 shards that either worker takes).
The check runs must agree: conclusion, annotations and the report apart from timings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.e2e.model_support import KEY_ENV, build_support_repo, open_pull_request, support_config
from tests.fakes.fake_llm import running_fake_llm
from tests.unit.worker_support import commit
from worker.cli.demo import Stack

pytestmark = pytest.mark.slow

OWNER, REPO = "acme", "shard-bot"
#: Twenty tickets; the rude prompt fails the even ones only (the judge's rules below).
TICKETS = [f"refund for order {i}" for i in range(1, 21)]
RULES = {"rules": [
    {"model": "judge-model", "match": "echo: Be kind.", "reply": "**PASS**"},
    *({"model": "judge-model", "match": f"Go away. refund for order {i}\n",
       "reply": "VERDICT: FAIL"} for i in range(2, 21, 2)),
    {"model": "judge-model", "match": "", "reply": "**PASS**"}]}


def _repo(repo: Path, url: str) -> tuple[str, str]:
    """Build the repository; return its base and head (the rude prompt) SHAs."""
    base = build_support_repo(repo, support_config(url, settings="  concurrency: 4\n",
                                                   rubric="The reply promises the refund."),
                              "Be kind. Ticket: {{ input }}", TICKETS)
    return base, commit(repo, "pr/rude", {"prompts/support.txt": "Go away. {{ input }}\n"})


def _gate(work: Path, repo: Path, shas: tuple[str, str], workers: int,
          env: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Gate PR 1 (base -> head) on a fresh stack; return its check run and shard keys."""
    base, head = shas
    with Stack(work, workers=workers, worker_env={KEY_ENV: "sk-e2e-fake", **env}) as stack:
        run = open_pull_request(stack, repo, (OWNER, REPO), 1, head, base)
        keys = sorted(k.decode() for k in redis.Redis.from_url(stack.redis_url).keys(
            "llmgate:shard:*:result"))
        assert stack.state()["violations"] == []
    return run, keys


def _untimed(text: str) -> str:
    return re.sub(r"\d+(\.\d+)? ?(s|ms)\b", "<t>", text)


def test_a_sharded_gate_over_two_workers_equals_the_unsharded_one(tmp_path: Path) -> None:
    with running_fake_llm() as llm:
        llm.setup(RULES)
        repo = tmp_path / REPO
        shas = _repo(repo, llm.url)
        (tmp_path / "one").mkdir()
        (tmp_path / "two").mkdir()
        alone, none = _gate(tmp_path / "one", repo, shas, 1, {})
        sharded, keys = _gate(tmp_path / "two", repo, shas, 2, {"LLMGATE_SHARD_EXAMPLES": "5"})
    assert none == []  # the default shard size does not shard 20 examples
    assert len(keys) == 8  # 4 shards per side, each result written once
    assert alone["conclusion"] == sharded["conclusion"] == "failure"
    assert len(alone["annotations"]) == 10  # the even tickets regressed
    assert sharded["annotations"] == alone["annotations"]
    assert sharded["output"]["title"] == alone["output"]["title"]
    assert _untimed(sharded["output"]["summary"]) == _untimed(alone["output"]["summary"])
