"""Shared fixtures: a real ``redis-server`` per test session, a clean database and an asyncio
client on it per test, and paths to the fixtures."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from redis.asyncio import Redis

from tests.budget import examples
from tests.timing import scaled, time_scale

FIXTURES = Path(__file__).parent / "fixtures"

# Property tests that set no max_examples: hypothesis's default in CI, a fifth outside it
# (tests/budget.py).
hypothesis_settings.register_profile(
    "llmgate", max_examples=examples(hypothesis_settings.default.max_examples))
hypothesis_settings.load_profile("llmgate")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Scale the suite's pytest-timeout limit (pyproject's ``timeout``) by the one factor of
    tests/timing.py, unless ``--timeout`` or ``PYTEST_TIMEOUT`` sets it outright."""
    if getattr(config.option, "timeout", None) is None and not os.environ.get("PYTEST_TIMEOUT"):
        ini = config.getini("timeout")
        if ini:
            config.option.timeout = float(ini) * time_scale()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    """Block until something listens on 127.0.0.1:port, or raise TimeoutError (``timeout_s``
    is `tests.timing.scaled`)."""
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start a real ``redis-server`` on a free loopback port; yield its ``redis://`` URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture()
def redis_url(redis_server: str) -> Iterator[str]:
    """A clean Redis database for one test (FLUSHDB before and after)."""
    import redis

    client = redis.Redis.from_url(redis_server)
    client.flushdb()
    yield redis_server + "/0"
    client.flushdb()
    client.close()


@pytest.fixture()
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    """An asyncio client (``redis.asyncio.Redis``) on the test's clean database, closed after."""
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture(autouse=True)
def _private_response_cache(tmp_path_factory: pytest.TempPathFactory,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Give each test its own on-disk response cache of ``llmgate run``
    (worker/evals/llm/disk_cache.py), never the user's ``~/.cache/llmgate``."""
    monkeypatch.setenv("LLMGATE_CACHE_DIR", str(tmp_path_factory.mktemp("llmgate-cache")))


@pytest.fixture(autouse=True)
def _fresh_provider_quotas() -> None:
    """Start each test with no provider quota learned in this process
    (worker/evals/llm/pace.py), as a new worker or ``llmgate run`` process would."""
    from worker.evals.llm import pace

    pace.forget_all()


@pytest.fixture(autouse=True)
def _no_periodic_reconcile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start no reconciler in a worker run inside the test process (`worker.main.startup`).

    Its passes fall on the wall clock's multiples of ``LLMGATE_RECONCILE_S`` (300 s): a test
    whose in-process worker ran across one (00:00:00 in a CI run) saw the pass list installations
    1 and 7 and mint a token for 7, one more than the gate it counted. The reconciler has its own
    tests (tests/unit/gate/test_reconcile.py call `start_reconciling` themselves), and worker
    processes started by the e2e tests keep theirs.
    """
    import worker.main

    monkeypatch.setattr(worker.main, "start_reconciling", lambda ctx: None)
