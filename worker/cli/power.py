"""``llmgate power``: how many examples a gate needs, from the suite's own measured noise.

``llmgate power --n 300 --drop 0.05`` answers for a pass/fail metric: the smallest drop the gate
detects with 80% power at n paired examples, and the examples needed to detect ``--drop``.
The noise is the background flip rate per direction (pass->fail, and as often fail->pass): given
with ``--flip-rate``, or measured by ``llmgate calibrate --format json`` (``--calibration``: the
mean over the suite's ``--examples`` examples of their flip rate between identical runs, half of
it per direction). The formulas are worker/evals/verdict/power.py's (Connor 1987, exact-test floor);
with ``--tests k`` each test gets alpha / k, the Bonferroni level, a lower bound of what the
sign-flip family allows (it pays less for dependent tests). Exit codes: 0 answered, 2 bad arguments
or an unreadable calibration.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from worker.evals.verdict.power import DEFAULT_POWER, mdd_binary, n_needed_binary

EXIT_OK, EXIT_USAGE = 0, 2


def _plain(doc: str | None) -> str | None:
    """The module docstring's first two paragraphs without reST's double backquotes, for --help."""
    return "\n\n".join(doc.split("\n\n")[:2]).replace("``", "") if doc else None


def add_power_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``llmgate power`` on the CLI's subcommands."""
    parser = sub.add_parser("power", help="examples needed to detect a drop, from measured noise",
                            description=_plain(__doc__))
    parser.add_argument("--n", type=int, required=True, help="paired examples in the suite")
    parser.add_argument("--drop", type=float, default=0.05, help="drop to detect (0-1)")
    parser.add_argument("--alpha", type=float, default=0.05, help="the gate's alpha")
    parser.add_argument("--tests", type=int, default=1, help="tests in the gate's family")
    parser.add_argument("--power", type=float, default=DEFAULT_POWER, help="power (0-1)")
    parser.add_argument("--flip-rate", type=float, help="flips per direction (0-1)")
    parser.add_argument("--calibration", type=Path, help="llmgate calibrate --format json output")
    parser.add_argument("--suite", help="the suite of --calibration (default: the only one)")
    parser.add_argument("--examples", type=int, help="examples of that suite (default: --n)")
    parser.set_defaults(func=cmd_power)


def cmd_power(args: argparse.Namespace) -> int:
    """Print the minimum detectable drop at ``--n`` and the examples needed for ``--drop``."""
    try:
        flips, source = _flip_rate(args)
        _check(args, flips)
    except ValueError as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return EXIT_USAGE
    level = args.alpha / args.tests
    mdd = mdd_binary(args.n, flips, level, args.power)
    needed = n_needed_binary(args.drop, flips, level, args.power)
    shown = "none up to 1" if not math.isfinite(mdd) else f"{mdd:.3f}"
    print(f"noise: {flips:.4f} flips per direction ({source})")
    print(f"level per test: {level:.4g} (alpha {args.alpha:g} / {args.tests} tests)")
    print(f"at n = {args.n}: detects drops >= {shown} with {args.power:.0%} power")
    print(f"to detect a drop of {args.drop:g}: about {needed} paired examples")
    return EXIT_OK


def _check(args: argparse.Namespace, flips: float) -> None:
    if args.n < 1 or args.tests < 1 or not 0 < args.drop <= 1 or not 0 < args.alpha < 1 \
            or not 0 < args.power < 1 or not 0 <= flips <= 0.5:
        raise ValueError("need --n >= 1, --tests >= 1, 0 < --drop <= 1, 0 < --alpha < 1, "
                         "0 < --power < 1 and a flip rate from 0 to 0.5")


def _flip_rate(args: argparse.Namespace) -> tuple[float, str]:
    if args.calibration is None:
        if args.flip_rate is None:
            raise ValueError("give --flip-rate or --calibration (llmgate calibrate --format json)")
        return float(args.flip_rate), "--flip-rate"
    try:
        record = json.loads(args.calibration.read_text(encoding="utf-8"))
        rates: dict[str, dict[str, float]] = record["flip_rates"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"cannot read the calibration {args.calibration}: {err}") from None
    suites = [args.suite] if args.suite else list(rates) or [""]
    if len(suites) != 1:
        raise ValueError(f"the calibration has several suites ({', '.join(rates)}): give --suite")
    examples = args.examples or args.n
    flipped = rates.get(suites[0], {})
    mean = sum(flipped.values()) / max(examples, len(flipped))
    return mean / 2, (f"measured: {len(flipped)} of {examples} examples flipped in "
                      f"{record.get('runs', '?')} identical runs")
