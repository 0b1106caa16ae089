"""End to end: one gate over many workers (worker/gate/shards.py).

The same pull request is gated against the deterministic fake provider once by one worker with
the default shard size (nothing sharded: the module's `unsharded` fixture) and then sharded
with ``LLMGATE_SHARD_EXAMPLES=5`` (each side's 20 examples in 4 shards); every sharded check run
must agree with it: conclusion, annotations and the report apart from timings.

- Two workers take the shards.
- Three workers, lease 3 s, the provider slow (a shard takes ~2 s): the worker answering a
  shard (not the gate's) is SIGKILLed; the shard is started again elsewhere within the lease
  plus one poll, each shard result is written once and the judge is asked once per example.
- One worker with one job slot (``LLMGATE_MAX_JOBS=1``): no worker can take the shards, so the
  gate's job answers them itself after ``LLMGATE_SHARD_WAIT_S`` (no deadlock).
- The gate's own worker is SIGKILLed while its shards are out: its job's next try, on the same
  check run, shards under a new gate id, so the old try's results are never merged.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from arq.jobs import deserialize_result

from tests.e2e.model_support import KEY_ENV, build_support_repo, open_pull_request, support_config
from tests.e2e.ops_support import wait_until
from tests.fakes.fake_llm import FakeLLMServer, running_fake_llm
from tests.unit.worker_support import commit
from worker.cli.demo import Stack, pull_request_payload
from worker.runtime.metrics import WORKERS_KEY

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


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Unsharded]:
    """Gate PR 1 once on one worker with the default shard size (module docstring)."""
    tmp_path = tmp_path_factory.mktemp("unsharded")
    with running_fake_llm() as llm:
        llm.setup(RULES)
        repo = tmp_path / REPO
        shas = _repo(repo, llm.url)
        (tmp_path / "one").mkdir()
        run, keys = _gate(tmp_path / "one", repo, shas, 1, {})
        yield Unsharded(llm, repo, shas, run, keys)


@pytest.fixture()
def fresh(unsharded: Unsharded) -> Unsharded:
    """`unsharded` with the fake provider's calls forgotten and no latency."""
    unsharded.llm.reset()
    unsharded.llm.setup({"latency_ms": 0})
    return unsharded


def test_a_sharded_gate_over_two_workers_equals_the_unsharded_one(
        fresh: Unsharded, tmp_path: Path) -> None:
    sharded, keys = _gate(tmp_path, fresh.repo, fresh.shas, 2, {"LLMGATE_SHARD_EXAMPLES": "5"})
    assert fresh.shard_keys == []  # the default shard size does not shard 20 examples
    assert len(keys) == 8  # 4 shards per side, each result written once
    fresh.same_verdict(sharded)


# ---------------------------------------------------------------- a shard's worker SIGKILLed
LEASE_S = 3
#: After the lease runs out, a worker polls the queue (every 0.5 s) and starts the shard.
POLL_SLACK_S = 2.5
#: The fake provider's latency in the kill test (ms): a shard of 5 at concurrency 2 takes ~2 s.
LATENCY_MS = 600
KILL_ENV = {KEY_ENV: "sk-e2e-fake", "LLMGATE_SHARD_EXAMPLES": "5", "LLMGATE_JOB_LEASE_S":
            str(LEASE_S), "LLMGATE_JOB_TIMEOUT_S": "120"}


def _deliver(stack: Stack, repo: Path, shas: tuple[str, str]) -> None:
    """Open PR 1 (base -> head) on the fake GitHub and deliver its ``opened`` event."""
    base, head = shas
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": REPO, "number": 1, "head_sha": head, "base_sha": base,
        "base_ref": "main", "head_ref": "pr1", "clone_url": repo.as_uri()}]})
    assert stack.deliver("pull_request", pull_request_payload(
        "opened", owner=OWNER, repo=REPO, clone_url=repo.as_uri(), number=1, head_sha=head,
        base_sha=base)).status_code < 300


def _taken(client: redis.Redis, key: str) -> list[dict[str, Any]]:
    """The tries of shard ``key`` (``<key>:taken``, oldest first)."""
    return [json.loads(raw) for raw in client.lrange(key + ":taken", 0, -1)]


def _pid(entry: dict[str, Any]) -> int:
    return int(str(entry["worker"]).rsplit(":", 1)[-1])


def _shard_to_kill(stack: Stack, client: redis.Redis, spare: int
                   ) -> tuple[str, subprocess.Popen[bytes]] | None:
    """A shard answering for 0.5 s on a live worker other than ``spare`` (the gate job's
    process), with no result yet; and that worker."""
    for raw in client.keys("llmgate:shard:*:taken"):
        key = raw.decode().removesuffix(":taken")
        tries = _taken(client, key)
        if len(tries) != 1 or client.exists(key + ":result") or \
                time.time() - tries[0]["at"] < 0.5:
            continue
        proc = next((p for p in stack.procs if p.pid == _pid(tries[0]) and p.poll() is None),
                    None)
        if proc is not None and proc.pid != spare:
            return key, proc
    return None


def _beats(client: redis.Redis) -> dict[int, int]:
    """Each worker's pid -> jobs it runs, from the heartbeats (ids ``host:pid:random``)."""
    return {int(wid.decode().split(":")[-2]): json.loads(raw)["running"]
            for wid, raw in client.hgetall(WORKERS_KEY).items()}


def _statuses(client: redis.Redis) -> list[str]:
    """The arq results of every shard job (``answered``, ``duplicate``, ...), sorted."""
    found = []
    for raw in client.keys("arq:result:llmgate:shard:*"):
        result = deserialize_result(client.get(raw) or b"").result
        found.append(result["status"] if isinstance(result, dict) else repr(result))
    return sorted(found)


def test_a_shard_whose_worker_is_killed_is_redone_within_the_lease_and_counted_once(
        fresh: Unsharded, tmp_path: Path) -> None:
    llm, repo, shas = fresh.llm, fresh.repo, fresh.shas
    llm.setup({"latency_ms": LATENCY_MS})
    with Stack(tmp_path, workers=3, worker_env=KILL_ENV) as stack:
        client = redis.Redis.from_url(stack.redis_url)
        wait_until(lambda: len(_beats(client)) == 3, 90, "the workers did not start")
        _deliver(stack, repo, shas)
        wait_until(lambda: [r for r in stack.state()["check_runs"]
                            if r["status"] == "in_progress"], 60, "the gate did not start")
        (gate_pid,) = [pid for pid, running in _beats(client).items() if running]
        key, victim = wait_until(lambda: _shard_to_kill(stack, client, gate_pid), 120,
                                 "no shard ran on a worker other than the gate's")
        victim.kill()
        victim.wait(timeout=10)
        killed = time.monotonic()
        stack.start_worker("worker-after-kill")
        wait_until(lambda: len(_taken(client, key)) == 2, 60, "the shard was not redone")
        redone_s = time.monotonic() - killed
        wait_until(lambda: client.exists(key + ":result"), 60, "the redone shard ended")
        answered_s = time.monotonic() - killed
        (sharded,) = stack.wait_for_check(shas[1], timeout_s=180)
        first, second = _taken(client, key)
        assert (first["by"], first["try"]) == ("shard", 1)
        assert second in ({**second, "by": "shard", "try": 2}, {**second, "by": "gate"})
        assert _pid(second) != victim.pid
        lost = [k for k in client.keys("llmgate:shard:*:taken")
                if _pid(_taken(client, k.decode().removesuffix(":taken"))[0]) == victim.pid]
        results = client.keys("llmgate:shard:*:result")
        statuses = _statuses(client)
        assert stack.state()["violations"] == []
    print(f"kill -> redo {redone_s:.2f} s, kill -> result {answered_s:.2f} s")
    assert redone_s < LEASE_S + POLL_SLACK_S, redone_s
    assert answered_s < LEASE_S + POLL_SLACK_S + 10, answered_s
    assert len(results) == 8  # 4 shards per side, each result written once (SET NX)
    assert set(statuses) <= {"answered", "done", "duplicate"}  # "failed": none
    calls = llm.calls("chat")
    bot = [c for c in calls if c["model"] == "bot-model"]
    judged = [c for c in calls if c["model"] == "judge-model"]
    assert len(judged) == 40  # one verdict per example and side: none counted twice
    assert 40 <= len(bot) <= 40 + 5 * len(lost)  # the lost shards' answers may be asked again
    fresh.same_verdict(sharded)


def test_one_worker_with_one_job_slot_finishes_a_sharded_gate_itself(
        fresh: Unsharded, tmp_path: Path) -> None:
    env = {"LLMGATE_SHARD_EXAMPLES": "5", "LLMGATE_MAX_JOBS": "1", "LLMGATE_SHARD_WAIT_S": "1"}
    with Stack(tmp_path, workers=1, worker_env={KEY_ENV: "sk-e2e-fake", **env}) as stack:
        client = redis.Redis.from_url(stack.redis_url)
        started = time.monotonic()
        sharded = open_pull_request(stack, fresh.repo, (OWNER, REPO), 1, fresh.shas[1],
                                    fresh.shas[0])
        took_s = time.monotonic() - started
        keys = [k.decode().removesuffix(":taken") for k in client.keys("llmgate:shard:*:taken")]
        takers = {entry["by"] for key in keys for entry in _taken(client, key)}
        results = client.keys("llmgate:shard:*:result")
        assert stack.state()["violations"] == []
    print(f"one worker, one slot: {took_s:.1f} s")
    assert (len(keys), len(results), takers) == (8, 8, {"gate"})  # its only slot: the gate's
    assert len([c for c in fresh.llm.calls("chat") if c["model"] == "bot-model"]) == 40
    fresh.same_verdict(sharded)


def test_a_gate_whose_own_worker_is_killed_retries_under_new_shard_keys(
        fresh: Unsharded, tmp_path: Path) -> None:
    fresh.llm.setup({"latency_ms": LATENCY_MS})
    with Stack(tmp_path, workers=3, worker_env=KILL_ENV) as stack:
        client = redis.Redis.from_url(stack.redis_url)
        wait_until(lambda: len(_beats(client)) == 3, 90, "the workers did not start")
        _deliver(stack, fresh.repo, fresh.shas)
        wait_until(lambda: [r for r in stack.state()["check_runs"]
                            if r["status"] == "in_progress"], 60, "the gate did not start")
        (gate_pid,) = [pid for pid, running in _beats(client).items() if running]
        wait_until(lambda: client.keys("llmgate:shard:*:taken"), 60, "no shard started")
        (gate_proc,) = [p for p in stack.procs if p.pid == gate_pid]
        gate_proc.kill()  # while its shards are out
        gate_proc.wait(timeout=10)
        stack.start_worker("worker-after-kill")
        (sharded,) = stack.wait_for_check(fresh.shas[1], timeout_s=180)
        gates: dict[str, int] = {}
        for raw in client.keys("llmgate:shard:*:result"):
            gate_id = raw.decode().split(":")[2]
            gates[gate_id] = gates.get(gate_id, 0) + 1
        assert stack.state()["violations"] == []
    titles = [h["body"].get("output", {}).get("title") for h in sharded["history"]]
    assert "llmgate: running (try 2 of 3)" in titles  # the same check run, its job's next try
    print(f"results per gate id: {sorted(gates.values())}")
    retries = {t for t in titles if t and t.startswith("llmgate: running (try ")}
    # the killed try's shards and each retry's own (a base side the killed try stored may be
    # reused, so a retry may shard only head): old ones unread. Under load a retry can itself
    # outlive its lease and be tried again (try 3 of 3): one gate id per try, never more
    assert len(gates) == 1 + len(retries)
    fresh.same_verdict(sharded, cached=True)
