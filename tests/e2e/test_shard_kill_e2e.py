"""End to end: a sharded gate whose workers are SIGKILLed (worker/gate/shards.py).

As in test_shard_e2e.py, every sharded check run must equal the `unsharded` one
(tests/e2e/shard_support.py).

- Three workers, lease 6 s, the provider slow (a shard takes ~2 s): the worker answering a
  shard (not the gate's) is SIGKILLed; the shard is started again elsewhere within the lease
  plus one poll, each shard result is written once and the judge is asked once per example
  (unless the gate's own job lost its lease under load and was tried again: then each try
  shards under its own gate id, and the verdict still counts each example once).

The gate's own worker SIGKILLed: test_shard_gate_kill_e2e.py; what they share:
tests/e2e/shard_support.py.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from arq.jobs import deserialize_result

from tests.e2e.ops_support import wait_until
from tests.e2e.shard_support import (
    KILL_ENV,
    LATENCY_MS,
    LEASE_S,
    POLL_SLACK_S,
    Unsharded,
    beats,
    deliver,
    fresh_run,  # noqa: F401 (the fixture fresh)
    results_per_gate,
    retries_of,
    taken,
    unsharded_run,  # noqa: F401 (the fixture unsharded)
)
from worker.cli.demo import Stack

pytestmark = pytest.mark.slow


def _pid(entry: dict[str, Any]) -> int:
    return int(str(entry["worker"]).rsplit(":", 1)[-1])


def _shard_to_kill(stack: Stack, client: redis.Redis, spare: int
                   ) -> tuple[str, subprocess.Popen[bytes]] | None:
    """A shard answering for 0.5 s on a live worker other than ``spare`` (the gate job's
    process), with no result yet; and that worker."""
    for raw in client.keys("llmgate:shard:*:taken"):
        key = raw.decode().removesuffix(":taken")
        tries = taken(client, key)
        if len(tries) != 1 or client.exists(key + ":result") or \
                time.time() - tries[0]["at"] < 0.5:
            continue
        proc = next((p for p in stack.procs if p.pid == _pid(tries[0]) and p.poll() is None),
                    None)
        if proc is not None and proc.pid != spare:
            return key, proc
    return None


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
        wait_until(lambda: len(beats(client)) == 3, 90, "the workers did not start")
        deliver(stack, repo, shas)
        wait_until(lambda: [r for r in stack.state()["check_runs"]
                            if r["status"] == "in_progress"], 60, "the gate did not start")
        (gate_pid,) = [pid for pid, running in beats(client).items() if running]
        key, victim = wait_until(lambda: _shard_to_kill(stack, client, gate_pid), 120,
                                 "no shard ran on a worker other than the gate's")
        victim.kill()
        victim.wait(timeout=10)
        killed = time.monotonic()
        stack.start_worker("worker-after-kill")
        wait_until(lambda: len(taken(client, key)) == 2, 60, "the shard was not redone")
        redone_s = time.monotonic() - killed
        wait_until(lambda: client.exists(key + ":result"), 60, "the redone shard ended")
        answered_s = time.monotonic() - killed
        (sharded,) = stack.wait_for_check(shas[1], timeout_s=180)
        first, second = taken(client, key)
        assert (first["by"], first["try"]) == ("shard", 1)
        assert second in ({**second, "by": "shard", "try": 2}, {**second, "by": "gate"})
        assert _pid(second) != victim.pid
        lost = [k for k in client.keys("llmgate:shard:*:taken")
                if _pid(taken(client, k.decode().removesuffix(":taken"))[0]) == victim.pid]
        gates = results_per_gate(client)
        statuses = _statuses(client)
        assert stack.state()["violations"] == []
    print(f"kill -> redo {redone_s:.2f} s, kill -> result {answered_s:.2f} s")
    assert redone_s < LEASE_S + POLL_SLACK_S, redone_s
    assert answered_s < LEASE_S + POLL_SLACK_S + 10, answered_s
    retried = retries_of(sharded)
    # 4 shards per side, each result written once (SET NX) under the killed shard's gate id; a
    # retry of the gate itself (its lease lost under load) shards under a new gate id (or
    # none, when it reuses what the earlier try stored): at most one gate id per try
    assert gates[key.split(":")[2]] == 8 and len(gates) <= 1 + len(retried), (gates, retried)
    assert set(statuses) <= {"answered", "done", "duplicate"}  # "failed": none
    calls = llm.calls("chat")
    bot = [c for c in calls if c["model"] == "bot-model"]
    judged = [c for c in calls if c["model"] == "judge-model"]
    if not retried:
        assert len(judged) == 40  # one verdict per example and side: none counted twice
        assert 40 <= len(bot) <= 40 + 5 * len(lost)  # the lost shards' answers may be asked again
    fresh.same_verdict(sharded, cached=bool(retried))  # each example counted once
