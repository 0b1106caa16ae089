"""``llmgate migrate``: move a suite to a new model with a prompt searched for it.

The engine is imported only when the command runs, so ``llmgate --help`` stays fast. The steps
are worker/pipeline/migration.py's; this module checks the arguments and prints the outcome.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from worker.errors import ConfigError, ExecutionError
from worker.evals.filenames import CONFIG_FILENAME

if TYPE_CHECKING:
    from worker.evals.llm_types import Pricing
    from worker.pipeline import Migration

#: Exit codes: 0 migrated (prompt and diff written), 2 bad arguments or configuration,
#: 3 execution error, 4 refused or stopped by the budget (nothing written).
EXIT_OK, EXIT_CONFIG_ERROR, EXIT_EXECUTION_ERROR, EXIT_BUDGET = 0, 2, 3, 4
#: Most rewrites one migration asks the optimiser for.
MAX_REWRITES = 10
DESCRIPTION = (
    "Run a suite on a new model, search prompt variants (few-shot selections from the train "
    "split, rewrites proposed by an optimiser model) on a train split, pick by a validation "
    "split, and compare the best on the holdout split with the current model and prompt "
    "(paired: exact McNemar, bootstrap interval). Writes the prompt and a PR-ready diff under "
    ".llmgate/migrate/<suite>/. Every call is estimated first: over --budget-usd, nothing is "
    "sent. Exit codes: 0 migrated, 2 bad arguments or configuration, 3 execution error, "
    "4 refused or stopped by the budget.")


def add_migrate_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``llmgate migrate`` on the CLI's subcommands."""
    parser = sub.add_parser("migrate", help="move a suite to a new model with a searched prompt",
                            description=DESCRIPTION)
    parser.add_argument("--suite", required=True, help="the suite to migrate")
    parser.add_argument("--to", required=True, help="the new litellm model, e.g. openai/gpt-4o")
    parser.add_argument("--budget-usd", type=float, default=None,
                        help="most USD the whole migration may spend (estimated first)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the splits and few-shot "
                                                            "picks (default 0)")
    parser.add_argument("--optimizer", default=None,
                        help="the model proposing rewrites (default: the new model)")
    parser.add_argument("--rewrites", type=int, default=3,
                        help=f"rewrites to ask for, 0-{MAX_REWRITES} (default 3)")
    parser.add_argument("--pricing", default=None, metavar="IN,OUT",
                        help="USD per million input,output tokens of the new model and the "
                             "optimiser, when litellm's price table has none")
    parser.add_argument("--config", default=CONFIG_FILENAME, help="config path in the repository")
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the model response cache")
    parser.add_argument("--repo", type=Path, default=None, help=argparse.SUPPRESS)
    parser.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    """Migrate the suite and print the outcome (exit codes: `EXIT_OK` and friends)."""
    import asyncio  # not at import time: `llmgate --help` builds this parser

    from worker.pipeline import OverBudget

    problem = bad_arguments(args)
    if problem:
        print(f"llmgate migrate: {problem}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    root: Path = args.repo or Path.cwd()
    try:
        outcome = asyncio.run(_migrate(args, root))
    except ConfigError as err:
        print(f"llmgate migrate: configuration error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except OverBudget as err:
        print(f"llmgate migrate: refused: {err}", file=sys.stderr)
        return EXIT_BUDGET
    except (ExecutionError, OSError) as err:
        print(f"llmgate migrate: {err}", file=sys.stderr)
        return EXIT_EXECUTION_ERROR
    print(render(outcome), end="")
    return EXIT_BUDGET if outcome.stopped else EXIT_OK


def bad_arguments(args: argparse.Namespace) -> str | None:
    """Return why the arguments cannot be used, or None."""
    to = str(args.to)
    if not to.strip() or any(c.isspace() for c in to):
        return "--to must name a litellm model, e.g. openai/gpt-4o"
    budget = args.budget_usd
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        return "--budget-usd must be a positive number of USD"
    if not 0 <= args.rewrites <= MAX_REWRITES:
        return f"--rewrites must be between 0 and {MAX_REWRITES}"
    if args.pricing is not None and parse_pricing(args.pricing) is None:
        return "--pricing must be IN,OUT: two non-negative USD amounts per million tokens"
    return None


def parse_pricing(text: str) -> Pricing | None:
    """``"IN,OUT"`` (USD per million tokens) as a `Pricing`, or None when malformed."""
    from worker.evals.llm_types import Pricing

    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        return None
    if len(values) != 2 or not all(math.isfinite(v) and v >= 0 for v in values):
        return None
    return Pricing(values[0], values[1])


async def _migrate(args: argparse.Namespace, root: Path) -> Migration:
    from worker.evals.llm import eval_context
    from worker.pipeline import MigrationRequest, migrate, read_config

    config = read_config(root, args.config)
    if config is None:
        raise ConfigError(args.config, None, f"no {args.config}: run in your repository")
    request = MigrationRequest(args.suite, args.to, args.budget_usd, args.seed, args.optimizer,
                               args.rewrites, parse_pricing(args.pricing) if args.pricing
                               else None)
    async with eval_context(args, root) as evals:
        return await migrate(root, config, request, evals)


def render(outcome: Migration) -> str:
    """The migration as markdown: candidates, the choice, the holdout statistics, the files."""
    train, validation, holdout = outcome.sizes
    lines = [f"# llmgate migrate: {outcome.suite}, {outcome.current_model} -> "
             f"{outcome.new_model}", "",
             f"Splits: {train} train, {validation} validation, {holdout} holdout examples.", "",
             "| prompt | train pass rate | validation pass rate |", "|---|---|---|"]
    lines += [f"| {c.name}{' (chosen)' if c.name == outcome.chosen else ''} | {_pct(c.train)} "
              f"| {_pct(c.validation)} |" for c in outcome.candidates]
    lines.append("")
    h = outcome.holdout
    if h is not None:
        lines += [f"Holdout ({h.n} paired examples): current model and prompt {_pct(h.current)}, "
                  f"{outcome.new_model} with {outcome.chosen} {_pct(h.migrated)} "
                  f"(difference {h.migrated - h.current:+.1%}, 95% CI "
                  f"[{h.interval[0]:+.1%}, {h.interval[1]:+.1%}]); {h.fixed} fixed, "
                  f"{h.broken} broken; McNemar one-sided p = {h.p_gain:.4f} for a gain, "
                  f"{h.p_drop:.4f} for a drop.", ""]
    cost = outcome.spend
    lines.append(f"Model calls: {cost.provider_calls} provider calls, {cost.cache_hits} cache "
                 f"hits, ${cost.cost_usd:.4f} (estimated before: {outcome.estimate.calls} "
                 "calls, " + ("unknown cost" if outcome.estimate.cost_usd is None
                              else f"${outcome.estimate.cost_usd:.4f}") + ").")
    lines += [f"Note: {n}" for n in outcome.notes]
    if outcome.stopped:
        lines.append(f"Stopped: {outcome.stopped}; nothing written.")
    lines += [f"Wrote {path}" for path in outcome.written]
    if outcome.written:
        lines.append(f"Apply it with `git apply {outcome.written[-1]}`.")
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
