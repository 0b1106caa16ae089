"""``llmgate power``: how many examples a gate needs, from the suite's own measured noise.

``llmgate power --n 300 --drop 0.05 --flip-rate 0.02`` (or ``--calibration cal.json``)
answers for a pass/fail metric: the smallest drop the gate detects with 80% power at n paired
examples, and the examples needed to detect ``--drop``.
The noise is the background flip rate per direction (pass->fail, and as often fail->pass):
given with ``--flip-rate``, or measured by ``llmgate calibrate --format json``
(``--calibration``: the mean over the suite's examples, as many as the record lists unless
``--examples`` says, of their flip rate between identical runs, half of it per direction). The
formulas are worker/evals/verdict/power.py's (Connor 1987, exact-test floor); with ``--tests
k`` each test gets alpha / k, the Bonferroni level, a lower bound of what the sign-flip family
allows (it pays less for dependent tests). Exit codes: 0 answered, 2 bad arguments or an
unreadable calibration.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from worker.cli.power_calibration import measured_flip_rate
from worker.evals.verdict import (
    DEFAULT_POWER,
    mdd_binary,
    min_significant_count,
    n_needed_binary,
)

EXIT_OK, EXIT_USAGE = 0, 2
#: Fewest paired examples ``--n`` accepts: one pair is no paired test at all.
MIN_N = 2
#: Defaults of the numeric options, as the user would type them (also shown by --help).
DEFAULTS = {"drop": "0.05", "alpha": "0.05", "tests": "1", "power": f"{DEFAULT_POWER:g}"}
PREFIX = "llmgate power: "
#: Smallest level per test and miss rate (1 - power) whose normal quantile is computed.
MIN_LEVEL = 1e-12


@dataclass(frozen=True)
class PowerQuestion:
    """The checked arguments of one ``llmgate power``.

    Attributes:
        n: paired examples (>= `MIN_N`); tests: tests in the family (>= 1).
        drop: the drop in the pass rate to detect, fraction in (0, 1].
        alpha: the gate's one-sided level, fraction in (0, 1); power: fraction in (0, 1).
        flip_rate: background flips per direction, fraction 0-0.5; source: where it came from.
    """

    n: int
    tests: int
    drop: float
    alpha: float
    power: float
    flip_rate: float
    source: str


def _plain(doc: str | None) -> str | None:
    """The module docstring's first two paragraphs without reST's double backquotes, for --help."""
    return "\n\n".join(doc.split("\n\n")[:2]).replace("``", "") if doc else None


def add_power_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``llmgate power`` on the CLI's subcommands (values are checked by `cmd_power`)."""
    parser = sub.add_parser("power", help="examples needed to detect a drop, from measured noise",
                            description=_plain(__doc__))
    add = parser.add_argument
    add("--n", required=True, help=f"paired examples in the suite, a whole number >= {MIN_N} "
        "(required)")
    add("--drop", default=DEFAULTS["drop"], help="drop in the pass rate to detect, above 0 and "
        f"at most 1 (default {DEFAULTS['drop']})")
    add("--alpha", default=DEFAULTS["alpha"], help="the gate's one-sided alpha, between 0 and 1 "
        f"(default {DEFAULTS['alpha']})")
    add("--tests", default=DEFAULTS["tests"], help="tests in the gate's family, a whole number "
        f">= 1; each gets alpha / tests (default {DEFAULTS['tests']})")
    add("--power", default=DEFAULTS["power"], help="power to detect with, between 0 and 1 "
        f"(default {DEFAULTS['power']})")
    add("--flip-rate", help="flips per direction, 0 to 0.5 (default: none; give it or "
        "--calibration)")
    add("--calibration", type=Path, help="the file of `llmgate calibrate --format json` "
        "(default: none; give it or --flip-rate)")
    add("--suite", help="the suite of --calibration (default: its only suite)")
    add("--examples", help="examples of that suite, a whole number >= 1 (default: as many as "
        "the calibration lists, else --n)")
    parser.set_defaults(func=cmd_power)


def cmd_power(args: argparse.Namespace) -> int:
    """Print the minimum detectable drop at ``--n`` and the examples needed for ``--drop``.

    Returns:
        `EXIT_OK`, or `EXIT_USAGE` after one line on stderr naming the bad option and its value,
        or why the calibration cannot be used.
    """
    try:
        question = read_question(args)
    except ValueError as err:
        print(f"{PREFIX}{err}", file=sys.stderr)
        return EXIT_USAGE
    print(answer(question), end="")
    return EXIT_OK


def answer(q: PowerQuestion) -> str:
    """Return the four lines of the answer to ``q`` (pure; module doc for the formulas)."""
    level = q.alpha / q.tests
    mdd = mdd_binary(q.n, q.flip_rate, level, q.power)
    needed = n_needed_binary(q.drop, q.flip_rate, level, q.power)
    power = _percent(q.power)
    if math.isfinite(mdd):
        detects = f"at n = {q.n}: detects drops >= {mdd:.3f} with {power} power"
    else:
        fewest = min_significant_count(level)
        detects = (f"at n = {q.n}: no drop is detectable with {power} power (at level "
                   f"{level:.4g} a paired test needs at least {fewest} paired examples)"
                   if q.n < fewest else
                   f"at n = {q.n}: no drop is detectable with {power} power")
    return (f"noise: {q.flip_rate:.4f} flips per direction ({q.source})\n"
            f"level per test: {level:.4g} (alpha {q.alpha:g} / {q.tests} "
            f"test{'' if q.tests == 1 else 's'})\n"
            f"{detects}\n"
            f"to detect a drop of {q.drop:g}: about {needed} paired examples\n")


def _percent(share: float) -> str:
    """``share`` (0-1) as a percentage that never rounds to 0% or 100% (0.999999: 99.9999%)."""
    for digits in range(9):
        text = f"{share * 100:.{digits}f}"
        if float(text) not in (0.0, 100.0):
            return text + "%"
    return f"{share * 100:g}%"


def read_question(args: argparse.Namespace) -> PowerQuestion:
    """Check every option of ``args`` (strings as typed) and read the flip rate.

    Raises:
        ValueError: naming the first bad option and its value as typed, or why the calibration
            cannot be used (no flip rates, an unknown ``--suite``, several suites).
    """
    n = whole("--n", args.n, MIN_N)
    tests = whole("--tests", args.tests, 1)
    drop = number("--drop", args.drop, "above 0 and at most 1", lambda v: 0 < v <= 1)
    alpha = number("--alpha", args.alpha, "between 0 and 1", lambda v: 0 < v < 1)
    power = number("--power", args.power, "between 0 and 1", lambda v: 0 < v < 1)
    if alpha / tests < MIN_LEVEL or power > 1 - MIN_LEVEL:
        raise ValueError(f"--alpha {args.alpha} / --tests {args.tests} and --power {args.power} "
                         f"need a level per test and a miss rate of at least {MIN_LEVEL:g} "
                         "(normal quantiles past it are not finite in floating point)")
    if args.calibration is not None and args.flip_rate is not None:
        raise ValueError("give --flip-rate or --calibration, not both")
    if args.calibration is not None:
        examples = None if args.examples is None else whole("--examples", args.examples, 1)
        flips, source = measured_flip_rate(args.calibration, args.suite, examples, n)
    elif args.suite is not None or args.examples is not None:
        raise ValueError(f"{'--suite' if args.suite is not None else '--examples'} needs "
                         "--calibration (with --flip-rate there is no suite to measure)")
    elif args.flip_rate is not None:
        flips = number("--flip-rate", args.flip_rate, "from 0 to 0.5", lambda v: 0 <= v <= 0.5)
        source = "--flip-rate"
    else:
        raise ValueError("give --flip-rate or --calibration (the file of "
                         "`llmgate calibrate --format json`)")
    return PowerQuestion(n, tests, drop, alpha, power, flips, source)


def whole(option: str, text: str, low: int) -> int:
    """Return ``text`` as a whole number of at least ``low``.

    Raises:
        ValueError: ``"<option> must be a whole number >= <low>, got '<text>'"``.
    """
    if not (text.isascii() and text.isdigit()) or int(text) < low:
        raise ValueError(f"{option} must be a whole number >= {low}, got {text!r}")
    return int(text)


def number(option: str, text: str, bounds: str, ok: Callable[[float], bool]) -> float:
    """Return ``text`` as a finite number that ``ok`` accepts (``bounds`` says which, in words).

    Raises:
        ValueError: ``"<option> must be a number <bounds>, got '<text>'"``.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and ok(value)):
        raise ValueError(f"{option} must be a number {bounds}, got {text!r}")
    return value

