"""Check out base and head of one gate request and run every config's suites on both trees.

A head that contains the base branch's tip is compared with the tip. A head behind the tip
(it forked from an older commit) is gated as merging it would land: the head merged into the
tip (a merge commit made in the worker's mirror, `worker.checkout.Checkouts.merge_result`)
against the tip, so a pull request cannot pass by breaking what the branch fixed after it
forked (issue 30). A head that conflicts with the tip cannot merge; it is compared itself with
the merge base (what "Files changed" shows), unless the tip says ``settings.base: tip`` or its
llmgate configs differ from the merge base's (`worker.pipeline.plan.tip_reason`: the rules and
the evaluation contract are always the base branch's as it is now, never those of the fork
point a pull request chose). Commits without a common history fall back to the tip (noted). The
changed files (merge base to head) decide which suites run (``on_paths``, read from base).
The base side reuses stored baselines of exactly that commit (worker/baselines/reuse.py), kept
apart per config folder. Which configs run is `worker.pipeline.plan.plan_configs`'s decision (read
from both trees); each runs as worker/pipeline/multi.py says.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from worker.baselines import BaselineStore, Origin, StoredBaselines
from worker.checkout import GitError
from worker.errors import ExecutionError
from worker.evals.context import CacheContext, CallEvent, EvalContext, GateSide, Observers
from worker.evals.types import GateReport
from worker.gate.calibration import calibration_history
from worker.gate.request import GateRequest
from worker.gate.services import Services
from worker.gate.shards import RedisShards
from worker.github import GitHubClient
from worker.pipeline import (
    CONFLICT_UNDECIDED,
    MERGED_REASON,
    BaseRunner,
    GateProgress,
    MultiReport,
    base_mode,
    baseline_namespace,
    conflict_note,
    gate_plan,
    merged_note,
    plan_configs,
    tip_reason,
    unconfigured_tree,
)
from worker.runtime import record_call

log = logging.getLogger("llmgate.worker")


async def evaluate(services: Services, gh: GitHubClient, request: GateRequest) -> GateReport:
    """Return `evaluate_configs`'s reports as one (`MultiReport.merged`): a repository with
    only a root config gets that config's report.

    Raises:
        ExecutionError: as `evaluate_configs`.
    """
    return (await evaluate_configs(services, gh, request)).merged()


async def evaluate_configs(services: Services, gh: GitHubClient, request: GateRequest,
                           progress: GateProgress | None = None) -> MultiReport:
    """Check out ``request``'s head and its base commit and gate every config on them.

    The installation token is given to git per command and added to the redactor. ``progress``
    is told each side's plan and every call (worker/pipeline/progress.py), when given.

    Returns:
        One report per config (a single one for a repository with only a root config); each
        report's ``base_sha`` is the base commit compared (the tip, or the merge base for a
        head that conflicts with it) and its ``base_source`` says whether stored baselines
        were reused.

    Raises:
        ExecutionError: git failed, or a SHA, URL or repository name was refused.
    """
    repo = request.repo
    token = await gh.installation_token()
    services.redactor.add(token)
    key = f"{repo['owner']}/{repo['name']}"
    url = repo["clone_url"]
    with _git_errors():
        merge_base, note = await _merge_base(services, key, url, request, token)
        async with AsyncExitStack() as stack:
            trees = await _check_out(stack, services, request, key, url, token, merge_base,
                                     note)
            changed = await services.checkouts.changed_files(key, url, merge_base,
                                                             request.head_sha, token)
            evals = await _context(services, gh, request, trees, progress)
            multi = await gate_plan(plan_configs(trees.head_root, trees.base_root),
                                    trees.head_root, trees.base_root, head_sha=trees.head_sha,
                                    base_sha=trees.base_sha, evals=evals, changed_files=changed,
                                    base_runner_for=_runners(services, key, request, trees.role))
    multi = _compared_with(multi, trees.base_sha)
    note = trees.note
    if trees.merged:
        note = merged_note(request.base_sha, request.head_sha, trees.merged)
    elif trees.conflicted:
        multi = multi.undecided_unless_failed(CONFLICT_UNDECIDED)
    return _noted(multi, note)


@dataclass(frozen=True)
class _Trees:
    """The checked-out trees one gate request compares (`_check_out`).

    Attributes:
        head_root, head_sha: the head's checkout and commit: the head merged into the base
            branch's tip when it is behind the tip, else the head itself.
        base_root, base_sha: the base compared: the tip, or the merge base.
        merged: the SHA of the head merged into the tip (None: not merged).
        conflicted: the head is behind the tip and conflicts with it.
        role: which base is compared, for the stored baselines' origin ("": the tip the head
            contains).
        note: which base was compared, for the report ("": as it is).
    """

    head_root: Path
    head_sha: str
    base_root: Path
    base_sha: str
    merged: str | None
    conflicted: bool
    role: str
    note: str


async def _check_out(stack: AsyncExitStack, services: Services, request: GateRequest,
                     key: str, url: str, token: str, merge_base: str, note: str) -> _Trees:
    """Check out the trees ``request`` compares (the module docstring), each removed when
    ``stack`` closes (``key``: ``owner/name``; ``note``: the merge base's, `_merge_base`).

    Raises:
        GitError: git failed.
    """
    tip_root = await stack.enter_async_context(
        services.checkouts.worktree(key, url, request.base_sha, token))
    merged = None  # the head merged into the base branch's tip, when it is behind it
    conflicted = False
    if merge_base != request.base_sha and not note and base_mode(tip_root) != "tip":
        merged = await services.checkouts.merge_result(key, url, request.base_sha,
                                                       request.head_sha, token)
        conflicted = merged is None
        if conflicted:
            note = conflict_note(request.base_sha)
    head_sha = merged or request.head_sha
    head_root = await stack.enter_async_context(
        services.checkouts.worktree(key, url, head_sha, token))
    base_sha, base_root = request.base_sha, tip_root
    why_tip: str | None = MERGED_REASON
    if merged is None and merge_base != request.base_sha:
        merge_root = await stack.enter_async_context(
            services.checkouts.worktree(key, url, merge_base, token))
        why_tip = tip_reason(merge_root, tip_root)
        if why_tip is None:  # the merge base
            base_sha, base_root = merge_base, merge_root
    role = "" if merge_base == request.base_sha else "the merge base" \
        if base_sha == merge_base else f"the base branch's tip, {why_tip}"
    return _Trees(head_root, head_sha, base_root, base_sha, merged, conflicted, role, note)


async def _context(services: Services, gh: GitHubClient, request: GateRequest, trees: _Trees,
                   progress: GateProgress | None) -> EvalContext:
    """The evaluation's context: the response cache per repository, the metrics (and
    ``progress``) of every call, the calibration history and the shards of a large suite."""
    repo = request.repo
    key = f"{repo['owner']}/{repo['name']}"
    evals = EvalContext(
        cache=CacheContext(services.cache, key,  # cache per repository
                           "off" if request.no_cache else "use"),
        observers=Observers(on_call=_observed(progress)),  # metrics (and progress)
        history=await calibration_history(services.redis, key),
        gate=GateSide(shards=RedisShards(  # a large suite over many workers
            services.redis, services.shards, repo,
            gh.installation_id,
            # a merge exists in this worker's mirror only
            {trees.base_root: trees.base_sha} if trees.merged else
            {trees.head_root: trees.head_sha, trees.base_root: trees.base_sha},
            "off" if request.no_cache else "use",
            services=services)))
    if progress is not None:
        evals.observers = replace(evals.observers, on_plan=progress.plan)
    return evals


def _runners(services: Services, key: str, request: GateRequest,
             role: str) -> Callable[[str], BaseRunner]:
    """The base runner of each config folder: stored baselines of the base commit, kept apart
    per folder (worker/baselines/reuse.py), reused unless the request says ``no_cache``."""
    store = BaselineStore(services.redis, services.baselines)
    origin = Origin("pull_request", pr_number=request.pr_number, role=role)

    def runner(folder: str) -> BaseRunner:
        return StoredBaselines(store, baseline_namespace(key, folder), origin,
                               reuse=not request.no_cache)

    return runner


def _compared_with(multi: MultiReport, base_sha: str) -> MultiReport:
    """Return ``multi`` with every config's report naming ``base_sha`` the base compared."""
    configs = []
    for config in multi.configs:
        report = replace(config.report, base_sha=base_sha)
        configs.append(replace(config, report=report))
    return replace(multi, configs=tuple(configs))


def _noted(multi: MultiReport, note: str) -> MultiReport:
    """Return ``multi`` with ``note`` (which base was compared) first ("": as it is)."""
    if not note:
        return multi
    if multi.several:
        return multi.with_notes([note])
    only = multi.configs[0]
    return replace(multi, configs=(replace(only, report=replace(
        only.report, notes=(note, *only.report.notes))),))


async def unconfigured(services: Services, gh: GitHubClient, request: GateRequest, *,
                       head_runs: bool) -> bool:
    """Whether neither the base branch's tip, the merge base nor the head holds an llmgate
    config (`worker.pipeline.plan.nothing_to_gate`); only files are read. The tip is read first: a
    pull request forked before llmgate was adopted is gated all the same.

    Args:
        head_runs: the head may run (trusted, or approved). An untrusted head waiting for
            approval is not even fetched: then the base branch's tip alone decides (no config
            there: nothing to gate until a config is merged, or a writer approves the head).

    Raises:
        ExecutionError: git failed, or a SHA, URL or repository name was refused.
    """
    repo = request.repo
    token = await gh.installation_token()
    services.redactor.add(token)
    key, url = f"{repo['owner']}/{repo['name']}", repo["clone_url"]
    with _git_errors():
        async with services.checkouts.worktree(key, url, request.base_sha, token) as tip_root:
            if not unconfigured_tree(tip_root):  # the usual case: no other checkout
                return False
        if not head_runs:
            return True
        base = (await _merge_base(services, key, url, request, token))[0]
        if base != request.base_sha:
            async with services.checkouts.worktree(key, url, base, token) as base_root:
                if not unconfigured_tree(base_root):
                    return False
        async with services.checkouts.worktree(key, url, request.head_sha, token) as head_root:
            return unconfigured_tree(head_root)


def _observed(progress: GateProgress | None) -> Callable[[CallEvent], None]:
    """The run's ``on_call``: the worker's metrics, and ``progress`` when given."""
    if progress is None:
        return record_call
    counts = progress

    def both(event: CallEvent) -> None:
        record_call(event)  # provider calls, cache hits, USD
        counts.call(event)

    return both


@contextmanager
def _git_errors() -> Iterator[None]:
    """Raise git's failures and refused SHAs, URLs or names as `ExecutionError`."""
    try:
        yield
    except GitError as err:
        raise ExecutionError(f"git failed: {err}") from err
    except ValueError as err:  # a SHA, URL or repository name git must not be given
        raise ExecutionError(str(err)) from err


async def _merge_base(services: Services, key: str, url: str, request: GateRequest,
                      token: str) -> tuple[str, str]:
    """Return the merge base of the request's base and head, and a note ("" normally).

    Commits that share no history are compared with the base as given (noted).

    Raises:
        GitError: fetching failed.
    """
    try:
        found = await services.checkouts.merge_base(key, url, request.base_sha,
                                                    request.head_sha, token)
    except GitError as err:
        if err.command[:2] != ["git", "merge-base"]:  # a fetch failed: not about history
            raise
        return request.base_sha, (f"{request.base_sha[:7]} and {request.head_sha[:7]} share "
                                  "no history: compared with the base branch's tip")
    return found, ""

