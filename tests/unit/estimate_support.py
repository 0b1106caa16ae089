"""The LLM example suites (examples/support-llm) run offline: the estimate against the real spend.

`example_trees` copies the example twice, as ``main`` and as the pull request ``pr/signoff``
(the variant's files over it), with every model pointed at the fake provider; the fake answers
with the example's recorded replies (``recorded.json``) and counts tokens as OpenAI does. `measure`
runs the flow of a repository on the App: a push to ``main`` on a cold cache, then the pull
request (head, then base), all through one real Redis response cache, and returns what each run
was estimated to cost and what it spent. Used by tests/unit/evals/run/test_estimate.py and
bench/estimate_accuracy.py.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from redis.asyncio import Redis

from tests.unit.llm_support import KEY_ENV
from worker.evals.context import EvalContext
from worker.evals.llm_types import CostEstimate, RunUsage
from worker.evals.types import RunResult
from worker.pipeline.trees import gate_trees

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "support-llm"
VARIANT = EXAMPLE / "variants" / "pr-signoff"


@dataclass(frozen=True)
class Measured:
    """One run: its estimate and its spend (USD and calls)."""

    name: str
    estimate: CostEstimate
    spend: RunUsage

    @property
    def ratio(self) -> float | None:
        """Estimated USD / spent USD, or None when nothing was spent."""
        spent = self.spend.cost_usd
        return None if not spent or self.estimate.cost_usd is None \
            else self.estimate.cost_usd / spent


def recorded() -> dict[str, Any]:
    """The fake provider's setup: the example's recorded replies, OpenAI's token counts."""
    setup: dict[str, Any] = json.loads((EXAMPLE / "recorded.json").read_text())
    return setup


def _on_fake(config_text: str, url: str) -> str:
    config = yaml.safe_load(config_text)
    where = {"api_base": url, "api_key_env": KEY_ENV}
    for name in ("judge", "embedding"):
        config["settings"][name].update(where)
    for suite in config["suites"]:
        suite["target"].update(where)
    return yaml.safe_dump(config, sort_keys=False)


def example_trees(dest: Path, url: str) -> tuple[Path, Path]:
    """Return (main, pr): copies of the example at ``dest``, their models on ``url``."""
    main, pr = dest / "main", dest / "pr"
    for tree in (main, pr):
        shutil.copytree(EXAMPLE, tree, ignore=shutil.ignore_patterns("variants", "*.md",
                                                                     "recorded.json"))
        config = tree / ".llmgate.yml"
        config.write_text(_on_fake(config.read_text(), url))
    shutil.copytree(VARIANT, pr, dirs_exist_ok=True)
    return main, pr


def _measured(name: str, run: RunResult | None) -> Measured:
    assert run is not None and run.estimate is not None, f"{name}: no run"
    return Measured(name, run.estimate, run.spend)


async def measure(dest: Path, url: str, redis: Redis) -> list[Measured]:
    """Run main on a cold cache, then the pull request against main (module docstring)."""
    main, pr = example_trees(dest, url)
    evals = EvalContext.of(redis=redis, namespace="acme/support-llm", say=lambda _: None)
    pushed = await gate_trees(main, None, evals=evals)
    pull = await gate_trees(pr, main, evals=evals)
    return [_measured("main, cold cache", pushed.head), _measured("pull request head", pull.head),
            _measured("pull request base", pull.base)]
