"""Shard results are accepted only whole and in order: a garbled one never counts (pure)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

import pytest
from arq.constants import default_queue_name
from redis.asyncio import Redis

from worker.contract import RepoRef
from worker.errors import ExecutionError
from worker.evals.serialize import to_jsonable
from worker.evals.types import TargetOutput
from worker.gate.shards import RedisShards, parse_result, shard_key, slices
from worker.runtime.settings import SettingsError
from worker.runtime.shard_settings import ShardSettings


def _result(ids: list[str], outputs: list[TargetOutput]) -> str:
    return json.dumps({"ids": ids, "outputs": [to_jsonable(o) for o in outputs]})


def test_slices_cover_every_example_once_in_order() -> None:
    parts = slices(12, 5)
    assert [list(p) for p in parts] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert slices(5, 5) == [range(0, 5)]  # a small suite is one slice: not sharded


def test_a_whole_result_is_read_in_order() -> None:
    outputs = [TargetOutput("a", None), TargetOutput(None, "boom", error_kind="target")]
    assert parse_result(_result(["e1", "e2"], outputs), ["e1", "e2"]) == outputs


@pytest.mark.parametrize("raw", [
    "not json", "[]", json.dumps({"ids": ["e1"], "outputs": []}),
    _result(["e2", "e1"], [TargetOutput("a", None), TargetOutput("b", None)]),
    json.dumps({"ids": ["e1", "e2"], "outputs": [{"output": 1, "surprise": 2}] * 2}),
])
def test_a_garbled_or_foreign_result_fails_closed(raw: str) -> None:
    with pytest.raises(ExecutionError, match="shard"):
        parse_result(raw, ["e1", "e2"], "llmgate:shard:g:3")


def test_an_error_a_shard_reports_fails_the_run_with_its_text() -> None:
    with pytest.raises(ExecutionError, match="prompts/x.txt is missing"):
        parse_result(json.dumps({"error": "prompts/x.txt is missing"}), ["e1"])


def test_settings_read_from_the_environment() -> None:
    assert ShardSettings.from_env({}) == ShardSettings(500, 4, 5)
    assert ShardSettings.from_env({"LLMGATE_SHARD_EXAMPLES": "0"}).examples == 0  # off
    assert ShardSettings.from_env({"LLMGATE_SHARD_EXAMPLES": "50"}).examples == 50
    assert ShardSettings.from_env({"LLMGATE_SHARD_WAIT_S": "2"}).wait_s == 2
    with pytest.raises(SettingsError, match="LLMGATE_SHARD_WAIT_S"):
        ShardSettings.from_env({"LLMGATE_SHARD_WAIT_S": "0"})
    with pytest.raises(SettingsError, match="LLMGATE_SHARD_OUTSTANDING"):
        ShardSettings.from_env({"LLMGATE_SHARD_OUTSTANDING": "0"})


def test_a_retried_gate_job_shards_under_new_keys_so_old_results_never_count() -> None:
    # A gate's job killed while its shards are out is tried again with a new RedisShards (a
    # new gate_id): its shards are enqueued and read under new keys, and the old try's
    # results, written under the old keys, are never merged.
    repo = RepoRef(owner="acme", name="bot", clone_url="file:///r")
    first, retry = (RedisShards(None, ShardSettings(), repo, 1, {})  # type: ignore[arg-type]
                    for _ in range(2))
    assert first.gate_id != retry.gate_id
    assert shard_key(first.gate_id, 0) != shard_key(retry.gate_id, 0)


async def test_both_sides_of_a_gate_share_one_outstanding_cap(redis: Redis) -> None:
    """Field case (bench/shard_throughput.py, issue 20): base and head ran at once and each
    counted its own outstanding shards, so a gate held 5 with a cap of 4. A fake fleet (this
    test) answers one queued shard every 50 ms while counting the gate's jobs in arq's queue:
    with two sides of 3 shards each and a cap of 2, there are never more than 2."""
    repo = RepoRef(owner="acme", name="bot", clone_url="file:///r")
    gate = RedisShards(redis, ShardSettings(2, 2, 3600), repo, 1, {})
    ids = {f"{side}{n}": [f"{side}{n}-e"] for side in "bh" for n in range(3)}
    keys = {name: shard_key(gate.gate_id, i) for i, name in enumerate(ids)}
    most, answered = 0, 0

    async def fleet() -> None:
        nonlocal most, answered
        while answered < len(ids):
            queued = [j.decode() for j in await redis.zrange(default_queue_name, 0, -1)]
            most = max(most, len(queued))
            if queued:
                job = queued[0]
                key = job.removesuffix(":job")
                name = next(n for n, k in keys.items() if k == key)
                # As arq's worker finishes a job: the result and the dequeue in one transaction
                # (removing first let the gate see neither and call the job gone, CI stop 37).
                async with redis.pipeline(transaction=True) as finish:
                    finish.set(key + ":result", _result(ids[name], [TargetOutput("ok", None)]))
                    finish.zrem(default_queue_name, job)
                    await finish.execute()
                answered += 1
            await asyncio.sleep(0.05)

    def side(letter: str) -> Coroutine[Any, Any, list[list[TargetOutput]]]:
        names = [n for n in ids if n.startswith(letter)]
        return gate._run([keys[n] for n in names], [ids[n] for n in names])

    # A slow Redis: each enqueue yields first, so the other side's loop runs meanwhile (the gate
    # counted a shard only after its enqueue returned, and both sides passed the cap, CI stop 38).
    enqueue = gate._enqueue

    async def slow_enqueue(queue: Any, key: str, shard_ids: list[str]) -> Any:
        nonlocal most
        await asyncio.sleep(0.01)
        shard = await enqueue(queue, key, shard_ids)
        most = max(most, await redis.zcard(default_queue_name))
        return shard

    gate._enqueue = slow_enqueue  # type: ignore[method-assign,assignment]
    base, head, _ = await asyncio.wait_for(asyncio.gather(side("b"), side("h"), fleet()), 60)
    assert base == head == [[TargetOutput("ok", None)]] * 3
    assert 1 <= most <= 2
    assert gate._outstanding == 0
