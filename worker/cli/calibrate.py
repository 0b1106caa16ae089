"""The ``llmgate calibrate`` arguments, kept apart so ``llmgate --help`` imports no statistics."""

from __future__ import annotations

import argparse
from pathlib import Path

from worker.evals.filenames import CONFIG_FILENAME


def add_calibrate_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``llmgate calibrate`` on the CLI's subcommands (`worker.pipeline.calibrate` runs
    it)."""
    parser = sub.add_parser(
        "calibrate", help="run head against itself R times: false-alarm rate and unstable "
        "examples", description="Run the suites R times with nothing changed and report the "
        "gate's own noise. Exit codes: 0 calibrated (whatever the rates), 2 configuration "
        "error, 3 execution error.")
    parser.add_argument("--runs", type=int, default=5, help="identical runs R (>= 2; default 5)")
    parser.add_argument("--config", default=CONFIG_FILENAME, help="config path in the repository")
    parser.add_argument("--head", help="ref or SHA to calibrate (default: the working tree)")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--output", type=Path, help="write the result here instead of stdout")
    parser.add_argument("--repo", type=Path, default=None, help=argparse.SUPPRESS)
    parser.set_defaults(func=_cmd_calibrate)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from worker.pipeline import cmd_calibrate  # numpy and scipy: only when it runs

    return cmd_calibrate(args)
