"""A full queue Redis (``maxmemory`` reached under ``noeviction``) stops no worker (issue 32,
item 2), with every part a real process (tests/e2e/chaos_support.py).

Redis is filled until it refuses writes (``OOM command not allowed``). Before the fix the
worker's next cron enqueue (the sweeper's, every 5 s here) or health record got the refusal and
the worker exited 1. Now it stays up, logs the refusal once, and every view says so:
``llmgate healthcheck`` (exit 1, the reason), ``/readyz`` (503, the reason) and ``/metrics``
(``llmgate_redis_writes_refused 1``); a delivery meanwhile is answered 202. Once the
filler is deleted, the worker logs the recovery once, the views turn back, and the delivery's
gate runs and concludes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from redis.exceptions import OutOfMemoryError

from tests.e2e.chaos_processes import RedisOptions
from tests.e2e.chaos_repo import build_chaos_repo
from tests.e2e.chaos_support import ROOT, ChaosFakes, ChaosStack
from tests.e2e.ops_support import wait_until

pytestmark = pytest.mark.slow

#: Seconds the worker must outlive a full Redis: 24 polls of arq, 2 sweeper cron ticks and
#: 2 reconciler passes (tests/e2e/chaos_support.CHAOS_WORKER_ENV), a metrics flush.
FULL_S = 12.0
REFUSED = "Redis refuses writes"


@pytest.fixture(scope="module")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosFakes]:
    """The fake GitHub and the fake provider."""
    with ChaosFakes(tmp_path_factory.mktemp("full-fakes")) as started:
        yield started


def healthcheck(heartbeat: Path) -> tuple[int, str]:
    """Run ``llmgate healthcheck`` for the worker; return its exit code and output."""
    done = subprocess.run([sys.executable, "-m", "worker.cli", "healthcheck"], cwd=ROOT,
                          env={**os.environ, "LLMGATE_HEARTBEAT_FILE": str(heartbeat)},
                          capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, (done.stdout + done.stderr).strip()


def _unhealthy(heartbeat: Path) -> str:
    """What ``llmgate healthcheck`` says when it exits 1, else ""."""
    code, said = healthcheck(heartbeat)
    return said if code == 1 else ""


def fill(stack: ChaosStack) -> list[str]:
    """Write values of 256 KiB, then 4 KiB, then 64 bytes, each until Redis refuses one (a
    refused value's own buffer is freed after the refusal: the small ones close that gap);
    return the filler's keys."""
    client, keys = stack.redis.client(), list[str]()
    try:
        for size in (262144, 4096, 64):
            for _ in range(10000):
                key = f"filler:{len(keys)}"
                try:
                    client.set(key, b"x" * size)
                except OutOfMemoryError:
                    break
                keys.append(key)
            else:
                raise AssertionError(f"Redis never refused a write of {size} bytes")
    finally:
        client.close()
    return keys


def views(stack: ChaosStack) -> tuple[int, str, str]:
    """``/readyz``'s status and reason, and the refused-writes gauge line of ``/metrics``."""
    ready = httpx.get(f"{stack.web_url}/readyz", timeout=10)
    gauge = [line for line in httpx.get(f"{stack.web_url}/metrics", timeout=10).text.splitlines()
             if line.startswith("llmgate_redis_writes_refused ")]
    return ready.status_code, str(ready.json().get("reason", "")), "".join(gauge)


def test_a_full_redis_stops_no_worker_and_is_reported_until_memory_is_freed(
        tmp_path: Path, fakes: ChaosFakes) -> None:
    repo = build_chaos_repo(tmp_path / "repo", 1)
    heartbeat = tmp_path / "worker.heartbeat"
    with ChaosStack(tmp_path, fakes, workers=1, redis=RedisOptions(maxmemory="16mb"),
                    worker_env={"LLMGATE_HEARTBEAT_FILE": str(heartbeat)}) as stack:
        worker = stack.workers[0]
        filler = fill(stack)
        full_at = time.monotonic()
        said = wait_until(lambda: _unhealthy(heartbeat), 30,
                          "the worker's health check reporting the full Redis")
        assert "Redis refuses its writes (out of memory)" in said, said
        delivery = stack.push(repo, 1)  # queued or kept by the web process until Redis takes it
        time.sleep(max(0.0, FULL_S - (time.monotonic() - full_at)))
        assert worker.proc.poll() is None, stack.log_lines("Traceback", "Error")[-12:]
        status, reason, gauge = views(stack)
        assert (status, gauge) == (503, "llmgate_redis_writes_refused 1.0"), (reason, gauge)
        assert "redis refuses writes (out of memory)" in reason
        assert delivery.status == 202, delivery  # "spooled" unless a write fit in between
        assert len(stack.log_lines(REFUSED)) == 1, stack.log_lines("OOM", REFUSED)
        assert stack.github.state()["check_runs"] == []  # no job started: no try spent

        client = stack.redis.client()
        client.delete(*filler)  # memory freed: writes are accepted again
        client.close()
        stack.wait_concluded(repo.heads[(1, 1)], 60)  # the delivery's gate ran
        wait_until(lambda: healthcheck(heartbeat)[0] == 0, 30, "a healthy worker again")
        wait_until(lambda: views(stack) [::2] == (200, "llmgate_redis_writes_refused 0.0"), 30,
                   "/readyz ready and the gauge 0")
        assert stack.worker_exits() == {"worker-0": []}
        assert len(stack.log_lines("Redis accepts writes again")) == 1
        assert len(stack.log_lines(REFUSED)) == 1
        assert stack.log_lines("transient failure") == []  # the gate ran at its first try
        print("\n".join(stack.log_lines("OOM", "OutOfMemory", REFUSED, "accepts writes")))
