"""End to end: one gate over many workers (worker/gate/shards.py).

The same pull request is gated against the deterministic fake provider once by one worker with
the default shard size (nothing sharded: the `unsharded` fixture of tests/e2e/shard_support.py)
and then sharded with ``LLMGATE_SHARD_EXAMPLES=5`` (each side's 20 examples in 4 shards); every
sharded check run must agree with it: conclusion, annotations and the report apart from timings.

- Two workers take the shards.
- One worker with one job slot (``LLMGATE_MAX_JOBS=1``): no worker can take the shards, so the
  gate's job answers them itself after ``LLMGATE_SHARD_WAIT_S`` (no deadlock).

Killed workers (a shard's, the gate's own) are in test_shard_kill_e2e.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from tests.e2e.model_support import KEY_ENV, open_pull_request
from tests.e2e.shard_support import (
    OWNER,
    REPO,
    Unsharded,
    fresh_run,  # noqa: F401 (the fixture fresh)
    gate,
    taken,
    unsharded_run,  # noqa: F401 (the fixture unsharded)
)
from worker.cli.demo import Stack

pytestmark = pytest.mark.slow


def test_a_sharded_gate_over_two_workers_equals_the_unsharded_one(
        fresh: Unsharded, tmp_path: Path) -> None:
    sharded, keys = gate(tmp_path, fresh.repo, fresh.shas, 2, {"LLMGATE_SHARD_EXAMPLES": "5"})
    assert fresh.shard_keys == []  # the default shard size does not shard 20 examples
    assert len(keys) == 8  # 4 shards per side, each result written once
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
        takers = {entry["by"] for key in keys for entry in taken(client, key)}
        results = client.keys("llmgate:shard:*:result")
        assert stack.state()["violations"] == []
    print(f"one worker, one slot: {took_s:.1f} s")
    assert (len(keys), len(results), takers) == (8, 8, {"gate"})  # its only slot: the gate's
    assert len([c for c in fresh.llm.calls("chat") if c["model"] == "bot-model"]) == 40
    fresh.same_verdict(sharded)
