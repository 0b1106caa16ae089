"""``llmgate calibrate``: run head against itself (A/A) and measure the gate's own noise.

The suites run R times on one tree with nothing changed; each run is gated against the one
before it (R - 1 comparisons) under the configured rules. Any failure of a relative rule is then
a false alarm, so their share estimates the gate's false-alarm rate (expected: at most the
configured alpha). Examples whose pass/fail changes between identical runs are listed as
unstable, with the ``quarantine:`` line that leaves them out of per-example rules.
`calibrate_tree` is the entry point for a scheduled job; `summarize` is pure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

from worker.checkout import GitError, local_worktree, resolve_ref
from worker.errors import ConfigError, ExecutionError
from worker.evals.run import run_config
from worker.evals.types import CONFIG_FILENAME, Config, RunResult
from worker.evals.verdict import compare
from worker.pipeline.config_file import read_config

#: Exit codes: 0 calibrated, 2 configuration error, 3 execution error.
EXIT_OK, EXIT_CONFIG_ERROR, EXIT_EXECUTION_ERROR = 0, 2, 3
#: Rules whose failure in an A/A run is a false alarm (absolute rules fail on both sides alike).
RELATIVE_RULES = ("max_drop", "max_increase", "regression", "non_inferiority_margin",
                  "max_new_failures", "max_example_drop")


@dataclass(frozen=True)
class Calibration:
    """What R identical runs say about the gate.

    Attributes:
        runs: runs made (R); comparisons: A/A comparisons (R - 1).
        false_alarms: comparisons where a relative rule failed or regressed.
        failed_checks: comparisons whose conclusion was failure (absolute rules included).
        alarms_by_rule: ``suite metric [group]: rule`` -> times it failed or regressed.
        alpha: the largest configured ``regression`` alpha, or None.
        flip_rates: suite -> example id -> share of consecutive runs where its pass/fail
            changed (fraction 0-1), for examples that changed at least once.
        unstable: suite -> ids of examples that flipped, in dataset order.
        history: suite -> example id -> its pass share (0-1, the mean over repeats) in each
            run, in run order: what weighs the examples of later gates
            (worker/pipeline/calibration_history.py:history_of).
    """

    runs: int
    comparisons: int
    false_alarms: int
    failed_checks: int
    alarms_by_rule: dict[str, int]
    alpha: float | None
    flip_rates: dict[str, dict[str, float]]
    unstable: dict[str, list[str]]
    history: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    @property
    def false_alarm_rate(self) -> float:
        """False alarms per A/A comparison, fraction 0-1 (0 without comparisons)."""
        return self.false_alarms / self.comparisons if self.comparisons else 0.0


async def calibrate_tree(root: Path, runs: int, config_path: str = CONFIG_FILENAME,
                         sha: str = "") -> Calibration:
    """Run the config at ``root`` ``runs`` times and summarize the A/A comparisons.

    Raises:
        ConfigError: no config, or an invalid config or dataset.
        ValueError: runs < 2.
        ExecutionError: the run itself failed.
    """
    if runs < 2:
        raise ValueError(f"calibration needs at least 2 runs, got {runs}")
    config = read_config(root, config_path)
    if config is None:
        raise ConfigError(config_path, None, f"no {config_path}: add one to calibrate")
    results = [await run_config(config, root, sha) for _ in range(runs)]
    return summarize(config, results)


def summarize(config: Config, results: Sequence[RunResult]) -> Calibration:
    """Gate each run against the one before it and count false alarms and flips (pure).

    Raises:
        ConfigError: the gate refuses the runs (e.g. an example without an ``id`` under rules
            that pair examples), so nothing could be calibrated.
    """
    alarms: dict[str, int] = {}
    false_alarms = failed = 0
    for before, after in zip(results, results[1:], strict=False):
        report = compare(config, after, before)
        if report.config_error is not None:
            raise report.config_error
        failed += report.conclusion == "failure"
        hits = [o for o in report.outcomes if o.status in ("fail", "regression")
                and o.rule.startswith(RELATIVE_RULES)]
        false_alarms += bool(hits)
        for o in hits:
            key = f"{o.suite} {o.metric}{f' [{o.group}]' if o.group else ''}: {o.rule}"
            alarms[key] = alarms.get(key, 0) + 1
    alphas = [r.regression_alpha for s in config.suites for r in s.gate.values()
              if r.regression_alpha is not None]
    history = _pass_history(config, results)
    flips = _flip_rates(history)
    return Calibration(len(results), max(len(results) - 1, 0), false_alarms, failed, alarms,
                       max(alphas) if alphas else None, flips,
                       {suite: list(rates) for suite, rates in flips.items()}, history)


def _pass_history(config: Config, results: Sequence[RunResult]
                  ) -> dict[str, dict[str, list[float]]]:
    """suite -> example id -> its pass share in each run that holds it."""
    found: dict[str, dict[str, list[float]]] = {}
    for suite in config.suites:
        history: dict[str, list[float]] = {}
        for run in results:
            outcomes: dict[str, list[bool]] = {}
            suite_result = run.suites.get(suite.name)
            for example in suite_result.examples if suite_result else ():
                outcomes.setdefault(example.id, []).append(example.passed)
            for example_id, passed in outcomes.items():
                history.setdefault(example_id, []).append(sum(passed) / len(passed))
        found[suite.name] = history
    return found


def _flip_rates(history: Mapping[str, Mapping[str, list[float]]]
                ) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for suite, rows in history.items():
        rates = {i: sum(a != b for a, b in zip(h, h[1:], strict=False)) / (len(h) - 1)
                 for i, h in rows.items() if len(h) > 1}
        unstable = {i: rate for i, rate in rates.items() if rate > 0}
        if unstable:
            found[suite] = unstable
    return found


def render_markdown(cal: Calibration) -> str:
    """Return the calibration as markdown: rates, alarms by rule, unstable examples."""
    expected = f" (expected at most alpha = {cal.alpha:g})" if cal.alpha is not None else ""
    lines = [f"### llmgate calibrate: {cal.runs} identical runs, {cal.comparisons} A/A "
             "comparisons", "",
             f"- false-alarm rate of the relative rules: {cal.false_alarms}/{cal.comparisons} "
             f"= {cal.false_alarm_rate:.3f}{expected}",
             f"- comparisons whose check would fail (absolute rules too): {cal.failed_checks}"]
    lines += [f"- {key}: {count} false alarms" for key, count in sorted(cal.alarms_by_rule.items())]
    if not cal.unstable:
        lines += ["", "No example changed between identical runs."]
    for suite, ids in cal.unstable.items():
        lines += ["", f"**{suite}**: {len(ids)} unstable examples (flip rate per run pair):"]
        lines += [f"- {i}: {cal.flip_rates[suite][i]:.2f}" for i in ids]
        lines += ["", "To leave them out of per-example rules, add to this suite's `gate:`:",
                  "", "```yaml", f"quarantine: {json.dumps(ids)}", "```"]
    return "\n".join(lines) + "\n"


def render_json(cal: Calibration) -> str:
    """Return the calibration as JSON (sorted keys), with ``false_alarm_rate`` added."""
    return json.dumps(asdict(cal) | {"false_alarm_rate": cal.false_alarm_rate},
                      indent=2, sort_keys=True) + "\n"


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Run the suites R times with nothing changed and report the gate's own noise.

    Exit codes: 0 calibrated (whatever the rates), 2 configuration error, 3 execution error.
    """
    if args.runs < 2:
        print(f"llmgate: --runs must be at least 2, got {args.runs}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    try:
        cal = asyncio.run(_calibrate_local(args))
    except ConfigError as err:
        print(f"llmgate: configuration error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except (GitError, ExecutionError, OSError, ValueError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return EXIT_EXECUTION_ERROR
    text = render_json(cal) if args.format == "json" else render_markdown(cal)
    if not args.output:
        print(text, end="")
        return EXIT_OK
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as err:
        print(f"llmgate: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return EXIT_EXECUTION_ERROR
    return EXIT_OK


async def _calibrate_local(args: argparse.Namespace) -> Calibration:
    repo: Path = args.repo or Path.cwd()
    async with AsyncExitStack() as stack:
        root, sha = repo, ""
        if args.head:
            sha = await resolve_ref(repo, args.head)
            root = await stack.enter_async_context(local_worktree(repo, sha))
        return await calibrate_tree(root, args.runs, args.config, sha)
