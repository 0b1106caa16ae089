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
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from worker.contract import CHECK_NAME
from worker.errors import ConfigError
from worker.evals.context import EvalContext
from worker.evals.types import CONFIG_FILENAME, Config, GateReport, RuleOutcome, RunResult, Settings
from worker.evals.verdict.compare import config_error_report
from worker.pipeline.plan import CheckMode, ConfigPlan, Plan, folder_root
from worker.pipeline.trees import BaseRunner, gate_trees, read_config, run_base_now

#: Check conclusions from worst to best: a combined conclusion is the worst of its configs'.
SEVERITY = ("failure", "timed_out", "cancelled", "action_required", "neutral", "success",
            "skipped")
#: The rule outcome of a config deleted at head.
DELETED_RULE = "deleted at head"
#: The headline (and check title) of a repository without any config at base and at head.
NO_CONFIG_HEADLINE = "no llmgate config"
#: Settings only the root config decides.
ROOT_ONLY_SETTINGS = ("checks", "base", "drafts")


@dataclass(frozen=True)
class ConfigReport:
    """The report of one config, its paths repository-relative.

    Attributes:
        path: the config file (``.llmgate.yml`` for the root config).
        folder: its folder ("" for the root config).
        report: its gate report.
    """

    path: str
    folder: str
    report: GateReport

    @property
    def check_name(self) -> str:
        """Its check run's name in ``per_config`` mode: ``llmgate: <folder>`` (root:
        ``llmgate``)."""
        return f"{CHECK_NAME}: {self.folder}" if self.folder else CHECK_NAME


@dataclass(frozen=True)
class MultiReport:
    """The reports of every config a pull request gates.

    Attributes:
        configs: one report per config, root config first (when gated).
        checks: ``combined`` or ``per_config`` (see worker/report/multi.py).
        notes: lines about the set of configs (skipped files, a base list not known).
    """

    configs: tuple[ConfigReport, ...]
    checks: CheckMode = "combined"
    notes: tuple[str, ...] = ()

    @property
    def several(self) -> bool:
        """Whether a config in a folder is gated (else: a single root config, as before)."""
        return any(c.folder for c in self.configs)

    @property
    def conclusion(self) -> str:
        """The worst conclusion of the configs (`SEVERITY`)."""
        return worst(c.report.conclusion for c in self.configs)

    def merged(self) -> GateReport:
        """Return one report of every config, for what judges a whole gate run (acceptance,
        metrics): outcomes and regressions with suites named ``<folder>: <suite>``, the first
        config error, the worst conclusion and these notes. A single root config's report is
        returned as it is (with the notes first)."""
        if not self.several:
            only = self.configs[0].report
            return replace(only, notes=(*self.notes, *only.notes)) if self.notes else only
        reports = [(c.folder, c.report) for c in self.configs]
        return GateReport(
            self.conclusion,  # type: ignore[arg-type]  # one of the reports' conclusions
            tuple(replace(o, suite=_scoped(f, o.suite)) for f, r in reports for o in r.outcomes),
            tuple(replace(x, suite=_scoped(f, x.suite)) for f, r in reports
                  for x in r.regressions),
            None, None,
            config_error=next((r.config_error for _, r in reports if r.config_error), None),
            notes=self.notes,
            errors=tuple(replace(e, suite=_scoped(f, e.suite)) for f, r in reports
                         for e in r.errors),
            errored=tuple(replace(x, suite=_scoped(f, x.suite)) for f, r in reports
                          for x in r.errored),
            contract=tuple(replace(c, suite=_scoped(f, c.suite)) for f, r in reports
                           for c in r.contract),
            headline="; ".join(_scoped(f, r.headline) for f, r in reports if r.headline))

    def undecided_unless_failed(self, why: str) -> MultiReport:
        """Return this report with every config that would let the pull request merge
        (``success``, ``neutral``) made ``action_required``, its headline ``undecided: why``;
        a ``failure``, an undecided or a ``skipped`` config stays as it is. For a verdict the
        gate could not reach on what would land (a head that conflicts with its base branch:
        worker/gate/evaluate.py, ``llmgate run --base``)."""
        def blocked(config: ConfigReport) -> ConfigReport:
            if config.report.conclusion not in ("success", "neutral"):
                return config
            return replace(config, report=replace(
                config.report, conclusion="action_required", headline=f"undecided: {why}"))

        return replace(self, configs=tuple(blocked(c) for c in self.configs))

    def with_notes(self, notes: Sequence[str]) -> MultiReport:
        """Return this report with those of ``notes`` that `merged` does not show yet: notes
        of the set of configs, or of the single root config's report."""
        shown = self.merged().notes
        extra = tuple(n for n in notes if n not in shown)
        if not extra:
            return self
        if self.several:
            return replace(self, notes=(*self.notes, *extra))
        only = self.configs[0]
        return replace(self, configs=(replace(only, report=replace(
            only.report, notes=(*only.report.notes, *extra))),))


def worst(conclusions: Iterable[str]) -> str:
    """Return the worst of some check conclusions (`SEVERITY`); ``success`` for none."""
    found = [c for c in conclusions if c in SEVERITY]
    return min(found, key=SEVERITY.index) if found else "success"


def _scoped(folder: str, text: str) -> str:
    return f"{folder}: {text}" if folder else text


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


def unconfigured_report() -> MultiReport:
    """The ``neutral`` report of a repository with no config at base and at head
    (`worker.pipeline.plan.nothing_to_gate`): no rule exists, so nothing ran and nothing failed.
    One root-config report, so the check and ``llmgate run`` render it as a single config."""
    note = (f"Neither the base nor the head commit has a {CONFIG_FILENAME} (at the root or in a "
            "folder), so there is nothing to gate. Add one to gate this repository's pull "
            "requests; a pull request that deletes an existing config still fails.")
    report = GateReport("neutral", (), (), None, None, notes=(note,),
                        headline=NO_CONFIG_HEADLINE)
    return MultiReport((ConfigReport(CONFIG_FILENAME, "", report),))


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
