"""Issue 14's table, the rows of Redis (tests/e2e/test_chaos_e2e.py says how a row is checked).

Redis restarts without persistence and with AOF, and a Redis that may evict keys, which neither
process accepts at start-up. A restart followed by a killed worker: test_chaos_supervisor_e2e.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.chaos_processes import RedisOptions, RedisProcess
from tests.e2e.chaos_repo import build_chaos_repo
from tests.e2e.chaos_rows_support import (
    CAUSES,
    ONE_JOB,
    RECONCILE_SETTLE_S,
    SETTLE_S,
    assert_no_loss,
    chaos_fakes,  # noqa: F401 (the fixture fakes)
    in_progress,
    report,
)
from tests.e2e.chaos_support import ROOT, ChaosFakes, ChaosStack
from tests.e2e.ops_support import wait_until

pytestmark = pytest.mark.slow


def test_redis_restart_without_persistence(tmp_path: Path, fakes: ChaosFakes) -> None:
    repo = build_chaos_repo(tmp_path / "repo", 7, sleep_s=1)
    with ChaosStack(tmp_path, fakes, workers=2, worker_env=ONE_JOB) as stack:
        for pr in range(1, 7):
            stack.push(repo, pr)
        wait_until(lambda: in_progress(stack) >= 2, 60, "two gates running")
        stack.redis.restart(down_s=1.0)  # no AOF: an empty Redis comes back
        stack.push(repo, 7)  # queued after the restart
        counted = stack.settle(repo.newest(), RECONCILE_SETTLE_S)
        report("redis restart, no persistence", stack, counted, *CAUSES)
        assert stack.worker_exits() == {"worker-0": [], "worker-1": []}  # outlived the blip
        assert_no_loss(counted)


def test_redis_restart_with_aof(tmp_path: Path, fakes: ChaosFakes) -> None:
    repo = build_chaos_repo(tmp_path / "repo", 7, sleep_s=1)
    with ChaosStack(tmp_path, fakes, workers=2, worker_env=ONE_JOB,
                    redis=RedisOptions(appendonly=True)) as stack:
        for pr in range(1, 7):
            stack.push(repo, pr)
        wait_until(lambda: in_progress(stack) >= 2, 60, "two gates running")
        stack.redis.stop()
        refused = stack.push(repo, 7)  # during the outage
        time.sleep(1.0)
        stack.redis.start()
        # Seven gates on two one-job workers take 12-20 s after Redis is back on a loaded
        # machine (all concluded, none lost: issue 32), so the bound is three settles; the
        # latency on an idle machine is bench/soak.py's.
        counted = stack.settle(repo.newest(), 3 * SETTLE_S)
        report("redis restart with AOF", stack, counted, *CAUSES)
        print(f"[redis restart with AOF] the delivery during the outage: {refused}")
        assert stack.worker_exits() == {"worker-0": [], "worker-1": []}
        assert_no_loss(counted)


def _start_both(redis_url: str, tmp_path: Path, name: str) -> list[subprocess.Popen[str]]:
    """``llmgate worker`` and ``llmgate serve`` against ``redis_url`` (stderr kept)."""
    env = {**os.environ, "REDIS_URL": redis_url, "GITHUB_APP_ID": "4242",
           "GITHUB_APP_PRIVATE_KEY_FILE": str(tmp_path / "key.pem"),
           "GITHUB_WEBHOOK_SECRET": "s", "LLMGATE_WORKDIR": str(tmp_path / f"work-{name}")}
    cli = [sys.executable, "-m", "worker.cli"]
    return [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
            for cmd in ([*cli, "worker"], [*cli, "serve", "--port", "0"])]


def _accepted(server: RedisProcess) -> bool:
    """Whether a worker heartbeated into this Redis (it started taking jobs)."""
    client = server.client()
    try:
        return bool(client.hlen("llmgate:metrics:workers"))
    finally:
        client.close()


def test_an_evicting_redis_is_refused_at_start_up(tmp_path: Path, fakes: ChaosFakes) -> None:
    (tmp_path / "key.pem").write_text(fakes.private_pem)
    servers = {"volatile-lru": RedisProcess(tmp_path, "evicting", RedisOptions(
                   maxmemory="64mb", policy="volatile-lru")),
               "allkeys-lru, CONFIG refused": RedisProcess(tmp_path, "managed", RedisOptions(
                   maxmemory="64mb", policy="allkeys-lru", config_disabled=True))}
    procs: dict[str, list[subprocess.Popen[str]]] = {}
    try:
        for name, server in servers.items():
            server.start()
            procs[name] = _start_both(server.url, tmp_path, name.split(",")[0])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                p.poll() is not None for ps in procs.values() for p in ps):
            if any(_accepted(s) for s in servers.values()):
                break  # a worker took the evicting Redis: it will not refuse any more
            time.sleep(0.2)
        outcomes = {name: [(p.poll(), p.stderr.read() if p.poll() is not None and p.stderr
                            else "still running") for p in ps] for name, ps in procs.items()}
        print(f"\n[evicting redis] {outcomes}")
        for name, pair in outcomes.items():
            for code, stderr in pair:
                assert code == 2, f"{name}: {stderr}"
                assert len(stderr.splitlines()) == 1 and "maxmemory-policy" in stderr, stderr
    finally:
        for ps in procs.values():
            for p in ps:
                if p.poll() is None:
                    p.terminate()
                    p.wait(timeout=15)
        for server in servers.values():
            server.stop()
