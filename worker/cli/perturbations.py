"""``llmgate perturbations list``: the perturbations a consistency suite may name.

Lists the built-in ones (``option_reorder``, ``format_change``, ``separator_change``) and those
installed packages register in the entry-point group ``llmgate.perturbations``, one a line:
name, where it comes from, and the first line of its docstring (worker/evals/config/
perturbations.py). Exit codes: 0 listed, 2 no subcommand.
"""

from __future__ import annotations

import argparse

EXIT_OK, EXIT_USAGE = 0, 2


def add_perturbations_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``llmgate perturbations`` on the CLI's subcommands."""
    parser = sub.add_parser("perturbations", help="the perturbations of consistency suites",
                            description=__doc__.split("\n\n")[0] if __doc__ else None)
    actions = parser.add_subparsers(metavar="ACTION")
    listing = actions.add_parser("list", help="list built-in and installed perturbations")
    listing.set_defaults(func=cmd_list)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE


def cmd_list(args: argparse.Namespace) -> int:
    """Print every perturbation: ``name  origin  description``; return 0."""
    from worker.evals.config import perturbations  # the engine: not for `llmgate --help`

    rows = [(name, "built-in") for name in perturbations.BUILTIN]
    rows += [(name, f"entry point {point.value}")
             for name, point in sorted(perturbations.installed().items())
             if name not in perturbations.BUILTIN]
    width = max(len(name) for name, _ in rows)
    for name, origin in rows:
        print(f"{name:<{width}}  {origin}  {perturbations.describe(name)}")
    return EXIT_OK
