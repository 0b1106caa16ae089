"""The Python API of llmgate: load a config, gate a repository, read the verdict.

Every run goes through the code path of ``llmgate run`` (worker/cli/main.py: the same option
parsing, refusals, `worker.cli.main.gate_locally` and `worker.cli.main.run_exit_code`), so a
`Result`'s ``exit_code`` is the number the command would exit with and it fails closed exactly
as the command does: a configuration error is 2, a run that could not happen is 3, a gate that
could not decide is 4. Nothing here writes a report or prints; the engine is imported when a
function is first called, so ``import llmgate`` stays cheap.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.errors import ConfigError, ExecutionError

if TYPE_CHECKING:
    from worker.evals.types import Config, ExampleResult, GateReport, RuleOutcome
    from worker.pipeline import MultiReport

#: ``llmgate run``'s exit codes, which `Result.exit_code` takes.
EXIT_PASS, EXIT_GATE_FAILED, EXIT_CONFIG_ERROR, EXIT_EXECUTION_ERROR, EXIT_UNDECIDED = 0, 1, 2, 3, 4
#: Options of ``llmgate run`` that `run` refuses: they write files, move a named baseline or
#: stop before the run.
REFUSED_OPTIONS = ("--format", "--output", "--promote", "--repo", "--dry-run")


@dataclass(frozen=True)
class ExampleVerdict:
    """One example of one suite at head (its first id when ``settings.repeats`` runs it more
    than once: every repeat counts).

    Attributes:
        config: the config file that holds the suite, repository-relative (``.llmgate.yml``).
        suite: the suite's name.
        id: the example's id (its ``id``, or ``line-N`` for an example without one).
        line: its 1-based line in the dataset.
        passed: True when every run of it answered and passed every assertion.
        output: the target's output (the first run's), redacted as the CLI's reports are.
        expected: the dataset's ``expected`` value, or None.
        reasons: why it did not pass: the target's error, the failed assertions' messages, and
            the regression's reason when it regressed from base; empty when it passed.
        errored: the target gave no answer (an error, a timeout).
        regressed: it passed at base and fails at head (False without a base).
        failed_at_base: a base ran this suite and the example failed there too (False without
            a base): a failure the change did not introduce.
    """

    config: str
    suite: str
    id: str
    line: int
    passed: bool
    output: Any
    expected: Any
    reasons: tuple[str, ...]
    errored: bool = False
    regressed: bool = False
    failed_at_base: bool = False


@dataclass(frozen=True)
class RuleVerdict:
    """One gate rule checked for one suite and metric (a `worker.evals.types.RuleOutcome`).

    Attributes:
        config: the config file of the suite, repository-relative.
        suite, metric: what was checked.
        rule: the rule as text, e.g. ``min 0.80`` or ``max_drop 0.05``.
        status: ``pass``, ``fail``, ``regression``, ``inconclusive`` or ``skipped`` (a
            relative rule without a base).
        reason: why, for every status but ``pass``.
        base, head, delta: the metric at base and head and head - base (None when unknown).
        group: the group the rule was applied to (``category=billing``), "" for the suite.
        effect: for ``inconclusive``, what it does to the check (``failure``, ``undecided``,
            ``neutral`` or ``none``).
    """

    config: str
    suite: str
    metric: str
    rule: str
    status: str
    reason: str
    base: float | None
    head: float | None
    delta: float | None
    group: str = ""
    effect: str = "none"

    @property
    def blocks(self) -> bool:
        """Whether this outcome keeps the gate from passing: a failed or regressed rule, or an
        inconclusive one whose ``on_inconclusive`` makes the check fail or undecided."""
        return self.status in ("fail", "regression") or (
            self.status == "inconclusive" and self.effect in ("failure", "undecided"))


@dataclass(frozen=True)
class Result:
    """The verdict of one gate, as ``llmgate run`` reaches it.

    Attributes:
        conclusion: the check run's conclusion (``success``, ``failure``, ``neutral``,
            ``action_required``, ...); ``failure`` when the run could not happen.
        exit_code: ``llmgate run``'s exit code: 0 passed (or neutral), 1 gate failed, 2
            configuration error, 3 execution error, 4 undecided (0 with ``allow_undecided``).
        headline: the check run's title, e.g. ``llmgate: fail, 1 regression - echo pass_rate
            0.750 (-0.250)`` ("" when the run could not happen).
        why: the lines that explain a verdict other than a pass: the configuration or
            execution error, each blocking rule, run errors and the report's notes.
        examples: every example at head, configs and suites in report order.
        rules: every gate rule checked.
        config_error: the configuration error (exit code 2), or None.
        error: the execution error's text (exit code 3) or the reason the run was refused
            before it started, or None.
        head_sha, base_sha: the commits compared ("" for the working tree, or no base).
        report: the full report (`worker.pipeline.report_values.MultiReport`), or None when the
            run could not happen. Its shape is not part of the versioned API.
    """

    conclusion: str
    exit_code: int
    headline: str
    why: tuple[str, ...]
    examples: tuple[ExampleVerdict, ...] = ()
    rules: tuple[RuleVerdict, ...] = ()
    config_error: ConfigError | None = None
    error: str | None = None
    head_sha: str = ""
    base_sha: str = ""
    report: MultiReport | None = None

    @property
    def passed(self) -> bool:
        """Whether ``llmgate run`` would exit 0."""
        return self.exit_code == EXIT_PASS

    @property
    def failed_examples(self) -> tuple[ExampleVerdict, ...]:
        """The examples that did not pass at head."""
        return tuple(e for e in self.examples if not e.passed)

    @property
    def regressions(self) -> tuple[ExampleVerdict, ...]:
        """The examples that passed at base and fail at head."""
        return tuple(e for e in self.examples if e.regressed)


def load_config(path: str | os.PathLike[str] = ".llmgate.yml") -> Config:
    """Read and validate one llmgate config file, as a run reads it (no dataset is read).

    Args:
        path: the ``.llmgate.yml`` file, or a folder holding one.

    Returns:
        The parsed config (`worker.evals.types.Config`: ``suites``, ``settings``, ...).

    Raises:
        ConfigError: the file is missing, unreadable, a symlink out of its folder, or invalid;
            ``path``, ``line`` (1-based, or None) and ``message`` say where and how to fix it.
    """
    from worker.evals.filenames import CONFIG_FILENAME
    from worker.pipeline import read_config

    file = Path(path)
    if file.is_dir():
        file = file / CONFIG_FILENAME
    config = read_config(file.parent, file.name)
    if config is None:
        raise ConfigError(str(file), None, "no such file: create it (llmgate init writes one)")
    return config


def run(repo: str | os.PathLike[str] = ".", base: str | None = None, head: str | None = None,
        config: str | None = None, *, base_tip: bool = False, allow_undecided: bool = False,
        options: Sequence[str] = ()) -> Result:
    """Gate a repository as ``llmgate run`` does and return its verdict.

    Args:
        repo: a folder of the git repository (its root is found as the CLI finds it), or a
            folder outside git that holds a ``.llmgate.yml``.
        base: the base ref or SHA (``--base``); None gates head alone (absolute rules only).
        head: the head ref or SHA (``--head``); None gates the working tree.
        config: one config file or folder, relative to the repository root (``--config``);
            None gates every config of the repository.
        base_tip: compare with ``base`` itself, never a merge (``--base-tip``).
        allow_undecided: exit code 0 instead of 4 when the gate could not decide.
        options: more ``llmgate run`` options, e.g. ``["--suite", "tickets", "--no-cache"]``;
            not those of `REFUSED_OPTIONS`.

    Returns:
        The `Result`. A configuration error (exit 2) or a run that could not happen (exit 3)
        is a `Result` too, never an exception: the CLI's fail-closed answers.

    Raises:
        ValueError: ``options`` holds an option ``llmgate run`` does not know, a malformed
            value, or one of `REFUSED_OPTIONS`.
    """
    from worker.cli import is_repository, refusal, repo_root, run_arguments

    folder = Path(repo).absolute()
    root = repo_root(folder)
    if not is_repository(root) and (base or head):
        return _not_run(EXIT_EXECUTION_ERROR, f"base and head need a git repository; {folder} "
                                              "is not inside one")
    if not is_repository(root):
        root = folder
    args = _arguments(run_arguments, root, base, head, config, base_tip, options)
    refused = refusal(args)
    if refused is not None:
        return _not_run(*refused)
    return _gated(args, allow_undecided)


def compare(base: str, head: str | None = None, repo: str | os.PathLike[str] = ".", *,
            config: str | None = None, options: Sequence[str] = ()) -> Result:
    """Compare two commits of ``repo`` with paired statistics: `run` with ``base`` given.

    ``head`` None compares the working tree. A head behind ``base`` is gated merged into it,
    as the App gates a pull request (``llmgate run --base``).

    Raises:
        ValueError: as `run`.
    """
    return run(repo, base, head, config, options=options)


def _arguments(parse: Any, root: Path, base: str | None, head: str | None,
               config: str | None, base_tip: bool, options: Sequence[str]) -> Any:
    """``llmgate run``'s parsed options for a `run` call."""
    refused = [o for o in options if o.split("=", 1)[0] in REFUSED_OPTIONS]
    if refused:
        raise ValueError(f"llmgate.run does not take {', '.join(refused)}")
    argv = ["--repo", str(root), *(["--base", base] if base else []),
            *(["--head", head] if head else []), *(["--config", config] if config else []),
            *(["--base-tip"] if base_tip else []), *options]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):  # the API prints nothing: the error says it
            return parse(argv)
    except SystemExit:  # argparse's one line, e.g. "llmgate run: argument --smoke: ..."
        why = " ".join(said.getvalue().split()) or f"options not accepted: {list(options)}"
        raise ValueError(why) from None


def _gated(args: Any, allow_undecided: bool) -> Result:
    """Run the gate of ``args`` and turn its report into a `Result`."""
    from worker.checkout import GitError
    from worker.cli import gate_locally, run_exit_code

    try:
        multi, head_sha, base_sha = gate_locally(args)
    except (GitError, ExecutionError, OSError) as err:
        return _not_run(EXIT_EXECUTION_ERROR, str(err))
    merged = multi.merged()
    examples: list[ExampleVerdict] = []
    rules: list[RuleVerdict] = []
    for config in multi.configs:
        examples.extend(_examples(config.path, config.report))
        rules.extend(_rule(config.path, o) for o in config.report.outcomes)
    return Result(merged.conclusion, run_exit_code(merged, allow_undecided=allow_undecided),
                  _headline(multi), _why(merged, rules), tuple(examples), tuple(rules),
                  merged.config_error, None, head_sha, base_sha, multi)


def _headline(multi: MultiReport) -> str:
    """The check run's title, as GitHub would show it (one config's, or the combined one)."""
    from worker.report import check_title, title

    return title(multi) if multi.several else check_title(multi.merged())


def _not_run(code: int, message: str) -> Result:
    return Result("failure", code, "", (message,), error=message)


def _examples(path: str, report: GateReport) -> list[ExampleVerdict]:
    """The head examples of one config's report, the first run of each id."""
    from worker.report import first_per_id, regressed

    if report.head is None:
        return []
    worse = regressed(report)
    found = []
    for name, suite in report.head.suites.items():
        at_base = report.base.suites.get(name) if report.base is not None else None
        failed_base = {e.id for e in at_base.examples if not e.passed} if at_base else set()
        for example_id, runs in first_per_id(suite.examples).items():
            regression = worse.get((name, example_id))
            reasons = _reasons(runs)
            if regression is not None:
                reasons.append(f"regressed: {regression.reason}")
            passed = all(r.passed and not r.errored for r in runs)
            found.append(ExampleVerdict(path, name, example_id, runs[0].line, passed,
                                        runs[0].output, runs[0].expected, tuple(reasons),
                                        any(r.errored for r in runs), regression is not None,
                                        example_id in failed_base))
    return found


def _reasons(runs: list[ExampleResult]) -> list[str]:
    """Why the runs of one example did not pass (the first failing run's words)."""
    for r in runs:
        if r.errored:
            return [r.error or "no answer"]
        if not r.passed:
            return [a.message or a.type for a in r.assertions if not a.passed] or ["failed"]
    return []


def _rule(path: str, outcome: RuleOutcome) -> RuleVerdict:
    return RuleVerdict(path, outcome.suite, outcome.metric, outcome.rule, outcome.status,
                       outcome.reason, outcome.base, outcome.head, outcome.delta,
                       outcome.group, outcome.effect)


def _why(report: GateReport, rules: list[RuleVerdict]) -> tuple[str, ...]:
    """The lines that explain ``report``'s verdict: see `Result.why`."""
    lines = [f"configuration error: {report.config_error}"] if report.config_error else []
    for rule in rules:
        if rule.blocks:
            scope = f" [{rule.group}]" if rule.group else ""
            lines.append(f"{rule.suite} {rule.metric}{scope} {rule.rule}: {rule.status}"
                         + (f" ({rule.reason})" if rule.reason else ""))
    lines.extend(f"{e.side} {e.suite}: {e.message}" for e in report.errors)
    lines.extend(report.notes)
    return tuple(lines)
