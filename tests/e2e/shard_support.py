"""The sharded gate's end-to-end tests share this (tests/e2e/test_shard*_e2e.py).

The pull request (twenty tickets; the rude prompt fails the even ones), the fake provider's
judge rules, gating it on a fresh stack, and the module fixture `unsharded`: PR 1 gated once by
one worker with the default shard size, which every sharded run must equal (`Unsharded.
same_verdict`). A test file imports `unsharded_run` and `fresh_run` to have the fixtures
``unsharded`` and ``fresh``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.e2e.model_support import KEY_ENV, build_support_repo, open_pull_request, support_config
from tests.fakes.fake_llm import FakeLLMServer, running_fake_llm
from tests.unit.worker_support import commit
from worker.cli.demo import Stack, pull_request_payload
from worker.runtime.metrics import WORKERS_KEY

OWNER, REPO = "acme", "shard-bot"
#: Twenty tickets; the rude prompt fails the even ones only (the judge's rules below).
TICKETS = [f"refund for order {i}" for i in range(1, 21)]
#: The judge's rules for the fake provider.
RULES = {"rules": [
    {"model": "judge-model", "match": "echo: Be kind.", "reply": "**PASS**"},
    *({"model": "judge-model", "match": f"Go away. refund for order {i}\n",
       "reply": "VERDICT: FAIL"} for i in range(2, 21, 2)),
    {"model": "judge-model", "match": "", "reply": "**PASS**"}]}


def build_repo(repo: Path, url: str) -> tuple[str, str]:
    """Build the repository; return its base and head (the rude prompt) SHAs."""
    base = build_support_repo(repo, support_config(url, settings="  concurrency: 4\n",
                                                   rubric="The reply promises the refund."),
                              "Be kind. Ticket: {{ input }}", TICKETS)
    return base, commit(repo, "pr/rude", {"prompts/support.txt": "Go away. {{ input }}\n"})


def gate(work: Path, repo: Path, shas: tuple[str, str], workers: int,
         env: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Gate PR 1 (base -> head) on a fresh stack; return its check run and shard keys."""
    base, head = shas
    with Stack(work, workers=workers, worker_env={KEY_ENV: "sk-e2e-fake", **env}) as stack:
        run = open_pull_request(stack, repo, (OWNER, REPO), 1, head, base)
        keys = sorted(k.decode() for k in redis.Redis.from_url(stack.redis_url).keys(
            "llmgate:shard:*:result"))
        assert stack.state()["violations"] == []
    return run, keys


def _report(run: dict[str, Any], cached: bool) -> list[str]:
    """The lines of a check run's summary, timings masked (and model calls dropped)."""
    lines = _untimed(run["output"]["summary"]).splitlines()
    return [line for line in lines
            if not (cached and line.startswith(("- Model calls", "- Estimated before")))]


def _untimed(text: str) -> str:
    return re.sub(r"\d+(\.\d+)? ?(s|ms)\b", "<t>", text)


@dataclass
class Unsharded:
    """The fake provider, the repository and PR 1's check run gated by one unsharded worker."""

    llm: FakeLLMServer
    repo: Path
    shas: tuple[str, str]
    run: dict[str, Any]
    shard_keys: list[str]

    def same_verdict(self, sharded: dict[str, Any], *, cached: bool = False) -> None:
        """Assert ``sharded`` concludes as the unsharded run: conclusion, annotations, report
        (but its "Model calls" and "Estimated" lines when ``cached``: a retry hits answers an
        earlier try cached)."""
        assert sharded["conclusion"] == self.run["conclusion"] == "failure"
        assert len(self.run["annotations"]) == 10  # the even tickets regressed
        assert sharded["annotations"] == self.run["annotations"]
        assert sharded["output"]["title"] == self.run["output"]["title"]
        assert _report(sharded, cached) == _report(self.run, cached)


@pytest.fixture(scope="module", name="unsharded")
def unsharded_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Unsharded]:
    """The fixture ``unsharded``: gate PR 1 once on one worker with the default shard size
    (the module docstring), once per test file."""
    tmp_path = tmp_path_factory.mktemp("unsharded")
    with running_fake_llm() as llm:
        llm.setup(RULES)
        repo = tmp_path / REPO
        shas = build_repo(repo, llm.url)
        (tmp_path / "one").mkdir()
        run, keys = gate(tmp_path / "one", repo, shas, 1, {})
        yield Unsharded(llm, repo, shas, run, keys)


@pytest.fixture(name="fresh")
def fresh_run(unsharded: Unsharded) -> Unsharded:
    """The fixture ``fresh``: ``unsharded`` with the fake provider's calls forgotten and no
    latency."""
    unsharded.llm.reset()
    unsharded.llm.setup({"latency_ms": 0})
    return unsharded


def taken(client: redis.Redis, key: str) -> list[dict[str, Any]]:
    """The tries of shard ``key`` (``<key>:taken``, oldest first)."""
    return [json.loads(raw) for raw in client.lrange(key + ":taken", 0, -1)]


#: The job lease (s) of the shards and of the gate. With 3 s, CI's loaded machine lost the
#: gate's lease (a renewal waited past it for the CPU): the gate was tried again, up to
#: ``timed_out`` when every try lost it.
LEASE_S = 6
#: After the lease runs out, a worker polls the queue (every 0.5 s) and starts the shard.
POLL_SLACK_S = 2.5
#: The fake provider's latency in the kill test (ms): a shard of 5 at concurrency 2 takes ~2 s.
LATENCY_MS = 600
#: The workers' settings of the kill tests: shards of 5, the lease `LEASE_S`.
KILL_ENV = {KEY_ENV: "sk-e2e-fake", "LLMGATE_SHARD_EXAMPLES": "5", "LLMGATE_JOB_LEASE_S":
            str(LEASE_S), "LLMGATE_JOB_TIMEOUT_S": "120"}


def deliver(stack: Stack, repo: Path, shas: tuple[str, str]) -> None:
    """Open PR 1 (base -> head) on the fake GitHub and deliver its ``opened`` event."""
    base, head = shas
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": 1, "head_sha": head, "base_sha": base,
        "base_ref": "main", "head_ref": "pr1", "clone_url": repo.as_uri()}]})
    assert stack.deliver("pull_request", pull_request_payload(
        "opened", owner=OWNER, repo=REPO, clone_url=repo.as_uri(), number=1, head_sha=head,
        base_sha=base)).status_code < 300


def beats(client: redis.Redis) -> dict[int, int]:
    """Each worker's pid -> jobs it runs, from the heartbeats (ids ``host:pid:random``)."""
    return {int(wid.decode().split(":")[-2]): json.loads(raw)["running"]
            for wid, raw in client.hgetall(WORKERS_KEY).items()}


def results_per_gate(client: redis.Redis) -> dict[str, int]:
    """Shard results written per gate id (keys ``llmgate:shard:<gate id>:<n>:result``)."""
    gates: dict[str, int] = {}
    for raw in client.keys("llmgate:shard:*:result"):
        gate_id = raw.decode().split(":")[2]
        gates[gate_id] = gates.get(gate_id, 0) + 1
    return gates


def retries_of(run: dict[str, Any]) -> set[str]:
    """The titles of a check run's later tries ("llmgate: running (try 2 of 3)", ...)."""
    titles = [h["body"].get("output", {}).get("title") for h in run["history"]]
    return {t for t in titles if t and t.startswith("llmgate: running (try ")}
