"""The values of a gate's report over every config (a `MultiReport`), apart from what runs it.

worker/pipeline/multi.py gates the configs and returns a `MultiReport`; the renderers
(worker/report/, ``llmgate run --format ...``) and the stores read it. They import it from here,
so rendering a report loads only the engine's vocabulary (worker/evals/types.py), not the
runners: this module imports no runner, checkout or model client, and no module that does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from worker.contract import CHECK_NAME
from worker.evals.types import CONFIG_FILENAME, GateReport

#: Check conclusions from worst to best: a combined conclusion is the worst of its configs'.
SEVERITY = ("failure", "timed_out", "cancelled", "action_required", "neutral", "success",
            "skipped")
#: The headline (and check title) of a repository without any config at base and at head.
NO_CONFIG_HEADLINE = "no llmgate config"
#: How a pull request's configs report: one ``llmgate`` check run, or one per config.
CheckMode = Literal["combined", "per_config"]


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


def _scoped(folder: str, text: str) -> str:
    return f"{folder}: {text}" if folder else text
