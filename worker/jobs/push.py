"""arq job of a push to the default branch: run the suites at the pushed commit and store them.

The pushed commit is on the repository's default branch, so it is the repository's own code:
it runs like a pull request's base (same sandbox, same engine and response cache). Each suite's
result is stored as a baseline (worker/baselines/store.py) and the commit becomes the branch's
latest baseline, kept without expiry until a later push replaces it. Suites already stored for that
commit (by an earlier pull request's base run, or a retry of this job) are not run again. Each
config's suites are also recorded as the default branch's run at that commit in the quality
history (worker/baselines/timeline.py; a failure there is logged, never the job's).

The job creates no check run: a check on the default branch's commits would show a verdict
without a comparison, and branch protection only needs ``llmgate`` on pull requests. What it
did is logged and returned as the job result. A configuration error at the pushed commit
stores nothing (the next pull request reports it). With several configs (worker/pipeline/plan.py),
each config's suites are stored under its own name (`worker.pipeline.plan.baseline_namespace`),
each with its own latest pointer, as the pull requests' base runs look them up.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from worker.baselines.reuse import Origin, StoredBaselines
from worker.baselines.store import BaselineStore
from worker.baselines.timeline import record_push
from worker.contract import PushPayload
from worker.errors import ConfigError
from worker.evals.context import EvalContext
from worker.gate.services import Services
from worker.pipeline.plan import baseline_namespace, folder_root, plan_configs
from worker.pipeline.trees import read_config
from worker.runtime.metrics import record_call

log = logging.getLogger("llmgate.worker")


async def store_baseline(ctx: dict[str, Any], payload: PushPayload) -> dict[str, str]:
    """Run the suites at ``payload["sha"]`` and store them as ``payload["branch"]``'s baseline.

    Returns:
        ``{"status": ...}``: ``stored`` (with ``sha`` and ``base_source``, the stored and
        reused suites), ``no_config`` or ``config_error`` (with ``reason``). With configs in
        folders: ``stored`` when any config stored, else the first config's status, and
        ``configs``: ``<path>=<status>`` of each, comma-separated.

    Raises:
        GitError: fetching or checking out failed (arq retries the job).
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    repo, sha = payload["repo"], payload["sha"]
    key = f"{repo['owner']}/{repo['name']}"
    token = await gh.installation_token()
    services.redactor.add(token)
    async with services.checkouts.worktree(key, repo["clone_url"], sha, token) as root:
        plan = plan_configs(root, None)
        if not plan.several:
            return await _store_config(services, payload, key, root)
        results = {}
        for config in plan.configs:
            folder = folder_root(root, config.folder)
            results[config.path] = await _store_config(
                services, payload, baseline_namespace(key, config.folder), folder) \
                if folder is not None and config.error is None else \
                {"status": "config_error", "sha": sha, "reason": str(config.error)}
    first = next(iter(results.values()))
    status = "stored" if any(r["status"] == "stored" for r in results.values()) \
        else first["status"]
    return {"status": status, "sha": sha,
            "configs": ",".join(f"{path}={r['status']}" for path, r in results.items())}


async def _store_config(services: Services, payload: PushPayload, namespace: str,
                        root: Path) -> dict[str, str]:
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
        evals = EvalContext(redis=services.cache, namespace=f"{repo['owner']}/{repo['name']}",
                            on_call=record_call)
        started_s = time.monotonic()
        base = await runner(config, root, sha, evals)
    except ConfigError as err:
        reason = services.redactor.redact(str(err))
        log.info("push of %s@%s: configuration error, no baseline: %s", namespace, sha[:7],
                 reason)
        return {"status": "config_error", "sha": sha, "reason": reason}
    stored = [runner.keys[name] for name in base.result.suites]
    moved = await store.mark_latest(namespace, branch, sha, stored, payload["pushed_at"])
    await record_push(services.redis, services.baselines, repo=f"{repo['owner']}/{repo['name']}",
                      namespace=namespace, sha=sha, branch=branch,
                      pushed_at=payload["pushed_at"], run=base.result,
                      base_source=base.source or "", duration_s=time.monotonic() - started_s)
    log.info("push of %s@%s: %s%s", namespace, sha[:7], base.source,
             "" if moved else " (a later push is already the latest)")
    return {"status": "stored", "sha": sha, "base_source": base.source or ""}
