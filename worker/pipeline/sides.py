"""Run a gate's base and head at once, with the results of one after the other (issue 19).

Both sides' model calls share one limiter of the config's ``concurrency`` (the budget of the whole
gate, not of a side), and so do their commands (`worker.evals.context.Sides`). Head starts once
base's estimate is made (a base whose files are invalid ends there, and head then runs as it
would after such a base: on its own contract). Base leads every call the two share: a head call
the response cache misses waits for base's flight of the same key, and a head judge or
embeddings call that misses waits until base is done, so each shared answer is fetched by base
and read from the cache by head, as when base runs first. Reports, verdicts, cache keys and the
calls each side sends and reads from the cache are then those of the sequential run.

The sides run one after the other (`at_once` is False) where running them at once could change
what head does:

- ``settings.sequential``: head's looks are decided on base's results;
- ``settings.max_cost_usd``: head's estimate may refuse to start it, and must count what base's
  answers taught the cache (completion lengths, answers head shares), as after base;
- with the response cache on, a suite with ``traps`` (the same trap judgements on both sides),
  or a head target equal to one of base's (same target and prompt: every answer shared, each
  read from the cache after base's run, and counted so in head's estimate).

An error on one side cancels the other and is raised (`run_both`); a base whose file turns out
invalid after its calls started (a schema file) cancels head, which runs again on its own
contract, as one after the other would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from worker.evals.context import CacheContext, EvalContext, Sides
from worker.evals.serialize import to_jsonable
from worker.evals.types import Config, ModelTarget, SuiteConfig

#: Whether a gate's sides may run at once (False: base, then head, as before issue 19; a
#: benchmark, bench/gate_sides.py, compares both in one process).
CONCURRENT_SIDES = True

B = TypeVar("B")
H = TypeVar("H")


def side_contexts(evals: EvalContext | None, concurrency: int,
                  ) -> tuple[EvalContext, EvalContext, Sides]:
    """Return base's and head's copies of ``evals`` (a new default context when None), each
    naming its side and sharing one `Sides` of ``concurrency`` slots."""
    sides = Sides(concurrency)
    ctx = evals or EvalContext()
    return ctx.for_side("base", sides), ctx.for_side("head", sides), sides


def at_once(base: Config, heads: Sequence[Config], base_root: Path, head_root: Path,
            cache: CacheContext | None) -> bool:
    """Whether base's config and head's configs (the plan's: base's contract, head's own) may run
    at once with the results of one after the other (the module docstring's conditions).
    ``cache``: the gate's response cache (`CacheContext`), None for the default one."""
    settings = base.settings
    if not CONCURRENT_SIDES or settings.statistics.sequential or \
            settings.max_cost_usd is not None:
        return False
    cache_on = settings.cache and settings.repeats == 1 and \
        (cache is None or cache.mode != "off")
    if not cache_on:
        return True  # nothing is read from the cache: the sides share no answer
    suites = [*base.suites, *(s for config in heads for s in config.suites)]
    if any(s.traps is not None for s in suites):
        return False
    ours = {_target(s, base_root) for s in base.suites}
    theirs = {_target(s, head_root) for config in heads for s in config.suites}
    return not (ours & theirs) - {None}


def _target(suite: SuiteConfig, root: Path) -> str | None:
    """The identity of a suite's model target: its fields and its prompt's text (None for a
    command target, which the cache does not answer; "?" for a prompt that cannot be read)."""
    target = suite.target
    if not isinstance(target, ModelTarget):
        return None
    try:
        prompt = (root / target.prompt).read_text(encoding="utf-8") if target.prompt else ""
    except (OSError, UnicodeDecodeError, ValueError):
        return "?"  # equal to another unreadable one: one after the other
    return json.dumps([to_jsonable(target), prompt], sort_keys=True, default=str)


async def run_both(base: Awaitable[B], head: Callable[[], Awaitable[H]], sides: Sides,
                   base_failed: Callable[[B], bool]) -> tuple[B, H | None]:
    """Run ``base``, and ``head()`` from when base's calls may start, both at once.

    Args:
        base: base's run; it must call ``sides.base_started.set()`` when its calls may start
            (worker/evals/run/runner.py does), else head starts when it ends.
        head: makes head's run.
        sides: what the sides share; base is marked done (`Sides.finish_base`) when it ends.
        base_failed: whether base's result means head must run otherwise (base's files are
            invalid): head is then cancelled (or not started) and None returned for it.

    Returns:
        (base's result, head's result or None when ``base_failed``).

    Raises:
        Exception: the first error of either side, once the other is cancelled and ended.
        asyncio.CancelledError: the caller was cancelled (both sides are, first).
    """
    base_task = asyncio.ensure_future(_base(base, sides))
    head_task: asyncio.Future[H] | None = None
    try:
        started = asyncio.ensure_future(sides.base_started.wait())
        try:
            await asyncio.wait({base_task, started}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            started.cancel()
        if base_task.done() and (base_task.exception() is not None or
                                 base_failed(base_task.result())):
            return base_task.result(), None
        head_task = asyncio.ensure_future(head())
        await asyncio.wait({base_task, head_task}, return_when=asyncio.FIRST_EXCEPTION)
        error = head_task.exception() if head_task.done() else None
        if error is not None:
            await _stop(base_task)
            raise error
        found = await base_task  # raises base's error (head is cancelled below)
        if base_failed(found):
            await _stop(head_task)
            return found, None
        return found, await head_task
    finally:
        for task in (base_task, head_task):
            if task is not None and not task.done():
                await _stop(task)


async def _base(run: Awaitable[B], sides: Sides) -> B:
    try:
        return await run
    finally:
        sides.finish_base()


async def _stop(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it ended (its own error or cancellation swallowed)."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
