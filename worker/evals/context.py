"""What an eval run needs beyond its config and checkout: Redis, cache mode, clocks, a logger.

`EvalContext` is made once per job (worker) or command (CLI) and passed to the engine's entry
points; it is made of one part per concern (`CacheContext`, `Timing`, `Observers`,
`RunOverrides`, `GateSide`). A function that reads one or two concerns takes only those parts;
a run's state and its model caller, which read most, hold the whole. Its clock, sleep and
random source (`Timing`) are parameters so tests control retries and budgets without waiting.
Without a context the engine runs with no response cache, real time and real sleeps. A gate
gives each side its own copy naming the side (``base`` or ``head``) and holding the `Sides` both
share (`GateSide`): one limiter of model calls and one of commands for the whole gate, and what
lets base and head run at once with the results of one after the other
(worker/pipeline/sides.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from redis.asyncio import Redis

from worker.evals.llm_types import CacheMode
from worker.evals.types import CommandTarget, Example, ModelTarget, Settings, TargetOutput

log = logging.getLogger("llmgate.evals")


def _log_info(message: str) -> None:
    log.info("%s", message)


@dataclass(frozen=True)
class CallEvent:
    """What one call of a run did, reported to `Observers.on_call` (the worker's metrics).

    Attributes:
        kind: ``model`` (a model target), ``judge``, ``pairwise``, ``embeddings`` or ``command``
            (one command-target invocation for one example).
        model: the endpoint's model name, e.g. ``openai/gpt-4o-mini`` ("" for a command).
        sent: requests sent to the provider; each retry counts, 0 for a cache hit or a call
            the budget stopped. 1 for a command that ran.
        cache_hits: 1 when the response cache answered the call, else 0.
        cost_usd: USD spent on the call (0 for a cache hit, a failed or an unpriced call).
        side: the gate side that made it (`GateSide.side`), "" outside a gate.
        suite: the suite it was made for, "" when not known (a pairwise judge, a calibration).
    """

    kind: str
    model: str
    sent: int
    cache_hits: int
    cost_usd: float
    side: str = ""
    suite: str = ""


@dataclass(frozen=True)
class RunPlan:
    """What one side of a gate expects before its calls start (`Observers.on_plan`).

    Attributes:
        sha: its commit ("" for a working tree).
        calls: model, judge and embedding calls expected (sent or cached: the estimate's).
        suites: (suite name, calls expected) per suite, in run order; a suite two configs of the
            run share (head's own contract beside base's) once, with both counts; the judge
            calls of a calibration after the suites under the name "".
        side: ``base``, ``head`` or "" (a run outside a gate).
    """

    sha: str
    calls: int
    suites: tuple[tuple[str, int], ...] = ()
    side: str = ""


class Sides:
    """What the base and head runs of one gate share (worker/pipeline/sides.py).

    Model calls of both sides wait for one ``limiter`` slot and commands for one
    ``command_limit`` slot, each of ``concurrency`` (the gate's budget, not a side's). Base
    leads: a head call the response cache misses first waits for base's flight of the same
    key (then it reads base's answer from the cache, as it would after base had run), and a head
    scoring call (judge, embeddings) that misses waits until base is done, so base sends every
    call the two share, as when base runs first.

    Attributes:
        base_started: set once base's estimate is made and its calls may start (or it ended).
        base_done: set once base ended, however.
    """

    def __init__(self, concurrency: int) -> None:
        self.limiter = asyncio.Semaphore(concurrency)
        self.command_limit = asyncio.Semaphore(concurrency)
        self.base_started = asyncio.Event()
        self.base_done = asyncio.Event()
        self._flights: dict[str, tuple[asyncio.Event, int]] = {}

    def fetching(self, key: str) -> None:
        """Note that base is fetching the answer of ``key`` (a cache miss it sends)."""
        event, count = self._flights.get(key, (asyncio.Event(), 0))
        self._flights[key] = (event, count + 1)

    def fetched(self, key: str) -> None:
        """Note that base's fetch of ``key`` ended (its answer stored, or an error)."""
        event, count = self._flights.get(key, (asyncio.Event(), 1))
        if count > 1:
            self._flights[key] = (event, count - 1)
            return
        self._flights.pop(key, None)
        event.set()

    async def before_head_sends(self, key: str, scoring: bool) -> bool:
        """Wait before head sends ``key`` (a cache miss) while base may fetch it first.

        Args:
            key: the call's response cache key.
            scoring: a judge or embeddings call (its key depends on an answer, so base may
                ask for it later): it waits until base is done.

        Returns:
            Whether it waited (then the caller reads the cache again).
        """
        flight = self._flights.get(key)
        waited = flight is not None
        if flight is not None:
            await flight[0].wait()
        if scoring and not self.base_done.is_set():
            await self.base_done.wait()
            waited = True
        return waited

    def finish_base(self) -> None:
        """Mark base ended: nothing of head waits for it any more."""
        self.base_started.set()
        self.base_done.set()
        for event, _ in self._flights.values():
            event.set()
        self._flights.clear()


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
        hidden: the paths (relative to ``root``) its commands may not read: the view they
            run in leaves them out (worker/evals/run/views.py); () for a model target.
    """

    target: CommandTarget | ModelTarget
    examples: tuple[Example, ...]
    root: Path
    sha: str
    settings: Settings
    use_cache: bool
    repeat: int
    foreign: bool
    hidden: tuple[str, ...] = ()


class AnswerShards(Protocol):
    """A seam that answers a suite's examples elsewhere (other workers: worker/gate/shards.py)."""

    async def answer(self, work: ShardWork) -> list[TargetOutput] | None:
        """Return one output per example of ``work``, in order, or None to answer here.

        Each output's ``spend`` is what producing it cost (the engine adds it to the run's
        totals and budget). Raises whatever makes the run fail (never a partial list).
        """
        ...


def _ignore_plan(plan: RunPlan) -> None:
    """Observe nothing (the worker's default)."""


def _ignore_call(event: CallEvent) -> None:
    """Observe nothing (the CLI's default): calls are only counted by the worker."""


@dataclass(frozen=True)
class CacheContext:
    """Where a run's response cache lives and how it is used (worker/evals/llm/cache.py).

    Attributes:
        redis: the Redis client of the response cache, or None (no cache). It also shares
            the provider quotas of the run's models between workers (worker/evals/llm/pace.py).
        namespace: the cache namespace, the repository's ``owner/name`` ("local" for the CLI).
        mode: ``use``, ``refresh`` or ``off`` (``--refresh-cache``, ``--no-cache``);
            ``settings.cache: false`` in a config turns it off for that config.
        file: the SQLite file of the response cache when there is no ``redis``
            (``llmgate run``'s default: worker/evals/llm/disk_cache.py), or None.
    """

    redis: Redis | None = None
    namespace: str = "local"
    mode: CacheMode = "use"
    file: Path | None = None


@dataclass(frozen=True)
class Timing:
    """The time and randomness of a run: parameters, so tests control retries and budgets
    without waiting.

    Attributes:
        sleep: awaited between retries and for a provider quota's turn, with the wait in
            seconds.
        clock: monotonic seconds, for ``max_duration``, latency and provider quotas.
        rng: the random source of retry jitter.
    """

    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)


@dataclass(frozen=True)
class Observers:
    """Who is told what a run does; ``on_call`` and ``on_plan`` must not block or raise.

    Attributes:
        say: prints progress lines (the cost estimate, a provider's pace); the worker logs
            them.
        on_call: told about every call as it ends (`CallEvent`); the worker counts them in
            its metrics, the CLI ignores them.
        on_plan: told, before a side's calls start, what it expects (`RunPlan`: its commit,
            its calls in all and per suite); the progress lines of the CLI
            (worker/cli/progress.py) and of the App's check run (worker/gate/progress.py).
    """

    say: Callable[[str], None] = _log_info
    on_call: Callable[[CallEvent], None] = _ignore_call
    on_plan: Callable[[RunPlan], None] = _ignore_plan


@dataclass(frozen=True)
class GateSide:
    """Which side of a gate a run is, and what it shares with the other side and other workers.

    Attributes:
        side: ``base`` or ``head``, "" outside a gate; named in every `CallEvent` and `RunPlan`.
        sides: what both sides of the gate share (`Sides`), or None (a run of its own).
        shards: answers large example sets on other workers (`AnswerShards`), or None.
    """

    side: str = ""
    sides: Sides | None = None
    shards: AnswerShards | None = None


#: `EvalContext.of`'s keywords that name a part's field otherwise (the flat fields of old).
_FLAT_NAMES = {"cache_mode": "mode", "cache_file": "file"}


@dataclass
class EvalContext:
    """Services of one gate job or ``llmgate run``, by concern. The entry points (``run_suites``,
    ``gate_trees``...) take the whole; a function that reads one or two concerns takes only
    those parts. The parts are frozen: a caller changes one by assigning a new part (the CLI's
    progress observers), or copies the context for a side (`for_side`).

    Attributes:
        cache: the response cache (`CacheContext`).
        timing: sleep, clock and random source (`Timing`).
        observers: progress lines and the call and plan observers (`Observers`).
        overrides: the command line's changes to every config (`RunOverrides`).
        gate: the gate side this context runs and what the sides share (`GateSide`).
        history: earlier values of each suite's examples in runs of unchanged code (the A/A
            runs of a calibration: suite -> metric -> example id -> values, fractions 0-1);
            they weigh the examples of the sign-flip family (worker/evals/verdict/flakiness.py).
    """

    cache: CacheContext = CacheContext()
    timing: Timing = field(default_factory=Timing)
    observers: Observers = Observers()
    overrides: RunOverrides = RunOverrides()
    gate: GateSide = GateSide()
    history: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]] = field(
        default_factory=dict)

    @classmethod
    def of(cls, **fields: Any) -> EvalContext:
        """Build a context from the fields of its parts, by keyword: those of `CacheContext`
        (``cache_mode`` and ``cache_file`` for its ``mode`` and ``file``), `Timing`,
        `Observers` and `GateSide`, and ``overrides`` and ``history``; each part's own
        defaults fill the rest (tests and benches build contexts this way).

        Raises:
            TypeError: a keyword that is no field of a part.
        """
        fields = {_FLAT_NAMES.get(name, name): value for name, value in fields.items()}
        parts: dict[str, Any] = {}
        for name, part in (("cache", CacheContext), ("timing", Timing),
                           ("observers", Observers), ("gate", GateSide)):
            own = {f.name for f in dataclasses.fields(part)}
            parts[name] = part(**{k: fields.pop(k) for k in own & fields.keys()})
        return cls(**parts, **fields)

    def for_side(self, side: str, sides: Sides | None) -> EvalContext:
        """Return a copy of this context running gate side ``side`` (``base``, ``head``)
        sharing ``sides`` (None: a side of its own); its shards stay."""
        return replace(self, gate=replace(self.gate, side=side, sides=sides))
