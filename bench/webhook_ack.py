"""Benchmark how fast the web process acknowledges webhook deliveries.

Starts its own ``redis-server`` (free loopback port, no persistence) and ``uvicorn app.main:app``
(one worker, log level warning), sends signed ``pull_request`` ``synchronize`` deliveries (the
~28 KB fixture, each with its own head SHA and delivery id, so each is a distinct job), prints
p50/p99 ack latency in ms and deliveries/s, checks that every delivery landed in the arq queue,
and stops both processes on exit. The last line is ``deliveries_per_s=<n>``.

    python bench/webhook_ack.py                      # closed loop: 2,000 at concurrency 50
    python bench/webhook_ack.py --rate 300           # open loop: a fixed send rate
    python bench/webhook_ack.py --client httpx       # httpx.AsyncClient instead of raw streams

Latency is from the moment a request is due (open loop) or sent (closed loop) to the end of
its response, so queueing in the server is counted (no coordinated omission in open loop).
Only loopback addresses are used.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import httpx
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.webhooks import sign  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "github" / "webhooks" / "pull_request.synchronize.json"
SECRET = "bench-secret"
HOST = "127.0.0.1"
Send = Callable[[int], Awaitable[int]]


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    """Poll ``check`` until it returns True, or raise ``TimeoutError`` naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, httpx.HTTPError, redis.RedisError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{what} not ready after {timeout_s} s")


@contextmanager
def services() -> Iterator[tuple[str, str]]:
    """Run redis-server and the web process; yield (redis URL, web base URL); stop both."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    redis_port, web_port = free_port(), free_port()
    redis_url, web_url = f"redis://{HOST}:{redis_port}/0", f"http://{HOST}:{web_port}"
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as workdir:
        try:
            procs.append(subprocess.Popen(
                [binary, "--port", str(redis_port), "--bind", HOST, "--save", "",
                 "--appendonly", "no", "--dir", workdir], stdout=subprocess.DEVNULL))
            wait_until(lambda: bool(redis.Redis.from_url(redis_url).ping()), "redis-server")
            env = os.environ | {"GITHUB_WEBHOOK_SECRET": SECRET, "REDIS_URL": redis_url}
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "app.main:app", "--host", HOST, "--port",
                 str(web_port), "--workers", "1", "--log-level", "warning", "--no-access-log"],
                cwd=ROOT, env=env))
            wait_until(lambda: httpx.get(web_url + "/healthz").status_code == 200, "web process")
            yield redis_url, web_url
        finally:
            for proc in reversed(procs):
                proc.terminate()
                proc.wait(timeout=10)


def make_deliveries(count: int, offset: int) -> list[tuple[bytes, dict[str, str]]]:
    """Return ``count`` signed synchronize deliveries, each with a distinct head SHA and id."""
    template = json.loads(FIXTURE.read_bytes())
    deliveries = []
    for i in range(offset, offset + count):
        head_sha = f"{i:040x}"
        template["pull_request"]["head"]["sha"] = template["after"] = head_sha
        body = json.dumps(template, indent=2).encode()
        deliveries.append((body, {
            "Content-Type": "application/json", "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": f"bench-{i:08d}", "X-Hub-Signature-256": sign(SECRET, body)}))
    return deliveries


class RawConnection:
    """One keep-alive HTTP/1.1 connection speaking just enough HTTP for this benchmark."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Wrap an open stream pair."""
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> RawConnection:
        """Connect to ``127.0.0.1:port``."""
        return cls(*await asyncio.open_connection(HOST, port))

    async def post(self, head: bytes, body: bytes) -> int:
        """Send a pre-rendered request head and body; return the response status code."""
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        await self.reader.readexactly(length)
        return int(status_line.split()[1])

    def close(self) -> None:
        """Close the connection."""
        self.writer.close()


def raw_sender(web_url: str, deliveries: list[tuple[bytes, dict[str, str]]],
               pool: list[RawConnection]) -> Send:
    """Return ``send(i)`` posting delivery ``i`` over pooled raw connections."""
    port = int(web_url.rsplit(":", 1)[1])
    heads = []
    for body, headers in deliveries:
        lines = ["POST /webhook HTTP/1.1", f"Host: {HOST}:{port}",
                 f"Content-Length: {len(body)}"] + [f"{k}: {v}" for k, v in headers.items()]
        heads.append(("\r\n".join(lines) + "\r\n\r\n").encode())

    async def send(i: int) -> int:
        conn = pool.pop() if pool else await RawConnection.open(port)
        status = await conn.post(heads[i], deliveries[i][0])
        pool.append(conn)
        return status

    return send


def httpx_sender(client: httpx.AsyncClient,
                 deliveries: list[tuple[bytes, dict[str, str]]]) -> Send:
    """Return ``send(i)`` posting delivery ``i`` with ``httpx.AsyncClient``."""
    async def send(i: int) -> int:
        body, headers = deliveries[i]
        return (await client.post("/webhook", content=body, headers=headers)).status_code

    return send


async def closed_loop(send: Send, count: int, concurrency: int) -> tuple[list[float], float]:
    """Send ``count`` deliveries from ``concurrency`` workers; return (latencies ms, seconds)."""
    latencies: list[float] = []
    statuses: list[int] = []
    next_index = iter(range(count))

    async def worker() -> None:
        for i in next_index:
            started = time.perf_counter()
            statuses.append(await send(i))
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    check_statuses(statuses)
    return latencies, time.perf_counter() - started


async def open_loop(send: Send, count: int, rate: float) -> tuple[list[float], float]:
    """Start delivery ``i`` at ``i / rate`` seconds; return (latencies ms, seconds)."""
    latencies: list[float] = []
    statuses: list[int] = []

    async def one(i: int, due: float) -> None:
        statuses.append(await send(i))
        latencies.append((time.perf_counter() - due) * 1000)

    started = time.perf_counter()
    tasks = []
    for i in range(count):
        due = started + i / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    check_statuses(statuses)
    return latencies, time.perf_counter() - started


def check_statuses(statuses: list[int]) -> None:
    """Exit with an error unless every delivery was answered 202 (queued)."""
    bad = [s for s in statuses if s != 202]
    if bad:
        sys.exit(f"{len(bad)} deliveries were not queued (statuses {sorted(set(bad))})")


def percentile(values: list[float], fraction: float) -> float:
    """Return the nearest-rank percentile (``fraction`` in 0-1) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


async def run(args: argparse.Namespace, web_url: str, store: redis.Redis) -> float:
    """Warm up, run the measured phase, report; return deliveries per second."""
    count: int = args.count
    pool: list[RawConnection] = []
    limits = httpx.Limits(max_connections=max(args.concurrency, 1000))
    async with httpx.AsyncClient(base_url=web_url, limits=limits) as client:
        for deliveries in (make_deliveries(args.warmup, offset=10**9),
                           make_deliveries(count, offset=0)):
            store.flushdb()  # the warm-up's jobs must not count
            send = (httpx_sender(client, deliveries) if args.client == "httpx"
                    else raw_sender(web_url, deliveries, pool))
            if args.rate:
                latencies, elapsed = await open_loop(send, len(deliveries), args.rate)
            else:
                latencies, elapsed = await closed_loop(send, len(deliveries), args.concurrency)
    for conn in pool:
        conn.close()
    report(latencies, args, cast(int, store.zcard("arq:queue")))
    return count / elapsed


def report(latencies: list[float], args: argparse.Namespace, jobs: int) -> None:
    """Print the figures; exit non-zero unless every delivery became one queued arq job."""
    mode = f"open loop at {args.rate}/s" if args.rate else f"concurrency {args.concurrency}"
    fast = [m for m in ("uvloop", "httptools") if importlib.util.find_spec(m)]
    print(f"client={args.client} {mode} deliveries={args.count} "
          f"server extras={','.join(fast) or 'none (asyncio loop, h11)'}")
    print(f"ack latency ms: p50={percentile(latencies, 0.50):.2f} "
          f"p99={percentile(latencies, 0.99):.2f} max={max(latencies):.2f} "
          f"mean={statistics.fmean(latencies):.2f}")
    print(f"jobs in arq queue: {jobs} (expected {args.count})")
    if jobs != args.count:
        sys.exit(f"expected {args.count} queued jobs, found {jobs}")


def main() -> None:
    """Parse the arguments, run the benchmark, print ``deliveries_per_s=<n>`` last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="measured deliveries")
    parser.add_argument("--concurrency", type=int, default=50, help="closed-loop workers")
    parser.add_argument("--rate", type=float, default=0.0, help="open loop: deliveries/s")
    parser.add_argument("--warmup", type=int, default=200, help="unmeasured deliveries first")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw")
    args = parser.parse_args()
    with services() as (redis_url, web_url):
        store = redis.Redis.from_url(redis_url)
        try:
            per_s = asyncio.run(run(args, web_url, store))
        finally:
            store.close()
    print(f"deliveries_per_s={per_s:.0f}")


if __name__ == "__main__":
    main()
