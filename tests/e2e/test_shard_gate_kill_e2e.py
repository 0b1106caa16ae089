"""End to end: the gate's own worker is SIGKILLed while its shards are out (worker/gate/shards.py).

Its job's next try, on the same check run, shards under a new gate id, so the old try's results
are never merged; the verdict equals the `unsharded` one (tests/e2e/shard_support.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.e2e.ops_support import wait_until
from tests.e2e.shard_support import (
    KILL_ENV,
    LATENCY_MS,
    Unsharded,
    beats,
    deliver,
    fresh_run,  # noqa: F401 (the fixture fresh)
    results_per_gate,
    retries_of,
    unsharded_run,  # noqa: F401 (the fixture unsharded)
)
from worker.cli.demo import Stack

pytestmark = pytest.mark.slow


def test_a_gate_whose_own_worker_is_killed_retries_under_new_shard_keys(
        fresh: Unsharded, tmp_path: Path) -> None:
    fresh.llm.setup({"latency_ms": LATENCY_MS})
    with Stack(tmp_path, workers=3, worker_env=KILL_ENV) as stack:
        client = redis.Redis.from_url(stack.redis_url)
        wait_until(lambda: len(beats(client)) == 3, 90, "the workers did not start")
        deliver(stack, fresh.repo, fresh.shas)
        wait_until(lambda: [r for r in stack.state()["check_runs"]
                            if r["status"] == "in_progress"], 60, "the gate did not start")
        (gate_pid,) = [pid for pid, running in beats(client).items() if running]
        wait_until(lambda: client.keys("llmgate:shard:*:taken"), 60, "no shard started")
        (gate_proc,) = [p for p in stack.procs if p.pid == gate_pid]
        gate_proc.kill()  # while its shards are out
        gate_proc.wait(timeout=10)
        stack.start_worker("worker-after-kill")
        (sharded,) = stack.wait_for_check(fresh.shas[1], timeout_s=180)
        gates = results_per_gate(client)
        assert stack.state()["violations"] == []
    retries = retries_of(sharded)
    assert "llmgate: running (try 2 of 3)" in retries  # the same check run, its job's next try
    print(f"results per gate id: {sorted(gates.values())}")
    # the killed try's shards and each retry's own (a base side the killed try stored may be
    # reused, so a retry may shard only head): old ones unread. Under load a retry can itself
    # outlive its lease and be tried again (try 3 of 3): one gate id per try, never more
    assert len(gates) == 1 + len(retries)
    fresh.same_verdict(sharded, cached=True)
