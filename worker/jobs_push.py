"""arq job of a push to the default branch: run the suites at the pushed commit and store them.

The pushed commit is on the repository's default branch, so it is the repository's own code:
it runs like a pull request's base (same sandbox, same engine and response cache). Each suite's
result is stored as a baseline (worker/baselines.py) and the commit becomes the branch's latest
baseline, kept without expiry until a later push replaces it. Suites already stored for that
commit (by an earlier pull request's base run, or a retry of this job) are not run again.

The job creates no check run: a check on the default branch's commits would show a verdict
without a comparison, and branch protection only needs ``llmgate`` on pull requests. What it
did is logged and returned as the job result. A configuration error at the pushed commit
stores nothing (the next pull request reports it).
"""

from __future__ import annotations

import logging
from typing import Any

from worker.baseline_runs import Origin, StoredBaselines
from worker.baselines import BaselineSettings, BaselineStore
from worker.contract import PushPayload
from worker.evals.context import EvalContext
from worker.evals.types import ConfigError
from worker.metrics import record_call
from worker.pipeline import read_config
from worker.services import Services

log = logging.getLogger("llmgate.worker")


async def store_baseline(ctx: dict[str, Any], payload: PushPayload) -> dict[str, str]:
    """Run the suites at ``payload["sha"]`` and store them as ``payload["branch"]``'s baseline.

    Returns:
        ``{"status": ...}``: ``stored`` (with ``sha`` and ``base_source``, the stored and
        reused suites), ``no_config`` or ``config_error`` (with ``reason``).

    Raises:
        GitError: fetching or checking out failed (arq retries the job).
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    repo, sha, branch = payload["repo"], payload["sha"], payload["branch"]
    key = f"{repo['owner']}/{repo['name']}"
    token = await gh.installation_token()
    services.redactor.add(token)
    store = BaselineStore(services.redis, BaselineSettings.from_env())
    runner = StoredBaselines(store, key, Origin("push", branch=branch))
    async with services.checkouts.worktree(key, repo["clone_url"], sha, token) as root:
        try:
            config = read_config(root)
            if config is None:
                log.info("push of %s@%s: no config, no baseline", key, sha[:7])
                return {"status": "no_config", "sha": sha}
            evals = EvalContext(redis=services.redis, namespace=key, on_call=record_call)
            base = await runner(config, root, sha, evals)
        except ConfigError as err:
            reason = services.redactor.redact(str(err))
            log.info("push of %s@%s: configuration error, no baseline: %s", key, sha[:7], reason)
            return {"status": "config_error", "sha": sha, "reason": reason}
    stored = [runner.keys[name] for name in base.result.suites]
    moved = await store.mark_latest(key, branch, sha, stored, payload["pushed_at"])
    log.info("push of %s@%s: %s%s", key, sha[:7], base.source,
             "" if moved else " (a later push is already the latest)")
    return {"status": "stored", "sha": sha, "base_source": base.source or ""}
