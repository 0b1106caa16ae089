"""How close the cost estimate comes to the real spend on the example suites (support-llm).

Runs examples/support-llm offline (tests/unit/estimate_support.py): the fake OpenAI-compatible
provider answers with the example's recorded replies and counts tokens as OpenAI does, the
response cache is a ``redis-server`` on a free loopback port. Three runs, as on the App: the
push to ``main`` (cold cache), then the pull request ``pr/signoff``'s head and base. Prints each
run's estimate and spend (calls, USD) and the ratio estimate / spend; the last line is the
ratio over the pull request's two runs (the goal: within 0.75-1.25).

    python bench/estimate_accuracy.py
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.fake_llm import running_fake_llm  # noqa: E402
from tests.unit.estimate_support import measure, recorded  # noqa: E402
from tests.unit.llm_support import KEY_ENV  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _run(redis_url: str) -> None:
    os.environ.setdefault(KEY_ENV, "sk-bench-fake")
    redis = Redis.from_url(redis_url)
    try:
        with running_fake_llm(recorded()) as fake, tempfile.TemporaryDirectory() as tmp:
            runs = await measure(Path(tmp), fake.url, redis)
    finally:
        await redis.aclose()
    for run in runs:
        ratio = "n/a (nothing spent)" if run.ratio is None else f"{run.ratio:.2f}"
        print(f"{run.name}: estimated {run.estimate.calls} calls ({run.estimate.cached_calls} "
              f"cached), ${run.estimate.cost_usd or 0:.6f}; spent {run.spend.provider_calls} "
              f"calls ({run.spend.cache_hits} cache hits), ${run.spend.cost_usd:.6f}; "
              f"ratio {ratio}")
    pull = runs[1:]
    estimated = sum(run.estimate.cost_usd or 0.0 for run in pull)
    spent = sum(run.spend.cost_usd for run in pull)
    print(f"estimate_ratio_pull_request={estimated / spent:.3f}")


def main() -> None:
    """Start redis-server, run the three runs, print the figures."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed")
    port = _free_port()
    with tempfile.TemporaryDirectory() as workdir:
        proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save",
                                 "", "--appendonly", "no", "--dir", workdir],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            asyncio.run(_run(f"redis://127.0.0.1:{port}/0"))
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
