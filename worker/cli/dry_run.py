"""``llmgate run --dry-run``: the plan of a local gate and its estimate, nothing sent (issue 33).

For each config the run would gate (worker/pipeline/plan.py), the suites that would run at head
and at base (``--suite``/``--smoke``/``--samples`` applied, ``on_paths`` as the run applies it:
worker/pipeline/on_paths.py) with the provider calls each expects, and each side's estimate:
calls, cached calls, tokens and USD (worker/evals/run/estimate.py, the estimate the run itself
prints before its first call). The estimate reads the response cache and counts tokens; it sends
no model call and runs no command target (a command target's examples cost no call and are
listed as commands). An endpoint every call to which the run would refuse before sending it (an
unset ``api_key_env`` or provider key, an ``api_base`` the worker refuses: worker/evals/llm/
client.py `refusal`) is named; at head it is the dry run's configuration error, as it is the
run's (worker/pipeline/preflight.py).

``--format json`` prints the same plan as one JSON document (`DryRun.document`).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.context import EvalContext
from worker.evals.llm import refusal
from worker.evals.llm_types import Endpoint
from worker.evals.run import ModelUse, RunState, describe_estimate, estimate_configs
from worker.evals.types import CONFIG_FILENAME, Config, ModelTarget
from worker.pipeline import (
    Plan,
    apply_overrides,
    check_suites,
    endpoints_of,
    folder_root,
    read_config,
    restrict,
    select_suites,
)


@dataclass
class DryRun:
    """What a dry run found: the lines to print and the first head config error.

    Attributes:
        lines: the plan, one line each (stdout).
        config_error: the first configuration error at head (exit 2), or None.
        calls, cached_calls: provider calls expected over every side and config.
        cost_usd: their expected USD, or None when a model has no known price.
        configs: the plan as JSON values, one per config (`document`).
    """

    lines: list[str] = field(default_factory=list)
    config_error: ConfigError | None = None
    calls: int = 0
    cached_calls: int = 0
    cost_usd: float | None = 0.0
    configs: list[dict[str, Any]] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        """The plan as a JSON value: ``{"dry_run": true, "configs": [{"path", "errors",
        "skipped", "sides": [{"side", "sha", "suites": [{"name", "calls" | "command"}],
        "calls", "cached_calls", "tokens_in", "tokens_out", "cost_usd", "unpriced",
        "refused"}]}], "calls", "cached_calls", "cost_usd", "config_error"}``; USD and token
        counts are estimates, ``cost_usd`` null when a model has no known price."""
        error = None if self.config_error is None else str(self.config_error)
        return {"dry_run": True, "configs": self.configs, "calls": self.calls,
                "cached_calls": self.cached_calls, "cost_usd": self.cost_usd,
                "config_error": error}


async def dry_run(plan: Plan | None, config_path: str, head: tuple[Path, str],
                  base: tuple[Path | None, str], changed: Sequence[str] | None,
                  evals: EvalContext) -> DryRun:
    """Plan the gate of ``plan``'s configs (None: the one config ``config_path``) and estimate it.

    Args:
        plan: the configs to gate, or None for ``config_path`` alone (repository-relative).
        head, base: (checkout, SHA) of each side; base's checkout None without ``--base``;
            a SHA "" for the working tree.
        changed: the changed files (repository-relative) ``on_paths`` is applied to; None to
            run every suite.
        evals: the run's context (its response cache and ``--suite``/``--smoke``/``--samples``).

    Returns:
        The plan's lines and totals; a head config that cannot be read is its config error.
    """
    found = DryRun(["dry run: nothing is sent and no command target runs"])
    entries = [(c.path, c.folder) for c in plan.configs] if plan is not None \
        else [(config_path, "")]
    for path, folder in entries:
        await _config(found, path, folder, head, base, changed, evals)
    cost = "unknown" if found.cost_usd is None else f"${found.cost_usd:.4f}"
    found.lines.append(f"total: {found.calls} provider calls ({found.cached_calls} cached), "
                       f"{cost}")
    return found


async def _config(found: DryRun, path: str, folder: str, head: tuple[Path, str],
                  base: tuple[Path | None, str], changed: Sequence[str] | None,
                  evals: EvalContext) -> None:
    """Add one config's lines and estimate to ``found``."""
    head_dir = folder_root(head[0], folder) if folder else head[0]
    base_dir = (folder_root(base[0], folder) if folder else base[0]) if base[0] else None
    inner = CONFIG_FILENAME if folder else path
    rel = None if changed is None else [posixpath.relpath(p, folder or ".") for p in changed]
    found.lines.append(f"{path}:")
    record: dict[str, Any] = {"path": path, "errors": [], "skipped": [], "sides": []}
    found.configs.append(record)
    try:
        head_config = read_config(head_dir, inner) if head_dir is not None else None
        if head_config is None:
            raise ConfigError(path, None, f"no {path} at head")
        check_suites(head_config, evals.overrides)
    except ConfigError as err:
        found.config_error = found.config_error or err
        found.lines.append(f"  configuration error: {err}")
        record["errors"].append(f"configuration error: {err}")
        return
    try:
        base_config = read_config(base_dir, inner) if base_dir is not None else None
    except ConfigError as err:
        found.lines.append(f"  base config not usable: {err}")
        record["errors"].append(f"base config not usable: {err}")
        base_config = None
    head_config = apply_overrides(head_config, evals.overrides)
    base_config = apply_overrides(base_config, evals.overrides) if base_config else None
    if rel is not None:
        selection = select_suites(head_config, base_config, rel)
        found.lines.extend(f"  {reason}" for reason in selection.skipped.values())
        record["skipped"].extend(selection.skipped.values())
        head_config = restrict(head_config, selection.run)
        base_config = restrict(base_config, selection.run) if base_config else None
    sides = [("head", head_config, head_dir, head[1])]
    if base_config is not None and base_dir is not None:
        sides.insert(0, ("base", base_config, base_dir, base[1]))
    shared = endpoints_of(base_config) if base_config is not None else set()
    for side, config, root, sha in sides:
        await _side(found, record, (side, shared, folder), config, root, sha,
                    base_dir is not None, evals)


async def _side(found: DryRun, record: dict[str, Any],
                which: tuple[str, set[tuple[str, str | None, str | None]], str], config: Config,
                root: Path | None, sha: str, with_base: bool, evals: EvalContext) -> None:
    """Add one side's suites and estimate to ``found`` and ``record`` (its config's JSON
    value); a file it cannot read or an endpoint refused is its line. ``which`` is the side's
    name, the endpoints base's config names too and the config's folder (`_refused`)."""
    side = which[0]
    assert root is not None  # noqa: S101  # the caller passes only sides with a checkout
    ctx = evals.for_side(side, None)
    try:
        planned = await estimate_configs([config], root, RunState(config.settings, ctx).caller,
                                         with_base)
    except ConfigError as err:
        found.lines.append(f"  {side}: cannot estimate: {err}")
        record["errors"].append(f"{side}: cannot estimate: {err}")
        if side == "head":
            found.config_error = found.config_error or err
        return
    calls = dict(planned.suites)
    suites: list[dict[str, Any]] = []
    for suite in config.suites:
        model = isinstance(suite.target, ModelTarget)
        what = f"{calls.get(suite.name, 0)} calls" if model \
            else "a command target (no provider call)"
        found.lines.append(f"  {side} suite {suite.name}: {what}")
        suites.append({"name": suite.name, "calls": calls.get(suite.name, 0)} if model
                      else {"name": suite.name, "command": True})
    unpriced = tuple(use.model for use in planned.unpriced)
    found.lines.append(f"  {side} {describe_estimate(sha, planned.cost, unpriced)}")
    refused = _refused(found, which, planned.endpoints)
    cost = planned.cost
    record["sides"].append({"side": side, "sha": sha or None, "suites": suites,
                            "calls": cost.calls, "cached_calls": cost.cached_calls,
                            "tokens_in": cost.tokens_in, "tokens_out": cost.tokens_out,
                            "cost_usd": cost.cost_usd, "unpriced": list(unpriced),
                            "refused": refused})
    found.calls += planned.cost.calls
    found.cached_calls += planned.cost.cached_calls
    found.cost_usd = None if found.cost_usd is None or planned.cost.cost_usd is None \
        else found.cost_usd + planned.cost.cost_usd


def _refused(found: DryRun, which: tuple[str, set[tuple[str, str | None, str | None]], str],
             endpoints: Sequence[tuple[Endpoint, ModelUse]]) -> list[str]:
    """Name each endpoint every call to which the run would refuse (`refusal`) and return the
    messages. At head, one base's config does not name too is the dry run's configuration
    error on its use's line, as it is the run's (worker/pipeline/preflight.py: an endpoint base
    uses too is the worker's setup, not the pull request's). The error names the file from the
    repository's root (a folder's config: ``folder/.llmgate.yml``)."""
    side, shared, folder = which
    messages: list[str] = []
    for endpoint, use in endpoints:
        refused = refusal(endpoint, os.environ)
        if refused is None:
            continue
        message = f"{use.what}: {refused.message}: no call to it can be made"
        messages.append(message)
        found.lines.append(f"  {side} refused: {message}")
        key = (endpoint.model, endpoint.api_base, endpoint.api_key_env)
        if side == "head" and key not in shared:
            path = posixpath.join(folder, use.path) if folder else use.path
            found.config_error = found.config_error or ConfigError(path, use.line, message)
    return messages
