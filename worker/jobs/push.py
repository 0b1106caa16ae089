"""arq job of a push to the default branch: run the suites at the pushed commit and store them.

The pushed commit is on the repository's default branch, so it is the repository's own code:
it runs like a pull request's base (same sandbox, same engine and response cache). Each suite's
result is stored as a baseline (worker/baselines/store.py) and the commit becomes the branch's
latest baseline, kept without expiry until a later push replaces it. Suites already stored for that
commit (by an earlier pull request's base run, or a retry of this job) are not run again. Each
config's suites are also recorded as the default branch's run at that commit in the quality
history (worker/baselines/timeline.py; a failure there is logged, never the job's).

When the worker has notification webhooks (``LLMGATE_NOTIFY_*``) and the pushed config opts in
(``notify:``), the stored run is then compared with the previous push's by the previous
commit's gate rules (worker/notify/); a regression, or a comparison that cannot be decided, is
enqueued as one delivery job per webhook (worker/jobs/notify.py). Deliveries never hold the job
up, and no error of theirs fails it (it is logged and returned as ``notify``).

When the worker stores reports (``LLMGATE_PUBLIC_URL``, as for a gate's Details link), each
config's stored run is also rendered as the HTML report ``llmgate run`` writes for a run without
a base (only absolute rules apply), redacted as a gate's, stored for ``LLMGATE_REPORT_TTL_S``
with its repository (worker/report/store.py) and linked from the run's history record, so the
dashboard's run page offers it. A report that cannot be made or stored is logged (WARNING, with
its text) and costs only the link: the baseline is stored all the same.

The job creates no check run: a check on the default branch's commits would show a verdict
without a comparison, and branch protection only needs ``llmgate`` on pull requests. What it
did is logged and returned as the job result. A configuration error at the pushed commit
stores nothing (the next pull request reports it). With several configs (worker/pipeline/plan.py),
each config's suites are stored under its own name (`worker.pipeline.plan.baseline_namespace`),
each with its own latest pointer, as the pull requests' base runs look them up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from arq.connections import ArqRedis

from worker.baselines import BaselineStore, Origin, StoredBaselines, record_push
from worker.contract import PushPayload
from worker.errors import ConfigError
from worker.evals.context import CacheContext, EvalContext, Observers
from worker.evals.types import CONFIG_FILENAME, Config
from worker.gate import Services
from worker.notify import (
    CTX_NOTIFY,
    NotifySettings,
    OpenTree,
    PreviousRun,
    PushedConfig,
    notify_push,
    opts_in,
    previous_run,
)
from worker.pipeline import (
    ConfigReport,
    MultiReport,
    baseline_namespace,
    folder_root,
    plan_configs,
    read_config,
    verdict_without_base,
)
from worker.report import ReportStore, check_output, redact_report, render_html
from worker.runtime import record_call
from worker.security import Redactor

log = logging.getLogger("llmgate.worker")

#: Bound on making and storing one config's push report, seconds (a slow Redis must not hold
#: the push up; past it the report is left out, logged).
REPORT_TIMEOUT_S = 30.0


async def store_baseline(ctx: dict[str, Any], payload: PushPayload) -> dict[str, str]:
    """Run the suites at ``payload["sha"]`` and store them as ``payload["branch"]``'s baseline.

    Returns:
        ``{"status": ...}``: ``stored`` (with ``sha`` and ``base_source``, the stored and
        reused suites, and ``notify`` when webhooks are set: `notify_push`'s status, or
        ``not_latest`` when a later push is already the latest), ``no_config``
        or ``config_error`` (with ``reason``). With configs in folders: ``stored`` when any
        config stored, else the first config's status, and ``configs``: ``<path>=<status>``
        of each, comma-separated.

    Raises:
        GitError: fetching or checking out failed (arq retries the job).
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    repo, sha = payload["repo"], payload["sha"]
    key = f"{repo['owner']}/{repo['name']}"
    token = await gh.installation_token()
    services.redactor.add(token)
    notify: NotifySettings = ctx.get(CTX_NOTIFY) or NotifySettings()

    def open_tree(at_sha: str) -> AbstractAsyncContextManager[Path]:
        return services.checkouts.worktree(key, repo["clone_url"], at_sha, token)

    async with open_tree(sha) as root:
        plan = plan_configs(root, None)
        if not plan.several:
            return await _store_config(services, payload, key, root, _Notify(notify, open_tree))
        results = {}
        for config in plan.configs:
            folder = folder_root(root, config.folder)
            results[config.path] = await _store_config(
                services, payload, baseline_namespace(key, config.folder), folder,
                _Notify(notify, open_tree, config.folder)) \
                if folder is not None and config.error is None else \
                {"status": "config_error", "sha": sha, "reason": str(config.error)}
    first = next(iter(results.values()))
    status = "stored" if any(r["status"] == "stored" for r in results.values()) \
        else first["status"]
    return {"status": status, "sha": sha,
            "configs": ",".join(f"{path}={r['status']}" for path, r in results.items())}


@dataclass(frozen=True)
class _Notify:
    """The worker's webhooks, how to check out another commit, and the config's folder."""

    settings: NotifySettings
    open_tree: OpenTree
    folder: str = ""


async def _store_config(services: Services, payload: PushPayload, namespace: str,
                        root: Path, notify: _Notify) -> dict[str, str]:
    """Run and store the suites of the config at ``root`` (a checkout, or a config's folder)
    under ``namespace`` and mark them the branch's latest (see `store_baseline`)."""
    sha, branch = payload["sha"], payload["branch"]
    store = BaselineStore(services.redis, services.baselines)
    runner = StoredBaselines(store, namespace, Origin("push", branch=branch))
    repo = payload["repo"]
    try:
        config = read_config(root)
        if config is None or not config.suites:
            log.info("push of %s@%s: no config, no baseline", namespace, sha[:7])
            return {"status": "no_config", "sha": sha}
        evals = EvalContext(cache=CacheContext(services.cache, f"{repo['owner']}/{repo['name']}"),
                            observers=Observers(on_call=record_call))
        started_s = time.monotonic()
        base = await runner(config, root, sha, evals)
    except ConfigError as err:
        reason = services.redactor.redact(str(err))
        log.info("push of %s@%s: configuration error, no baseline: %s", namespace, sha[:7],
                 reason)
        return {"status": "config_error", "sha": sha, "reason": reason}
    stored = [runner.keys[name] for name in base.result.suites]
    previous = await _previous(store, namespace, branch, notify.settings, root, config)
    moved = await store.mark_latest(namespace, branch, sha, stored, payload["pushed_at"])
    pushed = PushedConfig(f"{repo['owner']}/{repo['name']}", repo["clone_url"], notify.folder,
                          branch, sha, root, config, base.result, services.redactor.redact)
    report_url = await _push_report(services, pushed, evals)
    pushed = replace(pushed, report_url=report_url)  # the notice links it
    await record_push(services.redis, services.baselines, repo=f"{repo['owner']}/{repo['name']}",
                      namespace=namespace, sha=sha, branch=branch,
                      pushed_at=payload["pushed_at"], run=base.result,
                      base_source=base.source or "", duration_s=time.monotonic() - started_s,
                      report_url=report_url)
    log.info("push of %s@%s: %s%s", namespace, sha[:7], base.source,
             "" if moved else " (a later push is already the latest)")
    result = {"status": "stored", "sha": sha, "base_source": base.source or ""}
    if notify.settings.channels:
        queue = ArqRedis(connection_pool=services.redis.connection_pool)
        result["notify"] = await notify_push(queue, notify.settings, pushed, previous,
                                             notify.open_tree, evals) \
            if moved else "not_latest"  # the later push compares, not this one
    return result


async def _previous(store: BaselineStore, namespace: str, branch: str,
                    settings: NotifySettings, root: Path, config: Config) -> PreviousRun | None:
    """The branch's latest push before this one (read before `mark_latest` gives its records
    back their expiry), when the worker has webhooks and the config opts in; else None."""
    if not settings.channels or not opts_in(root, config):
        return None
    return await previous_run(store, namespace, branch)


async def _push_report(services: Services, pushed: PushedConfig,
                       evals: EvalContext) -> str:
    """Store the HTML report of a push's stored run and return its URL (module docstring);
    "" when the worker stores no reports or it failed (logged as a WARNING with the error's
    text; the push's baseline is unaffected).

    The report is the one ``llmgate run`` renders for a run without a base: the run compared
    with nothing under its own config's rules (`worker.pipeline.trees.verdict_without_base`,
    as `gate_trees` without a base), rendered by `render_html`, redacted
    (the worker's secrets, what a ``pii`` assertion found) as a gate's report is.
    """
    if services.reports is None:
        return ""
    try:
        async with asyncio.timeout(REPORT_TIMEOUT_S):
            return await _store_report(services.reports, services.redactor, pushed,
                                       evals)
    except Exception as err:  # noqa: BLE001 - a report is a side effect: never the push's
        text = services.redactor.redact(str(err) or type(err).__name__)
        log.warning("push of %s@%s: report not stored (%s): %s", pushed.repository,
                    pushed.sha[:7], type(err).__name__, text)
        return ""


async def _store_report(reports: ReportStore, redactor: Redactor, pushed: PushedConfig,
                        evals: EvalContext) -> str:
    """Make the report of `_push_report`, redact it with ``redactor`` and store it in
    ``reports``; return its URL.

    Raises:
        Exception: whatever making or storing it raised (`_push_report` logs it).
    """
    note = (f"the push of {pushed.sha[:7]} to {pushed.branch}: no base, only absolute rules "
            "(min) apply")
    report = await verdict_without_base(pushed.config, pushed.root, pushed.run, [note], evals)
    path = f"{pushed.folder}/{CONFIG_FILENAME}" if pushed.folder else CONFIG_FILENAME
    multi = redact_report(MultiReport((ConfigReport(path, pushed.folder, report),)), redactor)
    return await reports.store(check_output(multi, pushed.sha),
                               lambda: render_html(multi, pushed.sha, ""), pushed.repository)
