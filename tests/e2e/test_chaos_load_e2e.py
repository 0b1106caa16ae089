"""Issue 14's table, the rows of load (tests/e2e/test_chaos_e2e.py says how a row is checked).

A burst of synchronize deliveries, whose newest heads must all be concluded within
`BURST_BOUND_S` of its last delivery; and a response cache that fills its Redis, which must never
crowd out the queue's.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.chaos_processes import RedisOptions, RedisProcess
from tests.e2e.chaos_repo import build_chaos_repo, model_config
from tests.e2e.chaos_rows_support import (
    CAUSES,
    ONE_JOB,
    assert_no_loss,
    chaos_fakes,  # noqa: F401 (the fixture fakes)
    report,
)
from tests.e2e.chaos_support import ChaosFakes, ChaosStack

pytestmark = pytest.mark.slow

#: Seconds after a burst's last delivery by which every newest head must be concluded.
BURST_BOUND_S = 30.0
#: Seconds by which ten gates of a model target must be concluded (each worker's first model
#: call imports litellm: seconds of CPU).
CACHE_SETTLE_S = 90.0

#: Key prefixes of what may live on the cache's Redis: answers, learned lengths, reports.
CACHE_PREFIXES = ("llmgate:cache:", "llmgate:lengths:", "llmgate:report:")


def _cache_keys(server: RedisProcess) -> int:
    """Keys of the response cache, the learned lengths and the reports in ``server``."""
    client = server.client()
    try:
        return sum(len(client.keys(f"{prefix}*")) for prefix in CACHE_PREFIXES)
    finally:
        client.close()


def test_cache_writes_never_crowd_out_queued_gates(tmp_path: Path, fakes: ChaosFakes) -> None:
    repo = build_chaos_repo(tmp_path / "repo", 10, config=model_config(fakes.llm_url))
    with ChaosStack(tmp_path, fakes, workers=2, worker_env=ONE_JOB,
                    redis=RedisOptions(maxmemory="4mb", policy="noeviction"),
                    cache_redis=RedisOptions(maxmemory="2mb", policy="allkeys-lru")) as stack:
        fakes.llm("setup", {"default_reply": "x" * 100_000})  # 100 kB answers to cache
        for pr in range(1, 11):
            stack.push(repo, pr)
        counted = stack.settle(repo.newest(), CACHE_SETTLE_S)
        report("cache writes", stack, counted, *CAUSES)
        assert stack.cache_redis is not None
        on_queue, on_cache = _cache_keys(stack.redis), _cache_keys(stack.cache_redis)
        print(f"[cache writes] cache keys on the queue's Redis: {on_queue}, on the cache's: "
              f"{on_cache}")
        assert_no_loss(counted)
        assert (on_queue, on_cache > 0) == (0, True)  # the queue's Redis holds no cache at all
        assert set(counted.conclusions) == {"success"}, counted.line()


def test_a_burst_of_synchronize_deliveries(tmp_path: Path, fakes: ChaosFakes) -> None:
    prs, pushes = 6, 10
    repo = build_chaos_repo(tmp_path / "repo", prs, pushes)
    with ChaosStack(tmp_path, fakes, workers=2) as stack:
        stack.move(repo, dict.fromkeys(range(1, prs + 1), pushes))  # pushed faster than gated
        for push in range(1, pushes + 1):
            for pr in range(1, prs + 1):
                stack.push(repo, pr, push, move=False)
        last = stack.deliveries[-1].sent_at
        counted = stack.settle(repo.newest(), BURST_BOUND_S - (time.time() - last))
        report("burst", stack, counted)
        assert_no_loss(counted)  # every newest head concluded within BURST_BOUND_S
        slots = 2 * 4  # workers x LLMGATE_MAX_JOBS: heads that may have started before their push
        assert counted.superseded_writes <= 2 * slots, counted.line()
        assert counted.writes <= 3 * prs + 2 * slots, counted.line()
