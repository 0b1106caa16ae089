"""The local services benchmarks run against: the fake OpenAI-compatible provider
(``tests/fakes/fake_llm.py``, its own process, a fixed latency) and a ``redis-server`` (free
loopback port, no persistence). Shared by bench/eval_overhead.py and bench/peers/.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(path: Path, proc: subprocess.Popen[bytes], what: str) -> None:
    """Wait until ``path`` exists, or raise when ``proc`` died or 30 s passed."""
    deadline = time.monotonic() + 30
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.05)


@contextmanager
def processes(work: Path, latency_ms: float) -> Iterator[tuple[str, str]]:
    """Run the fake provider and redis-server; yield (api base URL, redis URL)."""
    redis_bin = shutil.which("redis-server")
    if redis_bin is None:
        raise SystemExit("redis-server is not installed")
    port = free_port()
    procs = [subprocess.Popen([redis_bin, "--port", str(port), "--bind", "127.0.0.1", "--save",
                               "", "--appendonly", "no", "--dir", str(work)],
                              stdout=subprocess.DEVNULL)]
    ready = work / "fake-llm.json"
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_llm", "--port", "0", "--ready-file", str(ready),
         "--latency-ms", str(latency_ms)], cwd=ROOT, stdout=subprocess.DEVNULL))
    try:
        wait_for(ready, procs[1], "the fake provider")
        yield json.loads(ready.read_text())["url"], f"redis://127.0.0.1:{port}/0"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


T = TypeVar("T")


def in_folder(keep: Path | None, prefix: str, work: Callable[[Path], T]) -> T:
    """Return ``work(folder)``: in ``keep`` (created, must not exist: every process's log is
    kept there), else in a temporary folder named ``prefix...`` that is removed afterwards.

    Raises:
        FileExistsError: ``keep`` exists.
    """
    if keep is not None:
        keep.mkdir(parents=True)
        return work(keep)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        return work(Path(tmp))


def load_average() -> str:
    """Return the machine's 1, 5 and 15 minute load averages as text."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())
