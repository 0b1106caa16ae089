"""Does a push regress against the previous push? The gate's own comparison, on stored runs.

The previous push is the branch's latest-push pointer as it was before this push replaced it
(worker/baselines/store.py): its commit and the records of its suites, read before
`BaselineStore.mark_latest` gives them back their expiry. The pushed run is compared with it
exactly as a pull request's head with its base (worker/pipeline/trees.py): the previous commit's
config gives the rules (`worker.evals.verdict.rules.merge_rules`: base's rules, the stricter
where the new commit tightens them) and the verdict settings
(`worker.evals.config.base_settings.with_base_settings`), base is made comparable to head
(`worker.evals.verdict.comparable.compare_comparable`), an example left unanswered by the
provider where the previous push had an answer counts as failed
(`worker.evals.verdict.unanswered.count_as_failed`), and the report is finished by the same
health rules (`worker.evals.verdict.health.finish_report`). Nothing here compares on its own.
Not taken from a pull request's gate: its second verdict under head's own contract (here
`merge_rules` already keeps the stricter of the two commits' rules) and sequential looks (a push
is compared once).

Fail closed: a comparison that cannot be made (a previous record gone or unreadable, the
previous config missing or invalid, the comparison raising or running out of time) is
``undecided`` with the reason, never left out; so is an undecided report (``action_required``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from worker.baselines import BaselineStore, decode
from worker.evals.config import with_base_settings
from worker.evals.context import EvalContext
from worker.evals.types import Config, GateReport, RuleOutcome, RunResult, SuiteResult
from worker.evals.verdict import (
    Attribution,
    compare_comparable,
    count_as_failed,
    finish_report,
    merge_rules,
)
from worker.evals.verdict import note as unanswered_note
from worker.pipeline import restrict

#: Bound on one comparison (re-scoring may call judges), seconds; past it the push is undecided.
COMPARE_TIMEOUT_S = 300.0
Status = Literal["regressed", "undecided", "passed"]


@dataclass(frozen=True)
class PreviousRun:
    """The branch's latest push before this one, from the baseline store.

    Attributes:
        sha: its commit (40 hex).
        suites: suite name -> its stored result, for every record still readable.
        missing: how many of its records are gone (expired, evicted) or unreadable.
    """

    sha: str
    suites: dict[str, SuiteResult]
    missing: int = 0


@dataclass(frozen=True)
class PushVerdict:
    """Whether a push regressed its notified suites against the previous push.

    Attributes:
        status: ``regressed`` (a rule fails), ``undecided`` (no decision could be made; see
            ``reason``) or ``passed`` (success or neutral by the rules).
        previous_sha: the commit compared with.
        failing: the rule outcomes behind the status (failing rules for ``regressed``;
            undecided or skipped ones for ``undecided``), in report order.
        reason: why the comparison is undecided ("" otherwise).
    """

    status: Status
    previous_sha: str
    failing: tuple[RuleOutcome, ...] = ()
    reason: str = ""


async def previous_run(store: BaselineStore, namespace: str, branch: str) -> PreviousRun | None:
    """Return ``branch``'s latest push in ``namespace`` (call before `mark_latest`), or None
    when the branch has none.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    pointer = await store.latest(namespace, branch)
    if pointer is None:
        return None
    suites: dict[str, SuiteResult] = {}
    missing = 0
    for key in pointer.get("keys") or []:
        raw = await store.redis.get(str(key))
        try:
            record = decode(raw) if raw is not None else None
        except ValueError:
            record = None
        if record is None:
            missing += 1
        else:
            suites[record.result.name] = record.result
    return PreviousRun(str(pointer.get("sha", "")), suites, missing)


async def judge_push(previous: PreviousRun, previous_config: Config | None, config: Config,
                     root: Path, run: RunResult, suites: Sequence[str],
                     evals: EvalContext | None = None) -> PushVerdict:
    """Compare the pushed ``run`` of ``config`` (checked out at ``root``) with ``previous``,
    for the suites named in ``suites``, under the previous commit's rules (module docstring).

    Args:
        previous: the previous push's stored run.
        previous_config: the previous commit's config, or None when it has none or it is
            invalid (undecided).
        config: the pushed commit's config; run: its run; root: its checkout (or folder).
        suites: the suites that notify (`worker.evals.config.notify_key.NotifyOptions.selects`).
        evals: the push's response cache and clocks, for re-scoring.

    Returns:
        The verdict; never raises for a comparison that fails (undecided, with the error).
    """
    if previous.missing:
        return PushVerdict("undecided", previous.sha, reason=(
            f"{previous.missing} stored result(s) of the previous push {previous.sha[:7]} are "
            "gone or unreadable, so it cannot be compared"))
    if previous_config is None:
        return PushVerdict("undecided", previous.sha, reason=(
            f"the previous push {previous.sha[:7]} has no valid config to take the rules from"))
    head = restrict(config, suites)
    base = restrict(previous_config, suites)
    rules, notes = merge_rules(base, head)
    gated, _ = with_base_settings(base, head)
    head_run = RunResult(run.sha, {n: r for n, r in run.suites.items() if n in suites},
                         stopped=run.stopped)
    base_run = RunResult(previous.sha, {n: r for n, r in previous.suites.items() if n in suites})
    # as a pull request's head: an example the provider left unanswered where the previous
    # push had an answer counts as failed (worker/pipeline/trees.py `_verdict`)
    head_run, counted = count_as_failed(head_run, base_run,
                                        Attribution(gated, base, base_run, head_run),
                                        gated.settings.max_provider_error_rate)
    notes = [*notes, *(n for n in (unanswered_note(counted),) if n)]
    try:
        async with asyncio.timeout(COMPARE_TIMEOUT_S):
            compared = await compare_comparable(rules, root, head_run, base_run, notes, evals)
        report = finish_report(compared, gated, base, rules=rules)
    except Exception as err:  # noqa: BLE001 - fail closed: an error is an undecided push
        text = str(err) or type(err).__name__
        return PushVerdict("undecided", previous.sha,
                           reason=f"the comparison failed ({type(err).__name__}: {text})")
    return verdict_of(report, previous.sha)


def verdict_of(report: GateReport, previous_sha: str) -> PushVerdict:
    """Return the `PushVerdict` of a finished report (the check conclusion it would get)."""
    if report.config_error is not None:
        return PushVerdict("undecided", previous_sha, reason=str(report.config_error))
    if report.conclusion == "failure":
        failing = tuple(o for o in report.outcomes
                        if o.status in ("fail", "regression") or o.effect == "failure")
        return PushVerdict("regressed", previous_sha, failing,
                           "" if failing else report.headline or "the gate fails")
    if report.conclusion in ("success", "neutral"):
        return PushVerdict("passed", previous_sha)
    open_rules = tuple(o for o in report.outcomes
                       if o.effect == "undecided" or o.status == "skipped")
    return PushVerdict("undecided", previous_sha, open_rules,
                       report.headline or f"the gate's conclusion is {report.conclusion}")
