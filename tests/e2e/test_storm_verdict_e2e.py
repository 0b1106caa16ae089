"""End to end: a regression found among the answered examples is never made mergeable by a 429
storm (issue 32, item 4).

Case from the chaos runs: base's config says ``settings.undecided: neutral``; a 429 storm on the
provider left half of the examples without an answer at base and at head; head's prompt makes
6 of its answered examples fail where base passes them. The check concluded ``neutral``: the
storm made the run undecided and base's policy made that mergeable, though no answer of the
others could undo 6 broken examples under ``max_new_failures 2``.

Real Redis, real git repositories, the schema-checking fake GitHub and the fake OpenAI-compatible
provider over loopback HTTP, and an arq worker in this process (as the quota test does) so that
the storm's calls give up in seconds: `worker.evals.llm.provider.RATE_LIMIT_PATIENCE_S` (how long
a paced call retries its 429s, 900 s) is `PATIENCE_S` here. The provider answers every call for
the stormed tickets (`STORMED`, the first half) with a 429 and ``retry-after-ms: 50``, forever,
at both sides, so the storm is the provider's (not head's: never "only head's calls failed").
Without the fix of worker/evals/verdict/decided.py the check concluded ``neutral`` ("llmgate:
neutral, 6 regressions - undecided: rate limited: 10 of 20 examples got no answer at head").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from arq import create_pool
from arq.connections import RedisSettings
from arq.worker import Worker, create_worker

from tests.fakes.fake_github import FakeGitHubServer
from tests.fakes.fake_llm import FakeLLMServer, running_fake_llm
from tests.unit.llm_support import KEY_ENV
from tests.unit.worker_support import commit, enqueue_gate, fake_github_env, gate_payload, git
from worker.evals.llm import provider
from worker.main import worker_settings

pytestmark = pytest.mark.slow

#: Examples: ``t01`` ... ``t20``; the first half is stormed, 6 of the others regress at head.
EXAMPLES = 20
STORMED = [f"t{i:02d}" for i in range(1, 11)]
REGRESSED = [f"t{i:02d}" for i in range(11, 17)]
#: Seconds a paced call retries its 429s before it is final (900 in production).
PATIENCE_S = 0.5
#: Longest time the gate may take, seconds.
GATE_TIMEOUT_S = 180
#: What a stormed call's 429 says: wait 50 ms, and (OpenAI's headers) a quota of 100 requests
#: refilled in 100 ms, so llmgate paces at the provider's announced rate instead of learning a
#: rate from the storm's refusals (which would slow the run to about a request a second).
QUOTA_HEADERS = {"retry-after-ms": "50", "x-ratelimit-limit-requests": "100",
                 "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "100ms"}
REPLY = "We will refund you."
CURT = "Be curt."


def ticket(example_id: str) -> str:
    """The ticket text of one example (its id is in it, so the fake can tell them apart)."""
    return f"refund for order {example_id}."


def config(url: str) -> str:
    """``.llmgate.yml``: one suite on the fake; undecided runs are neutral, as base says."""
    return f"""\
version: 1
settings:
  concurrency: 4
  cache: false
  undecided: neutral
  retry: {{max_retries: 0, backoff_base: 0.05, max_backoff: 30}}
suites:
  - name: tickets
    dataset: evals/tickets.jsonl
    target:
      model: openai/bot-model
      prompt: prompts/support.txt
      api_base: "{url}"
      api_key_env: {KEY_ENV}
      pricing: {{input: 2, output: 8}}
    assertions:
      - type: contains
        value: refund
    gate:
      pass_rate: {{max_drop: 0.1, max_new_failures: 2}}
"""


def build_repo(dest: Path, url: str) -> dict[str, str]:
    """Create the repository; return ``main`` and ``pr/curt`` (the prompt that regresses)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    dataset = "".join(json.dumps({"id": f"t{i:02d}", "input": ticket(f"t{i:02d}")}) + "\n"
                      for i in range(1, EXAMPLES + 1))
    main = commit(dest, "main", {".llmgate.yml": config(url),
                                 "prompts/support.txt": "Be kind. {{ input }}",
                                 "evals/tickets.jsonl": dataset})
    head = commit(dest, "pr/curt", {"prompts/support.txt": CURT + " {{ input }}"})
    return {"main": main, "pr/curt": head}


@pytest.fixture()
def llm() -> Iterator[FakeLLMServer]:
    """The fake provider in a storm: every call of a `STORMED` ticket is answered 429, and the
    curt prompt gets no refund for the `REGRESSED` tickets."""
    storm = [{"match": ticket(i), "status": 429, "times": None,
              "headers": QUOTA_HEADERS,
              "body": {"error": {"message": "Rate limit reached for requests", "type": "requests",
                                 "code": "rate_limit_exceeded"}}} for i in STORMED]
    with running_fake_llm() as server:
        server.setup({"latency_ms": 5, "default_reply": REPLY, "faults": storm,
                      "rules": [{"match": [CURT, ticket(i)], "reply": "No."}
                                for i in REGRESSED]})
        yield server


@pytest.fixture()
def github(monkeypatch: pytest.MonkeyPatch, redis_url: str,
           tmp_path: Path) -> Iterator[FakeGitHubServer]:
    """The fake GitHub and the worker's environment (the provider's key in `KEY_ENV`)."""
    monkeypatch.setenv(KEY_ENV, "sk-storm-e2e")
    monkeypatch.setattr(provider, "RATE_LIMIT_PATIENCE_S", PATIENCE_S)
    with fake_github_env(monkeypatch, redis_url, tmp_path / "work") as server:
        yield server


async def gate(github: FakeGitHubServer, redis_url: str, clone_url: str, head: str,
               base: str) -> dict[str, Any]:
    """Run one gate job in a burst worker; return its completed check run."""
    pool = await create_pool(RedisSettings.from_dsn(redis_url))
    worker: Worker = create_worker(worker_settings(), burst=True, poll_delay=0.05,
                                   handle_signals=False, max_jobs=1, cron_jobs=[])
    try:
        await enqueue_gate(pool, gate_payload(clone_url, head, base))
        await asyncio.wait_for(worker.async_run(), GATE_TIMEOUT_S)
    finally:
        await pool.aclose()
        await worker.close()
    assert (worker.jobs_complete, worker.jobs_failed) == (1, 0)
    [run] = [r for r in github.state()["check_runs"] if r["head_sha"] == head]
    assert run["status"] == "completed", run
    return dict(run)


async def test_a_storm_never_makes_a_found_regression_neutral(
        github: FakeGitHubServer, llm: FakeLLMServer, redis_url: str, tmp_path: Path) -> None:
    shas = build_repo(tmp_path / "tiny", llm.url)
    run = await gate(github, redis_url, str(tmp_path / "tiny"), shas["pr/curt"], shas["main"])
    calls = llm.calls("chat")
    refused = [c for c in calls if c["status"] == 429]
    measured = (f"{len(calls)} calls, {len(refused)} answered 429, conclusion "
                f"{run['conclusion']}: {run['output']['title']}")

    # The storm: every stormed ticket refused at both sides, at every try (measured: 29 to 35
    # of 49 to 55 calls answered 429, 20 answered 200; the job took about 9 s).
    stormed = {c["messages"][-1]["content"].split()[-1].rstrip(".") for c in refused}
    assert stormed == set(STORMED), measured
    assert {c["messages"][-1]["content"].split()[0] for c in refused} == {"Be", CURT.split()[0]}
    assert 0.4 <= len(refused) / len(calls) <= 0.9, measured

    # Before: neutral. Now: the 6 broken examples fail the gate whatever the storm hid.
    assert run["conclusion"] == "failure", measured
    summary = run["output"]["summary"]
    assert run["output"]["title"].startswith(
        "llmgate: fail, 6 regressions - tickets pass_rate max_new_failures 2 fails whatever "
        "the examples w"), measured
    why = next(line for line in summary.splitlines() if line.startswith("**Why:**"))
    # The first error's text depends on timing: a 429 the fake sent, or the pacer refusing
    # to wait past the patience after one (fewer calls on a loaded machine: CI saw 43).
    assert why.startswith(
        "**Why:** tickets pass_rate max_new_failures 2 fails whatever the examples without an "
        "answer give (10 of 20 example results at head and 10 of 20 at base had no answer: "
        "rate limited: 10 of 20 examples got no answer at head (the first, tickets/t"), why
    assert "6 regressions among the answered examples: " + ", ".join(
        f"tickets/{i}" for i in REGRESSED) in why
    assert "decided by" not in why
    # max_drop 0.1 is not decided by the answered examples alone: shown so, not as failed
    assert "max_drop 0.10: dropped 0.60 from base 1.00 (allowed 0.10); undecided: it fails " \
           "on the answered examples, but the examples without an answer could make it " \
           "pass" in summary
    # a found regression is accepted as one, never let through as undecided
    labels = [a["label"] for a in run["history"][-1]["body"]["actions"]]
    assert labels == ["Re-run", "Accept regression"], labels
    assert github.state()["violations"] == []
