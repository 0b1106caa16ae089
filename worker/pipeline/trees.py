"""Gate two checked-out trees: the one function both the worker and ``llmgate run`` call.

It reads ``.llmgate.yml`` at head (and at base), picks the suites the change needs (``on_paths``,
when the caller knows the changed files), runs them on each tree, and compares the runs.
Configuration problems become a `GateReport` with ``config_error`` set (a failed check with an
annotation), never an exception; only failures of the run itself raise.

The base side goes through a `BaseRunner`: ``llmgate run`` runs base now (`run_base_now`); the
worker first looks for stored baselines (worker/baselines/reuse.py). Base and head run at once
where that gives the results of one after the other (worker/pipeline/sides.py), sharing one
limiter of the config's ``concurrency``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from worker.errors import ConfigError
from worker.evals.config import with_base_settings
from worker.evals.context import EvalContext, RunOverrides
from worker.evals.run import Judging, Looks, RunState, judge_pairs, run_config, run_configs
from worker.evals.types import CONFIG_FILENAME, Config, GateReport, RunResult, RunUsage
from worker.evals.verdict import (
    Attribution,
    at_head_lines,
    combine,
    compare_comparable,
    config_error_report,
    contract_changes,
    count_as_failed,
    finish_report,
    gating_config,
    merge_rules,
    own_rules,
)
from worker.evals.verdict import note as unanswered_note
from worker.pipeline.config_file import read_config
from worker.pipeline.confirm import confirm_flips
from worker.pipeline.exposure import exposure_notes
from worker.pipeline.judge_trust import apply_judge_rules, planned
from worker.pipeline.on_paths import restrict, select_suites
from worker.pipeline.overrides import apply_overrides, check_suites
from worker.pipeline.preflight import refuse_head_early
from worker.pipeline.rescoring import planned_rescoring
from worker.pipeline.sequential import SequentialGate, restrict_base, scale_alpha
from worker.pipeline.sides import at_once, run_both, side_contexts
from worker.pipeline.steering import apply_steering, planned_probes, probe_steering


@dataclass(frozen=True)
class BaseRun:
    """The base side's results and, for the report, where they came from.

    Attributes:
        result: the base run (suites run now, stored ones reused, or both).
        source: one sentence naming the base commit and whether stored baselines were reused
            (`GateReport.base_source`), or None to say nothing.
    """

    result: RunResult
    source: str | None = None


class BaseRunner(Protocol):
    """Produces the base side's results for a config checked out at ``root`` at ``sha``."""

    async def __call__(self, config: Config, root: Path, sha: str,
                       evals: EvalContext | None) -> BaseRun:
        """Return the base run of ``config``.

        Raises:
            ConfigError: a dataset or another file the config names is missing or invalid.
        """


async def run_base_now(config: Config, root: Path, sha: str,
                       evals: EvalContext | None) -> BaseRun:
    """Run every suite of ``config`` at base now (no store; ``llmgate run``).

    Raises:
        ConfigError: as `worker.evals.run.engine.run_config`.
    """
    return BaseRun(await run_config(config, root, sha, evals))


async def verdict_without_base(config: Config, root: Path, run: RunResult,
                               notes: Sequence[str], evals: EvalContext | None) -> GateReport:
    """Return the verdict on a run with nothing at base: only absolute rules (``min``) apply.

    The one head-only verdict: `gate_trees` without a base (or with no config at base, and so
    ``llmgate run`` without ``--base``), and a push's stored run (worker/jobs/push.py). The run
    is compared with no base under ``config``'s own rules
    (`worker.evals.verdict.comparable.compare_comparable`, which re-scores nothing then) and
    finished by the health rules (`worker.evals.verdict.health.finish_report`).

    Args:
        config: the config ``run`` ran (its rules are the verdict's).
        root: its checkout (or config folder).
        run: the run to judge.
        notes: lines to carry into the report, in order.
        evals: its context (the examples' earlier values, ``history``, weigh the sign-flip
            family); None for none.

    Returns:
        The finished report (conclusion, headline, notes); ``base`` None.
    """
    history = evals.history if evals is not None else None
    compared = await compare_comparable(config, root, run, None, notes, evals)
    return finish_report(compared, config, rules=config, history=history)


async def gate_trees(
    head_root: Path,
    base_root: Path | None,
    *,
    head_sha: str = "",
    base_sha: str = "",
    config_path: str = CONFIG_FILENAME,
    evals: EvalContext | None = None,
    changed_files: Sequence[str] | None = None,
    base_runner: BaseRunner = run_base_now,
) -> GateReport:
    """Run the suites at head (and base, when given) and compare them.

    Args:
        head_root: checkout of the head commit (or a working tree).
        base_root: checkout of the base commit, or None to apply only the absolute rules.
        head_sha, base_sha: commit SHAs recorded in the runs ("" for a working tree).
        config_path: the config file relative to each root.
        evals: the response cache's Redis and mode, clocks and printer for model calls;
            None for no cache (worker/evals/context.py). Its ``overrides`` (``llmgate run
            --suite/--smoke/--samples``) apply to head's and base's config alike
            (worker/pipeline/overrides.py).
        changed_files: the files the change touches (merge base to head), to skip suites
            whose base ``on_paths`` match none (worker/pipeline/on_paths.py); None runs every suite.
        base_runner: produces the base run (default: run it now).

    Returns:
        The gate report; ``config_error`` is set when the head config or a head dataset is
        invalid. A missing or invalid config at base only skips the relative rules (noted).
        The gate rules are base's (a pull request cannot loosen its own gate); where head
        changes them the stricter applies and the report notes the difference
        (worker/evals/verdict/rules.py). Head's target is scored on base's evaluation contract
        (dataset, assertions, judges: worker/evals/verdict/contract.py); where head changes it,
        head's own contract is shown beside and the stricter verdict applies. Head runs
        under base's budgets, time limits and verdict settings
        (worker/evals/config/base_settings.py); its examples without a verdict where base has one
        count as failed (worker/evals/verdict/unanswered.py), and the conclusion follows the causes
        of the run's errors (worker/evals/verdict/health.py): a base that could not be evaluated
        leaves the run undecided. When ``on_paths`` skip every suite, nothing runs and the
        conclusion is base's ``settings.on_paths_conclusion`` (``success`` or ``skipped``).
        Targets run without the eval data (worker/evals/run/views.py); the notes say when
        they could read it all the same, or a prompt holds the answers
        (worker/pipeline/exposure.py).

    Raises:
        ExecutionError: the run itself failed (not the user's configuration).
    """
    configs = _read_configs(head_root, base_root, head_sha, config_path, evals, changed_files)
    if isinstance(configs, GateReport):  # head's config is invalid, or no suite is needed
        return configs
    try:
        await _head_first(configs.base, base_root, configs.head, head_root, evals)
        sides = await _sides(base_runner, (configs.base, base_root, base_sha),
                             (configs.head, head_root, head_sha), configs.lines, evals)
    except ConfigError as err:  # head's: base's become notes
        return config_error_report(err)
    return await _after_sides(configs, sides, (head_root, head_sha), base_root, evals)


@dataclass(frozen=True)
class _Lines:
    """The report's lines gathered, in order, while the trees are read and run.

    Attributes:
        notes: the report's notes, in order.
        problems: why base could not be evaluated (the first is the undecided verdict's cause,
            worker/evals/verdict/health.py).
    """

    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def noted(self, *notes: str) -> _Lines:
        """Return these lines with ``notes`` added last."""
        return replace(self, notes=(*self.notes, *notes))

    def base_unevaluated(self, err: ConfigError, problem: str) -> _Lines:
        """Return these lines with base found unevaluable: a note, and ``problem: err``."""
        return _Lines((*self.notes, f"base could not be evaluated ({err}): relative rules skipped"),
                      (*self.problems, f"{problem}: {err}"))


@dataclass(frozen=True)
class _Configs:
    """The configs `gate_trees` runs: head's and base's after the ``llmgate run`` overrides,
    ``on_paths`` and base's settings (None: no valid config at base, or no base), and the
    lines so far."""

    head: Config
    base: Config | None
    lines: _Lines


@dataclass(frozen=True)
class _Base:
    """Base's run (None: no base, or its files are invalid), and the lines with its notes."""

    run: BaseRun | None
    lines: _Lines


@dataclass(frozen=True)
class _Beside:
    """Head's run made beside base's (worker/pipeline/sides.py): head's context, its run
    state (budget and totals) and its runs, one per config of the plan."""

    evals: EvalContext
    state: RunState
    runs: tuple[RunResult, ...]


@dataclass(frozen=True)
class _Sides:
    """What `_sides` found: base's run, head's plan on base's contract (None without a base
    config) and, when head ran beside base, head's run (else None: head runs after base)."""

    base: _Base
    plan: _Plan | None
    beside: _Beside | None


@dataclass(frozen=True)
class _Spending:
    """Head's run state (its one budget and totals, shared with the judge checks that follow)
    and the judge calls after its suites, counted in its estimate (`_judgings`)."""

    state: RunState
    judgings: Sequence[Judging]


@dataclass(frozen=True)
class _Heads:
    """Head's runs (one per config of the plan), the base run they are compared with (restricted
    to head's looks, or with flips confirmed) and the lines with their notes."""

    runs: tuple[RunResult, ...]
    base_run: RunResult | None
    lines: _Lines


def _read_configs(head_root: Path, base_root: Path | None, head_sha: str, config_path: str,
                  evals: EvalContext | None,
                  changed_files: Sequence[str] | None) -> _Configs | GateReport:
    """Read head's and base's configs and keep the suites the change needs (`gate_trees`'
    arguments); a report when head's config is invalid or no suite is needed."""
    try:
        head_config = read_config(head_root, config_path)
        if head_config is None:
            raise ConfigError(config_path, None, f"no {config_path} at head: add one to gate")
        overrides = evals.overrides if evals is not None else RunOverrides()
        check_suites(head_config, overrides)
    except ConfigError as err:
        return config_error_report(err)
    head_config = apply_overrides(head_config, overrides)
    base_config, lines = _base_config(base_root, config_path) if base_root else (None, _Lines())
    base_config = apply_overrides(base_config, overrides) if base_config else None
    if changed_files is not None:
        selection = select_suites(head_config, base_config, changed_files)
        if not selection.run:
            return _all_skipped(head_sha, base_config, list(selection.skipped.values()))
        head_config = restrict(head_config, selection.run)
        base_config = restrict(base_config, selection.run) if base_config else None
        lines = lines.noted(*selection.skipped.values())
    elif any(s.on_paths for s in (base_config or head_config).suites):
        lines = lines.noted("on_paths not applied: no changed files are known (llmgate run "
                            "without --base or with --all-suites, and a push, gate every suite; "
                            "a pull request's changed files decide on the App)")
    head_config, settings_notes = with_base_settings(base_config, head_config)
    return _Configs(head_config, base_config, lines.noted(*settings_notes))


async def _after_sides(configs: _Configs, sides: _Sides, head: tuple[Path, str],
                       base_root: Path | None, evals: EvalContext | None) -> GateReport:
    """Run head where it did not run beside base, then return the verdict (`gate_trees`)."""
    head_root, _ = head
    base, lines, plan = sides.base.run, sides.base.lines, sides.plan
    if base is None or plan is None:
        plan = _Plan(configs.head, None, {})
        if base_root is not None:
            lines = lines.noted("head's own evaluation contract scores it (no base contract "
                                "to use)")
    base_run = base.result if base else None
    sequential = _sequential(plan, configs.base, base_run, evals)
    judged_base = configs.base if base else None
    beside = sides.beside
    head_evals = beside.evals if beside else _head_context(evals, base_root is not None)
    state = beside.state if beside else RunState(plan.configs[0].settings, head_evals)
    spending = _Spending(state, _judgings(plan, configs.head, judged_base, base_root, head_root))
    try:  # the state counts the judge calibration too
        heads = await _head_runs(plan, head, base_root, configs.base, base_run, sequential,
                                 lines, head_evals, spending,
                                 list(beside.runs) if beside else None)
    except ConfigError as err:
        return config_error_report(err)
    lines = heads.lines
    if base_root is None:
        lines = lines.noted("no base given: only absolute rules (min) apply")
    before = state.caller.total  # re-scoring spends head's budget: its totals count it
    report = await _verdict(plan, heads.runs, head_root, heads.base_run, configs.base, lines,
                            evals, sequential.scale if sequential is not None else 1.0, state)
    report = _charged(report, state.caller.total - before)
    report = await _judge_checks(report, plan.gating, (heads.runs[0], heads.base_run),
                                 (configs.head, judged_base, base_root), evals, state)
    report = replace(report, notes=(*report.notes, *exposure_notes(plan.configs, head_root)))
    source = base.source if base else None
    if source:
        report = replace(report, notes=(*report.notes, source))
    return replace(at_head_lines(report, plan.gating, configs.head, head_root),
                   base_source=source)


async def _head_first(base_config: Config | None, base_root: Path | None, head_config: Config,
                      head_root: Path, evals: EvalContext | None) -> None:
    """Refuse head at configuration before base sends a call (worker/pipeline/preflight.py).

    Raises:
        ConfigError: head's (an unpriced model under base's budget, a refused endpoint).
    """
    if base_config is None or base_root is None:
        return
    plan = _plan(base_config, base_root, head_config, head_root)
    await refuse_head_early(plan.configs, head_root, base_config, evals,
                            _judgings(plan, head_config, base_config, base_root, head_root))


def _judgings(plan: _Plan, head_config: Config, base_config: Config | None,
              base_root: Path | None, head_root: Path) -> list[Judging]:
    """The judge calls head's run makes after its suites, on its one budget and counted in its
    estimate: the judge calibration (worker/pipeline/judge_trust.py), the steering probe
    (worker/pipeline/steering.py) and the re-scoring of base's answers with head's own
    contract (worker/pipeline/rescoring.py)."""
    return [*planned(head_config, base_config, base_root),
            *(planned_probes(plan.gating, head_root) if base_root else []),
            *planned_rescoring(plan.own, base_config, base_root)]


async def _judge_checks(report: GateReport, gating: Config,
                        runs: tuple[RunResult, RunResult | None],
                        configs: tuple[Config, Config | None, Path | None],
                        evals: EvalContext | None, state: RunState) -> GateReport:
    """The checks of the judge itself after the verdict, on head's run's budget and totals:
    the steering probe (an answer the judge passes against other questions fails the gate,
    worker/pipeline/steering.py) and base's ``judge:`` rules on a judge head changes
    (worker/pipeline/judge_trust.py)."""
    (head_config, base_config, base_root), before = configs, state.caller.total
    if report.head is not None and report.config_error is None and runs[1] is not None \
            and report.conclusion != "failure":  # steering only matters to a PR's pass
        probe = await probe_steering(gating, runs[0], runs[1], state.caller)
        policy = base_config.settings.undecided if base_config else "action_required"
        report = apply_steering(report, probe, policy)  # base's policy, never head's
    report = await apply_judge_rules(report, head_config, base_config, base_root, evals,
                                     state.caller)
    return _charged(report, state.caller.total - before)  # the run's totals include these


def _charged(report: GateReport, spent: RunUsage) -> GateReport:
    """Return ``report`` with ``spent`` (calls made on head's run state after its run: judge
    checks, re-scoring) added to head's totals."""
    if report.head is None:
        return report
    return replace(report, head=replace(report.head, spend=report.head.spend + spent))


async def _sides(runner: BaseRunner, base: tuple[Config | None, Path | None, str],
                 head: tuple[Config, Path, str], lines: _Lines, evals: EvalContext | None,
                 ) -> _Sides:
    """Run base, and head's suites beside it when they may run at once
    (worker/pipeline/sides.py); return base's run (None: none, or its files are invalid:
    noted in its lines), head's plan on base's contract (None without a base config) and,
    when head ran beside base, head's context, run state and runs.

    Raises:
        ConfigError: a file head's run needs is missing or invalid (base is cancelled).
    """
    (base_config, base_root, base_sha), (head_config, head_root, head_sha) = base, head
    if base_root is None or base_config is None:
        return _Sides(_Base(None, lines), None, None)
    base_evals, head_evals, shared = side_contexts(evals, head_config.settings.concurrency)
    base_side = _base_run(runner, base_config, base_root, base_sha, lines, base_evals)
    plan = _plan(base_config, base_root, head_config, head_root)
    if not at_once(base_config, plan.configs, base_root, head_root,
                   evals.cache if evals is not None else None):
        try:
            return _Sides(await base_side, plan, None)
        finally:
            shared.finish_base()
    state = RunState(plan.configs[0].settings, head_evals)

    async def head_side() -> list[RunResult]:
        return await run_configs(plan.configs, head_root, head_sha, head_evals, with_base=True,
                                 state=state, judgings=_judgings(
                                     plan, head_config, base_config, base_root, head_root))

    found, heads = await run_both(base_side, head_side, shared, lambda base: base.run is None)
    if found.run is None or heads is None:
        return _Sides(found, plan, None)  # head runs again, as after a base not evaluated
    return _Sides(found, plan, _Beside(head_evals, state, tuple(heads)))


def _head_context(evals: EvalContext | None, with_base: bool) -> EvalContext | None:
    """Head's context when it runs after base (its side named; base's `Sides` are done)."""
    if evals is None and not with_base:
        return None
    return (evals or EvalContext()).for_side("head", None)


@dataclass(frozen=True)
class _Plan:
    """What head runs: the verdict's config, and head's own contract where it differs."""

    gating: Config
    own: Config | None
    changes: dict[str, tuple[str, ...]]

    @property
    def configs(self) -> list[Config]:
        return [self.gating, *([self.own] if self.own is not None else [])]


def _plan(contract: Config | None, base_root: Path | None, head: Config,
          head_root: Path) -> _Plan:
    """Head's target on base's contract (``contract``: base's config, when base ran), and
    head's own contract for the suites where it differs (worker/evals/verdict/contract.py)."""
    if contract is None or base_root is None:
        return _Plan(head, None, {})
    changes = contract_changes(contract, base_root, head, head_root)
    own = restrict(head, changes) if changes else None
    return _Plan(gating_config(contract, head, base_root), own, changes)


async def _head_runs(plan: _Plan, head: tuple[Path, str], base_root: Path | None,
                     base_config: Config | None, base_run: RunResult | None,
                     sequential: SequentialGate | None, lines: _Lines,
                     evals: EvalContext | None, spending: _Spending,
                     ran: list[RunResult] | None = None) -> _Heads:
    """Run head (in looks under ``settings.sequential``), its pairwise judges, and the
    ``confirm_flips`` re-runs; return head's runs, the base run they are compared with and
    ``lines`` with their notes.

    ``spending`` is head's run state (its budget and totals, shared with the judge calibration
    that follows) and the calibration's judge calls, counted in head's estimate. ``ran``: head's
    runs when they were made beside base's (`_sides`).

    Raises:
        ConfigError: a file head's run needs is missing or invalid.
    """
    head_root, head_sha = head
    state = spending.state
    heads = ran if ran is not None else await run_configs(
        plan.configs, head_root, head_sha, evals, with_base=base_root is not None,
        looks=_looks(sequential, plan, head_root, base_config, lines.problems, evals, state),
        state=state, judgings=spending.judgings)
    if sequential is not None and base_run is not None:
        base_run = restrict_base(base_run, heads[0])
        if not sequential.stopped:
            sequential.look(heads[0], sequential.looks)
        lines = lines.noted(sequential.note())
    heads = [await judge_pairs(c, run, base_run, evals, state)  # head's one budget
             for c, run in zip(plan.configs, heads, strict=True)]
    stop = state.budget.stopped  # a pairwise step the budget stopped stops the run
    heads = [run if run.stopped or stop is None else replace(run, stopped=stop)
             for run in heads]
    if base_run is None or base_config is None or base_root is None or \
            base_config.settings.statistics.confirm_flips <= 0:
        return _Heads(tuple(heads), base_run, lines)
    found = await confirm_flips(merge_rules(base_config, plan.gating)[0], plan.gating,
                                base_config, (head_root, base_root), (heads[0], base_run), evals)
    lines = lines.noted(found.note) if found.note else lines
    return _Heads((found.head, *heads[1:]), found.base, lines)


def _sequential(plan: _Plan, base_config: Config | None, base_run: RunResult | None,
                evals: EvalContext | None) -> SequentialGate | None:
    """The looks of a sequential head run, when base's ``settings.sequential`` asks for one."""
    if base_config is None or base_run is None or \
            not base_config.settings.statistics.sequential:
        return None
    rules, _ = merge_rules(base_config, plan.gating)
    return SequentialGate(rules, base_run, base_config.settings.statistics.looks,
                          evals.history if evals is not None else {})


def _looks(sequential: SequentialGate | None, plan: _Plan, head_root: Path,
           base_config: Config | None, problems: tuple[str, ...],
           evals: EvalContext | None, state: RunState | None = None) -> Looks | None:
    """Answer head in looks, each decided on the report of the examples seen so far."""
    if sequential is None:
        return None
    gate = sequential

    async def decide(runs: list[RunResult], look: int) -> bool:
        part = restrict_base(gate.base, runs[0])

        async def verdict(head: RunResult, scale: float) -> GateReport:
            return await _verdict(plan, [head, *runs[1:]], head_root, part, base_config,
                                  _Lines(problems=problems), evals, scale, state)

        return await gate.decide(runs[0], look, verdict)

    return Looks(gate.looks, decide)


async def _verdict(plan: _Plan, heads: Sequence[RunResult], head_root: Path,
                   base_run: RunResult | None, base_config: Config | None, lines: _Lines,
                   evals: EvalContext | None,
                   scale: float = 1.0, state: RunState | None = None) -> GateReport:
    """Compare head with base under the rules, then under head's own contract if it differs
    (``lines``: the report's notes and why base could not be evaluated; ``scale``: a
    sequential look's factor on the regression alphas, worker/pipeline/sequential.py;
    ``state``: head's run state, whose budget re-scoring spends)."""
    notes, problems = lines.notes, lines.problems
    if base_run is None and base_config is None and not problems:  # nothing at base
        return await verdict_without_base(plan.gating, head_root, heads[0], notes, evals)
    problem = problems[0] if problems else None
    head_run, counted = count_as_failed(heads[0], base_run,
                                        Attribution(plan.gating, base_config, base_run, heads[0]),
                                        plan.gating.settings.max_provider_error_rate)
    rules, changes = merge_rules(base_config, plan.gating)
    rules = scale_alpha(rules, scale)
    extra = [n for n in (unanswered_note(counted),) if n]
    history = evals.history if evals is not None else None
    report = finish_report(await compare_comparable(
        rules, head_root, head_run, base_run, [*notes, *changes, *extra], evals, state),
        plan.gating, base_config, problem, rules=rules, history=history)
    if plan.own is None:
        return report
    own_gate = scale_alpha(own_rules(base_config, plan.own), scale)
    own = finish_report(await compare_comparable(
        own_gate, head_root, heads[1], base_run, (), evals, state),
        plan.own, base_config, problem, rules=own_gate, history=history)
    return combine(report, own, plan.changes)


def _base_config(base_root: Path, config_path: str) -> tuple[Config | None, _Lines]:
    """Return the base config, or None (noted: absent, or invalid at base: a problem), and
    the lines that say so."""
    try:
        config = read_config(base_root, config_path)
    except ConfigError as err:
        return None, _Lines().base_unevaluated(err, "its config is invalid")
    if config is None:
        return None, _Lines((f"no {config_path} at base: relative rules skipped",))
    return config, _Lines()


async def _base_run(runner: BaseRunner, config: Config, root: Path, sha: str, lines: _Lines,
                    evals: EvalContext | None) -> _Base:
    """Run base with ``runner``; its run is None when a file its config names is invalid
    (noted in the lines returned, with the problem)."""
    try:
        return _Base(await runner(config, root, sha, evals), lines)
    except ConfigError as err:
        return _Base(None, lines.base_unevaluated(err, "a file its config names is invalid"))


def _all_skipped(head_sha: str, base: Config | None, reasons: list[str]) -> GateReport:
    """The report of a change that no suite needs: nothing ran, so no rule applies."""
    conclusion = base.settings.on_paths_conclusion if base else "success"
    count = len(reasons)
    headline = (f"no suite needed: the changed files match no suite's on_paths "
                f"({count} suite{'s' if count != 1 else ''} skipped)")
    return GateReport(conclusion, (), (), RunResult(head_sha, {}), None,
                      notes=tuple(reasons), headline=headline)
