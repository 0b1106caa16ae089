"""The base side of a gate from stored baselines: reuse what is stored, run and store the rest.

`StoredBaselines` is the worker's `worker.pipeline.trees.BaseRunner`. For each suite of the base
config it looks up a baseline of exactly the base commit with an equal `BaselineKey`
(worker/baselines/keys.py); stored suites are reused (no target runs, no provider calls), the
others run now and are stored for later pull requests. It never falls back to another commit
(an ancestor or the branch tip): without a baseline of that SHA, base runs.

Stored records of the same key at other commits are also the examples' flakiness evidence: the
newest `MAX_STORED_RUNS` of each suite, never the record of the base commit being gated, are
added to ``evals.history`` after the calibration's (worker/baselines/history.py), where they
weigh the sign-flip family, and the base sentence says how many were read.

A suite result is stored only when it is complete: not stopped by a budget or time limit, with
no unscored example (provider errors, judge errors) and no example its target gave no answer
for (a command target that crashed, exited non-zero, timed out or wrote no valid output), so
bad luck at one run, or a base run a pull request's leftover process sabotaged
(docs/security-model.md), is never frozen into later comparisons. A stored record that is not
complete by the same rule (one stored before it held) is never reused: the suite runs again,
its record is not read for weights, and the base sentence says why. The push job
(worker/jobs/push.py) uses the same runner.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from worker.baselines.history import MAX_STORED_RUNS, merged, stored_history
from worker.baselines.keys import BaselineKey, suite_key
from worker.baselines.local import Records
from worker.baselines.store import Baseline
from worker.evals.context import EvalContext
from worker.evals.llm_types import RunUsage
from worker.evals.run import run_config
from worker.evals.score import has_example_values
from worker.evals.types import Config, RunResult, SuiteResult
from worker.evals.verdict import no_answer
from worker.pipeline import BaseRun

log = logging.getLogger("llmgate.baselines")


@dataclass(frozen=True)
class Origin:
    """Who runs the suites that get stored.

    Attributes:
        kind: ``push`` (the push job of ``branch``) or ``pull_request`` (the base run of
            pull request ``pr_number``).
        branch: the pushed branch, for ``push``.
        pr_number: the pull request, for ``pull_request``.
        role: how the report names the commit, e.g. ``the merge base`` ("" for none).
    """

    kind: Literal["push", "pull_request"]
    branch: str = ""
    pr_number: int = 0
    role: str = ""


class StoredBaselines:
    """A `worker.pipeline.trees.BaseRunner` backed by a `BaselineStore` (see the module docstring).

    Attributes:
        keys: after a call, suite name -> key of every suite of the config (for the push
            job's latest pointer).
        not_stored: after a call, suite name -> why the result run now was not stored (a
            suite absent here was reused, or stored now).
    """

    def __init__(self, store: Records, repo: str, origin: Origin, *,
                 reuse: bool = True) -> None:
        """Look up and store in ``store`` for ``repo`` (``owner/name``) as ``origin``;
        ``reuse=False`` runs every suite (``/llmgate rerun --no-cache``) and stores them."""
        self.store = store
        self.repo = repo
        self.origin = origin
        self.reuse = reuse
        self.keys: dict[str, BaselineKey] = {}
        self.not_stored: dict[str, str] = {}

    async def __call__(self, config: Config, root: Path, sha: str,
                       evals: EvalContext | None) -> BaseRun:
        """Return the base run of ``config`` at ``sha`` (reused and run suites, config order).

        Raises:
            ConfigError: a suite that has to run has a missing or invalid file.
        """
        self.keys = {s.name: suite_key(config, s, root) for s in config.suites}
        self.not_stored = {}
        found, refused = {}, {}
        for name, key in self.keys.items() if self.reuse else ():
            stored = await self.store.get(self.repo, sha, key)
            why = incomplete(stored.result) if stored is not None else None
            if stored is not None and why is None:
                found[name] = stored
            elif why is not None:
                refused[name] = why
                log.warning("stored baseline of %s at %s@%s not reused: %s", name, self.repo,
                            sha[:7], why)
        missing = tuple(s for s in config.suites if s.name not in found)
        run = await run_config(replace(config, suites=missing), root, sha, evals,
                               with_base=self.origin.kind == "pull_request") \
            if missing else RunResult(sha, {})
        ran = {name: await self._store(sha, name, result, run)  # name -> why not stored
               for name, result in run.suites.items()}
        self.not_stored = {name: why for name, why in ran.items() if why is not None}
        suites = {s.name: replace(found[s.name].result, spend=RunUsage()) if s.name in found
                  else run.suites[s.name] for s in config.suites
                  if s.name in found or s.name in run.suites}
        weighed = await self.weigh(config, sha, evals)
        return BaseRun(replace(run, suites=suites),
                       describe(sha, self.origin.role, found, ran, refused) + weighed)

    async def weigh(self, config: Config, sha: str, evals: EvalContext | None) -> str:
        """Add the stored runs of each suite's key at commits other than ``sha`` to
        ``evals.history`` (module docstring); return the base sentence's words on them ("" for
        none). Call after ``keys`` is set."""
        if evals is None:
            return ""
        metrics = {s.name: [m for m in s.gate if has_example_values(m)] for s in config.suites}
        records: list[Baseline] = []
        for name, key in self.keys.items():
            if metrics.get(name):
                records += [r for r in await self.store.runs(self.repo, key,
                                                             MAX_STORED_RUNS + 1)
                            if incomplete(r.result) is None]
        history = stored_history(records, metrics, exclude_sha=sha)
        if not history:
            return ""
        evals.history = merged(evals.history, history)
        depth = {suite: max((len(v) for rows in found.values() for v in rows.values()),
                            default=0) for suite, found in history.items()}
        parts = ", ".join(f"{suite}: {n}" for suite, n in sorted(depth.items()))
        return (f"; example weights also from stored runs of the unchanged suite at earlier "
                f"commits ({parts})")

    async def _store(self, sha: str, name: str, result: SuiteResult,
                     run: RunResult) -> str | None:
        """Store one suite's result; return None, or why it was not stored."""
        why = incomplete(result, run)
        if why is None:
            why = await self.store.put(Baseline(
                self.repo, sha, self.keys[name], result, self.origin.kind,
                self.origin.branch, self.origin.pr_number, self.store.clock()))
        if why is not None:
            log.info("baseline of %s at %s@%s not stored: %s", name, self.repo, sha[:7], why)
        return why


def incomplete(result: SuiteResult, run: RunResult | None = None) -> str | None:
    """Return why ``result`` must not be stored or reused (stopped early, examples its target
    gave no answer for, unscored examples), or None.

    Args:
        result: one suite's result (run now, or a stored record's).
        run: the run it belongs to (its ``stopped``), or None for a stored record.
    """
    stopped = result.stopped or (run.stopped if run is not None else None)
    if stopped:
        return f"the run stopped early ({stopped})"
    failed = sum(1 for e in result.examples if no_answer(e))
    if failed:
        plural = "s" if failed != 1 else ""
        return (f"{failed} example{plural} without an answer from the target (it crashed, "
                "exited non-zero, timed out or wrote no valid output)")
    unscored = sum(1 for e in result.examples if e.unscored)
    if unscored:
        plural = "s" if unscored != 1 else ""
        return f"{unscored} example{plural} unscored (provider or judge errors)"
    return None


def describe(sha: str, role: str, found: dict[str, Baseline],
             ran: dict[str, str | None], refused: dict[str, str] | None = None) -> str:
    """Return the report's sentence about the base: which commit, reused or run now.

    ``found`` holds the reused baselines by suite name, ``ran`` the suites run now with why
    each was not stored (None: stored), ``refused`` the stored baselines not reused with why
    (`incomplete`).

    E.g. ``compared with 1a2b3c4, the merge base (stored baseline from the push to main,
    2026-12-01 10:00 UTC)`` or ``compared with 1a2b3c4 (base run now, stored for later pull
    requests)``.
    """
    head = f"compared with {sha[:7]}" + (f", {role}" if role else "")
    parts = []
    if found:
        sources = sorted({_origin(b) for b in found.values()})
        names = "" if not ran else f" for {', '.join(sorted(found))}"
        parts.append(f"stored baseline{'s' if len(found) > 1 else ''}{names} from "
                     f"{'; '.join(sources)}")
    if refused:
        parts.append("stored baseline not reused: " + "; ".join(
            f"{name}: {why}" for name, why in sorted(refused.items())))
    if ran:
        names = f" for {', '.join(sorted(ran))}" if found else ""
        failed = [f"{name}: {why}" for name, why in sorted(ran.items()) if why]
        tail = f"not stored: {'; '.join(failed)}" if failed else "stored for later pull requests"
        parts.append(f"base run now{names}, {tail}")
    return f"{head} ({'; '.join(parts)})" if parts else head


def _origin(baseline: Baseline) -> str:
    when = datetime.datetime.fromtimestamp(baseline.created_at, datetime.UTC)
    stamp = when.strftime("%Y-%m-%d %H:%M UTC")
    if baseline.origin == "push":
        return f"the push to {baseline.branch}, {stamp}"
    if not baseline.pr_number:  # llmgate run --baseline-store
        return f"an earlier run's base, {stamp}"
    return f"the base run of #{baseline.pr_number}, {stamp}"
