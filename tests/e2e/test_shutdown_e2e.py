"""Graceful shutdown with real processes: SIGTERM while a job runs, and while a delivery is read.

- A worker given time (``LLMGATE_SHUTDOWN_GRACE_S``) finishes its running job, takes no new
  one, and exits 0; the job it did not take waits in the queue.
- A worker stopped at once (grace 0) cancels its job: arq puts the job back and the other
  worker runs it to a real conclusion on the same check run (never a false ``failure``, never
  a second check run; worker/gate/check_run.py).
- The web process stops accepting connections but answers the delivery it is reading.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import redis

from tests.e2e.ops_support import build_repo, check_runs, open_pr, wait_until
from worker.cli.demo import Stack, sign

pytestmark = pytest.mark.slow


def _workers(stack: Stack) -> list[subprocess.Popen[bytes]]:
    return [p for p in stack.procs if "arq" in p.args]


def _running_worker_pid(stack: Stack) -> int | None:
    """The pid of the worker whose heartbeat says it runs a job (``host:pid:random`` ids)."""
    beats = redis.Redis.from_url(stack.redis_url).hgetall("llmgate:metrics:workers")
    for worker_id, raw in beats.items():
        if json.loads(raw)["running"] > 0:
            return int(worker_id.decode().split(":")[-2])
    return None


def _queued_gates(stack: Stack) -> int:
    """Gate jobs waiting in arq's queue (``gate:...``), not cron jobs: a worker may queue its
    sweeper's (``sweep_runs:<ms>``) right before it stops, and another worker runs it later."""
    queued = redis.Redis.from_url(stack.redis_url).zrange("arq:queue", 0, -1)
    return sum(job_id.startswith(b"gate:") for job_id in queued)


def _stop_web_while_it_reads_a_delivery(stack: Stack, payload: dict) -> None:
    """SIGTERM the web process mid-body: no new connection, but this delivery is answered."""
    body = json.dumps(payload).encode()
    host, port = stack.web_url.removeprefix("http://").split(":")
    head = (f"POST /webhook HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: drain-1\r\n"
            f"X-Hub-Signature-256: {sign(stack.secret, body)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    (web,) = [p for p in stack.procs if "uvicorn" in p.args]
    with socket.create_connection((host, int(port)), timeout=10) as client:
        client.sendall(head + body[:100])
        time.sleep(0.3)
        web.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        with pytest.raises(OSError):  # no new connection once stopping
            socket.create_connection((host, int(port)), timeout=2).close()
        client.sendall(body[100:])
        answer = client.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 202"), answer[:200]
    assert web.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
    assert _queued_gates(stack) == 2  # PR 2, and this


def test_a_stopping_worker_finishes_its_job_and_the_web_process_drains(tmp_path: Path):
    shas = build_repo(tmp_path / "repo")
    clone_url = (tmp_path / "repo").as_uri()
    with Stack(tmp_path, workers=1, worker_env={"LLMGATE_SHUTDOWN_GRACE_S": "60"}) as stack:
        stack.deliver("pull_request", open_pr(stack, shas, clone_url, "pr/slow", 1))
        wait_until(lambda: _running_worker_pid(stack), 60, "the job did not start")
        (worker,) = _workers(stack)
        worker.send_signal(signal.SIGTERM)
        stack.deliver("pull_request", open_pr(stack, shas, clone_url, "pr/quick", 2))
        assert worker.wait(timeout=60) == 0
        (run,) = check_runs(stack, shas["pr/slow"])
        assert run["status"] == "completed" and run["conclusion"] == "success"
        assert check_runs(stack, shas["pr/quick"]) == []
        assert _queued_gates(stack) == 1  # PR 2 waits
        _stop_web_while_it_reads_a_delivery(stack, open_pr(stack, shas, clone_url, "pr/quick", 3))


def test_a_worker_stopped_at_once_requeues_its_job_for_another(tmp_path: Path):
    shas = build_repo(tmp_path / "repo")
    clone_url = (tmp_path / "repo").as_uri()
    with Stack(tmp_path, workers=2, worker_env={"LLMGATE_SHUTDOWN_GRACE_S": "0"}) as stack:
        stack.deliver("pull_request", open_pr(stack, shas, clone_url, "pr/slow", 1))
        pid = wait_until(lambda: _running_worker_pid(stack), 60, "the job did not start")
        wait_until(lambda: check_runs(stack, shas["pr/slow"]), 30, "no check run was created")
        time.sleep(1)  # into the slow target (checkouts of this repository take well under 1 s)
        (stopped,) = [p for p in _workers(stack) if p.pid == pid]
        started = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        assert stopped.wait(timeout=30) == 0
        assert time.monotonic() - started < 15  # it did not wait for the job
        (run,) = stack.wait_for_check(shas["pr/slow"], timeout_s=90)
        assert run["conclusion"] == "success"
        titles = [h["body"].get("output", {}).get("title") for h in run["history"]]
        assert titles[:2] == ["llmgate: running", "llmgate: running (try 2 of 3)"]
        assert stack.state()["violations"] == []
        text = httpx.get(f"{stack.web_url}/metrics", timeout=5).text
        assert 'llmgate_jobs_total{function="gate_pull_request",outcome="cancelled"} 1.0' in text
        assert 'llmgate_jobs_total{function="gate_pull_request",outcome="completed"} 1.0' in text
