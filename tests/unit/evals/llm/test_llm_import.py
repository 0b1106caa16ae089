"""litellm stays out of the web process, is imported lazily (off the event loop, only for a call
through it), and never fetches its prices."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "GITHUB_WEBHOOK_SECRET": "x",
           "REDIS_URL": "redis://127.0.0.1:1/0"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)


def test_the_web_process_and_the_engine_do_not_import_litellm() -> None:
    result = run_python(
        "import sys\nimport app.main\n"
        "import worker.main, worker.pipeline.trees, worker.evals.run.runner\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'openai')))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_litellm_uses_its_bundled_price_table_without_network() -> None:
    result = run_python(
        "import os\nfrom worker.evals.llm import client as llm, direct\n"
        "m = llm.litellm_module()\n"
        "print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])\n"
        "print(m.model_cost['gpt-4o-mini']['input_cost_per_token'] > 0)\n"
        "print(m.callbacks, m.success_callback, m.failure_callback)\n"
        "print(m.model_cost == direct.price_table(), len(m.model_cost) > 1000)")
    assert result.returncode == 0, result.stderr
    # the prices llmgate reads without importing litellm are the table litellm itself uses
    assert result.stdout.split("\n")[:4] == ["True", "True", "[] [] []", "True True"]
    assert "fetch" not in result.stderr.lower()  # a fetch attempt would warn, then fall back


FIRST_CALL = """import asyncio, os, sys, threading, time
from tests.fakes.fake_llm import running_fake_llm
from tests.unit.llm_support import context
from worker.evals.llm import client
from worker.evals.llm.cache import ResponseCache
from worker.evals.llm.cost import Budget
from worker.evals.llm.provider import ModelCaller
from worker.evals.llm_types import Endpoint
from worker.evals.types import Settings

threads = []
real = client._import_litellm
took = []
def recording():  # under litellm_module's lock
    if not client.litellm_loaded():  # this call imports it
        threads.append(threading.current_thread() is threading.main_thread())
    started = time.monotonic()
    try:
        return real()
    finally:
        took.append(time.monotonic() - started)
client._import_litellm = recording

async def main(url):
    caller = ModelCaller(Settings(), ResponseCache(None, "t", "off"), Budget(None, None),
                         context())
    direct = Endpoint("openai/test-model", {}, url, "FAKE_LLM_KEY")
    hosted = Endpoint("openai/test-model", {}, url, "FAKE_LLM_KEY")
    gaps, last = [], [time.monotonic()]
    async def tick():
        while True:
            await asyncio.sleep(0.01)
            gaps.append(time.monotonic() - last[0]); last[0] = time.monotonic()
    ticker = asyncio.create_task(tick())
    os.environ["LLMGATE_DIRECT_CLIENT"] = "1"
    one = await caller.chat(direct, [{"role": "user", "content": "a"}])
    print("after the direct call", "litellm" in sys.modules, one.answer.text)
    os.environ["LLMGATE_DIRECT_CLIENT"] = "0"
    found = await asyncio.gather(*(caller.chat(hosted, [{"role": "user", "content": str(i)}])
                                   for i in range(3)))
    ticker.cancel()
    print("after litellm's calls", "litellm" in sys.modules, [f.answer.text for f in found])
    print("imports", len(threads), "on the main thread", [t for t in threads if t])
    # on the loop, the loop would stall for the whole import (seconds); in a thread it only
    # waits for the GIL now and then (the final gc.collect of ~200 MB is the longest wait)
    print("the loop kept running", max(gaps) < min(2.0, max(took) / 3), round(max(gaps), 2),
          round(max(took), 2))

os.environ["FAKE_LLM_KEY"] = "sk-fake"
with running_fake_llm({"default_reply": "ok"}) as server:
    asyncio.run(main(server.url))
"""


def test_litellm_is_imported_once_off_the_event_loop_when_a_call_first_needs_it() -> None:
    """A worker imports litellm on its first call through litellm, in a thread: the event loop
    keeps running (it renews the job's lease meanwhile); a call on the direct path needs none."""
    result = run_python(FIRST_CALL)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == ["after the direct call False ok",
                         "after litellm's calls True ['ok', 'ok', 'ok']",
                         "imports 1 on the main thread []"]
    assert lines[3].startswith("the loop kept running True"), lines[3]
