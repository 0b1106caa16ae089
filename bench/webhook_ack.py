"""Benchmark how fast the web process acknowledges webhook deliveries.

Starts its own ``redis-server`` (free loopback port, no persistence) and ``uvicorn app.main:app``
(one worker; log level info without uvicorn's access log by default), sends signed
``pull_request`` ``synchronize`` deliveries (the ~28 KB fixture, each with its own head SHA and
delivery id, so each is a distinct job), prints p50/p99 ack latency in ms, deliveries/s and the
CPU time per delivery of the web process, redis-server and the client, checks that every
delivery landed in the arq queue as one job, and stops both processes on exit. The last line is
``deliveries_per_s=<n>``.

    python bench/webhook_ack.py                      # closed loop: 2,000 at concurrency 50
    python bench/webhook_ack.py --rate 300           # open loop: a fixed send rate
    python bench/webhook_ack.py --server-cpu 1 --redis-cpu 0 --client-cpu 0   # web on one core
    python bench/webhook_ack.py --rounds 5           # five measured rounds, median reported
    python bench/webhook_ack.py --loop asyncio --http h11   # without uvloop and httptools
    python bench/webhook_ack.py --bare               # reference: a bare ASGI app, same uvicorn
    python bench/webhook_ack.py --apps llmgate,probot --rounds 3   # interleaved, with ratios
    python bench/webhook_ack.py --probe 10           # only: how steady is this machine's CPU?

Latency runs from the moment a request is sent to the end of its response, so queueing in the
server is counted. In open loop every request is sent on schedule on a free connection (a new
one when all are busy), so a slow answer never holds back the next request (no coordinated
omission); how late the client's timer sent each request is printed apart. Only loopback
addresses are used.

``--bare`` serves ``bare_app`` below instead of llmgate: it reads the body and answers 202 with
a small JSON body, and nothing else. Its figures are the floor that uvicorn, the loopback
network, this client and the machine set, measured under the same load as llmgate's.

``--app probot`` serves bench/probot/receiver.mjs instead: Probot (the standard Node.js GitHub
App framework, the issue's reference) doing the same work as llmgate's receiver: its own
signature check, then delivery dedupe and an arq-style enqueue in one Redis round trip. It
needs Node.js; its packages (versions pinned in bench/probot/package-lock.json) are installed
with ``npm ci`` on first use. ``--apps llmgate,probot`` runs the apps in turn, each round
against fresh processes (so a slow spell of the machine falls on both), and prints each app's
median round and the ratios of the first app to the others.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.webhooks import sign  # noqa: E402

PROBOT_DIR = ROOT / "bench" / "probot"
#: The status each app answers a queued delivery with (Probot answers 200 "ok").
QUEUED_STATUS = {"llmgate": 202, "bare": 202, "probot": 200}
FIXTURE = ROOT / "tests" / "fixtures" / "github" / "webhooks" / "pull_request.synchronize.json"
SECRET = "bench-secret"
HOST = "127.0.0.1"
#: Pooled connections idle longer than this are replaced: uvicorn closes idle keep-alive
#: connections after 5 s (its --timeout-keep-alive default).
IDLE_LIMIT_S = 4.0
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


def pinned(command: list[str], cpu: str) -> list[str]:
    """Return ``command`` run under ``taskset -c cpu`` (unchanged when ``cpu`` is empty)."""
    return ["taskset", "-c", cpu, *command] if cpu else command


async def bare_app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                   send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """The ``--bare`` reference ASGI app: read the whole body, answer 202 ``{"status":"queued"}``.

    Lifespan events are answered so uvicorn starts it like llmgate; ``/healthz`` is 200 too.
    """
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": message["type"] + ".complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    posted = scope["method"] == "POST"
    more_body = posted
    while more_body:
        more_body = (await receive()).get("more_body", False)
    status, body = (202, b'{"status":"queued"}') if posted else (200, b'{"status":"ok"}')
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


def install_probot() -> str:
    """Return the ``node`` binary, after ``npm ci`` in bench/probot when its packages are missing.

    Raises:
        SystemExit: Node.js or npm is not installed, or ``npm ci`` failed.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        sys.exit("--app probot needs Node.js and npm (apt-get install nodejs npm)")
    if not (PROBOT_DIR / "node_modules" / "probot").is_dir():
        print("installing Probot for the reference receiver: npm ci in bench/probot", flush=True)
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PROBOT_DIR,
                              stdout=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            sys.exit("npm ci in bench/probot failed")
    return node


def web_command(args: argparse.Namespace, app: str, port: int) -> list[str]:
    """Return the web process's command line: ``app`` with the chosen loop, parser, logging."""
    if app == "probot":
        return pinned([install_probot(), str(PROBOT_DIR / "receiver.mjs")], args.server_cpu)
    target = ["--app-dir", str(ROOT / "bench"), "webhook_ack:bare_app"] if app == "bare" else [
        "app.main:app"]
    command = [sys.executable, "-m", "uvicorn", *target, "--host", HOST, "--port",
               str(port), "--workers", "1", "--log-level", args.log_level,
               "--loop", args.loop, "--http", args.http]
    if not args.access_log:
        command.append("--no-access-log")
    return pinned(command, args.server_cpu)


def cpu_seconds(pid: int) -> float:
    """Return the user + system CPU time a process has used so far, in seconds (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def services(args: argparse.Namespace, app: str) -> Iterator[tuple[str, str, list[int]]]:
    """Run redis-server and ``app``'s web process; yield (redis URL, web URL, [web pid, redis
    pid])."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    redis_port, web_port = free_port(), free_port()
    redis_url, web_url = f"redis://{HOST}:{redis_port}/0", f"http://{HOST}:{web_port}"
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as workdir:
        try:
            procs.append(subprocess.Popen(pinned(
                [binary, "--port", str(redis_port), "--bind", HOST, "--save", "",
                 "--appendonly", "no", "--dir", workdir], args.redis_cpu),
                stdout=subprocess.DEVNULL))
            wait_until(lambda: bool(redis.Redis.from_url(redis_url).ping()), "redis-server")
            env = os.environ | {"GITHUB_WEBHOOK_SECRET": SECRET, "REDIS_URL": redis_url,
                                "PORT": str(web_port), "LOG_LEVEL": "warn"}
            # The server's log goes to a file, as in production; shown if it fails to start.
            log = open(Path(workdir) / "web.log", "wb")  # noqa: SIM115 - closed below
            procs.append(subprocess.Popen(web_command(args, app, web_port), cwd=ROOT, env=env,
                                          stderr=log, stdout=log))
            try:
                wait_until(lambda: httpx.get(web_url + "/healthz").status_code == 200,
                           "web process")
            except TimeoutError:
                sys.stderr.write((Path(workdir) / "web.log").read_text()[-4000:])
                raise
            yield redis_url, web_url, [procs[1].pid, procs[0].pid]
        finally:
            for proc in reversed(procs):
                proc.terminate()
                proc.wait(timeout=10)
            log.close()


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
        self.last_used = time.monotonic()

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
        conn = pool.pop() if pool else None
        if conn is not None and time.monotonic() - conn.last_used > IDLE_LIMIT_S:
            conn.close()  # the server may have closed it already (keep-alive timeout)
            conn = None
        conn = conn or await RawConnection.open(port)
        status = await conn.post(heads[i], deliveries[i][0])
        conn.last_used = time.monotonic()
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


async def closed_loop(send: Send, count: int, concurrency: int,
                      queued: int) -> tuple[list[float], float]:
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
    check_statuses(statuses, queued)
    return latencies, time.perf_counter() - started


async def open_loop(send: Send, count: int, rate: float,
                    queued: int) -> tuple[list[float], float, list[float]]:
    """Start delivery ``i`` at ``i / rate`` seconds; return (latencies ms, seconds, lags ms).

    Each request goes out on its own connection when the others are busy, so a slow answer
    never delays the next send. Latency runs from the actual send; the lag (send minus due
    time) is returned apart: timers wake the client up to ~1 ms late (the event loop sleeps in
    whole milliseconds), which is the client's error, not the server's.
    """
    latencies: list[float] = []
    lags: list[float] = []
    statuses: list[int] = []

    async def one(i: int, due: float) -> None:
        sent = time.perf_counter()
        lags.append((sent - due) * 1000)
        statuses.append(await send(i))
        latencies.append((time.perf_counter() - sent) * 1000)

    started = time.perf_counter()
    tasks = []
    for i in range(count):
        due = started + i / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    check_statuses(statuses, queued)
    return latencies, time.perf_counter() - started, lags


def check_statuses(statuses: list[int], queued: int) -> None:
    """Exit with an error unless every delivery was answered ``queued`` (202, Probot's 200)."""
    bad = [s for s in statuses if s != queued]
    if bad:
        sys.exit(f"{len(bad)} deliveries were not queued (statuses {sorted(set(bad))})")


def percentile(values: list[float], fraction: float) -> float:
    """Return the nearest-rank percentile (``fraction`` in 0-1) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


@dataclass
class Round:
    """One measured round: ack latencies (ms), wall time (s), CPU (s) of web/redis/client,
    queued jobs, and in open loop how late each send was (ms)."""

    latencies_ms: list[float]
    elapsed_s: float
    cpu_s: list[float]
    jobs: int
    lags_ms: list[float]

    @property
    def per_s(self) -> float:
        """Deliveries acknowledged per second of wall time."""
        return len(self.latencies_ms) / self.elapsed_s


async def run(args: argparse.Namespace, app: str, web_url: str, store: redis.Redis,
              pids: list[int], rounds_run: int, first_round: int) -> list[Round]:
    """Warm up, then run ``rounds_run`` measured rounds of fresh deliveries; return them."""
    pool: list[RawConnection] = []
    limits = httpx.Limits(max_connections=max(args.concurrency, 1000))
    rounds = []
    async with httpx.AsyncClient(base_url=web_url, limits=limits) as client:
        # Made up front: a pause between rounds would let the server close idle connections.
        phases = [make_deliveries(args.warmup, 10**9)] + [
            make_deliveries(args.count, r * args.count)
            for r in range(first_round, first_round + rounds_run)]
        for deliveries in phases:
            count = len(deliveries)
            store.flushdb()  # each round counts only its own jobs
            send = (httpx_sender(client, deliveries) if args.client == "httpx"
                    else raw_sender(web_url, deliveries, pool))
            cpu_before = [cpu_seconds(pid) for pid in pids]
            lags: list[float] = []
            if args.rate:
                latencies, elapsed, lags = await open_loop(send, count, args.rate,
                                                           QUEUED_STATUS[app])
            else:
                latencies, elapsed = await closed_loop(send, count, args.concurrency,
                                                       QUEUED_STATUS[app])
            cpu_used = [cpu_seconds(pid) - before
                        for pid, before in zip(pids, cpu_before, strict=True)]
            jobs = cast(int, store.zcard("arq:queue"))
            rounds.append(Round(latencies, elapsed, cpu_used, jobs, lags))
    for conn in pool:
        conn.close()
    return rounds[1:]


def report(rounds: list[Round], args: argparse.Namespace, app: str) -> Round:
    """Print each round and the median one in full; return the median round.

    Exits non-zero unless every delivery of every round became one queued arq job. CPU per
    delivery (web process, redis-server, this client) is each one's cost, whatever else the
    machine was doing, so it is the steadier figure on a busy machine.
    """
    mode = f"open loop at {args.rate:g}/s" if args.rate else f"concurrency {args.concurrency}"
    pins = f"web cpu {args.server_cpu or 'any'}, redis cpu {args.redis_cpu or 'any'}, " \
           f"client cpu {args.client_cpu or 'any'}"
    label = {"bare": "bare ASGI app (reference)", "probot": "Probot (reference)"}.get(app, app)
    print(f"app={label} client={args.client} {mode} deliveries={args.count} rounds={args.rounds} "
          f"loop={args.loop} http={args.http} log-level={args.log_level} "
          f"access-log={args.access_log} ({pins})")
    for number, one in enumerate(rounds, 1):
        web_us = one.cpu_s[0] / args.count * 1e6
        print(f"round {number}: {one.per_s:.0f}/s p50={percentile(one.latencies_ms, 0.5):.2f} "
              f"p99={percentile(one.latencies_ms, 0.99):.2f} ms web cpu {web_us:.0f} us")
        if one.jobs != args.count and app != "bare":
            sys.exit(f"round {number}: expected {args.count} queued jobs, found {one.jobs}")
    median = sorted(rounds, key=lambda one: one.per_s)[len(rounds) // 2]
    latencies = median.latencies_ms
    print(f"median round: {median.per_s:.0f} deliveries/s; ack latency ms: "
          f"p50={percentile(latencies, 0.50):.2f} "
          f"p99={percentile(latencies, 0.99):.2f} max={max(latencies):.2f} "
          f"mean={statistics.fmean(latencies):.2f}")
    if median.lags_ms:
        print(f"client send lag ms (not in the latency): p50={percentile(median.lags_ms, 0.5):.2f} "
              f"p99={percentile(median.lags_ms, 0.99):.2f}")
    web_us, redis_us, client_us = (seconds / args.count * 1e6 for seconds in median.cpu_s)
    checked = "no jobs (bare app)" if app == "bare" else "every delivery queued one arq job"
    print(f"cpu per delivery us: web={web_us:.0f} redis={redis_us:.0f} client={client_us:.0f}; "
          f"web busy {median.cpu_s[0] / median.elapsed_s:.0%} of {median.elapsed_s:.2f} s; "
          f"{checked}")
    return median


def parse_args() -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="measured deliveries")
    parser.add_argument("--concurrency", type=int, default=50, help="closed-loop workers")
    parser.add_argument("--rate", type=float, default=0.0, help="open loop: deliveries/s")
    parser.add_argument("--warmup", type=int, default=200, help="unmeasured deliveries first")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measured rounds (fresh deliveries each); the median is reported")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw")
    parser.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                        help="uvicorn --loop (auto: uvloop when installed)")
    parser.add_argument("--http", choices=("auto", "h11", "httptools"), default="auto",
                        help="uvicorn --http (auto: httptools when installed)")
    parser.add_argument("--log-level", default="info", help="uvicorn --log-level")
    parser.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=False,
                        help="uvicorn's access log line per request")
    parser.add_argument("--probe", type=float, default=0.0, metavar="SECONDS",
                        help="only probe how steady this machine's CPU is, then exit")
    parser.add_argument("--app", choices=tuple(QUEUED_STATUS), default="llmgate",
                        help="the receiver to measure (bare: an ASGI app that only reads the "
                        "body; probot: Probot doing llmgate's work)")
    parser.add_argument("--bare", action="store_true", help="the same as --app bare")
    parser.add_argument("--apps", default="",
                        help="comma-separated apps to run in turn, round by round, with ratios")
    parser.add_argument("--server-cpu", default="", help="taskset -c list for the web process")
    parser.add_argument("--redis-cpu", default="", help="taskset -c list for redis-server")
    parser.add_argument("--client-cpu", default="", help="CPU list for this client process")
    args = parser.parse_args()
    args.apps = [a.strip() for a in args.apps.split(",") if a.strip()] or [
        "bare" if args.bare else args.app]
    if unknown := set(args.apps) - set(QUEUED_STATUS):
        parser.error(f"unknown apps {sorted(unknown)}: choose from {sorted(QUEUED_STATUS)}")
    if min(args.count, args.rounds, args.concurrency) < 1 or args.warmup < 0 or args.rate < 0:
        parser.error("--count, --rounds and --concurrency must be positive, --warmup and --rate "
                     "not negative")
    return args


def client_loop() -> Callable[[], asyncio.AbstractEventLoop]:
    """Return the client's event loop factory: uvloop's when installed (a lighter client)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def _work_unit() -> int:
    """A fixed piece of pure-Python work (about 150 us on the benchmark machine)."""
    total = 0
    for i in range(2000):
        total += i * i
    return total


def steadiness_probe(seconds: float) -> tuple[float, int, int, float]:
    """Time a fixed work unit every 2 ms for ``seconds``: how steady is this machine's CPU?

    It sleeps between units, as a web process between deliveries does. On a shared or
    virtual machine a unit can run several times slower for tens of ms at a time (the host's
    other work); any request in flight then is as slow, which sets the p99 whatever the app.

    Returns:
        (fastest unit in us, units timed, units more than 4x slower than the fastest,
        worst slowdown factor).
    """
    for _ in range(200):
        _work_unit()
    fastest = math.inf
    for _ in range(200):
        started = time.perf_counter()
        _work_unit()
        fastest = min(fastest, time.perf_counter() - started)
    durations = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        _work_unit()
        durations.append(time.perf_counter() - started)
        time.sleep(0.002)
    slow = [d for d in durations if d > 4 * fastest]
    return fastest * 1e6, len(durations), len(slow), max(durations) / fastest


def main() -> None:
    """Parse the arguments, run the benchmark, print ``deliveries_per_s=<n>`` last."""
    args = parse_args()
    if args.probe:
        unit_us, units, slow, worst = steadiness_probe(args.probe)
        print(f"machine probe: work unit {unit_us:.0f} us; {units} units in {args.probe:g} s; "
              f"{slow} ran more than 4x slower (worst {worst:.1f}x)")
        return
    if args.client_cpu:
        os.sched_setaffinity(0, {int(c) for c in args.client_cpu.split(",")})
    # One app: all rounds against one pair of processes. Several: each round of each app
    # against fresh processes, the apps taking turns, so no app gets the machine's quiet spell.
    turns = [(r, 1) for r in range(args.rounds)] if len(args.apps) > 1 else [(0, args.rounds)]
    results: dict[str, list[Round]] = {app: [] for app in args.apps}
    for first_round, rounds_run in turns:
        # the order alternates round by round, so neither app always runs first
        for app in args.apps if first_round % 2 == 0 else args.apps[::-1]:
            with services(args, app) as (redis_url, web_url, pids):
                store = redis.Redis.from_url(redis_url)
                try:
                    with asyncio.Runner(loop_factory=client_loop()) as runner:
                        results[app] += runner.run(run(args, app, web_url, store,
                                                       [*pids, os.getpid()], rounds_run,
                                                       first_round))
                finally:
                    store.close()
    medians = {app: report(results[app], args, app) for app in args.apps}
    first, *others = args.apps
    for other in others:
        print(compare(first, medians[first], other, medians[other]))
    print(f"deliveries_per_s={medians[first].per_s:.0f}")


def compare(name: str, one: Round, other_name: str, other: Round) -> str:
    """Return a line of ratios of ``one`` to ``other``: throughput (higher is better), p50 and
    p99 latency and web CPU per delivery (lower is better)."""
    def ratio(mine: float, theirs: float) -> str:
        return f"{mine / theirs:.2f}x" if theirs > 0 else "n/a"

    return (f"{name} vs {other_name} (median rounds): deliveries/s "
            f"{ratio(one.per_s, other.per_s)}, p50 "
            f"{ratio(percentile(one.latencies_ms, 0.5), percentile(other.latencies_ms, 0.5))}, "
            f"p99 {ratio(percentile(one.latencies_ms, 0.99), percentile(other.latencies_ms, 0.99))}"
            f", web CPU per delivery {ratio(one.cpu_s[0], other.cpu_s[0])}")


if __name__ == "__main__":
    main()
