"""Gate every config of a `worker.pipeline.plan.Plan` and gather their reports (a `MultiReport`).

The root config runs exactly as a single-config repository does (`worker.pipeline.trees.gate_trees`
on the two checkouts). A config in a folder runs as if the folder were its repository: its
datasets, prompts, schema and Python files, traps and the working directory of its commands
are relative to the folder, its command targets are confined to the folder by the sandbox,
and its ``on_paths`` globs match the changed files relative to the folder (``../shared/**``
watches a sibling folder). Its report's file paths (config errors, regressed examples'
datasets) are then made repository-relative again, so annotations land on the right files.

Configs run one after another, each with its own settings (timeout, concurrency, budget).
A config that exists at base but not at head fails with a rule outcome saying so (a writer
can accept it, like a removed suite's rules); only the root config may list or discover
configs, and ``settings.checks``, ``base``, ``drafts`` and ``untrusted`` are read from the
root config only (a folder's own values are ignored, with a note).

The report's values (`MultiReport`, `ConfigReport`, `SEVERITY`) live in
worker/pipeline/report_values.py, so the renderers read them without loading the runners.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from worker.errors import ConfigError
from worker.evals.context import EvalContext
from worker.evals.types import CONFIG_FILENAME, Config, GateReport, RuleOutcome, RunResult, Settings
from worker.evals.verdict import config_error_report
from worker.pipeline.config_file import read_config
from worker.pipeline.plan import ConfigPlan, Plan, folder_root
from worker.pipeline.report_values import ConfigReport, MultiReport
from worker.pipeline.trees import BaseRunner, gate_trees, run_base_now

#: The rule outcome of a config deleted at head.
DELETED_RULE = "deleted at head"
#: Settings only the root config decides.
ROOT_ONLY_SETTINGS = ("checks", "base", "drafts")


async def gate_plan(
    plan: Plan,
    head_root: Path,
    base_root: Path | None,
    *,
    head_sha: str = "",
    base_sha: str = "",
    evals: EvalContext | None = None,
    changed_files: Sequence[str] | None = None,
    base_runner_for: Callable[[str], BaseRunner] = lambda folder: run_base_now,
) -> MultiReport:
    """Gate each config of ``plan`` on the two checkouts, one after another.

    Args:
        plan: the configs (worker/pipeline/plan.py `plan_configs`).
        head_root, base_root: the checkouts (base None: only absolute rules apply).
        head_sha, base_sha, evals, changed_files: as `worker.pipeline.trees.gate_trees`
            (``changed_files`` repository-relative).
        base_runner_for: folder ("" for the root config) -> the base runner of that config
            (the worker keeps each folder's stored baselines apart).

    Returns:
        One report per config, in plan order.

    Raises:
        ExecutionError: a run itself failed (not the user's configuration).
    """
    reports = []
    for config in plan.configs:
        report = await _gate_one(config, head_root, base_root, head_sha, base_sha, evals,
                                 changed_files, base_runner_for(config.folder))
        reports.append(ConfigReport(config.path, config.folder, report))
    return MultiReport(tuple(reports), plan.checks, plan.notes)


async def _gate_one(config: ConfigPlan, head_root: Path, base_root: Path | None, head_sha: str,
                    base_sha: str, evals: EvalContext | None,
                    changed_files: Sequence[str] | None, runner: BaseRunner) -> GateReport:
    """Gate one config (see the module docstring)."""
    if config.error is not None:
        return config_error_report(config.error)
    if not config.folder:
        return await gate_trees(head_root, base_root, head_sha=head_sha, base_sha=base_sha,
                                evals=evals, changed_files=changed_files, base_runner=runner)
    head_dir = folder_root(head_root, config.folder)
    if not config.at_head or head_dir is None:
        return deleted_report(config.path)
    try:
        notes = _folder_notes(head_dir, config.path)
    except ConfigError as err:
        return config_error_report(err)
    base_dir = folder_root(base_root, config.folder) if base_root is not None else None
    changed = None if changed_files is None else \
        [posixpath.relpath(path, config.folder) for path in changed_files]
    report = await gate_trees(head_dir, base_dir, head_sha=head_sha, base_sha=base_sha,
                              evals=evals, changed_files=changed, base_runner=runner)
    report = in_repository(report, config.folder)
    own = tuple(n.replace(f"no {CONFIG_FILENAME} at base", f"no {config.path} at base")
                for n in report.notes)  # gate_trees names the file relative to the folder
    return replace(report, notes=(*notes, *own))


def _folder_notes(head_dir: Path, path: str) -> list[str]:
    """Notes on root-only keys a folder's config sets.

    Raises:
        ConfigError: the folder's config lists or discovers configs (only the root may).
    """
    try:
        config = read_config(head_dir)
    except ConfigError:
        return []  # gate_trees reports it, with its line
    if config is None:
        return []
    error = folder_config_error(config, path)
    if error is not None:
        raise error
    default = Settings()
    ignored = [k for k in ROOT_ONLY_SETTINGS
               if getattr(config.settings, k) != getattr(default, k)]
    if not ignored:
        return []
    keys = ", ".join(f"settings.{k}" for k in ignored)
    return [f"{path}: {keys} ignored: only the root .llmgate.yml decides "
            f"{'it' if len(ignored) == 1 else 'them'}"]


def folder_config_error(config: Config, path: str) -> ConfigError | None:
    """Return the error of a folder's config (file ``path``, repository-relative) that lists
    or discovers configs (only the root config may), or None."""
    if not config.configs and not config.discover:
        return None
    return ConfigError(path, config.layout_line, "only the repository's root .llmgate.yml "
                       "may list or discover configs: remove `configs`/`discover` here")


def error_in_repository(err: ConfigError, folder: str) -> ConfigError:
    """Return ``err`` of a config in ``folder`` (its path relative to the folder, "" for the
    config file) with its path repository-relative."""
    return ConfigError(_join(folder, err.path), err.line, err.message)


def deleted_report(path: str) -> GateReport:
    """The failed report of a config that exists at base but not at head."""
    reason = (f"{path} exists at base but not at head: its gate still applies until the "
              "deletion is merged (restore the file, or a writer can accept this with Accept "
              "regression)")
    outcome = RuleOutcome(path, "config", DELETED_RULE, None, None, None, "fail", reason)
    return GateReport("failure", (outcome,), (), None, None,
                      headline=f"{path} was deleted at head")


def in_repository(report: GateReport, folder: str) -> GateReport:
    """Return ``report`` with its file paths (relative to ``folder``) repository-relative."""
    err = report.config_error
    moved = None if err is None else error_in_repository(err, folder)
    return replace(report, config_error=moved,
                   regressions=tuple(replace(r, dataset=_join(folder, r.dataset))
                                     for r in report.regressions),
                   errored=tuple(replace(r, dataset=_join(folder, r.dataset))
                                 for r in report.errored),
                   errors=tuple(replace(e, path=_join(folder, e.path)) for e in report.errors),
                   head=_run_in(report.head, folder), base=_run_in(report.base, folder))


def _run_in(run: RunResult | None, folder: str) -> RunResult | None:
    if run is None:
        return None
    return replace(run, suites={name: replace(suite, dataset=_join(folder, suite.dataset))
                                for name, suite in run.suites.items()})


def _join(folder: str, path: str) -> str:
    return posixpath.normpath(posixpath.join(folder, path or CONFIG_FILENAME))
