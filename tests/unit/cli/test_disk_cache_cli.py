"""``llmgate run``'s on-disk response cache (no REDIS_URL), through the real CLI, and the
SQLite store's expiry and length samples."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
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


def test_a_rerun_answered_from_the_cache_does_not_import_litellm(
        llm: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Field case (issue 20): importing litellm in the background on every run made a warm
    re-run of the 200-ticket job 1.97x slower than before (4.6 vs 2.3 s). Only a run that is
    not marked as answered before imports it up front (worker/cli/start_up.py)."""
    repo = echo_repo(llm, tmp_path / "repo")
    monkeypatch.delenv("REDIS_URL", raising=False)
    verbose = ["run", "--repo", str(repo), "--verbose"]
    assert main(verbose) == 0
    assert "llmgate: importing litellm in the background" in capsys.readouterr().err
    assert main(verbose) == 0
    assert "llmgate: litellm not imported up front: this run finished before" in \
        capsys.readouterr().err
    code = ("import sys; from worker.cli.main import main\n"
            f"code = main(['run', '--repo', {str(repo)!r}])\n"
            "print('litellm' in sys.modules, code)")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, timeout=300, env=os.environ.copy())
    assert found.stdout.split()[-2:] == ["False", "0"]  # answered without litellm
    assert len(llm.calls()) == 2
    assert main([*verbose, "--refresh-cache"]) == 0  # every call is sent again
    assert "importing litellm in the background" in capsys.readouterr().err
    (repo / "notes.txt").write_text("an uncommitted change\n", encoding="utf-8")
    assert main(verbose) == 0  # another working tree: another run
    assert "importing litellm in the background" in capsys.readouterr().err
