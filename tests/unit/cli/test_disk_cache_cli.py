"""``llmgate run``'s on-disk response cache (no REDIS_URL), through the real CLI, and the
SQLite store's expiry and length samples."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import echo_repo
from worker.cli.main import main
from worker.evals.llm.cache import LENGTH_SAMPLES
from worker.evals.llm.disk_cache import DiskCache, default_path

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


def test_without_redis_answers_are_cached_on_disk(llm: FakeLLMServer, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    repo = echo_repo(llm, tmp_path / "repo")
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main(["run", "--repo", str(repo)]) == 0 and len(llm.calls()) == 2
    assert default_path(os.environ).is_file()
    assert main(["run", "--repo", str(repo)]) == 0 and len(llm.calls()) == 2  # from disk
    assert main(["run", "--repo", str(repo), "--no-cache"]) == 0 and len(llm.calls()) == 4
    assert main(["run", "--repo", str(repo), "--refresh-cache"]) == 0
    assert len(llm.calls()) == 6


def test_entries_expire_and_length_samples_are_capped(tmp_path: Path) -> None:
    now = [1000.0]
    cache = DiskCache(tmp_path / "c.sqlite3", "ns", ttl_s=60, clock=lambda: now[0])

    async def scenario() -> tuple[object, object, object, float | None]:
        for n in range(LENGTH_SAMPLES + 10):
            await cache.put(f"k{n}", {"n": n}, ("fam", 1 if n < 10 else 3))
        hit = await cache.get("k3")
        mean = await cache.mean_length("fam")  # the oldest 10 (1 token) were dropped
        now[0] += 61
        return hit, mean, await cache.lookup(["k3"]), await cache.mean_length("fam")

    hit, mean, after, mean_after = asyncio.run(scenario())
    assert (hit, mean, after, mean_after) == ({"n": 3}, 3.0, [None], None)


def test_the_default_file_follows_the_environment(tmp_path: Path) -> None:
    assert default_path({"LLMGATE_CACHE_DIR": "/c"}) == Path("/c/responses.sqlite3")
    assert default_path({"XDG_CACHE_HOME": "/x"}) == Path("/x/llmgate/responses.sqlite3")
    assert default_path({"HOME": "/h"}) == Path("/h/.cache/llmgate/responses.sqlite3")


# A rerun answered from the cache imports no litellm: tests/unit/cli/test_lazy_litellm_cli.py.
