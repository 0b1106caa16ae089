"""Helpers for the baseline, push and on_paths tests: a repository whose pass rates are known
exactly at each commit, worker services started the way arq starts them, and a count of target
runs.

The suite ``score`` has `EXAMPLES` examples ``{"id": "e<i>", "input": "<i>", "expected": "ok"}``;
its batch target answers ``ok`` for inputs below the ``PASS`` constant of ``bot.py``, so the
pass rate at a commit is exactly ``PASS / EXAMPLES``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, commit, git
from tests.unit.worker_support import github as github  # re-exported: `worker_ctx` needs it
from worker.contract import PushPayload
from worker.evals.context import CallEvent
from worker.gate.services import Services
from worker.main import shutdown, startup
from worker.runtime.metrics import METRICS, SAMPLES_KEY

EXAMPLES = 100
BOT = """import json, sys
PASS = {passing}
lines = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
with open(sys.argv[2], "w") as out:
    for item in lines:
        answer = "ok" if int(item["input"]) < PASS else "no"
        out.write(json.dumps({{"id": item["id"], "output": answer}}) + "\\n")
"""
DATASET = "".join(json.dumps({"id": f"e{i}", "input": str(i), "expected": "ok"}) + "\n"
                  for i in range(EXAMPLES))


def config(settings: str = "", on_paths: str = "") -> str:
    """Return ``.llmgate.yml``: the ``score`` suite, gated by ``max_drop 0.05``."""
    return f"""version: 1
settings:
  concurrency: 2
{settings}suites:
  - name: score
    dataset: evals/score.jsonl
{on_paths}    target:
      command: python3 bot.py {{input_file}} {{output_file}}
      batch: true
    assertions:
      - type: equals
    gate:
      pass_rate:
        max_drop: 0.05
"""


def build_field_repo(dest: Path, conf: str | None = None) -> dict[str, str]:
    """The field case: ``b1`` on main passes 70 of 100, ``m9`` (main's tip, after ``b1``) 90,
    and ``head`` (branch ``pr`` from ``b1``) 71. Returns name -> SHA."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    shas = {"b1": commit(dest, "main", {".llmgate.yml": conf or config(),
                                        "bot.py": BOT.format(passing=70),
                                        "evals/score.jsonl": DATASET}, "b1")}
    shas["head"] = commit(dest, "pr", {"bot.py": BOT.format(passing=71)}, "head")
    shas["m9"] = commit(dest, "main", {"bot.py": BOT.format(passing=90)}, "m9")
    return shas


@pytest.fixture()
async def worker_ctx(github: FakeGitHubServer) -> AsyncIterator[dict[str, Any]]:
    """The arq job context of a started worker (``worker.main.startup``), shut down after."""
    ctx: dict[str, Any] = {}
    await startup(ctx)
    await command_runs(ctx["services"])  # forget what earlier tests of this process counted
    try:
        yield ctx
    finally:
        await shutdown(ctx)


def push_payload(clone_url: str, sha: str, pushed_at: int, branch: str = "main") -> PushPayload:
    """The job payload the web process plans for a push of ``sha`` to ``branch``."""
    return {"delivery_id": f"push-{sha[:7]}", "installation_id": INSTALLATION_ID,
            "repo": {"owner": OWNER, "name": REPO, "clone_url": clone_url},
            "branch": branch, "sha": sha, "pushed_at": pushed_at}


async def command_runs(services: Services) -> int:
    """Return how many examples a command target answered since the last call (the worker's
    ``llmgate_provider_calls_total{kind="command"}``, published to Redis and reset)."""
    redis: Redis = services.redis
    await METRICS.flush(redis)
    field = json.dumps(["llmgate_provider_calls_total", {"kind": "command", "provider": "none"}],
                       sort_keys=True, separators=(",", ":"))
    value = await redis.hget(SAMPLES_KEY, field)  # type: ignore[misc]
    await redis.hdel(SAMPLES_KEY, field)  # type: ignore[misc]
    return int(float(value)) if value is not None else 0


class Counter:
    """Counts command-target examples through the run's own ``on_call`` seam."""

    def __init__(self) -> None:
        self.examples = 0

    def __call__(self, event: CallEvent) -> None:
        self.examples += event.sent if event.kind == "command" else 0
