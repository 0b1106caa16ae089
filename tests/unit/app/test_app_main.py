"""``uvicorn app.main:app`` as a real process: settings from the environment, real HTTP."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import httpx

from app.main import GC_YOUNG_THRESHOLD, tune_gc
from tests.conftest import free_port, wait_for_port
from tests.unit.app_support import SECRET, fixture_bytes, headers, redis_keys

ROOT = Path(__file__).parents[3]


def test_served_by_uvicorn_from_the_environment(redis_url: str) -> None:
    port = free_port()
    env = os.environ | {"GITHUB_WEBHOOK_SECRET": SECRET, "REDIS_URL": redis_url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port",
         str(port), "--log-level", "info", "--no-access-log"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    body = fixture_bytes("pull_request.synchronize.json")
    try:
        wait_for_port(port)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            health = client.get("/healthz")
            answer = client.post("/webhook", content=body,
                                 headers=headers("pull_request", "main-1", body))
            wrong_method = client.get("/webhook")
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=10)
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert (answer.status_code, answer.json()) == (202, {"status": "queued"})
    assert wrong_method.status_code == 405
    assert "arq:queue" in redis_keys(redis_url)
    assert "app.webhooks: delivery main-1 event=pull_request action=synchronize: queued" in output
    assert SECRET not in output


def test_tune_gc_freezes_the_start_up_heap_and_raises_the_young_threshold() -> None:
    saved = gc.get_threshold()
    gc.unfreeze()  # another test in this process may have imported litellm (worker.evals.llm.client
    assert gc.get_freeze_count() == 0  # freezes the heap after that import, too)
    try:
        tune_gc()
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, saved[1], saved[2])
        assert gc.get_freeze_count() > 10_000  # modules, classes, functions of this process
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # a cycle made after start-up is still collected
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)
