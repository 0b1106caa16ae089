"""The parser options and early checks of ``llmgate run --promote/--compare-to`` (light: the
command line's ``--help`` imports this, never the engine; worker/cli/named.py does the work)."""

from __future__ import annotations

import argparse
import os


def add_named_arguments(run: argparse.ArgumentParser) -> None:
    """Add ``--compare-to`` and ``--promote`` to the ``run`` command's parser."""
    run.add_argument("--compare-to", metavar="NAME", default=None,
                     help="compare with the commit promoted as NAME (e.g. release) instead of "
                          "--base; needs REDIS_URL (the baseline store)")
    run.add_argument("--promote", metavar="NAME", default=None,
                     help="run the head commit (on the default branch) and store its suites "
                          "as the baseline NAME; needs REDIS_URL (the baseline store)")


def named_refusal(args: argparse.Namespace) -> str | None:
    """Return why the named-baseline options cannot run (one line), or None."""
    compare_to, name = getattr(args, "compare_to", None), getattr(args, "promote", None)
    if compare_to is None and name is None:
        return None
    if compare_to is not None and args.base:
        return "--compare-to and --base both name the base: give one"
    if name is not None and (args.base or compare_to is not None):
        return "--promote stores the head commit and gates nothing: drop --base/--compare-to"
    from worker.baselines import check_name  # the store's modules: not for --help

    try:
        check_name(str(compare_to if compare_to is not None else name))
    except ValueError as err:
        return str(err)
    if not os.environ.get("REDIS_URL"):
        return ("named baselines live in the baseline store: set REDIS_URL to the App's Redis "
                "(or a local one)")
    return None
