"""The baseline store in a real Redis: records, TTLs, the latest push kept, the size cap."""

from __future__ import annotations

import time

import pytest
from redis.asyncio import Redis

from tests.unit.baselines.test_baseline_serialize import rich_result
from worker.baselines.keys import BaselineKey
from worker.baselines.store import (
    DEFAULT_MAX_BYTES,
    DEFAULT_TTL_S,
    Baseline,
    BaselineSettings,
    BaselineStore,
    latest_key,
    record_key,
)
from worker.runtime.settings import SettingsError

REPO = "acme/bot"
KEY = BaselineKey("support", "c" * 64, "d" * 64, "f" * 64)
TTL_S = 3600


def store_at(redis: Redis, now: list[float], **settings: int) -> BaselineStore:
    """A store whose clock reads ``now[0]`` (Unix seconds)."""
    return BaselineStore(redis, BaselineSettings(**({"ttl_s": TTL_S} | settings)),
                         clock=lambda: now[0])


def baseline(sha: str, key: BaselineKey = KEY, created_at: float = 1000.0) -> Baseline:
    return Baseline(REPO, sha, key, rich_result(), "push", "main", 0, created_at)


async def test_a_record_is_stored_with_its_ttl_and_read_back(redis):
    store = store_at(redis, [1000.0])
    assert await store.put(baseline("a" * 40)) is None
    assert await redis.ttl(record_key(REPO, "a" * 40, KEY)) == TTL_S
    assert await store.get(REPO, "a" * 40, KEY) == baseline("a" * 40)
    other_key = BaselineKey("support", "c" * 64, "0" * 64, "f" * 64)  # another dataset
    assert await store.get(REPO, "a" * 40, other_key) is None
    assert await store.get(REPO, "b" * 40, KEY) is None  # never another commit
    assert await store.get("acme/other", "a" * 40, KEY) is None


async def test_a_corrupt_or_mismatched_record_counts_as_absent(redis):
    store = store_at(redis, [1000.0])
    await redis.set(record_key(REPO, "a" * 40, KEY), b"z\x00garbage")
    assert await store.get(REPO, "a" * 40, KEY) is None
    await store.put(baseline("b" * 40))  # a record copied under another commit's key
    await redis.copy(record_key(REPO, "b" * 40, KEY), record_key(REPO, "c" * 40, KEY))
    assert await store.get(REPO, "c" * 40, KEY) is None


async def test_a_record_over_the_cap_is_not_stored(redis):
    store = store_at(redis, [1000.0], max_bytes=1024)
    why = await store.put(baseline("a" * 40))
    assert why is not None and why.endswith("over the cap of 1024 (LLMGATE_BASELINE_MAX_BYTES)")
    assert await redis.exists(record_key(REPO, "a" * 40, KEY)) == 0


async def test_the_latest_push_is_kept_and_the_previous_expires(redis):
    t0 = int(time.time())
    now = [float(t0)]
    store = store_at(redis, now)
    first, second = "1" * 40, "2" * 40
    await store.put(baseline(first))
    assert await store.mark_latest(REPO, "main", first, [KEY], pushed_at=100) is True
    assert await redis.ttl(record_key(REPO, first, KEY)) == -1  # no expiry while latest
    assert await redis.ttl(latest_key(REPO, "main")) == -1
    now[0] = t0 + 500.0
    await store.put(baseline(second))
    assert await store.mark_latest(REPO, "main", second, [KEY], pushed_at=200) is True
    assert await redis.ttl(record_key(REPO, second, KEY)) == -1
    # the previous latest expires TTL after it was marked, not TTL after it was replaced
    assert await redis.expiretime(record_key(REPO, first, KEY)) == t0 + TTL_S
    assert (await store.latest(REPO, "main"))["sha"] == second


async def test_an_older_push_finishing_late_does_not_move_the_pointer(redis):
    store = store_at(redis, [1000.0])
    newer, older = "2" * 40, "1" * 40
    await store.put(baseline(newer))
    await store.put(baseline(older))
    assert await store.mark_latest(REPO, "main", newer, [KEY], pushed_at=200) is True
    assert await store.mark_latest(REPO, "main", older, [KEY], pushed_at=100) is False
    assert (await store.latest(REPO, "main"))["sha"] == newer
    assert await redis.ttl(record_key(REPO, older, KEY)) == TTL_S  # still expires
    assert await redis.ttl(record_key(REPO, newer, KEY)) == -1


async def test_an_expired_previous_latest_goes_at_once(redis):
    now = [time.time() - TTL_S - 5]  # the first push is older than the TTL when replaced
    store = store_at(redis, now)
    first, second = "1" * 40, "2" * 40
    await store.put(baseline(first))
    await store.mark_latest(REPO, "main", first, [KEY], pushed_at=100)
    now[0] = time.time()
    await store.put(baseline(second))
    await store.mark_latest(REPO, "main", second, [KEY], pushed_at=200)
    assert await redis.exists(record_key(REPO, first, KEY)) == 0
    assert await store.get(REPO, second, KEY) is not None


def test_settings_from_the_environment() -> None:
    assert BaselineSettings.from_env({}) == BaselineSettings(DEFAULT_TTL_S, DEFAULT_MAX_BYTES)
    assert BaselineSettings.from_env({"LLMGATE_BASELINE_TTL_S": "86400",
                                      "LLMGATE_BASELINE_MAX_BYTES": "2048"}) == \
        BaselineSettings(86400, 2048)
    for name, value in (("LLMGATE_BASELINE_TTL_S", "59"), ("LLMGATE_BASELINE_TTL_S", "1d"),
                        ("LLMGATE_BASELINE_MAX_BYTES", "-5")):
        with pytest.raises(SettingsError) as caught:
            BaselineSettings.from_env({name: value})
        assert str(caught.value).startswith(f"{name} must be a whole number")
