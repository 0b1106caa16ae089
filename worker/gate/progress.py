"""While a gate runs, show its progress in the in-progress check run (issue 20).

`updating` runs a task beside the gate that, at most every `PROGRESS_EVERY_S` seconds and only
when a count moved, PATCHes the check run with ``status: in_progress`` and an ``output`` whose
summary holds one row per suite and side (worker/pipeline/progress.py: calls done of those
expected, cache hits, cost so far, time, ETA), the numbers ``llmgate run`` prints. A PATCH that
fails is logged and the gate goes on: progress never decides a check. The task is stopped, and
any PATCH it is sending awaited, before `updating` returns, so the caller completes the check
run after the last progress update and a late one can never reopen or overwrite the conclusion.
Every PATCH is a write paced by the client's limiter (worker/github/ratelimit.py), so the
interval is well above GitHub's pace for content writes (docs.github.com, "Best practices for
using the REST API": at least one second between writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from worker.github import MAX_OUTPUT_BYTES, GitHubClient, clip_bytes
from worker.pipeline import GateProgress, SuiteLine, duration

log = logging.getLogger("llmgate.worker")

#: Seconds between two progress updates of a check run, at most one per interval.
PROGRESS_EVERY_S = 15.0


def progress_summary(lead: str, lines: list[SuiteLine], now: float) -> str:
    """Return the check run's summary: ``lead`` (what is running), then a Markdown table of
    ``lines`` (side, suite, calls done/expected, cache hits, USD so far, time, ETA)."""
    rows = ["| Side | Suite | Calls | Cached | Cost so far | Time | ETA |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for line in lines:
        calls = f"{line.done}/{line.total}" if line.total else str(line.done)
        if line.commands:
            calls += f" (+{line.commands} commands)"
        left = line.eta_s(now)
        eta = "-" if left is None else "done" if line.done >= line.total else \
            f"about {duration(left)}"
        rows.append(f"| {line.where} | {_cell(line.suite)} | {calls} | {line.hits} | "
                    f"${line.cost_usd:.4f} | {duration(line.elapsed_s(now))} | {eta} |")
    return clip_bytes(lead + ("\n\n" + "\n".join(rows) if lines else ""), MAX_OUTPUT_BYTES)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@contextlib.asynccontextmanager
async def updating(gh: GitHubClient, owner: str, name: str, check_run_id: int,
                   output: dict[str, str], progress: GateProgress,
                   every_s: float | None = None,
                   clock: Callable[[], float] = time.monotonic) -> AsyncIterator[None]:
    """Update the check run's progress while the body runs (see the module docstring).

    Args:
        gh, owner, name, check_run_id: the in-progress check run.
        output: its running ``{"title", "summary"}``; the summary leads the table.
        progress: the gate's counts (fed by the run's ``on_plan`` and ``on_call``).
        every_s: seconds between updates (default `PROGRESS_EVERY_S`, read when entered).
        clock: monotonic seconds, for the table's times.

    The body's exceptions pass through unchanged; the updater's own never do.
    """
    stop = asyncio.Event()
    task = asyncio.ensure_future(_update(gh, (owner, name, check_run_id), output, progress,
                                         PROGRESS_EVERY_S if every_s is None else every_s,
                                         stop, clock))
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)  # its PATCH ends before ours


async def _update(gh: GitHubClient, where: tuple[str, str, int], output: dict[str, str],
                  progress: GateProgress, every_s: float, stop: asyncio.Event,
                  clock: Callable[[], float]) -> None:
    shown = 0
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
        if stop.is_set():
            return
        if progress.version == shown:
            continue
        shown = progress.version
        body: dict[str, Any] = {"status": "in_progress", "output": {
            "title": output["title"],
            "summary": progress_summary(output["summary"], progress.lines(), clock())}}
        try:
            await gh.update_check_run(*where, body)
        except Exception as err:  # progress never fails a gate
            log.warning("check run %s: a progress update failed (%s: %s)", where[2],
                        type(err).__name__, err)
