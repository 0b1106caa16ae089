"""Benchmark the dashboard's repository page (issue 35): server time and weight.

Starts a ``redis-server`` (free loopback port, no persistence, as bench/local_services.py does)
and writes, through the workers' writer (worker/baselines/timeline.py, `Timeline.write`), one
repository's history: ``--runs`` (500) default-branch runs of ``--suites`` (5) suites with
``--metrics`` (10) metrics each (every one with its 95% interval) and ``--examples`` (40)
examples per suite, plus 20 pull request gates with verdicts. Then it asks the repository page
``GET /dashboard/<owner>/<repo>`` ``--requests`` (30) times through the ASGI app in this
process (httpx's ASGITransport: routing, the access check, the Redis reads, the charts and the
template; no socket) and reports the median and 90th percentile of the request's time and the
page's bytes, with the page cache off (every request reads and renders: the goal's figure) and
on (a repeated view of an unchanged repository). The same for ``?runs=500&metrics=all`` (every
run, every metric charted), which does not count towards the goal.

Goals (issue 35): the default page in under 200 ms of server time and under 500 KB.

    python -m bench.dashboard_render
    python -m bench.dashboard_render --runs 200 --requests 10

The exit status is 1 when a goal is missed. The last line is
``dashboard_page_ms=<median ms> page_kb=<kB of the default page>``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request

from app.dashboard.views import dashboard_routes
from bench.local_services import free_port, load_average
from worker.baselines.store import BaselineSettings
from worker.baselines.timeline import Timeline
from worker.history_contract import (
    FAILED,
    PASSED,
    ConfigRecord,
    ExampleRows,
    MetricRecord,
    SuiteRecord,
    VerdictRecord,
    dumps,
    encode_examples,
    example_field,
    suite_field,
)

REPO = "bench/widgets"
T0 = 1_700_000_000.0
GOAL_MS, GOAL_KB = 200.0, 500.0


class EveryoneReads:
    """An access that lets every request read every repository (the bench measures pages,
    not sign-in)."""

    async def readable(self, request: Request, repo: str) -> bool:
        return True

    async def readable_repos(self, request: Request, repos: Sequence[str]) -> list[str]:
        return list(repos)

    def user(self, request: Request) -> None:
        """Nobody is signed in (the bench measures pages, not sign-in)."""
        return None


def _suite(run: int, k: int, side: str, metrics: int, examples: int,
           gated: bool) -> tuple[SuiteRecord, ExampleRows]:
    values: dict[str, MetricRecord] = {}
    for m in range(metrics):
        value = round(0.5 + 0.3 * ((run * 7 + m * 3 + k) % 11) / 10, 4)
        values["pass_rate" if m == 0 else f"metric_{m}"] = MetricRecord(
            value=value, ci_low=round(value - 0.08, 4), ci_high=round(value + 0.06, 4))
    verdicts = [VerdictRecord(metric="pass_rate", rule="max_drop 0.05", status="pass", group="",
                              reason="within 0.05")] if gated else []
    rows = [[f"ex-{e:04d}", e + 1, PASSED if (run + e) % 9 else FAILED,
             *(round(((run + e + m) % 10) / 10, 4) for m in range(4))] for e in range(examples)]
    record = SuiteRecord(suite=f"suite-{k}", side=side, dataset=f"evals/suite-{k}.jsonl",  # type: ignore[typeddict-item]
                         examples=examples, passed=sum(r[2] == PASSED for r in rows),
                         metrics=values, verdicts=verdicts, cost_usd=0.0123, provider_calls=80,
                         cache_hits=0, stopped="")
    return record, ExampleRows(dataset=record["dataset"],
                               metrics=[f"metric_{m}" for m in range(4)], rows=rows)


async def write_history(redis: Redis, runs: int, suites: int, metrics: int,
                        examples: int) -> None:
    """Write ``runs`` branch runs and 20 pull request gates of `REPO` through `Timeline`."""
    now = time.time()
    timeline = Timeline(redis, BaselineSettings(history_runs=max(runs, 1)), lambda: now)
    for i in range(runs + 20):
        branch = i < runs
        sha = f"{i:040x}"
        sides = ("base",) if branch else ("base", "head")
        fields: list[str] = []
        blobs: list[str | bytes] = []
        for k in range(suites):
            for side in sides:
                record, rows = _suite(i, k, side, metrics, examples, side == "head")
                fields += [suite_field(side, f"suite-{k}"), dumps(record)]
                blobs += [example_field(side, f"suite-{k}"), encode_examples(rows)]
        if branch:
            meta = timeline.meta("branch", REPO, sha, sha, branch="main", conclusion="stored")
            meta["order_s"] = T0 + 3600 * i
        else:
            meta = timeline.meta("pull_request", REPO, f"pr{i}-{i}", sha, pr_number=i,
                                 conclusion="success", why="every rule passed.",
                                 check_run_id=i)
        await timeline.write(meta, fields, blobs, ConfigRecord(folder="", duration_s=42.0))


async def measure(url: str, requests: int, path: str,
                  cached_pages: int = 0) -> tuple[list[float], int]:
    """Return each request's milliseconds and the page's bytes (all must be 200); with
    ``cached_pages`` 0 every request reads and renders the page anew."""
    redis = Redis.from_url(url)
    app = Starlette(routes=dashboard_routes(lambda: redis, EveryoneReads(),
                                            cached_pages=cached_pages))
    times, size = [], 0
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://bench.test") as client:
        for _ in range(requests + 2):  # two to warm up (templates compiled, connections made)
            start = time.perf_counter()
            page = await client.get(path)
            times.append((time.perf_counter() - start) * 1000)
            if page.status_code != 200:
                raise SystemExit(f"{path}: {page.status_code} {page.text[:200]}")
            size = len(page.content)
    await redis.aclose()
    return times[2:], size


async def bench(url: str, args: argparse.Namespace) -> tuple[float, float]:
    """Write the history, measure both pages, print them; return the default page's figures."""
    redis = Redis.from_url(url)
    start = time.perf_counter()
    await write_history(redis, args.runs, args.suites, args.metrics, args.examples)
    used = (await redis.info("memory"))["used_memory"]
    await redis.aclose()
    print(f"wrote {args.runs} runs x {args.suites} suites x {args.metrics} metrics "
          f"({args.examples} examples a suite) + 20 gates in {time.perf_counter() - start:.1f} s;"
          f" Redis uses {used / 2**20:.1f} MiB")
    result = (0.0, 0.0)
    for label, path, cached in (
            ("default", f"/dashboard/{REPO}", 0),
            ("default, cached", f"/dashboard/{REPO}", 32),
            ("all runs, every metric", f"/dashboard/{REPO}?runs=500&metrics=all", 0)):
        times, size = await measure(url, args.requests, path, cached)
        median = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1] if len(times) > 1 else median
        print(f"{label:24s} median {median:7.1f} ms  p90 {p90:7.1f} ms  "
              f"{size / 1024:7.1f} KB  ({args.requests} requests)")
        result = result if result[0] else (median, size / 1024)
    return result


def _wait_for(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Wait until redis-server listens on ``port``, or raise when it died or 30 s passed."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start") from None
            time.sleep(0.05)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench; return 1 when a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--suites", type=int, default=5)
    parser.add_argument("--metrics", type=int, default=10)
    parser.add_argument("--examples", type=int, default=40)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args(argv)
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="dashboard-bench-") as work:
        proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save",
                                 "", "--appendonly", "no", "--dir", str(Path(work))],
                                stdout=subprocess.DEVNULL)
        try:
            _wait_for(port, proc)
            median_ms, page_kb = asyncio.run(bench(f"redis://127.0.0.1:{port}/0", args))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(f"load average {load_average()}")
    missed = [f"{median_ms:.0f} ms >= {GOAL_MS:.0f} ms"] * (median_ms >= GOAL_MS) + \
        [f"{page_kb:.0f} KB >= {GOAL_KB:.0f} KB"] * (page_kb >= GOAL_KB)
    for reason in missed:
        print(f"goal missed: {reason}")
    print(f"dashboard_page_ms={median_ms:.1f} page_kb={page_kb:.1f}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
