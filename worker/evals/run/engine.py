"""Run a config's suites on one checkout: targets, assertions, metrics (the engine's entry).

Examples of a suite run concurrently, at most ``settings.concurrency`` at once; suites run one
after another, in config order. Results keep dataset order whatever order targets finish in.
The run itself (model targets, judges, repeats, cache, budget) is worker/evals/run/runner.py
(`runner.run_suites`); scoring is worker/evals/score/scoring.py. This module adds what the
callers need around it: each suite's fingerprint, and config-line errors for missing datasets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from worker.errors import ConfigError
from worker.evals.context import EvalContext
from worker.evals.run import fingerprint, runner
from worker.evals.run.estimate import Judging
from worker.evals.types import Config, RunResult


async def run_config(config: Config, root: Path, sha: str = "",
                     evals: EvalContext | None = None, *, with_base: bool = True) -> RunResult:
    """Run every suite of ``config`` on the checkout at ``root``.

    Args:
        config: the parsed config (of this checkout).
        root: the checkout; datasets are read from it and commands run in it.
        sha: the commit checked out at ``root``, recorded in the result ("" for a work tree).
        evals: Redis for the response cache, cache mode, clocks; None for none (real time).
        with_base: whether a base run follows (the cost estimate counts ``pairwise`` calls).

    Returns:
        The run, with one `SuiteResult` per suite, keyed by suite name in config order, each
        with its fingerprint (worker/evals/run/fingerprint.py).

    Raises:
        ConfigError: a dataset is missing or invalid.
    """
    return (await run_configs([config], root, sha, evals, with_base=with_base))[0]


async def run_configs(configs: Sequence[Config], root: Path, sha: str = "",
                      evals: EvalContext | None = None, *,
                      with_base: bool = True,
                      looks: runner.Looks | None = None,
                      only: Mapping[str, frozenset[str]] | None = None,
                      state: runner.RunState | None = None,
                      judgings: Sequence[Judging] = ()) -> list[RunResult]:
    """Run several configs on the checkout at ``root`` as one run (one estimate, budget and
    answer per example: worker/evals/run/runner.py `run_suites`), each result fingerprinted.

    ``looks`` answers the examples in batches and stops once the gate is settled
    (``settings.sequential``: worker/pipeline/sequential.py); ``only`` answers just the
    examples it names once more (``confirm_flips``: worker/pipeline/confirm.py).

    Used for head's target on base's evaluation contract and on its own
    (worker/evals/verdict/contract.py); the configs share their run settings (base's).
    ``state`` and ``judgings``: as `worker.evals.run.runner.run_suites` (a caller's calls after
    the run on its budget, counted in its estimate).

    Raises:
        ConfigError: as `run_config`.
    """
    try:
        runs = await runner.run_suites(configs, root, sha, evals, with_base=with_base,
                                       looks=looks, only=only, state=state, judgings=judgings)
    except ConfigError as err:
        raise _at_config_line(configs, err) from None
    return [fingerprint.attach(run, config, root)
            for run, config in zip(runs, configs, strict=True)]


def _at_config_line(configs: Sequence[Config], err: ConfigError) -> ConfigError:
    """Point a dataset error that has no line (a missing file) at the config line naming it.

    A missing dataset is not in the pull request's diff, so an annotation on it would point
    nowhere; the suite's line in the config is where the fix goes.
    """
    if err.line is not None:
        return err
    for config in configs:
        for suite in config.suites:
            if suite.dataset == err.path and suite.contract_root is None:
                return ConfigError(config.path, suite.line,
                                   f"suite {suite.name}: dataset {err.path}: {err.message}")
    return err
