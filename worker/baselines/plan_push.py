"""Store the suites of every config of a commit: what ``llmgate baseline push`` runs.

The configs are the ones ``llmgate run`` gates at that commit (worker/pipeline/plan.py
`plan_configs`: the root config, the folders its ``configs:`` lists, or every folder's config
found by discovery). Each config runs in its folder, as worker/pipeline/multi.py runs it, and
its suites are stored under the folder's namespace (`worker.pipeline.plan.baseline_namespace`),
the name a later run's base looks them up under (worker/cli/baseline.py `runner_for`, the App's
worker/gate/evaluate.py). Suites already stored for the commit are reused, not run again.

A config with a configuration error (its file and line, repository-relative) or whose run
could not happen stores nothing and is reported in its `ConfigPush`; the other configs are
still run and stored, so one broken folder does not cost the others their baselines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from worker.baselines.local import Records
from worker.baselines.reuse import Origin, StoredBaselines
from worker.errors import ConfigError, ExecutionError
from worker.evals.context import EvalContext
from worker.evals.types import Config
from worker.pipeline import (
    ConfigPlan,
    baseline_namespace,
    error_in_repository,
    folder_config_error,
    folder_root,
    plan_configs,
    read_config,
)


@dataclass(frozen=True)
class ConfigPush:
    """What a push did with one config of the commit.

    Attributes:
        path: the config file, repository-relative (``.llmgate.yml`` for the root config).
        namespace: the name its records are kept under (``<repo>`` or ``<repo>/<folder>``).
        stored: the suites whose result at the commit is now in the store (stored now, or
            already stored and reused), config order.
        not_stored: ``<suite>: <why>`` of each suite that ran but was not stored (stopped
            early, unscored examples, the store refused it).
        error: why nothing of this config was stored: a configuration error (repository-
            relative file and line) or an execution error; None when it ran.
    """

    path: str
    namespace: str
    stored: tuple[str, ...] = ()
    not_stored: tuple[str, ...] = ()
    error: ConfigError | ExecutionError | None = None


async def push_plan(store: Records, repo: str, root: Path, sha: str, origin: Origin,
                    evals: EvalContext | None) -> tuple[ConfigPush, ...]:
    """Run (or reuse) and store the suites of every config of the checkout ``root``.

    Args:
        store: where records go (a git store in a batch holds them until it commits).
        repo: the repository's name in the store (``owner/name`` or ``local``).
        root: a checkout of ``sha``.
        sha: the commit stored (40 or 64 hex digits).
        origin: who stores (``push`` of a branch).
        evals: the response cache and printer for model calls, or None.

    Returns:
        One `ConfigPush` per config, in plan order (root config first, when it has suites).

    Raises:
        ConfigError: the commit has no suite in any config (nothing to store).
        GitError, OSError: reading the checkout failed (not one config's fault).
    """
    plan = plan_configs(root, None)
    pushed = tuple([await _push_one(store, repo, root, config, sha, origin, evals)
                    for config in plan.configs])
    if all(p.error is None and not p.stored and not p.not_stored for p in pushed):
        raise ConfigError(plan.configs[0].path, None, f"no suites at {sha[:7]}: nothing to "
                          "store")
    return pushed


async def _push_one(store: Records, repo: str, root: Path, config: ConfigPlan, sha: str,
                    origin: Origin, evals: EvalContext | None) -> ConfigPush:
    """Run and store one config (see the module docstring); never raises its own errors."""
    namespace = baseline_namespace(repo, config.folder)
    try:
        folder, read = _read(root, config)
    except ConfigError as err:
        return ConfigPush(config.path, namespace, error=err)
    if read is None:
        return ConfigPush(config.path, namespace)
    runner = StoredBaselines(store, namespace, origin)
    try:
        base = await runner(read, folder, sha, evals)
    except ConfigError as err:  # a file the config names: relative to its folder
        return ConfigPush(config.path, namespace, error=error_in_repository(err, config.folder))
    except ExecutionError as err:
        return ConfigPush(config.path, namespace, error=err)
    ran = base.result.suites
    return ConfigPush(
        config.path, namespace,
        tuple(s.name for s in read.suites if s.name in ran and s.name not in runner.not_stored),
        tuple(f"{name}: {runner.not_stored.get(name, 'it did not run')}"
              for name in (s.name for s in read.suites)
              if name in runner.not_stored or name not in ran))


def _read(root: Path, config: ConfigPlan) -> tuple[Path, Config | None]:
    """Return the config's folder in ``root`` and its parsed config (None: absent).

    Raises:
        ConfigError: the plan's error, a folder reached through a symlink, an invalid
            config, or a folder's config that lists or discovers configs (repository-relative
            paths).
    """
    if config.error is not None:
        raise config.error
    folder = folder_root(root, config.folder)
    if folder is None:
        raise ConfigError(config.path, None, "its folder is reached through a symlink: only "
                          "plain folders are gated")
    try:
        read = read_config(folder)
    except ConfigError as err:
        raise error_in_repository(err, config.folder) from None
    error = folder_config_error(read, config.path) if read and config.folder else None
    if error is not None:
        raise error
    return folder, read
