"""What an eval run needs beyond its config and checkout: Redis, cache mode, clocks, a logger.

`EvalContext` is made once per job (worker) or command (CLI) and passed down to the engine; its
clock, sleep and random source are parameters so tests control retries and budgets without
waiting. Without a context the engine runs with no response cache, real time and real sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from redis.asyncio import Redis

from worker.evals.llm_types import CacheMode
from worker.evals.types import CommandTarget, Example, ModelTarget, Settings, TargetOutput

log = logging.getLogger("llmgate.evals")


def _log_info(message: str) -> None:
    log.info("%s", message)


@dataclass(frozen=True)
class CallEvent:
    """What one call of a run did, reported to `EvalContext.on_call` (the worker's metrics).

    Attributes:
        kind: ``model`` (a model target), ``judge``, ``pairwise``, ``embeddings`` or ``command``
            (one command-target invocation for one example).
        model: the endpoint's model name, e.g. ``openai/gpt-4o-mini`` ("" for a command).
        sent: requests sent to the provider; each retry counts, 0 for a cache hit or a call
            the budget stopped. 1 for a command that ran.
        cache_hits: 1 when the response cache answered the call, else 0.
        cost_usd: USD spent on the call (0 for a cache hit, a failed or an unpriced call).
    """

    kind: str
    model: str
    sent: int
    cache_hits: int
    cost_usd: float


@dataclass(frozen=True)
class RunOverrides:
    """What the command line changes in every config it gates (``llmgate run``; the worker
    never sets any).

    Attributes:
        suites: run only the suites of these names (``--suite NAME``, repeatable); () for all.
        smoke: run only the first this many examples of each suite (``--smoke N``), None for all.
        samples: runs of each example on both sides (``--samples N``: ``settings.repeats``
            at base and head), None for the configs' own.
    """

    suites: tuple[str, ...] = ()
    smoke: int | None = None
    samples: int | None = None


@dataclass(frozen=True)
class ShardWork:
    """The examples of one suite and draw a run is about to answer, offered to `AnswerShards`.

    Attributes:
        target: the suite's target.
        examples: the examples to answer, in dataset order (none answered yet in this run).
        root: the checkout the target runs in (a config folder inside it, or its top).
        sha: the commit at ``root`` ("" for a working tree).
        settings: the run settings.
        use_cache: whether answers may come from the response cache (one draw only).
        repeat: the draw (0-based).
        foreign: the examples are of base's dataset (head's target on base's contract).
    """

    target: CommandTarget | ModelTarget
    examples: tuple[Example, ...]
    root: Path
    sha: str
    settings: Settings
    use_cache: bool
    repeat: int
    foreign: bool


class AnswerShards(Protocol):
    """A seam that answers a suite's examples elsewhere (other workers: worker/gate/shards.py)."""

    async def answer(self, work: ShardWork) -> list[TargetOutput] | None:
        """Return one output per example of ``work``, in order, or None to answer here.

        Each output's ``spend`` is what producing it cost (the engine adds it to the run's
        totals and budget). Raises whatever makes the run fail (never a partial list).
        """
        ...


def _ignore_plan(sha: str, calls: int) -> None:
    """Observe nothing (the worker's default)."""


def _ignore_call(event: CallEvent) -> None:
    """Observe nothing (the CLI's default): calls are only counted by the worker."""


@dataclass
class EvalContext:
    """Services of one gate job or ``llmgate run``.

    Attributes:
        redis: the Redis client of the response cache, or None (no cache).
        namespace: the cache namespace, the repository's ``owner/name`` ("local" for the CLI).
        cache_mode: ``use``, ``refresh`` or ``off`` (``--refresh-cache``, ``--no-cache``);
            ``settings.cache: false`` in a config turns it off for that config.
        sleep: awaited between retries with the wait in seconds.
        clock: monotonic seconds, for ``max_duration`` and latency.
        rng: the random source of retry jitter.
        say: prints progress lines (the cost estimate); the worker logs them.
        on_call: told about every call as it ends (`CallEvent`); the worker counts them in
            its metrics, the CLI ignores them. It must not block or raise.
        history: earlier values of each suite's examples in runs of unchanged code (the A/A
            runs of a calibration: suite -> metric -> example id -> values, fractions 0-1);
            they weigh the examples of the sign-flip family (worker/evals/verdict/flakiness.py).
        on_plan: told, before a side's calls start, its commit ("" for a working tree) and
            the model, judge and embedding calls it expects (sent or cached; the estimate's);
            the CLI's progress line (worker/cli/progress.py). It must not block or raise.
        overrides: the command line's changes to every config (`RunOverrides`).
        cache_file: the SQLite file of the response cache when there is no ``redis``
            (``llmgate run``'s default: worker/evals/llm/disk_cache.py), or None.
        shards: answers large example sets on other workers (`AnswerShards`), or None.
    """

    redis: Redis | None = None
    namespace: str = "local"
    cache_mode: CacheMode = "use"
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    say: Callable[[str], None] = _log_info
    on_call: Callable[[CallEvent], None] = _ignore_call
    history: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]] = field(
        default_factory=dict)
    on_plan: Callable[[str, int], None] = _ignore_plan
    overrides: RunOverrides = RunOverrides()
    cache_file: Path | None = None
    shards: AnswerShards | None = None
