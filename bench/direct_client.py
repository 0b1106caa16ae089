"""Benchmark a self-hosted OpenAI-compatible endpoint through the direct client and through litellm.

Issue 34, goal 1: 2,000 chat calls at 20 ms latency and concurrency 64 against a local server
take at most 1.10x their floor (2000 / 64 x 20 ms = 0.625 s) on 2 cores. The server is a
minimal OpenAI-compatible HTTP/1.1 server (keep-alive, a fixed answer with ``usage`` after
``--latency-ms``), run as its own process so its CPU is not the client's; it answers in about
0.1 ms of CPU, where tests/fakes/fake_llm.py (uvicorn and Starlette) needs about 1 ms, more than
the whole budget of a call here.

The calls go through the engine's call path (`ModelCaller.chat`: the refusal check, the
provider's quota, a concurrency slot, retries, pricing; response cache off), with the model
``openai/bench-model`` at the server's ``api_base``: first on the direct path
(worker/evals/llm/direct.py), then on litellm's (``LLMGATE_DIRECT_CLIENT=0``), both in this one
process. Each is warmed up first (litellm's import and the first connections are not timed).
Prints the wall time over the floor and the CPU per call of this process for each, the
machine's load beside them; the last line is ``direct_over_floor=<ratio>``.

    python bench/direct_client.py
    python bench/direct_client.py --calls 500 --latency-ms 100 --concurrency 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_services import free_port, load_average  # noqa: E402
from worker.evals.context import EvalContext  # noqa: E402
from worker.evals.llm import client as llm  # noqa: E402
from worker.evals.llm import direct  # noqa: E402
from worker.evals.llm.cache import ResponseCache  # noqa: E402
from worker.evals.llm.cost import Budget  # noqa: E402
from worker.evals.llm.provider import ModelCaller  # noqa: E402
from worker.evals.llm_types import Endpoint, Pricing  # noqa: E402
from worker.evals.types import Settings  # noqa: E402

KEY_ENV = "BENCH_FAKE_KEY"
SERVER = r'''
import asyncio, sys
LATENCY_S = float(sys.argv[2]) / 1000
BODY = (b'{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,'
        b'"model":"bench-model","choices":[{"index":0,"message":{"role":"assistant",'
        b'"content":"ok ticket"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,'
        b'"completion_tokens":2,"total_tokens":14}}')
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(BODY)).encode() + b"\r\n\r\n")

async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            await asyncio.sleep(LATENCY_S)
            writer.write(HEAD + BODY)
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
'''


async def calls(url: str, count: int, concurrency: int) -> tuple[float, float]:
    """Send ``count`` calls through a fresh `ModelCaller`; return (wall s, CPU ms per call in
    this process)."""
    endpoint = Endpoint("openai/bench-model", {}, url, KEY_ENV, Pricing(1.0, 2.0))
    caller = ModelCaller(Settings(concurrency=concurrency), ResponseCache(None, "b", "off"),
                         Budget(None, None), EvalContext.of(say=lambda _: None))

    async def one(i: int) -> None:
        outcome = await caller.chat(endpoint, [{"role": "user", "content": f"ticket {i}"}],
                                    use_cache=False)
        if outcome.answer is None or outcome.answer.text != "ok ticket":
            raise SystemExit(f"call {i} failed: {outcome.error}")

    cpu = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    wall = time.perf_counter() - started
    return wall, (time.process_time() - cpu) * 1000 / count


async def measure(name: str, url: str, args: argparse.Namespace, floor_s: float) -> float:
    """Warm the path up, time it, print one line; return wall over floor."""
    await calls(url, args.concurrency * 2, args.concurrency)  # imports, connections
    wall, cpu_ms = await calls(url, args.calls, args.concurrency)
    print(f"{name}: wall {wall:.3f} s, floor {floor_s:.3f} s, ratio {wall / floor_s:.3f}; "
          f"CPU per call {cpu_ms:.2f} ms; load {load_average()}", flush=True)
    return wall / floor_s


async def main_async(args: argparse.Namespace) -> None:
    os.environ[KEY_ENV] = "bench-key"
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(args.latency_ms)],
                              stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
        url = f"http://127.0.0.1:{port}/v1"
        floor_s = args.calls / args.concurrency * args.latency_ms / 1000
        print(f"{args.calls} calls, {args.latency_ms:g} ms latency, concurrency "
              f"{args.concurrency}: floor {floor_s:.3f} s; {len(os.sched_getaffinity(0))} cores; "
              f"load at the start {load_average()}", flush=True)
        os.environ[direct.DIRECT_ENV] = "1"
        ratio = await measure("direct client", url, args, floor_s)
        print(f"litellm imported by the direct path: {llm.litellm_loaded()}")
        os.environ[direct.DIRECT_ENV] = "0"
        await measure("litellm, in-process", url, args, floor_s)
        print(f"direct_over_floor={ratio:.3f}")
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    """Parse the options and run the benchmark."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=64)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
