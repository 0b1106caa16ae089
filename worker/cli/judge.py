"""``llmgate judge calibrate``: measure a suite's judges against human labels.

The engine, numpy and scipy are imported only when the command runs, so ``llmgate --help``
stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from worker.errors import ConfigError, ExecutionError
from worker.evals.filenames import CONFIG_FILENAME

if TYPE_CHECKING:
    from worker.evals.run import JudgeCalibration
    from worker.evals.types import SuiteConfig

#: Exit codes: 0 calibrated, 1 a ``judge:`` rule of the suite failed, 2 configuration error,
#: 3 execution error.
EXIT_OK, EXIT_RULE_FAILED, EXIT_CONFIG_ERROR, EXIT_EXECUTION_ERROR = 0, 1, 2, 3
DESCRIPTION = ("Run a suite's judges on human-labelled answers (JSONL: id, output, label or "
               "score, criterion?) and report, per criterion, agreement, Cohen's kappa "
               "(quadratic weighted for 1-5 scores), MAE and Pearson/Spearman for scores, a "
               "confusion matrix, each with a 95% bootstrap interval, and every disagreement "
               "with the judge's reason. With a snapshot next to the labels, the drift since "
               "it. Exit codes: 0 calibrated, 1 a `judge:` rule of the suite (min_agreement, "
               "max_drift) failed, 2 configuration error, 3 execution error.")


def add_judge_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``llmgate judge calibrate`` on the CLI's subcommands."""
    judge = sub.add_parser("judge", help="judges against people: `llmgate judge calibrate`")
    actions = judge.add_subparsers(metavar="ACTION")
    parser = actions.add_parser("calibrate", help="measure a suite's judges against human "
                                "labels", description=DESCRIPTION)
    parser.add_argument("--suite", required=True, help="the suite whose judges are measured")
    parser.add_argument("--labels", default=None,
                        help="the labels JSONL, relative to the repository root (default: the "
                             "suite's judge.labels)")
    parser.add_argument("--config", default=CONFIG_FILENAME, help="config path in the repository")
    parser.add_argument("--save-snapshot", action="store_true",
                        help="write the figures next to the labels (<labels>.snapshot.json), "
                             "to commit: later calibrations and gates report the drift from it")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the model response cache")
    parser.add_argument("--repo", type=Path, default=None, help=argparse.SUPPRESS)
    parser.set_defaults(func=cmd_judge_calibrate)
    judge.set_defaults(func=lambda _args: _usage(judge))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_CONFIG_ERROR


def cmd_judge_calibrate(args: argparse.Namespace) -> int:
    """Calibrate the suite's judges against the labels and print the result.

    Exit codes: 0 calibrated, 1 a ``judge:`` rule of the suite failed, 2 configuration error
    (no such suite, no labels, a bad labels file or snapshot), 3 execution error, including a
    judge that could not rate half the labels or more (no snapshot is written then).
    """
    import asyncio  # not at import time: `llmgate --help` builds this parser

    from worker.evals.run import drift, load_snapshot, write_snapshot
    from worker.evals.verdict import check_rules
    from worker.report import judge_calibration as render

    root: Path = args.repo or Path.cwd()
    try:
        calibration, suite = asyncio.run(_calibrate(args, root))
        snapshot = load_snapshot(root, calibration.labels)
    except ConfigError as err:
        print(f"llmgate: configuration error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except (ExecutionError, OSError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return EXIT_EXECUTION_ERROR
    reference = {name: float(doc["agreement"]) for name, doc in (snapshot or {}).items()
                 if isinstance(doc.get("agreement"), int | float)}
    outcomes = check_rules(calibration, suite.judge, reference) if suite.judge else ()
    changes = drift(calibration, snapshot) if snapshot else {}
    print((render.render_json if args.format == "json" else render.render_markdown)(
        calibration, changes, outcomes), end="")
    undecided = [c for c in calibration.criteria if not c.decided]
    if undecided:  # the figures decide nothing: never exit 0, never a snapshot
        for c in undecided:
            print(f"llmgate: the judge of {c.name!r} could not rate {c.judge_errors} of "
                  f"{c.n + c.judge_errors} labels ({c.first_error or 'no reply'}): nothing "
                  "calibrated", file=sys.stderr)
        return EXIT_EXECUTION_ERROR
    if args.save_snapshot:
        try:
            written = write_snapshot(root, calibration)
        except OSError as err:
            print(f"llmgate: cannot write the snapshot: {err}", file=sys.stderr)
            return EXIT_EXECUTION_ERROR
        if not getattr(args, "quiet", False):  # -q: only errors on stderr
            print(f"llmgate: wrote {written.relative_to(root)}: commit it next to the labels",
                  file=sys.stderr)
    return EXIT_RULE_FAILED if any(o.status == "fail" for o in outcomes) else EXIT_OK


async def _calibrate(args: argparse.Namespace, root: Path) -> tuple[JudgeCalibration,
                                                                    SuiteConfig]:
    from worker.evals.llm import eval_context
    from worker.evals.run import calibrate_suite
    from worker.pipeline import read_config, suite_named

    config = read_config(root, args.config)
    if config is None:
        raise ConfigError(args.config, None, f"no {args.config}: run in your repository")
    suite = suite_named(config, args.suite)
    labels = args.labels or (suite.judge.labels if suite.judge else None)
    if not labels:
        raise ConfigError(config.path, suite.line, f"suite {suite.name!r}: name the labels "
                          "with --labels or the suite's `judge: {labels: ...}`")
    async with eval_context(args, root) as evals:
        calibration = await calibrate_suite(suite, config.settings, root, labels, evals,
                                            use_cache=not args.no_cache, path=config.path)
    return calibration, suite
