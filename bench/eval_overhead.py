"""Benchmark the eval engine's overhead on model calls, and a cached re-run.

Starts the fake OpenAI-compatible provider (``tests/fakes/fake_llm.py``) as its own process
with a fixed latency (100 ms by default) and a ``redis-server`` (free loopback port, no
persistence), writes a suite of 500 examples with a model target and a ``contains`` assertion,
and runs it through the engine (``run_config``: estimate, calls, scoring, metrics) at
concurrency 20. It prints the wall time divided by the ideal (examples x latency /
concurrency: 500 x 0.1 s / 20 = 2.5 s; goal <= 1.15), then re-runs the same suite against the
response cache (goal: no provider calls, under 2 s). litellm's one-time import and a warm-up
call happen before the timing and are printed apart: a worker pays them once, not per run.
The last line is ``eval_overhead_ratio=<wall / ideal>``.

Two references, the same 500 calls at the same concurrency against the same server, in the
same process: the calls alone through llmgate's provider call (``llm.chat``: litellm), without
the engine, run once before and once after the engine's run (the machine's load drifts); and a
plain HTTP client (aiohttp, one POST and a JSON parse per call), the floor of any Python client
on this machine. Their ratios tell what the engine adds over litellm, and what litellm adds
over HTTP.

    python bench/eval_overhead.py
    python bench/eval_overhead.py --examples 200 --latency-ms 50 --concurrency 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_services import load_average, processes  # noqa: E402
from worker.evals.config.load import parse_config  # noqa: E402
from worker.evals.context import EvalContext  # noqa: E402
from worker.evals.llm import client as llm  # noqa: E402
from worker.evals.llm_types import Endpoint  # noqa: E402
from worker.evals.run.engine import run_config  # noqa: E402

KEY_ENV = "BENCH_FAKE_KEY"


def write_suite(repo: Path, url: str, examples: int, concurrency: int) -> str:
    """Write the dataset and prompt; return the config text."""
    (repo / "evals").mkdir(parents=True)
    (repo / "prompts").mkdir()
    (repo / "prompts" / "p.txt").write_text("Answer the customer: {{ input }}")
    (repo / "evals" / "d.jsonl").write_text("".join(
        json.dumps({"id": f"e{i}", "input": f"ticket number {i}"}) + "\n"
        for i in range(examples)))
    return (f"version: 1\nsettings: {{concurrency: {concurrency}, timeout: 30}}\nsuites:\n"
            "  - name: bench\n    dataset: evals/d.jsonl\n"
            f"    target: {{model: openai/bench-model, prompt: prompts/p.txt, "
            f'api_base: "{url}", api_key_env: {KEY_ENV}, '
            "pricing: {input: 1, output: 2}}\n"
            "    assertions: [{type: contains, value: ticket}]\n")


async def timed_run(config_text: str, repo: Path, ctx: EvalContext) -> tuple[float, int, int]:
    """Run the suite once; return (wall seconds, provider calls, cache hits)."""
    started = time.perf_counter()
    run = await run_config(parse_config(config_text), repo, "", ctx)
    wall = time.perf_counter() - started
    passed = sum(e.passed for e in run.suites["bench"].examples)
    if passed != len(run.suites["bench"].examples):
        raise SystemExit(f"only {passed} examples passed: the fake provider misbehaved")
    return wall, run.spend.provider_calls, run.spend.cache_hits


async def concurrently(count: int, concurrency: int, call: Any) -> float:
    """Await ``call(i)`` for i in 0..count-1, at most ``concurrency`` at once; return seconds."""
    limiter = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limiter:
            await call(i)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - started


async def litellm_alone(url: str, count: int, concurrency: int) -> float:
    """Send ``count`` chat calls with `llm.chat` (no engine); return the wall seconds."""
    endpoint = Endpoint("openai/bench-model", api_base=url, api_key_env=KEY_ENV)

    async def call(i: int) -> None:
        messages = [{"role": "user", "content": f"Answer the customer: ticket number {i}"}]
        reply = await llm.chat(endpoint, messages, 30.0)
        if "ticket" not in reply.text:
            raise SystemExit(f"unexpected reply {reply.text!r}")

    return await concurrently(count, concurrency, call)


async def plain_http(url: str, count: int, concurrency: int) -> float:
    """Send ``count`` chat requests with aiohttp (a POST and a JSON parse each); return the
    wall seconds."""
    headers = {"Authorization": f"Bearer {os.environ[KEY_ENV]}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        async def call(i: int) -> None:
            body = {"model": "bench-model", "messages": [
                {"role": "user", "content": f"Answer the customer: ticket number {i}"}]}
            async with session.post(f"{url}/chat/completions", json=body) as response:
                text = (await response.json())["choices"][0]["message"]["content"]
            if "ticket" not in text:
                raise SystemExit(f"unexpected reply {text!r}")

        await call(-1)  # the connection pool's first connection
        return await concurrently(count, concurrency, call)


async def main_async(args: argparse.Namespace) -> None:
    os.environ[KEY_ENV] = "bench-key"
    print(f"machine load average (1, 5, 15 min) at the start: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="llmgate-bench-") as tmp, \
            processes(Path(tmp), args.latency_ms) as (url, redis_url):
        started = time.perf_counter()
        llm.litellm_module()
        print(f"litellm import (once per worker process): {time.perf_counter() - started:.2f} s")
        usable = len(os.sched_getaffinity(0))
        repo = Path(tmp) / "repo"
        config = write_suite(repo, url, args.examples, args.concurrency)
        warm = write_suite(Path(tmp) / "warm", url, 2, 2)
        redis = Redis.from_url(redis_url)
        try:
            await timed_run(warm, Path(tmp) / "warm", EvalContext.of(say=lambda _: None))
            ctx = EvalContext.of(redis=redis, namespace="bench", say=lambda _: None)
            ideal = args.examples * args.latency_ms / 1000 / args.concurrency
            alone_before = await litellm_alone(url, args.examples, args.concurrency)
            cpu = time.process_time()
            wall, calls, _ = await timed_run(config, repo, ctx)
            cpu_ms = (time.process_time() - cpu) * 1000 / max(calls, 1)
            print(f"first run: {args.examples} examples, {calls} provider calls, "
                  f"wall {wall:.2f} s, ideal {ideal:.2f} s, ratio {wall / ideal:.3f} "
                  f"(goal <= 1.15); CPU per call: {cpu_ms:.1f} ms in the run's process "
                  f"({usable} cores: the ideal allows "
                  f"{usable * ideal * 1000 / max(calls, 1):.1f} ms in all, "
                  f"fake provider included)")
            cached_wall, cached_calls, hits = await timed_run(config, repo, ctx)
            print(f"cached re-run: {cached_calls} provider calls, {hits} cache hits, wall "
                  f"{cached_wall:.2f} s (goal: 0 calls, < 2 s)")
            alone_after = await litellm_alone(url, args.examples, args.concurrency)
            http = await plain_http(url, args.examples, args.concurrency)
            alone = (alone_before + alone_after) / 2
            print(f"references, same calls, server and concurrency: litellm calls alone "
                  f"(llm.chat, no engine; run before and after the engine) ratio "
                  f"{alone_before / ideal:.3f} and {alone_after / ideal:.3f}; plain HTTP "
                  f"(aiohttp) ratio {http / ideal:.3f}; the engine's wall over the mean of "
                  f"litellm alone {wall / alone:.3f}")
            print(f"machine load average (1, 5, 15 min) at the end: {load_average()} on "
                  f"{usable} cores (other processes slow the run)")
            print(f"cached_rerun_s={cached_wall:.3f}")
            print(f"eval_overhead_ratio={wall / ideal:.3f}")
        finally:
            await redis.aclose()


def main() -> None:
    """Parse the options and run the benchmark."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=20)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
